"""The trainer: resume gives bit-identical logits, diagnostics, hooks, divergence, config errors."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from focalcal.training import RunConfig, Trainer, TrainingDiverged, export_run_logits, train_run
from focalcal.training.factories import build_optimizer


def make_config(**overrides):
    raw = {
        "dataset": {"name": "synthetic1d", "n_samples": 1200},
        "model": {"name": "mlp", "hidden": 16},
        "loss": {"name": "focal", "gamma": 2},
        "recipe": {
            "epochs": 4,
            "batch_size": 64,
            "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
            "lr_milestones": [2, 3],
            "reliability_epochs": [1, 4],
        },
        "seed": 3,
        "device": "cpu",
    }
    for key, value in overrides.items():
        raw[key] = value
    return RunConfig.from_dict(raw)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_root):
    run_dir = tmp_path_factory.mktemp("full")
    train_run(make_config(), run_dir, data_root=data_root, progress=False)
    return run_dir


def test_killed_run_resumes_to_identical_logits(uninterrupted, tmp_path, data_root):
    config = make_config()
    Trainer(config, tmp_path, data_root=data_root, progress=False).fit(stop_after_epoch=2)
    assert len(pd.read_csv(tmp_path / "history.csv")) == 2
    assert not (tmp_path / "logits.npz").exists()
    # a fresh process would build a new Trainer from the same config and directory
    train_run(config, tmp_path, data_root=data_root, progress=False)
    full, resumed = np.load(uninterrupted / "logits.npz"), np.load(tmp_path / "logits.npz")
    for key in ("val_logits", "test_logits", "val_labels", "test_labels"):
        assert np.array_equal(full[key], resumed[key]), key
    columns = ["train_loss", "val_nll", "test_ece", "weight_norm", "lr"]
    pd.testing.assert_frame_equal(
        pd.read_csv(uninterrupted / "history.csv")[columns], pd.read_csv(tmp_path / "history.csv")[columns]
    )


def test_outputs_and_history(uninterrupted):
    logits = np.load(uninterrupted / "logits.npz")
    assert logits["val_logits"].dtype == np.float32 and logits["test_labels"].dtype == np.int64
    assert logits["val_logits"].shape == (len(logits["val_labels"]), 3)
    # synthetic data carries its true posterior, so KL(η‖q) can be measured downstream
    assert np.allclose(logits["test_posterior"].sum(1), 1.0)
    # 1-D inputs travel with the logits, so scores-vs-x figures need not reload the data
    assert logits["test_inputs"].shape == (len(logits["test_labels"]), 1)
    history = pd.read_csv(uninterrupted / "history.csv")
    assert list(history["epoch"]) == [1, 2, 3, 4]
    # multi-step schedule: lr 0.1, drops by 10 after epochs 2 and 3
    assert np.allclose(history["lr"], [0.1, 0.1, 0.01, 0.001])
    for column in ("train_nll", "val_ece", "test_nll_correct", "test_nll_incorrect", "test_entropy_incorrect",
                   "weight_norm", "wall_time_s"):
        assert history[column].notna().all(), column
    assert (history["wall_time_s"].diff().dropna() > 0).all()
    reliability = pd.read_csv(uninterrupted / "train_reliability.csv")
    assert sorted(reliability["epoch"].unique()) == [1, 4]
    assert reliability.groupby("epoch")["count"].sum().eq(reliability.groupby("epoch")["count"].sum().iloc[0]).all()
    info = json.loads((uninterrupted / "run.json").read_text())
    assert info["epochs_done"] == 4 and info["split_hash"] and info["versions"]["torch"] == torch.__version__
    assert info["config"] == make_config().to_dict()


def test_the_reliability_table_is_rewritten_only_when_it_gains_an_epoch(tmp_path, data_root, monkeypatch):
    """history.csv every epoch; train_reliability.csv at its epochs (1, 4) only, and again when deleted."""
    from focalcal.training import trainer as trainer_module

    written = []
    real_write = trainer_module.atomic_write_text
    monkeypatch.setattr(trainer_module, "atomic_write_text",
                        lambda text, path: (written.append(path.name), real_write(text, path))[1])
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    trainer.fit()
    assert written.count("history.csv") == 4 and written.count("train_reliability.csv") == 2
    assert sorted(pd.read_csv(tmp_path / "train_reliability.csv")["epoch"].unique()) == [1, 4]
    (tmp_path / "train_reliability.csv").unlink()
    trainer.write_records()
    assert written.count("train_reliability.csv") == 3 and (tmp_path / "train_reliability.csv").exists()


def test_history_nll_matches_logits(uninterrupted):
    """The last epoch's test NLL in history.csv is the NLL of the dumped test logits."""
    logits = np.load(uninterrupted / "logits.npz")
    nll = torch.nn.functional.cross_entropy(torch.from_numpy(logits["test_logits"]).double(),
                                            torch.from_numpy(logits["test_labels"])).item()
    assert pd.read_csv(uninterrupted / "history.csv")["test_nll"].iloc[-1] == pytest.approx(nll, rel=1e-6)


