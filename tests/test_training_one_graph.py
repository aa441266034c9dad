"""One captured step serves a whole run: what changes between epochs (each optimiser's learning
rate, a scheduled γ, AdaFocal's γs and bins) lives in device tensors updated in place, never in
Python numbers a graph would freeze. Proven on the CPU: a counting stand-in for the capture, a
torch.compile proxy that recompiles on every Python number it baked in, the tensor-lr updates
against the float-lr ones, and the loss state's tensors kept across epochs. Also each
architecture's precision and memory format on CUDA, declared in the catalog and recorded in
run.json."""

from __future__ import annotations

import contextlib
import json
import re
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch
from conftest import ROOT

from focalcal import catalog, losses
from focalcal.losses import _fused
from focalcal.losses._base import sync_free
from focalcal.losses.adafocal import AdaFocalLoss, next_gammas
from focalcal.losses.focal import SampleDependentFocalLoss, ScheduledFocalLoss
from focalcal.training import RunConfig, Trainer
from focalcal.training import step as step_module
from focalcal.training import trainer as trainer_module
from focalcal.training.device import CPU_SOURCE, DeviceSetup
from focalcal.training.step import CompilePlan, TrainStep, current_lr, lr_on_device

EPOCHS = 3
# FLSc switching at epochs 1 and 2 (0-based): γ = 5, 3, 1 in the three epochs
FLSC = {"name": "focal_scheduled", "gammas": [5.0, 3.0, 1.0], "switch_at": [1, 2]}


def run_config(loss: dict, optimizer: str = "sgd", compile_mode: str = "none") -> RunConfig:
    """3 epochs of 9 full batches of 64 and a last one of 24 (600 samples: 600 − 20% val/test),
    the rate halved every epoch."""
    opt = {"name": "sgd", "lr": 0.05, "momentum": 0.9} if optimizer == "sgd" else {"name": "adam", "lr": 0.01}
    return RunConfig.from_dict({
        "dataset": {"name": "synthetic1d", "n_samples": 600}, "model": {"name": "mlp", "hidden": 8}, "loss": loss,
        "recipe": {"epochs": EPOCHS, "batch_size": 64, "optimizer": opt, "lr_step_every": 1, "lr_decay": 0.5},
        "seed": 1, "device": "cpu", "compile": compile_mode})


@contextlib.contextmanager
def graph_mode_on_cpu(records: list):
    """The graph mode's step on the CPU: plan ``cudagraphs``, no side stream, and a capture that
    counts itself and keeps the recorded step for its replays."""

    def record(self, step):
        records.append(step)
        return SimpleNamespace(replay=step)

    with (mock.patch.object(trainer_module, "plan_compile", lambda *a: CompilePlan("cudagraphs", "cudagraphs")),
          mock.patch.object(TrainStep, "_side_stream", lambda self: contextlib.nullcontext()),
          mock.patch.object(TrainStep, "_record", record)):
        yield


@pytest.mark.parametrize("loss", [FLSC, {"name": "adafocal", "num_bins": 4}], ids=["flsc", "adafocal"])
def test_three_epochs_with_a_changing_rate_and_gamma_capture_once(tmp_path, loss):
    records = []
    with graph_mode_on_cpu(records):
        trainer = Trainer(run_config(loss), tmp_path / "graphed", data_root=tmp_path / "data", progress=False)
        rate = trainer.optimizer.param_groups[0]["lr"]
        state = [trainer.loss_fn.gamma_tensor] if loss is FLSC else [trainer.loss_fn.gammas, trainer.loss_fn.bin_edges]
        totals = trainer.step.totals
        trainer.fit()
    assert len(records) == 1
    assert [row["lr"] for row in trainer.history] == pytest.approx([0.05, 0.025, 0.0125], rel=1e-6)
    # the tensors the one graph reads are the ones every epoch's hooks updated
    assert torch.is_tensor(rate) and trainer.optimizer.param_groups[0]["lr"] is rate
    assert float(rate) == pytest.approx(0.05 / 8, rel=1e-6)
    assert trainer.step.totals is totals
    if loss is FLSC:
        assert trainer.loss_fn.gamma_tensor is state[0] and float(state[0]) == 1.0
    else:
        assert trainer.loss_fn.gammas is state[0] and trainer.loss_fn.bin_edges is state[1]
        assert not torch.equal(state[0], torch.ones(4, dtype=torch.float64))  # two updates moved the γs
    # and they train the numbers of the eager run, the rate in float32 aside
    eager = Trainer(run_config(loss), tmp_path / "eager", data_root=tmp_path / "data", progress=False)
    eager.fit()
    for graphed_row, eager_row in zip(trainer.history, eager.history, strict=True):
        for key in ("lr", "train_loss", "val_nll", "val_error"):
            assert graphed_row[key] == pytest.approx(eager_row[key], rel=1e-4, abs=1e-6), key


