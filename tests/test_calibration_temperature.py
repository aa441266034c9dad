"""Temperature scaling (NLL / ECE grid / focal objective), focal temperature scaling and the
batched ECE they use, each checked against an independent brute-force computation."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax, softmax

from focalcal.calibration import (
    KOMISARENKO_GAMMAS,
    KOMISARENKO_TEMPERATURES,
    MUKHOTI_TEMPERATURES,
    FocalTemperatureScaling,
    TemperatureScaling,
)
from focalcal.calibration._focal_grid import focal_grid_blocks
from focalcal.metrics import ece, nll
from focalcal.metrics.batched import ece_grid
from focalcal.metrics.binning import bin_statistics
from focalcal.theory import log_psi_from_logits, psi


def sample_labels(rng, probs):
    """One label per row drawn from the row's distribution (inverse CDF, vectorised)."""
    cumulative = probs.cumsum(axis=1)
    draws = rng.uniform(size=(len(probs), 1)) * cumulative[:, -1:]
    return (draws > cumulative).sum(axis=1)


def synthetic_logits(seed, n=3000, k=10, scale=3.0, true_temperature=2.0):
    """Logits and labels drawn from softmax(logits / true_temperature)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * scale
    return logits, sample_labels(rng, softmax(logits / true_temperature, axis=1))


def mean_nll(logits, labels, temperature):
    return -log_softmax(logits / temperature, axis=1)[np.arange(len(labels)), labels].mean()


def mean_focal_loss_torch(logits, labels, temperature, gamma):
    """Straightforward reference: −(1 − p_y)^γ log p_y of softmax(z / T), float64 torch."""
    log_p = torch.log_softmax(torch.as_tensor(logits) / temperature, dim=1)
    log_p_y = log_p[torch.arange(len(labels)), torch.as_tensor(labels)]
    return float((-((1 - log_p_y.exp()) ** gamma) * log_p_y).mean())


# -- objective="nll" --------------------------------------------------------------------------
def test_nll_recovers_the_temperature_that_generated_the_labels():
    logits, labels = synthetic_logits(0, n=40000, k=10, true_temperature=2.5)
    fitted = TemperatureScaling(objective="nll").fit(logits, labels)
    # Maximum likelihood on 40k samples: the estimate is within a few percent of the truth.
    assert abs(np.log(fitted.temperature_ / 2.5)) < 0.03
    assert not fitted.at_bound_


@pytest.mark.parametrize("true_temperature", [0.4, 1.0, 3.0])
def test_nll_optimum_matches_bounded_brent_to_1e6_in_log_temperature(true_temperature):
    logits, labels = synthetic_logits(1, n=2000, k=7, true_temperature=true_temperature)
    fitted = TemperatureScaling(objective="nll").fit(logits, labels).temperature_
    reference = minimize_scalar(
        lambda u: mean_nll(logits, labels, np.exp(u)), bounds=(np.log(1e-2), np.log(1e2)),
        method="bounded", options={"xatol": 1e-12},
    ).x  # fmt: skip
    assert abs(np.log(fitted) - reference) < 1e-6
    # and no grid point does better (global optimum of a convex problem)
    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 4001))
    assert mean_nll(logits, labels, fitted) <= min(mean_nll(logits, labels, t) for t in grid[::20]) + 1e-12


def test_nll_optimum_on_a_bound_when_the_labels_carry_no_signal_or_full_signal():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(500, 4))
    random_labels = rng.integers(0, 4, 500)
    # Labels independent of (and anti-aligned with) the logits: the NLL keeps falling as T grows.
    anti = logits.argmin(axis=1)
    fitted = TemperatureScaling(objective="nll", temperature_bounds=(0.1, 50)).fit(logits, anti)
    assert fitted.temperature_ == 50 and fitted.at_bound_
    # Every sample right with a margin: the NLL keeps falling as T shrinks.
    fitted = TemperatureScaling(objective="nll", temperature_bounds=(0.1, 50)).fit(logits, logits.argmax(axis=1))
    assert fitted.temperature_ == pytest.approx(0.1) and fitted.at_bound_
    assert TemperatureScaling().fit(logits, random_labels).temperature_ > 1


# -- objective="ece" --------------------------------------------------------------------------
def test_ece_objective_searches_the_mukhoti_grid_with_15_equal_width_bins():
    logits, labels = synthetic_logits(3, n=1500, k=5, scale=4.0, true_temperature=1.7)
    fitted = TemperatureScaling(objective="ece").fit(logits, labels)
    np.testing.assert_allclose(fitted.temperatures_, np.arange(1, 101) / 10, rtol=0, atol=1e-12)
    assert len(MUKHOTI_TEMPERATURES) == 100 and MUKHOTI_TEMPERATURES[0] == 0.1 and MUKHOTI_TEMPERATURES[-1] == 10.0
    brute = np.array([ece(softmax(logits / t, axis=1), labels, n_bins=15, binning="width") for t in fitted.temperatures_])
    np.testing.assert_allclose(fitted.grid_scores_, brute, rtol=0, atol=1e-12)
    assert fitted.temperature_ == fitted.temperatures_[np.argmin(brute)]
    assert 1.2 < fitted.temperature_ < 2.3


def test_any_objective_with_a_grid_is_a_grid_search():
    logits, labels = synthetic_logits(4, n=800, k=4)
    grid = np.linspace(0.5, 4, 36)
    fitted = TemperatureScaling(objective="nll", temperatures=grid).fit(logits, labels)
    brute = np.array([nll(softmax(logits / t, axis=1), labels) for t in grid])
    np.testing.assert_allclose(fitted.grid_scores_, brute, rtol=1e-12)
    assert fitted.temperature_ == grid[np.argmin(brute)]


# -- objective="focal" (TS_FL) ----------------------------------------------------------------
@pytest.mark.parametrize("gamma", [1.0, 3.0])
def test_focal_objective_minimises_validation_focal_loss(gamma):
    logits, labels = synthetic_logits(5, n=1500, k=6, true_temperature=0.7)
    fitted = TemperatureScaling(objective="focal", gamma=gamma).fit(logits, labels)
    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 3001))
    brute = np.array([mean_focal_loss_torch(logits, labels, t, gamma) for t in grid])
    best = grid[np.argmin(brute)]
    assert abs(np.log(fitted.temperature_ / best)) < 2e-3  # grid step in log T is 2.7e-3
    assert mean_focal_loss_torch(logits, labels, fitted.temperature_, gamma) <= brute.min() + 1e-12


def test_focal_objective_with_gamma_zero_is_the_nll_optimum():
    logits, labels = synthetic_logits(6, n=1000, k=5)
    focal = TemperatureScaling(objective="focal", gamma=0.0).fit(logits, labels).temperature_
    exact = TemperatureScaling(objective="nll").fit(logits, labels).temperature_
    assert abs(np.log(focal / exact)) < 1e-6


# -- focal temperature scaling ------------------------------------------------------------------
def test_default_grids_are_komisarenko_section_5_1():
    np.testing.assert_array_equal(KOMISARENKO_GAMMAS, [-0.5, -0.25, 0.05, 0.25, 0.37, 0.5, 0.75, 1, 5])
    assert len(KOMISARENKO_TEMPERATURES) == 500
    np.testing.assert_allclose(KOMISARENKO_TEMPERATURES, np.arange(1, 501) * 0.01, rtol=0, atol=1e-12)


@pytest.mark.parametrize("objective", ["ece", "nll"])
def test_fts_restricted_to_gamma_zero_equals_temperature_scaling_on_the_same_grid(objective):
    logits, labels = synthetic_logits(7, n=2000, k=8, true_temperature=1.8)
    grid = np.round(np.arange(1, 301) * 0.01, 10)
    fts = FocalTemperatureScaling(gammas=[0.0], temperatures=grid, objective=objective, dtype="float64")
    ts = TemperatureScaling(objective=objective, temperatures=grid, n_bins=15, binning="mass")
    fts.fit(logits, labels)
    ts.fit(logits, labels)
    np.testing.assert_allclose(fts.grid_scores_[0], ts.grid_scores_, rtol=1e-10, atol=1e-13)
    assert fts.temperature_ == ts.temperature_ and fts.gamma_ == 0.0
    np.testing.assert_allclose(fts.transform(logits), ts.transform(logits), rtol=1e-12, atol=1e-15)


def reference_fts_scores(logits, labels, gammas, temperatures, objective):
    """Straightforward per-grid-point loop: softmax, psi, then the library's ece / nll."""
    scores = np.empty((len(gammas), len(temperatures)))
    for i, gamma in enumerate(gammas):
        for j, t in enumerate(temperatures):
            probs = psi(softmax(logits / t, axis=1), gamma)
            scores[i, j] = ece(probs, labels, 15, "mass") if objective == "ece" else nll(probs, labels)
    return scores


