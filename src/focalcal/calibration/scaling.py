r"""Vector and matrix scaling (Guo et al. 2017): softmax(w ⊙ z + b) and softmax(W z + b).

Both minimise the mean validation NLL in float64; the problem is convex
in the parameters (the logits are linear in them). Vector scaling's 2K parameters are fitted
by damped Newton steps with the exact Hessian (a (2K, 2K) system from three (N, K)ᵀ(N, K)
products, where L-BFGS needs hundreds of evaluations for K = 100). Matrix
scaling's K² + K are fitted the same way up to K = :data:`NEWTON_MAX_CLASSES` (a dense
(K² + K)² Hessian), above that by Newton-CG on Hessian-vector products, from the optimum over
the diagonal and the bias, with CG preconditioned by the Hessian's per-class blocks, on the
objective with the rows' common shift solved in closed form (:func:`fit_matrix_scaling_newton_cg`;
``python -m bench dirichlet`` times it on five kinds of logits). On logits of a confident model the problem
is badly conditioned (L-BFGS needs thousands of iterations: capped at 500 it stops short of
the optimum on a few hundred samples), so both fits stop on a tolerance — the largest
gradient entry below ``tol``, or no decrease left at float64 resolution — and a fit that
reaches ``max_iter`` first warns with scikit-learn's ``ConvergenceWarning``, naming the
calibrator. Neither imports torch. Matrix scaling has K² + K parameters and
overfits with many classes; ``off_diagonal_l2``/``bias_l2`` add the ODIR penalty of Kull et
al. 2019 ("Beyond temperature scaling", Dirichlet calibration):

$$
\frac{\lambda_{od}}{K(K-1)} \sum_{i \ne j} W_{ij}^2 + \frac{\lambda_b}{K} \sum_j b_j^2.
$$
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotrf, dtrtri
from scipy.special import log_softmax, softmax
from threadpoolctl import threadpool_limits

from focalcal.calibration._base import Calibrator
from focalcal.core.constraints import NON_NEGATIVE, POSITIVE, POSITIVE_INT


def warn_unconverged(calibrator: str, iterations: int, gradient: float, tol: float) -> None:
    """The scikit-learn-style warning of a fit that reached its iteration cap before its tolerance.

    Imports scikit-learn (a cost every job would pay) only when it warns, for its ``ConvergenceWarning``.

    Args:
        calibrator: The calibrator's name, as the message says it.
        iterations: Number of iterations the fit ran (its ``max_iter``).
        gradient: The largest absolute gradient entry where the fit stopped.
        tol: The tolerance it did not reach.

    Returns:
        None; the warning is the effect.

    Warns:
        sklearn.exceptions.ConvergenceWarning: Always, naming the calibrator and the numbers.

    Examples:
        >>> import warnings
        >>> from focalcal.calibration.scaling import warn_unconverged
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_unconverged("matrix_scaling", 500, 3e-6, 1e-10)
        >>> caught[0].category.__name__, str(caught[0].message).split(":")[0]
        ('ConvergenceWarning', 'matrix_scaling calibration did not converge')
    """
    from sklearn.exceptions import ConvergenceWarning  # here: importing sklearn costs every job CPU

    warnings.warn(f"{calibrator} calibration did not converge: {iterations} iterations (max_iter) ended with the "
                  f"largest gradient entry {gradient:.3g} > tol = {tol:.3g}; raise max_iter or the L2 penalties",
                  ConvergenceWarning, stacklevel=3)


#: Newton-CG rebuilds its block preconditioner after a CG solve that took more Hessian-vector products
#: than this times the share of (row, class) pairs the blocks are built from (:func:`_class_blocks`):
#: built from every pair they cost K (K + 1)(K + 2) / 2 multiply-adds per row, against 2 K (K + 1)
#: for a product, so they are kept while CG still converges fast; built from a few percent of the
#: pairs (the confident rows of a near-separable input) they cost a few products, and a preconditioner
#: that follows the probabilities saves more products than that.
REBUILD_AFTER_PRODUCTS = 30

#: A rebuild the rule above calls for is skipped while no class's trace Σ_n v_ni ‖x̃_n‖² has moved by
#: more than this fraction since the blocks were built: near the optimum, and along a short damped
#: step, the probabilities the blocks came from still hold, and a rebuild would cost products' worth
#: of time for the same blocks.
REBUILD_TRACE_CHANGE = 0.05

#: The block preconditioner leaves out, class by class, the rows whose term v_ni ‖x̃_n‖² of the
#: block's trace is below this fraction of the class's mean term: at most this fraction of each
#: block's trace. A confident row's p(1 − p) is tiny for almost every class, so this leaves out most
#: (row, class) pairs of a near-separable input and few of a smooth one.
BLOCK_TRACE_DROP = 1e-2

#: Blocks built from at most this share of the (row, class) pairs are built class by class, one
#: symmetric rank-k update over the class's rows each; above it, all classes at once from the pairs
#: x̃_na x̃_nb (one large matrix product, faster when most rows count).
CLASS_BY_CLASS_BELOW = 0.5

#: The Hessian-vector products leave out the flattest rows, those that together carry at most this
#: fraction of the Hessian's trace Σ_n Σ_i v_ni ‖x̃_n‖² (:func:`_rows_carrying`). On a near-separable
#: input a fifth of the rows have 1 − p_top below 1e-6 and add nothing a CG solve can use; gradients
#: and objectives keep every row, so the optimum is unchanged.
PRODUCT_TRACE_DROP = 1e-6

#: Newton-CG forms its Hessian-vector products in float32 (half the bytes of float64's to stream) until a CG
#: solve takes more products than this without reaching its target, which is taken as the
#: products having met float32's resolution: float64 from there on (``None``: float64 throughout).
#: Gradients, objectives and steps are float64 always, so the optimum is float64's.
SINGLE_PRECISION_MAX_PRODUCTS = 200

#: Far from the optimum, while the gradient's root mean square entry is at least this, the Newton-CG
#: model caps what each row the fit gets wrong can promise to lose at that row's loss
#: (:func:`_loss_capped_rows`); nearer, the model is the Hessian's own, for Newton's fast local
#: convergence (a smooth input keeps thousands of wrong rows at its optimum).
LOSS_CAP_GRADIENT_RMS = 1e-4

#: Matrix scaling by Newton's method up to this many classes: the dense Hessian has (K² + K)²
#: entries (176,400 at K = 20), built from N·(K² + K)² products.
NEWTON_MAX_CLASSES = 20


def _matrix_scaling_objective(params, design, labels, penalty_weights):
    """Mean NLL of softmax(design @ params.T) plus Σ penalty_weights ⊙ params², and the probabilities."""
    log_probs = log_softmax(design @ params.T, axis=1)
    nll = -log_probs[np.arange(len(labels)), labels].mean()
    return nll + float((penalty_weights * params**2).sum()), np.exp(log_probs)


def fit_matrix_scaling_newton(logits: np.ndarray, labels: np.ndarray, penalty_weights: np.ndarray, max_iter: int,
                              tol: float) -> tuple[np.ndarray, tuple[bool, int, float]]:
    """Matrix scaling's [W | b] by damped Newton steps with the dense Hessian (K ≤ 20 or so).

    The (K, K + 1) parameters minimise mean NLL(softmax(W z + b)) + Σ penalty_weights ⊙ [W | b]².

    With x̃ = [z, 1], p the probabilities and A[n, (i, a)] = p_ni x̃_na, the Hessian is
    blockdiag_i(Σ_n p_ni x̃_n x̃_nᵀ)/N − AᵀA/N (+ 2 diag(penalty_weights)); without a penalty it
    is singular along the shift of every row by one vector (the softmax ignores it), which a
    tiny ridge keeps the step out of. Stops when the largest gradient entry is below ``tol``
    or the Newton decrement is below float64 resolution of the objective.

    Args:
        logits: Float64 array (N, K) of logits.
        labels: Integer array (N,) of class indices in [0, K).
        penalty_weights: Float array (K, K + 1), the L2 weight of each parameter of [W | b]
            (:class:`MatrixScaling` builds it from its ODIR penalties; zeros for none).
        max_iter: Maximum number of Newton steps.
        tol: The fit stops when the largest gradient entry is at most ``tol``.

    Returns:
        ``(params, (converged, iterations, gradient_max))``: float64 array (K, K + 1), the
        weights W in the first K columns and the bias b in the last; whether a stopping test
        (not ``max_iter``) ended the fit; the number of iterations run; the largest absolute
        gradient entry at the end.

    Raises:
        RuntimeError: If the fit diverges to non-finite parameters.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.scaling import fit_matrix_scaling_newton
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.integers(0, 3, size=300)
        >>> logits = 4 * (np.eye(3)[labels] + rng.normal(size=(300, 3)))
        >>> penalty = np.full((3, 4), 1e-3)  # a small L2 penalty on every parameter
        >>> params, (converged, iterations, gradient_max) = fit_matrix_scaling_newton(
        ...     logits, labels, penalty, max_iter=100, tol=1e-10)
        >>> params.shape, converged
        ((3, 4), True)
    """
    n, k = logits.shape
    design = np.column_stack([logits, np.ones(n)])
    one_hot = np.zeros((n, k))
    one_hot[np.arange(n), labels] = 1.0
    params = np.column_stack([np.eye(k), np.zeros(k)])
    value, probs = _matrix_scaling_objective(params, design, labels, penalty_weights)
    size_p = k * (k + 1)
    converged, gradient_max, iteration = False, float("inf"), 0
    for iteration in range(1, max_iter + 1):
        gradient = ((probs - one_hot).T @ design / n + 2 * penalty_weights * params).ravel()
        gradient_max = float(np.abs(gradient).max())
        if gradient_max <= tol:
            converged = True
            break
        weighted = (probs[:, :, None] * design[:, None, :]).reshape(n, size_p)
        hessian = -(weighted.T @ weighted) / n
        blocks = np.einsum("ni,na,nb->iab", probs, design, design) / n
        for i in range(k):
            hessian[i * (k + 1):(i + 1) * (k + 1), i * (k + 1):(i + 1) * (k + 1)] += blocks[i]
        hessian[np.diag_indices(size_p)] += 2 * penalty_weights.ravel() + 1e-12 * max(
            float(np.trace(hessian)) / size_p, 1.0)
        step = np.linalg.solve(hessian, gradient)
        decrease = float(gradient @ step)  # the Newton decrement: the predicted decrease, doubled
        if decrease <= 4 * np.finfo(float).eps * max(abs(value), 1.0):
            converged = True  # no decrease left at float64 resolution: the objective's tolerance
            break
        size = 1.0
        while size > 1e-10:
            candidate = params - size * step.reshape(k, k + 1)
            new_value, new_probs = _matrix_scaling_objective(candidate, design, labels, penalty_weights)
            if new_value <= value - 1e-4 * size * decrease:
                break
            size /= 2
        else:
            converged = decrease <= 1e-12 * max(abs(value), 1.0)  # rounding stops the line search near the optimum
            break
        params, value, probs = candidate, new_value, new_probs
    if not np.isfinite(params).all():
        raise RuntimeError("matrix scaling fit diverged (non-finite parameters); try a positive L2 penalty")
    return params, (converged, iteration, gradient_max)


def _vector_scaling_objective(scale, bias, logits, labels, scale_weights, scale_centre: float, bias_weights):
    """Mean NLL of softmax(scale ⊙ z + bias) plus the L2 penalty, and the probabilities."""
    n = len(logits)
    log_probs = log_softmax(logits * scale + bias, axis=1)
    nll = -log_probs[np.arange(n), labels].mean()
    penalty = (scale_weights * (scale - scale_centre) ** 2).sum() + (bias_weights * bias**2).sum()
    return nll + penalty, np.exp(log_probs)


def _fit_vector_scaling_newton(logits, labels, l2: float, max_iter: int, *, scale_weights=None,
                               scale_centre: float = 1.0, bias_weights=None):
    """(scale, bias) minimising mean NLL + (l2/K)(‖scale − 1‖² + ‖bias‖²) by Newton's method.

    ``scale_weights``, ``scale_centre`` and ``bias_weights`` replace the penalty by
    Σ scale_weights ⊙ (scale − scale_centre)² + Σ bias_weights ⊙ bias² (per-class weights).

    With p the calibrated probabilities, r = p − onehot(y) and A = z ⊙ p (all (N, K)), the
    gradient is (mean z ⊙ r, mean r) and the Hessian's blocks are
    diag(mean z²p) − AᵀA/N, diag(mean A) − AᵀP/N and diag(mean p) − PᵀP/N (plus 2l2/K · I).
    Adding a constant to every bias changes nothing, so without a penalty the Hessian is
    singular along that direction; the gradient has no component there, and a tiny ridge
    keeps the step out of it (Σ bias stays 0). Steps are halved until the objective falls; the fit stops at a gradient below 1e-12.
    """
    n, n_classes = logits.shape
    one_hot = np.zeros_like(logits)
    one_hot[np.arange(n), labels] = 1.0
    uniform = np.full(n_classes, l2 / n_classes)
    scale_weights = uniform if scale_weights is None else np.asarray(scale_weights, dtype=np.float64)
    bias_weights = uniform if bias_weights is None else np.asarray(bias_weights, dtype=np.float64)
    ridge = 2 * np.concatenate([scale_weights, bias_weights])
    penalty = (scale_weights, scale_centre, bias_weights)
    scale, bias = np.ones(n_classes), np.zeros(n_classes)
    value, probs = _vector_scaling_objective(scale, bias, logits, labels, *penalty)
    for _ in range(max_iter):
        residual = probs - one_hot
        gradient = np.concatenate([(logits * residual).mean(axis=0), residual.mean(axis=0)]) + ridge * np.concatenate(
            [scale - scale_centre, bias])
        weighted = logits * probs
        hessian = np.block([
            [np.diag((logits * weighted).mean(axis=0)) - weighted.T @ weighted / n,
             np.diag(weighted.mean(axis=0)) - weighted.T @ probs / n],
            [np.diag(weighted.mean(axis=0)) - probs.T @ weighted / n,
             np.diag(probs.mean(axis=0)) - probs.T @ probs / n],
        ])
        hessian[np.diag_indices_from(hessian)] += ridge + 1e-12 * max(float(np.trace(hessian)) / (2 * n_classes), 1.0)
        if np.abs(gradient).max() < 1e-12:
            break
        step = np.linalg.solve(hessian, gradient)
        decrease = float(gradient @ step)  # the Newton decrement
        size = 1.0
        while size > 1e-10:
            new_scale, new_bias = scale - size * step[:n_classes], bias - size * step[n_classes:]
            new_value, new_probs = _vector_scaling_objective(new_scale, new_bias, logits, labels, *penalty)
            # Below a decrement of 1e-12 the objective's change is lost in its rounding: there
            # Newton's full step (quadratic convergence) is taken without the sufficient-decrease test.
            if new_value <= value - 1e-4 * size * decrease or (decrease < 1e-12 and size == 1.0):
                break
            size /= 2
        else:
            break  # no decrease left at float64 resolution
        scale, bias, value, probs = new_scale, new_bias, new_value, new_probs
    if not (np.isfinite(scale).all() and np.isfinite(bias).all()):
        raise RuntimeError("vector scaling fit diverged (non-finite parameters); try a positive L2 penalty")
    return scale, bias


def _diagonal_start(logits, labels, penalty_weights, max_iter: int = 100):
    """[diag(s) | b] minimising the objective over the diagonal and the bias alone (off-diagonals 0).

    The warm start of :func:`fit_matrix_scaling_newton_cg`: vector scaling under the penalties
    that ``penalty_weights`` puts on W's diagonal and on b, by :func:`_fit_vector_scaling_newton`
    (2K parameters, a dense Newton system).
    """
    k = logits.shape[1]
    diagonal_weights = penalty_weights[np.arange(k), np.arange(k)]
    scale, bias = _fit_vector_scaling_newton(logits, labels, 0.0, max_iter, scale_weights=diagonal_weights,
                                             scale_centre=0.0, bias_weights=penalty_weights[:, k])
    return np.column_stack([np.diag(scale), bias])


def _class_blocks(design: np.ndarray, variance: np.ndarray, drop: float = 0.0,
                  squared_norms: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """The K matrices Σ_n v_ni x̃_n x̃_nᵀ / N, (K, K + 1, K + 1), for design x̃ (N, K + 1) and variance (N, K).

    Class i's sum leaves out the rows whose v_ni ‖x̃_n‖² is below ``drop`` times its mean over
    the rows, at most ``drop`` of the block's trace (the rest is a positive semi-definite
    matrix of trace ≤ ``drop`` · trace). Returns the blocks and the share of (row, class) pairs
    kept. Up to :data:`CLASS_BY_CLASS_BELOW` of the pairs: one symmetric rank-k update
    (``dsyrk``) per class over its kept rows. Above: one matrix product per chunk of rows,
    (pairs, rows) × (rows, K) over the (K + 1)(K + 2) / 2 entries x̃_na x̃_nb with a ≤ b, over all
    rows (half the multiply-adds of one (K + 1, N) × (N, K + 1) product per class, in one large product).
    ``squared_norms``, the rows' ‖x̃_n‖², is computed here when not given.
    """
    n, width = design.shape
    k = variance.shape[1]
    if drop > 0:
        if squared_norms is None:
            squared_norms = np.einsum("na,na->n", design, design)
        trace_terms = variance * squared_norms[:, None]
        kept = trace_terms >= drop * trace_terms.mean(axis=0)
        share = float(kept.mean())
    else:
        kept, share = None, 1.0
    blocks = np.empty((k, width, width))
    upper, lower = np.triu_indices(width)
    if kept is not None and share <= CLASS_BY_CLASS_BELOW:
        for i in range(k):
            rows = np.flatnonzero(kept[:, i])
            blocks[i] = dsyrk(1.0 / n, design[rows] * np.sqrt(variance[rows, i])[:, None], trans=1, lower=0)
        blocks[:, lower, upper] = blocks[:, upper, lower]
        return blocks, share
    total = np.zeros((len(upper), k))
    chunk = max(1, 2**21 // len(upper))  # rows per chunk: ~2 M entries of x̃_na x̃_nb at a time
    for start in range(0, n, chunk):
        rows = design[start:start + chunk]
        total += (rows[:, upper] * rows[:, lower]).T @ variance[start:start + chunk]
    total /= n
    blocks[:, upper, lower] = total.T
    blocks[:, lower, upper] = total.T
    return blocks, 1.0


def _rows_carrying(terms: np.ndarray, drop: float) -> np.ndarray:
    """The sorted indices of the rows left when the smallest ``terms`` summing to at most ``drop`` of their total are left out."""
    order = np.argsort(terms)
    left_out = np.searchsorted(np.cumsum(terms[order]), drop * terms.sum(), side="right")
    return np.sort(order[left_out:])


def _inverse_factors(blocks: np.ndarray) -> np.ndarray:
    """Float32 R_i with R_i R_iᵀ = B_i⁻¹ for symmetric positive definite blocks B_i, (K, K + 1, K + 1).

    R_i = U_i⁻¹ for the Cholesky factor B_i = U_iᵀ U_i: a factorisation and a triangular inverse,
    a third of the work of B_i⁻¹; applied as R (Rᵀ r), two float32 products. A block that is not
    positive definite at float64 resolution gets a ridge of 1e-12 of its trace, then 1e-9, ...
    """
    factors = np.empty(blocks.shape, dtype=np.float32)
    for i, block in enumerate(blocks):
        ridge = 0.0
        while True:
            upper, info = dpotrf(block + ridge * np.eye(len(block)) if ridge else block, lower=0, clean=1)
            if info == 0:
                break
            ridge = max(ridge * 1e3, 1e-12 * float(np.trace(block)) + np.finfo(float).tiny)
        inverse, info = dtrtri(upper, lower=0)
        if info != 0:
            raise RuntimeError(f"the preconditioner's block {i} has a singular Cholesky factor")
        factors[i] = inverse
    return factors


def _softmax_hessian_times(direction: np.ndarray, design: np.ndarray, probs: np.ndarray,
                           top: np.ndarray, n_rows: int | None = None,
                           capped: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The mean NLL's Hessian times V (K, K + 1): (p ⊙ (U − Σ_j p_j U_j))ᵀ X̃ / N for U = X̃ Vᵀ.

    The mean is over ``n_rows`` rows (default: ``design``'s), of which ``design`` may hold a subset.
    In ``design``'s and ``probs``' precision; the result is float64. U is first taken relative to
    each row's most probable class ``top``: for a confident row, U_top − Σ_j p_j U_j is
    Σ_j p_j (U_top − U_j), about (1 − p_top) times U, and as a difference of two numbers near
    U_top it would keep none of float32's digits once 1 − p_top is below 1e-7.

    ``capped`` = (rows of ``design``, their residuals r = p − onehot(y), weights a) adds each such
    row's a r rᵀ to its logits' Hessian (:func:`_loss_capped_rows`): a r (r · U) to its row of
    p ⊙ (U − Σ_j p_j U_j) (r sums to zero, so U's shift by U_top leaves r · U as it is).
    """
    n_rows = len(design) if n_rows is None else n_rows
    change = design @ direction.T.astype(design.dtype)  # U, then U − U_top, then p ⊙ (U − Σ_j p_j U_j)
    change -= change[np.arange(len(change)), top][:, None]
    if capped is not None:
        capped_rows, residuals, weights = capped
        along = weights * np.einsum("nk,nk->n", residuals, change[capped_rows])
    change -= np.einsum("nk,nk->n", probs, change)[:, None]
    change *= probs
    if capped is not None:
        change[capped_rows] += along[:, None] * residuals
    return (change.T @ design).astype(np.float64) / n_rows


