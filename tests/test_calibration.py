"""Calibrator API (registry, validation, JSON round trips) and the baseline calibrators."""

import json

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import log_softmax, softmax
from sklearn.isotonic import IsotonicRegression as SklearnIsotonicRegression

from focalcal import calibration
from focalcal.calibration import (
    Calibrator,
    FocalTemperatureScaling,
    HistogramBinning,
    IdentityCalibration,
    IsotonicCalibration,
    MatrixScaling,
    PsiCalibration,
    TemperatureScaling,
    VectorScaling,
    build,
)
from focalcal.metrics import ece
from focalcal.theory import psi

# Small grids keep focal temperature scaling quick in the API tests.
SMALL_CONFIGS = {
    "identity": {},
    "psi": {"gamma": 2.0},
    "temperature_scaling": {"objective": "nll"},
    "focal_temperature_scaling": {"gammas": [0.0, 1.0], "temperatures": [0.5, 1.0, 2.0]},
    "vector_scaling": {"l2": 1e-3},
    "matrix_scaling": {"off_diagonal_l2": 1e-2, "bias_l2": 1e-2},
    "histogram_binning": {"n_bins": 10},
    "isotonic": {},
    "dirichlet": {"off_diagonal_l2": 1e-2, "bias_l2": 1e-2},
    "ensemble_temperature_scaling": {},
    "beta": {},
}
BINARY_ONLY = {"beta"}  # fitted on the first two classes' samples (logits of 2 columns)


def data_for(name, data):
    """The shared test data, or its binary part for a binary-only calibrator."""
    if name not in BINARY_ONLY:
        return data
    logits, labels = data
    keep = labels < 2
    return np.ascontiguousarray(logits[keep, :2]), labels[keep]


def sample_labels(rng, probs):
    cumulative = probs.cumsum(axis=1)
    draws = rng.uniform(size=(len(probs), 1)) * cumulative[:, -1:]
    return (draws > cumulative).sum(axis=1)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(400, 4)) * 2
    return logits, sample_labels(rng, softmax(logits / 1.5, axis=1))


# -- registry ---------------------------------------------------------------------------------
def test_registry_has_the_documented_names():
    assert set(calibration.CALIBRATORS) == set(SMALL_CONFIGS)
    assert isinstance(build({"name": "temperature_scaling", "objective": "ece"}), TemperatureScaling)
    assert build({"name": "psi", "gamma": 3}).gamma == 3


def test_build_rejects_unknown_names_and_parameters_listing_what_exists():
    with pytest.raises(ValueError, match=r"unknown calibrator 'platt'.*temperature_scaling"):
        build({"name": "platt"})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['temp'\].*allowed.*objective"):
        build({"name": "temperature_scaling", "temp": 2})
    with pytest.raises(ValueError, match="'name'"):
        build({"objective": "nll"})


@pytest.mark.parametrize("bad", [{"objective": "brier"}, {"objective": "ece", "binning": "quantile"},
                                 {"temperature_bounds": (2, 1)}, {"temperatures": [1.0, -1.0]}])  # fmt: skip
def test_bad_temperature_scaling_parameters_fail_at_fit(bad, data):
    calibrator = TemperatureScaling(**bad)  # __init__ only stores
    with pytest.raises(ValueError):
        calibrator.fit(*data)


@pytest.mark.parametrize("bad", [{"gammas": [-1.0, 0.5]}, {"objective": "brier"}, {"dtype": "float16"}])
def test_bad_fts_parameters_fail_at_fit(bad, data):
    with pytest.raises(ValueError):
        FocalTemperatureScaling(**bad).fit(*data)


# -- the shared contract ------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SMALL_CONFIGS))
def test_every_calibrator_fits_transforms_and_round_trips_through_json(name, data):
    logits, labels = data_for(name, data)
    calibrator = build({"name": name, **SMALL_CONFIGS[name]})
    probs = calibrator.fit_transform(logits, labels)
    assert probs.dtype == np.float64 and probs.shape == logits.shape
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-12)
    assert (probs >= 0).all()
    stored = json.loads(json.dumps(calibrator.to_dict()))
    assert stored["name"] == name
    restored = Calibrator.from_dict(stored)
    assert type(restored) is type(calibrator)
    np.testing.assert_array_equal(restored.transform(logits), probs)
    # torch logits are accepted too, and give what the same numbers in numpy give
    from_torch = calibrator.transform(torch.as_tensor(logits, dtype=torch.float32))
    assert isinstance(from_torch, np.ndarray) and from_torch.dtype == np.float64
    np.testing.assert_array_equal(from_torch, calibrator.transform(logits.astype(np.float32)))


@pytest.mark.parametrize("name", sorted(SMALL_CONFIGS))
def test_transform_before_fit_is_an_error(name, data):
    with pytest.raises(RuntimeError, match="not fitted"):
        build({"name": name, **SMALL_CONFIGS[name]}).transform(data_for(name, data)[0])


