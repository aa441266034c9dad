"""The focal loss's theory in closed form: φ^γ, τ_oc/τ_uc, γ*, the gradient ratio, the focal
risk minimiser q*(η), its inverse Ψ^γ (the focal calibration map) and the binary map's
temperature bounds; the derivation is :mod:`focalcal.theory`'s.

Numpy in, numpy out; :func:`psi` and :func:`psi_from_logits` also take torch tensors and
return tensors (same dtype and device), importing torch only when handed one.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from ..core.constraints import GAMMA, POSITIVE_GAMMA, PSI_GAMMA, Each, Interval, validate_parameters
from ..core.types import ArrayLike
from ..core.validation import as_numpy, check_probs, check_scores, row_sum_tolerance

if TYPE_CHECKING:
    import torch

__all__ = [
    "binary_focal_calibration",
    "binary_focal_calibration_logit",
    "focal_risk_minimizer",
    "gamma_star",
    "gradient_ratio",
    "log_psi_from_logits",
    "phi",
    "psi",
    "psi_from_logits",
    "tau_oc",
    "tau_uc",
    "temperature_bounds",
]


# ----------------------------------------------------------------------------- validation


def _gamma(gamma, domain: Interval, owner: str, *, scalar: bool = True):
    """γ checked by the one validator against ``domain`` (a γ constraint of
    :mod:`focalcal.core.constraints`); a float, or (``scalar=False``) a float64 array of any shape."""
    validate_parameters({"gamma": [domain if scalar else Each(domain)]}, {"gamma": gamma}, owner)
    return float(gamma) if scalar else as_numpy(gamma, "gamma").astype(np.float64)


def _check_unit_interval(values, name: str, *, open_left=False, open_right=False) -> np.ndarray:
    values = as_numpy(values, name)
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {values.dtype}")
    values = values.astype(np.float64)
    if np.isnan(values).any():
        raise ValueError(f"{name} contains NaN")
    low_bad = values <= 0 if open_left else values < 0
    high_bad = values >= 1 if open_right else values > 1
    if (low_bad | high_bad).any():
        interval = ("(" if open_left else "[") + "0, 1" + (")" if open_right else "]")
        bad = values[low_bad | high_bad].flat[0]
        raise ValueError(f"{name} must lie in {interval}, got {bad:g}")
    return values


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _check_torch_probs(probs, name: str, atol: float = 1e-4) -> None:
    """Torch twin of ``check_probs`` for tensors of shape (..., K): one device sync when valid."""
    torch = sys.modules["torch"]
    if probs.ndim < 1 or probs.shape[-1] < 2:
        raise ValueError(f"{name} must have a last axis of at least 2 classes, got shape {tuple(probs.shape)}")
    if probs.numel() == 0:
        raise ValueError(f"{name} is empty (0 samples)")
    if not torch.is_floating_point(probs):
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {probs.dtype}")
    row_error = (probs.sum(dim=-1, dtype=torch.float64) - 1).abs()
    tolerance = row_sum_tolerance(probs.dtype, probs.shape[-1], atol)
    bad = ~torch.isfinite(probs).all() | (probs < 0).any() | (probs > 1).any() | (row_error > tolerance).any()
    if bool(bad):
        check_probs(probs.detach().reshape(-1, probs.shape[-1]).cpu(), name, atol=atol)


def _check_torch_logits(logits, name: str) -> None:
    torch = sys.modules["torch"]
    if logits.ndim < 1 or logits.shape[-1] < 2:
        raise ValueError(f"{name} must have a last axis of at least 2 classes, got shape {tuple(logits.shape)}")
    if logits.numel() == 0:
        raise ValueError(f"{name} is empty (0 samples)")
    if not torch.is_floating_point(logits):
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {logits.dtype}")
    if not bool(torch.isfinite(logits).all()):
        check_scores(logits.detach().reshape(-1, logits.shape[-1]).cpu(), name)


def _numpy_rows(values, check, name: str):
    """Validate a (..., K) numpy input with a 2-D checker; return float64 array and dtype to return."""
    values = as_numpy(values, name)
    if values.ndim < 1:
        raise ValueError(f"{name} must be at least 1-D (..., n_classes), got a scalar")
    flat = check(values.reshape(-1, values.shape[-1]) if values.ndim != 2 else values, name)
    out_dtype = values.dtype if values.dtype in (np.float32, np.float64) else np.float64
    return flat.astype(np.float64, copy=False).reshape(values.shape), out_dtype


# ---------------------------------------------------------- backend-neutral core (numpy | torch)


class _Ops:
    """The few array operations the core needs, spelled once for numpy and once for torch."""

    def __init__(self, torch_module=None):
        self.torch = torch_module
        self.xp = torch_module if torch_module is not None else np

    def logsumexp(self, x):
        if self.torch is not None:
            return self.torch.logsumexp(x, dim=-1, keepdim=True)
        return special.logsumexp(x, axis=-1, keepdims=True)

    def sum_last(self, x):
        return x.sum(dim=-1, keepdim=True) if self.torch is not None else x.sum(axis=-1, keepdims=True)

    def any_last(self, x):
        return x.any(dim=-1, keepdim=True) if self.torch is not None else x.any(axis=-1, keepdims=True)

    def top(self, x):
        """(mask of the first largest entry, that entry) along the last axis."""
        if self.torch is not None:
            value, index = x.max(dim=-1, keepdim=True)
            return self.torch.zeros_like(x, dtype=self.torch.bool).scatter_(-1, index, True), value
        index = np.argmax(x, axis=-1)[..., None]
        return np.arange(x.shape[-1]) == index, np.take_along_axis(x, index, axis=-1)

    @staticmethod
    def exp_floor(x) -> float:
        """A log-value below which e^{-v} would overflow x's float type (max ~e^88 in float32)."""
        return -80.0 if str(x.dtype).endswith("float32") else -700.0

    def maximum(self, x, floor: float):
        return self.torch.clamp(x, min=floor) if self.torch is not None else np.maximum(x, floor)


