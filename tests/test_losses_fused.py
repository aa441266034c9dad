"""The fused CPU kernels (``focalcal.losses._fused``) against the eager reference path,
against autograd's numerical gradient, and at the edges: tails of the SIMD lanes, ties,
extreme logits, 1 − p_top below the smallest normal float, NaN, threads, and the fallback."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import mpmath
import numpy as np
import pytest
import torch

from focalcal import losses
from focalcal.losses import _fused

CONFIGS = [  # (loss config, kernel kind) — every kind, the papers' settings and off-default ones
    ({"name": "focal", "gamma": 3.0}, "smoothed_focal"),
    ({"name": "focal", "gamma": 0.5}, "smoothed_focal"),
    ({"name": "focal", "gamma": 2.5, "smoothing": 0.1}, "smoothed_focal"),
    ({"name": "focal", "gamma": 0.0, "smoothing": 0.05}, "smoothed_focal"),
    ({"name": "dual_focal"}, "dual_focal"),
    ({"name": "dual_focal", "alpha": 0.5, "beta": 2.0, "gamma": 2.0, "rho": 1.5}, "dual_focal"),
    ({"name": "dual_focal", "gamma": 0.5}, "dual_focal"),
    ({"name": "dual_focal", "gamma": 2.5, "rho": 1.0}, "dual_focal"),
    ({"name": "dual_cross_entropy", "alpha": 0.7, "beta": 1.3}, "dual_cross_entropy"),
    ({"name": "focal_scheduled"}, "smoothed_focal"),
]
SHAPES = [(4, 3), (37, 10), (128, 100), (2, 5, 7, 9), (3, 11, 4, 5), (1, 2, 33)]


@pytest.fixture(autouse=True)
def fused_on(monkeypatch):
    monkeypatch.setenv(_fused.ENV_SWITCH, "1")
    assert _fused.kernels() is not None, "the fused CPU loss kernels failed to build (see the warning)"


def _loss(config, reduction="mean"):
    loss = losses.build({**config, "reduction": reduction})
    loss.set_epoch(0, 10)
    return loss


def _value_and_grad(loss, logits, target, *, fused, monkeypatch):
    monkeypatch.setenv(_fused.ENV_SWITCH, "1" if fused else "0")
    x = logits.clone().requires_grad_()
    value = loss(x, target)
    (value.sum() if value.dim() else value).backward()
    return value.detach(), x.grad


def _kernel_calls(monkeypatch):
    calls = []
    real = _fused.classwise

    def counting(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    for module in ("focal", "segmentation"):
        monkeypatch.setattr(f"focalcal.losses.{module}._fused.classwise", counting)
    return calls


@pytest.mark.parametrize("config,kind", CONFIGS, ids=lambda c: str(c))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fused_matches_eager_reference(config, kind, shape, monkeypatch):
    torch.manual_seed(sum(shape))
    logits = 4 * torch.randn(*shape, dtype=torch.float64)
    logits.view(shape[0], shape[1], -1)[0, 1, 0] += 40  # one very confident position
    logits.view(shape[0], shape[1], -1)[-1, :, -1] = 0.5  # and one all-tied position
    target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
    calls = _kernel_calls(monkeypatch)
    for reduction in ("mean", "sum", "none"):
        loss = _loss(config, reduction)
        reference = _value_and_grad(loss, logits, target, fused=False, monkeypatch=monkeypatch)  # eager, float64
        # float32 is held to the float64 reference (the eager float32 path itself is less
        # accurate where a confident row's terms cancel), both to a few ulps of the largest entry
        for dtype, rtol in ((torch.float64, 1e-11), (torch.float32, 1e-5)):
            value, grad = _value_and_grad(loss, logits.to(dtype), target, fused=True, monkeypatch=monkeypatch)
            torch.testing.assert_close(value.double(), reference[0], rtol=rtol, atol=rtol * reference[0].abs().max())
            torch.testing.assert_close(grad.double(), reference[1], rtol=rtol, atol=rtol * reference[1].abs().max())
    assert calls and set(calls) == {kind}  # the kernel really ran (and only on the fused path)


@pytest.mark.parametrize("config,kind", CONFIGS[:-1], ids=lambda c: str(c))
def test_fused_gradcheck(config, kind):
    torch.manual_seed(1)
    for shape in ((5, 4), (2, 3, 3, 2)):
        logits = (2 * torch.randn(*shape, dtype=torch.float64)).requires_grad_()
        target = torch.randint(0, shape[1], (shape[0], *shape[2:]))
        for reduction in ("mean", "none"):
            loss = _loss(config, reduction)
            assert torch.autograd.gradcheck(lambda x, loss=loss, target=target: loss(x, target), (logits,), eps=1e-6,
                                            atol=1e-7)


def _reference_dual_focal(row, target: int) -> float:
    """hossain2021 dual focal loss (α = β = γ = ρ = 1) of one row, in 60-digit arithmetic."""
    with mpmath.workdps(60):
        exps = [mpmath.exp(mpmath.mpf(float(v))) for v in row]
        z = [e / mpmath.fsum(exps) for e in exps]
        others = mpmath.fsum(mpmath.log(1 - z_i) for i, z_i in enumerate(z) if i != target)
        return float(-mpmath.log(z[target]) + 2 * (1 - z[target]) - others)


@pytest.mark.parametrize("switch", ["1", "0"], ids=["fused", "eager"])
def test_float32_dual_focal_agrees_with_high_precision_at_tiny_one_minus_p(switch, monkeypatch):
    # Gaps of 20-80 make 1 − p_top 1e-9..1e-35: below float32's epsilon, some below its
    # smallest normal; log(1 − p_top) must come from the logits, not from 1 − p, and the
    # other classes' tiny log(1 − z_i) must not be lost next to the target's.
    monkeypatch.setenv(_fused.ENV_SWITCH, switch)
    logits = torch.zeros(5, 6)
    logits[:, 2] = torch.tensor([20.0, 40.0, 60.0, 80.0, 5.0])
    logits[:, 4] = -3.0
    for target in (2, 0):
        x = logits.clone().requires_grad_()
        value = _loss({"name": "dual_focal"}, "none")(x, torch.full((5,), target))
        value.sum().backward()
        expected = [_reference_dual_focal(row.tolist(), target) for row in logits]
        np.testing.assert_allclose(value.detach().numpy(), expected, rtol=4e-6)
        assert torch.isfinite(x.grad).all()


def test_fused_extreme_logits_are_finite_with_exact_target_gradient():
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 0.0], [0.0, 0.0, 1e4]], dtype=torch.float32)
    target = torch.tensor([0, 0, 2])
    for config, _ in CONFIGS:
        x = logits.clone().requires_grad_()
        value = _loss(config, "none")(x, target)
        value.sum().backward()
        assert torch.isfinite(value).all() and torch.isfinite(x.grad).all(), config
        assert torch.all(x.grad.sum(dim=1).abs() <= 1e-6 * x.grad.abs().amax(dim=1) + 1e-30), config  # softmax: rows sum to 0
    # cross-entropy part of the dual focal loss on the wrong confident row: gradient −1 on the target logit
    x = logits.clone().requires_grad_()
    _loss({"name": "dual_focal", "alpha": 0.0, "beta": 0.0}, "none")(x, target).sum().backward()
    assert x.grad[1, 0].item() == pytest.approx(-1.0) and x.grad[1, 1].item() == pytest.approx(1.0)


def test_fused_propagates_nan_and_names_it():
    logits = torch.randn(6, 4)
    logits[2, 1] = float("nan")
    trusted = _loss({"name": "dual_focal"}, "none")
    trusted.validate_inputs = False
    values = trusted(logits, torch.zeros(6, dtype=torch.long))
    assert torch.isnan(values[2]) and torch.isfinite(values[[0, 1, 3, 4, 5]]).all()
    with pytest.raises(ValueError, match="NaN"):
        _loss({"name": "dual_focal"})(logits, torch.zeros(6, dtype=torch.long))


def test_fused_threads_give_the_same_numbers():
    torch.manual_seed(3)
    logits = 3 * torch.randn(4, 11, 40, 40)
    target = torch.randint(0, 11, (4, 40, 40))
    loss = _loss({"name": "dual_focal"}, "none")
    previous = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            x = logits.clone().requires_grad_()
            loss(x, target).sum().backward()
            results.append((loss(logits, target), x.grad))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_no_grad_gives_the_same_value():
    logits, target = torch.randn(8, 5), torch.randint(0, 5, (8,))
    loss = _loss({"name": "dual_focal"})
    with torch.no_grad():
        value = loss(logits, target)
    assert value.item() == pytest.approx(loss(logits.clone().requires_grad_(), target).item(), rel=1e-6)


def test_switch_and_unsupported_inputs_take_the_eager_path(monkeypatch):
    calls = _kernel_calls(monkeypatch)
    logits, target = torch.randn(8, 5), torch.randint(0, 5, (8,))
    loss = _loss({"name": "dual_focal"})
    monkeypatch.setenv(_fused.ENV_SWITCH, "0")
    loss(logits, target)
    loss(logits.half(), target)  # checked inputs: half precision is computed in float32
    assert calls == []
    monkeypatch.setenv(_fused.ENV_SWITCH, "1")
    loss(logits, target)
    assert calls == ["dual_focal"]
    assert not _fused.usable(logits.to(torch.bfloat16))  # only float32/float64 go to the kernel


def test_build_failure_warns_once_and_falls_back(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # nothing built there: a build is tried

    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(_fused, "_module", None)
    monkeypatch.setattr(cpp_extension, "load", broken)
    logits, target = torch.randn(8, 5, dtype=torch.float64), torch.randint(0, 5, (8,))
    loss = _loss({"name": "dual_focal"})
    with pytest.warns(RuntimeWarning, match="no C.. compiler"):
        value = loss(logits, target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loss(logits, target).item() == value.item()  # no second warning
    monkeypatch.setenv(_fused.ENV_SWITCH, "0")
    assert loss(logits, target).item() == pytest.approx(value.item(), rel=1e-13)


def test_constants_are_checked():
    with pytest.raises(ValueError, match="dual_focal takes"):
        _fused.classwise(torch.randn(3, 4), torch.zeros(3, 1, dtype=torch.long), "dual_focal", (1.0, 1.0))


def _mmce_reference(logits, target, lam, weighted, reduction):
    """Cross-entropy + λ √MMCE² (the fused kernel's "weight" or plain estimator) by autograd through
    the O(N²) kernel matrix (float64)."""
    from focalcal.losses.mmce import _norm_from_square, mmce_squared

    log_p = torch.log_softmax(logits, 1)
    log_conf, predicted = log_p.max(1)
    one_minus = torch.exp(torch.logsumexp(log_p.scatter(1, predicted[:, None], float("-inf")), 1))
    norm = _norm_from_square(mmce_squared(log_conf.exp(), one_minus, predicted == target, weighted=weighted,
                                          normalization="weight"))
    cross_entropy = torch.nn.functional.cross_entropy(logits, target, reduction=reduction)
    return cross_entropy + lam * norm * (len(target) if reduction == "sum" else 1)


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("n", [7, 128, 1500])
def test_fused_mmce_matches_the_quadratic_reference(weighted, n, monkeypatch):
    calls = []
    real = _fused.cross_entropy_mmce
    monkeypatch.setattr("focalcal.losses.mmce._fused.cross_entropy_mmce",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    torch.manual_seed(n)
    logits = 2 * torch.randn(n, 10, dtype=torch.float64)
    logits[:4] = logits[0]  # tied confidences: the sorted sums group them
    target = torch.randint(0, 10, (n,))
    for reduction in ("mean", "sum"):
        x = logits.clone().requires_grad_()
        expected = _mmce_reference(x, target, 2.5, weighted, reduction)
        expected_grad, = torch.autograd.grad(expected, x)
        loss = losses.build({"name": "mmce", "lam": 2.5, "weighted": weighted, "normalization": "weight",
                             "reduction": reduction})
        for dtype, rtol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
            x = logits.to(dtype).requires_grad_()
            value = loss(x, target)
            grad, = torch.autograd.grad(value * 3.0, x)  # an upstream gradient other than 1
            assert value.item() == pytest.approx(expected.item(), rel=rtol)
            torch.testing.assert_close(grad.double(), 3.0 * expected_grad, rtol=rtol,
                                       atol=rtol * expected_grad.abs().max().item())
    assert len(calls) == 4
    none = losses.build({"name": "mmce", "weighted": weighted, "normalization": "weight",
                         "reduction": "none"})(logits, target)
    assert len(calls) == 4 and none.shape == (n,)  # per-sample values: the eager path
    losses.build({"name": "mmce", "weighted": weighted, "normalization": "count"})(logits, target)
    assert len(calls) == (4 if weighted else 5)  # the released "count" estimator: the eager path


def test_fused_mmce_gradcheck():
    torch.manual_seed(5)
    logits = (2 * torch.randn(12, 4, dtype=torch.float64)).requires_grad_()
    target = torch.randint(0, 4, (12,))
    for weighted in (True, False):
        loss = losses.build({"name": "mmce", "weighted": weighted, "normalization": "weight"})
        assert torch.autograd.gradcheck(lambda x, loss=loss, target=target: loss(x, target), (logits,))


def test_fused_generalized_dice_matches_the_eager_reference(monkeypatch):
    calls = []
    real = _fused.batch_dice
    monkeypatch.setattr("focalcal.losses.segmentation._fused.batch_dice", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(6)
    for shape in ((128, 100), (2, 6, 9, 8)):
        logits = 3 * torch.randn(*shape, dtype=torch.float64)
        target = torch.randint(0, shape[1] - 1, (shape[0], *shape[2:]))  # the last class absent
        loss = losses.build({"name": "generalized_dice"})
        expected = _value_and_grad(loss, logits, target, fused=False, monkeypatch=monkeypatch)
        for dtype, rtol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
            value, grad = _value_and_grad(loss, logits.to(dtype), target, fused=True, monkeypatch=monkeypatch)
            assert value.item() == pytest.approx(expected[0].item(), rel=rtol)
            torch.testing.assert_close(grad.double(), expected[1], rtol=rtol, atol=rtol * expected[1].abs().max())
    assert len(calls) == 4


def test_the_build_is_named_after_the_source_and_torch_not_the_checkout(tmp_path, monkeypatch):
    # Checkouts with different kernel sources keep separate builds; the same source anywhere shares one.
    name = _fused.kernels().__name__
    assert _fused.source_digest() in name and re.sub(r"\W", "_", torch.__version__) in name
    copies = _copy_sources(tmp_path / "checkout")
    monkeypatch.setattr(_fused, "SOURCES", copies)
    assert _fused.build_name() == name
    for changed in copies:  # a change to either source is another build
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n// changed\n")
        assert _fused.build_name() != name
        changed.write_bytes(original)


def _copy_sources(folder: Path) -> tuple[Path, ...]:
    folder.mkdir(parents=True, exist_ok=True)
    copies = tuple(folder / source.name for source in _fused.SOURCES)
    for source, copy in zip(_fused.SOURCES, copies):
        copy.write_bytes(source.read_bytes())
    return copies


def test_another_checkout_loads_the_shared_build_without_compiling(tmp_path, monkeypatch):
    """A second checkout of the same source (another path) under FOCALCAL_KERNEL_BUILD=never, as
    in a workflow job, loads the one build and compiles nothing."""
    built = _fused.build()
    assert built is not None and built.exists()
    stamp = built.stat().st_mtime_ns
    monkeypatch.setattr(_fused, "SOURCES", _copy_sources(tmp_path / "checkout"))
    monkeypatch.setenv(_fused.BUILD_SWITCH, "never")
    monkeypatch.setattr(_fused, "_compile", lambda *args: pytest.fail("a job compiled the kernels"))
    module = _fused._load(allow_build=False)
    assert module and Path(module.__file__) == built and built.stat().st_mtime_ns == stamp
    logits = torch.randn(8, 5, dtype=torch.float64)
    target = torch.randint(0, 5, (8,))
    monkeypatch.setattr(_fused, "_module", module)
    loss = losses.build({"name": "focal", "gamma": 2.0, "smoothing": 0.1})
    assert torch.isfinite(loss(logits, target))


def test_a_job_without_a_build_warns_and_takes_the_eager_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(_fused, "_compile", lambda *args: pytest.fail("a job compiled the kernels"))
    with pytest.warns(RuntimeWarning, match=r"FOCALCAL_KERNEL_BUILD=never; run `python -m focalcal build-kernels`"):
        assert _fused._load(allow_build=False) is False


def test_the_workflow_builds_before_its_jobs_and_its_jobs_never_compile():
    root = Path(__file__).resolve().parents[1]
    snakefile = (root / "workflow/Snakefile").read_text()
    assert 'os.environ.setdefault("FOCALCAL_KERNEL_BUILD", "never")' in (root / "workflow/rules/common.smk").read_text()
    onstart = snakefile[snakefile.index("onstart:"):snakefile.index("onsuccess:")]
    assert "_fused.build()" in onstart


def test_is_built_looks_for_the_shared_build_without_loading_or_compiling(tmp_path, monkeypatch):
    assert _fused.build() is not None  # the shared build exists
    monkeypatch.setattr(_fused, "_module", None)
    assert _fused.is_built()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(_fused, "_compile", lambda *args: pytest.fail("is_built compiled the kernels"))
    assert not _fused.is_built() and _fused._module is None