def test_the_capture_count_sees_a_graph_dropped_each_epoch(tmp_path, monkeypatch):
    """The counting stand-in fails on a step that drops its graph at each epoch's start."""

    def begin_epoch_dropping_the_graph(self):
        self.totals.reset()
        self._graph, self._static, self._warm = None, None, 0

    monkeypatch.setattr(TrainStep, "begin_epoch", begin_epoch_dropping_the_graph)
    records = []
    with graph_mode_on_cpu(records):
        Trainer(run_config(FLSC), tmp_path / "run", data_root=tmp_path / "data", progress=False).fit()
    assert len(records) == EPOCHS


def test_a_cpu_run_keeps_its_rate_a_python_number(tmp_path):
    """Only the graph mode puts the rate on the device: a CPU run keeps today's floats and bytes."""
    trainer = Trainer(run_config(FLSC, compile_mode="auto"), tmp_path / "run", data_root=tmp_path / "data",
                      progress=False)
    assert trainer.step.plan.mode == "none"
    assert type(trainer.optimizer.param_groups[0]["lr"]) is float


# ------------------------------------------------------------------ torch.compile proxy
class CompileCounter:
    """A torch.compile backend that counts the graphs it is given (each one a capture: a Python
    number read inside is a constant in it, so a changed number compiles a new graph)."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def compiled_epochs(loss_spec: dict, optimizer: str) -> tuple[list[int], list[int]]:
    """Graphs compiled after each of 3 epochs for the loss (fullgraph: forward and loss, on the
    sync-free path a GPU takes) and for the optimisers' update, with the trainer's hooks between
    epochs: the LR schedule steps, the loss gets its epoch and AdaFocal its validation pass."""
    torch._dynamo.reset()
    config = run_config(loss_spec, optimizer)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    loss_fn = losses.build(loss_spec)
    loss_fn.validate_inputs = False
    optimizer_ = trainer_module.build_optimizer(model, config)
    scheduler = trainer_module.build_scheduler(optimizer_, config)
    step = TrainStep(model, model, loss_fn, optimizer_, lambda loss, y: loss, None, grad_clip_norm=None,
                     ignore_index=-100, plan=CompilePlan("cudagraphs", "cudagraphs"), device=torch.device("cpu"))
    loss_counter, update_counter = CompileCounter(), CompileCounter()
    forward_loss = torch.compile(lambda x, y: step.loss_fn(step.forward(x), y), backend=loss_counter, fullgraph=True)
    # torch's optimisers break the graph on purpose around their update (torch/optim/optimizer.py)
    update = torch.compile(lambda: [o.step() for o in step.optimizers], backend=update_counter)
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 1, generator=generator), torch.arange(64) % 3
    loss_graphs, update_graphs = [], []
    for epoch in range(EPOCHS):
        _ = loss_fn.set_epoch(epoch, EPOCHS)
        if epoch > 0 and isinstance(loss_fn, AdaFocalLoss):
            with torch.no_grad():
                loss_fn.update_from_validation(model(x) * (epoch + 2), y)
        step.begin_epoch()
        for _batch in range(2):
            for o in step.optimizers:
                o.zero_grad(set_to_none=True)
            with sync_free():
                forward_loss(x, y).backward()
            update()
        scheduler.step()
        loss_graphs.append(loss_counter.graphs)
        update_graphs.append(update_counter.graphs)
    return loss_graphs, update_graphs


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("loss", [FLSC, {"name": "adafocal", "num_bins": 4}], ids=["flsc", "adafocal"])
def test_a_compiled_step_compiles_once_across_epochs_of_changing_rate_and_gamma(loss, optimizer):
    loss_graphs, update_graphs = compiled_epochs(loss, optimizer)
    assert loss_graphs == [1, 1, 1]
    # the first epoch may compile the update twice (SGD's momentum buffers appear at its first
    # step); nothing after it compiles anew
    assert update_graphs[1:] == [update_graphs[0]] * 2


def test_the_proxy_recompiles_when_a_rate_or_gamma_is_a_python_number(monkeypatch):
    """The proxy fails on what a graph would freeze: the rate kept a float, FLSc's γ passed as one."""
    with monkeypatch.context() as patch:
        patch.setattr(step_module, "lr_on_device", lambda optimizers, device: [])
        _, update_graphs = compiled_epochs(FLSC, "sgd")
    assert update_graphs[2] > update_graphs[0]

    def reduced_with_a_number(self, logits, index, reduction):
        return losses.focal.focal_of_target(logits, index, self.gamma, reduction=reduction)

    with monkeypatch.context() as patch:
        patch.setattr(ScheduledFocalLoss, "reduced", reduced_with_a_number)
        patch.setenv(_fused.ENV_SWITCH, "0")  # the torch formulas a GPU runs, not the CPU's fused kernel
        loss_graphs, _ = compiled_epochs(FLSC, "sgd")
    assert loss_graphs[2] > loss_graphs[0]