@pytest.mark.parametrize("name", sorted(SMALL_CONFIGS))
def test_invalid_input_names_the_problem(name, data):
    logits, labels = data_for(name, data)
    n_classes = logits.shape[1]
    calibrator = build({"name": name, **SMALL_CONFIGS[name]})
    nan_logits = logits.copy()
    nan_logits[3, 1] = np.nan
    inf_logits = logits.copy()
    inf_logits[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        calibrator.fit(nan_logits, labels)
    with pytest.raises(ValueError, match="Inf"):
        calibrator.fit(inf_logits, labels)
    with pytest.raises(ValueError, match="out of range"):
        calibrator.fit(logits, np.where(labels == 0, 4, labels))
    with pytest.raises(ValueError, match="shape mismatch"):
        calibrator.fit(logits, labels[:-1])
    with pytest.raises(ValueError, match="empty"):
        calibrator.fit(logits[:0], labels[:0])
    calibrator.fit(logits, labels)
    mismatched = logits[:, :-1] if n_classes > 2 else np.column_stack([logits, logits[:, :1]])
    with pytest.raises(ValueError, match=f"{mismatched.shape[1]} classes but .* fitted on {n_classes}"):
        calibrator.transform(mismatched)
    with pytest.raises(ValueError, match="NaN"):
        calibrator.transform(nan_logits)


def test_from_dict_rejects_malformed_input(data):
    stored = TemperatureScaling().fit(*data).to_dict()
    with pytest.raises(ValueError, match="keys"):
        Calibrator.from_dict({"name": "temperature_scaling"})
    with pytest.raises(ValueError, match="missing"):
        Calibrator.from_dict({**stored, "fitted": {"n_classes_": 4}})
    with pytest.raises(ValueError, match="not a VectorScaling"):
        VectorScaling.from_dict(stored)


# -- fixed maps -----------------------------------------------------------------------------------
def test_identity_and_psi_are_softmax_and_psi_of_softmax(data):
    logits, labels = data
    np.testing.assert_allclose(IdentityCalibration().fit_transform(logits, labels), softmax(logits, axis=1), atol=1e-15)
    np.testing.assert_allclose(
        PsiCalibration(gamma=3.0).fit_transform(logits, labels), psi(softmax(logits, axis=1), 3.0), atol=1e-12
    )
    assert calibration.psi is psi
    with pytest.raises(ValueError, match="gamma"):
        PsiCalibration(gamma=-1.0).fit(logits, labels)


# -- vector / matrix scaling ----------------------------------------------------------------------
def test_vector_scaling_recovers_known_per_class_scale_and_bias():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(30000, 4)) * 2
    scale, bias = np.array([0.5, 1.5, 1.0, 2.0]), np.array([0.3, -0.2, 0.5, -0.6])
    labels = sample_labels(rng, softmax(logits * scale + bias, axis=1))
    fitted = VectorScaling().fit(logits, labels)
    np.testing.assert_allclose(fitted.scale_, scale, atol=0.06)
    # the softmax ignores a common shift of the biases
    np.testing.assert_allclose(fitted.bias_ - fitted.bias_.mean(), bias - bias.mean(), atol=0.06)


def _scaling_objective(params, logits, labels, k, kind):
    if kind == "vector":
        scores = logits * params[:k] + params[k:]
    else:
        scores = logits @ params[: k * k].reshape(k, k).T + params[k * k :]
    return -log_softmax(scores, axis=1)[np.arange(len(labels)), labels].mean()


@pytest.mark.parametrize("kind", ["vector", "matrix"])
def test_scaling_reaches_the_same_optimum_as_scipy_bfgs(kind, data):
    logits, labels = data
    k = logits.shape[1]
    fitted = (VectorScaling() if kind == "vector" else MatrixScaling()).fit(logits, labels)
    start = np.concatenate([np.ones(k), np.zeros(k)]) if kind == "vector" else np.concatenate([np.eye(k).ravel(), np.zeros(k)])
    reference = minimize(_scaling_objective, start, args=(logits, labels, k, kind), method="BFGS", options={"gtol": 1e-10})
    ours = np.concatenate([fitted.scale_.ravel(), fitted.bias_]) if kind == "vector" else np.concatenate(
        [fitted.weight_.ravel(), fitted.bias_]
    )
    assert _scaling_objective(ours, logits, labels, k, kind) <= reference.fun + 1e-9


