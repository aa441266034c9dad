"""Two-class toy problem: training free logits with each loss reaches that loss's optimum.

One input seen 10 times with labels 7 × class 0 and 3 × class 1, so the batch mean is the
pointwise risk at η = (0.7, 0.3) (FLSD-532: 8 and 2, η = 0.8, where its piecewise risk has an
interior minimum; at η = 0.7 its infimum sits on the jump at p = 0.5 and is not attained). The optimum q*(η) comes from closed forms where they exist
(cross-entropy and Brier: η; focal: ``theory.focal_risk_minimizer``; label smoothing: the
smoothed η; inverse-frequency weighted CE: 1/2) and otherwise from a grid search over q of the
risk written out in numpy from the papers' formulas — an independent implementation. The
generalised Dice loss is constant in q on a single input (its class weights cancel exactly),
so it gets a two-input problem instead.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import minimize_scalar

from focalcal import losses
from focalcal.theory import focal_risk_minimizer

pytestmark = pytest.mark.usefixtures("loss_kernels")  # every test on the fused and the eager path

ETA = 0.7
ETA_FLSD532 = 0.8


def labels_for(eta: float) -> torch.Tensor:
    n_pos = round(10 * eta)
    return torch.tensor([0] * n_pos + [1] * (10 - n_pos))


def focal_term(p, gamma):
    return -((1 - p) ** gamma) * np.log(p)


def flsd_gamma(p, thresholds, gammas):
    return np.asarray(gammas)[np.searchsorted(thresholds, p, side="right")]


def risk_minimizer(risk) -> float:
    """q ∈ (0, 1) minimising ``risk``: fine grid, then bounded refinement around the best point."""
    grid = np.linspace(1e-4, 1 - 1e-4, 20001)
    values = np.array([risk(q) for q in grid])
    best = grid[np.argmin(values)]
    refined = minimize_scalar(risk, bounds=(max(best - 1e-4, 1e-6), min(best + 1e-4, 1 - 1e-6)), method="bounded",
                              options={"xatol": 1e-12})
    return float(refined.x if refined.fun <= values.min() else best)


def dce_risk(q, alpha=1.0, beta=1.0):
    return ETA * (-np.log(q) + beta * np.log(alpha + 1 - q)) + (1 - ETA) * (-np.log(1 - q) + beta * np.log(alpha + q))


def dfl_risk(q, alpha=1.0, beta=1.0, gamma=1.0, rho=1.0):
    def one(p_true):  # two classes: the other class has probability 1 − p_true
        return -np.log(p_true) - beta * np.log(rho - (1 - p_true)) + alpha * (2 * (1 - p_true) ** gamma)
    return ETA * one(q) + (1 - ETA) * one(1 - q)


def flsd_risk(thresholds, gammas, eta=ETA):
    def risk(q):
        return (eta * focal_term(q, flsd_gamma(q, thresholds, gammas))
                + (1 - eta) * focal_term(1 - q, flsd_gamma(1 - q, thresholds, gammas)))
    return risk


SEVEN_THREE = np.array([0] * 7 + [1] * 3)  # seven samples of class 0, three of class 1


def mmce_count_risk(q, lam=2.0, labels=SEVEN_THREE):
    """CE + λ·MMCE_w with the released code's count normalisation (its three group terms, the
    1e-5's and the √(· + 1e-10)) on one input seen with ``labels``. Every sample sits at the
    same confidence r, so the kernel is 1 and MMCE_w ≈ |(1 − r)/m − r/n|: 0 at r = n/(m + n), not
    at r = η — at λ = 2 on 10 samples it pulls q below 1/2 and the top class flips to class 1."""
    top = 0 if q >= 0.5 else 1
    r = max(q, 1 - q)
    m = int((labels == top).sum())
    n = len(labels) - m
    risk = -(labels == 0).mean() * np.log(q) - (labels == 1).mean() * np.log(1 - q)
    square = ((m * (1 - r)) ** 2 / (m * m * (m * m + 1e-5)) + (n * r) ** 2 / (n * n * (n * n + 1e-5))
              - 2 * (m * (1 - r)) * (n * r) / (m * n * (m * n + 1e-5)))
    return risk + lam * np.sqrt(max(square + 1e-10, 0.0))  # the 1e-5's make the form slightly indefinite


EXPECTED = {
    "cross_entropy": lambda: ETA,
    "brier": lambda: ETA,
    "mmce": lambda: risk_minimizer(mmce_count_risk),  # the released estimator: not 0 at q = η (see below)
    "focal": lambda: focal_risk_minimizer(np.array([ETA, 1 - ETA]), 3.0)[0],
    "focal_scheduled": lambda: focal_risk_minimizer(np.array([ETA, 1 - ETA]), 5.0)[0],  # epoch 0: γ = 5
    "flsc531": lambda: focal_risk_minimizer(np.array([ETA, 1 - ETA]), 5.0)[0],
    "flsc532": lambda: focal_risk_minimizer(np.array([ETA, 1 - ETA]), 5.0)[0],
    "adafocal": lambda: focal_risk_minimizer(np.array([ETA, 1 - ETA]), 1.0)[0],  # before any update: γ_0 = 1
    "label_smoothing": lambda: ETA * 0.95 + (1 - ETA) * 0.05,
    "weighted_cross_entropy": lambda: 0.5,  # inverse-frequency weights balance the classes
    "focal_sample_dependent": lambda: risk_minimizer(flsd_risk([0.2], [5.0, 3.0])),
    "flsd53": lambda: risk_minimizer(flsd_risk([0.2], [5.0, 3.0])),
    "flsd532": lambda: risk_minimizer(flsd_risk([0.2, 0.5], [5.0, 3.0, 2.0], ETA_FLSD532)),
    "dual_cross_entropy": lambda: risk_minimizer(dce_risk),
    "dual_focal": lambda: risk_minimizer(dfl_risk),
}


def train_free_logits(loss, labels: torch.Tensor, inputs: int = 1) -> torch.Tensor:
    """Minimise the batch loss over one free logit pair per input; return the learned q_0s.

    ``labels`` has one row of 10 labels per input. Starts off the FLSD thresholds (q = 0.5).
    """
    logits = torch.tensor([[0.1, 0.0]] * inputs, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([logits], lr=0.05)
    per_input = labels.reshape(inputs, -1).shape[1]
    for step in range(700):
        if step == 450:
            optimiser.param_groups[0]["lr"] = 0.005
        optimiser.zero_grad()
        loss(logits.repeat_interleave(per_input, dim=0), labels.reshape(-1)).backward()
        optimiser.step()
    return torch.softmax(logits.detach(), 1)[:, 0]


def test_every_loss_has_an_expected_optimum():
    assert set(EXPECTED) | {"generalized_dice"} == set(losses.available())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_training_reaches_the_pointwise_optimum(name):
    labels = labels_for(ETA_FLSD532 if name == "flsd532" else ETA)
    loss = losses.build({"name": name})
    loss.set_training_targets(labels, 2)
    loss.set_epoch(0, 10)
    expected = EXPECTED[name]()
    learned = float(train_free_logits(loss, labels)[0])
    assert abs(learned - expected) < 2e-3, (name, learned, expected)


def gdl_two_inputs(q_a, q_b, labels_a, labels_b):
    """Batch generalised Dice (Sudre et al.) for two inputs with predictions q_a, q_b of class 0."""
    n_a, n_b = len(labels_a), len(labels_b)
    ref0 = np.concatenate([labels_a == 0, labels_b == 0]).astype(float)
    weights = np.array([1 / ref0.sum() ** 2, 1 / (len(ref0) - ref0.sum()) ** 2])
    p0 = np.concatenate([np.full(n_a, q_a), np.full(n_b, q_b)])
    numerator = weights[0] * (ref0 * p0).sum() + weights[1] * ((1 - ref0) * (1 - p0)).sum()
    denominator = weights[0] * (ref0.sum() + p0.sum()) + weights[1] * ((1 - ref0).sum() + (1 - p0).sum())
    return 1 - 2 * numerator / denominator


def test_generalized_dice_reaches_its_optimum_on_two_inputs():
    labels = torch.cat([labels_for(0.7), labels_for(0.2)])
    learned = train_free_logits(losses.build({"name": "generalized_dice"}), labels, inputs=2).numpy()
    grid = np.linspace(0.0, 1.0, 201)
    values = np.array([[gdl_two_inputs(a, b, labels[:10].numpy(), labels[10:].numpy()) for b in grid] for a in grid])
    i, j = np.unravel_index(np.argmin(values), values.shape)
    assert (grid[i], grid[j]) == (1.0, 0.0)  # Dice favours hard masks: each input's majority class
    assert learned[0] > 0.99 and learned[1] < 0.01
    achieved = gdl_two_inputs(learned[0], learned[1], labels[:10].numpy(), labels[10:].numpy())
    assert achieved <= values.min() + 1e-3


def test_focal_optimum_is_underconfident_and_ordered_by_gamma():
    # charoenphakdee2021: q*_FL lies between 1/2 and η, closer to 1/2 as γ grows.
    labels = labels_for(ETA)
    learned = [float(train_free_logits(losses.build({"name": "focal", "gamma": g}), labels)[0]) for g in (0.0, 1.0, 3.0)]
    assert ETA - 2e-3 < learned[0] < ETA + 2e-3
    assert 0.5 < learned[2] < learned[1] < learned[0]


def test_weight_normalised_mmce_vanishes_at_the_pointwise_optimum():
    # one input: both weighted groups sit at the same confidence, MMCE = 0, so CE's optimum η
    learned = float(train_free_logits(losses.build({"name": "mmce", "normalization": "weight"}), labels_for(ETA))[0])
    assert abs(learned - ETA) < 2e-3
    assert risk_minimizer(mmce_count_risk) < 0.5  # the released estimator's optimum: the flipped class
