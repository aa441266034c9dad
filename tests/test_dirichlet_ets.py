"""Dirichlet calibration (ODIR) and ensemble temperature scaling against independent solutions.

The `dirichletcal` package cannot be installed (its PyPI sdist, 0.3.dev4, has a malformed
install_requires and fails to build), so Dirichlet calibration is checked against two other
solvers of the same convex problem: scikit-learn's unpenalised multinomial logistic regression
on log q, and scipy's L-BFGS-B on the penalised objective written out in numpy here.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp, softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from focalcal.calibration import Calibrator, DirichletCalibration, EnsembleTemperatureScaling
from focalcal.calibration.ensemble import simplex_least_squares, squared_error


def draw(rng, n, k, temperature=2.0, scale=3.0):
    logits = rng.normal(size=(n, k)) * scale
    probs = softmax(logits / temperature, axis=1)
    labels = (rng.uniform(size=(n, 1)) > probs.cumsum(axis=1)).sum(axis=1)
    return logits, labels


def test_dirichlet_without_penalty_is_multinomial_logistic_regression_on_log_probabilities():
    rng = np.random.default_rng(0)
    logits, labels = draw(rng, 3000, 4)
    ours = DirichletCalibration(off_diagonal_l2=0.0, bias_l2=0.0).fit(logits, labels)
    features = log_softmax(logits, axis=1)
    reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=5000).fit(features, labels)
    np.testing.assert_allclose(ours.transform(logits), reference.predict_proba(features), atol=2e-5)


def _odir_objective(parameters, features, labels, off_l2, bias_l2):
    k = features.shape[1]
    weight, bias = parameters[: k * k].reshape(k, k), parameters[k * k:]
    scores = features @ weight.T + bias
    log_q = scores - logsumexp(scores, axis=1, keepdims=True)
    n = len(labels)
    off = ~np.eye(k, dtype=bool)
    value = -log_q[np.arange(n), labels].mean() + off_l2 * (weight[off] ** 2).sum() / (k * (k - 1)) \
        + bias_l2 * (bias**2).sum() / k
    residual = np.exp(log_q)
    residual[np.arange(n), labels] -= 1.0
    grad_weight = residual.T @ features / n + 2 * off_l2 * np.where(off, weight, 0.0) / (k * (k - 1))
    grad_bias = residual.mean(axis=0) + 2 * bias_l2 * bias / k
    return value, np.concatenate([grad_weight.ravel(), grad_bias])


@pytest.mark.parametrize("off_l2, bias_l2", [(0.1, 0.1), (1.0, 0.01)])
def test_dirichlet_odir_matches_an_independent_lbfgsb_solution(off_l2, bias_l2):
    rng = np.random.default_rng(1)
    logits, labels = draw(rng, 1500, 5)
    ours = DirichletCalibration(off_diagonal_l2=off_l2, bias_l2=bias_l2).fit(logits, labels)
    features = log_softmax(logits, axis=1)
    start = np.concatenate([np.eye(5).ravel(), np.zeros(5)])
    result = minimize(_odir_objective, start, args=(features, labels, off_l2, bias_l2), jac=True,
                      method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10000})
    np.testing.assert_allclose(ours.weight_, result.x[:25].reshape(5, 5), atol=1e-4)
    np.testing.assert_allclose(ours.bias_, result.x[25:], atol=1e-4)
    penalised = DirichletCalibration(off_diagonal_l2=100.0, bias_l2=100.0).fit(logits, labels)
    off = ~np.eye(5, dtype=bool)
    assert np.abs(penalised.weight_[off]).max() < np.abs(ours.weight_[off]).max()  # ODIR shrinks off-diagonals


@pytest.mark.parametrize("seed, scale", [(0, 3.0), (0, 8.0), (1, 8.0), (2, 8.0)])
def test_dirichlet_reaches_the_odir_optimum_of_a_few_hundred_confident_samples(seed, scale):
    """K = 10, 300 validation samples of an overconfident model (log q down to about -100):
    a badly conditioned problem where 500 L-BFGS iterations stop ~2 % above the optimum.
    The fit must end within 1e-7 (relative) of a tight scipy L-BFGS-B solve, without a warning."""
    rng = np.random.default_rng(seed)
    logits, labels = draw(rng, 300, 10, temperature=0.5, scale=scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = DirichletCalibration().fit(logits, labels)
    features = log_softmax(logits, axis=1)
    value = _odir_objective(np.concatenate([ours.weight_.ravel(), ours.bias_]), features, labels, 1e-2, 1e-2)[0]
    start = np.concatenate([np.eye(10).ravel(), np.zeros(10)])
    tight = minimize(_odir_objective, start, args=(features, labels, 1e-2, 1e-2), jac=True, method="L-BFGS-B",
                     options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 100000, "maxfun": 200000, "maxcor": 30})
    assert tight.nit > 500  # the problem the iteration cap fell short on
    assert abs(value - tight.fun) <= 1e-7 * tight.fun
    assert value <= tight.fun * (1 + 1e-12)  # and no worse than the independent solve


def test_dirichlet_stopped_by_its_iteration_cap_warns_naming_itself():
    rng = np.random.default_rng(0)
    logits, labels = draw(rng, 300, 10, temperature=0.5, scale=8.0)
    with pytest.warns(ConvergenceWarning, match=r"^dirichlet calibration did not converge: 3 iterations"):
        DirichletCalibration(max_iter=3).fit(logits, labels)
    with pytest.raises(ValueError, match=r"DirichletCalibration: tol must be a real number in \(0, inf\), got 0.0"):
        DirichletCalibration(tol=0.0).fit(logits, labels)


def test_dirichlet_round_trips_through_json_and_refuses_bad_penalties():
    rng = np.random.default_rng(2)
    logits, labels = draw(rng, 400, 3)
    fitted = DirichletCalibration().fit(logits, labels)
    again = Calibrator.from_dict(fitted.to_dict())
    assert isinstance(again, DirichletCalibration)
    np.testing.assert_array_equal(again.transform(logits), fitted.transform(logits))
    with pytest.raises(ValueError, match=r"DirichletCalibration: off_diagonal_l2 must be a real number in \[0, inf\), got -1.0"):
        DirichletCalibration(off_diagonal_l2=-1.0).fit(logits, labels)


def test_simplex_least_squares_recovers_closed_form_weights():
    rng = np.random.default_rng(3)
    components = rng.normal(size=(3, 50))
    # a target inside the simplex's span: the weights that made it
    inside = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(simplex_least_squares(components, inside @ components), inside, atol=1e-10)
    # a target at a vertex's far side: all weight on that vertex
    assert simplex_least_squares(components, 3 * components[1] - components[0] - components[2]).tolist() == [0, 1, 0]
    # an arbitrary target: the same minimum as SLSQP on the simplex (the released code's solver)
    target = rng.normal(size=50)

    def loss(w):
        return float(np.sum((w @ components - target) ** 2))

    ours = simplex_least_squares(components, target)
    reference = minimize(loss, np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3, tol=1e-14,
                         constraints={"type": "eq", "fun": lambda w: w.sum() - 1})
    assert abs(ours.sum() - 1) < 1e-12 and ours.min() >= 0
    assert loss(ours) <= reference.fun + 1e-9
    np.testing.assert_allclose(ours, reference.x, atol=1e-5)


def test_ets_recovers_the_temperature_and_weights_of_a_tempered_model():
    """Labels drawn from softmax(z / 2): the temperature-scaled component alone is the true
    posterior, so ETS puts (almost) all weight on it, at T near 2."""
    rng = np.random.default_rng(4)
    logits, labels = draw(rng, 20000, 4, temperature=2.0)
    ets = EnsembleTemperatureScaling().fit(logits, labels)
    assert ets.temperature_ == pytest.approx(2.0, rel=0.05)
    assert ets.weights_[0] > 0.95 and ets.weights_.sum() == pytest.approx(1.0, abs=1e-12)
    probs = ets.transform(logits)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    # the weights minimise the released code's squared error among simplex mixtures at this T
    components = ets._components(logits, ets.temperature_)
    for other in ([1.0, 0.0, 0.0], [0.8, 0.1, 0.1], [0.9, 0.0, 0.1]):
        mixed = np.tensordot(np.array(other), components, axes=1)
        assert squared_error(probs, labels) <= squared_error(mixed, labels) + 1e-15
    again = Calibrator.from_dict(ets.to_dict())
    np.testing.assert_array_equal(again.transform(logits[:50]), ets.transform(logits[:50]))


def test_ets_mixes_in_the_uniform_prediction_for_an_overconfident_uninformative_model():
    """Labels independent of the logits: the best mixture leans on the uniform prediction."""
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(5000, 3)) * 5
    labels = rng.integers(0, 3, size=5000)
    ets = EnsembleTemperatureScaling().fit(logits, labels)
    assert ets.weights_[2] > 0.5


def test_above_twenty_classes_newton_cg_reaches_the_optimum_dense_newton_reaches(monkeypatch):
    """K = 21: the Newton-CG path (Hessian-vector products, no dense Hessian) against Newton's
    method with the dense Hessian on the same problem."""
    from focalcal.calibration import scaling

    rng = np.random.default_rng(4)
    logits, labels = draw(rng, 300, 21)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_newton_cg = DirichletCalibration(off_diagonal_l2=1.0, bias_l2=1.0).fit(logits, labels)
        monkeypatch.setattr(scaling, "NEWTON_MAX_CLASSES", 21)
        by_newton = DirichletCalibration(off_diagonal_l2=1.0, bias_l2=1.0).fit(logits, labels)
    features = log_softmax(logits, axis=1)
    values = [_odir_objective(np.concatenate([fit.weight_.ravel(), fit.bias_]), features, labels, 1.0, 1.0)[0]
              for fit in (by_newton_cg, by_newton)]
    assert abs(values[0] - values[1]) <= 1e-10 * values[1]
    np.testing.assert_allclose(by_newton_cg.weight_, by_newton.weight_, atol=1e-5)
    with pytest.warns(ConvergenceWarning, match=r"^dirichlet calibration did not converge: 5 iterations"):
        DirichletCalibration(max_iter=5).fit(logits, labels)  # the Newton-CG path's cap warns too


def test_newton_cg_reaches_a_tight_independent_optimum_at_thirty_classes():
    """K = 30, 500 samples of an overconfident model, default ODIR penalties: the fit ends within
    1e-7 (relative) of a tight scipy L-BFGS-B solve of the objective written out here, and no
    worse than it, without a warning."""
    rng = np.random.default_rng(5)
    logits, labels = draw(rng, 500, 30, temperature=0.7, scale=4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = DirichletCalibration().fit(logits, labels)
    features = log_softmax(logits, axis=1)
    value = _odir_objective(np.concatenate([ours.weight_.ravel(), ours.bias_]), features, labels, 1e-2, 1e-2)[0]
    start = np.concatenate([np.eye(30).ravel(), np.zeros(30)])
    tight = minimize(_odir_objective, start, args=(features, labels, 1e-2, 1e-2), jac=True, method="L-BFGS-B",
                     options={"ftol": 0.0, "gtol": 1e-11, "maxiter": 100000, "maxfun": 200000, "maxcor": 30})
    assert abs(value - tight.fun) <= 1e-7 * tight.fun
    assert value <= tight.fun * (1 + 1e-12)


def _odir_hessian(parameters, features, labels, off_l2, bias_l2):
    """The dense Hessian of :func:`_odir_objective` (parameters: W row by row, then b)."""
    k, n = features.shape[1], len(labels)
    weight, bias = parameters[: k * k].reshape(k, k), parameters[k * k:]
    probs = softmax(features @ weight.T + bias, axis=1)
    design = np.column_stack([features, np.ones(n)])
    # d²/dθ_ia dθ_jb = mean(p_i (δ_ij − p_j) x̃_a x̃_b), in the order (W_ia, b_i) = θ_i,(a ≤ k)
    full = (np.einsum("ni,ij,na,nb->iajb", probs, np.eye(k), design, design)
            - np.einsum("ni,nj,na,nb->iajb", probs, probs, design, design)) / n
    off = ~np.eye(k, dtype=bool)
    ridge = np.column_stack([np.where(off, 2 * off_l2 / (k * (k - 1)), 0.0), np.full(k, 2 * bias_l2 / k)])
    full = full.reshape(k * (k + 1), k * (k + 1)) + np.diag(ridge.ravel())
    order = np.concatenate([(np.arange(k)[:, None] * (k + 1) + np.arange(k)).ravel(), np.arange(k) * (k + 1) + k])
    return full[np.ix_(order, order)]


@pytest.mark.parametrize("name", ["stand_in", "overconfident", "underconfident", "focal", "near_separable"])
def test_newton_cg_reaches_each_benchmark_inputs_optimum_at_eight_classes(name, monkeypatch):
    """Each input of ``python -m bench dirichlet`` at K = 8 × 600 (float32 logits, as a run writes
    them; the near-separable one's log q reaches about -25): the Newton-CG fit, reached through
    ``DirichletCalibration`` and directly with each preconditioner and start, ends within 1e-9
    (relative) of scipy's trust-exact on the objective and dense Hessian written out here, polished
    by full Newton steps to a gradient norm of 1e-11 or less; so do the fits with float64
    Hessian-vector products throughout and from the second Newton step on (the default forms them
    in float32 while its CG solves reach their targets), and those whose model caps no wrong row's
    promised decrease at its loss, or caps it down to the optimum. The diagonal-and-bias start, not
    the optimum, fails that check."""
    from bench.bench_dirichlet import input_logits, odir_penalty
    from focalcal.calibration import scaling

    logits, labels = input_logits(name, 600, 8, seed=3, train_size=3000)
    assert logits.dtype == np.float32
    features = log_softmax(logits.astype(np.float64), axis=1)
    k = 8
    start = np.concatenate([np.eye(k).ravel(), np.zeros(k)])
    tight = minimize(_odir_objective, start, args=(features, labels, 1e-2, 1e-2), jac=True, hess=_odir_hessian,
                     method="trust-exact", options={"gtol": 1e-12, "maxiter": 1000})
    reference = tight.x
    for _ in range(10):  # full Newton steps from there: trust-exact stops where rounding blurs its model's ratio
        value, gradient = _odir_objective(reference, features, labels, 1e-2, 1e-2)
        if np.linalg.norm(gradient) <= 1e-12:
            break
        reference = reference - np.linalg.solve(_odir_hessian(reference, features, labels, 1e-2, 1e-2), gradient)
    value, gradient = _odir_objective(reference, features, labels, 1e-2, 1e-2)
    assert np.linalg.norm(gradient) <= 1e-11

    def gap(params):  # params: [W | b], (K, K + 1)
        flat = np.concatenate([params[:, :k].ravel(), params[:, k]])
        return (_odir_objective(flat, features, labels, 1e-2, 1e-2)[0] - value) / value

    monkeypatch.setattr(scaling, "NEWTON_MAX_CLASSES", 2)  # the Newton-CG path at K = 8
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = DirichletCalibration().fit(logits, labels)
    assert abs(gap(np.column_stack([fitted.weight_, fitted.bias_]))) <= 1e-9
    penalty = odir_penalty(k)
    for options in ({}, {"preconditioner": "diagonal"}, {"warm_start": False},
                    {"warm_start": False, "preconditioner": "diagonal", "optimal_shift": False}):
        params, (converged, _, _) = scaling.fit_matrix_scaling_newton_cg(features, labels, penalty, 10000,
                                                                                1e-10, **options)
        assert converged, options
        assert abs(gap(params)) <= 1e-9, options
    default_cap = scaling.SINGLE_PRECISION_MAX_PRODUCTS
    for cap in (None, 1):  # float64 products throughout; float64 after a first float32 solve cut off at one product
        monkeypatch.setattr(scaling, "SINGLE_PRECISION_MAX_PRODUCTS", cap)
        params, (converged, _, _) = scaling.fit_matrix_scaling_newton_cg(features, labels, penalty, 10000, 1e-10)
        assert converged and abs(gap(params)) <= 1e-9, cap
    monkeypatch.setattr(scaling, "SINGLE_PRECISION_MAX_PRODUCTS", default_cap)
    default_change = scaling.REBUILD_TRACE_CHANGE
    for change in (0.0, np.inf):  # rebuilds on the products alone; never a rebuild after the first blocks
        monkeypatch.setattr(scaling, "REBUILD_TRACE_CHANGE", change)
        params, (converged, _, _) = scaling.fit_matrix_scaling_newton_cg(features, labels, penalty, 10000, 1e-10)
        assert converged and abs(gap(params)) <= 1e-9, change
    monkeypatch.setattr(scaling, "REBUILD_TRACE_CHANGE", default_change)
    for rms in (np.inf, 0.0):  # the wrong rows' cap never taken; taken down to the optimum
        monkeypatch.setattr(scaling, "LOSS_CAP_GRADIENT_RMS", rms)
        params, (converged, _, _) = scaling.fit_matrix_scaling_newton_cg(features, labels, penalty, 10000, 1e-10)
        assert converged and abs(gap(params)) <= 1e-9, rms
    assert gap(scaling._diagonal_start(features, labels, penalty)) > 1e-6


def test_loss_capped_rows_promise_no_more_than_their_loss():
    """``_loss_capped_rows`` picks the rows with p_y < ½ whose quadratic model along their gradient
    r = p − onehot(y), with the Hessian diag(p) − ppᵀ written out as a matrix here, promises a
    decrease ‖r‖⁴ / (2 rᵀ A r) beyond their loss logsumexp(z) − z_y, and its weight a makes the
    promise of A + a r rᵀ exactly that loss. The wrong rows it leaves keep promises within their
    loss, and no row with p_y ≥ ½ is picked. With two classes and p_y = 1 − δ the promise is
    δ / (2 (1 − δ)), below the loss −log(1 − δ), for δ from 1e-6 to ½."""
    from focalcal.calibration.scaling import _loss_capped_rows

    rng = np.random.default_rng(21)
    n, k = 3000, 10
    labels = rng.integers(0, k, n)
    logits = rng.normal(0, 1, (n, k)) * rng.choice([0.3, 2.0, 8.0], size=(n, 1))
    logits[np.arange(n), labels] += rng.normal(0, 4, n)
    probs = softmax(logits, axis=1)
    one_hot = np.eye(k)[labels]
    losses = logsumexp(logits, axis=1) - logits[np.arange(n), labels]
    rows, weights = _loss_capped_rows(probs, one_hot, losses)

    promises = np.empty(n)
    for row in range(n):
        residual = probs[row] - one_hot[row]
        hessian = np.diag(probs[row]) - np.outer(probs[row], probs[row])
        promises[row] = (residual @ residual) ** 2 / (2 * residual @ hessian @ residual)
    wrong = probs[np.arange(n), labels] < 0.5
    assert wrong[rows].all()
    np.testing.assert_array_equal(rows, np.flatnonzero(wrong & (promises > losses)))
    assert len(rows) > 300 and (promises[rows] / losses[rows]).max() > 1e3  # confidently wrong rows among them
    for row, weight in zip(rows, weights):
        residual = probs[row] - one_hot[row]
        capped = np.diag(probs[row]) - np.outer(probs[row], probs[row]) + weight * np.outer(residual, residual)
        assert (residual @ residual) ** 2 / (2 * residual @ capped @ residual) == pytest.approx(losses[row], rel=1e-9)
    left = np.setdiff1d(np.flatnonzero(wrong), rows)
    assert len(left) > 100 and (promises[left] <= losses[left]).all()

    delta = np.logspace(-6, np.log10(0.5), 200)
    two = np.column_stack([1 - delta, delta])
    capped_two, _ = _loss_capped_rows(two, np.tile([1.0, 0.0], (200, 1)), -np.log(1 - delta))
    assert len(capped_two) == 0 and (delta / (2 * (1 - delta)) < -np.log(1 - delta)).all()


def test_newton_cg_products_add_the_capped_rows_curvature():
    """With ``capped`` rows, the Hessian-vector product over a subset of the rows equals
    Σ_n ((diag(p_n) − p_n p_nᵀ) + a_n r_n r_nᵀ) U_n x̃_nᵀ / N written out here, r_n = p_n − onehot(y_n),
    to 1e-10 (relative) in float64 and 1e-5 of its largest entry in float32."""
    from focalcal.calibration.scaling import _softmax_hessian_times

    rng = np.random.default_rng(22)
    n, k = 300, 7
    labels = rng.integers(0, k, n)
    design = np.column_stack([log_softmax(rng.normal(0, 3, (n, k)), axis=1), np.ones(n)])
    probs = softmax(rng.normal(0, 4, (n, k)), axis=1)
    residuals = probs - np.eye(k)[labels]
    kept = np.sort(rng.choice(n, 250, replace=False))
    capped = np.sort(rng.choice(kept, 40, replace=False))
    weights = rng.uniform(0.1, 0.7, 40)
    direction = rng.normal(size=(k, k + 1))
    change = design @ direction.T
    expected = np.zeros((k, k + 1))
    extra = dict(zip(capped, weights))
    for row in kept:
        hessian = np.diag(probs[row]) - np.outer(probs[row], probs[row])
        hessian += extra.get(row, 0.0) * np.outer(residuals[row], residuals[row])
        expected += np.outer(hessian @ change[row], design[row]) / n
    top = probs.argmax(axis=1)
    for dtype, tolerance in ((np.float64, 1e-10), (np.float32, 1e-5)):
        given = (np.searchsorted(kept, capped), residuals[capped].astype(dtype), weights.astype(dtype))
        product = _softmax_hessian_times(direction, design[kept].astype(dtype), probs[kept].astype(dtype), top[kept],
                                         n, given)
        assert np.abs(product - expected).max() <= tolerance * np.abs(expected).max(), dtype


@pytest.mark.parametrize("drop", [0.0, 1e-6, 1e-2])
def test_newton_cg_products_leave_out_the_flattest_rows_up_to_their_share_of_the_trace(drop):
    """``_rows_carrying`` leaves out the rows of smallest trace term Σ_i v_ni ‖x̃_n‖², as many as
    fit in ``drop`` of the total and no more; the Hessian-vector product over the rows left, as a
    mean over all N, equals (diag(p) − ppᵀ) U x̃ᵀ summed over those rows and written out here, and
    what the rows left out would add to ⟨V, HV⟩ lies between 0 and ``drop`` × trace(H) ‖V‖²."""
    from focalcal.calibration.scaling import _rows_carrying, _softmax_hessian_times

    rng = np.random.default_rng(14)
    n, k = 600, 10
    labels = rng.integers(0, k, n)
    design = np.column_stack([log_softmax(rng.normal(0, 3, (n, k)), axis=1), np.ones(n)])
    logits = rng.normal(0, 1, (n, k))
    logits[np.arange(n), labels] += 4.0
    probs = softmax(6 * logits, axis=1)  # confident: many rows with 1 − p_top below 1e-6
    terms = (probs * (1 - probs)).sum(axis=1) * (design**2).sum(axis=1)
    kept = _rows_carrying(terms, drop)
    left_out = np.setdiff1d(np.arange(n), kept)
    assert (np.diff(kept) > 0).all()
    assert terms[left_out].sum() <= drop * terms.sum()
    if len(left_out):
        assert terms[left_out].max() <= terms[kept].min()
    assert terms[left_out].sum() + terms[kept].min() > drop * terms.sum()  # no further row would fit
    if drop:  # a fifth of the rows carry under 1e-6 of the trace
        assert len(left_out) >= n // 5

    direction = rng.normal(size=(k, k + 1))
    top = probs.argmax(axis=1)
    product = _softmax_hessian_times(direction, design[kept], probs[kept], top[kept], n)
    change = design[kept] @ direction.T
    coupling = probs[kept] * change - probs[kept] * (probs[kept] * change).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(product, coupling.T @ design[kept] / n, rtol=1e-10, atol=1e-13)
    full = _softmax_hessian_times(direction, design, probs, top)
    added = float(((full - product) * direction).sum())
    assert -1e-12 <= added <= drop * terms.sum() / n * (direction**2).sum() + 1e-12


def test_newton_cg_preconditioner_blocks_equal_one_product_per_class():
    """The block preconditioner's K matrices Σ_n v_ni x̃_n x̃_nᵀ / N, built from the x̃_na x̃_nb pairs
    with a ≤ b in chunks of rows (K = 100: 5,151 pairs, 407 rows a chunk, so 1,000 rows take three
    chunks), equal the K products (x̃ ⊙ v_i)ᵀ x̃ / N written out here, and are symmetric."""
    from focalcal.calibration.scaling import _class_blocks

    rng = np.random.default_rng(11)
    n, k = 1000, 100
    design = np.column_stack([log_softmax(rng.normal(0, 3, (n, k)), axis=1), np.ones(n)])
    probs = softmax(rng.normal(0, 2, (n, k)), axis=1)
    variance = probs * (1 - probs)
    expected = np.stack([(design * variance[:, i:i + 1]).T @ design / n for i in range(k)])
    blocks, share = _class_blocks(design, variance)
    assert blocks.shape == (k, k + 1, k + 1) and share == 1.0
    np.testing.assert_allclose(blocks, expected, rtol=1e-12, atol=1e-15 * np.abs(expected).max())
    np.testing.assert_array_equal(blocks, blocks.transpose(0, 2, 1))


@pytest.mark.parametrize("scale", [2.0, 12.0])
def test_newton_cg_preconditioner_blocks_leave_out_at_most_their_share_of_each_trace(scale):
    """With ``drop``, class i's block leaves out the rows whose v_ni ‖x̃_n‖² is below ``drop`` times
    its mean: what is left out is positive semi-definite with trace at most ``drop`` of the whole
    block's, the rows kept give exactly their sum, and the share kept is counted. Confident
    probabilities (scale 12) keep few pairs and take the class-by-class path; smooth ones (2) keep
    most, and then all rows are summed, in one product (share 1)."""
    from focalcal.calibration.scaling import CLASS_BY_CLASS_BELOW, _class_blocks

    rng = np.random.default_rng(12)
    n, k, drop = 800, 30, 1e-2
    design = np.column_stack([log_softmax(rng.normal(0, 3, (n, k)), axis=1), np.ones(n)])
    probs = softmax(rng.normal(0, scale, (n, k)), axis=1)
    variance = probs * (1 - probs)
    terms = variance * (design**2).sum(axis=1)[:, None]
    kept = terms >= drop * terms.mean(axis=0)
    full = np.stack([(design * variance[:, i:i + 1]).T @ design / n for i in range(k)])
    blocks, share = _class_blocks(design, variance, drop)
    assert (kept.mean() <= CLASS_BY_CLASS_BELOW) == (scale == 12.0)
    if kept.mean() <= CLASS_BY_CLASS_BELOW:
        assert share == pytest.approx(kept.mean())
        left_in = np.stack([(design * (variance * kept)[:, i:i + 1]).T @ design / n for i in range(k)])
        np.testing.assert_allclose(blocks, left_in, rtol=1e-10, atol=1e-14 * np.abs(full).max())
        left_out = full - blocks
        assert np.linalg.eigvalsh(left_out).min() >= -1e-12 * np.abs(full).max()
        assert (np.trace(left_out, axis1=1, axis2=2) <= drop * np.trace(full, axis1=1, axis2=2) + 1e-15).all()
        assert kept.mean() < 0.5 and (np.trace(left_out, axis1=1, axis2=2) > 0).any()
    else:  # most pairs count: all of them, in one product
        assert share == 1.0
        np.testing.assert_allclose(blocks, full, rtol=1e-12, atol=1e-15 * np.abs(full).max())
    np.testing.assert_array_equal(blocks, blocks.transpose(0, 2, 1))


def test_newton_cg_preconditioner_factors_invert_each_block():
    """R_i R_iᵀ B_i = I for each block's float32 factor R_i (to float32's resolution relative to B_i's
    condition number), and a block that is singular at float64 resolution still gets a factor."""
    from focalcal.calibration.scaling import _inverse_factors

    rng = np.random.default_rng(13)
    k, width = 6, 9
    rows = rng.normal(size=(k, 40, width))
    blocks = rows.transpose(0, 2, 1) @ rows / 40 + 1e-3 * np.eye(width)
    blocks[-1] = np.outer(rows[-1, 0], rows[-1, 0])  # rank one: not positive definite
    factors = _inverse_factors(blocks)
    assert factors.dtype == np.float32
    for block, factor in zip(blocks[:-1], factors[:-1]):
        product = factor.astype(np.float64) @ factor.T.astype(np.float64) @ block
        np.testing.assert_allclose(product, np.eye(width), atol=1e-7 * np.linalg.cond(block))
    assert np.isfinite(factors[-1]).all() and np.abs(np.triu(factors[-1])).max() > 0


@pytest.mark.parametrize("confidence", [1e-3, 1e-9])
def test_newton_cg_single_precision_products_keep_their_digits_on_confident_rows(confidence):
    """The float32 Hessian-vector product equals the one written out here in float64 with
    U_i − Σ_j p_j U_j as Σ_j p_j (U_i − U_j) (relative error 1e-5 of its largest entry) on rows whose
    most probable class has 1 − p = ``confidence``: the change of the logits is taken relative to
    that class first. Taken as U_top − Σ_j p_j U_j in float32, the top class's term loses every
    digit at 1e-9 (checked: an error above 1e-2)."""
    from focalcal.calibration.scaling import _softmax_hessian_times

    rng = np.random.default_rng(14)
    n, k = 400, 12
    design = np.column_stack([log_softmax(rng.normal(0, 3, (n, k)), axis=1), np.ones(n)])
    top = rng.integers(0, k, n)
    rest = rng.dirichlet(np.ones(k - 1), n) * confidence
    probs = np.empty((n, k))
    for row in range(n):
        probs[row, np.arange(k) != top[row]] = rest[row]
        probs[row, top[row]] = 1 - confidence
    direction = rng.normal(size=(k, k + 1))
    change = design @ direction.T  # U; U_i − Σ_j p_j U_j as Σ_j p_j (U_i − U_j), exact to float64 here
    centred = ((change[:, :, None] - change[:, None, :]) * probs[:, None, :]).sum(axis=2)
    expected = (probs * centred).T @ design / n
    single = _softmax_hessian_times(direction, design.astype(np.float32), probs.astype(np.float32), top)
    assert np.abs(single - expected).max() <= 1e-5 * np.abs(expected).max()
    assert np.abs(_softmax_hessian_times(direction, design, probs, top) - expected).max() <= (
        1e-12 * np.abs(expected).max())
    if confidence == 1e-9:
        design32, probs32 = design.astype(np.float32), probs.astype(np.float32)
        change32 = design32 @ direction.T.astype(np.float32)
        naive = (probs32 * (change32 - (probs32 * change32).sum(axis=1, keepdims=True))).T @ design32 / n
        assert np.abs(naive - expected).max() > 1e-2 * np.abs(expected).max()