@pytest.mark.parametrize("objective", ["ece", "nll"])
def test_fts_grid_scores_match_the_straightforward_reference(objective):
    logits, labels = synthetic_logits(8, n=600, k=6, scale=2.0, true_temperature=0.8)
    gammas, temps = [-0.5, -0.25, 0.05, 1.0, 5.0], [0.3, 0.6, 1.0, 1.7, 3.0]
    reference = reference_fts_scores(logits, labels, gammas, temps, objective)
    exact = FocalTemperatureScaling(gammas, temps, objective=objective, dtype="float64").fit(logits, labels)
    np.testing.assert_allclose(exact.grid_scores_, reference, rtol=1e-9, atol=1e-12)
    fast = FocalTemperatureScaling(gammas, temps, objective=objective, dtype="float32").fit(logits, labels)
    np.testing.assert_allclose(fast.grid_scores_, reference, rtol=1e-5, atol=2e-6)
    best = np.unravel_index(np.argmin(reference), reference.shape)
    assert (exact.gamma_, exact.temperature_) == (gammas[best[0]], temps[best[1]])
    np.testing.assert_array_equal(exact.best_temperature_per_gamma_, np.array(temps)[reference.argmin(axis=1)])
    np.testing.assert_allclose(exact.best_score_per_gamma_, reference.min(axis=1), rtol=1e-9)