def _rho(log_q, log_1mq, ops: _Ops):
    """ρ(q) = q(-log q)/(1-q) ∈ [0, 1] from accurate (log q, log(1-q)); ρ(0) = 0, ρ(1) = 1.

    Both logs are accurate in relative terms, so (-log q) e^{log q - log(1-q)} is too; only the
    limits need guarding (q = 0: 0 · ∞; 1-q below e^-700, e^-80 in float32: ∞ · 0, where
    ρ = 1 - (1-q)/2 rounds to 1).
    """
    xp = ops.xp
    floor = ops.exp_floor(log_q)
    log_q = ops.maximum(log_q, 2 * floor)
    log_1mq_safe = ops.maximum(log_1mq, floor)
    return xp.where(log_1mq > floor, -log_q * xp.exp(log_q - log_1mq_safe), 1.0)


def _log_h(log_q, log_1mq, gamma: float, ops: _Ops, rho=None):
    """log h^γ(q) = log q - log φ^γ(q) (C21 Eq 13) with log φ = γ log(1-q) + log1p(γρ).

    ``rho`` (ρ of the same q) may be given when many γ share one q.
    """
    rho = _rho(log_q, log_1mq, ops) if rho is None else rho
    return log_q - gamma * log_1mq - ops.xp.log1p(gamma * rho)


def _normalise_log_h(log_h, is_one, ops: _Ops, *, log: bool):
    """Softmax (or log-softmax) of log h over classes (C21 Eq 12).

    A row with a coordinate at exactly 1 (``is_one``; None when there is none) is one-hot in the
    input's precision; C21 Thm 11 sets Ψ(one-hot) = one-hot. Its log h holds ±inf, so it is
    replaced by 0 at the ones and -inf elsewhere.
    """
    xp = ops.xp
    if is_one is not None and bool(is_one.any()):
        log_h = xp.where(ops.any_last(is_one), xp.where(is_one, 0.0, -xp.inf), log_h)
    log_psi = log_h - ops.logsumexp(log_h)
    return log_psi if log else xp.exp(log_psi)


def _log_q_pair_from_probs(probs, ops: _Ops):
    """(log q, log(1-q)) of exactly given probabilities: log and log1p are accurate for both."""
    xp = ops.xp
    positive = probs > 0
    log_q = xp.where(positive, xp.log(xp.where(positive, probs, 1.0)), -xp.inf)
    below_one = probs < 1
    log_1mq = xp.where(below_one, xp.log1p(-xp.where(below_one, probs, 0.0)), -xp.inf)
    return log_q, log_1mq


def _log_q_pair_from_logits(logits, ops: _Ops):
    """(log q, log(1-q)) of q = softmax(logits), each accurate to rounding.

    With the top logit subtracted, the other classes' mass m = Σ_{j≠top} e^{s_j - s_top} is a sum
    of numbers <= 1 with no cancellation, and exactly log q_top = -log1p(m),
    log(1 - q_top) = log m - log1p(m). Only the top class can exceed 1/2, so for the rest
    log(1-q) = log1p(-q) is accurate.
    """
    xp = ops.xp
    top, top_value = ops.top(logits)
    shifted = logits - top_value
    exp_shifted = xp.exp(shifted)
    other_mass = ops.sum_last(xp.where(top, 0.0, exp_shifted))
    log_norm = xp.log1p(other_mass)
    log_q = shifted - log_norm  # exact at the top too: 0 - log1p(m)
    q = exp_shifted / (1 + other_mass)
    log_other_mass = xp.log(xp.where(other_mass > 0, other_mass, 1.0))
    if bool((other_mass < 1e-30).any()):  # m near or below underflow: take its log directly
        log_other_mass = xp.where(other_mass < 1e-30, ops.logsumexp(xp.where(top, -xp.inf, shifted)), log_other_mass)
    log_1mq = xp.where(top, log_other_mass - log_norm, xp.log1p(-xp.where(top, 0.0, q)))
    return log_q, log_1mq


