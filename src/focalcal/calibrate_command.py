"""Calibrate any model's logits: fit calibrators on its val split, measure them on its test
split with bootstrap intervals, draw reliability diagrams, write one self-contained page.

``focalcal calibrate LOGITS`` (:mod:`focalcal.cli`) runs :func:`compare_calibrators` on a
logits file (:mod:`focalcal.logits_file`). Everything after the logits is what the workflow
does for trained runs: calibrators are fitted as the calibrate job fits them
(:func:`focalcal.pipeline.calibrate.fit_calibrator`) and stored in its JSON format.
Written into ``out_dir``:

* ``calibration.json`` — per calibrator its spec and fitted parameters (``Calibrator.to_dict``);
* ``metrics.csv`` — tidy rows ``calibrator, metric, bins, value, ci_low, ci_high``: the test
  metrics with 95 % percentile bootstrap intervals over test samples (paired: every
  calibrator is measured on the same resamples), and smECE (no interval: relplot's estimate
  is too slow to resample, ``python -m bench calibrate_command``);
* ``reliability/<calibrator>.svg`` — binned and smooth reliability diagrams
  (:func:`focalcal.plots.reliability_svg`: SVG text, no matplotlib);
* ``index.html`` — the table and the diagrams in one file (diagrams inlined).

Two processes share the calibrators (:class:`_SharedWork`): each takes the next one not yet
taken, the costliest first (:func:`work_units`), fits, measures and draws it, so the command
uses two cores whatever the machine's speed at each fit. A progress line comes as each
calibrator finishes; the files keep the order the calibrators were asked for.
"""

from __future__ import annotations

import contextlib
import html
import numbers
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from focalcal import catalog, paths
from focalcal.core.constraints import GAMMA, POSITIVE_INT, Interval, validate_parameters
from focalcal.files.artefacts import atomic_write_json, atomic_write_text
from focalcal.files.output_folder import OutputFolder
from focalcal.logits_file import LogitsSet

# The command's calibrators: the catalog's roles it offers (``Role.cli``), under their keys, with
# their specs (the papers' ones are the default workflow config's, so a table of either reads
# the same), labels and costs. Ψ^γ's γ is the model's training focal γ (--gamma), where the
# workflow takes the run's. Those whose calibrator holds K² numbers (vector scaling's (2K)²
# Newton system, Dirichlet's K × K matrix) run by default only up to MAX_CLASSES_QUADRATIC
# classes: the Newton system grows as K², and 10,000 classes make it 2K × 2K float64s (3.2 GB);
# ``python -m bench compare`` times vector scaling at 100 × 10,000.
PSI_KEY = "psi"
_OFFERED = {key: role for key, role in catalog.ROLES.items() if role.cli}
CALIBRATORS: dict[str, dict] = {key: {name: value for name, value in role.spec.items() if value != catalog.FROM_LOSS}
                                for key, role in _OFFERED.items()}
# Focal TS's (γ, T) grid is searched coarse to fine here (about a third of its pairs; the
# tolerance against the whole grid: calibration._focal_grid.SEARCHES); the workflow's specs score
# the papers' whole grid.
FOCAL_TS_SEARCH = "refine"
for _spec in CALIBRATORS.values():
    if _spec["name"] == "focal_temperature_scaling":
        _spec["search"] = FOCAL_TS_SEARCH
PAPER_CALIBRATORS = tuple(key for key, role in _OFFERED.items() if role.in_papers)
DEFAULT_CALIBRATORS = tuple(key for key, role in _OFFERED.items() if role.cli == "default")
COSTS = {key: role.cost for key, role in _OFFERED.items()}
LABELS = {key: role.label for key, role in _OFFERED.items()}
QUADRATIC_IN_K = tuple(key for key, spec in CALIBRATORS.items() if catalog.CALIBRATORS[spec["name"]].quadratic_in_k)
# What the command writes in its output folder: the fitted calibrators and the metrics under the
# names a workflow run's calibration gives them, the page, and one reliability diagram per calibrator.
PAGE, DIAGRAMS = "index.html", "reliability"
OUTPUT_FILES = (paths.CALIBRATION_PARAMS, paths.METRICS, PAGE, DIAGRAMS)
MAX_CLASSES_QUADRATIC = 200
# The costliest units on 100 × 5,000 validation logits, taken first (longest first keeps the two
# processes' ends close): focal TS's (γ, T) grid, vector scaling's Newton steps, the two fits that
# search with scipy.optimize, TS by ECE's 100 softmaxes. Focal TS by ECE and by NLL go together, so
# that the second reuses the grid the first scored; TS by NLL (Brent's method) and isotonic
# regression (pool-adjacent-violators) go together, so that one process alone imports
# scipy.optimize (and tears it down at exit). The others follow in the order asked for
# (``python -m bench calibrate_command`` times each unit; bench/README.md).
COSTLIEST_FIRST = (("fts_ece", "fts_nll"), ("vector_scaling",), ("ts_nll", "isotonic"), ("ts_ece",))
# The calibrators whose fit scores the grid of ``calibration._focal_grid``, so its compiled kernel
# when built: named here, so that checking for them imports nothing (tests/test_calibrate_out_folder.py
# holds them to the calibrators whose module imports the grid).
FUSED_KERNEL_FITS = ("focal_temperature_scaling",)
METRIC_LABELS = {"ece": "ECE", "adaece": "AdaECE", "mce": "MCE", "classwise_ece": "classwise ECE",
                 "smooth_ece": "smECE", "nll": "NLL", "brier": "Brier", "error": "error", "top5_error": "top-5 error"}
