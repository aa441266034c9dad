"""The fast code paths of focalcal.losses agree with their exact references.

- ``top_class``: argmax path for (N, K) logits, threshold + matrix-product path with spatial dims;
- smoothed focal without building the soft target vs the general soft-target path;
- MMCE's closed-form gradient vs autograd through ``mmce_norm`` (both normalisations);
- dual focal's per-row logsumexp where 1 − p_top underflows in float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import logsumexp as np_logsumexp

from focalcal import losses
from focalcal.losses._classwise import top_class
from focalcal.losses.focal import smoothed_targets
from focalcal.losses.mmce import mmce_norm

pytestmark = pytest.mark.usefixtures("loss_kernels")  # every test on the fused and the eager path


def as_spatial(logits: torch.Tensor) -> torch.Tensor:
    """(N, K) logits as (2, K, N/2, 1): the same rows, taking the spatial code path."""
    n, k = logits.shape
    return logits.reshape(2, n // 2, k).transpose(1, 2).unsqueeze(-1)


def test_top_class_paths_agree_and_rest_is_exact():
    torch.manual_seed(0)
    logits = torch.cat([6 * torch.randn(40, 5), torch.zeros(2, 5), torch.tensor([[60.0, 0, 0, 0, 0], [0, 0, 0, 0, 0.1]])])
    log_p = torch.log_softmax(logits, 1)
    flat = top_class(log_p, log_p.exp())[:3]  # the fourth output is a spare buffer
    spatial = top_class(as_spatial(log_p), as_spatial(log_p).exp())[:3]
    spatial = [t.squeeze(-1).transpose(1, 2).reshape(-1, 1) for t in spatial]
    has_top = log_p.exp().amax(1, keepdim=True) > 0.5
    assert has_top.sum() > 10 and (~has_top).sum() > 3
    assert torch.equal(flat[0][has_top], spatial[0][has_top])  # same class where one has p > 1/2
    for got in (flat, spatial):  # rest = 1 − p_t of the class chosen, to float32 rounding
        top, p_top, rest = got
        logits64 = logits.double()
        others = logits64.scatter(1, top, float("-inf"))
        exact = torch.exp(torch.logsumexp(others, 1, keepdim=True) - torch.logsumexp(logits64, 1, keepdim=True))
        np.testing.assert_allclose(rest.double().numpy(), exact.numpy(), rtol=1e-5)
        assert rest[-2].item() > 0 and rest[-2].item() < 1e-25  # 1 − p ≈ 3.5e-26, not 0
        np.testing.assert_allclose(p_top.numpy(), log_p.exp().gather(1, top).numpy(), rtol=1e-6)


@pytest.mark.parametrize("name, params", [("focal", {"gamma": 3.0, "smoothing": 0.1}), ("focal", {"gamma": 0.5}),
                                          ("dual_focal", {}), ("dual_focal", {"gamma": 0.5, "rho": 1.2})])
def test_spatial_and_flat_paths_agree_in_float32(name, params):
    torch.manual_seed(1)
    logits = (5 * torch.randn(64, 6)).requires_grad_()
    target = torch.randint(0, 6, (64,))
    loss = losses.build({"name": name, "reduction": "none", **params})
    flat = loss(logits, target)
    grad_flat, = torch.autograd.grad(flat.sum(), logits)
    spatial = loss(as_spatial(logits), target.reshape(2, 32, 1))
    grad_spatial, = torch.autograd.grad(spatial.sum(), logits)
    torch.testing.assert_close(spatial.reshape(2, 32).reshape(-1), flat, rtol=2e-6, atol=1e-7)
    torch.testing.assert_close(grad_spatial, grad_flat, rtol=2e-5, atol=1e-7)


def test_smoothed_focal_matches_soft_target_path_including_extreme_logits():
    torch.manual_seed(2)
    logits = torch.cat([3 * torch.randn(20, 4), torch.tensor([[1e4, -1e4, 0, 0], [-1e4, 1e4, 30, 0]])]).double()
    target = torch.cat([torch.randint(0, 4, (20,)), torch.tensor([0, 0])])
    for gamma in (0.5, 3.0):
        fast = losses.build({"name": "focal", "gamma": gamma, "smoothing": 0.1, "reduction": "none"})
        general = losses.build({"name": "focal", "gamma": gamma, "reduction": "none"})
        soft = smoothed_targets(target.unsqueeze(1), 4, 0.1, torch.float64, "cpu")
        for dtype in (torch.float64, torch.float32):
            x = logits.to(dtype).requires_grad_()
            a = fast(x, target)
            grad_a, = torch.autograd.grad(a.sum(), x)
            b = general(x, soft.to(dtype))
            grad_b, = torch.autograd.grad(b.sum(), x)
            # float32: the fused kernel (fast) and the eager soft-target path round differently
            torch.testing.assert_close(a, b, rtol=1e-12 if dtype == torch.float64 else 1e-6, atol=0)
            torch.testing.assert_close(grad_a, grad_b, rtol=1e-12 if dtype == torch.float64 else 4e-6, atol=1e-30)
            assert torch.isfinite(grad_a).all()


@pytest.mark.parametrize("weighted, normalization", [(True, "count"), (True, "weight"), (False, "count")])
def test_mmce_closed_form_gradient_matches_autograd_reference(weighted, normalization):
    torch.manual_seed(3)
    logits = (2 * torch.randn(40, 5, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 5, (40,))
    target[:3] = -1  # ignored
    loss = losses.build({"name": "mmce", "lam": 3.0, "weighted": weighted, "normalization": normalization,
                         "ignore_index": -1, "reduction": "sum"})
    got, = torch.autograd.grad(loss(logits, target), logits)

    valid = target != -1
    x, y = logits[valid], target[valid]
    log_p = torch.log_softmax(x, 1)
    log_conf, predicted = log_p.max(1)
    one_minus = torch.exp(torch.logsumexp(log_p.scatter(1, predicted[:, None], float("-inf")), 1))
    norm = mmce_norm(log_conf.exp(), one_minus, predicted == y, weighted=weighted, normalization=normalization)
    reference_loss = torch.nn.functional.cross_entropy(x, y, reduction="sum") + 3.0 * valid.sum() * norm
    expected, = torch.autograd.grad(reference_loss, logits)
    # the released "count" estimator is small: ≈ (mean confidence of the wrong samples)/n
    assert (0.003 if weighted and normalization == "count" else 0.1) < float(norm.detach()) and got[:3].abs().max() == 0
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (logits,))


def test_dual_focal_uses_exact_log_one_minus_p_where_it_underflows():
    # Row 0: the top class is not the target and 1 − p_top = e^-200 underflows in float32.
    logits = torch.tensor([[0.0, 200.0, -1e4], [0.0, 1.0, 2.0]])
    target = torch.tensor([0, 2])
    loss = losses.build({"name": "dual_focal", "reduction": "none"})
    x = logits.clone().requires_grad_()
    value = loss(x, target)
    value.sum().backward()
    logits64 = logits.double().numpy()
    log_p = logits64 - np_logsumexp(logits64, axis=1, keepdims=True)
    p = np.exp(log_p)
    log_one_minus = np.array([[np_logsumexp(np.delete(row, i)) for i in range(3)] for row in log_p])
    expected = [-log_p[r, t] - log_one_minus[r].sum() + log_one_minus[r, t] + (1 - p[r, t]) + p[r].sum() - p[r, t]
                for r, t in enumerate(target.tolist())]
    np.testing.assert_allclose(value.detach().double().numpy(), expected, rtol=1e-6)
    assert value[0] > 199 and torch.isfinite(x.grad).all()