# ------------------------------------------------------------------ tensor rate = float rate
def train_with_schedule(config: RunConfig, on_device: bool) -> torch.nn.Module:
    """5 epochs of 3 steps with the recipe's optimiser and LR schedule; ``on_device``: the graph
    mode's optimiser (fused SGD, capturable Adam) with the rate in a tensor."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    name = config.recipe.optimizer.name
    options = ({"fused": True} if name == "sgd" else {"capturable": True, "foreach": True}) if on_device else {}
    from torch.optim import adam  # capturable Adam on the CPU, which torch allows only on accelerators

    with mock.patch.object(adam, "_get_capturable_supported_devices", return_value=["cpu"]):
        optimizer = trainer_module.build_optimizer(model, config, **options)
        scheduler = trainer_module.build_scheduler(optimizer, config)
        rates = lr_on_device([optimizer], torch.device("cpu")) if on_device else []
        generator = torch.Generator().manual_seed(1)
        x, y = torch.randn(32, 4, generator=generator), torch.randint(0, 3, (32,), generator=generator)
        for _epoch in range(5):
            for _step in range(3):
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    assert all(optimizer.param_groups[0]["lr"] is rate for rate in rates)  # filled in place, never re-bound
    return model


@pytest.mark.parametrize("schedule", [{"lr_step_every": 2, "lr_decay": 0.3}, {"lr_milestones": [1, 3], "lr_decay": 0.1}],
                         ids=["step", "milestones"])
@pytest.mark.parametrize("optimizer", [{"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4,
                                        "nesterov": True},
                                       {"name": "adam", "lr": 0.01, "weight_decay": 1e-4}], ids=["sgd", "adam"])
def test_a_rate_in_a_tensor_updates_the_parameters_as_a_float_rate_does(optimizer, schedule):
    config = RunConfig.from_dict({"dataset": {"name": "synthetic1d"}, "model": {"name": "mlp"},
                                  "loss": {"name": "cross_entropy"},
                                  "recipe": {"epochs": 5, "optimizer": optimizer, **schedule}})
    floats, tensors = train_with_schedule(config, False), train_with_schedule(config, True)
    moved = 0.0
    for (name, a), b in zip(floats.state_dict().items(), tensors.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
        moved = max(moved, float((a - b).abs().max()))
    assert moved < 1e-5


def test_current_lr_reads_a_float_or_a_tensor():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
    assert current_lr(optimizer) == 0.3
    (rate,) = lr_on_device([optimizer], torch.device("cpu"))
    assert rate.dtype == torch.float32 and current_lr(optimizer) == pytest.approx(0.3)


def test_a_loaded_optimiser_state_gives_its_rate_back_to_the_graphs_tensor():
    """Loading a checkpoint re-binds each group's lr; the next epoch puts back the tensor the graph reads."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(model, model, None, optimizer, None, None, grad_clip_norm=None, ignore_index=-100,
                     plan=CompilePlan("cudagraphs", "cudagraphs"), device=torch.device("cpu"))
    rate = optimizer.param_groups[0]["lr"]
    saved = optimizer.state_dict()
    saved["param_groups"][0]["lr"] = 0.004
    optimizer.load_state_dict(saved)
    step.begin_epoch()
    assert optimizer.param_groups[0]["lr"] is rate and float(rate) == pytest.approx(0.004)


