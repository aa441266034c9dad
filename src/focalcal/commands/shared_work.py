"""Two processes share ``focalcal calibrate``'s calibrators: each takes the next unit not yet taken.

:class:`SharedWork` starts the second process and hands out the units of work
(:func:`work_units`, the costliest first); either process fits a calibrator
(:func:`fit_and_measure`), measures it on the test split and draws its diagram
(:class:`Measuring`), so a calibrator's outcome is the same wherever it was fitted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from focalcal.commands.calibrator_choice import LABELS

# The costliest units on 100 × 5,000 validation logits, taken first (longest first keeps the two
# processes' ends close): focal TS's (γ, T) grid, vector scaling's Newton steps, the two fits that
# search with scipy.optimize, TS by ECE's 100 softmaxes. Focal TS by ECE and by NLL go together, so
# that the second reuses the grid the first scored; TS by NLL (Brent's method) and isotonic
# regression (pool-adjacent-violators) go together, so that one process alone imports
# scipy.optimize (and tears it down at exit). The others follow in the order asked for
# (``python -m bench calibrate_command`` times each unit; bench/RESULTS.md).
COSTLIEST_FIRST = (("fts_ece", "fts_nll"), ("vector_scaling",), ("ts_nll", "isotonic"), ("ts_ece",))
# The calibrators whose fit scores the grid of ``calibration._focal_grid``, so its compiled kernel
# when built: named here, so that checking for them imports nothing (tests/test_calibrate_out_folder.py
# holds them to the calibrators whose module imports the grid).
FUSED_KERNEL_FITS = ("focal_temperature_scaling",)


def work_units(specs: dict) -> list[tuple[str, ...]]:
    """The calibrators of ``specs`` as units of work in the order they are taken: the
    :data:`COSTLIEST_FIRST` ones asked for, then the rest in the order asked for."""
    units = [tuple(key for key in unit if key in specs) for unit in COSTLIEST_FIRST]
    units = [unit for unit in units if unit]
    taken = {key for unit in units for key in unit}
    return units + [(key,) for key in specs if key not in taken]


class Measured(NamedTuple):
    """One calibrator's test rows of metrics.csv, its diagram (SVG text), its test ECE and the seconds it took."""

    rows: list[dict]
    svg: str
    ece: float
    seconds: float


class Measuring:
    """Measures fitted calibrators on the test split: the bootstrap intervals over one set of
    resamples (drawn from ``seed``, their multiplicities counted once), smECE and the diagram.
    Built the same in either process, so a calibrator measures the same wherever it was fitted."""

    def __init__(self, test_logits, test_labels, n_bins: int, n_resamples: int, seed: int, smooth: bool):
        self.test_logits, self.test_labels = test_logits, test_labels
        self.n_bins, self.n_resamples, self.seed, self.smooth = n_bins, n_resamples, seed, smooth
        self._resamples = None

    def __getstate__(self):  # sent to the second process without the resamples, which it draws again
        return {**self.__dict__, "_resamples": None}

    def resamples(self) -> tuple:
        """(indices, multiplicities) of the bootstrap resamples, drawn on first use."""
        if self._resamples is None:
            from focalcal.metrics.bootstrap import bootstrap_indices, resample_weights

            indices = bootstrap_indices(len(self.test_labels), self.n_resamples, self.seed)
            self._resamples = indices, resample_weights(indices, len(self.test_labels))
        return self._resamples

    def measure(self, key: str, calibrator) -> Measured:
        from focalcal import metrics
        from focalcal.metrics.bootstrap import metrics_with_intervals
        from focalcal.plots.svg import reliability_svg

        started = time.perf_counter()
        indices, weights = self.resamples()
        probs = calibrator.transform(self.test_logits)
        intervals = metrics_with_intervals(probs, self.test_labels, indices, self.n_bins, weights=weights)
        rows = [{"calibrator": key, "metric": metric,
                 "bins": self.n_bins if metric in ("ece", "adaece", "mce", "classwise_ece") else "",
                 "value": interval.estimate, "ci_low": interval.low, "ci_high": interval.high}
                for metric, interval in intervals.items()]
        curve = False
        if self.smooth:
            curve = metrics.smooth_reliability_curve(probs, self.test_labels)
            rows.append({"calibrator": key, "metric": "smooth_ece", "bins": "", "value": curve.smooth_ece,
                         "ci_low": "", "ci_high": ""})
        svg = reliability_svg(probs, self.test_labels, n_bins=self.n_bins, title=LABELS[key], smooth=curve)
        return Measured(rows, svg, intervals["ece"].estimate, time.perf_counter() - started)


