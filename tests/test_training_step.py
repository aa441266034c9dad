"""The training step (focalcal.training.step): the eager step it replaces, the sync-free path a
GPU takes, CUDA-graph replay semantics, divergence on the device, and the compile modes."""

import contextlib
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from focalcal import losses
from focalcal.losses import _fused
from focalcal.losses._base import sync_free
from focalcal.training import RunConfig, Trainer
from focalcal.training.diagnostics import LastLayerInputs
from focalcal.training.step import CompilePlan, TrainStep, descended, optimizer_options, plan_compile

SEGMENTATION = {"weighted_cross_entropy", "dual_cross_entropy", "dual_focal", "generalized_dice"}
K, BATCH, IGNORE = 4, 8, 255
# 2 epochs of 9 full batches and one of 4 (the last, smaller batch the papers' loaders keep): 20 steps
EPOCHS, FULL_BATCHES, LAST = 2, 9, 4


def cases():
    for name in losses.available():
        for reduction in ("mean", "sum"):
            build = losses.build({"name": name})
            if reduction == "sum" and not build.mean_over_elements:
                continue  # a set-level loss has no sum: the trainer refuses it (test_training_recipe_options)
            for clip in (None, 0.5):
                yield name, reduction, clip


def make_problem(name: str, seed: int = 0):
    """A tiny model and one epoch of batches (inputs, targets) for the loss ``name``."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    n = FULL_BATCHES * BATCH + LAST
    if name in SEGMENTATION:
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
                                    torch.nn.Conv2d(6, K, 1))
        x = torch.randn(n, 3, 5, 5, generator=generator)
        y = torch.randint(0, K, (n, 5, 5), generator=generator)
        y[torch.rand(y.shape, generator=generator) < 0.1] = IGNORE  # unlabelled pixels
        loss = {"name": name, "ignore_index": IGNORE}
    else:
        model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.BatchNorm1d(12), torch.nn.ReLU(),
                                    torch.nn.Linear(12, K))
        x = torch.randn(n, 6, generator=generator) * 2
        y = torch.randint(0, K, (n,), generator=generator)
        loss = {"name": name}
    loss_fn = losses.build(loss)
    loss_fn.set_training_targets(y, K)
    losses.check_target_values(y, K, loss_fn.ignore_index)  # once, as the trainer does: the step trusts them
    loss_fn.validate_inputs = False
    batches = [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, n, BATCH)]
    return model, loss_fn, batches


def optimizer_of(model, reduction="mean", batches=None):
    """SGD; under "sum" the rate is divided by a batch's elements, so a step is as large as under
    "mean" (a summed segmentation loss at the mean's rate diverges and amplifies rounding)."""
    lr = 0.05 if reduction == "mean" else 0.05 / batches[0][1].numel()
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)


def between_epochs(loss_fn, model, batches, epoch):
    """The trainer's per-epoch hooks: the scheduled γ, AdaFocal's γ update from "validation" logits."""
    loss_fn.set_epoch(epoch, EPOCHS)
    if epoch > 0 and batches[0][1].dim() == 1:
        with torch.no_grad():
            model.eval()
            logits = torch.cat([model(x) for x, _ in batches])
            model.train()
        loss_fn.update_from_validation(logits, torch.cat([y for _, y in batches]))


def reference_training(name, reduction, clip):
    """The eager loop the step replaces, one host read-back per batch included."""
    model, loss_fn, batches = make_problem(name)
    optimizer = optimizer_of(model, reduction, batches)
    for epoch in range(EPOCHS):
        between_epochs(loss_fn, model, batches, epoch)
        for inputs, targets in batches:
            logits = model(inputs).float()
            loss = loss_fn(logits, targets)
            assert np.isfinite(float(loss.detach()))
            optimizer.zero_grad(set_to_none=True)
            objective = loss if reduction == "mean" else loss * (targets != IGNORE).sum()
            objective.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
    return model


class ReplayedStep(TrainStep):
    """CUDA graph semantics on the CPU: recording keeps the step without running it, a replay
    re-runs it on the static input buffers; warm-up needs no side stream."""

    replays = 0

    def _side_stream(self):
        return contextlib.nullcontext()

    def _record(self, step):
        def replay():
            self.replays += 1
            step()

        return SimpleNamespace(replay=replay)


