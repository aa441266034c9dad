"""focalcal.losses: gradients, equivalences, mukhoti2020 Prop 1, γ policies, numerics, API."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import logsumexp as np_logsumexp
from scipy.special import softmax as np_softmax

from focalcal import losses
from focalcal.losses._classwise import softmax_parts
from focalcal.theory import gradient_ratio

pytestmark = pytest.mark.usefixtures("loss_kernels")  # every test on the fused and the eager path

ALL_NAMES = losses.available()
SPATIAL_OK = [n for n in ALL_NAMES if n != "mmce"]


def prepared(name: str, num_classes: int, **params):
    """A loss from the registry with its trainer hooks called as a trainer would."""
    loss = losses.build({"name": name, **params})
    loss.set_training_targets(torch.arange(num_classes).repeat(3), num_classes)
    loss.set_epoch(0, 10)
    return loss


def focal_numpy(logits: np.ndarray, target: np.ndarray, gamma: float) -> np.ndarray:
    """Per-sample −(1 − p_y)^γ log p_y in float64 numpy (moderate logits only)."""
    p = np_softmax(logits, axis=1)[np.arange(len(target)), target]
    return -((1 - p) ** gamma) * np.log(p)


# ---- gradients -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_NAMES)
def test_gradcheck_classification(name):
    torch.manual_seed(1)
    logits = (2 * torch.randn(6, 4, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 4, (6,))
    loss = prepared(name, 4)
    assert torch.autograd.gradcheck(lambda x: loss(x, target), (logits,))


@pytest.mark.parametrize("name", SPATIAL_OK)
def test_gradcheck_segmentation_with_ignore_index(name):
    torch.manual_seed(2)
    logits = (2 * torch.randn(2, 3, 3, 2, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 3, (2, 3, 2))
    target[0, 0, 0] = 255
    loss = prepared(name, 3, ignore_index=255)
    assert torch.autograd.gradcheck(lambda x: loss(x, target), (logits,))


@pytest.mark.parametrize("params", [{"gamma": 0.5}, {"gamma": 2.0, "smoothing": 0.1}, {"gamma": 1.0, "alpha": [0.2, 1.0, 3.0]}])
def test_gradcheck_focal_variants(params):
    torch.manual_seed(3)
    logits = (3 * torch.randn(5, 3, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 3, (5,))
    loss = losses.build({"name": "focal", **params})
    assert torch.autograd.gradcheck(lambda x: loss(x, target), (logits,))


def test_gradcheck_soft_targets_and_dual_focal_gamma_below_one():
    torch.manual_seed(4)
    logits = (2 * torch.randn(4, 3, dtype=torch.float64)).requires_grad_()
    soft = torch.softmax(torch.randn(4, 3, dtype=torch.float64), dim=1)
    focal = losses.build({"name": "focal", "gamma": 1.5})
    assert torch.autograd.gradcheck(lambda x: focal(x, soft), (logits,))
    target = torch.randint(0, 3, (4,))
    dual = losses.build({"name": "dual_focal", "gamma": 0.5, "rho": 1.5, "beta": 2.0, "alpha": 0.7})
    assert torch.autograd.gradcheck(lambda x: dual(x, target), (logits,))


# ---- equivalences and values -----------------------------------------------------------------
def test_focal_gamma_zero_is_cross_entropy_and_matches_numpy():
    torch.manual_seed(5)
    logits = 3 * torch.randn(50, 7, dtype=torch.float64)
    target = torch.randint(0, 7, (50,))
    ce = F.cross_entropy(logits, target, reduction="none")
    focal0 = losses.build({"name": "focal", "gamma": 0})(logits, target)
    assert torch.allclose(focal0, ce.mean(), rtol=1e-13, atol=0)
    for gamma in (0.5, 1.0, 3.0):
        per_sample = losses.build({"name": "focal", "gamma": gamma, "reduction": "none"})(logits, target)
        np.testing.assert_allclose(per_sample.numpy(), focal_numpy(logits.numpy(), target.numpy(), gamma), rtol=1e-10)


def test_label_smoothing_zero_is_cross_entropy_and_matches_torch():
    torch.manual_seed(6)
    logits = 3 * torch.randn(40, 5, dtype=torch.float64)
    target = torch.randint(0, 5, (40,))
    ls0 = losses.build({"name": "label_smoothing", "smoothing": 0.0})(logits, target)
    assert torch.allclose(ls0, F.cross_entropy(logits, target), rtol=1e-13, atol=0)
    # mukhoti2020's α puts α/(K−1) on each other class; torch's ε puts ε/K on every class.
    alpha, k = 0.05, 5
    ls = losses.build({"name": "label_smoothing", "smoothing": alpha})(logits, target)
    assert torch.allclose(ls, F.cross_entropy(logits, target, label_smoothing=alpha * k / (k - 1)), rtol=1e-12)


def test_focal_with_smoothing_is_focal_of_smoothed_soft_targets():
    torch.manual_seed(7)
    logits = 2 * torch.randn(30, 4, dtype=torch.float64)
    target = torch.randint(0, 4, (30,))
    alpha, gamma = 0.1, 2.0
    soft = np.full((30, 4), alpha / 3)
    soft[np.arange(30), target.numpy()] = 1 - alpha
    p = np_softmax(logits.numpy(), axis=1)
    expected = -(soft * (1 - p) ** gamma * np.log(p)).sum(axis=1)
    got = losses.build({"name": "focal", "gamma": gamma, "smoothing": alpha, "reduction": "none"})(logits, target)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-11)
    soft_direct = losses.build({"name": "focal", "gamma": gamma, "reduction": "none"})(logits, torch.from_numpy(soft))
    np.testing.assert_allclose(soft_direct.numpy(), expected, rtol=1e-11)
    # γ = 0 with smoothing is label smoothing.
    fl0 = losses.build({"name": "focal", "gamma": 0, "smoothing": alpha})(logits, target)
    ls = losses.build({"name": "label_smoothing", "smoothing": alpha})(logits, target)
    assert torch.allclose(fl0, ls, rtol=1e-12)


def test_focal_alpha_class_weights_and_scalar():
    torch.manual_seed(8)
    logits = torch.randn(20, 3, dtype=torch.float64)
    target = torch.randint(0, 3, (20,))
    weights = np.array([0.5, 2.0, 1.5])
    base = focal_numpy(logits.numpy(), target.numpy(), 2.0)
    got = losses.build({"name": "focal", "gamma": 2, "alpha": weights.tolist(), "reduction": "none"})(logits, target)
    np.testing.assert_allclose(got.numpy(), weights[target.numpy()] * base, rtol=1e-12)
    scalar = losses.build({"name": "focal", "gamma": 2, "alpha": 0.25, "reduction": "sum"})(logits, target)
    assert math.isclose(float(scalar), 0.25 * base.sum(), rel_tol=1e-12)


def test_brier_matches_numpy():
    torch.manual_seed(9)
    logits = 2 * torch.randn(25, 6, dtype=torch.float64)
    target = torch.randint(0, 6, (25,))
    p = np_softmax(logits.numpy(), axis=1)
    onehot = np.eye(6)[target.numpy()]
    expected = ((p - onehot) ** 2).sum(axis=1).mean()
    assert math.isclose(float(losses.build({"name": "brier"})(logits, target)), expected, rel_tol=1e-12)


def mmce_numpy(confidence, correct, weighted, bandwidth=0.4, normalization="count"):
    """Double loop over pairs — a deliberately naive second implementation.

    "count": the released code's estimator written from its three group terms (Kumar et al.'s
    ``calibration_mmce_w_loss``, mukhoti2020's ``MMCE_weighted``): each a mean over its pairs,
    divided once more by (pair count + 1e-5); √(· + 1e-10); 0 without both groups.
    """
    n = len(confidence)
    kernel = lambda a, b: math.exp(-abs(a - b) / bandwidth)
    if weighted and normalization == "count":
        good = [i for i in range(n) if correct[i]]
        bad = [j for j in range(n) if not correct[j]]
        m_c, n_w = len(good), len(bad)
        if m_c == 0 or n_w == 0:
            return 0.0
        cc = sum((1 - confidence[i]) * (1 - confidence[j]) * kernel(confidence[i], confidence[j])
                 for i in good for j in good) / (m_c * m_c)
        ww = sum(confidence[i] * confidence[j] * kernel(confidence[i], confidence[j])
                 for i in bad for j in bad) / (n_w * n_w)
        cw = sum((1 - confidence[i]) * confidence[j] * kernel(confidence[i], confidence[j])
                 for i in good for j in bad) / (m_c * n_w)
        square = cc / (m_c * m_c + 1e-5) + ww / (n_w * n_w + 1e-5) - 2 * cw / (m_c * n_w + 1e-5)
        return math.sqrt(square + 1e-10)
    if weighted:
        if correct.all() or not correct.any():
            return 0.0
        wc = np.where(correct, 1 - confidence, 0.0)
        ww = np.where(correct, 0.0, confidence)
        w = wc / wc.sum() - ww / ww.sum()
    else:
        w = (correct.astype(float) - confidence) / n
    total = 0.0
    for i in range(n):
        for j in range(n):
            total += w[i] * w[j] * kernel(confidence[i], confidence[j])
    return math.sqrt(max(total, 0.0))


def released_mmce_weighted(logits, target):
    """The released estimator by autograd, written from its formula with boolean masks (a third
    implementation): each group's pair mean, divided by (pair count + 1e-5); √(· + 1e-10); 0 with
    zero gradient without both groups."""
    confidence, predicted = torch.softmax(logits, dim=1).max(dim=1)
    correct = predicted == target
    m, n = int(correct.sum()), int((~correct).sum())
    if m == 0 or n == 0:
        return 0.0 * confidence.sum()
    right, wrong = confidence[correct], confidence[~correct]

    def pair_mean(weight_a, a, weight_b, b):
        return (weight_a[:, None] * weight_b[None, :] * torch.exp(-(a[:, None] - b[None, :]).abs() / 0.4)).mean()

    square = (pair_mean(1 - right, right, 1 - right, right) / (m * m + 1e-5)
              + pair_mean(wrong, wrong, wrong, wrong) / (n * n + 1e-5)
              - 2 * pair_mean(1 - right, right, wrong, wrong) / (m * n + 1e-5))
    return torch.sqrt(square + 1e-10)


@pytest.mark.parametrize("weighted, normalization", [(True, "count"), (True, "weight"), (False, "count")])
def test_mmce_matches_naive_double_loop(weighted, normalization):
    torch.manual_seed(10)
    logits = 2 * torch.randn(30, 5, dtype=torch.float64)
    target = torch.randint(0, 5, (30,))
    p = np_softmax(logits.numpy(), axis=1)
    confidence, correct = p.max(axis=1), p.argmax(axis=1) == target.numpy()
    assert 0 < correct.sum() < 30
    expected = F.cross_entropy(logits, target).item() + 2.0 * mmce_numpy(confidence, correct, weighted,
                                                                         normalization=normalization)
    loss = losses.build({"name": "mmce", "lam": 2.0, "weighted": weighted, "normalization": normalization})
    got = loss(logits, target)
    assert math.isclose(float(got), expected, rel_tol=1e-11)


def test_mmce_count_is_the_default_and_the_released_estimator():
    assert losses.build({"name": "mmce"}).normalization == "count"
    torch.manual_seed(12)
    for n, dtype, rtol in ((128, torch.float64, 1e-10), (128, torch.float32, 1e-4), (37, torch.float64, 1e-10)):
        logits = 3 * torch.randn(n, 10, dtype=torch.float64)
        target = torch.where(torch.rand(n) < 0.8, logits.argmax(1), torch.randint(0, 10, (n,)))  # ~80 % right
        x = logits.to(dtype).clone().requires_grad_()
        reference = F.cross_entropy(x, target) + 2.0 * released_mmce_weighted(x, target)
        expected_grad, = torch.autograd.grad(reference, x)
        x = logits.to(dtype).clone().requires_grad_()
        loss = losses.build({"name": "mmce", "lam": 2.0})(x, target)
        grad, = torch.autograd.grad(loss, x)
        assert loss.dtype == dtype and grad.dtype == dtype
        assert loss.item() == pytest.approx(reference.item(), rel=rtol)
        torch.testing.assert_close(grad, expected_grad, rtol=rtol, atol=rtol * expected_grad.abs().max().item())
        p = np_softmax(logits.numpy(), axis=1)
        regulariser = (loss.item() - F.cross_entropy(logits, target).item()) / 2.0
        naive = mmce_numpy(p.max(axis=1), p.argmax(axis=1) == target.numpy(), True)
        assert regulariser == pytest.approx(naive, rel=1e-3 if dtype == torch.float32 else 1e-9)


def test_mmce_count_gradient_matches_finite_differences():
    torch.manual_seed(13)
    logits = (2 * torch.randn(24, 4, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 4, (24,))
    loss = losses.build({"name": "mmce", "lam": 2.0, "normalization": "count"})
    assert 0 < int((logits.argmax(1) == target).sum()) < 24
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (logits,))
    # and the numpy double loop through central differences, one logit at a time
    grad, = torch.autograd.grad(loss(logits, target), logits)
    base = logits.detach().numpy()

    def value(z):
        p = np_softmax(z, axis=1)
        ce = -np.log(p[np.arange(24), target.numpy()]).mean()
        return ce + 2.0 * mmce_numpy(p.max(axis=1), p.argmax(axis=1) == target.numpy(), True)

    h = 1e-6
    for i, j in [(0, 0), (3, 2), (10, 1), (23, 3), (17, 0)]:
        up, down = base.copy(), base.copy()
        up[i, j] += h
        down[i, j] -= h
        assert (value(up) - value(down)) / (2 * h) == pytest.approx(grad[i, j].item(), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("normalization", ["count", "weight"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mmce_without_both_groups_is_cross_entropy(normalization, dtype):
    torch.manual_seed(14)
    logits = 2 * torch.randn(20, 5, dtype=dtype)
    loss = losses.build({"name": "mmce", "lam": 2.0, "normalization": normalization})
    all_correct = logits.argmax(1)
    all_wrong = (all_correct + 1) % 5
    for target in (all_correct, all_wrong):
        x = logits.clone().requires_grad_()
        value = loss(x, target)
        grad, = torch.autograd.grad(value, x)
        y = logits.clone().requires_grad_()
        ce = F.cross_entropy(y, target)
        ce_grad, = torch.autograd.grad(ce, y)
        assert value.item() == pytest.approx(ce.item(), rel=1e-6)
        torch.testing.assert_close(grad, ce_grad)
        if normalization == "count":
            assert float(released_mmce_weighted(logits, target)) == 0.0


def test_mmce_normalization_is_checked():
    with pytest.raises(ValueError, match="normalization must be one of"):
        losses.build({"name": "mmce", "normalization": "counts"})


def test_weighted_mmce_vanishes_under_calibration_only():
    rng = np.random.default_rng(0)
    confidence = torch.from_numpy(rng.uniform(0.3, 1.0, 4000))
    one_minus = 1 - confidence
    calibrated = torch.from_numpy(rng.uniform(size=4000)) < confidence
    overconfident = torch.from_numpy(rng.uniform(size=4000)) < confidence - 0.2
    from focalcal.losses.mmce import mmce_squared
    small = mmce_squared(confidence, one_minus, calibrated, normalization="weight").sqrt()
    large = mmce_squared(confidence, one_minus, overconfident, normalization="weight").sqrt()
    assert small < 0.02 and large > 0.05  # 0.011 vs 0.063 with this seed


def test_count_mmce_is_much_smaller_than_weight_mmce():
    # The default run's regime: the released estimator's √ is a fraction of the
    # weight-normalised one's, and so is its pull on the network.
    rng = np.random.default_rng(1)
    correct = torch.from_numpy(np.arange(128) < 115)
    confidence = torch.from_numpy(np.where(correct.numpy(), rng.beta(30, 1, 128), rng.beta(8, 1.5, 128)))
    from focalcal.losses.mmce import mmce_norm
    count = mmce_norm(confidence, 1 - confidence, correct, normalization="count")
    weight = mmce_norm(confidence, 1 - confidence, correct, normalization="weight")
    assert 0 < count < weight / 2


# ---- mukhoti2020 Prop 1 ----------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0, 5.0])
def test_prop1_focal_gradient_is_cross_entropy_gradient_times_g(gamma):
    torch.manual_seed(11)
    features = torch.randn(8, 5, dtype=torch.float64)
    weight = (torch.randn(4, 5, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 4, (8,))
    focal = losses.build({"name": "focal", "gamma": gamma, "reduction": "none"})
    p_target = torch.softmax(features @ weight.T, dim=1)[torch.arange(8), target].detach().numpy()
    g = gradient_ratio(p_target, gamma)
    for i in range(8):
        grad_focal, = torch.autograd.grad(focal(features @ weight.T, target)[i], weight)
        grad_ce, = torch.autograd.grad(F.cross_entropy(features @ weight.T, target, reduction="none")[i], weight)
        np.testing.assert_allclose(grad_focal.numpy(), g[i] * grad_ce.numpy(), rtol=1e-10, atol=1e-14)


def test_prop1_holds_in_float32_near_certainty():
    # p_y within 1e-6..1e-30 of 1: the focal gradient must equal g · CE gradient, not NaN/0.
    gaps = torch.tensor([14.0, 30.0, 70.0])
    logits = torch.stack([gaps, torch.zeros(3)], dim=1).float().requires_grad_()
    target = torch.zeros(3, dtype=torch.long)
    for gamma in (0.5, 3.0):
        grad, = torch.autograd.grad(losses.build({"name": "focal", "gamma": gamma, "reduction": "sum"})(logits, target), logits)
        # Exact in float64: dL/du_1 = g(p_y) · p_1 with p_1 = 1 − p_y = sigmoid(−gap).
        p_other = torch.sigmoid(-gaps.double())
        g = gradient_ratio((1 - p_other).numpy(), gamma)
        np.testing.assert_allclose(grad[:, 1].double().numpy(), g * p_other.numpy(), rtol=1e-4, atol=1e-40)  # float32 underflow


# ---- γ policies ------------------------------------------------------------------------------
def test_flsd53_uses_gamma_5_exactly_below_0_2():
    flsd = losses.build({"name": "flsd53"})
    p = torch.tensor([0.0, 0.1, 0.19999999, 0.2, 0.20000001, 0.5, 1.0], dtype=torch.float64)
    assert flsd.gamma_for(p).tolist() == [5, 5, 5, 3, 3, 3, 3]
    flsd532 = losses.build({"name": "flsd532"})
    assert flsd532.gamma_for(p).tolist() == [5, 5, 5, 3, 3, 2, 2]
    # Per-sample losses follow the chosen γ.
    torch.manual_seed(12)
    logits = 2 * torch.randn(200, 3, dtype=torch.float64)
    target = torch.randint(0, 3, (200,))
    p_y = np_softmax(logits.numpy(), axis=1)[np.arange(200), target.numpy()]
    assert (p_y < 0.2).sum() > 20 and (p_y >= 0.2).sum() > 20
    expected = np.where(p_y < 0.2, focal_numpy(logits.numpy(), target.numpy(), 5.0),
                        focal_numpy(logits.numpy(), target.numpy(), 3.0))
    got = losses.build({"name": "flsd53", "reduction": "none"})(logits, target)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-11)


def test_flsc_switches_at_the_papers_epochs_scaled_to_the_run():
    flsc531, flsc532 = losses.build({"name": "flsc531"}), losses.build({"name": "flsc532"})
    assert flsc531.switch_epochs(350) == [100, 250]
    assert [flsc531.gamma_at(e, 350) for e in (0, 99, 100, 249, 250, 349)] == [5, 5, 3, 3, 1, 1]
    assert [flsc532.gamma_at(e, 350) for e in (0, 99, 100, 249, 250, 349)] == [5, 5, 3, 3, 2, 2]
    assert flsc531.switch_epochs(35) == [10, 25]
    assert [flsc531.gamma_at(e, 35) for e in (9, 10, 24, 25)] == [5, 3, 3, 1]
    torch.manual_seed(13)
    logits, target = torch.randn(10, 3, dtype=torch.float64), torch.randint(0, 3, (10,))
    for epoch, gamma in ((0, 5.0), (120, 3.0), (300, 1.0)):
        flsc531.set_epoch(epoch, 350)
        assert torch.allclose(flsc531(logits, target), losses.build({"name": "focal", "gamma": gamma})(logits, target))


def test_flsc_needs_the_epoch():
    with pytest.raises(ValueError, match="set_epoch"):
        losses.build({"name": "focal_scheduled"})(torch.randn(3, 2), torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="epoch"):
        losses.build({"name": "focal_scheduled"}).set_epoch(10, 10)


# ---- numerics --------------------------------------------------------------------------------
def extreme_logits():
    """float32 logits up to ±1e4: certain-right, certain-wrong, ties and mixed rows."""
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0], [1e4, 1e4, -1e4],
                           [0.0, 0.0, 0.0], [5e3, -3e3, 9.9e3], [1e4, 1e4 - 30, -1e4]], dtype=torch.float32)
    target = torch.tensor([0, 0, 1, 2, 1, 1])
    return logits, target


@pytest.mark.parametrize("name", ALL_NAMES)
def test_finite_loss_and_gradient_for_float32_logits_up_to_1e4(name):
    logits, target = extreme_logits()
    for params in ({}, {"gamma": 0.5}) if name in ("focal", "dual_focal") else ({},):
        loss = prepared(name, 3, **params)
        x = logits.clone().requires_grad_()
        value = loss(x, target)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(x.grad).all(), (name, params, value, x.grad)


def test_focal_smoothing_finite_for_extreme_logits():
    logits, target = extreme_logits()
    x = logits.clone().requires_grad_()
    value = losses.build({"name": "focal", "gamma": 0.5, "smoothing": 0.1})(x, target)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(x.grad).all()


def test_one_minus_p_is_exact_in_float32_where_subtraction_rounds_to_zero():
    """1 − p_i by subtraction for every class but the row's top, the sum of the others for the
    top, and log(1 − p_top) through a logsumexp where that sum underflows (the last row)."""
    logits64 = torch.tensor([[40.0, -30.0, 0.0, 1.0], [-2.0, 0.5, 0.1, 3.0], [1e4, 0.0, 1e4 - 50, -1e4],
                             [100.0, 0.0, -5.0, -1.0]], dtype=torch.float64)
    reference = np.array([[np_logsumexp(np.delete(row, i)) - np_logsumexp(row) for i in range(4)]
                          for row in logits64.numpy()])
    parts = softmax_parts(logits64.float(), needs_top=True)
    top = parts.top.squeeze(1).numpy()
    np.testing.assert_array_equal(top, [0, 3, 0, 0])
    rows = np.arange(4)
    np.testing.assert_allclose(parts.log_rest().squeeze(1).double().numpy(), reference[rows, top], rtol=1e-6)
    assert reference[0, 0] < -38 and reference[3, 0] < -99  # plain float32 1 − p is 0 there, its log −inf
    others = np.ones((4, 4), dtype=bool)
    others[rows, top] = False
    got = torch.log1p(-parts.p).double().numpy()
    np.testing.assert_allclose(got[others], reference[others], rtol=1e-6, atol=1e-7)


def test_nan_logits_are_named():
    logits = torch.tensor([[0.0, float("nan")], [1.0, 2.0]])
    with pytest.raises(ValueError, match="logits contain NaN"):
        losses.build({"name": "focal"})(logits, torch.tensor([0, 1]))


# ---- reductions, ignore_index, shapes --------------------------------------------------------
@pytest.mark.parametrize("name", ["cross_entropy", "focal", "flsd53", "label_smoothing", "brier", "dual_focal",
                                  "dual_cross_entropy", "weighted_cross_entropy", "adafocal"])
def test_reductions_and_ignore_index(name):
    torch.manual_seed(14)
    logits = torch.randn(3, 4, 5, 5, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 4, (3, 5, 5))
    ignored = torch.rand(3, 5, 5) < 0.3
    target_ignored = target.masked_fill(ignored, -100)
    per_pixel = prepared(name, 4, reduction="none")(logits, target)
    assert per_pixel.shape == (3, 5, 5)
    total = prepared(name, 4, reduction="sum")(logits, target)
    mean = prepared(name, 4)(logits, target)
    assert torch.allclose(total, per_pixel.sum()) and torch.allclose(mean, per_pixel.mean())
    with_ignore = prepared(name, 4, ignore_index=-100, reduction="none")(logits, target_ignored)
    assert torch.equal(with_ignore[ignored], torch.zeros(int(ignored.sum()), dtype=torch.float64))
    assert torch.allclose(with_ignore[~ignored], per_pixel[~ignored])
    mean_ignored = prepared(name, 4, ignore_index=-100)(logits, target_ignored)
    assert torch.allclose(mean_ignored, per_pixel[~ignored].mean())
    grad, = torch.autograd.grad(mean_ignored, logits)
    assert torch.all(grad.permute(0, 2, 3, 1)[ignored] == 0)


@pytest.mark.parametrize("weighted", [True, False])
def test_mmce_on_tree_nodes_is_the_mmce_of_the_labelled_nodes_as_samples(weighted):
    """(N, K, M) node logits with padding targets ignored: the same loss and gradient as the (m, K)
    batch of the labelled nodes (mukhoti2020's released Tree-LSTM trainer pools a batch's nodes)."""
    torch.manual_seed(0)
    logits = torch.randn(4, 3, 7, dtype=torch.float64, requires_grad=True)
    targets = torch.randint(0, 3, (4, 7))
    targets[1, 5:] = -100
    targets[3, 2:] = -100
    loss = losses.build({"name": "mmce", "lam": 8.0, "weighted": weighted, "ignore_index": -100})(logits, targets)
    grad, = torch.autograd.grad(loss, logits)
    keep = targets != -100
    flat = logits.detach().movedim(1, -1)[keep].clone().requires_grad_(True)
    reference = losses.build({"name": "mmce", "lam": 8.0, "weighted": weighted})(flat, targets[keep])
    reference_grad, = torch.autograd.grad(reference, flat)
    assert float(loss) == pytest.approx(float(reference), rel=1e-12)
    torch.testing.assert_close(grad.movedim(1, -1)[keep], reference_grad, rtol=1e-10, atol=1e-12)
    assert float(grad.movedim(1, -1)[~keep].abs().max()) == 0.0


def test_bad_inputs_name_the_culprit():
    loss = losses.build({"name": "focal"})
    with pytest.raises(ValueError, match="target out of range: found 3"):
        loss(torch.randn(2, 3), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="target has shape"):
        loss(torch.randn(2, 3), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer class indices"):
        loss(torch.randn(2, 3), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="at least 2 classes"):
        loss(torch.randn(2, 1), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="soft targets must sum to 1"):
        loss(torch.randn(2, 3), torch.full((2, 3), 0.5))
    with pytest.raises(ValueError, match="mmce compares every pair.*16,400 labelled elements of logits .* exceed 16,384"):
        losses.build({"name": "mmce"})(torch.randn(1, 3, 16, 1025), torch.zeros(1, 16, 1025, dtype=torch.long))
    with pytest.raises(ValueError, match=r"FocalLoss: gamma must be a real number in \[0, inf\), got -1"):
        losses.build({"name": "focal", "gamma": -1})
    with pytest.raises(ValueError, match="alpha has 2 entries but logits have 3 classes"):
        losses.build({"name": "focal", "alpha": [1, 2]})(torch.randn(2, 3), torch.tensor([0, 1]))


# ---- registry --------------------------------------------------------------------------------
def test_build_lists_names_and_parameters_on_error():
    expected = {"cross_entropy", "focal", "label_smoothing", "focal_sample_dependent", "focal_scheduled", "brier",
                "mmce", "adafocal", "weighted_cross_entropy", "dual_cross_entropy", "dual_focal", "generalized_dice"}
    assert expected <= set(losses.available())
    with pytest.raises(ValueError, match="unknown loss 'focall'; available: .*focal"):
        losses.build({"name": "focall"})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['gama'\] for loss 'focal'; accepted: gamma, alpha"):
        losses.build({"name": "focal", "gama": 2})
    with pytest.raises(ValueError, match="flsd53 fixes gammas, thresholds"):
        losses.build({"name": "flsd53", "gammas": [1, 2]})
    with pytest.raises(ValueError, match="needs a 'name'"):
        losses.build({"gamma": 2})
    assert losses.parameters("mmce") == {"lam": 2.0, "bandwidth": 0.4, "weighted": True, "normalization": "count",
                                         "reduction": "mean", "ignore_index": None}
    assert losses.parameters("flsd53") == {"reduction": "mean", "ignore_index": None}


def test_presets_equal_their_explicit_configs():
    torch.manual_seed(15)
    logits, target = torch.randn(40, 5, dtype=torch.float64), torch.randint(0, 5, (40,))
    explicit = losses.build({"name": "focal_sample_dependent", "thresholds": [0.2, 0.5], "gammas": [5, 3, 2]})
    assert torch.equal(losses.build({"name": "flsd532"})(logits, target), explicit(logits, target))
    default = losses.build({"name": "focal_sample_dependent"})
    assert torch.equal(losses.build({"name": "flsd53"})(logits, target), default(logits, target))
    sched = losses.build({"name": "focal_scheduled"})
    assert (sched.milestones, sched.gammas) == (losses.build({"name": "flsc531"}).milestones, (5.0, 3.0, 1.0))


def test_hooks_exist_on_every_loss():
    for name in ALL_NAMES:
        loss = losses.build({"name": name})
        for hook in ("set_epoch", "update_from_validation", "set_training_targets"):
            assert callable(getattr(loss, hook))
        assert isinstance(loss.needs_validation, bool) and isinstance(loss.needs_training_targets, bool)
    assert losses.build({"name": "adafocal"}).needs_validation
    assert losses.build({"name": "weighted_cross_entropy"}).needs_training_targets
    assert not losses.build({"name": "weighted_cross_entropy", "weights": [1, 2]}).needs_training_targets


# ---- trusted inputs (validate_inputs = False, as the trainer calls losses) ---------------------
@pytest.mark.parametrize("name", ALL_NAMES)
def test_trusted_inputs_give_the_same_loss_and_gradient(name):
    torch.manual_seed(21)
    spatial = name in SPATIAL_OK
    shape = (4, 5, 3, 3) if spatial else (16, 5)
    logits = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 5, (shape[0], *shape[2:]))
    checked, trusted = prepared(name, 5), prepared(name, 5)
    trusted.validate_inputs = False
    expected = checked(logits, target)
    got = trusted(logits, target)
    assert torch.equal(got, expected)
    assert torch.equal(torch.autograd.grad(got, logits)[0], torch.autograd.grad(expected, logits)[0])


def test_trusted_inputs_keep_ignore_index_and_soft_targets():
    torch.manual_seed(22)
    logits = torch.randn(3, 4, 5, 5, dtype=torch.float64)
    target = torch.randint(0, 4, (3, 5, 5)).masked_fill(torch.rand(3, 5, 5) < 0.3, 255)
    checked = losses.build({"name": "focal", "ignore_index": 255})
    trusted = losses.build({"name": "focal", "ignore_index": 255})
    trusted.validate_inputs = False
    assert torch.equal(trusted(logits, target), checked(logits, target))
    soft = torch.softmax(torch.randn(6, 4, dtype=torch.float64), dim=1)
    flat = torch.randn(6, 4, dtype=torch.float64)
    assert torch.equal(trusted(flat, soft), checked(flat, soft))


def test_check_target_values_names_the_problem():
    losses.check_target_values(torch.tensor([0, 2, 255]), 3, ignore_index=255)
    with pytest.raises(ValueError, match="target out of range: found 3, expected 0..2"):
        losses.check_target_values(torch.tensor([0, 3]), 3)
    with pytest.raises(ValueError, match="found 255"):
        losses.check_target_values(torch.tensor([0, 255]), 3)
    with pytest.raises(ValueError, match="integer class indices, got torch.float32"):
        losses.check_target_values(torch.tensor([0.0, 1.0]), 3)