@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_vector_scaling_newton_fit_is_stationary_and_matches_lbfgs_on_many_classes(l2):
    """Newton with the exact Hessian against the penalised objective's autograd gradient and scipy L-BFGS-B."""
    import torch

    rng = np.random.default_rng(3)
    k = 20
    logits = rng.normal(size=(3000, k)) * 3
    labels = sample_labels(rng, softmax(logits * rng.uniform(0.3, 1.2, k) + rng.normal(0, 0.5, k), axis=1))
    fitted = VectorScaling(l2=l2).fit(logits, labels)

    def objective(params):
        return _scaling_objective(params, logits, labels, k, "vector") + l2 / k * (((params[:k] - 1) ** 2).sum()
                                                                                    + (params[k:] ** 2).sum())

    ours = np.concatenate([fitted.scale_, fitted.bias_])
    params = torch.tensor(ours, requires_grad=True)
    z = torch.as_tensor(logits) * params[:k] + params[k:]
    loss = torch.nn.functional.cross_entropy(z, torch.as_tensor(labels)) + l2 / k * (
        ((params[:k] - 1) ** 2).sum() + (params[k:] ** 2).sum())
    loss.backward()
    assert np.abs(params.grad.numpy()).max() < 1e-9
    reference = minimize(objective, np.concatenate([np.ones(k), np.zeros(k)]), method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000})
    assert objective(ours) <= reference.fun + 1e-10
    if l2 > 0:  # a unique optimum
        np.testing.assert_allclose(ours, reference.x, atol=1e-4)


def test_matrix_scaling_odir_penalty_shrinks_off_diagonal_weights(data):
    logits, labels = data
    off = ~np.eye(4, dtype=bool)
    free = MatrixScaling().fit(logits, labels).weight_[off]
    shrunk = MatrixScaling(off_diagonal_l2=10.0, bias_l2=10.0).fit(logits, labels).weight_[off]
    assert np.abs(shrunk).sum() < 0.5 * np.abs(free).sum()


# -- histogram binning / isotonic --------------------------------------------------------------------
@pytest.fixture(scope="module")
def overconfident():
    """Validation and test logits 3x too sharp for their labels."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(8000, 5)) * 1.5
    labels = sample_labels(rng, softmax(logits, axis=1))
    return 3 * logits[:4000], labels[:4000], 3 * logits[4000:], labels[4000:]


@pytest.mark.parametrize("calibrator", [HistogramBinning(), HistogramBinning(binning="mass"), IsotonicCalibration()])
def test_binning_calibrators_reduce_test_ece_of_an_overconfident_model(calibrator, overconfident):
    val_logits, val_labels, test_logits, test_labels = overconfident
    before = ece(softmax(test_logits, axis=1), test_labels)
    probs = calibrator.fit(val_logits, val_labels).transform(test_logits)
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-12)
    assert ece(probs, test_labels) < 0.5 * before


def test_isotonic_matches_sklearn(overconfident):
    val_logits, val_labels, test_logits, _ = overconfident
    fitted = IsotonicCalibration().fit(val_logits, val_labels)
    val_probs, test_probs = softmax(val_logits, axis=1), softmax(test_logits, axis=1)
    one_class = SklearnIsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(val_probs[:, 2], val_labels == 2)
    unnormalised = np.column_stack([np.interp(test_probs[:, k], x, y) for k, (x, y) in
                                    enumerate(zip(fitted.x_thresholds_, fitted.y_thresholds_))])  # fmt: skip
    np.testing.assert_allclose(unnormalised[:, 2], one_class.predict(test_probs[:, 2]), atol=1e-12)


@pytest.mark.parametrize("case", ["spread", "rounded", "near_equal"])
def test_isotonic_thresholds_are_sklearns_bit_for_bit(case):
    """The fit without scikit-learn: the same breakpoints to the last bit, ties in x (averaged) and
    x closer than float64's resolution (merged into their group's first) included."""
    from focalcal.calibration.binning import isotonic_thresholds

    rng = np.random.default_rng(["spread", "rounded", "near_equal"].index(case))
    for n in (1, 2, 7, 500, 3000):
        x = rng.uniform(size=n) ** rng.uniform(0.2, 5)
        if case == "rounded":
            x = np.round(x, 2)
        if case == "near_equal":  # runs of x 1.1e-16 apart, each within 1e-15 of a run's first
            x = 1 - rng.integers(0, 20, n) * 1.1e-16
        y = (rng.uniform(size=n) < x).astype(np.float64)
        theirs = SklearnIsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(x, y)
        ours = isotonic_thresholds(x, y)
        np.testing.assert_array_equal(ours[0], theirs.X_thresholds_)
        np.testing.assert_array_equal(ours[1], theirs.y_thresholds_)


def test_isotonic_classes_absent_from_the_labels_store_what_sklearn_fits():
    rng = np.random.default_rng(3)
    logits, labels = rng.normal(size=(40, 50)) * 2, rng.integers(0, 5, 40)  # classes 5..49 never seen
    fitted = IsotonicCalibration().fit(logits, labels)
    probs = softmax(logits, axis=1)
    for k in (0, 4, 5, 49):
        theirs = SklearnIsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(probs[:, k], labels == k)
        np.testing.assert_array_equal(fitted.x_thresholds_[k], theirs.X_thresholds_)
        np.testing.assert_array_equal(fitted.y_thresholds_[k], theirs.y_thresholds_)