def test_fts_float32_and_float64_agree_on_the_paper_grid_and_pick_the_same_pair():
    logits, labels = synthetic_logits(9, n=1000, k=20, scale=3.0, true_temperature=1.5)
    temps = KOMISARENKO_TEMPERATURES[::5]
    f32 = FocalTemperatureScaling(temperatures=temps, dtype="float32").fit(logits.astype(np.float32), labels)
    f64 = FocalTemperatureScaling(temperatures=temps, dtype="float64").fit(logits, labels)
    np.testing.assert_allclose(f32.grid_scores_, f64.grid_scores_, rtol=0, atol=1e-5)
    assert (f32.gamma_, f32.temperature_) == (f64.gamma_, f64.temperature_)


def test_fts_transform_is_psi_of_tempered_softmax_and_keeps_the_prediction():
    logits, labels = synthetic_logits(10, n=500, k=5, scale=3.0, true_temperature=2.0)
    fitted = FocalTemperatureScaling(temperatures=np.arange(1, 101) * 0.05, objective="nll").fit(logits, labels)
    probs = fitted.transform(logits)
    np.testing.assert_allclose(probs, psi(softmax(logits / fitted.temperature_, axis=1), fitted.gamma_), atol=1e-12)
    np.testing.assert_array_equal(probs.argmax(axis=1), logits.argmax(axis=1))
    assert fitted.transform(logits).dtype == np.float64