def _to_torch_compute_dtype(tensor):
    torch = sys.modules["torch"]
    if tensor.dtype in (torch.float32, torch.float64):
        return tensor, None
    return tensor.to(torch.float32), tensor.dtype


# ---------------------------------------------------------------------------- Ψ^γ public


def psi(probs: ArrayLike, gamma: float) -> np.ndarray | torch.Tensor:
    r"""Ψ^γ(q) of C21 Thm 11, Eq 11-13 — the focal calibration map of K24 Prop 4, Eq 1.

    Maps the focal risk minimiser q* back to the class posterior η:

    $$
    \Psi^\gamma(q)_i = \frac{h^\gamma(q_i)}{\sum_j h^\gamma(q_j)}, \qquad
    h^\gamma(v) = \frac{v}{\varphi^\gamma(v)}.
    $$

    γ = 0 is the identity; negative γ (the γ_ev of focal temperature scaling, K24 §3.2) gives
    the inverse-sigmoid shape. Rows with a coordinate equal to 1 map to themselves (one-hot
    convention of Thm 11). Prefer :func:`psi_from_logits` when logits exist: a probability
    rounded to 1 has lost log(1-q).

    Args:
        probs: Array-like (..., K) of rows on the simplex (K ≥ 2), numpy array or torch tensor.
        gamma: γ > −1, the focal loss's γ.

    Returns:
        Ψ^γ(probs), shape (..., K), rows summing to 1: for numpy input a numpy array (float32
        stays float32, anything else becomes float64); for a tensor a tensor of the same dtype
        and device.

    Raises:
        ValueError: If γ ≤ −1, or a row is not a probability vector (NaN, outside [0, 1], or
            not summing to 1).

    Examples:
        >>> from focalcal.theory import psi
        >>> psi([[0.7, 0.2, 0.1]], gamma=2.0).round(4).tolist()
        [[0.9197, 0.0546, 0.0257]]
        >>> psi([[0.7, 0.2, 0.1]], gamma=0.0).tolist()
        [[0.7, 0.2, 0.1]]
    """
    gamma = _gamma(gamma, PSI_GAMMA, "psi")
    if _is_torch(probs):
        torch = sys.modules["torch"]
        _check_torch_probs(probs, "probs")
        if gamma == 0:
            return probs.clone()
        values, original_dtype = _to_torch_compute_dtype(probs)
        ops = _Ops(torch)
        log_q, log_1mq = _log_q_pair_from_probs(values, ops)
        out = _normalise_log_h(_log_h(log_q, log_1mq, gamma, ops), values == 1, ops, log=False)
        return out if original_dtype is None else out.to(original_dtype)
    values, out_dtype = _numpy_rows(probs, check_probs, "probs")
    if gamma == 0:
        return values.astype(out_dtype)
    ops = _Ops()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_q, log_1mq = _log_q_pair_from_probs(values, ops)
        out = _normalise_log_h(_log_h(log_q, log_1mq, gamma, ops), values == 1, ops, log=False)
    return out.astype(out_dtype)


def _psi_logits_core(logits, gamma: float, *, log: bool):
    if _is_torch(logits):
        torch = sys.modules["torch"]
        _check_torch_logits(logits, "logits")
        values, original_dtype = _to_torch_compute_dtype(logits)
        ops = _Ops(torch)
        if gamma == 0:
            out = torch.log_softmax(values, dim=-1) if log else torch.softmax(values, dim=-1)
        else:
            log_q, log_1mq = _log_q_pair_from_logits(values, ops)
            out = _normalise_log_h(_log_h(log_q, log_1mq, gamma, ops), None, ops, log=log)
        return out if original_dtype is None else out.to(original_dtype)
    values, out_dtype = _numpy_rows(logits, check_scores, "logits")
    ops = _Ops()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if gamma == 0:
            out = special.log_softmax(values, axis=-1) if log else special.softmax(values, axis=-1)
        else:
            log_q, log_1mq = _log_q_pair_from_logits(values, ops)
            out = _normalise_log_h(_log_h(log_q, log_1mq, gamma, ops), None, ops, log=log)
    return out.astype(out_dtype)