def _loss_capped_rows(probs: np.ndarray, one_hot: np.ndarray, losses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The rows whose Newton model promises to lose more than their whole loss, and the curvature that stops it.

    A row's loss ℓ = logsumexp(z) − z_y is at least 0, so no step lowers it by more than ℓ. Its
    quadratic model along its own gradient r = p − onehot(y), with A = diag(p) − ppᵀ, promises at
    most ‖r‖⁴ / (2 rᵀ A r). On a row the fit gets wrong with confidence (p_y small, p_top near 1)
    rᵀ A r is tiny and the promise is far beyond ℓ: CG's step then moves whole columns of W to
    fix that row and turns the many rows they touch. Each row with p_y < ½ whose promise exceeds
    ℓ gets the curvature a r rᵀ with

    $$
    a = \frac{1}{2\ell} - \frac{r^\top A r}{\lVert r \rVert^4},
    $$

    so that the promise equals ℓ. Rows with p_y ≥ ½ keep their model: with two classes and
    p_y = 1 − δ the promise is δ / (2 (1 − δ)), below ℓ = −log(1 − δ). Returns the rows' indices
    and their weights a.
    """
    residuals = probs - one_hot
    squared = np.einsum("nk,nk->n", residuals, residuals)
    mean = np.einsum("nk,nk->n", probs, residuals)
    curvature = np.einsum("nk,nk->n", probs, residuals**2) - mean**2  # rᵀ A r
    wrong = np.flatnonzero(np.einsum("nk,nk->n", probs, one_hot) < 0.5)  # |r_y| > ½: ‖r‖² > ¼, ℓ > log 2
    weights = 0.5 / losses[wrong] - curvature[wrong] / squared[wrong] ** 2
    kept = weights > 0
    return wrong[kept], weights[kept]


def fit_matrix_scaling_newton_cg(logits: np.ndarray, labels: np.ndarray, penalty_weights: np.ndarray, max_iter: int,
                                 tol: float, *, warm_start: bool = True, preconditioner: str = "block",
                                 optimal_shift: bool = True) -> tuple[np.ndarray, tuple[bool, int, float]]:
    r"""What :func:`fit_matrix_scaling_newton` returns, by Newton steps solved with conjugate gradients.

    The steps use Hessian-vector products: no dense Hessian, so it scales to K = 100 and beyond.

    The softmax ignores a shift of every row of [W | b] by one vector u (every logit moves by
    uᵀx̃), so the NLL is flat along those K + 1 directions and only the penalty, of weight
    ~λ_od / K² there, curves them: Newton-CG on the objective as it stands crawls along them
    (Hessian condition numbers of 10⁵–10¹⁰ on the benchmark's inputs at K = 30). The fit minimises instead the objective with the
    shift already optimal,

    $$
    F(\theta) = \mathrm{NLL}(\theta) + \sum_{ij} w_{ij} (\theta_{ij} - m_j(\theta))^2, \qquad
    m_j(\theta) = \textstyle\sum_i w_{ij} \theta_{ij} / \sum_i w_{ij},
    $$

    which is flat along the shifts exactly (its steps are kept orthogonal to them) and equals the
    penalised objective at θ − 1mᵀ, the answer returned; F's gradient at θ is the penalised
    objective's gradient there, so the stopping test is the same (``optimal_shift=False``: the
    penalised objective as it stands). For a direction V, U = X̃ Vᵀ
    is the logits' change and, with p the probabilities, the NLL's Hv = (p ⊙ (U − Σ_j p_j U_j))ᵀ
    X̃ / N: two (N, K + 1) × (K + 1, K) products, in float32 with U taken relative to each row's most
    probable class (:func:`_softmax_hessian_times`; float64 after a float32 solve that does not reach
    its target, :data:`SINGLE_PRECISION_MAX_PRODUCTS`), over the rows that carry all but
    :data:`PRODUCT_TRACE_DROP` of the Hessian's trace. Gradients, objectives and steps are float64
    over every row, so the optimum is float64's. While the gradient's root mean square entry is at
    least :data:`LOSS_CAP_GRADIENT_RMS`, the products add to each row the fit gets wrong the
    curvature that keeps its model from promising a decrease beyond its loss
    (:func:`_loss_capped_rows`): without it, the first steps on an overconfident model's logits move
    whole columns of W by hundreds to fix a few confidently wrong rows, and the line search then
    cuts most of the following steps to a tenth or a third. That changes the steps, not the objective.

    ``warm_start`` starts from the optimum over W's diagonal and b alone (vector scaling under
    the same penalties, :func:`_diagonal_start`) instead of the identity. CG's
    ``preconditioner`` is ``"block"``, the Hessian's K diagonal blocks Σ_n p_ni(1 − p_ni) x̃_n
    x̃_nᵀ / N + 2 diag(w_i) (one (K + 1)² system per class, applied through its Cholesky factor;
    the cross-class terms −p_i p_j left out; the rows that carry under :data:`BLOCK_TRACE_DROP`
    of a block's trace left out, :func:`_class_blocks`; rebuilt after a CG solve of more than
    :data:`REBUILD_AFTER_PRODUCTS` products times the share of (row, class) pairs built from, once
    a block's trace has moved by more than :data:`REBUILD_TRACE_CHANGE`), or
    ``"diagonal"``, the Hessian's diagonal. CG stops at a residual of min(0.5, √‖g‖) ‖g‖
    (superlinear convergence) or ``tol`` / 2, below which the next gradient would not move; the
    steps are damped by a sufficient-decrease search (each shorter step the minimiser of the
    quadratic through the objective, its slope and the last trial), and the fit stops on the same two tests as
    the dense Newton fit: the largest gradient entry below ``tol``, or a Newton decrement below
    float64 resolution of the objective.

    Args:
        logits: Float64 array (N, K) of logits.
        labels: Integer array (N,) of class indices in [0, K).
        penalty_weights: Float array (K, K + 1), the L2 weight of each parameter of [W | b]
            (:class:`MatrixScaling` builds it from its ODIR penalties; zeros for none).
        max_iter: Maximum number of Newton steps.
        tol: The fit stops when the largest gradient entry is at most ``tol``.
        warm_start: Start from the diagonal-and-bias optimum (True) or the identity.
        preconditioner: ``"block"`` or ``"diagonal"``.
        optimal_shift: Minimise F (True) or the penalised objective as it stands.

    Returns:
        ``(params, (converged, iterations, gradient_max))``: float64 array (K, K + 1), the
        weights W in the first K columns and the bias b in the last; whether a stopping test
        (not ``max_iter``) ended the fit; the number of Newton steps run; the largest absolute
        gradient entry at the end.

    Raises:
        RuntimeError: If the fit diverges to non-finite parameters.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.scaling import fit_matrix_scaling_newton, fit_matrix_scaling_newton_cg
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.integers(0, 3, size=300)
        >>> logits = 4 * (np.eye(3)[labels] + rng.normal(size=(300, 3)))
        >>> penalty = np.full((3, 4), 1e-3)  # without a penalty the optimum is not unique
        >>> dense, _ = fit_matrix_scaling_newton(logits, labels, penalty, 100, 1e-10)
        >>> params, (converged, _, _) = fit_matrix_scaling_newton_cg(logits, labels, penalty, 100, 1e-10)
        >>> converged, bool(np.allclose(params, dense, atol=1e-6))
        (True, True)
    """
    if preconditioner not in ("block", "diagonal"):
        raise ValueError(f"preconditioner must be 'block' or 'diagonal', got {preconditioner!r}")
    n, k = logits.shape
    design = np.column_stack([logits, np.ones(n)])
    one_hot = np.zeros((n, k))
    one_hot[np.arange(n), labels] = 1.0
    weights = np.asarray(penalty_weights, dtype=np.float64)
    column_weight = weights.sum(axis=0)
    has_weight = column_weight > 0
    safe_weight = np.where(has_weight, column_weight, 1.0)

    def shifted(params):  # θ − 1mᵀ: the shift of every row that minimises the penalty
        if not optimal_shift:
            return params
        return params - np.where(has_weight, (weights * params).sum(axis=0) / safe_weight, 0.0)

    rows = np.arange(n)
    squared_norms = np.einsum("na,na->n", design, design)

    def objective(params):  # the value, the probabilities and the rows' losses from one exp of the logits
        centred = design @ params.T
        centred -= centred.max(axis=1, keepdims=True)
        probs = np.exp(centred)
        total = probs.sum(axis=1)
        probs /= total[:, None]
        losses = np.log(total) - centred[rows, labels]
        return float(losses.mean()) + float((weights * shifted(params) ** 2).sum()), probs, losses

    params = _diagonal_start(logits, labels, weights) if warm_start else np.column_stack([np.eye(k), np.zeros(k)])
    value, probs, losses = objective(params)
    ridge = 2 * weights
    jitter = 1e-12
    factors, built_traces, products, rebuild_after = None, None, 0, 0.0
    single = SINGLE_PRECISION_MAX_PRODUCTS is not None
    design32 = design.astype(np.float32) if single else None
    converged, gradient_max, iteration = False, float("inf"), 0
    for iteration in range(1, max_iter + 1):
        gradient = (probs - one_hot).T @ design / n + 2 * weights * shifted(params)
        gradient_max = float(np.abs(gradient).max())
        if gradient_max <= tol:
            converged = True
            break

        variance = probs * (1 - probs)
        counted = _rows_carrying(variance.sum(axis=1) * squared_norms, PRODUCT_TRACE_DROP)
        norm = np.linalg.norm(gradient)
        capped_rows, cap_weights = (_loss_capped_rows(probs, one_hot, losses)
                                    if norm >= LOSS_CAP_GRADIENT_RMS * np.sqrt(gradient.size) else ((), None))
        counted = np.union1d(counted, capped_rows) if len(capped_rows) else counted
        product_design = (design32 if single else design)[counted]
        product_probs = probs[counted].astype(np.float32) if single else probs[counted]
        most_probable = probs.argmax(axis=1)[counted]
        capped = (np.searchsorted(counted, capped_rows),
                  (probs[capped_rows] - one_hot[capped_rows]).astype(product_design.dtype),
                  cap_weights.astype(product_design.dtype)) if len(capped_rows) else None

        def hessian_times(direction, probs=product_probs, design=product_design, top=most_probable, capped=capped):
            return (_softmax_hessian_times(direction, design, probs, top, n, capped) + ridge * shifted(direction)
                    + jitter * direction)

        if preconditioner == "block":
            traces = squared_norms @ variance  # N × each block's trace, before the ridge
            if factors is None or (products > rebuild_after and (
                    np.abs(traces - built_traces) > REBUILD_TRACE_CHANGE * built_traces).any()):
                blocks, share = _class_blocks(design, variance, BLOCK_TRACE_DROP, squared_norms)
                blocks[:, np.arange(k + 1), np.arange(k + 1)] += ridge + jitter * (
                    1.0 + np.trace(blocks, axis1=1, axis2=2)[:, None])
                factors, rebuild_after = _inverse_factors(blocks), REBUILD_AFTER_PRODUCTS * share
                built_traces = traces

            def precondition(residual, factors=factors):
                half = np.matmul(factors.transpose(0, 2, 1), residual.astype(np.float32)[:, :, None])
                return np.matmul(factors, half)[:, :, 0].astype(np.float64)
        else:
            diagonal = variance.T @ design**2 / n + ridge + jitter

            def precondition(residual, diagonal=diagonal):
                return residual / diagonal

        # The step's gradient is about CG's residual, so a residual below tol / 2 is all the last step needs.
        step, products, reached = _preconditioned_cg(hessian_times, gradient, precondition,
                                                     max(min(0.5, np.sqrt(norm)) * norm, tol / 2),
                                                     SINGLE_PRECISION_MAX_PRODUCTS if single else 500,
                                                     project=optimal_shift)
        if single and not reached and products >= SINGLE_PRECISION_MAX_PRODUCTS:
            single = False  # float32's resolution met: float64 products from here on
        decrease = float((gradient * step).sum())  # the Newton decrement of the approximate step
        if decrease <= 4 * np.finfo(float).eps * max(abs(value), 1.0):
            converged = True
            break
        size = 1.0
        while size > 1e-10:
            candidate = params - size * step
            new_value, new_probs, new_losses = objective(candidate)
            if new_value <= value - 1e-4 * size * decrease:
                break
            # the minimiser of the quadratic through value, slope −decrease and new_value, kept in [size/10, size/2]
            shrunk = decrease * size**2 / (2 * (new_value - value + decrease * size))
            size = size / 10 if not shrunk >= size / 10 else min(shrunk, size / 2)
        else:
            converged = decrease <= 1e-12 * max(abs(value), 1.0)
            break
        params, value, probs, losses = candidate, new_value, new_probs, new_losses
    params = shifted(params)
    if not np.isfinite(params).all():
        raise RuntimeError("matrix scaling fit diverged (non-finite parameters); try a positive L2 penalty")
    return params, (converged, iteration, gradient_max)


def _preconditioned_cg(hessian_times, gradient, precondition, residual_tol: float, max_steps: int = 500, *,
                       project: bool = True):
    """An approximate solution of H x = g by preconditioned conjugate gradients.

    Returns the solution, the number of Hessian-vector products it took, and whether the
    residual reached ``residual_tol`` (False: ``max_steps`` products, or H numerically flat).
    With ``project``, every search direction is kept orthogonal to the shifts of all rows by one
    vector (the columns' means removed), along which H is flat.
    """
    solution = np.zeros_like(gradient)
    residual = gradient.copy()
    preconditioned = precondition(residual)
    if project:
        preconditioned -= preconditioned.mean(axis=0)
    direction = preconditioned.copy()
    rho = float((residual * preconditioned).sum())
    for products in range(max_steps + 1):
        if np.linalg.norm(residual) <= residual_tol:
            return solution, products, True
        if products == max_steps:
            break
        product = hessian_times(direction)
        curvature = float((direction * product).sum())
        if curvature <= 0:  # numerically flat: keep what has been solved (the gradient on the first step)
            if not solution.any():
                solution = preconditioned
            return solution, products + 1, False
        alpha = rho / curvature
        solution += alpha * direction
        residual -= alpha * product
        preconditioned = precondition(residual)
        if project:
            preconditioned -= preconditioned.mean(axis=0)
        rho, previous = float((residual * preconditioned).sum()), rho
        direction = preconditioned + (rho / previous) * direction
    return solution, max_steps, False


def fit_matrix_scaling_lbfgs(logits: np.ndarray, labels: np.ndarray, penalty_weights: np.ndarray, max_iter: int,
                             tol: float) -> tuple[np.ndarray, tuple[bool, int, float]]:
    """What :func:`fit_matrix_scaling_newton` returns, by scipy's L-BFGS-B.

    No dense Hessian; the benchmark's and tests' reference (no fitter takes this path). It stops
    when the largest gradient entry is below ``tol`` or the objective stops falling at float64
    resolution (``ftol=0``: no relative-decrease shortcut).

    Args:
        logits: Float64 array (N, K) of logits.
        labels: Integer array (N,) of class indices in [0, K).
        penalty_weights: Float array (K, K + 1), the L2 weight of each parameter of [W | b]
            (:class:`MatrixScaling` builds it from its ODIR penalties; zeros for none).
        max_iter: Maximum number of L-BFGS-B iterations (and half its evaluations).
        tol: The fit stops when the largest gradient entry is at most ``tol``.

    Returns:
        ``(params, (converged, iterations, gradient_max))``: float64 array (K, K + 1), the
        weights W in the first K columns and the bias b in the last; whether a stopping test
        (not the iteration or evaluation cap) ended the fit; the number of iterations run; the largest absolute
        gradient entry at the end.

    Raises:
        RuntimeError: If the fit diverges to non-finite parameters.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration.scaling import fit_matrix_scaling_lbfgs, fit_matrix_scaling_newton
        >>> rng = np.random.default_rng(0)
        >>> labels = rng.integers(0, 3, size=300)
        >>> logits = 4 * (np.eye(3)[labels] + rng.normal(size=(300, 3)))
        >>> penalty = np.full((3, 4), 1e-3)  # without a penalty the optimum is not unique
        >>> dense, _ = fit_matrix_scaling_newton(logits, labels, penalty, 100, 1e-10)
        >>> params, (converged, _, _) = fit_matrix_scaling_lbfgs(logits, labels, penalty, 1000, 1e-8)
        >>> converged, bool(np.allclose(params, dense, atol=1e-6))
        (True, True)
    """
    from scipy.optimize import minimize

    n, k = logits.shape
    design = np.column_stack([logits, np.ones(n)])
    one_hot = np.zeros((n, k))
    one_hot[np.arange(n), labels] = 1.0

    def value_and_gradient(flat):
        params = flat.reshape(k, k + 1)
        value, probs = _matrix_scaling_objective(params, design, labels, penalty_weights)
        return value, ((probs - one_hot).T @ design / n + 2 * penalty_weights * params).ravel()

    start = np.column_stack([np.eye(k), np.zeros(k)]).ravel()
    result = minimize(value_and_gradient, start, jac=True, method="L-BFGS-B",
                      options={"ftol": 0.0, "gtol": tol, "maxiter": max_iter, "maxfun": 2 * max_iter, "maxcor": 20})
    params = result.x.reshape(k, k + 1)
    if not np.isfinite(params).all():
        raise RuntimeError("matrix scaling fit diverged (non-finite parameters); try a positive L2 penalty")
    # status 1: the iteration or evaluation cap; 0 and 2 (no decrease left in the line search) are optima
    return params, (result.status != 1, int(result.nit), float(np.abs(result.jac).max()))


class VectorScaling(Calibrator):
    """softmax(scale_ ⊙ logits + bias_): one scale and one bias per class (Guo et al. 2017).

    Fitted by Newton's method on the mean validation NLL (module docstring).

    Args:
        l2: Penalty weight ≥ 0: the fit adds (l2 / K) (Σ (scale − 1)² + Σ bias²) to the NLL,
            shrinking toward the identity (0: plain vector scaling).
        max_iter: Maximum number of Newton steps.

    Attributes:
        scale_ (np.ndarray): Float array (K,), the per-class multipliers of the logits.
        bias_ (np.ndarray): Float array (K,), the per-class offsets.
        n_classes_ (int): Number of classes K.

    Raises:
        RuntimeError: From ``fit``, if the fit diverges to non-finite parameters (a positive
            ``l2`` prevents it).

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import VectorScaling
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> vector = VectorScaling().fit(val_logits, val_labels)
        >>> vector.scale_.round(2).tolist()
        [0.27, 0.28, 0.29]
        >>> round(ece(vector.transform(val_logits), val_labels), 4)
        0.0442
    """

    name = "vector_scaling"
    _fitted_attributes = ("scale_", "bias_")
    _parameter_constraints: ClassVar[dict] = {"l2": [NON_NEGATIVE], "max_iter": [POSITIVE_INT]}

    def __init__(self, l2: float = 0.0, max_iter: int = 500) -> None:
        self.l2 = l2
        self.max_iter = max_iter

    def _fit(self, logits, labels):
        self.scale_, self.bias_ = _fit_vector_scaling_newton(np.asarray(logits, dtype=np.float64),
                                                             np.asarray(labels, dtype=np.int64), self.l2, self.max_iter)

    def _transform(self, logits):
        return softmax(logits * self.scale_ + self.bias_, axis=1)


class MatrixScaling(Calibrator):
    """softmax(logits @ weight_.T + bias_): a full K × K linear map of the logits (Guo et al. 2017).

    ``off_diagonal_l2`` and ``bias_l2`` are the ODIR penalties of Kull et al. 2019 (both 0:
    plain matrix scaling of Guo et al. 2017). The fit stops at ``tol`` (module docstring);
    ``max_iter`` only caps it, with a ``ConvergenceWarning`` when it does.

    Args:
        off_diagonal_l2: λ_od ≥ 0, the L2 penalty on W's off-diagonal entries, divided by
            K(K − 1).
        bias_l2: λ_b ≥ 0, the L2 penalty on b, divided by K.
        max_iter: Maximum number of Newton steps.
        tol: The fit stops when the largest gradient entry falls below it (1e-10: the optimum
            to float64 resolution in practice).

    Attributes:
        weight_ (np.ndarray): Float array (K, K), the linear map W of the logits.
        bias_ (np.ndarray): Float array (K,), the intercept b.
        n_classes_ (int): Number of classes K.

    Warns:
        sklearn.exceptions.ConvergenceWarning: When ``max_iter`` steps end before ``tol``.

    Examples:
        >>> import numpy as np
        >>> from focalcal.calibration import MatrixScaling
        >>> from focalcal.metrics import ece
        >>> rng = np.random.default_rng(0)
        >>> val_labels = rng.integers(0, 3, size=500)
        >>> val_logits = 4 * (np.eye(3)[val_labels] + rng.normal(size=(500, 3)))
        >>> matrix = MatrixScaling(off_diagonal_l2=0.01, bias_l2=0.01).fit(val_logits, val_labels)
        >>> matrix.weight_.diagonal().round(2).tolist()
        [0.26, 0.28, 0.29]
        >>> round(ece(matrix.transform(val_logits), val_labels), 4)
        0.054
    """

    name = "matrix_scaling"
    _fitted_attributes = ("weight_", "bias_")
    _parameter_constraints: ClassVar[dict] = {"off_diagonal_l2": [NON_NEGATIVE], "bias_l2": [NON_NEGATIVE],
                              "max_iter": [POSITIVE_INT], "tol": [POSITIVE]}

    def __init__(self, off_diagonal_l2: float = 0.0, bias_l2: float = 0.0, max_iter: int = 10000,
                 tol: float = 1e-10) -> None:
        self.off_diagonal_l2 = off_diagonal_l2
        self.bias_l2 = bias_l2
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, logits, labels):
        n_classes = logits.shape[1]
        penalty_weights = np.zeros((n_classes, n_classes + 1))
        penalty_weights[:, :n_classes] = self.off_diagonal_l2 / (n_classes * (n_classes - 1))
        penalty_weights[np.arange(n_classes), np.arange(n_classes)] = 0.0
        penalty_weights[:, n_classes] = self.bias_l2 / n_classes
        solve = fit_matrix_scaling_newton if n_classes <= NEWTON_MAX_CLASSES else fit_matrix_scaling_newton_cg
        # One BLAS thread: the products are (N, K + 1) × (K + 1, K), too small to share out, and
        # OpenBLAS threads spin-waiting on a busy machine slow each down (``python -m bench dirichlet``).
        with threadpool_limits(limits=1, user_api="blas"):
            params, (converged, iterations, gradient) = solve(logits, labels, penalty_weights, self.max_iter,
                                                              self.tol)
        self.weight_, self.bias_ = params[:, :n_classes].copy(), params[:, n_classes].copy()
        if not converged:
            warn_unconverged(self.name, iterations, gradient, self.tol)

    def _transform(self, logits):
        return softmax(logits @ self.weight_.T + self.bias_, axis=1)
