"""Every training step a shipped config plans can be captured in one CUDA graph, or says why not.

The proxy (focalcal.training.graph_safety) runs each planned run's real step — its model, its
loss with real state, the graph mode's optimiser — on the meta device under a guard that fails
on host reads and cross-device tensors. The bug-revert tests put back the two faults a GPU
would have hit (a host read of the largest word id, CPU class weights copied every step) and
show the proxy fails on each.
"""

from __future__ import annotations

import pytest
import torch
from conftest import ROOT, SHIPPED_CONFIGS

from focalcal.losses import segmentation as segmentation_losses
from focalcal.models import _text
from focalcal.pipeline.plan import planned_runs
from focalcal.training.config import RunConfig
from focalcal.training.graph_safety import (
    GraphUnsafe,
    check_step,
    eager_reason,
    loss_part,
    model_part,
)

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
PLANNED = planned_runs(SHIPPED_CONFIGS, SCHEMA)


def run_of(label_part: str) -> RunConfig:
    """The first planned run whose label contains ``label_part``."""
    return RunConfig.from_dict(next(run.run_config for run in PLANNED if label_part in run.label))


def test_the_shipped_configs_plan_every_study_family():
    """The proxy sees the runs that matter: each paper's data, models and stateful losses."""
    labels = " ".join(run.label for run in PLANNED)
    assert len(PLANNED) > 200
    for part in ("20newsgroups/global_pooling_cnn", "/wce/hossain_adam", "/adafocal/", "/flsd53/", "/mmce",
                 "cifar10/resnet50/", "cifar10/densenet121/", "sst/tree_lstm/", "camvid/deeplabv3plus/"):
        assert part in labels, part


def parts_checked(config: RunConfig) -> None:
    """The run's step checked as its two halves, each once per distinct half (a deep model on the
    meta device takes seconds): the real model with its optimiser, clipping and objective, and the
    real loss with its state under the same objective and optimiser."""
    for part, key in (("model", model_part(config)), ("loss", loss_part(config))):
        if key not in CHECKED:
            try:
                check_step(config, part=part)
                CHECKED[key] = None
            except GraphUnsafe as error:
                CHECKED[key] = error
        if CHECKED[key] is not None:
            raise CHECKED[key]


CHECKED: dict[str, GraphUnsafe | None] = {}


@pytest.mark.parametrize("run", PLANNED, ids=[run.label for run in PLANNED])
def test_every_planned_step_is_graph_safe_or_eager_for_a_recorded_reason(run):
    config = RunConfig.from_dict(run.run_config)
    reason = eager_reason(config)
    if reason:
        # the recorded reason is real: the step does read the host
        with pytest.raises(GraphUnsafe, match="host read"):
            parts_checked(config)
    else:
        parts_checked(config)


def test_a_whole_step_checks_as_its_two_halves_do():
    """The halves stand for the whole: for a model and a stateful loss the whole real step passes too."""
    for label in ("cnn1d_32/adafocal/", "/wce/hossain_adam", "/mmce"):
        config = run_of(label)
        check_step(config)
        parts_checked(config)


def test_the_eager_runs_are_the_tree_lstm_with_adagrad_and_each_names_why():
    eager = {run.label: eager_reason(RunConfig.from_dict(run.run_config)) for run in PLANNED}
    eager = {label: reason for label, reason in eager.items() if reason}
    assert eager, "the SST Tree-LSTM runs are planned and run eagerly"
    assert all("tree_lstm" in label for label in eager)
    assert all("Tree-LSTM" in reason and ".tolist()" in reason for reason in eager.values())


def test_the_proxy_fails_on_a_host_read_of_the_largest_word_id(monkeypatch):
    """The 20 Newsgroups model's range check as it was: int(tokens.max()) on every forward."""
    config = run_of("20newsgroups/global_pooling_cnn/ce/")
    check_step(config)

    def check_every_forward(self, tokens, model):
        if tokens.numel() and int(tokens.max()) >= self.embedding.num_embeddings:
            raise ValueError("out of vocabulary")

    monkeypatch.setattr(_text.EmbeddingMixin, "_check_token_range", check_every_forward)
    with pytest.raises(GraphUnsafe, match="host read.*_local_scalar_dense"):
        check_step(config)


def test_the_proxy_fails_on_class_weights_left_on_the_cpu(monkeypatch):
    """Weighted CE as it was: float64 weights made on the CPU after the loss moved, copied to the
    device on every step."""
    config = run_of("/wce/hossain_adam")
    check_step(config)

    def weights_on_the_cpu(self, targets, num_classes):
        counts = segmentation_losses.class_counts(targets, num_classes, self.ignore_index)
        self.weights = torch.as_tensor(segmentation_losses.inverse_frequency_weights(counts), dtype=torch.float64)

    monkeypatch.setattr(segmentation_losses.WeightedCrossEntropyLoss, "set_training_targets", weights_on_the_cpu)
    with pytest.raises(GraphUnsafe, match="cross-device tensor.*cpu tensor torch.float64"):
        check_step(config)


def test_weighted_ce_weights_follow_the_module_and_keep_their_exact_values():
    loss = segmentation_losses.WeightedCrossEntropyLoss().to("meta")
    targets = torch.tensor([0, 0, 0, 1, 2, 2])
    loss.set_training_targets(targets, 3)
    assert loss.weights.device.type == "meta" and loss.weights.dtype == torch.float32
    assert loss.hyperparameters()["weights"] == pytest.approx((6 / 9, 6 / 3, 6 / 6), rel=1e-15)
    loss = segmentation_losses.WeightedCrossEntropyLoss()
    loss.set_training_targets(targets, 3)
    logits = torch.randn(6, 3)
    assert loss._class_weights(logits) is loss.weights  # no per-step copy on the device it lives on


def test_the_token_range_is_still_checked_on_the_cpu_and_once_per_split():
    from focalcal.models.global_pooling_cnn import GlobalPoolingCNN

    model = GlobalPoolingCNN(4, vocab_size=50, embedding_dim=8, filters=4, hidden=4)
    tokens = torch.full((2, model.min_length), 60)
    with pytest.raises(ValueError, match="word id 60 >= vocab_size=50"):
        model(tokens)
    with pytest.raises(ValueError, match="word id 60 >= vocab_size=50"):
        model.check_inputs(tokens)


def test_the_rate_on_the_device_needs_fused_sgd_and_the_proxy_fails_on_foreach(monkeypatch):
    """A captured SGD step reads its learning rate from a device tensor; torch's foreach SGD turns
    that tensor into a host number (alpha=-lr), its fused SGD reads it on the device."""
    from focalcal.training import graph_safety

    config = run_of("cifar10/resnet50/")
    assert config.recipe.optimizer.name == "sgd"
    step, _, _ = graph_safety.build_step(config, part="loss")
    assert step.optimizer.defaults["fused"] and all(
        torch.is_tensor(group["lr"]) and group["lr"].device.type == "meta" for group in step.optimizer.param_groups)
    check_step(config, part="loss")
    monkeypatch.setattr(graph_safety, "optimizer_options", lambda *args: {"foreach": True})
    with pytest.raises(GraphUnsafe, match="host read.*_local_scalar_dense"):
        check_step(config, part="loss")