def psi_from_logits(logits: ArrayLike, gamma: float) -> np.ndarray | torch.Tensor:
    """Ψ^γ(softmax(logits)) (C21 Eq 11-13), computed in log space from the logits.

    Exact where :func:`psi` on rounded probabilities is not: log(1-q) of the top class comes
    from the summed mass of the other classes, not from 1 - q. numpy or torch in, same kind out.

    Args:
        logits: Array-like (..., K) of finite logits (K ≥ 2), numpy array or torch tensor.
        gamma: γ > −1, the focal loss's γ.

    Returns:
        Probabilities of shape (..., K), rows summing to 1: a numpy array (float32 stays
        float32, anything else becomes float64) or a tensor of the input's dtype and device.

    Raises:
        ValueError: If γ ≤ −1 or the logits are empty or not finite.

    Examples:
        >>> from focalcal.theory import psi_from_logits
        >>> psi_from_logits([[1.0, 0.0]], gamma=2.0).round(4).tolist()
        [[0.9359, 0.0641]]

        Where softmax's top probability rounds to 1 in float64, the other class keeps its tiny
        calibrated probability (``psi`` of the rounded probabilities would return [1, 0]):

        >>> f"{psi_from_logits([[40.0, 0.0]], gamma=2.0)[0, 1]:.4e}"
        '2.3003e-52'
    """
    return _psi_logits_core(logits, _gamma(gamma, PSI_GAMMA, "psi_from_logits"), log=False)


def log_psi_from_logits(logits: ArrayLike, gamma: float) -> np.ndarray | torch.Tensor:
    """log Ψ^γ(softmax(logits)): finite log-probabilities for NLL of focal-calibrated outputs.

    Args:
        logits: Array-like (..., K) of finite logits (K ≥ 2), numpy array or torch tensor.
        gamma: γ > −1, the focal loss's γ.

    Returns:
        Log-probabilities (nats, ≤ 0) of shape (..., K), as :func:`psi_from_logits` returns its
        probabilities (same kind, dtype rules and device).

    Raises:
        ValueError: If γ ≤ −1 or the logits are empty or not finite.

    Examples:
        >>> from focalcal.theory import log_psi_from_logits
        >>> log_psi_from_logits([[1.0, 0.0]], gamma=2.0).round(4).tolist()
        [[-0.0662, -2.7479]]
        >>> round(float(log_psi_from_logits([[800.0, 0.0]], gamma=2.0)[0, 1]), 1)  # Ψ itself underflows to 0
        -2398.9
    """
    return _psi_logits_core(logits, _gamma(gamma, PSI_GAMMA, "log_psi_from_logits"), log=True)


# ----------------------------------------------------------------- scalar functions of q


def phi(v: ArrayLike, gamma: ArrayLike) -> float | np.ndarray:
    r"""φ^γ(v) of C21 Eq 10, evaluated as $(1-v)^\gamma (1 + \gamma\rho(v))$.

    $$
    \varphi^\gamma(v) = (1-v)^\gamma - \gamma (1-v)^{\gamma-1} v \log v.
    $$

    Finite on the closed interval: φ(0) = 1, φ(1) = 0 for γ > 0 (1 for γ = 0). Broadcasts v
    against ``gamma``.

    Args:
        v: Probabilities in [0, 1], a number or an array-like of any shape.
        gamma: γ > −1, a number or an array-like broadcastable against ``v``.

    Returns:
        φ^γ(v): a float for scalar inputs, else a float64 array of the broadcast shape.

    Raises:
        ValueError: If a v lies outside [0, 1] or is NaN, or a γ ≤ −1.

    Examples:
        >>> from focalcal.theory import phi
        >>> phi([0.0, 0.5, 1.0], 1.0).round(4).tolist()
        [1.0, 0.8466, 0.0]
        >>> phi(0.5, [0.0, 2.0]).round(4).tolist()
        [1.0, 0.5966]
    """
    v = _check_unit_interval(v, "v")
    gamma = _gamma(gamma, PSI_GAMMA, "phi", scalar=False)
    ops = _Ops()
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q, log_1mq = _log_q_pair_from_probs(v, ops)
        one_minus_v_pow = np.where(v < 1, np.exp(gamma * np.where(v < 1, log_1mq, 0.0)), np.where(gamma == 0, 1.0, 0.0))
        value = one_minus_v_pow * (1 + gamma * _rho(log_q, log_1mq, ops))
    return value[()] if value.ndim == 0 else value


def gradient_ratio(p: ArrayLike, gamma: ArrayLike) -> float | np.ndarray:
    r"""g(p, γ) of M20 Prop 1: how much focal loss scales cross-entropy's gradient for the last linear layer.

    $$
    \frac{\partial L_{focal}}{\partial w} = g(p_y, \gamma)\, \frac{\partial L_{CE}}{\partial w}.
    $$

    g is the same function as C21's φ^γ (both are -p L'(p)), so this delegates to :func:`phi`.
    Below 1, the focal loss's gradient is smaller than cross-entropy's (M20 Fig 4a).

    Args:
        p: Probabilities p_y of the true class in [0, 1], a number or an array-like.
        gamma: γ ≥ 0, a number or an array-like broadcastable against ``p``.

    Returns:
        g(p, γ): a float for scalar inputs, else a float64 array of the broadcast shape.

    Raises:
        ValueError: If a p lies outside [0, 1] or is NaN, or a γ < 0.

    Examples:
        >>> from focalcal.theory import gradient_ratio
        >>> gradient_ratio([0.1, 0.5, 0.9], 3.0).round(4).tolist()
        [1.2885, 0.3849, 0.0038]
    """
    return phi(p, _gamma(gamma, GAMMA, "gradient_ratio", scalar=False))


