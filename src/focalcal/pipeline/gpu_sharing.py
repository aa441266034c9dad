"""Several training runs on one GPU at once, through CUDA MPS (the Multi-Process Service).

Without MPS, processes on one GPU take turns: each holds the whole GPU for a time slice, so
small-batch runs that leave most of its cores idle cannot overlap. Under MPS one server runs
the kernels of every client process side by side. The control daemon is started with
``nvidia-cuda-mps-control -d`` and told ``quit`` on its standard input to end; clients find it
through ``CUDA_MPS_PIPE_DIRECTORY`` and it logs to ``CUDA_MPS_LOG_DIRECTORY``. NVIDIA's
defaults for those (``/tmp/nvidia-mps``, ``/var/log/nvidia-mps``) are shared by every user and
the log one needs root, so here they default to the user's own folders under the system's
temporary folder (a Unix socket's path is limited to 107 bytes: the pipe folder stays short).

Starting it needs the rights: a GPU in compute mode Default or Exclusive-process, and no other
user's MPS daemon on it. Where it cannot start, one line says why and the runs share the GPU
by time slices. Only a daemon started here is stopped here.

The workflow starts it with ``training: {cuda_mps: true}`` in its config (the Snakefile's
``onstart`` calls :func:`start_for_workflow`, ``onsuccess``/``onerror`` :func:`stop_for_workflow`);
``python -m bench gpu`` measures packed runs with and without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CONTROL = "nvidia-cuda-mps-control"
PIPE_VARIABLE, LOG_VARIABLE = "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"
TIMEOUT_S = 30


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def mps_directories(environ=None) -> dict[str, str]:
    """The pipe and log folders: the user's ``CUDA_MPS_PIPE_DIRECTORY`` / ``CUDA_MPS_LOG_DIRECTORY``
    where set, else ``<tmp>/focalcal-mps-<uid>/pipe`` and ``.../log``."""
    environ = os.environ if environ is None else environ
    base = Path(tempfile.gettempdir()) / f"focalcal-mps-{os.getuid()}"
    return {PIPE_VARIABLE: environ.get(PIPE_VARIABLE) or str(base / "pipe"),
            LOG_VARIABLE: environ.get(LOG_VARIABLE) or str(base / "log")}


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


@dataclass
class MpsDaemon:
    """An MPS control daemon this process started; :meth:`stop` ends it."""

    control: str  # the executable that started it
    directories: dict[str, str]
    _previous: dict[str, str | None] = field(default_factory=dict)
    stopped: bool = False

    def stop(self, log: Callable[[str], None] = _stderr) -> bool:
        """Tell the daemon to quit (its server ends with it); True when it acknowledged."""
        if self.stopped:
            return True
        self.stopped = True
        for name, value in self._previous.items():  # children started after this do not look for it
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            done = subprocess.run([self.control], check=False, input="quit\n", env={**os.environ, **self.directories},
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            log(f"CUDA MPS: `{CONTROL}` could not be told to quit ({error}); end it with "
                f"`echo quit | {PIPE_VARIABLE}={self.directories[PIPE_VARIABLE]} {CONTROL}`")
            return False
        if done.returncode != 0:
            log(f"CUDA MPS: `echo quit | {CONTROL}` exited {done.returncode}: "
                f"{_first_line(done.stderr or done.stdout)}")
            return False
        log("CUDA MPS stopped")
        return True


def start_mps(log: Callable[[str], None] = _stderr, environ=None) -> MpsDaemon | None:
    """Start the MPS control daemon for this user and point this process's children at it
    (their environment gets the pipe and log folders). None, after one line saying why, where
    ``nvidia-cuda-mps-control`` is absent or refuses."""
    control = shutil.which(CONTROL)
    if control is None:
        log(f"CUDA MPS not started: {CONTROL} is not on PATH (it comes with the NVIDIA driver); the runs share "
            f"the GPU by time slices")
        return None
    directories = mps_directories(environ)
    try:
        for folder in directories.values():
            Path(folder).mkdir(parents=True, exist_ok=True, mode=0o700)
        done = subprocess.run([control, "-d"], check=False, env={**os.environ, **directories}, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as error:
        log(f"CUDA MPS not started: `{CONTROL} -d` could not run ({error}); the runs share the GPU by time slices")
        return None
    if done.returncode != 0:
        reason = _first_line(done.stderr or done.stdout) or "no message"
        log(f"CUDA MPS not started: `{CONTROL} -d` exited {done.returncode} ({reason}); it needs the rights to "
            f"the GPU and no other MPS daemon on it; the runs share the GPU by time slices")
        return None
    previous = {name: os.environ.get(name) for name in directories}
    os.environ.update(directories)
    log(f"CUDA MPS started: pipe {directories[PIPE_VARIABLE]}, log {directories[LOG_VARIABLE]}")
    return MpsDaemon(control, directories, previous)


_started: MpsDaemon | None = None  # the workflow's daemon, between its onstart and its end


def start_for_workflow(enabled: bool, local: bool = True, log: Callable[[str], None] = _stderr) -> MpsDaemon | None:
    """The Snakefile's ``onstart``: start MPS once when the config's ``training.cuda_mps`` is on
    and the jobs run on this machine (a cluster's jobs run on other machines, where the job
    script has to start it)."""
    global _started
    if not enabled or _started is not None:
        return _started
    if not local:
        log("CUDA MPS not started: the jobs run on other machines (a cluster executor); start it in each "
            f"job's allocation (`{CONTROL} -d`)")
        return None
    _started = start_mps(log=log)
    return _started


def stop_for_workflow(log: Callable[[str], None] = _stderr) -> None:
    """The Snakefile's ``onsuccess``/``onerror``: stop the daemon :func:`start_for_workflow` started, if any."""
    global _started
    if _started is not None:
        _started.stop(log)
        _started = None