@pytest.mark.parametrize("n_classes", [2, 6])
def test_grid_kernel_matches_psi_from_logits_at_extreme_logits(n_classes):
    rng = np.random.default_rng(11)
    logits = rng.normal(size=(300, n_classes)) * np.array([[1], [30], [300]]).repeat(100, axis=0)
    labels = rng.integers(0, n_classes, 300)
    gammas, temps = [-0.5, 0.05, 5.0], [0.01, 0.5, 5.0]
    log_psi = {(g, t): log_psi_from_logits(logits / t, g) for g in gammas for t in temps}
    for quantity in ("confidence", "log_psi_label"):
        # a tiny block size forces several blocks over T and over rows
        blocks = focal_grid_blocks(logits, labels, gammas, temps, quantity, dtype="float64", max_block_elements=2000)
        for temps_slice, values in blocks:
            for i, gamma in enumerate(gammas):
                for j, t in enumerate(np.asarray(temps)[temps_slice]):
                    if quantity == "confidence":
                        expected = np.exp(log_psi[gamma, t].max(axis=1))
                        np.testing.assert_allclose(values[i, j], expected, rtol=1e-10)
                    else:
                        expected = log_psi[gamma, t][np.arange(300), labels]
                        np.testing.assert_allclose(values[i, j], expected, rtol=1e-9, atol=1e-9)
        for _, values in focal_grid_blocks(logits, labels, gammas, temps, quantity, dtype="float32"):
            assert values.dtype == np.float32 and np.isfinite(values).all()
            if quantity == "confidence":
                assert (values <= 1).all() and (values >= 0.5 if n_classes == 2 else values > 0).all()


@pytest.mark.parametrize("n_classes", [2, 6, 37, 100])
def test_grid_kernel_matches_the_torch_path_in_float32_and_float64(n_classes, monkeypatch):
    """The C kernel (float32, the default where it is built) against the torch reference path in
    float32 and float64, at ordinary and extreme logits; class counts below, at and off the SIMD
    width exercise the vector and the scalar tail loops."""
    from focalcal.calibration import _focal_grid, _grid_kernel
    from focalcal.core import kernels

    assert _grid_kernel.library() is not None  # the build the suite runs with (make venv builds it)
    rng = np.random.default_rng(14)
    logits = rng.normal(size=(240, n_classes)) * np.array([[1], [8], [300]]).repeat(80, axis=0)
    logits[:3] = [0.0] * n_classes  # every class tied: the first is the top one
    logits[3, :2] = 1e4  # the top two tied far above the rest
    labels = rng.integers(0, n_classes, 240)
    gammas, temps = [-0.5, 0.05, 0.37, 1.0, 5.0], [0.01, 0.3, 1.0, 2.7, 5.0]

    def grid(dtype):
        blocks = list(focal_grid_blocks(logits, labels, gammas, temps, "both", dtype=dtype))
        return [np.concatenate([values[i] for _, values in blocks], axis=1).astype(np.float64) for i in (0, 1)]

    fused = grid("float32")
    monkeypatch.setenv(kernels.ENV_SWITCH, "0")
    assert _focal_grid._grid_kernel() is None
    eager32, exact = grid("float32"), grid("float64")
    for ours, reference in ((fused, exact), (eager32, exact)):
        np.testing.assert_allclose(ours[0], reference[0], rtol=3e-6, atol=0)  # confidence
        np.testing.assert_allclose(ours[1], reference[1], rtol=3e-6, atol=3e-6)  # log Ψ_y
    assert (fused[0] <= 1).all() and np.isfinite(fused[1]).all()


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "torch"])
def test_a_grid_of_wanted_pairs_gives_each_the_whole_grids_values_and_nan_elsewhere(kernel, monkeypatch):
    """Only the wanted pairs are computed (the kernel skips a temperature no γ wants), each to the
    last bit as in the whole grid, whatever the blocks; the others are NaN."""
    from focalcal.calibration import _focal_grid
    from focalcal.core import kernels

    if not kernel:
        monkeypatch.setenv(kernels.ENV_SWITCH, "0")
    assert (_focal_grid._grid_kernel() is not None) == kernel
    rng = np.random.default_rng(21)
    logits, labels = rng.normal(size=(300, 11)) * 4, rng.integers(0, 11, 300)
    gammas, temps = [0.0, 0.5, 1.0, 3.0], np.linspace(0.3, 4.0, 12)
    wanted = rng.uniform(size=(4, 12)) < 0.3
    wanted[:, 5] = False  # a temperature nobody wants

    def grid(**options):
        blocks = list(focal_grid_blocks(logits, labels, gammas, temps, "both", max_block_elements=4 * 3 * 300,
                                        **options))
        assert len(blocks) > 1
        return [np.concatenate([values[i] for _, values in blocks], axis=1) for i in (0, 1)]

    whole, some = grid(), grid(wanted=wanted)
    for every, only in zip(whole, some, strict=True):
        np.testing.assert_array_equal(only[wanted], every[wanted])
        assert np.isnan(only[~wanted]).all()
    with pytest.raises(ValueError, match=r"wanted must have shape \(n_gamma, n_T\) = \(4, 12\), got \(12, 4\)"):
        next(focal_grid_blocks(logits, labels, gammas, temps, wanted=wanted.T))