def _bisect(func, low, high, iterations: int = 200):
    """Vectorised bisection for a function that is > 0 at ``low`` and < 0 at ``high``."""
    low, high = np.array(low, dtype=np.float64), np.array(high, dtype=np.float64)
    for _ in range(iterations):
        middle = 0.5 * (low + high)
        if np.all((middle == low) | (middle == high)):
            break
        positive = func(middle) > 0
        low = np.where(positive, middle, low)
        high = np.where(positive, high, middle)
    return 0.5 * (low + high)


def tau_oc(gamma: ArrayLike) -> float | np.ndarray:
    r"""τ_oc^γ = argmax_v φ^γ(v) (C21 Thm 8): q* is η-overconfident when max q* <= τ_oc.

    φ' has the sign of $k(v) = 2(1-v)/\log v + 1 - \gamma v$ (M20 Eq 10), which decreases from 1
    to −(1+γ) on (0, 1); τ_oc is its root, found by bisection.

    Args:
        gamma: γ > 0, a number or an array-like of any shape.

    Returns:
        τ_oc in (0, 1): a float for a scalar γ, else a float64 array of γ's shape.

    Raises:
        ValueError: If a γ ≤ 0.

    Examples:
        >>> from focalcal.theory import tau_oc
        >>> round(float(tau_oc(1.0)), 4)
        0.1353
        >>> tau_oc([1.0, 3.0]).round(4).tolist()
        [0.1353, 0.0855]
    """
    gamma = _gamma(gamma, POSITIVE_GAMMA, "tau_oc", scalar=False)

    def sign_of_derivative(v):
        return 2 * (1 - v) / np.log(v) + 1 - gamma * v

    result = _bisect(sign_of_derivative, np.full(gamma.shape, 1e-300), np.full(gamma.shape, 1 - 1e-16))
    return result[()] if result.ndim == 0 else result


def tau_uc(gamma: ArrayLike) -> float | np.ndarray:
    """τ_uc^γ ∈ (0, 1) with φ^γ(τ_uc) = 1 (C21 Thm 8): q* is η-underconfident when max q* >= τ_uc.

    φ rises from φ(0) = 1 to its maximum at τ_oc, then falls to 0, so the non-trivial root
    lies in (τ_oc, 1), found by bisection.

    Args:
        gamma: γ > 0, a number or an array-like of any shape.

    Returns:
        τ_uc in (τ_oc, 1): a float for a scalar γ, else a float64 array of γ's shape.

    Raises:
        ValueError: If a γ ≤ 0.

    Examples:
        >>> from focalcal.theory import phi, tau_uc
        >>> round(float(tau_uc(1.0)), 4)
        0.3679
        >>> round(float(phi(tau_uc(1.0), 1.0)), 6)
        1.0
    """
    gamma = _gamma(gamma, POSITIVE_GAMMA, "tau_uc", scalar=False)
    peak = np.asarray(tau_oc(gamma))
    result = _bisect(lambda v: phi(v, gamma) - 1, peak, np.ones_like(peak))
    return result[()] if result.ndim == 0 else result


def gamma_star(p0: ArrayLike) -> float | np.ndarray:
    r"""γ*(p0) of M20 Prop 2: the γ with g(p0, γ) = 1, so g(p, γ) <= 1 for all p >= p0.

    $$
    \gamma^* = \frac{a}{b} + \frac{1}{\log a}
    W_{-1}\!\left(-\frac{a^{1-a/b} \log a}{b}\right), \qquad a = 1 - p_0, \quad b = p_0 \log p_0.
    $$

    For p0 >= 1/2 the formula gives 0 (every γ >= 0 already has g <= 1 there). The Lambert-W
    argument reaches its minimum -1/e at p0 = 1/2, where W_{-1} is evaluated by its
    branch-point series. M20 §4 reads FLSD-53's schedule off it: g(0.2, 5) ≈ 1 and
    g(0.25, 3) ≈ 1.

    Args:
        p0: Probabilities in the open interval (0, 1), a number or an array-like of any shape.

    Returns:
        γ* ≥ 0: a float for a scalar p0, else a float64 array of p0's shape.

    Raises:
        ValueError: If a p0 lies outside (0, 1) or is NaN.

    Examples:
        >>> from focalcal.theory import gamma_star, gradient_ratio
        >>> round(float(gamma_star(0.2)), 4)
        4.8506
        >>> round(float(gradient_ratio(0.2, gamma_star(0.2))), 6)
        1.0
        >>> gamma_star([0.25, 0.5, 0.8]).round(4).tolist()
        [3.0702, 0.0, 0.0]
    """
    p0 = _check_unit_interval(p0, "p0", open_left=True, open_right=True)
    a = 1 - p0
    b = p0 * np.log(p0)
    log_a = np.log1p(-p0)
    argument = -np.exp((1 - a / b) * log_a) * log_a / b
    # Near the branch point -1/e (p0 ~ 1/2) scipy's W_{-1} returns NaN or complex values for
    # rounding-level excursions; use its series there: W_{-1}(x) = -1 - p - p²/3 - 11p³/72,
    # p = sqrt(2(1 + e x)).
    distance = 1 + math.e * argument
    near_branch = distance < 1e-6
    p = np.sqrt(2 * np.maximum(distance, 0.0))
    series = -1 - p - p**2 / 3 - 11 * p**3 / 72
    with np.errstate(invalid="ignore"):
        lambert = np.real(special.lambertw(np.where(near_branch, -0.3, argument), k=-1))
    result = a / b + np.where(near_branch, series, lambert) / log_a
    result = np.where(p0 >= 0.5, np.maximum(result, 0.0), result)
    return result[()] if result.ndim == 0 else result


