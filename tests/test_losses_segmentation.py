"""hossain2021 §3 losses (WCE, DCE, DFL) and the generalised Dice loss of Sudre et al. 2017."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.special import softmax as np_softmax

from focalcal import losses

pytestmark = pytest.mark.usefixtures("loss_kernels")  # every test on the fused and the eager path


def per_sample_grad_from_dz(z: np.ndarray, dl_dz: np.ndarray) -> np.ndarray:
    """hossain2021 Eq 13 (= A.3): ∂L/∂u_i = z_i (∂L/∂z_i − Σ_k z_k ∂L/∂z_k), row by row."""
    return z * (dl_dz - (z * dl_dz).sum(axis=1, keepdims=True))


def autograd_logit_grad(name, logits, target, **params):
    x = logits.clone().requires_grad_()
    losses.build({"name": name, "reduction": "sum", **params})(x, target).backward()
    return x.grad.numpy()


@pytest.fixture
def batch():
    torch.manual_seed(0)
    logits = 1.5 * torch.randn(12, 4, dtype=torch.float64)
    target = torch.randint(0, 4, (12,))
    z = np_softmax(logits.numpy(), axis=1)
    y = np.eye(4)[target.numpy()]
    return logits, target, z, y


def test_eq9_to_eq11_cross_entropy_dual_cross_entropy_focal(batch):
    logits, target, z, y = batch
    eq9 = -y / z
    eq10 = -y / z + (1 - y) / (1 + z)
    eq11 = -y / z * (1 - z) + y * np.log(z)
    np.testing.assert_allclose(autograd_logit_grad("cross_entropy", logits, target), per_sample_grad_from_dz(z, eq9), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(autograd_logit_grad("dual_cross_entropy", logits, target), per_sample_grad_from_dz(z, eq10), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(autograd_logit_grad("focal", logits, target, gamma=1), per_sample_grad_from_dz(z, eq11), rtol=1e-10, atol=1e-13)


def test_eq12_dual_focal_with_the_sign_of_eq7_and_fig1(batch):
    logits, target, z, y = batch
    # Derivative of the implemented (added) α|y − z| term: −y/z + (1 − y)/(1 − z) − sign(y − z).
    added = -y / z + (1 - y) / (1 - z) - np.sign(y - z)
    as_printed = -y / z + (1 - y) / (1 - z) + np.sign(y - z)  # Eq 12 verbatim: the subtracted form
    grad = autograd_logit_grad("dual_focal", logits, target)
    np.testing.assert_allclose(grad, per_sample_grad_from_dz(z, added), rtol=1e-10, atol=1e-13)
    assert np.abs(grad - per_sample_grad_from_dz(z, as_printed)).max() > 0.1
    # Fig 1a: for the true class |∂DFL/∂z| = 1/z + 1 exceeds |∂CE/∂z| = 1/z everywhere.
    assert np.all(np.abs(added[y == 1]) > np.abs((-y / z)[y == 1]))


def dfl_numpy(logits, target, alpha=1.0, beta=1.0, gamma=1.0, rho=1.0):
    z = np_softmax(logits, axis=1)
    y = np.eye(logits.shape[1])[target]
    return (-(y * np.log(z)).sum(1) - beta * ((1 - y) * np.log(rho - z)).sum(1)
            + alpha * (np.abs(y - z) ** gamma).sum(1))


def dce_numpy(logits, target, alpha=1.0, beta=1.0):
    z = np_softmax(logits, axis=1)
    y = np.eye(logits.shape[1])[target]
    return -(y * np.log(z)).sum(1) + beta * ((1 - y) * np.log(alpha + z)).sum(1)


def to_rows(logits4d, target3d):
    k = logits4d.shape[1]
    return logits4d.permute(0, 2, 3, 1).reshape(-1, k).numpy(), target3d.reshape(-1).numpy()


@pytest.mark.parametrize("params", [{}, {"alpha": 0.5, "beta": 2.0, "gamma": 2.0, "rho": 1.3}, {"gamma": 0.5}])
def test_dual_focal_values_on_segmentation_logits(params):
    torch.manual_seed(1)
    logits = 2 * torch.randn(2, 5, 4, 3, dtype=torch.float64)
    target = torch.randint(0, 5, (2, 4, 3))
    got = losses.build({"name": "dual_focal", "reduction": "none", **params})(logits, target)
    rows, labels = to_rows(logits, target)
    np.testing.assert_allclose(got.reshape(-1).numpy(), dfl_numpy(rows, labels, **params), rtol=1e-11)


@pytest.mark.parametrize("params", [{}, {"alpha": 0.3, "beta": 2.0}])
def test_dual_cross_entropy_values(params):
    torch.manual_seed(2)
    logits = 2 * torch.randn(2, 3, 4, 4, dtype=torch.float64)
    target = torch.randint(0, 3, (2, 4, 4))
    got = losses.build({"name": "dual_cross_entropy", **params})(logits, target)
    rows, labels = to_rows(logits, target)
    assert math.isclose(float(got), dce_numpy(rows, labels, **params).mean(), rel_tol=1e-12)


def test_weighted_cross_entropy_weights_from_training_targets():
    train = torch.tensor([0] * 60 + [1] * 30 + [2] * 10)
    counts = losses.class_counts(train, 3)
    assert counts.tolist() == [60, 30, 10]
    np.testing.assert_allclose(losses.inverse_frequency_weights(counts), 100 / (3 * np.array([60, 30, 10])))
    torch.manual_seed(3)
    logits = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    target = torch.randint(0, 3, (2, 5, 5))
    weights = torch.tensor(100 / (3 * np.array([60.0, 30.0, 10.0])))
    expected = F.cross_entropy(logits, target, weight=weights, reduction="sum") / target.numel()
    from_hook = losses.build({"name": "weighted_cross_entropy"})
    from_hook.set_training_targets(train, 3)
    for loss in (from_hook, losses.WeightedCrossEntropyLoss.from_targets(train, 3),
                 losses.build({"name": "weighted_cross_entropy", "class_counts": [60, 30, 10]}),
                 losses.build({"name": "weighted_cross_entropy", "weights": weights.tolist()})):
        assert torch.allclose(loss(logits, target), expected, rtol=1e-12)


def test_weighted_cross_entropy_errors():
    with pytest.raises(ValueError, match=r"classes \[1\] never occur"):
        losses.inverse_frequency_weights([5, 0, 3])
    with pytest.raises(ValueError, match="call set_training_targets"):
        losses.build({"name": "weighted_cross_entropy"})(torch.randn(2, 3), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="not both"):
        losses.build({"name": "weighted_cross_entropy", "weights": [1, 1], "class_counts": [1, 1]})
    with pytest.raises(ValueError, match="targets out of range"):
        losses.class_counts(torch.tensor([0, 3]), 3)


def gdl_numpy(logits4d, target3d, ignore=None):
    """Sudre et al. Eq: batch-level generalised Dice with explicit loops over classes."""
    _n, k = logits4d.shape[:2]
    probs = np_softmax(logits4d.numpy(), axis=1)
    target = target3d.numpy()
    valid = np.ones_like(target, dtype=bool) if ignore is None else target != ignore
    counts, intersections, totals = [], [], []
    for cls in range(k):
        ref = (target == cls) & valid
        p = probs[:, cls] * valid
        counts.append(ref.sum())
        intersections.append((ref * p).sum())
        totals.append(ref.sum() + p.sum())
    counts = np.array(counts, dtype=float)
    weights = np.array([1 / c**2 if c > 0 else np.nan for c in counts])
    weights[np.isnan(weights)] = np.nanmax(weights)
    return 1 - 2 * (weights * intersections).sum() / (weights * totals).sum()


def test_generalized_dice_matches_numpy_with_absent_class_and_ignore():
    torch.manual_seed(4)
    logits = 2 * torch.randn(3, 4, 6, 6, dtype=torch.float64)
    target = torch.randint(0, 3, (3, 6, 6))  # class 3 absent
    got = losses.build({"name": "generalized_dice"})(logits, target)
    assert math.isclose(float(got), gdl_numpy(logits, target), rel_tol=1e-12)
    target[0, :2] = 255
    got = losses.build({"name": "generalized_dice", "ignore_index": 255})(logits, target)
    assert math.isclose(float(got), gdl_numpy(logits, target, ignore=255), rel_tol=1e-12)
    per_image = losses.build({"name": "generalized_dice", "per_image": True, "reduction": "none"})(logits, target.clamp(max=2))
    expected = [gdl_numpy(logits[i:i + 1], target[i:i + 1].clamp(max=2)) for i in range(3)]
    np.testing.assert_allclose(per_image.numpy(), expected, rtol=1e-12)


def test_generalized_dice_perfect_prediction_is_zero():
    target = torch.randint(0, 3, (2, 5, 5))
    logits = 50.0 * F.one_hot(target, 3).permute(0, 3, 1, 2).double()
    assert float(losses.build({"name": "generalized_dice"})(logits, target)) < 1e-12


def test_generalized_dice_closed_form_gradient_matches_the_general_path():
    # The batch fast path (no ignored pixels: closed-form gradient) against the general path
    # (an ignore_index that never occurs: one-hot reference, autograd), with an absent class.
    torch.manual_seed(4)
    logits = 2 * torch.randn(3, 5, 6, 7, dtype=torch.float64)
    target = torch.randint(0, 4, (3, 6, 7))  # class 4 absent
    results = []
    for config in ({"name": "generalized_dice"}, {"name": "generalized_dice", "ignore_index": 255}):
        x = logits.clone().requires_grad_()
        value = losses.build(config)(x, target)
        (2.5 * value).backward()
        results.append((value.detach(), x.grad))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-13, atol=0)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-11, atol=1e-15)
