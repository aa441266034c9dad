r"""Closed-form theory of the focal loss: what its risk minimiser predicts and how to undo it.

Papers (each cited by its key, as in ``focalcal.papers``):

* charoenphakdee2021 (C21) §4-5: φ^γ (Eq 10), τ_oc/τ_uc (Thm 8), the focal risk minimiser
  q*(η) and its inverse Ψ^γ (Thm 11, Eq 11-13).
* komisarenko2024 (K24) §3: the focal calibration map (Prop 2 binary, Prop 4 / Eq 1 multiclass,
  equal to Ψ^γ), its temperature-scaling bounds (Prop 3) and the closest temperature (Figs 2, 6).
* mukhoti2020 (M20) §4: the gradient ratio g(p, γ) (Prop 1) and γ*(p0) (Prop 2).

Derivation used throughout. The pointwise focal risk is $W(q; \eta) = \sum_i \eta_i L(q_i)$ with
$L(q) = -(1-q)^\gamma \log q$ and $L'(q) = -\varphi^\gamma(q)/q$. At the minimiser on the simplex
(Lagrange) $\eta_i \varphi(q_i)/q_i$ is the same for every class, so
$\eta_i \propto h(q_i) = q_i/\varphi(q_i)$: Ψ = normalise(h). Writing
$\varphi(q) = (1-q)^\gamma (1 + \gamma\rho(q))$ with $\rho(q) = q(-\log q)/(1-q) \in [0, 1]$ gives

$$
\log h(q) = \log q - \gamma \log(1-q) - \operatorname{log1p}(\gamma \rho(q)), \qquad
\Psi^\gamma(q) = \operatorname{softmax}(\log h(q)).
$$

Every function here evaluates log h from the pair (log q, log(1-q)), each computed where it is
accurate, so nothing underflows for q at 0 or 1, for one-hot rows or in float32.

Numpy in, numpy out; :func:`psi` and :func:`psi_from_logits` also take torch tensors and
return tensors (same dtype and device), importing torch only when handed one.

The closed forms are in :mod:`focalcal.theory.closed_forms`, the closest-temperature search in
:mod:`focalcal.theory.temperature_search`; every public name is importable from here.
"""

from .closed_forms import (
    binary_focal_calibration,
    binary_focal_calibration_logit,
    focal_risk_minimizer,
    gamma_star,
    gradient_ratio,
    log_psi_from_logits,
    phi,
    psi,
    psi_from_logits,
    tau_oc,
    tau_uc,
    temperature_bounds,
)
from .temperature_search import closest_temperature

__all__ = [
    "binary_focal_calibration",
    "binary_focal_calibration_logit",
    "closest_temperature",
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