def test_an_eager_step_turns_a_loaded_tensor_rate_into_a_number():
    """A checkpoint of a graph-mode run resumed in an eager mode trains with a Python-number rate."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = TrainStep(model, model, None, optimizer, None, None, grad_clip_norm=None, ignore_index=-100,
                     plan=CompilePlan("none", "none"), device=torch.device("cpu"))
    optimizer.param_groups[0]["lr"] = torch.tensor(0.25)
    step.begin_epoch()
    assert type(optimizer.param_groups[0]["lr"]) is float and optimizer.param_groups[0]["lr"] == 0.25


# ------------------------------------------------------------------ loss state in place
def test_flsc_fills_one_gamma_tensor_with_each_epochs_gamma():
    loss = losses.build({"name": "flsc531"})
    tensor = loss.gamma_tensor
    seen = []
    for epoch in range(350):
        loss.set_epoch(epoch, 350)
        assert loss.gamma_tensor is tensor
        seen.append(float(tensor))
    # mukhoti2020 App. E: γ = 5, 3, 1 for epochs 0–99, 100–249, 250–349
    assert seen == [5.0] * 100 + [3.0] * 150 + [1.0] * 100
    assert seen == [loss.gamma_at(epoch, 350) for epoch in range(350)]


def test_flsc_on_the_sync_free_path_reads_the_tensor_and_equals_the_number():
    logits, targets = torch.randn(16, 5, generator=torch.Generator().manual_seed(0)), torch.arange(16) % 5
    loss = ScheduledFocalLoss(gammas=(5.0, 3.0, 1.0), switch_at=(1, 2))
    for epoch in range(3):
        loss.set_epoch(epoch, 3)
        eager = loss(logits, targets)
        with sync_free():
            device_path = loss(logits, targets)
        torch.testing.assert_close(device_path, eager, rtol=1e-6, atol=1e-7)
        with sync_free(), mock.patch.object(loss, "gamma", 99.0):  # the number is not what it reads
            torch.testing.assert_close(loss(logits, targets), eager, rtol=1e-6, atol=1e-7)


def test_adafocal_updates_its_gammas_and_bins_in_place_by_its_rule():
    loss = AdaFocalLoss(num_bins=5)
    gammas, edges = loss.gammas, loss.bin_edges
    generator = torch.Generator().manual_seed(3)
    expected = gammas.clone()
    for epoch in range(4):
        logits = torch.randn(200, 4, generator=generator) * (1 + epoch)
        labels = torch.randint(0, 4, (200,), generator=generator)
        confidence, predicted = torch.softmax(logits.double(), 1).max(1)
        order = confidence.argsort()
        bins = torch.arange(200).div(40, rounding_mode="floor")  # 5 equal-mass bins of 40
        gap = (torch.zeros(5, dtype=torch.float64).index_add_(0, bins, confidence[order])
               - torch.zeros(5, dtype=torch.float64).index_add_(0, bins, (predicted == labels)[order].double())) / 40
        expected = next_gammas(expected, gap, lam=1.0, gamma_min=-2.0, gamma_max=20.0, switch_threshold=0.2)
        loss.update_from_validation(logits, labels)
        assert loss.gammas is gammas and loss.bin_edges is edges
        torch.testing.assert_close(gammas, expected)
        sorted_confidence = confidence[order]
        torch.testing.assert_close(edges, (sorted_confidence[39:160:40] + sorted_confidence[40:161:40]) / 2)
    assert not torch.equal(gammas, torch.ones(5, dtype=torch.float64))
    # the sync-free path reads the updated tensors, not a cast kept from before the update
    probe = torch.tensor([[0.05], [0.5], [0.99]])
    with sync_free():
        before = loss.gamma_for(probe)
        gammas.mul_(2)
        torch.testing.assert_close(loss.gamma_for(probe), before * 2)


def test_flsd_keeps_its_gamma_and_threshold_tensors():
    loss = SampleDependentFocalLoss(thresholds=(0.2, 0.5), gammas=(5.0, 3.0, 2.0))
    tensors = (loss.gamma_tensor, loss.threshold_tensor)
    for epoch in range(3):
        loss.set_epoch(epoch, 3)
        assert (loss.gamma_tensor, loss.threshold_tensor) == tensors
    probe = torch.tensor([0.1, 0.2, 0.3, 0.5, 0.9])
    assert loss.gamma_for(probe).tolist() == [5.0, 3.0, 3.0, 2.0, 2.0]


# ------------------------------------------------------------------ precision per architecture
CUDA = DeviceSetup(torch.device("cuda"), torch.bfloat16, channels_last=True,
                   source=catalog.CUDA_BF16_CHANNELS_LAST.source)


def test_each_architecture_declares_its_cuda_precision_and_densenet_runs_fp32():
    for name, entry in catalog.MODELS.items():
        precision = entry.cuda_precision
        assert precision.autocast in ("bfloat16", None) and precision.memory_format in ("channels_last", "contiguous")
        assert precision.source, name
        if entry.task == "translation":  # token batches: bf16 autocast, no image memory format
            assert precision.autocast == "bfloat16" and precision.memory_format == "contiguous", name
        elif name != "densenet121":
            assert precision == catalog.CUDA_BF16_CHANNELS_LAST, name
    densenet = CUDA.for_architecture("densenet121", image_batches=True)
    assert densenet.autocast_dtype is None and not densenet.channels_last
    assert densenet.record()["autocast"] is None and densenet.record()["memory_format"] == "contiguous"
    assert CUDA.for_architecture("resnet50", image_batches=True).record() == {
        "autocast": "bfloat16", "memory_format": "channels_last", "source": catalog.CUDA_BF16_CHANNELS_LAST.source}
    text = CUDA.for_architecture("global_pooling_cnn", image_batches=False).record()
    assert text["autocast"] == "bfloat16" and text["memory_format"] == "contiguous"


def test_densenets_source_quotes_the_benchmark_it_cites():
    """The figures the DenseNet-121 entry cites are the recorded bench table's fp32 and bf16 eager rows (bench/RESULTS.md)."""
    source = catalog.MODELS["densenet121"].cuda_precision.source
    fp32, bf16 = re.findall(r"(\d+\.\d+) s", source)
    table = (ROOT / "bench" / "RESULTS.md").read_text()
    assert f"| densenet121 | fp32 none | {fp32} |" in table and f"| densenet121 | bf16 none | {bf16} |" in table
    assert float(fp32) < float(bf16)


