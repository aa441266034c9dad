"""A workflow job's output, sent to the log file its rule declares.

Torch-free, so the training job can open its log before it pins the CPU numerics and imports
torch.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import resource
import sys
import threading
import time
import traceback

#: The line :func:`logged` ends a job's log with. Snakemake's ``benchmark:`` file samples a job's
#: CPU every 0.5 s for its first 15 s, then every 30 s, and keeps the last sample: a 44 s job
#: reads its CPU at 15 s. This line is the whole process's, read when the job ends, to the
#: microsecond ``getrusage`` counts in.
USAGE_LINE = "job CPU: {cpu:.6f} s (this process from its start, and its ended children)"
_USAGE_PATTERN = re.compile(r"^job CPU: ([0-9.]+) s ", re.MULTILINE)


class _Tee(io.TextIOBase):
    def __init__(self, *handles):
        self.handles = handles

    def write(self, text):
        for handle in self.handles:
            handle.write(text)
        return len(text)

    def flush(self):
        for handle in self.handles:
            handle.flush()


def attempt_log_path(log_path: str) -> str:
    """This attempt's own log: ``<log without .log>.attempts/<UTC time>-<host>-<pid>.log``."""
    folder = os.path.splitext(log_path)[0] + ".attempts"
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{platform.node()}-{os.getpid()}.log"
    return os.path.join(folder, name)


@contextlib.contextmanager
def logged(log_path, keep_attempt=False):
    """Redirect stdout/stderr to ``log_path``; a failure's traceback lands there too, and the
    job's CPU (:data:`USAGE_LINE`) ends it either way.

    With ``keep_attempt`` the output also goes to :func:`attempt_log_path`: Snakemake deletes
    a job's log before it runs the job again (a retry, or a second Snakemake on the same
    results/), so the declared log shows the last attempt and the folder keeps every one."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(log_path, "w"))]
        if keep_attempt:
            attempt = attempt_log_path(log_path)
            os.makedirs(os.path.dirname(attempt), exist_ok=True)
            handles.append(stack.enter_context(open(attempt, "w")))
        handle = _Tee(*handles) if keep_attempt else handles[0]
        stack.enter_context(contextlib.redirect_stdout(handle))
        stack.enter_context(contextlib.redirect_stderr(handle))
        try:
            yield
        except BaseException as error:
            from focalcal.files.artefacts import write_error_line

            line = write_error_line(error)  # a full disk, a read-only file system: one line, no traceback
            if line:
                print(line, file=handle)
            else:
                traceback.print_exc(file=handle)
            raise
        finally:
            print(USAGE_LINE.format(cpu=process_cpu_seconds()), file=handle, flush=True)


@contextlib.contextmanager
def job_process(log_path, keep_attempt=False):
    """:func:`logged` for a workflow job's script, whose process then ends at once when the job
    succeeds (:func:`end_process`); a failure ends it as Python does, with its traceback, except
    a full disk or a read-only file system, said in one line (:func:`focalcal.files.artefacts.write_error_line`)."""
    from focalcal.files.artefacts import write_error_line

    try:
        with logged(log_path, keep_attempt):
            yield
    except OSError as error:
        line = write_error_line(error)
        if line is None:
            raise
        raise SystemExit(line) from None
    end_process()


def end_process(status: int = 0) -> None:
    """End this process without Python's interpreter teardown, once its work is written.

    A finished job has nothing left to do, yet unloading what it imported (torch, its compiler
    stack, pandas) costs a torch job a sizeable share of a small training run's CPU (``python -m bench workflow``;
    bench/RESULTS.md, "Workflow"). So:
    wait for any non-daemon thread (as the interpreter's own shutdown would), flush the standard
    streams, and leave with ``os._exit``. Every output of a job is written atomically and closed
    before this, so no buffered write is lost."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def process_cpu_seconds() -> float:
    """User + system CPU of this process since it started (interpreter start-up and imports
    included) and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def job_cpu_seconds(log_path) -> float | None:
    """The CPU a job's log ends with (:data:`USAGE_LINE`), or None when it has none (a job
    still running, killed, or not run through :func:`logged`)."""
    try:
        with open(log_path, errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    found = _USAGE_PATTERN.findall(text)
    return float(found[-1]) if found else None