class SharedWork:
    """The ``units`` of work (tuples of calibrator keys), shared by this process and a second one
    (started at once): each process takes the next unit not yet taken (:meth:`take`: a counter in
    shared memory), fits, measures and draws its calibrators, so the two end close together
    whatever each fit costs on this machine. The second process sends each calibrator's outcome
    as it is done; :meth:`arrived` returns those received so far, :meth:`result` waits for one.
    With one unit there is nothing to share and no second process.

    A thread of this process receives the outcomes as they are sent: a pipe holds 64 KiB, about
    five calibrators' diagrams, so without it the second process's sends would wait, idle, for
    this one to finish its fit (``python -m bench calibrate_command``).

    Focal TS's grid runs on one core fewer than the machine has (:func:`background_threads`) in
    either process: the other process keeps a core busy, and the grid's evenly split blocks
    would wait for a thread that shares it (on 2 cores a two-thread grid spends more CPU;
    ``python -m bench calibrate_command``).
    """

    def __init__(self, units: list[tuple[str, ...]], specs: dict, val_logits, val_labels, measuring: Measuring):
        import threading

        self.units, self._arguments = units, (specs, val_logits, val_labels, measuring)
        self._process, self._connection, self._next, self._taken = None, None, None, -1
        self._received: dict[str, object] = {}  # key -> outcome, in the order they came
        self._reported = 0  # how many of them arrived() has returned
        self._receiver, self._ended, self._changed = None, False, threading.Condition()
        self._failure: Exception | None = None  # why the receiving thread stopped early, if it did

    def __enter__(self):
        if len(self.units) > 1:
            import multiprocessing
            import threading

            # A bare process and a pipe, not a Pool: a Pool whose worker is killed waits for ever,
            # and can hang in terminate.
            method = start_method()
            if method == "fork":
                _load_for_fork(self._arguments[3])
            context = multiprocessing.get_context(method)
            self._next = context.Value("i", 0)
            self._connection, child_end = context.Pipe(duplex=False)
            self._process = context.Process(target=_work_in_turn, args=(self.units, *self._arguments, self._next,
                                                                        background_threads(), child_end), daemon=True)
            self._process.start()
            child_end.close()
            self._receiver = threading.Thread(target=self._receive, name="calibrate-receiver", daemon=True)
            self._receiver.start()
        return self

    def _receive(self) -> None:
        """The receiving thread: store each outcome as it comes, until the second process ends
        or an outcome cannot be rebuilt here (kept, and raised by :meth:`result`)."""
        failure = None
        while True:
            try:
                key, outcome = self._connection.recv()
            except (EOFError, OSError):
                break  # ended (its last outcome sent, or killed): result() names what it left undone
            except Exception as error:  # noqa: BLE001 — an outcome that does not unpickle here
                failure = error
                break
            with self._changed:
                self._received[key] = outcome
                self._changed.notify_all()
        with self._changed:
            self._ended, self._failure = True, failure
            self._changed.notify_all()

    def take(self) -> tuple[str, ...] | None:
        """The next unit not yet taken by either process, or None when all are."""
        if self._process is None:  # no second process: a plain count
            self._taken += 1
            return self.units[self._taken] if self._taken < len(self.units) else None
        return _take(self.units, self._next)

    def arrived(self) -> list[tuple[str, tuple]]:
        """(key, (calibrator, fit seconds, Measured)) of the second process's calibrators received
        since the last call, without waiting; a failed one raises its own exception."""
        with self._changed:
            received = list(self._received.items())[self._reported:]
            self._reported += len(received)
        for _, outcome in received:
            if isinstance(outcome, BaseException):
                raise outcome
        return received

    def result(self, key: str) -> tuple:
        """(fitted calibrator, fit seconds, :class:`Measured`) of ``key``, which the second process
        took; its fit's or measure's own exception if one failed; a RuntimeError naming it if the
        second process ends first (killed, out of memory)."""
        with self._changed:
            self._changed.wait_for(lambda: key in self._received or self._ended)
            if key not in self._received:
                if self._failure is not None:
                    raise RuntimeError(f"an outcome of the second process could not be received, so {key}'s is "
                                       f"lost: {self._failure!r}") from self._failure
                raise RuntimeError(f"the second process fitting {key} ended before it was done (killed, or out "
                                   "of memory?)")
            outcome = self._received[key]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def __exit__(self, exc_type, *exc_info):
        if self._process is not None:
            if exc_type is not None:  # interrupted or failed: do not wait for its fits
                self._process.terminate()
            self._process.join()
            self._receiver.join()  # the second process has ended: its end of the pipe is closed
            self._connection.close()
        return False


#: What every fit and measure loads (the fitting itself loads the rest, scipy.optimize included:
#: see COSTLIEST_FIRST): a forked second process inherits them loaded.
WORK_MODULES = ("focalcal.pipeline.calibrate", "focalcal.metrics.bootstrap", "focalcal.metrics.batched",
                "focalcal.plots.svg", "scipy.sparse", "scipy.special", "threadpoolctl")