def test_a_float32_setup_keeps_its_choice_and_the_cpu_keeps_float32():
    fp32 = DeviceSetup(torch.device("cuda"), None, channels_last=False, source="fp32 eager loop")
    assert fp32.for_architecture("resnet50", image_batches=True) == fp32
    cpu = DeviceSetup(torch.device("cpu"), None, channels_last=False, source=CPU_SOURCE)
    assert cpu.for_architecture("resnet50", image_batches=True).record() == {
        "autocast": None, "memory_format": "contiguous", "source": CPU_SOURCE}


def test_run_json_records_the_precision_that_ran(tmp_path):
    config = run_config({"name": "focal", "gamma": 3})
    config = RunConfig.from_dict({**config.to_dict(), "recipe": {**config.to_dict()["recipe"], "epochs": 1}})
    trainer = Trainer(config, tmp_path / "run", data_root=tmp_path / "data", progress=False)
    trainer.fit()
    trainer.export_logits()
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["precision"] == {"autocast": None, "memory_format": "contiguous", "source": CPU_SOURCE}
    assert np.isfinite(np.load(tmp_path / "run" / "logits.npz")["test_logits"]).all()


# ------------------------------------------------------------------ inductor inside the graph
def test_inductor_cudagraphs_is_planned_on_cuda_only_and_never_by_auto():
    from focalcal.training.step import plan_compile

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert plan_compile("inductor_cudagraphs", cuda, "sgd").mode == "inductor_cudagraphs"
    assert plan_compile("auto", cuda, "sgd").mode == "cudagraphs"
    assert plan_compile("inductor_cudagraphs", cpu, "sgd").mode == "none"
    assert plan_compile("inductor_cudagraphs", cuda, "adagrad").mode == "none"
    assert step_module.optimizer_options("sgd", cuda, "inductor_cudagraphs") == {"fused": True}


