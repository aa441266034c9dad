"""The fast paths of ``focalcal calibrate`` give the numbers of the straightforward computation,
bit for bit: each test holds that computation as a reference implementation and compares."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.special import softmax

from focalcal import metrics
from focalcal.metrics import batched
from focalcal.metrics.binning import mass_cut_ranks


def _confidences(rows=40, n=700, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    confidences = rng.uniform(0.05, 1.0, size=(rows, n)).astype(dtype)
    confidences[:5, :100] = dtype(0.5)  # ties across the equal-mass cuts
    confidences[5, :30] = dtype(1.0)
    return confidences, rng.random(n) < 0.6


def _mass_binned_one_pass(confidences, correct, n_bins):
    """Reference: the equal-mass bins of every row from one sort of the whole array and one
    (G, N + 1) float64 cumulative sum, row by row searchsorted."""
    n_candidates, n_samples = confidences.shape
    ordered = np.sort(confidences, axis=1)
    edges = ordered[:, mass_cut_ranks(n_samples, n_bins) - 1]
    hits_ordered = np.sort(confidences[:, correct], axis=1)
    below = np.empty((n_candidates, n_bins + 1), dtype=np.int64)
    hits_below = np.empty_like(below)
    below[:, 0], hits_below[:, 0] = 0, 0
    below[:, -1], hits_below[:, -1] = n_samples, hits_ordered.shape[1]
    for row in range(n_candidates):
        below[row, 1:-1] = np.searchsorted(ordered[row], edges[row], side="right")
        hits_below[row, 1:-1] = np.searchsorted(hits_ordered[row], edges[row], side="right")
    cumulative = np.zeros((n_candidates, n_samples + 1))
    np.cumsum(ordered, axis=1, dtype=np.float64, out=cumulative[:, 1:])
    return (np.diff(np.take_along_axis(cumulative, below, axis=1), axis=1),
            np.diff(hits_below, axis=1).astype(np.float64), np.diff(below, axis=1))


@pytest.mark.parametrize("block_elements", [1, 2000, 1 << 16])  # one row a block, a few rows, all rows
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equal_mass_grid_bins_in_blocks_equal_one_pass_over_all_rows(monkeypatch, block_elements, dtype):
    confidences, correct = _confidences(dtype=dtype)
    monkeypatch.setattr(batched, "_BLOCK_ELEMENTS", block_elements)
    blocked = batched.binned_grid(confidences, correct, 15, "mass", counts=True)
    for got, expected in zip(blocked, _mass_binned_one_pass(confidences, correct, 15)):
        np.testing.assert_array_equal(got, expected)


def test_temperature_grid_by_ece_equals_one_softmax_per_temperature():
    from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES, temperature_grid_scores
    from focalcal.metrics.batched import ece_grid

    rng = np.random.default_rng(3)
    logits, labels = rng.normal(size=(500, 7)) * 4, rng.integers(0, 7, 500)
    centred = logits - logits.max(axis=1, keepdims=True)
    reference = np.stack([1.0 / np.exp(centred / t).sum(axis=1) for t in MUKHOTI_TEMPERATURES])
    for binning in ("width", "mass"):
        expected = ece_grid(reference, logits.argmax(axis=1) == labels, 15, binning)
        np.testing.assert_array_equal(temperature_grid_scores(logits, labels, MUKHOTI_TEMPERATURES, "ece",
                                                              binning=binning), expected)


def test_bootstrap_weights_counted_once_give_the_intervals_counted_per_call():
    from focalcal.metrics.bootstrap import bootstrap_indices, metrics_with_intervals, resample_weights

    rng = np.random.default_rng(5)
    probs, labels = softmax(rng.normal(size=(400, 6)) * 3, axis=1), rng.integers(0, 6, 400)
    indices = bootstrap_indices(400, 50, seed=2)
    weights = resample_weights(indices, 400)
    assert weights.sum(axis=1).tolist() == [400.0] * 50
    assert weights[0, 17] == np.count_nonzero(indices[0] == 17)
    assert metrics_with_intervals(probs, labels, indices, weights=weights) == metrics_with_intervals(probs, labels,
                                                                                                   indices)
    with pytest.raises(ValueError, match="weights must have the shape of indices"):
        metrics_with_intervals(probs, labels, indices, weights=weights[:10])
    one_more = weights.copy()
    one_more[3, 0] += 1  # 401 draws in one row
    for bad in (weights + 0.5, weights - 1, one_more):  # running counts are summed in integers
        with pytest.raises(ValueError, match=r"weights must be multiplicities of 400 draws: whole numbers >= 0, "
                                             r"each row summing to 400"):
            metrics_with_intervals(probs, labels, indices, weights=bad)
    with pytest.raises(ValueError, match="indices must be"):
        resample_weights(indices, 399)


def test_smooth_reliability_curve_is_relplots_prepared_diagram():
    import relplot

    rng = np.random.default_rng(11)
    probs, labels = softmax(rng.normal(size=(2000, 10)) * 3, axis=1), rng.integers(0, 10, 2000)
    confidence, correct = probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(np.float64)
    prepared = relplot.prepare_rel_diagram(confidence, correct, plot_confidence_band=False, report_CE=True,
                                           report_CE_std=False)
    curve = metrics.smooth_reliability_curve(probs, labels)
    np.testing.assert_array_equal(curve.mesh, prepared["mesh"])
    np.testing.assert_array_equal(curve.accuracy, prepared["mu"])
    np.testing.assert_array_equal(curve.density, prepared["density"])
    assert curve.smooth_ece == prepared["ce"] == metrics.smooth_ece(probs, labels)


def _imported_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    return set(result.stdout.split())


def test_smece_and_one_reliability_diagram_leave_relplots_plotting_half_and_other_figures_unimported():
    """relplot's package imports scikit-learn, seaborn and pyplot; the figure package every figure
    module. The smooth curve and a reliability diagram need neither."""
    loaded = _imported_after(
        "import numpy as np\nfrom focalcal import metrics\n"
        "p = np.full((50, 2), 0.5); p[:, 0] += np.linspace(0, 0.4, 50); p[:, 1] = 1 - p[:, 0]\n"
        "metrics.smooth_reliability_curve(p, np.arange(50) % 2)")
    assert not {"sklearn", "seaborn", "matplotlib", "pandas", "relplot"} & loaded
    drawn = _imported_after("from focalcal.plots import reliability_diagram, save")
    assert "focalcal.plots.reliability" in drawn
    assert not {"focalcal.plots.confidences", "focalcal.plots.experiment_figures", "focalcal.plots.simplex",
                "focalcal.plots.segmentation"} & drawn


def test_the_figure_package_names_every_figure_and_refuses_unknown_names():
    from focalcal import plots
    from focalcal.plots import reliability

    assert plots.reliability_diagram is reliability.reliability_diagram
    assert all(callable(getattr(plots, name)) for name in plots.__all__)
    assert set(plots.__all__) <= set(dir(plots))
    with pytest.raises(AttributeError, match="no attribute 'not_a_figure'"):
        plots.not_a_figure  # noqa: B018


def test_a_saved_figure_saves_again_to_the_same_bytes(tmp_path):
    """``save`` leaves the figure whole (clearing it would re-make every axis's ticks, a quarter of
    the save): a second save, e.g. as another format, draws the same figure."""
    from focalcal.plots import reliability_diagram, save

    rng = np.random.default_rng(1)
    probs, labels = softmax(rng.normal(size=(300, 4)) * 2, axis=1), rng.integers(0, 4, 300)
    figure = reliability_diagram(probs, labels, n_bins=10, title="twice")
    first, second = save(figure, tmp_path / "a.png").read_bytes(), save(figure, tmp_path / "b.png").read_bytes()
    assert first == second and len(first) > 10_000
    assert b"<svg" in save(figure, tmp_path / "c.svg").read_bytes()


def test_the_grid_leaves_a_core_to_the_other_process(monkeypatch):
    from focalcal.commands import shared_work

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert shared_work.background_threads() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert shared_work.background_threads() == 1


def _measuring(seed=1, n_resamples=10):
    from focalcal.commands.shared_work import Measuring

    test_logits, test_labels = _small_logits(seed=seed)
    return Measuring(test_logits, test_labels, 15, n_resamples, 3, True)


def test_a_fit_runs_its_grid_on_the_threads_it_is_given(monkeypatch):
    from focalcal.calibration import _grid_kernel
    from focalcal.commands import shared_work

    rng = np.random.default_rng(2)
    logits, labels = rng.normal(size=(200, 5)) * 3, rng.integers(0, 5, 200)
    spec = {"build": {"name": "focal_temperature_scaling", "gammas": [0.0, 1.0], "temperatures": [0.5, 1.0, 2.0]}}
    seen = []
    monkeypatch.setattr(_grid_kernel, "focal_grid", lambda *a, original=_grid_kernel.focal_grid: seen.append(
        _grid_kernel.threads()) or original(*a))
    try:
        fitted, _, measured = shared_work.fit_and_measure("fts_ece", spec, logits, labels, _measuring(), print, 1)
        assert seen == [1]  # the grid kernel ran, on the one thread given
        shared_work.fit_and_measure("isotonic", {"build": {"name": "isotonic"}}, logits, labels, _measuring(), print, 1)
        assert seen == [1]
    finally:
        _grid_kernel.set_threads(None)
    assert fitted.temperature_ in (0.5, 1.0, 2.0)
    assert measured.ece == next(row["value"] for row in measured.rows if row["metric"] == "ece")


def _small_logits(n=400, k=5, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 3
    return logits, (rng.uniform(size=(n, 1)) > softmax(logits / 2, axis=1).cumsum(axis=1)).sum(axis=1)


def test_work_units_take_the_costliest_first_and_keep_focal_ts_together():
    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.commands.shared_work import work_units

    specs = resolve_calibrators(["raw", "isotonic", "fts_nll", "ts_ece", "fts_ece", "ts_nll"])
    assert work_units(specs) == [("fts_ece", "fts_nll"), ("ts_nll", "isotonic"), ("ts_ece",), ("raw",)]
    assert work_units(resolve_calibrators(["isotonic", "raw"])) == [("isotonic",), ("raw",)]
    assert work_units(resolve_calibrators(["raw"])) == [("raw",)]


@pytest.fixture(params=["fork", "spawn"])
def start(request, monkeypatch):
    """The second process forked (with this one's modules and resamples) or spawned (a fresh interpreter)."""
    from focalcal.commands import shared_work

    monkeypatch.setattr(shared_work, "start_method", lambda: request.param)
    return request.param


def test_the_second_process_forks_unless_torch_is_loaded(monkeypatch):
    import multiprocessing
    import sys

    from focalcal.commands.shared_work import start_method

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert start_method() == ("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    monkeypatch.setitem(sys.modules, "torch", object())
    assert start_method() == "spawn"


def test_calibrators_fitted_in_the_second_process_are_the_ones_fitted_and_measured_here(start):
    """Whichever process takes a calibrator, its fit, metric rows and diagram are the same to the
    last bit, whether it was forked or spawned: here the second process takes every unit, as this
    one takes none."""
    import json

    from focalcal.calibration import _focal_grid
    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.commands.shared_work import SharedWork
    from focalcal.pipeline.calibrate import fit_calibrator

    _focal_grid.forget_kept_scores()  # the fits here in the second process's order, from no kept scores as it
    val_logits, val_labels = _small_logits()
    specs = resolve_calibrators(["raw", "ts_ece", "isotonic", "fts_ece", "fts_nll"])
    units = [("fts_ece", "fts_nll"), ("ts_ece",), ("raw",), ("isotonic",)]
    with SharedWork(units, specs, val_logits, val_labels, _measuring()) as work:
        there = {key: work.result(key) for unit in units for key in unit}
        assert work.take() is None  # every unit taken, each once
    for key, (calibrator, _, measured) in there.items():
        here, _ = fit_calibrator(specs[key], val_logits, val_labels, {})
        assert json.dumps(calibrator.to_dict()) == json.dumps(here.to_dict()), key
        expected = _measuring().measure(key, here)
        assert measured.rows == expected.rows and measured.svg == expected.svg, key


def test_the_two_processes_share_the_units_and_each_is_fitted_once(tmp_path):
    """compare_calibrators with its second process: every calibrator has one progress line and one
    entry, and the files list the calibrators in the order asked for."""
    import json

    from focalcal.commands.calibrate_command import compare_calibrators
    from focalcal.logits_file import check_logits

    (val_logits, val_labels), (test_logits, test_labels) = _small_logits(), _small_logits(seed=1)
    logits = check_logits({"val_logits": val_logits, "val_labels": val_labels, "test_logits": test_logits,
                           "test_labels": test_labels}, source="model.npz")
    names = ["raw", "ts_ece", "isotonic", "fts_ece", "ts_nll", "histogram_binning"]
    lines = []
    rows = compare_calibrators(logits, tmp_path / "out", names, n_resamples=10, seed=3, progress=lines.append)
    finished = [line.split(":")[0].split() for line in lines[:-1]]  # "[3/6] ts_ece"
    assert [count for count, _ in finished] == [f"[{i}/{len(names)}]" for i in range(1, len(names) + 1)]
    assert sorted(key for _, key in finished) == sorted(names)
    assert sorted(json.loads((tmp_path / "out" / "calibration.json").read_text())) == sorted(names)
    assert list(dict.fromkeys(row["calibrator"] for row in rows)) == names


def test_the_second_process_sends_its_outcomes_without_waiting_for_this_one_to_read(start):
    """Its outcomes outgrow a pipe's 64 KiB while this process is busy elsewhere (here: asleep,
    taking no unit), yet it finishes every unit and ends: a thread here receives as they come."""
    import pickle

    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.commands.shared_work import SharedWork

    logits, labels = _small_logits()
    keys = ["raw", "ts_ece", "ts_nll", "histogram_binning", "isotonic", "vector_scaling", "fts_ece", "fts_nll"]
    specs = resolve_calibrators(keys)
    with SharedWork([(key,) for key in keys], specs, logits, labels, _measuring()) as work:
        work._process.join(timeout=120)
        assert not work._process.is_alive()  # ended with nobody here reading
        work.result(keys[-1])  # its last: received with all before it
        arrived = work.arrived()
    assert [key for key, _ in arrived] == keys and work.arrived() == []
    assert len(pickle.dumps(arrived)) > 64 * 1024  # more than a pipe holds


def _refuse_to_be_rebuilt():
    raise RuntimeError("this outcome cannot be rebuilt here")


class _Unreadable:
    """Pickles in the second process; unpickling it here raises."""

    def __reduce__(self):
        return _refuse_to_be_rebuilt, ()


def test_an_outcome_that_cannot_be_received_fails_the_wait_for_it_naming_why(monkeypatch):
    """The receiving thread stops at an outcome it cannot rebuild; waiting for a calibrator then
    fails in one line with that reason, where it would otherwise wait for ever."""
    from focalcal.commands import shared_work
    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.commands.shared_work import SharedWork

    monkeypatch.setattr(shared_work, "start_method", lambda: "fork")  # the forked process sends _Unreadable
    monkeypatch.setattr(shared_work, "fit_and_measure", lambda *args, **kwargs: _Unreadable())
    logits, labels = _small_logits()
    specs = resolve_calibrators(["raw", "ts_ece"])
    with (pytest.raises(RuntimeError, match=r"^an outcome of the second process could not be received, so raw's is "
                                            r"lost: RuntimeError\('this outcome cannot be rebuilt here'\)"),
          SharedWork([("raw",), ("ts_ece",)], specs, logits, labels, _measuring()) as work):
        work.result("raw")


def test_a_second_process_that_dies_fails_the_comparison_in_one_line_naming_the_calibrator(start):
    import multiprocessing
    import signal
    import time

    from focalcal.commands.calibrator_choice import resolve_calibrators
    from focalcal.commands.shared_work import SharedWork

    logits, labels = _small_logits(n=3000, k=50)
    specs = resolve_calibrators(["fts_ece", "fts_nll", "raw"])
    with (pytest.raises(RuntimeError, match=r"^the second process fitting fts_ece ended before it was done"),
          SharedWork([("fts_ece", "fts_nll"), ("raw",)], specs, logits, labels, _measuring()) as work):
        deadline = time.monotonic() + 60
        while work._next.value == 0 and time.monotonic() < deadline:  # until it has taken focal TS
            time.sleep(0.01)
        os.kill(work._process.pid, signal.SIGKILL)
        work.result("fts_ece")
    assert multiprocessing.active_children() == []


def test_a_fit_that_fails_in_the_second_process_raises_its_own_error_here(start):
    from focalcal.commands.shared_work import SharedWork

    logits, labels = _small_logits()
    specs = {"fts_ece": {"build": {"name": "focal_temperature_scaling", "gammas": [-2.0]}},
             "fts_nll": {"build": {"name": "focal_temperature_scaling", "gammas": [0.0, 1.0],
                                   "temperatures": [1.0, 2.0]}}}
    with SharedWork([("fts_ece",), ("fts_nll",)], specs, logits, labels, _measuring()) as work:
        assert work.result("fts_nll")[0].temperature_ in (1.0, 2.0)  # sent after the failed one
        with pytest.raises(ValueError, match=r"FocalTemperatureScaling: gammas must be .*real numbers in \(-1, inf\).*entry 0 is -2.0"):
            work.result("fts_ece")