def test_the_refined_search_scores_its_coarse_grid_in_one_pass_and_every_refinement_in_another(monkeypatch):
    from focalcal.calibration import _focal_grid

    rng = np.random.default_rng(8)
    logits, labels = rng.normal(size=(400, 6)) * 3, rng.integers(0, 6, 400)
    passes = []
    original = _focal_grid.focal_grid_blocks
    monkeypatch.setattr(_focal_grid, "focal_grid_blocks",
                        lambda *a, **k: passes.append(len(a[2])) or original(*a, **k))
    _focal_grid.forget_kept_scores()
    fitted = FocalTemperatureScaling(objective="ece", search="refine").fit(logits, labels)
    assert passes == [len(fitted.gammas_), len(fitted.gammas_)]  # every γ in each


@pytest.mark.parametrize("objective", ["ece", "nll"])
def test_focal_ts_by_the_grid_kernel_picks_the_torch_paths_pair_with_scores_within_their_tolerance(objective,
                                                                                                monkeypatch):
    """The stated tolerance of the kernel's scores against the torch path's (both float32), the
    scores the command's calibration.json holds: ECE within 1e-6, NLL within 1e-6 relative (the
    10,000 + 5,000 × 100 bench case: 3e-9 and 4e-9); the same (γ, T) picked."""
    from focalcal.calibration import _focal_grid
    from focalcal.core import kernels

    rng = np.random.default_rng(16)
    logits = rng.normal(size=(2000, 100)) * 4
    labels = (rng.uniform(size=(2000, 1)) > softmax(logits / 2.5, axis=1).cumsum(axis=1)).sum(axis=1)
    labels = np.minimum(labels, 99)
    fits = []
    for switch in ("1", "0"):
        monkeypatch.setenv(kernels.ENV_SWITCH, switch)
        _focal_grid._LAST_SCORES.clear()
        fits.append(FocalTemperatureScaling(objective=objective, search="refine").fit(logits, labels))
    kernel, torch_path = fits
    assert (kernel.gamma_, kernel.temperature_) == (torch_path.gamma_, torch_path.temperature_)
    np.testing.assert_array_equal(np.isnan(kernel.grid_scores_), np.isnan(torch_path.grid_scores_))
    tolerance = {"atol": 1e-6, "rtol": 0} if objective == "ece" else {"atol": 0, "rtol": 1e-6}
    np.testing.assert_allclose(kernel.grid_scores_, torch_path.grid_scores_, **tolerance)


