"""AdaFocal: equal-mass validation bins, the per-bin γ update, per-sample γ lookup."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import softmax as np_softmax

from focalcal import losses
from focalcal.losses.adafocal import equal_mass_bins, next_gammas


def test_equal_mass_bins_match_numpy_array_split():
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.2, 1.0, 157)
    correct = rng.uniform(size=157) < confidence
    edges, mean_conf, accuracy = equal_mass_bins(torch.from_numpy(confidence), torch.from_numpy(correct), 15)
    order = np.argsort(confidence)
    chunks = np.array_split(order, 15)
    assert sorted(len(c) for c in chunks) == [10] * 8 + [11] * 7
    np.testing.assert_allclose(mean_conf.numpy(), [confidence[c].mean() for c in chunks], rtol=1e-12)
    np.testing.assert_allclose(accuracy.numpy(), [correct[c].mean() for c in chunks], rtol=1e-12)
    # Every sample falls in its own chunk's bin when looked up by the edges.
    bins = np.searchsorted(edges.numpy(), confidence, side="left")
    for b, chunk in enumerate(chunks):
        assert np.all(bins[chunk] == b)


def test_gamma_update_rule():
    gammas = torch.tensor([1.0, 1.0, 0.25, -0.25, -1.0, 19.0, 3.0], dtype=torch.float64)
    gap = torch.tensor([0.1, -0.1, -0.3, 0.3, -0.2, 0.5, 0.0], dtype=torch.float64)  # C − A
    got = next_gammas(gammas, gap, lam=1.0, gamma_min=-2.0, gamma_max=20.0, switch_threshold=0.2)
    expected = [
        np.exp(0.1),           # over-confident focal bin: γ grows
        np.exp(-0.1),          # under-confident focal bin: γ shrinks
        -0.2,                  # 0.25·e^-0.3 = 0.185 < S_th and under-confident: switch to inverse focal
        0.2,                   # inverse bin shrinking below S_th while over-confident: back to focal
        -np.exp(0.2),          # under-confident inverse bin: |γ| grows
        20.0,                  # capped at γ_max
        3.0,                   # calibrated: unchanged
    ]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_inverse_focal_bin_driven_below_gamma_min_lands_on_it():
    # The official AdaFocal code clips the signed γ to [−2, 20]: an under-confident inverse bin
    # at −1.9 would move to −1.9·e^0.3 = −2.565 (past the bound); it stops at −2 exactly.
    loss = losses.build({"name": "adafocal", "num_bins": 2})
    loss.gammas = torch.tensor([-1.9, 1.0], dtype=torch.float64)
    unclipped = -1.9 * np.exp(0.3)
    assert unclipped < loss.gamma_min == -2.0
    loss.update_gammas([0.5, 0.6], [0.8, 0.6])  # gaps C − A = −0.3 and 0
    assert loss.gammas.tolist() == [-2.0, 1.0]


def test_focal_bin_driven_above_gamma_max_lands_on_it():
    loss = losses.build({"name": "adafocal", "num_bins": 2})
    loss.gammas = torch.tensor([19.0, -1.5], dtype=torch.float64)
    unclipped = 19.0 * np.exp(0.5)
    assert unclipped > loss.gamma_max == 20.0
    loss.update_gammas([0.9, 0.6], [0.4, 0.6])  # gaps C − A = 0.5 and 0
    assert loss.gammas.tolist() == [20.0, -1.5]


def test_gamma_bounds_are_configurable_and_reported():
    assert losses.parameters("adafocal")["gamma_min"] == -2.0
    loss = losses.build({"name": "adafocal", "num_bins": 1, "gamma_min": -5.0, "gamma_max": 4.0})
    assert loss.hyperparameters()["gamma_min"] == -5.0 and loss.hyperparameters()["gamma_max"] == 4.0
    loss.gammas = torch.tensor([-4.0], dtype=torch.float64)
    loss.update_gammas([0.3], [0.8])  # −4·e^0.5 = −6.6 → −5
    assert loss.gammas.tolist() == [-5.0]


@pytest.mark.parametrize("gamma_min", [0.0, 1.0, float("nan"), float("-inf"), "-2", True])
def test_adafocal_rejects_bad_gamma_min(gamma_min):
    with pytest.raises(ValueError, match="gamma_min"):
        losses.build({"name": "adafocal", "gamma_min": gamma_min})


def test_adafocal_rejects_bounds_that_cut_the_regime_switch_or_the_start():
    # A bin switched to −S_th must not be clipped back below S_th, nor may γ_0 start outside.
    with pytest.raises(ValueError, match=r"switch_threshold must be <= min\(-gamma_min, gamma_max\) = 0.1"):
        losses.build({"name": "adafocal", "gamma_min": -0.1})
    with pytest.raises(ValueError, match=r"gamma_initial must lie in \[gamma_min, gamma_max\] = \[-2.0, 20.0\], got -3.0"):
        losses.build({"name": "adafocal", "gamma_initial": -3.0})


def inverse_or_focal_numpy(p, gamma):
    return np.where(gamma >= 0, -(1 - p) ** np.abs(gamma) * np.log(p), -(1 + p) ** np.abs(gamma) * np.log(p))


@pytest.mark.parametrize("bin_by", ["true_class", "predicted"])
def test_update_from_validation_then_per_sample_gamma(bin_by):
    torch.manual_seed(0)
    # Under-confident half (flat logits, labels = argmax) and over-confident half (sharp, random labels).
    flat, sharp = 0.3 * torch.randn(150, 4, dtype=torch.float64), 4 * torch.randn(150, 4, dtype=torch.float64)
    val_logits = torch.cat([flat, sharp])
    val_labels = torch.cat([flat.argmax(1), torch.randint(0, 4, (150,))])
    loss = losses.build({"name": "adafocal", "num_bins": 5, "lam": 4.0, "bin_by": bin_by, "reduction": "none"})
    assert torch.all(loss.gammas == 1.0)
    for _ in range(3):
        loss.update_from_validation(val_logits, val_labels)
    gammas, edges = loss.gammas.numpy(), loss.bin_edges.numpy()
    assert (gammas < 0).any() and (gammas > 1).any()
    # Reference: the same statistics recomputed in numpy and the rule applied three times.
    p_val = np_softmax(val_logits.numpy(), axis=1)
    conf, correct = p_val.max(1), p_val.argmax(1) == val_labels.numpy()
    chunks = np.array_split(np.argsort(conf), 5)
    gap = np.array([conf[c].mean() - correct[c].mean() for c in chunks])
    reference = torch.ones(5, dtype=torch.float64)
    for _ in range(3):
        reference = next_gammas(reference, torch.from_numpy(gap), lam=4.0, gamma_min=-2.0, gamma_max=20.0,
                                switch_threshold=0.2)
    np.testing.assert_allclose(gammas, reference.numpy(), rtol=1e-12)
    # Training samples use the γ of their bin (by p_y or by top-label confidence).
    logits = 2 * torch.randn(200, 4, dtype=torch.float64)
    target = torch.randint(0, 4, (200,))
    p = np_softmax(logits.numpy(), axis=1)
    p_y = p[np.arange(200), target.numpy()]
    lookup = p_y if bin_by == "true_class" else p.max(1)
    per_sample_gamma = gammas[np.searchsorted(edges, lookup, side="left")]
    np.testing.assert_allclose(loss(logits, target).numpy(), inverse_or_focal_numpy(p_y, per_sample_gamma), rtol=1e-10)


def test_adafocal_gradcheck_with_inverse_focal_bins():
    loss = losses.build({"name": "adafocal", "num_bins": 3})
    loss.gammas = torch.tensor([-2.0, 0.5, 4.0], dtype=torch.float64)
    loss.bin_edges = torch.tensor([0.3, 0.6], dtype=torch.float64)
    torch.manual_seed(1)
    logits = (2 * torch.randn(8, 3, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 3, (8,))
    p_y = torch.softmax(logits, 1)[torch.arange(8), target].detach()
    assert ((p_y - 0.3).abs().min() > 1e-3) and ((p_y - 0.6).abs().min() > 1e-3)  # away from bin edges
    assert (p_y < 0.3).any()  # some inverse-focal samples
    assert torch.autograd.gradcheck(lambda x: loss(x, target), (logits,))


def test_adafocal_rejects_bad_settings():
    with pytest.raises(ValueError, match="at least num_bins=15"):
        losses.build({"name": "adafocal"}).update_from_validation(torch.randn(10, 3), torch.zeros(10, dtype=torch.long))
    with pytest.raises(ValueError, match="bin_by"):
        losses.build({"name": "adafocal", "bin_by": "label"})
    with pytest.raises(ValueError, match="need 15 bin confidences"):
        losses.build({"name": "adafocal"}).update_gammas([0.5] * 3, [0.5] * 3)