def test_inductor_cudagraphs_captures_the_compiled_model_once(tmp_path):
    """The stand-in of the mode on the CPU: the model compiled by inductor runs in the warm-up
    steps and in the one capture, and trains the eager run's numbers to float tolerance."""
    records = []
    plan = CompilePlan("inductor_cudagraphs", "inductor_cudagraphs")
    config = run_config({"name": "focal_scheduled", "gammas": [5.0, 3.0], "milestones": [0.5], "switch_at": [1]})
    config = RunConfig.from_dict({**config.to_dict(), "recipe": {**config.to_dict()["recipe"], "epochs": 2}})
    with graph_mode_on_cpu(records), mock.patch.object(trainer_module, "plan_compile", lambda *a: plan):
        trainer = Trainer(config, tmp_path / "graphed", data_root=tmp_path / "data", progress=False)
        assert isinstance(trainer.forward, torch._dynamo.eval_frame.OptimizedModule)
        trainer.fit()
    assert len(records) == 1 and trainer.step.plan.mode == "inductor_cudagraphs"
    eager = Trainer(config, tmp_path / "eager", data_root=tmp_path / "data", progress=False)
    eager.fit()
    for graphed_row, eager_row in zip(trainer.history, eager.history, strict=True):
        for key in ("train_loss", "val_nll"):
            assert graphed_row[key] == pytest.approx(eager_row[key], rel=1e-4, abs=1e-6), key


def test_a_failed_capture_with_the_compiled_model_keeps_it_compiled_and_says_so(tmp_path, monkeypatch):
    def refuse(self, step):
        raise RuntimeError("operation not permitted when stream is capturing")

    plan = CompilePlan("inductor_cudagraphs", "inductor_cudagraphs")
    config = run_config({"name": "focal", "gamma": 3})
    config = RunConfig.from_dict({**config.to_dict(), "recipe": {**config.to_dict()["recipe"], "epochs": 1}})
    with graph_mode_on_cpu([]), mock.patch.object(trainer_module, "plan_compile", lambda *a: plan):
        monkeypatch.setattr(TrainStep, "_record", refuse)
        trainer = Trainer(config, tmp_path / "run", data_root=tmp_path / "data", progress=False)
        trainer.fit()
    assert trainer.step.plan.mode == "default"
    assert "ran with the compiled model, uncaptured, from then on" in trainer.step.plan.reason