@contextlib.contextmanager
def no_host_reads():
    """Fail on every way Python code reads a tensor's value back (what a CUDA graph cannot capture
    and what stalls a GPU): item, tolist, bool/int/float/index, nonzero, a boolean-mask index."""
    names = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "nonzero", "numpy")
    saved = {name: getattr(torch.Tensor, name) for name in names}
    getitem, setitem = torch.Tensor.__getitem__, torch.Tensor.__setitem__

    def refuse(name):
        def method(*args, **kwargs):
            raise AssertionError(f"host read-back inside the step: Tensor.{name}")
        return method

    def masked(index):
        parts = index if isinstance(index, tuple) else (index,)
        return any(torch.is_tensor(part) and part.dtype == torch.bool for part in parts)

    def checked_getitem(self, index):
        if masked(index):
            raise AssertionError("host read-back inside the step: a boolean-mask index")
        return getitem(self, index)

    def checked_setitem(self, index, value):
        if masked(index):
            raise AssertionError("host read-back inside the step: a boolean-mask index")
        return setitem(self, index, value)

    try:
        for name in names:
            setattr(torch.Tensor, name, refuse(name))
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = checked_getitem, checked_setitem
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)
        torch.Tensor.__getitem__, torch.Tensor.__setitem__ = getitem, setitem


def step_training(name, reduction, clip, step_class=TrainStep, mode="none", checked=False):
    model, loss_fn, batches = make_problem(name)
    optimizer = optimizer_of(model, reduction, batches)
    ignore = getattr(loss_fn, "ignore_index", None)
    step = step_class(model, model, loss_fn, optimizer, lambda loss, y: descended(loss, y, reduction, ignore),
                      None, grad_clip_norm=clip, ignore_index=IGNORE,
                      plan=CompilePlan(mode, mode), device=torch.device("cpu"))
    totals = []
    for epoch in range(EPOCHS):
        between_epochs(loss_fn, model, batches, epoch)
        step.begin_epoch()
        with no_host_reads() if checked else contextlib.nullcontext():
            for inputs, targets in batches:
                step.step(inputs, targets)
        totals.append(step.end_epoch().read())
    return model, step, totals


def assert_same_parameters(a, b, exact):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        if exact:
            assert torch.equal(p, q), name
        else:
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("name, reduction, clip", list(cases()))
def test_the_step_equals_the_eager_loop_for_every_loss(name, reduction, clip, monkeypatch):
    """After 20 steps (two epochs, each with its smaller last batch): the eager step is
    bit-identical to the loop it replaces; the sync-free path a GPU takes (the torch
    formulas, not the CPU's fused kernels), replayed as a CUDA graph replays it, agrees to
    float tolerance and reads nothing back to the host."""
    reference = reference_training(name, reduction, clip)
    eager, _, totals = step_training(name, reduction, clip)
    assert_same_parameters(reference, eager, exact=True)
    assert [t["first_bad"] for t in totals] == [-1, -1]
    monkeypatch.setenv(_fused.ENV_SWITCH, "0")
    with sync_free():
        replayed, step, _ = step_training(name, reduction, clip, ReplayedStep, "cudagraphs", checked=True)
    assert_same_parameters(reference, replayed, exact=False)
    # once per run: 3 warm-up steps and a capture replayed at once; then every full batch replays,
    # and each epoch's last batch runs eagerly
    assert step.replays == EPOCHS * FULL_BATCHES - 3


def test_epoch_totals_match_the_batches_and_a_replayed_divergence_names_its_batch():
    model, loss_fn, batches = make_problem("focal")
    calls = {"n": 0}

    def poisoned(logits, targets):  # the 8th step (a replayed one) gives NaN
        calls["n"] += 1
        value = loss_fn(logits, targets)
        return value * float("nan") if calls["n"] == 8 else value

    optimizer = optimizer_of(model)
    step = ReplayedStep(model, model, poisoned, optimizer, lambda loss, y: loss, None,
                        grad_clip_norm=None, ignore_index=IGNORE, plan=CompilePlan("cudagraphs", "cudagraphs"),
                        device=torch.device("cpu"))
    step.begin_epoch()
    for inputs, targets in batches:
        step.step(inputs, targets)
    totals = step.end_epoch().read()
    assert totals["first_bad"] == 7 and not totals["bad_logits"] and np.isnan(totals["bad_loss"])

    # without poison: the totals are the sums over the batches, computed here from the logits
    model, loss_fn, batches = make_problem("cross_entropy", seed=1)
    optimizer = optimizer_of(model)
    step = TrainStep(model, model, loss_fn, optimizer, lambda loss, y: loss, None,
                     grad_clip_norm=None, ignore_index=IGNORE, plan=CompilePlan("none", "none"), device=torch.device("cpu"))
    step.begin_epoch()
    expected = {"loss_sum": 0.0, "nll_sum": 0.0, "correct": 0}
    for inputs, targets in batches:
        snapshot = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():  # the step's forward, in training mode; its batch-norm statistics put back
            logits = model(inputs).double()
        model.load_state_dict(snapshot)
        expected["loss_sum"] += float(torch.nn.functional.cross_entropy(logits.float(), targets)) * len(targets)
        expected["nll_sum"] += float(torch.nn.functional.cross_entropy(logits, targets, reduction="sum"))
        expected["correct"] += int((logits.argmax(1) == targets).sum())
        step.step(inputs, targets)
    totals = step.end_epoch().read()
    assert totals["first_bad"] == -1
    assert totals["correct"] == expected["correct"]
    assert totals["loss_sum"] == pytest.approx(expected["loss_sum"], rel=1e-6)
    assert totals["nll_sum"] == pytest.approx(expected["nll_sum"], rel=1e-9)


