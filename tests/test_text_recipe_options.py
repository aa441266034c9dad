"""The released text code's recipe choices as recipe options: FLSD's γ switch at p < 0.19
(``flsd_threshold``), 20 Newsgroups' whole batches only (``drop_last``), and its summed LS-0.05
(``loss_reduction: sum`` on that row); what each changes, in numbers, and where the mukhoti2020
study file sets them."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from focalcal import losses
from focalcal.pipeline import ConfigError, build_plan, validate_config
from focalcal.training import RunConfig, Trainer
from focalcal.training import trainer as trainer_module
from focalcal.training.config import Recipe
from focalcal.training.factories import build_loss
from focalcal.training.trainer import steps_per_epoch

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
STUDY = ROOT / "config" / "studies" / "mukhoti2020.yaml"
NO_DATA = SimpleNamespace(meta={})  # build_loss reads only the data set's ignore_index


def raw_config(loss=None, **recipe) -> dict:
    return {"dataset": {"name": "synthetic1d", "n_samples": 300}, "model": {"name": "mlp", "hidden": 8},
            "loss": loss or {"name": "cross_entropy"},
            "recipe": {"epochs": 1, "batch_size": 64,
                       "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0}, **recipe},
            "seed": 5, "device": "cpu"}


def loss_of(loss: dict, **recipe):
    return build_loss(RunConfig.from_dict(raw_config(loss, **recipe)), NO_DATA)


# --------------------------------------------------------------------------- flsd_threshold


def test_flsd53_at_0_19_takes_gamma_3_for_p_in_0_19_to_0_2():
    p = torch.tensor([0.185, 0.19, 0.195, 0.199, 0.2, 0.6], dtype=torch.float64)
    vision, text = loss_of({"name": "flsd53"}), loss_of({"name": "flsd53"}, flsd_threshold=0.19)
    assert vision.gamma_for(p).tolist() == [5, 5, 5, 5, 3, 3]
    assert text.gamma_for(p).tolist() == [5, 3, 3, 3, 3, 3]
    # the loss of a sample at p_y = 0.195: -(1-p)^γ log p with γ 3, not 5
    logits = torch.log(torch.tensor([[0.195, 0.805]], dtype=torch.float64))
    target = torch.tensor([0])
    assert float(text(logits, target)) == pytest.approx(-(0.805 ** 3) * math.log(0.195), rel=1e-12)  # 0.85279...
    assert float(vision(logits, target)) == pytest.approx(-(0.805 ** 5) * math.log(0.195), rel=1e-12)  # 0.55263...
    assert float(text(logits, target)) == pytest.approx(0.852787, abs=1e-6)


def test_flsd532_keeps_its_second_threshold():
    text = loss_of({"name": "flsd532"}, flsd_threshold=0.19)
    assert (text.thresholds, text.gammas) == ((0.19, 0.5), (5.0, 3.0, 2.0))
    p = torch.tensor([0.18, 0.195, 0.49, 0.5, 0.9], dtype=torch.float64)
    assert text.gamma_for(p).tolist() == [5, 3, 3, 2, 2]
    own = loss_of({"name": "focal_sample_dependent", "thresholds": [0.3, 0.6], "gammas": [4, 2, 1]}, flsd_threshold=0.19)
    assert own.thresholds == (0.19, 0.6)


def test_other_losses_ignore_the_threshold():
    focal = loss_of({"name": "focal", "gamma": 3}, flsd_threshold=0.19)
    assert type(focal) is losses.loss_class("focal") and focal.gamma == 3


def test_without_the_option_the_loss_is_built_as_before():
    """The option reverted: the text rows would switch at the vision code's 0.2."""
    assert loss_of({"name": "flsd53"}).thresholds == (0.2,)
    assert loss_of({"name": "flsd53"}, flsd_threshold=None).thresholds == (0.2,)


# --------------------------------------------------------------------------- drop_last


def test_20_newsgroups_takes_117_steps_and_leaves_out_122_documents():
    train, batch = 15_098, 128  # mukhoti2020 App. D's training documents; released batch size
    assert steps_per_epoch(train, Recipe(batch_size=batch, drop_last=True)) == 117
    assert train - 117 * batch == 122
    assert steps_per_epoch(train, Recipe(batch_size=batch)) == 118


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def stepped_batches(tmp_path, data_root, **recipe) -> tuple[Trainer, list[torch.Tensor], dict]:
    trainer = Trainer(RunConfig.from_dict(raw_config(**recipe)), tmp_path / f"run{len(list(tmp_path.iterdir()))}",
                      data_root=data_root, progress=False)
    batches = []
    step = trainer.step.step
    trainer.step.step = lambda inputs, targets: (batches.append(targets.clone()), step(inputs, targets))
    row = trainer.train_one_epoch(1)
    return trainer, batches, row