def start_method() -> str:
    """How the second process starts: ``fork`` where the system has it and torch is not loaded
    here, else ``spawn``. A forked process starts with this one's modules, logits and bootstrap
    resamples (:func:`_load_for_fork`), where a spawned one is a fresh interpreter that imports
    them again and receives the logits through a pipe, which costs CPU a fork does not spend
    (``python -m bench calibrate_command``; bench/RESULTS.md). torch's thread pools do not survive
    a fork, so a process that has loaded torch (a notebook calling :func:`compare_calibrators`) spawns."""
    import multiprocessing
    import sys

    return "fork" if "fork" in multiprocessing.get_all_start_methods() and "torch" not in sys.modules else "spawn"


def _load_for_fork(measuring: Measuring) -> None:
    """Load, before the fork, what both processes use: :data:`WORK_MODULES`, relplot's smECE
    modules and the bootstrap resamples."""
    from importlib import import_module

    from focalcal.metrics.calibration import load_relplot

    for name in WORK_MODULES:
        import_module(name)
    if measuring.smooth:
        load_relplot()
    measuring.resamples()


def _take(units: list, counter) -> tuple[str, ...] | None:
    with counter.get_lock():
        index = counter.value
        counter.value = index + 1
    return units[index] if index < len(units) else None


def _eager_unless_built(specs: dict, announce: Callable[[str], None]) -> None:
    """Where focal temperature scaling's grid kernel is not built, the grid runs on the eager
    PyTorch path and one line says so: its build belongs to `focalcal build-kernels`, and would
    pass for a calibrator's fit time. Without torch (the core install with the plots extra) the
    kernel is the only path, so it is compiled here (before the fit's clock starts), and
    where it cannot be one line says what to install. Called by the process that fits the grid,
    just before, so that a process that does not fit it never imports torch."""
    import importlib.util
    import os

    if not any(spec["build"]["name"] in FUSED_KERNEL_FITS for spec in specs.values()):
        return
    from focalcal.calibration import _grid_kernel
    from focalcal.core import kernels

    if kernels.enabled() and not _grid_kernel.is_built() and importlib.util.find_spec("torch") is None:
        announce("focalcal calibrate: compiling focal temperature scaling's grid kernel once (torch, its other "
                 "path, is not installed)")
        try:
            _grid_kernel.build()
        except (OSError, RuntimeError) as error:  # no compiler, no libmvec, read-only cache
            raise RuntimeError(f"focal temperature scaling needs its grid kernel or torch: the build failed ({error}); "
                               "install a C compiler, or `pip install focalcal[torch]`") from error
        return
    if kernels.enabled() and not _grid_kernel.is_built():
        os.environ[kernels.ENV_SWITCH] = "0"
        announce("focalcal calibrate: the fused CPU kernels are not built, so focal temperature scaling runs on the "
                 "eager PyTorch path (slower); `focalcal build-kernels` builds them once")


def background_threads() -> int:
    """Threads for focal TS's grid while the other process works: the cores this process may run
    on, less the one the other keeps busy (at least one)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores - 1)


def _work_in_turn(units: list, specs: dict, val_logits, val_labels, measuring: Measuring, counter, threads: int,
                  connection) -> None:
    """The second process: take units until none is left; fit and measure each calibrator with one
    BLAS thread, as the first process does, and send (key, (calibrator, fit seconds, measured)),
    or (key, exception), as each is done."""
    from threadpoolctl import threadpool_limits

    from focalcal.calibration import _focal_grid

    _focal_grid.forget_kept_scores()  # a forked process starts with none, as a spawned one: no other problem's scores
    with connection, threadpool_limits(limits=1, user_api="blas"):
        while (unit := _take(units, counter)) is not None:
            for key in unit:
                try:
                    outcome = fit_and_measure(key, specs[key], val_logits, val_labels, measuring,
                                               lambda line: print(line, flush=True), threads)
                except Exception as error:  # noqa: BLE001 — raised again in the process that asked
                    outcome = error
                connection.send((key, outcome))


def fit_and_measure(key: str, spec: dict, val_logits, val_labels, measuring: Measuring,
                     announce: Callable[[str], None], threads: int | None = None) -> tuple:
    """(fitted calibrator, fit seconds, :class:`Measured`) in either process. Focal TS's grid runs
    on ``threads`` threads (default :func:`background_threads`); torch is imported only where the
    grid kernel is not built."""
    from focalcal.pipeline.calibrate import fit_calibrator

    if spec["build"]["name"] in FUSED_KERNEL_FITS:
        from focalcal.calibration import _grid_kernel

        threads = threads or background_threads()
        _grid_kernel.set_threads(threads)
        _eager_unless_built({key: spec}, announce)  # says so once: it switches the kernels off
        if _grid_kernel.library() is None:
            import torch

            torch.set_num_threads(threads)
    started = time.perf_counter()
    calibrator = fit_calibrator(spec, val_logits, val_labels, {})[0]
    fit_s = time.perf_counter() - started
    return calibrator, fit_s, measuring.measure(key, calibrator)
