"""Label smoothing's two conventions: "uniform" (Müller et al. 2019, (1 − α) q + α/K) against
an independent autograd formula, "wrong_classes" (mukhoti2020, the default) unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from focalcal import losses
from focalcal.losses import _fused
from focalcal.losses.focal import smoothed_target_focal
from focalcal.losses.smoothing import wrong_classes_smoothing

pytestmark = pytest.mark.usefixtures("loss_kernels")  # every test on the fused and the eager path


def uniform_target_loss(logits, target, alpha, gamma, class_weights=None):
    """−Σ_k w_k t_k (1 − p_k)^γ log p_k with t = (1 − α) onehot + α/K, by plain autograd ops."""
    k = logits.shape[1]
    t = (1 - alpha) * F.one_hot(target, k).movedim(-1, 1).to(logits.dtype) + alpha / k
    if class_weights is not None:
        t = t * torch.tensor(class_weights, dtype=logits.dtype).view(1, k, *[1] * (logits.dim() - 2))
    log_p = torch.log_softmax(logits, dim=1)
    return -(t * (1 - log_p.exp()) ** gamma * log_p).sum(dim=1)


def value_and_grad(fn, logits):
    x = logits.clone().requires_grad_()
    value = fn(x)
    (grad,) = torch.autograd.grad(value.sum(), x)
    return value.detach(), grad


def kernel_calls(monkeypatch):
    calls = []
    real = _fused.classwise
    monkeypatch.setattr("focalcal.losses.focal._fused.classwise", lambda *a, **kw: calls.append(a[2]) or real(*a, **kw))
    return calls


CASES = [((30, 4), 0.1), ((12, 2), 0.2), ((3, 5, 4, 2), 0.05)]  # (logits shape, α); K = 2 and spatial too


@pytest.mark.parametrize("shape,alpha", CASES, ids=str)
@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_uniform_focal_matches_independent_formula(shape, alpha, gamma, reduction, loss_kernels, monkeypatch):
    torch.manual_seed(0)
    logits = 3 * torch.randn(*shape, dtype=torch.float64)
    target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
    calls = kernel_calls(monkeypatch)
    loss = losses.build({"name": "focal", "gamma": gamma, "smoothing": alpha, "convention": "uniform",
                         "reduction": reduction})
    value, grad = value_and_grad(lambda x: loss(x, target), logits)

    def reference(x):
        per_element = uniform_target_loss(x, target, alpha, gamma)
        return per_element if reduction == "none" else per_element.mean()

    expected, expected_grad = value_and_grad(reference, logits)
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-14)
    assert calls == (["smoothed_focal"] if loss_kernels == "fused" else [])


def test_uniform_focal_with_class_weights_matches_independent_formula():
    # Per-class α weights take the soft-target path: the converted α must reach it too.
    torch.manual_seed(1)
    logits = 2 * torch.randn(20, 3, dtype=torch.float64)
    target = torch.randint(0, 3, (20,))
    weights = [0.5, 1.0, 2.0]
    loss = losses.build({"name": "focal", "gamma": 1.5, "alpha": weights, "smoothing": 0.15, "convention": "uniform",
                         "reduction": "none"})
    value, grad = value_and_grad(lambda x: loss(x, target), logits)
    expected, expected_grad = value_and_grad(lambda x: uniform_target_loss(x, target, 0.15, 1.5, weights), logits)
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("shape,alpha", CASES, ids=str)
def test_uniform_label_smoothing_matches_independent_formula_and_torch(shape, alpha):
    torch.manual_seed(2)
    logits = 3 * torch.randn(*shape, dtype=torch.float64)
    target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
    loss = losses.build({"name": "label_smoothing", "smoothing": alpha, "convention": "uniform", "reduction": "none"})
    value, grad = value_and_grad(lambda x: loss(x, target), logits)
    expected, expected_grad = value_and_grad(lambda x: uniform_target_loss(x, target, alpha, 0.0), logits)
    torch.testing.assert_close(value, expected, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-10, atol=1e-14)
    # torch's label_smoothing=ε is Müller's convention.
    torch_value = F.cross_entropy(logits, target, label_smoothing=alpha, reduction="none")
    torch.testing.assert_close(value, torch_value, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("config", [{"name": "focal", "gamma": 2.0, "smoothing": 0.1},
                                    {"name": "focal", "gamma": 0.5, "smoothing": 0.05, "alpha": [1.0, 2.0, 0.5, 1.0]},
                                    {"name": "label_smoothing", "smoothing": 0.1}], ids=str)
def test_wrong_classes_is_the_default_and_unchanged(config):
    torch.manual_seed(3)
    logits = 3 * torch.randn(25, 4, dtype=torch.float64)
    target = torch.randint(0, 4, (25,))
    default = losses.build(config)
    explicit = losses.build({**config, "convention": "wrong_classes"})
    assert default.convention == "wrong_classes" and default.hyperparameters()["convention"] == "wrong_classes"
    value, grad = value_and_grad(lambda x: default(x, target), logits)
    value_explicit, grad_explicit = value_and_grad(lambda x: explicit(x, target), logits)
    assert torch.equal(value, value_explicit) and torch.equal(grad, grad_explicit)
    assert wrong_classes_smoothing(config["smoothing"], 4, "wrong_classes") == config["smoothing"]  # α as given
    if config["name"] == "focal" and "alpha" not in config:  # the kernel the loss ran before conventions existed
        same_value, same_grad = value_and_grad(
            lambda x: smoothed_target_focal(x, target.unsqueeze(1), config["gamma"], config["smoothing"],
                                            reduction="mean"), logits)
        assert torch.equal(value, same_value) and torch.equal(grad, same_grad)


def test_uniform_is_wrong_classes_with_rescaled_alpha():
    # Both conventions put α/K resp. α'/(K − 1) on each wrong class: equal for α' = α (K − 1)/K.
    torch.manual_seed(4)
    logits = 2 * torch.randn(10, 5, dtype=torch.float64)
    target = torch.randint(0, 5, (10,))
    uniform = losses.build({"name": "focal", "gamma": 1.0, "smoothing": 0.1, "convention": "uniform"})
    rescaled = losses.build({"name": "focal", "gamma": 1.0, "smoothing": 0.1 * 4 / 5})
    assert torch.equal(uniform(logits, target), rescaled(logits, target))


@pytest.mark.parametrize("name", ["focal", "label_smoothing"])
@pytest.mark.parametrize("convention", ["mukhoti", "Uniform", None, 1])
def test_unknown_convention_is_refused(name, convention):
    with pytest.raises(ValueError, match=r"convention must be one of 'wrong_classes', 'uniform', got"):
        losses.build({"name": name, "smoothing": 0.1, "convention": convention})