def test_grid_kernel_is_built_once_into_the_shared_cache_and_never_in_a_job(tmp_path, monkeypatch):
    """Under FOCALCAL_KERNEL_BUILD=never (workflow jobs) a missing build is not compiled: one
    warning naming the fix, and the torch path; `build_or_warn` (the workflow's start) builds it
    into the cache, where a fresh load finds it; a failing compiler is a warning, not an error."""
    from focalcal.calibration import _focal_grid, _grid_kernel
    from focalcal.core import kernels

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_grid_kernel, "_library", None)
    monkeypatch.setenv(kernels.BUILD_SWITCH, "never")
    with pytest.warns(RuntimeWarning, match=r"no build at .*FOCALCAL_KERNEL_BUILD=never; run `python -m focalcal build-kernels`"):
        assert _focal_grid._grid_kernel() is None
    monkeypatch.setattr(_grid_kernel, "_library", None)
    monkeypatch.setenv("CC", "false")
    with pytest.warns(RuntimeWarning, match=r"cannot be built, the torch path runs: false .*failed"):
        assert _grid_kernel.build_or_warn() is None
    monkeypatch.delenv("CC")
    library = _grid_kernel.build_or_warn()
    assert library == _grid_kernel.library_path() and library.is_relative_to(tmp_path / "cache")
    assert not list(library.parent.glob("*.tmp"))
    assert _focal_grid._grid_kernel() is _grid_kernel  # loaded from the cache, never compiled here


def test_grid_kernel_scores_do_not_depend_on_its_thread_count():
    from focalcal.calibration import _grid_kernel

    rng = np.random.default_rng(15)
    logits, labels = rng.normal(size=(301, 23)) * 4, rng.integers(0, 23, 301)
    scores = []
    for threads in (1, 2, 3):
        _grid_kernel.set_threads(threads)
        try:
            scores.append(np.concatenate([v for _, (c, lp) in focal_grid_blocks(logits, labels, [0.0, 2.0], [0.5, 1.5],
                                                                                   "both") for v in (c, lp)], axis=1))
        finally:
            _grid_kernel.set_threads(None)
    np.testing.assert_array_equal(scores[0], scores[1])
    np.testing.assert_array_equal(scores[0], scores[2])