# ------------------------------------------------------------------- focal risk minimiser


def _log_h_of_logit(z, gamma: float):
    """u(z) = log h^γ(σ(z)) and du/dz for a binary logit z = log(q/(1-q)), numpy float64.

    u = -softplus(-z) + γ softplus(z) - log1p(γ r), r = ρ(σ(z)) = e^z softplus(-z); u increases
    from -∞ to ∞ for γ > 0 (convexity of the focal loss, K24 Prop 1), slope 1 on the left and
    γ on the right. Everything is built from x = e^{-|z|} <= 1, so nothing overflows.
    """
    x = np.exp(-np.abs(z))
    log1p_x = np.log1p(x)
    positive = z > 0
    softplus_neg = np.maximum(-z, 0.0) + log1p_x  # -log q
    softplus_pos = np.maximum(z, 0.0) + log1p_x  # -log(1-q)
    sigma = np.where(positive, 1.0, x) / (1 + x)
    x_safe = np.where(x > 0, x, 1.0)
    r = np.where(positive, np.where(x > 0, log1p_x / x_safe, 1.0), x * softplus_neg)
    # dr/dz = r - σ >= 0; for z > 0 that difference cancels, so use (log1p(x) - x/(1+x))/x.
    dr_pos = np.where(x > 1e-4, (log1p_x - x / (1 + x)) / x_safe, x / 2 - 2 * x * x / 3)
    dr = np.where(positive, dr_pos, r - sigma)
    u = gamma * softplus_pos - softplus_neg - np.log1p(gamma * r)
    du = (1 - sigma) + gamma * sigma - gamma * dr / (1 + gamma * r)
    return u, du


def _inverse_log_h(v, z_start, gamma: float, tol: float = 1e-14, max_iter: int = 200):
    """Solve u(z) = v elementwise (v finite): Newton safeguarded by a bisection bracket.

    Bracket from L(z) - d_lo <= u(z) <= L(z) + d_hi, L(z) = z + (γ-1) max(z, 0),
    d_lo = log1p(γ) + max(1-γ, 0) log 2, d_hi = max(γ-1, 0) log 2. Only unconverged entries are
    iterated. Returns z and du/dz there (the outer solve's slope).
    """

    def linear_inverse(w):  # capped so that a tiny γ cannot make the bracket infinite
        with np.errstate(over="ignore"):
            return np.where(w <= 0, w, np.minimum(w / gamma, 1e300))

    v = np.asarray(v, dtype=np.float64).ravel()
    low = linear_inverse(v - max(gamma - 1, 0.0) * math.log(2))
    high = linear_inverse(v + math.log1p(gamma) + max(1 - gamma, 0.0) * math.log(2))
    z = np.clip(np.asarray(z_start, dtype=np.float64).ravel(), low, high)
    slope = np.empty_like(z)
    active = np.arange(z.size)
    for _ in range(max_iter):
        za, va, lo, hi = z[active], v[active], low[active], high[active]
        u, du = _log_h_of_logit(za, gamma)
        slope[active] = du
        residual = u - va
        lo = np.where(residual < 0, za, lo)
        hi = np.where(residual > 0, za, hi)
        newton = za - residual / du
        inside = (newton >= lo) & (newton <= hi) & np.isfinite(newton)
        z_next = np.where(inside, newton, 0.5 * (lo + hi))
        at_root = np.abs(residual) <= 2 * np.finfo(float).eps * (1 + np.abs(va))
        z_next = np.where(at_root, za, z_next)
        done = at_root | (np.abs(z_next - za) <= tol * (1 + np.abs(za))) | (hi - lo <= tol * (1 + np.abs(za)))
        z[active], low[active], high[active] = z_next, lo, hi
        active = active[~done]
        if active.size == 0:
            break
    return z, slope