def test_the_feature_norm_hook_keeps_no_python_state_so_compile_traces_once():
    """A Python counter in the hook would change on every batch and make torch.compile recompile."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, K))
    watcher = LastLayerInputs(model[2])
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter)
    x = torch.randn(5, BATCH, 6)
    for batch in x:
        compiled(batch)
    assert counter.frame_count == 1
    expected = float(torch.stack([model[1](model[0](b)).norm(dim=1) for b in x]).double().mean())
    assert watcher.epoch_mean_norm() == pytest.approx(expected, rel=1e-6)
    assert np.isnan(watcher.epoch_mean_norm())  # reset by the read
    torch._dynamo.reset()


def test_the_compile_plan_says_what_runs_and_why():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert plan_compile("auto", cpu, "sgd").mode == "none"
    assert plan_compile("auto", cuda, "sgd").mode == "cudagraphs"
    fallback = plan_compile("cudagraphs", cpu, "sgd")
    assert fallback.record() == {"requested": "cudagraphs", "mode": "none",
                                 "reason": "CUDA graphs need a CUDA device; the step ran eagerly on cpu"}
    assert plan_compile("cudagraphs", cuda, "adagrad").mode == "none"
    assert "Adagrad" in plan_compile("auto", cuda, "adagrad").reason
    assert plan_compile("default", cpu, "adam").mode == "default"
    with pytest.raises(ValueError, match=r"compile = 'fast' is not one of"):
        plan_compile("fast", cpu, "sgd")
    # optimisers: torch's defaults on the CPU (its numbers unchanged), capturable or fused on CUDA
    assert optimizer_options("sgd", cpu, "none") == {}
    assert optimizer_options("adam", cuda, "cudagraphs") == {"capturable": True, "foreach": True}
    assert optimizer_options("sgd", cuda, "none") == {"fused": True}


def run_config(compile_mode, **recipe):
    return RunConfig.from_dict({
        "dataset": {"name": "synthetic1d", "n_samples": 600}, "model": {"name": "mlp", "hidden": 8},
        "loss": {"name": "focal", "gamma": 3},
        "recipe": {"epochs": 1, "batch_size": 64, "loss_reduction": "sum", "grad_clip_norm": 2, **recipe},
        "seed": 1, "device": "cpu", "compile": compile_mode})


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def test_a_recipe_runs_in_each_compile_mode_on_the_cpu_and_run_json_says_how(tmp_path, data_root):
    logits = {}
    for mode in ("none", "auto", "cudagraphs", "default"):
        trainer = Trainer(run_config(mode), tmp_path / mode, data_root=data_root, progress=False)
        trainer.fit()
        trainer.export_logits()
        info = json.loads((tmp_path / mode / "run.json").read_text())
        assert info["config"]["compile"] == mode
        assert info["compile"]["requested"] == mode
        assert info["compile"]["mode"] == ("default" if mode == "default" else "none")
        assert bool(info["compile"]["reason"]) == (mode in ("auto", "cudagraphs"))
        logits[mode] = np.load(tmp_path / mode / "logits.npz")["test_logits"]
    # the eager modes are one computation; torch.compile reorders floating-point arithmetic
    assert np.array_equal(logits["none"], logits["auto"]) and np.array_equal(logits["none"], logits["cudagraphs"])
    np.testing.assert_allclose(logits["default"], logits["none"], rtol=1e-3, atol=1e-4)


def test_compile_reads_a_yes_no_as_the_two_modes_it_meant():
    assert run_config(True).compile == "default" and run_config(False).compile == "none"
    assert run_config(True).fingerprint() == run_config("cudagraphs").fingerprint()  # not part of the identity
    with pytest.raises(ValueError, match=r"compile must be one of .*, got 'graphs'"):
        run_config("graphs")


def test_autocast_keeps_no_weight_cache_under_cuda_graphs():
    """A graph replays the casts it recorded; a cache of cast weights would outlive the capture."""
    model = torch.nn.Linear(3, 2)
    for mode, cached in (("none", True), ("cudagraphs", False)):
        step = TrainStep(model, model, None, None, None, torch.bfloat16, grad_clip_norm=None, ignore_index=IGNORE,
                         plan=CompilePlan(mode, mode), device=torch.device("cpu"))
        with step.autocast():
            assert torch.is_autocast_enabled("cpu") and torch.is_autocast_cache_enabled() == cached
            assert model(torch.ones(1, 3)).dtype == torch.bfloat16