def test_export_logits_without_training_is_identical(uninterrupted, data_root):
    before = dict(np.load(uninterrupted / "logits.npz"))
    (uninterrupted / "logits.npz").unlink()
    export_run_logits(make_config(), uninterrupted, data_root=data_root)
    after = np.load(uninterrupted / "logits.npz")
    assert np.array_equal(before["test_logits"], after["test_logits"])
    assert len(pd.read_csv(uninterrupted / "history.csv")) == 4  # nothing retrained


def test_resume_with_different_settings_is_refused(uninterrupted, data_root):
    changed = make_config(loss={"name": "focal", "gamma": 3})
    with pytest.raises(ValueError, match="different settings"):
        Trainer(changed, uninterrupted, data_root=data_root, progress=False).fit()


def test_nan_loss_names_epoch_and_batch_and_keeps_checkpoint(tmp_path, data_root):
    config = make_config()
    config.recipe.epochs = 3
    trainer = Trainer(config, tmp_path, data_root=data_root, progress=False)
    trainer.fit(stop_after_epoch=1)
    saved = (tmp_path / "checkpoint.pt").read_bytes()
    real_loss = trainer.loss_fn
    calls = {"n": 0}

    def poisoned(logits, targets):
        calls["n"] += 1
        value = real_loss(logits, targets)
        return value * float("nan") if calls["n"] == 5 else value

    trainer.loss_fn = poisoned
    with pytest.raises(TrainingDiverged, match=r"epoch 2, batch 5/"):
        trainer.fit()
    assert (tmp_path / "checkpoint.pt").read_bytes() == saved
    assert len(pd.read_csv(tmp_path / "history.csv")) == 1


def test_stateful_losses_get_their_hooks(tmp_path, data_root):
    scheduled = make_config(loss={"name": "focal_scheduled", "milestones": [0.25, 0.75], "gammas": [5, 3, 1]})
    trainer = Trainer(scheduled, tmp_path / "sc", data_root=data_root, progress=False)
    trainer.fit(stop_after_epoch=2)
    assert trainer.loss_fn.gamma == 3  # epochs (1-based) 1 → γ 5, 2–3 → γ 3, 4 → γ 1

    adaptive = make_config(loss={"name": "adafocal"})
    trainer = Trainer(adaptive, tmp_path / "ada", data_root=data_root, progress=False)
    initial = trainer.loss_fn.state_dict()["gammas"].clone()
    trainer.fit(stop_after_epoch=2)
    updated = trainer.loss_fn.state_dict()["gammas"].clone()
    assert not torch.equal(initial, updated)  # γ per bin moved with validation calibration
    resumed = Trainer(adaptive, tmp_path / "ada", data_root=data_root, progress=False)
    resumed.resume_if_possible()
    assert torch.equal(resumed.loss_fn.state_dict()["gammas"], updated)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"recipe": {"optimizer": {"name": "rmsprop"}}}, r"recipe\.optimizer\.name must be one of 'sgd', 'adam', 'adagrad', got 'rmsprop'"),
        ({"recipe": {"epochs": 0}}, r"recipe\.epochs must be an integer in \[1, 10000\], got 0"),
        ({"recipe": {"lr_milestones": [5, 2]}}, r"recipe\.lr_milestones must be a strictly increasing sequence of integers in \[1, inf\), got \[5, 2\]"),
        ({"recipe": {"epoch": 3}}, r"unknown key\(s\) \['epoch'\] in recipe"),
        ({"model": "resnet20"}, "'model' must be a mapping with a 'name'"),
        ({"recipe": {"augmentation": "mixup"}}, "recipe.augmentation"),
    ],
)
def test_bad_config_names_the_key(change, message):
    with pytest.raises(ValueError, match=message):
        make_config(**change)


