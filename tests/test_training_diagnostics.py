"""Per-epoch diagnostics for mukhoti2020 Figs 4b-d and 10: per-sample last-layer gradient norms
(against autograd, one sample at a time) and the last layer's mean input-feature norm."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from focalcal import losses, models
from focalcal.training import RunConfig, Trainer
from focalcal.training.diagnostics import LastLayerInputs, last_layer_gradient_norms

PER_SAMPLE_LOSSES = [
    {"name": "cross_entropy"},
    {"name": "focal", "gamma": 3.0},
    {"name": "flsd53"},
    {"name": "brier"},
    {"name": "label_smoothing", "smoothing": 0.05},
]


def run_config(loss=None, **recipe) -> RunConfig:
    """synthetic1d with 180 training samples in one batch: one epoch is one SGD step."""
    return RunConfig.from_dict({
        "dataset": {"name": "synthetic1d", "n_samples": 300},
        "model": {"name": "mlp", "hidden": 8},
        "loss": loss or {"name": "cross_entropy"},
        "recipe": {"epochs": 3, "batch_size": 512, "augmentation": "none",
                   "optimizer": {"name": "sgd", "lr": 0.5, "momentum": 0.0, "weight_decay": 0.0}, **recipe},
        "seed": 3,
        "device": "cpu",
    })


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.mark.parametrize("loss_config", PER_SAMPLE_LOSSES, ids=lambda c: c["name"])
def test_gradient_norms_equal_autograd_one_sample_at_a_time(loss_config):
    torch.manual_seed(0)
    model = models.build("mlp", num_classes=4, in_features=3, hidden=16).eval()
    layer = models.last_layer(model)
    loss_fn = losses.build(loss_config)
    x = torch.randn(12, 3) * 3.0
    y = torch.randint(0, 4, (12,))
    watcher = LastLayerInputs(layer)
    with torch.no_grad(), watcher.keeping() as kept:
        logits = model(x)
    fast = last_layer_gradient_norms(logits, kept.features, y, loss_fn)
    for i in range(len(y)):
        model.zero_grad()
        loss_fn(model(x[i : i + 1]), y[i : i + 1]).backward()
        expected = float(layer.weight.grad.double().norm())
        assert float(fast[i]) == pytest.approx(expected, rel=1e-5, abs=1e-9)


def test_focal_gradient_norm_is_g_times_the_cross_entropy_one():
    """mukhoti2020 Prop 1: ‖∂L_f/∂w‖ = g(p, γ) ‖∂L_c/∂w‖ — here for the whole weight matrix,
    with g from focalcal.theory (an independent formula), in float32 with large logits."""
    from focalcal import theory

    torch.manual_seed(1)
    logits = torch.randn(50, 10) * 8.0
    features = torch.randn(50, 20).abs()
    labels = torch.randint(0, 10, (50,))
    ce = last_layer_gradient_norms(logits, features, labels, losses.build({"name": "cross_entropy"}))
    focal = last_layer_gradient_norms(logits, features, labels, losses.build({"name": "focal", "gamma": 3.0}))
    p = torch.softmax(logits.double(), 1).gather(1, labels[:, None]).squeeze(1).numpy()
    g = theory.gradient_ratio(p, 3.0)
    keep = p < 0.999  # where p → 1 both gradients vanish and the ratio is 0/0 in float32
    np.testing.assert_allclose(focal.numpy()[keep], (g * ce.numpy())[keep], rtol=2e-4, atol=1e-7)
    assert np.isfinite(focal.numpy()).all()


@pytest.mark.parametrize("loss_config", [{"name": "mmce"}, {"name": "cross_entropy"}], ids=["mmce", "4d-logits"])
def test_gradient_norms_refuse_what_has_no_per_sample_gradient(loss_config):
    loss_fn = losses.build(loss_config)
    logits, features = torch.randn(6, 3), torch.randn(6, 5)
    if loss_config["name"] == "cross_entropy":
        with pytest.raises(ValueError, match=r"\(N, K\) logits"):
            last_layer_gradient_norms(torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4), torch.zeros(2, 4, 4, dtype=torch.long), loss_fn)
    else:
        with pytest.raises(ValueError, match="MMCELoss couples the samples"):
            last_layer_gradient_norms(logits, features, torch.zeros(6, dtype=torch.long), loss_fn)


def test_a_run_records_gradient_norms_at_the_asked_epochs_and_resumes_them(tmp_path, data_root):
    config = run_config({"name": "focal", "gamma": 2.0}, gradient_norm_epochs=[1, 3])
    trainer = Trainer(config, tmp_path, data_root=data_root, progress=False)
    n = trainer.train_y.shape[0]
    trainer.fit(stop_after_epoch=1)
    resumed = Trainer(config, tmp_path, data_root=data_root, progress=False)
    resumed.fit()
    table = pd.read_csv(Path(tmp_path) / "train_gradient_norms.csv")
    assert table.groupby("epoch").size().to_dict() == {1: n, 3: n}
    assert (table["gradient_norm"] >= 0).all() and np.isfinite(table["gradient_norm"]).all()
    # epoch 3's norms are those of the final model, recomputed independently
    with resumed.last_layer_inputs.keeping() as kept:
        logits = resumed.predict(resumed.normalised_train_x())
    expected = last_layer_gradient_norms(logits, kept.features, resumed.train_y, resumed.loss_fn).numpy()
    np.testing.assert_allclose(table[table["epoch"] == 3]["gradient_norm"].to_numpy(), expected, rtol=1e-6)


def test_a_set_level_loss_run_skips_gradient_norms(tmp_path, data_root):
    trainer = Trainer(run_config({"name": "mmce"}, gradient_norm_epochs=[1]), tmp_path, data_root=data_root, progress=False)
    trainer.fit()
    assert not (Path(tmp_path) / "train_gradient_norms.csv").exists()
    assert (Path(tmp_path) / "history.csv").exists()


def test_feature_norm_is_the_mean_norm_of_the_features_the_step_saw(tmp_path, data_root):
    """One batch per epoch, no augmentation: the logged norm is the mean ‖h(x)‖ over the
    training set under the weights before that epoch's step."""
    trainer = Trainer(run_config(), tmp_path, data_root=data_root, progress=False)
    layer = models.last_layer(trainer.model)
    expected = []
    for epoch in (1, 2):
        seen = []
        handle = layer.register_forward_hook(lambda m, i, o, seen=seen: seen.append(i[0].detach().double().norm(dim=1).mean()))
        with torch.no_grad():
            trainer.model.train()
            trainer.model(trainer.train_x)
        handle.remove()
        expected.append(float(seen[0]))
        row = trainer.train_one_epoch(epoch)
        assert row["train_feature_norm"] == pytest.approx(expected[-1], rel=1e-6)
    assert expected[0] != pytest.approx(expected[1], rel=1e-9)  # the step changed the features


def test_history_has_the_feature_norm_column(tmp_path, data_root):
    trainer = Trainer(run_config(epochs=2), tmp_path, data_root=data_root, progress=False)
    trainer.fit()
    history = pd.read_csv(Path(tmp_path) / "history.csv")
    assert np.isfinite(history["train_feature_norm"]).all() and (history["train_feature_norm"] > 0).all()


def test_gradient_norm_epochs_outside_the_run_are_refused():
    with pytest.raises(ValueError, match=r"recipe\.gradient_norm_epochs \[4\] outside 1\.\.3"):
        run_config(gradient_norm_epochs=[4])
