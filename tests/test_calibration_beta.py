"""Beta calibration (Kull et al. 2017): a logistic regression on (ln s, −ln(1 − s)) with a, b ≥ 0,
checked against scikit-learn's unpenalised logistic regression, against the map it was
generated from, and at scores that round to 0 or 1."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from focalcal.calibration import BetaCalibration, Calibrator, build
from focalcal.calibration.beta import SeparableDataWarning, beta_features


def binary_logits(n, a, b, c, seed=0):
    """Logits whose class-1 score s ~ U(0.02, 0.98), labels drawn from the beta map (a, b, c)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.02, 0.98, n)
    logits = np.stack([np.zeros(n), np.log(s) - np.log1p(-s)], axis=1)
    q = expit(a * np.log(s) - b * np.log1p(-s) + c)
    return logits, (rng.uniform(size=n) < q).astype(np.int64)


def test_parameters_equal_sklearns_unpenalised_logistic_regression():
    logits, labels = binary_logits(3000, 1.6, 0.7, 0.3)
    fitted = BetaCalibration().fit(logits, labels)
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(beta_features(logits), labels)
    np.testing.assert_allclose([fitted.a_, fitted.b_], reference.coef_[0], rtol=1e-6)
    assert fitted.c_ == pytest.approx(reference.intercept_[0], rel=1e-6)
    probs = fitted.transform(logits)
    np.testing.assert_allclose(probs[:, 1], reference.predict_proba(beta_features(logits))[:, 1], rtol=1e-5)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=0, atol=1e-15)


def test_recovers_the_map_the_labels_were_drawn_from():
    logits, labels = binary_logits(200_000, 2.0, 0.5, -0.4, seed=1)
    fitted = BetaCalibration().fit(logits, labels)
    assert (fitted.a_, fitted.b_, fitted.c_) == pytest.approx((2.0, 0.5, -0.4), abs=0.05)


@pytest.mark.parametrize("negative", ["a", "b"])
def test_a_negative_weight_is_refitted_without_its_feature(negative):
    """The released package's rule: a < 0 -> refit on −ln(1 − s) alone (a = 0); else b < 0 ->
    refit on ln s alone (b = 0). The refit equals sklearn's one-feature regression."""
    a, b = (-1.0, 1.5) if negative == "a" else (1.5, -1.0)
    logits, labels = binary_logits(20_000, a, b, 0.0, seed=2)
    features = beta_features(logits)
    assert (LogisticRegression(C=np.inf).fit(features, labels).coef_[0][0 if negative == "a" else 1]) < 0
    fitted = BetaCalibration().fit(logits, labels)
    kept = 1 if negative == "a" else 0
    reference = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(features[:, [kept]], labels)
    assert getattr(fitted, f"{negative}_") == 0.0
    assert getattr(fitted, "b_" if negative == "a" else "a_") == pytest.approx(reference.coef_[0][0], rel=1e-6)
    assert fitted.c_ == pytest.approx(reference.intercept_[0], rel=1e-6, abs=1e-9)
    grid = np.stack([np.zeros(99), np.linspace(-30, 30, 99)], axis=1)  # monotone in the score
    assert np.all(np.diff(fitted.transform(grid)[:, 1]) >= 0)


def test_scores_that_round_to_0_or_1_keep_finite_features_and_probabilities():
    logits, labels = binary_logits(2000, 1.2, 0.8, 0.1, seed=3)
    fitted = BetaCalibration().fit(logits.astype(np.float32), labels)
    extreme = np.array([[0.0, 60.0], [0.0, -60.0], [50.0, -50.0]], dtype=np.float32)  # s = 1 or 0 in float32
    features = beta_features(extreme.astype(np.float64))
    assert np.isfinite(features).all() and features[0, 1] == pytest.approx(60.0, rel=1e-12)
    probs = fitted.transform(extreme)
    assert np.isfinite(probs).all()
    assert probs[0, 1] > 0.999 and probs[1, 1] < 0.001 and probs[2, 1] < 1e-20


def test_json_round_trip_and_registry():
    logits, labels = binary_logits(500, 1.0, 1.0, 0.0, seed=4)
    fitted = build({"name": "beta"}).fit(logits, labels)
    restored = Calibrator.from_dict(json.loads(json.dumps(fitted.to_dict())))
    assert isinstance(restored, BetaCalibration)
    np.testing.assert_array_equal(restored.transform(logits), fitted.transform(logits))


def test_more_than_two_classes_is_refused():
    with pytest.raises(ValueError, match="binary classifiers: logits must have 2 columns, got 3"):
        BetaCalibration().fit(np.zeros((4, 3)), np.array([0, 1, 2, 0]))


def test_separable_data_warn_that_no_finite_fit_exists():
    """Labels 1 exactly where s > 0.5: a threshold separates the classes, the log loss falls
    toward 0 as the parameters grow, and the fit says so."""
    rng = np.random.default_rng(3)
    s = rng.uniform(0.02, 0.98, 400)
    logits = np.stack([np.zeros(400), np.log(s) - np.log1p(-s)], axis=1)
    labels = (s > 0.5).astype(np.int64)
    with pytest.warns(SeparableDataWarning, match=r"beta calibration: the 400 validation samples are separable"):
        fitted = BetaCalibration().fit(logits, labels)
    assert fitted.a_ + fitted.b_ > 100  # far from any finite optimum: the warning's reason, in numbers
    noisy, noisy_labels = binary_logits(400, 1.6, 0.7, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # overlapping classes: a finite optimum, no warning
        BetaCalibration().fit(noisy, noisy_labels)