def test_focal_ts_fit_imports_no_torch_where_the_grid_kernel_is_built():
    """`focalcal calibrate`'s second process fits focal TS without torch's ~3 s import."""
    import subprocess
    import sys

    code = ("import sys, numpy as np; from focalcal.calibration import FocalTemperatureScaling as F; "
            "rng = np.random.default_rng(0); z = rng.normal(size=(200, 5)); "
            "F(gammas=[0.0, 1.0], temperatures=[0.5, 1.0, 2.0]).fit(z, rng.integers(0, 5, 200)); "
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.parametrize("gamma", [-0.9, -0.5, -0.25])
def test_psi_keeps_the_argmax_for_negative_gamma(gamma):
    """What the grid kernel relies on for γ_ev < 0 (charoenphakdee2021 Prop 12 covers γ ≥ 0)."""
    rng = np.random.default_rng(12)
    concentration = rng.choice([0.05, 0.3, 1.0, 5.0], size=(20000, 1))
    probs = rng.gamma(concentration * np.ones((1, 4)))
    probs /= probs.sum(axis=1, keepdims=True)
    near_ties = np.array([[0.5 + 1e-7, 0.5 - 1e-7, 0, 0], [0.34, 0.33, 0.33, 0.0], [1 - 1e-9, 1e-9, 0, 0]])
    probs = np.vstack([probs, near_ties])
    np.testing.assert_array_equal(psi(probs, gamma).argmax(axis=1), probs.argmax(axis=1))


# -- batched ECE --------------------------------------------------------------------------------
@pytest.mark.parametrize("binning", ["width", "mass"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ece_grid_equals_metrics_ece(binning, dtype):
    """Equal-width: bit for bit (the same bincount). Equal-mass with one ``correct`` for all
    rows: from sorted rows' cumulative sums, equal to float64 rounding."""
    rng = np.random.default_rng(13)
    n, k, g = 700, 5, 12
    logits = rng.normal(size=(g, n, k)) * rng.uniform(0.2, 5, size=(g, 1, 1))
    probs = softmax(logits, axis=2).astype(dtype)
    probs[:3, :200] = np.array([0.6, 0.4, 0, 0, 0], dtype=dtype)  # ties across bin cuts
    probs[3, :50] = np.eye(k, dtype=dtype)[0]  # confidence exactly 1
    labels = rng.integers(0, k, n)
    correct = probs.argmax(axis=2) == labels
    expected = np.array([ece(probs[i], labels, n_bins=15, binning=binning) for i in range(g)])
    np.testing.assert_array_equal(ece_grid(probs.max(axis=2), correct, 15, binning), expected)  # per-row correct
    same_correct = probs[0].argmax(axis=1) == labels
    expected_shared = np.array([ece(probs[0], labels, 7, binning)] * 2)
    shared = ece_grid(np.stack([probs[0].max(axis=1)] * 2), same_correct, 7, binning)
    if binning == "width":
        np.testing.assert_array_equal(shared, expected_shared)
    else:
        np.testing.assert_allclose(shared, expected_shared, rtol=1e-12, atol=0)
    # every row (ties across cuts, confidences of exactly 1) against the one-row binning ece uses
    rows = probs.max(axis=2)
    expected_rows = [np.abs((stats := bin_statistics(row, same_correct, 15, binning)).score_sum - stats.hit_sum).sum() / n
                     for row in rows]
    np.testing.assert_allclose(ece_grid(rows, same_correct, 15, binning), expected_rows, rtol=1e-12, atol=0)


def test_ece_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="correct"):
        ece_grid(np.full((2, 3), 0.5), np.ones(4, bool))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece_grid(np.full((2, 3), 1.5), np.ones(3, bool))
    with pytest.raises(ValueError, match="n_bins"):
        ece_grid(np.full((2, 3), 0.5), np.ones(3, bool), n_bins=0)


def test_focal_ts_by_ece_and_by_nll_on_the_same_logits_score_the_grid_once(monkeypatch):
    from focalcal.calibration import _focal_grid

    rng = np.random.default_rng(7)
    logits, labels = rng.normal(size=(300, 4)) * 3, rng.integers(0, 4, 300)
    grid = {"gammas": [0.0, 1.0, 2.0], "temperatures": np.linspace(0.2, 3.0, 15)}
    expected = {}
    for objective in ("ece", "nll"):  # one quantity per pass: the scores as computed before sharing
        quantity = "confidence" if objective == "ece" else "log_psi_label"
        scores = np.empty((3, 15))
        for temps, values in _focal_grid.focal_grid_blocks(logits, labels, grid["gammas"], grid["temperatures"],
                                                           quantity):
            if objective == "ece":
                flat = values.reshape(-1, values.shape[-1])
                scores[:, temps] = ece_grid(flat, logits.argmax(1) == labels, 15, "mass").reshape(3, -1)
            else:
                scores[:, temps] = -values.astype(np.float64).mean(axis=2)
        expected[objective] = scores
    passes = []
    original = _focal_grid.focal_grid_blocks
    monkeypatch.setattr(_focal_grid, "focal_grid_blocks", lambda *a, **k: passes.append(a[4]) or original(*a, **k))
    _focal_grid._LAST_SCORES.clear()
    by_ece = FocalTemperatureScaling(objective="ece", **grid).fit(logits, labels)
    by_nll = FocalTemperatureScaling(objective="nll", **grid).fit(logits, labels)
    assert passes == ["both"]
    np.testing.assert_array_equal(by_ece.grid_scores_, expected["ece"])
    np.testing.assert_array_equal(by_nll.grid_scores_, expected["nll"])
    FocalTemperatureScaling(objective="nll", **grid).fit(logits, (labels + 1) % 4)  # other labels: scored again
    assert passes == ["both", "both"]