def test_cli_train_and_export(tmp_path, data_root):
    config = make_config().to_dict()
    config["recipe"].update(epochs=1, reliability_epochs=[1], lr_milestones=[])
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "focalcal", "train", "--config", str(path), "--run-dir", str(run_dir),
               "--data-root", str(data_root), "--progress", "lines"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "epoch 1/1" in result.stderr and (run_dir / "logits.npz").exists()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**config, "loss": {"gamma": 2}}))
    result = subprocess.run(command[:5] + [str(bad)] + command[6:], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2 and "'loss' must be a mapping with a 'name'" in result.stderr


def test_early_stopping_keeps_the_best_epoch(tmp_path, data_root, monkeypatch):
    config = make_config()
    config.recipe.epochs, config.recipe.early_stopping_patience = 10, 2
    config.recipe.reliability_epochs = []
    scripted_val_loss = iter([1.0, 0.5, 0.7, 0.6, 0.9, 0.1])
    real_evaluate = Trainer.evaluate_epoch

    def evaluate(self, epoch):
        row = real_evaluate(self, epoch)
        row["val_loss"] = next(scripted_val_loss)
        return row

    monkeypatch.setattr(Trainer, "evaluate_epoch", evaluate)
    trainer = train_run(config, tmp_path / "early", data_root=data_root, progress=False)
    # best at epoch 2; epochs 3 and 4 do not improve → stop after epoch 4
    assert trainer.epochs_done == 4 and trainer.stopped_early and trainer.best["epoch"] == 2
    info = json.loads((tmp_path / "early" / "run.json").read_text())
    assert info["best_epoch"] == 2 and info["stopped_early"]
    # the dumped logits are those of epoch 2's weights
    reference = Trainer(config, tmp_path / "two", data_root=data_root, progress=False)
    scripted_val_loss = iter([1.0, 0.5])
    reference.fit(stop_after_epoch=2)
    reference.best = {"epoch": 0, "val_loss": float("inf"), "model": None}
    reference.export_logits()
    early, two = np.load(tmp_path / "early" / "logits.npz"), np.load(tmp_path / "two" / "logits.npz")
    assert np.array_equal(early["test_logits"], two["test_logits"])
    # a finished early-stopped run re-dumps without training
    export_run_logits(config, tmp_path / "early", data_root=data_root)


def _tiny_segmentation(root, download, *, n_samples=24):
    from focalcal.data import RawData

    rng = np.random.default_rng(0)
    masks = np.zeros((n_samples, 16, 16), dtype=np.int64)
    masks[:, 4:9, 4:9] = 1
    masks[:, 10:14, 2:6] = 2
    masks[:, 0, :] = 255  # unlabelled row, like CamVid's void
    images = rng.normal(0.3, 0.1, size=(n_samples, 3, 16, 16)).astype(np.float32)
    images += (masks[:, None] == 1) * 0.5 + (masks[:, None] == 2) * np.array([0.0, 0.4, 0.0])[None, :, None, None]
    return RawData(pools={"all": (images.astype(np.float32), masks)})


def test_segmentation_run_trains_on_pixels(tmp_path, data_root, fresh_catalog):
    from focalcal import data

    data.register("tiny_segmentation_test", _tiny_segmentation, task="segmentation", num_classes=3,
                  val_size=0.25, test_size=0.25, augmentation={})
    config = RunConfig.from_dict({
        "dataset": {"name": "tiny_segmentation_test"},
        "model": {"name": "unet_small", "base_channels": 4, "depth": 2},
        "loss": {"name": "dual_focal", "ignore_index": 255},
        "recipe": {"epochs": 2, "batch_size": 4, "optimizer": {"name": "adam", "lr": 1e-3, "weight_decay": 0},
                   "lr_step_every": 1, "lr_decay": 0.3, "reliability_epochs": [2]},
        "device": "cpu",
    })
    train_run(config, tmp_path, data_root=data_root, progress=False)
    history = pd.read_csv(tmp_path / "history.csv")
    assert np.allclose(history["lr"], [1e-3, 3e-4])
    assert history[["train_nll", "val_nll", "test_ece", "weight_norm"]].notna().all().all()
    logits = np.load(tmp_path / "logits.npz")
    assert logits["test_logits"].shape == (6, 3, 16, 16) and logits["test_labels"].shape == (6, 16, 16)
    # pixel-level diagnostics skip the unlabelled row: 6 images × 15 labelled rows × 16 columns
    reliability = pd.read_csv(tmp_path / "train_reliability.csv")
    assert reliability["count"].sum() == 12 * 15 * 16


def test_targets_are_checked_once_at_load_and_the_loss_trusts_them(tmp_path, data_root, monkeypatch):
    trainer = Trainer(make_config(), tmp_path / "ok", data_root=data_root, progress=False)
    assert trainer.loss_fn.validate_inputs is False  # per-batch checks skipped: checked here instead
    from focalcal.training import trainer as trainer_module

    real_load = trainer_module.load_dataset

    def bad_labels(config, root):
        dataset = real_load(config, root)
        dataset.val.y[3] = dataset.num_classes  # one label outside 0..K-1
        return dataset

    monkeypatch.setattr(trainer_module, "load_dataset", bad_labels)
    with pytest.raises(ValueError, match=r"'synthetic1d', val split: target out of range: found 3, expected 0..2"):
        Trainer(make_config(), tmp_path / "bad", data_root=data_root, progress=False)


def test_non_finite_logits_name_epoch_and_batch(tmp_path, data_root):
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    real_forward, calls = trainer.forward, {"n": 0}

    def poisoned(inputs):
        calls["n"] += 1
        logits = real_forward(inputs)
        return logits * float("inf") if calls["n"] == 3 else logits

    trainer.forward = poisoned
    with pytest.raises(TrainingDiverged, match=r"logits became non-finite at epoch 1, batch 3/"):
        trainer.fit()


def test_select_best_val_accuracy_reports_the_first_epoch_of_lowest_val_error_and_resumes_it(tmp_path, data_root,
                                                                                               monkeypatch):
    """mukhoti2020 App. D: "used the models with the best validation accuracy" — every epoch trains,
    the logits come from the best epoch's weights (ties: the first), and a resumed run keeps them."""
    config = make_config()
    config.recipe.epochs, config.recipe.select = 5, "best_val_accuracy"
    config.recipe.reliability_epochs = []
    scripted_val_error = iter([0.5, 0.2, 0.3, 0.2, 0.4])
    real_evaluate = Trainer.evaluate_epoch

    def evaluate(self, epoch):
        row = real_evaluate(self, epoch)
        row["val_error"] = next(scripted_val_error)
        return row

    monkeypatch.setattr(Trainer, "evaluate_epoch", evaluate)
    partial = Trainer(config, tmp_path / "best", data_root=data_root, progress=False)
    partial.fit(stop_after_epoch=3)
    trainer = train_run(config, tmp_path / "best", data_root=data_root, progress=False)  # resumes after epoch 3
    assert trainer.epochs_done == 5 and not trainer.stopped_early and trainer.best["epoch"] == 2
    info = json.loads((tmp_path / "best" / "run.json").read_text())
    assert info["best_epoch"] == 2 and info["config"]["recipe"]["select"] == "best_val_accuracy"
    reference = Trainer(config, tmp_path / "two", data_root=data_root, progress=False)
    scripted_val_error = iter([0.5, 0.2])
    reference.fit(stop_after_epoch=2)
    reference.best["model"] = None  # report epoch 2's own final weights
    reference.export_logits()
    best, two = np.load(tmp_path / "best" / "logits.npz"), np.load(tmp_path / "two" / "logits.npz")
    assert np.array_equal(best["test_logits"], two["test_logits"])


def test_select_and_adagrad_are_checked_and_old_fingerprints_hold():
    raw = make_config().to_dict()
    fingerprint = RunConfig.from_dict(raw).fingerprint()
    raw["recipe"]["select"] = "final"  # the default: a run checkpointed before `select` existed still resumes
    assert RunConfig.from_dict(raw).fingerprint() == fingerprint
    with pytest.raises(ValueError, match=r"recipe\.select must be one of 'final', 'best_val_accuracy', got 'best'"):
        RunConfig.from_dict({**raw, "recipe": {**raw["recipe"], "select": "best"}})
    with pytest.raises(ValueError, match="conflicts with early stopping"):
        RunConfig.from_dict({**raw, "recipe": {**raw["recipe"], "select": "best_val_accuracy",
                                                "early_stopping_patience": 3}})
    adagrad = {**raw, "recipe": {**raw["recipe"], "optimizer": {"name": "adagrad", "lr": 0.05, "weight_decay": 1e-4}}}
    optimizer = build_optimizer(torch.nn.Linear(2, 2), RunConfig.from_dict(adagrad))
    assert isinstance(optimizer, torch.optim.Adagrad)
    assert optimizer.defaults["lr"] == 0.05 and optimizer.defaults["weight_decay"] == 1e-4