PERCENT_METRICS = {"ece", "adaece", "mce", "classwise_ece", "smooth_ece", "error", "top5_error"}
METRICS_HEADER = ("calibrator", "metric", "bins", "value", "ci_low", "ci_high")


def resolve_calibrators(names=None, gamma: float | None = None) -> dict[str, dict]:
    """key -> workflow spec (``{"build": {...}}``) of the named calibrators (default: the
    :data:`DEFAULT_CALIBRATORS`, Ψ^γ only when ``gamma`` is given)."""
    chosen = list(DEFAULT_CALIBRATORS if names is None else names)
    unknown = [name for name in chosen if name not in CALIBRATORS]
    if unknown:
        raise ValueError(f"unknown calibrator(s) {unknown}; available: {', '.join(CALIBRATORS)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"calibrators named twice: {sorted({n for n in chosen if chosen.count(n) > 1})}")
    validate_parameters({"gamma": [GAMMA, None]}, {"gamma": gamma}, "focalcal calibrate")
    specs = {}
    for name in chosen:
        build = dict(CALIBRATORS[name])
        if name == PSI_KEY:
            if gamma is None:
                if names is None:
                    continue  # the default list: Ψ^γ needs the training γ
                raise ValueError("calibrator psi needs the model's training focal γ: pass --gamma")
            build["gamma"] = float(gamma)
        specs[name] = {"build": build}
    return specs


# The numeric options: bins and resamples are counts (a bootstrap interval needs two
# resamples), the seed is numpy's (a non-negative integer).
NUMERIC_OPTIONS = {"bins": [POSITIVE_INT], "resamples": [Interval(numbers.Integral, 2, None, closed="left")],
                   "seed": [Interval(numbers.Integral, 0, None, closed="left")]}


def check_numeric_options(n_bins, n_resamples, seed, *, prefix: str = "") -> None:
    """One ``ValueError`` line naming the first of bins, resamples and seed (``prefix`` before each
    name: the command line's ``--``) outside :data:`NUMERIC_OPTIONS`, before any work."""
    constraints = {prefix + key: value for key, value in NUMERIC_OPTIONS.items()}
    values = dict(zip(constraints, (n_bins, n_resamples, seed), strict=True))
    validate_parameters(constraints, values, "focalcal calibrate")


def compare_calibrators(logits: LogitsSet, out_dir, names=None, gamma: float | None = None, *, n_bins: int = 15,
                        n_resamples: int = 200, seed: int = 0, smooth: bool = True,
                        progress: Callable[[str], None] = print) -> list[dict]:
    """Fit, measure and draw every calibrator; write the files of the module docstring. Returns the metric rows."""
    check_numeric_options(n_bins, n_resamples, seed)
    specs = resolve_calibrators(names, gamma)
    if names is None:  # named calibrators run whatever K; the default list stays within bounds
        for key in [key for key in QUADRATIC_IN_K if key in specs and logits.num_classes > MAX_CLASSES_QUADRATIC]:
            del specs[key]
            progress(f"skipping {key}: its cost grows as K² ({COSTS[key]}) and {logits.source} has "
                     f"{logits.num_classes:,} classes, more than {MAX_CLASSES_QUADRATIC}; name it in --calibrators "
                     "to fit it anyway")
    # The second process starts before anything else here, so that its start-up overlaps this
    # process's; it is stopped if a check below fails.
    with contextlib.ExitStack() as stack:
        measuring = _Measuring(logits.test_logits, logits.test_labels, n_bins, n_resamples, seed, smooth)
        work = stack.enter_context(_SharedWork(work_units(specs), specs, logits.val_logits, logits.val_labels,
                                               measuring))
        rows, folder = _checked_compare(logits, out_dir, specs, work, stack, measuring, progress)
    progress(f"wrote {folder.path / PAGE}, {paths.METRICS}, {paths.CALIBRATION_PARAMS} and {len(specs)} diagrams")
    return rows


def _checked_compare(logits: LogitsSet, out_dir, specs: dict, work: _SharedWork, stack: contextlib.ExitStack,
                     measuring: _Measuring, progress: Callable[[str], None]):
    from threadpoolctl import threadpool_limits

    from focalcal.calibration import calibrator_class

    binary_only = [key for key, spec in specs.items() if calibrator_class(spec["build"]["name"]).binary_only]
    if binary_only and logits.num_classes != 2:
        raise ValueError(f"calibrator {binary_only[0]} is for binary classifiers; {logits.source} has "
                         f"{logits.num_classes} classes")
    for key in specs:
        parameters = parameter_count(key, logits.num_classes)
        if parameters > len(logits.val_labels):
            progress(f"warning: {key} has {parameters:,} parameters but {logits.source} has only "
                     f"{len(logits.val_labels):,} validation samples to fit them on; its fit is not determined "
                     "by the data")
    # One BLAS thread: this process's matrices are small, and OpenBLAS threads that spin-wait
    # beside the second process's grid cost more CPU than they save (``python -m bench compare``).
    folder = out_dir if isinstance(out_dir, OutputFolder) else stack.enter_context(output_folder(out_dir))
    stack.enter_context(threadpool_limits(limits=1, user_api="blas"))
    try:
        rows = _compare(logits, folder.staging, specs, work, measuring, progress)
    except OSError as error:  # a full disk: named as the report's file, not the staging folder's
        staged = Path(error.filename or "")
        if not staged.is_relative_to(folder.staging):
            raise
        raise OSError(error.errno, error.strerror, str(folder.path / staged.relative_to(folder.staging))) from error
    folder.commit()
    return rows, folder


def output_folder(out_dir) -> OutputFolder:
    """The command's output folder, checked, locked and written through a temporary sibling
    (:class:`focalcal.files.output_folder.OutputFolder`); enter it before reading the logits."""
    return OutputFolder(out_dir, own=OUTPUT_FILES)


def parameter_count(key: str, num_classes: int) -> int:
    """How many numbers calibrator ``key`` fits on K classes (isotonic: one step function per
    class, at least 2 numbers each)."""
    return catalog.ROLES[key].parameters(num_classes, catalog.ROLES[key].spec)


def work_units(specs: dict) -> list[tuple[str, ...]]:
    """The calibrators of ``specs`` as units of work in the order they are taken: the
    :data:`COSTLIEST_FIRST` ones asked for, then the rest in the order asked for."""
    units = [tuple(key for key in unit if key in specs) for unit in COSTLIEST_FIRST]
    units = [unit for unit in units if unit]
    taken = {key for unit in units for key in unit}
    return units + [(key,) for key in specs if key not in taken]


def _compare(logits: LogitsSet, out_dir: Path, specs: dict, work: _SharedWork, measuring: _Measuring,
             progress: Callable[[str], None]) -> list[dict]:
    from focalcal.pipeline.calibrate import rows_to_csv

    fitted_params, rows_of, diagrams = {}, {}, {}

    def finished(key: str, calibrator, fit_s: float, measured: Measured) -> None:
        fitted_params[key] = {"spec": specs[key], "fitted": calibrator.to_dict()}
        rows_of[key], diagrams[key] = measured.rows, measured.svg
        atomic_write_text(measured.svg, out_dir / DIAGRAMS / f"{key}.svg")
        progress(f"[{len(rows_of)}/{len(specs)}] {key}: fitted in {fit_s:.2f} s, measured in {measured.seconds:.2f} s; "
                 f"test ECE {100 * measured.ece:.2f} %")

    while (unit := work.take()) is not None:
        for key in unit:
            finished(key, *_fit_and_measure(key, specs[key], logits.val_logits, logits.val_labels, measuring,
                                            progress))
        for key, outcome in work.arrived():
            finished(key, *outcome)
    for key in [key for key in specs if key not in rows_of]:  # taken by the second process
        finished(key, *work.result(key))
    rows = [row for key in specs for row in rows_of[key]]  # the order asked for, whatever finished first
    diagrams = {key: diagrams[key] for key in specs}
    atomic_write_json(fitted_params, out_dir / paths.CALIBRATION_PARAMS)
    atomic_write_text(rows_to_csv(rows, METRICS_HEADER), out_dir / paths.METRICS)
    atomic_write_text(render_page(logits, rows, diagrams, measuring.n_resamples), out_dir / PAGE)
    return rows


class Measured(NamedTuple):
    """One calibrator's test rows of metrics.csv, its diagram (SVG text), its test ECE and the seconds it took."""

    rows: list[dict]
    svg: str
    ece: float
    seconds: float


class _Measuring:
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


class _SharedWork:
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

    def __init__(self, units: list[tuple[str, ...]], specs: dict, val_logits, val_labels, measuring: _Measuring):
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
    (``python -m bench calibrate_command``; bench/README.md). torch's thread pools do not survive
    a fork, so a process that has loaded torch (a notebook calling :func:`compare_calibrators`) spawns."""
    import multiprocessing
    import sys

    return "fork" if "fork" in multiprocessing.get_all_start_methods() and "torch" not in sys.modules else "spawn"


def _load_for_fork(measuring: _Measuring) -> None:
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


def _work_in_turn(units: list, specs: dict, val_logits, val_labels, measuring: _Measuring, counter, threads: int,
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
                    outcome = _fit_and_measure(key, specs[key], val_logits, val_labels, measuring,
                                               lambda line: print(line, flush=True), threads)
                except Exception as error:  # noqa: BLE001 — raised again in the process that asked
                    outcome = error
                connection.send((key, outcome))


def _fit_and_measure(key: str, spec: dict, val_logits, val_labels, measuring: _Measuring,
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


def _cell(row: dict) -> str:
    scale = 100 if row["metric"] in PERCENT_METRICS else 1
    value = f"{scale * row['value']:.2f}"
    if row["ci_low"] == "":
        return value
    return f"{value}<br><small>[{scale * row['ci_low']:.2f}, {scale * row['ci_high']:.2f}]</small>"


def render_page(logits: LogitsSet, rows: list[dict], diagrams: dict[str, str], n_resamples: int) -> str:
    """One self-contained HTML page: the metrics table with intervals and the diagrams (SVG text) inlined."""
    metrics = [m for m in METRIC_LABELS if any(row["metric"] == m for row in rows)]
    by_key = {(row["calibrator"], row["metric"]): row for row in rows}
    header = "".join(f"<th>{html.escape(METRIC_LABELS[m])}{' (%)' if m in PERCENT_METRICS else ''}</th>"
                     for m in metrics)
    body = "".join(
        f"<tr><th>{html.escape(LABELS[key])}</th>"
        + "".join(f"<td>{_cell(by_key[key, m]) if (key, m) in by_key else ''}</td>" for m in metrics) + "</tr>"
        for key in diagrams)
    images = "".join(f"<figure>{svg}</figure>" for svg in diagrams.values())
    source = html.escape(logits.source)
    sizes = f"{len(logits.val_labels):,} validation and {len(logits.test_labels):,} test samples, {logits.num_classes} classes"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Calibration of {source}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; vertical-align: top; }}
thead th {{ background: #f2f2f2; }} tbody th {{ text-align: left; }}
small {{ color: #666; }}
.diagrams {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ margin: 0; }} figure svg {{ width: 22em; height: auto; }}
</style></head><body>
<h1>Calibration of <code>{source}</code></h1>
<p>{sizes}. Calibrators are fitted on the validation split and measured on the test split.
Each cell: the value on the whole test set and its 95 % percentile bootstrap interval over
{n_resamples} resamples of the test samples (the same resamples for every calibrator).
Binned metrics use {next((r['bins'] for r in rows if r['bins'] != ''), 15)} bins (AdaECE: equal-mass; the rest equal-width);
smECE is the smooth calibration error of Błasiok &amp; Nakkiran (2023), computed by <code>relplot</code>.</p>
<table><thead><tr><th>calibrator</th>{header}</tr></thead><tbody>{body}</tbody></table>
<h2>Reliability diagrams (test split)</h2>
<div class="diagrams">{images}</div>
<p><small>Fitted parameters: <code>{paths.CALIBRATION_PARAMS}</code>; every number: <code>{paths.METRICS}</code>.</small></p>
</body></html>
"""

