"""The same bytes on every x86-64 machine: pin what picks CPU numerics by instruction set.

A CPU run's floating-point results depend on which kernels compute them, and the libraries
choose kernels by the machine they run on: ATen's vectorised kernels (softmax, reductions,
element-wise ops) take AVX-512 where the CPU has it, MKL's matrix products pick a code path
per CPU, oneDNN (convolutions) JIT-compiles for the widest ISA it finds, numpy's loops and
OpenBLAS dispatch likewise, and the fused loss kernels are compiled for torch's CPU
capability (:mod:`focalcal.losses._fused`). Each sums in another order on an AVX-512 machine
than on an AVX2 one, so the same commit and config trained different weights and, near a
bound, read different verdicts. The thread count splits reductions too.

:func:`pinned_environment` caps ATen, oneDNN, numpy and OpenBLAS at AVX2 (which every x86-64
machine of the last decade has), runs MKL's vendor-neutral ``COMPATIBLE`` branch and fixes the
thread count. MKL's ``AVX2`` branch is not the same code on Intel and AMD processors: under
``MKL_CBWR=AVX2,STRICT`` the golden runs' logits differed between an AMD EPYC and an Intel
Xeon, under ``COMPATIBLE,STRICT`` they are the same bytes on both (``bench/RESULTS.md``,
"Pinned CPU numerics"; ``python -m bench.numerics_hashes`` measures a machine). The libraries read these variables once, when
they load or first dispatch, so they must be in the environment before torch or numpy is
imported in the process that computes: the workflow sets them before its first torch
import, so every job inherits them (:func:`pin_workflow`), and a job's entry checks them
with :func:`pin` before it imports torch. ``run.json`` records what was in force
(:func:`record`).

``training.numerics`` in the config: ``pinned`` (the default) or ``native`` (each library's
own choice for the machine: not reproducible across CPU types). GPU runs are not covered: CUDA
kernels differ between GPU types.
"""

from __future__ import annotations

import os
import sys

PINNED = "pinned"
NATIVE = "native"
MODES = (PINNED, NATIVE)
ISA = "AVX2"

# variable -> value, each with the library it pins (the thread counts are added per job)
_PINS = {
    "ATEN_CPU_CAPABILITY": "avx2",  # ATen's vectorised kernels; also the fused kernels' build target
    "MKL_CBWR": "COMPATIBLE,STRICT",  # MKL's vendor-neutral code path, strict (its AVX2 path differs by vendor)
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN's JIT kernels (convolutions, linear layers)
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's and scipy's OpenBLAS: its AVX2 kernels
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's AVX-512 loops
}
_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
VARIABLES = (*_PINS, *_THREADS)


def pinned_environment(threads: int = 1) -> dict[str, str]:
    """The variables that pin CPU numerics to vendor-neutral kernels and ``threads`` threads."""
    if int(threads) < 1:
        raise ValueError(f"threads must be at least 1, got {threads!r}")
    return {**_PINS, **dict.fromkeys(_THREADS, str(int(threads)))}


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"training.numerics must be one of {MODES}, got {mode!r}")
    return mode


def pin(mode: str = PINNED, threads: int = 1, environ=None, before=("torch", "numpy"),
        reexec: bool = False) -> dict[str, str]:
    """Put the pinned variables into this process's environment (``mode`` pinned), before
    torch is imported; returns what was set. When a module of ``before`` is already loaded
    with other values they would not take effect: with ``reexec`` the process starts itself
    again with them (a command line), else it refuses, and the run is never silently unpinned."""
    environ = os.environ if environ is None else environ
    if check_mode(mode) == NATIVE:
        return {}
    wanted = pinned_environment(threads)
    loaded = [name for name in before if name in sys.modules]
    differing = {key: environ.get(key) for key, value in wanted.items() if environ.get(key) != value}
    if loaded and differing and environ is os.environ:
        if reexec:
            environ.update(wanted)
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], dict(environ))
        raise RuntimeError(
            f"training.numerics is 'pinned' but {' and '.join(loaded)} were imported before the numerics were "
            f"pinned ({', '.join(f'{k}={v!r}' for k, v in differing.items())}); call focalcal.core.pinned_numerics.pin() at "
            "the process's entry, before importing torch, or start it with these variables set: "
            + " ".join(f"{k}={v!r}" for k, v in wanted.items()))
    environ.update(wanted)
    return wanted


def pin_workflow(config: dict, environ=None) -> dict[str, str]:
    """Pin the workflow's process (before its first torch import: the fused kernels are built
    there, for torch's capability) so every job inherits it; the threads are the default
    training threads (a training job's entry sets its own). Snakemake's own numpy computes
    nothing of the run, so only torch must come after."""
    training = config.get("training") or {}
    return pin(training.get("numerics", PINNED), int(training.get("threads", 1)), environ, before=("torch",))


def record() -> dict:
    """What decided this process's CPU numerics, for ``run.json``: the mode, the variables,
    torch's CPU capability and threads, and the fused kernels' build."""
    import torch

    pinned = all(os.environ.get(key) == value for key, value in _PINS.items())
    try:
        from focalcal.losses import _fused

        kernels = _fused.build_name() if _fused.enabled() and _fused.kernels() is not None else "eager (no build)"
    except Exception as error:  # noqa: BLE001  the record must never fail a finished run
        kernels = f"unknown ({error})"
    return {
        "mode": PINNED if pinned else NATIVE,
        "environment": {key: os.environ.get(key) for key in VARIABLES},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "fused_kernels": kernels,
        "machine": _cpu_name(),
        "vendor": _cpuinfo("vendor_id") or "unknown",
        "machine_isa": _machine_isa(),
    }


def _machine_isa() -> str:
    """The widest x86 vector extension this machine has (what unpinned kernels would use)."""
    flags = _cpuinfo("flags")
    if flags is None:
        return "unknown"
    return "AVX512" if "avx512f" in flags.split() else "AVX2" if "avx2" in flags.split() else "below AVX2"


def _cpu_name() -> str:
    import platform

    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` line of /proc/cpuinfo; None where there is none (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