def focal_risk_minimizer(eta: ArrayLike, gamma: float) -> np.ndarray:
    r"""q* = argmin_q Σ_i η_i (-(1-q_i)^γ log q_i) over the simplex (C21 Eq 7, Thm 11).

    $$
    q^* = \operatorname*{arg\,min}_{q \in \Delta_K} \sum_i \eta_i \left(-(1-q_i)^\gamma \log q_i\right).
    $$

    The exact inverse of :func:`psi`: ``psi(focal_risk_minimizer(eta, g), g) == eta``. By the
    Lagrange condition log h(q_i) = log η_i + a with one scalar a per row, so each row is a
    monotone 1-D root-find for a (Newton on Σ q_i = 1, bisection-safeguarded), each q_i an
    elementwise inverse of log h in logit space. Vectorised over rows; η zeros give q_i = 0.

    Args:
        eta: Array-like (N, K) or (K,) of class posteriors, rows on the simplex.
        gamma: γ ≥ 0, the focal loss's γ.

    Returns:
        Float64 array of ``eta``'s shape: the focal risk minimiser, rows summing to 1 (γ = 0
        returns η itself, renormalised).

    Raises:
        ValueError: If γ < 0 or a row is not a probability vector.

    Examples:
        With γ = 2 a posterior of 0.9 is predicted as 0.69 (underconfident, C21 Thm 8); Ψ^γ
        undoes it:

        >>> from focalcal.theory import focal_risk_minimizer, psi
        >>> q = focal_risk_minimizer([0.9, 0.1], gamma=2.0)
        >>> q.round(4).tolist()
        [0.6942, 0.3058]
        >>> psi(q, gamma=2.0).round(6).tolist()
        [0.9, 0.1]
    """
    gamma = _gamma(gamma, GAMMA, "focal_risk_minimizer")
    eta_array = as_numpy(eta, "eta")
    single_row = eta_array.ndim == 1
    eta2d = check_probs(eta_array[None, :] if single_row else eta_array, "eta").astype(np.float64)
    eta2d = eta2d / eta2d.sum(axis=1, keepdims=True)
    if gamma == 0:
        q = eta2d
    else:
        q = _minimise_focal_risk(eta2d, gamma)
    return q[0] if single_row else q


def _minimise_focal_risk(eta: np.ndarray, gamma: float, tol: float = 1e-14, max_iter: int = 200) -> np.ndarray:
    support = eta > 0
    n_support = support.sum(axis=1)
    q = np.where(support, 1.0 / np.maximum(n_support, 1)[:, None], 0.0)  # exact for uniform-on-support rows
    with np.errstate(divide="ignore"):
        log_eta_all = np.log(eta)
    log_max = log_eta_all.max(axis=1)
    log_min = np.where(support, log_eta_all, np.inf).min(axis=1)
    rows = np.flatnonzero((n_support > 1) & (log_max > log_min))
    if rows.size == 0:
        return q
    log_eta = log_eta_all[rows]
    mask = support[rows]
    log_eta_finite = np.where(mask, log_eta, 0.0)
    # Bracket for a: q_max = 1/K' gives Σq <= 1 (a_low); q_min = 1/K' gives Σq >= 1 (a_high).
    k_eff = n_support[rows].astype(np.float64)
    u_uniform, _ = _log_h_of_logit(-np.log(k_eff - 1), gamma)
    a_low, a_high = u_uniform - log_max[rows], u_uniform - log_min[rows]
    # Start where q_max = η_max: logit(η_max) = log η_max - log(sum of the other η).
    is_top = np.arange(eta.shape[1]) == eta[rows].argmax(axis=1)[:, None]
    other_mass = np.where(is_top, 0.0, eta[rows]).sum(axis=1)
    u_top, _ = _log_h_of_logit(log_max[rows] - np.log(other_mass), gamma)
    a = np.clip(u_top - log_max[rows], a_low, a_high)
    z = np.where(mask, log_eta_finite, 0.0)
    active = np.arange(len(rows))  # rows whose scalar a is still moving
    for _ in range(max_iter):
        m, log_eta_active, aa = mask[active], log_eta_finite[active], a[active]
        za, du = _inverse_log_h(log_eta_active + aa[:, None], z[active], gamma)
        za, du = za.reshape(m.shape), du.reshape(m.shape)
        z[active] = za
        sigma = special.expit(za)
        residual = np.where(m, sigma, 0.0).sum(axis=1) - 1
        slope = np.where(m, sigma * (1 - sigma) / du, 0.0).sum(axis=1)  # dΣq/da
        lo = np.where(residual < 0, aa, a_low[active])
        hi = np.where(residual > 0, aa, a_high[active])
        newton = aa - residual / slope
        inside = (newton >= lo) & (newton <= hi) & np.isfinite(newton)
        a_next = np.where(inside, newton, 0.5 * (lo + hi))
        at_root = np.abs(residual) <= 4 * np.finfo(float).eps * k_eff[active]
        a_next = np.where(at_root, aa, a_next)
        done = at_root | (np.abs(a_next - aa) <= tol * (1 + np.abs(aa)))
        a[active], a_low[active], a_high[active] = a_next, lo, hi
        z[active] = za + ((a_next - aa)[:, None] / du)  # first-order warm start for the next solve
        active = active[~done]
        if active.size == 0:
            break
    z = _inverse_log_h(log_eta_finite + a[:, None], z, gamma)[0].reshape(mask.shape)
    q_rows = np.where(mask, special.expit(z), 0.0)
    q[rows] = q_rows / q_rows.sum(axis=1, keepdims=True)
    return q