def test_drop_last_steps_on_whole_batches_and_leaves_out_the_rest(tmp_path, data_root):
    trainer, every, row_all = stepped_batches(tmp_path, data_root)
    _, whole, row_whole = stepped_batches(tmp_path, data_root, drop_last=True)
    assert trainer.train_y.shape[0] == 180  # synthetic1d, 300 samples: 180 train
    assert [len(b) for b in every] == [64, 64, 52] and [len(b) for b in whole] == [64, 64]
    assert all(torch.equal(a, b) for a, b in zip(every, whole))  # the same shuffle, the last 52 left out
    # the logged training loss and error are over the 128 samples stepped on
    assert row_whole["train_loss"] != row_all["train_loss"]
    assert 0 < row_whole["train_loss"] < 5 and 0 <= row_whole["train_error"] <= 1


def test_drop_last_refuses_a_batch_larger_than_the_training_set(tmp_path, data_root):
    with pytest.raises(ValueError, match=r"recipe.drop_last: batch_size 512 is more than the 180 training samples"):
        stepped_batches(tmp_path, data_root, drop_last=True, batch_size=512)


def test_steps_per_epoch_is_what_the_trainer_steps(tmp_path, data_root, monkeypatch):
    """Reverting the option in the helper reverts the trainer: one count, one place."""
    monkeypatch.setattr(trainer_module, "steps_per_epoch", lambda n, recipe: (n + recipe.batch_size - 1) // recipe.batch_size)
    _, whole, _ = stepped_batches(tmp_path, data_root, drop_last=True)
    assert len(whole) == 3


# --------------------------------------------------------------------------- summed LS


def test_summed_ls_steps_batch_times_the_mean_step(tmp_path, data_root):
    """20 Newsgroups' LS-0.05 under loss_reduction: sum: one SGD step is the batch size times the mean's."""
    deltas = {}
    for reduction in ("mean", "sum"):
        config = raw_config({"name": "label_smoothing", "smoothing": 0.05}, loss_reduction=reduction, batch_size=512)
        trainer = Trainer(RunConfig.from_dict(config), tmp_path / reduction, data_root=data_root, progress=False)
        before = [p.detach().clone() for p in trainer.model.parameters()]
        trainer.train_one_epoch(1)  # one batch of all 180 samples: one step
        deltas[reduction] = [p.detach() - b for p, b in zip(trainer.model.parameters(), before)]
    for mean, summed in zip(deltas["mean"], deltas["sum"]):
        assert mean.abs().max() > 0
        torch.testing.assert_close(summed, 180 * mean, rtol=2e-4, atol=1e-6 * 180)


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(("key", "value", "message"), [
    ("drop_last", "yes", r"recipe\.drop_last must be True or False, got 'yes'"),
    ("flsd_threshold", 1.0, r"recipe\.flsd_threshold must be a real number in \(0, 1\) or None, got 1\.0"),
    ("flsd_threshold", 0, r"recipe\.flsd_threshold must be .* got 0"),
    ("flsd_threshold", True, r"recipe\.flsd_threshold must be .* got True"),
])
def test_the_trainer_config_refuses_bad_values_naming_the_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        RunConfig.from_dict(raw_config(**{key: value}))


def test_the_defaults_keep_every_existing_runs_fingerprint():
    plain = RunConfig.from_dict(raw_config())
    assert RunConfig.from_dict(raw_config(drop_last=False, flsd_threshold=None)).fingerprint() == plain.fingerprint()
    assert RunConfig.from_dict(raw_config(drop_last=True)).fingerprint() != plain.fingerprint()
    assert RunConfig.from_dict(raw_config(flsd_threshold=0.19)).fingerprint() != plain.fingerprint()


@pytest.mark.parametrize(("key", "value", "message"), [
    ("drop_last", 1, r"recipes\.tiny\.drop_last: 1 is not of type 'boolean'"),
    ("flsd_threshold", 1.5, r"recipes\.tiny\.flsd_threshold: 1\.5 is greater than or equal to the maximum of 1"),
])
def test_the_schema_refuses_bad_values(key, value, message):
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    config["recipes"]["tiny"][key] = value
    with pytest.raises(ConfigError, match=message):
        validate_config(config, SCHEMA)


def test_the_mukhoti2020_text_rows_set_the_released_codes_choices():
    plan = build_plan(validate_config(yaml.safe_load(STUDY.read_text()), SCHEMA))
    seen = set()
    for run in plan.runs.values():
        recipe = plan.run_identity(run)["recipe"]
        dataset = run.path.split("/")[0]
        choices = (recipe.get("flsd_threshold"), recipe.get("drop_last", False), recipe.get("loss_reduction", "mean"))
        if dataset == "20newsgroups":
            assert choices == (0.19, True, "sum" if run.path.split("/")[2] == "ls0.05" else "mean"), run.path
        elif dataset == "sst":
            assert choices == (0.19, False, "mean_of_sums"), run.path
        else:  # the vision rows: the vision code's 0.2, every batch stepped
            assert choices[:2] == (None, False), run.path
        seen.add(dataset)
    assert {"20newsgroups", "sst", "cifar10"} <= seen
    assert sum(run.path.startswith("20newsgroups/") for run in plan.runs.values()) == 11  # the 11 losses, once each
