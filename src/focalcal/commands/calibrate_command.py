"""Calibrate any model's logits: fit calibrators on its val split, measure them on its test
split with bootstrap intervals, draw reliability diagrams, write one self-contained page.

``focalcal calibrate LOGITS`` (:mod:`focalcal.commands.cli`) runs :func:`compare_calibrators` on a
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

Which calibrators run is :mod:`~focalcal.commands.calibrator_choice`'s. Two processes share them
(:class:`~focalcal.commands.shared_work.SharedWork`): each takes the next one not yet taken, the
costliest first (:func:`~focalcal.commands.shared_work.work_units`), fits, measures and draws it,
so the command uses two cores whatever the machine's speed at each fit. A progress line comes as
each calibrator finishes; the files keep the order the calibrators were asked for. The page is
:mod:`~focalcal.commands.calibrate_page`'s.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable
from pathlib import Path

from focalcal import paths
from focalcal.commands import calibrator_choice
from focalcal.commands.calibrate_page import render_page
from focalcal.commands.shared_work import Measured, Measuring, SharedWork, fit_and_measure, work_units
from focalcal.core.constraints import POSITIVE_INT, Interval, validate_parameters
from focalcal.files.artefacts import atomic_write_json, atomic_write_text
from focalcal.files.output_folder import OutputFolder
from focalcal.logits_file import LogitsSet

# What the command writes in its output folder: the fitted calibrators and the metrics under the
# names a workflow run's calibration gives them, the page, and one reliability diagram per calibrator.
PAGE, DIAGRAMS = "index.html", "reliability"
OUTPUT_FILES = (paths.CALIBRATION_PARAMS, paths.METRICS, PAGE, DIAGRAMS)
METRICS_HEADER = ("calibrator", "metric", "bins", "value", "ci_low", "ci_high")


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
    specs = calibrator_choice.resolve_calibrators(names, gamma)
    if names is None:  # named calibrators run whatever K; the default list stays within bounds
        bound = calibrator_choice.MAX_CLASSES_QUADRATIC
        for key in [key for key in calibrator_choice.QUADRATIC_IN_K if key in specs and logits.num_classes > bound]:
            del specs[key]
            progress(f"skipping {key}: its cost grows as K² ({calibrator_choice.COSTS[key]}) and {logits.source} has "
                     f"{logits.num_classes:,} classes, more than {bound}; name it in --calibrators "
                     "to fit it anyway")
    # The second process starts before anything else here, so that its start-up overlaps this
    # process's; it is stopped if a check below fails.
    with contextlib.ExitStack() as stack:
        measuring = Measuring(logits.test_logits, logits.test_labels, n_bins, n_resamples, seed, smooth)
        work = stack.enter_context(SharedWork(work_units(specs), specs, logits.val_logits, logits.val_labels,
                                               measuring))
        rows, folder = _checked_compare(logits, out_dir, specs, work, stack, measuring, progress)
    progress(f"wrote {folder.path / PAGE}, {paths.METRICS}, {paths.CALIBRATION_PARAMS} and {len(specs)} diagrams")
    return rows


def _checked_compare(logits: LogitsSet, out_dir, specs: dict, work: SharedWork, stack: contextlib.ExitStack,
                     measuring: Measuring, progress: Callable[[str], None]):
    from threadpoolctl import threadpool_limits

    from focalcal.calibration import calibrator_class

    binary_only = [key for key, spec in specs.items() if calibrator_class(spec["build"]["name"]).binary_only]
    if binary_only and logits.num_classes != 2:
        raise ValueError(f"calibrator {binary_only[0]} is for binary classifiers; {logits.source} has "
                         f"{logits.num_classes} classes")
    for key in specs:
        parameters = calibrator_choice.parameter_count(key, logits.num_classes)
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


def _compare(logits: LogitsSet, out_dir: Path, specs: dict, work: SharedWork, measuring: Measuring,
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
            finished(key, *fit_and_measure(key, specs[key], logits.val_logits, logits.val_labels, measuring,
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