# ------------------------------------------------------------ binary map and temperature


def binary_focal_calibration_logit(logit: ArrayLike, gamma: float) -> float | np.ndarray:
    r"""Logit of FC(s) = p̂_γ(σ(s)) (K24 Prop 2-3).

    $$
    \operatorname{logit} \mathrm{FC}(s) = (1+\gamma) s - \operatorname{log1p}(\gamma r(s))
    + \operatorname{log1p}(\gamma r(-s)).
    $$

    This is u(s) - u(-s) with u = log h^γ of the two classes, evaluated from
    log σ(±s) = -softplus(∓s), so it is exact for any finite s.

    Args:
        logit: Binary logits s = log(p / (1 − p)), a number or an array-like of any shape.
        gamma: γ > −1, the focal loss's γ.

    Returns:
        The calibrated logit: a float for a scalar s, else a float64 array of s's shape.

    Raises:
        ValueError: If γ ≤ −1, or a logit is not numeric or not finite.

    Examples:
        >>> from focalcal.theory import binary_focal_calibration_logit
        >>> binary_focal_calibration_logit([-2.0, 0.0, 2.0, 50.0], gamma=1.0).round(4).tolist()
        [-3.5914, 0.0, 3.5914, 99.3069]
    """
    gamma = _gamma(gamma, PSI_GAMMA, "binary_focal_calibration_logit")
    s = as_numpy(logit, "logit")
    if not np.issubdtype(s.dtype, np.number):
        raise ValueError(f"logit must be numeric, got dtype {s.dtype}")
    s = s.astype(np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("logit contains NaN or Inf values")
    ops = _Ops()
    log_p1, log_p0 = -np.logaddexp(0.0, -s), -np.logaddexp(0.0, s)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = _log_h(log_p1, log_p0, gamma, ops) - _log_h(log_p0, log_p1, gamma, ops)
    return out[()] if out.ndim == 0 else out


def binary_focal_calibration(logit: ArrayLike, gamma: float) -> float | np.ndarray:
    """FC(s) = p̂_γ(σ(s)) of K24 Prop 3: the binary focal calibration map on a logit s.

    Equals Ψ^γ([σ(s), 1-σ(s)])_1; computed as σ of :func:`binary_focal_calibration_logit`,
    so both FC(s) and 1 - FC(s) = FC(-s) keep full relative precision for |s| up to 50 and beyond.

    Args:
        logit: Binary logits s, a number or an array-like of any shape.
        gamma: γ > −1, the focal loss's γ.

    Returns:
        The calibrated probability of the positive class, in [0, 1]: a float for a scalar s,
        else a float64 array of s's shape.

    Raises:
        ValueError: If γ ≤ −1, or a logit is not numeric or not finite.

    Examples:
        >>> from focalcal.theory import binary_focal_calibration
        >>> round(float(binary_focal_calibration(1.0, gamma=2.0)), 4)
        0.9359
        >>> binary_focal_calibration([-3.0, 0.0, 3.0], gamma=2.0).round(4).tolist()
        [0.0003, 0.5, 0.9997]
    """
    return special.expit(binary_focal_calibration_logit(logit, gamma))


def temperature_bounds(gamma: ArrayLike) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    r"""(T_low, T_high) of K24 Prop 3: the temperatures between which the binary focal map lies.

    $$
    T_{low} = \frac{1}{\gamma+1}, \qquad T_{high} = \frac{1}{\gamma + 1 - \log(\gamma+1)/2}.
    $$

    For s > 0, σ(s/T_high) < FC(s) < σ(s/T_low), reversed for s < 0 (the paper's display writes
    e^{-s/(γ+1)}; its proof, logit FC = (γ+1)s - log f_γ(s), shows the map is σ(s/T)).

    Args:
        gamma: γ ≥ 0, a number or an array-like of any shape.

    Returns:
        ``(T_low, T_high)``: two floats for a scalar γ, else two float64 arrays of γ's shape.

    Raises:
        ValueError: If a γ < 0.

    Examples:
        >>> from focalcal.theory import temperature_bounds
        >>> low, high = temperature_bounds(1.0)
        >>> round(float(low), 4), round(float(high), 4)
        (0.5, 0.6048)
    """
    gamma = _gamma(gamma, GAMMA, "temperature_bounds", scalar=False)
    low = 1 / (gamma + 1)
    high = 1 / (gamma + 1 - np.log1p(gamma) / 2)
    return (low[()], high[()]) if low.ndim == 0 else (low, high)
