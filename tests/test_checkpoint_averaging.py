"""recipe.average_checkpoints (Vaswani et al. 2017 §6.1 in steps): the mean against a hand
computation, the snapshots' steps, the weights the export reads, resume bit for bit, a run
without the option unchanged, and the option's checks."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from focalcal.pipeline import ConfigError, validate_config
from focalcal.training import RunConfig, TranslationTrainer, train_run
from focalcal.training.averaging import CheckpointAverage

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def make_config(**recipe) -> RunConfig:
    """The stand-in in miniature: 160 pairs at max_tokens 400 are 4 steps an epoch, 8 in all."""
    return RunConfig.from_dict(
        {
            "dataset": {"name": "synthetic-translation", "n_train": 160, "n_val": 24, "n_test": 24, "seed": 0},
            "model": {"name": "transformer-small"},
            "loss": {"name": "focal", "gamma": 1},
            "recipe": {
                "epochs": 2,
                "max_tokens": 400,
                "lr_schedule": "inverse_sqrt",
                "warmup_steps": 10,
                "optimizer": {"name": "adam", "lr": 64**-0.5, "betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.0},
                **recipe,
            },
            "seed": 1,
            "device": "cpu",
        }
    )


AVERAGED = {"count": 3, "every_steps": 3}  # snapshots after steps 3 and 6 (epochs 1 and 2) and the last, 8


# ------------------------------------------------------------------------------ the mean


def test_the_mean_is_the_hand_mean_of_the_last_count_snapshots():
    model = torch.nn.BatchNorm1d(2)  # a float weight and an integer step counter
    average = CheckpointAverage(count=3, every_steps=2)
    for step in range(1, 8):
        with torch.no_grad():
            model.weight.copy_(torch.tensor([0.1 * step, 1.0 / step]))
        model.num_batches_tracked.fill_(step)
        average.after_step(step, model)
    average.finish(model)
    assert average.steps == [4, 6, 7]  # every 2nd step, the oldest dropped, and the last step
    mean = average.mean()
    weights = [[0.1 * s, 1.0 / s] for s in (4, 6, 7)]
    by_hand = [(float(np.float32(a)) + float(np.float32(b)) + float(np.float32(c))) / 3 for a, b, c in zip(*weights)]
    assert mean["weight"].tolist() == np.float32(by_hand).tolist()
    assert mean["weight"].dtype == torch.float32
    assert int(mean["num_batches_tracked"]) == 7  # not averaged: the last snapshot's
    average.finish(model)
    assert average.steps == [4, 6, 7]  # the last step is one snapshot, not two


# ------------------------------------------------------------------------------ a run


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def _fit_recording_each_step(trainer) -> dict[int, dict]:
    """Train and export ``trainer``'s run; the model's weights after each step, by step."""
    after_step, seen = trainer.after_step, {}

    def record(step):
        after_step(step)
        seen[step] = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}

    trainer.after_step = record
    trainer.fit()
    trainer.export_logits()
    return seen


@pytest.fixture(scope="module")
def averaged(tmp_path_factory, data_root):
    """An uninterrupted averaged run, and the weights after each of its steps."""
    run_dir = tmp_path_factory.mktemp("averaged")
    trainer = TranslationTrainer(
        make_config(average_checkpoints=AVERAGED), run_dir, data_root=data_root, progress=False
    )
    seen = _fit_recording_each_step(trainer)
    return run_dir, trainer, seen


def test_the_export_reads_the_mean_of_the_weights_at_the_last_snapshot_steps(averaged):
    run_dir, trainer, seen = averaged
    assert sorted(seen) == list(range(1, 9))
    assert json.loads((run_dir / "run.json").read_text())["averaged_steps"] == [3, 6, 8]
    exported = trainer.model.state_dict()  # export_logits loaded the final weights
    for name, weight in exported.items():
        by_hand = (seen[3][name].double() + seen[6][name].double() + seen[8][name].double()) / 3
        assert torch.equal(weight, by_hand.float()), name
    assert (exported["embedding.weight"] - seen[8]["embedding.weight"]).abs().max() > 1e-4  # not the last step's
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    assert [s["step"] for s in checkpoint["snapshots"]] == [3, 6, 8]
    for name, weight in checkpoint["model"].items():  # the checkpoint keeps the last step's own weights
        assert torch.equal(weight, seen[8][name]), name


def test_a_decode_reads_the_mean_from_the_checkpoint(averaged, data_root):
    from focalcal.pipeline.translation import finished_model

    run_dir, trainer, seen = averaged
    (run_dir / "run_config.json").write_text(json.dumps(trainer.config.to_dict()))  # as rule train leaves it
    model, _, _ = finished_model(run_dir, data_root)
    for name, weight in model.state_dict().items():
        by_hand = (seen[3][name].double() + seen[6][name].double() + seen[8][name].double()) / 3
        assert torch.equal(weight, by_hand.float()), name


def test_an_interrupted_averaged_run_resumes_to_the_same_result_bit_for_bit(averaged, tmp_path, data_root):
    full_dir = averaged[0]
    config = make_config(average_checkpoints=AVERAGED)
    TranslationTrainer(config, tmp_path, data_root=data_root, progress=False).fit(stop_after_epoch=1)
    first = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert first["epochs_done"] == 1 and [s["step"] for s in first["snapshots"]] == [3]
    train_run(config, tmp_path, data_root=data_root, progress=False)  # a fresh process resumes it
    full, resumed = (torch.load(d / "checkpoint.pt", weights_only=False) for d in (full_dir, tmp_path))
    assert [s["step"] for s in resumed["snapshots"]] == [3, 6, 8]
    for one, other in zip(full["snapshots"], resumed["snapshots"], strict=True):
        for name, weight in one["model"].items():
            assert torch.equal(weight, other["model"][name]), (one["step"], name)
    one, other = np.load(full_dir / "token_logits.npz"), np.load(tmp_path / "token_logits.npz")
    for key in one.files:
        assert np.array_equal(one[key], other[key]), key


def test_without_the_option_a_run_reports_its_last_weights_and_count_1_is_the_same(tmp_path, data_root):
    plain = train_run(make_config(), tmp_path / "plain", data_root=data_root, progress=False)
    checkpoint = torch.load(tmp_path / "plain" / "checkpoint.pt", weights_only=False)
    assert "snapshots" not in checkpoint and plain.averaging is None
    assert "averaged_steps" not in json.loads((tmp_path / "plain" / "run.json").read_text())
    for name, weight in plain.model.state_dict().items():
        assert torch.equal(weight, checkpoint["model"][name]), name
    one = train_run(
        make_config(average_checkpoints={"count": 1, "every_steps": 100}),
        tmp_path / "one",
        data_root=data_root,
        progress=False,
    )
    assert one.averaging.steps == [8]  # the last step alone: its own weights
    first, second = np.load(tmp_path / "plain" / "token_logits.npz"), np.load(tmp_path / "one" / "token_logits.npz")
    for key in first.files:
        assert np.array_equal(first[key], second[key]), key


# ------------------------------------------------------------------------------ checks


def test_the_option_is_not_part_of_a_run_that_leaves_it_unset():
    assert make_config(average_checkpoints=None).fingerprint() == make_config().fingerprint()
    assert make_config(average_checkpoints=AVERAGED).fingerprint() != make_config().fingerprint()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"count": 0, "every_steps": 3}, (r"recipe\.average_checkpoints must be .*, got \{'count': 0, 'every_steps': 3\} "
                                         r"\(count is 0\)")),
        ({"count": 5, "every_steps": 1.5}, r"recipe\.average_checkpoints must be .* \(every_steps is 1\.5\)"),
        ({"count": 5}, (r"recipe\.average_checkpoints must be \{count: an integer in \[1, inf\), every_steps: an integer "
                       r"in \[1, inf\)\} or None, got \{'count': 5\} \('every_steps' missing\)")),
        (5, r"recipe\.average_checkpoints must be \{count: .*\} or None, got 5"),
    ],
)
def test_a_bad_option_is_refused_naming_the_key(option, message):
    with pytest.raises(ValueError, match=message):
        make_config(average_checkpoints=option)


def test_the_option_refuses_what_it_cannot_average():
    with pytest.raises(ValueError, match=r"max_steps = 9 leaves 3 snapshots every 3 steps, fewer than count = 4"):
        make_config(max_steps=9, average_checkpoints={"count": 4, "every_steps": 3})
    make_config(max_steps=10, average_checkpoints={"count": 4, "every_steps": 3})  # 3, 6, 9 and the last, 10
    with pytest.raises(ValueError, match=r"recipe\.select = 'best_val_accuracy' reports one epoch's"):
        make_config(select="best_val_accuracy", average_checkpoints=AVERAGED)
    with pytest.raises(ValueError, match=r"early stopping"):
        make_config(early_stopping_patience=2, average_checkpoints=AVERAGED)


def test_the_schema_checks_the_option_naming_the_key():
    config = yaml.safe_load((ROOT / "config" / "test.yaml").read_text())
    recipe = next(iter(config["recipes"]))
    config["recipes"][recipe]["average_checkpoints"] = {"count": 5, "every_steps": 1500}
    assert validate_config(config, SCHEMA)["recipes"][recipe]["average_checkpoints"]["count"] == 5
    config["recipes"][recipe]["average_checkpoints"] = {"count": 5, "every_step": 1500}
    with pytest.raises(ConfigError, match=rf"recipes\.{recipe}\.average_checkpoints"):
        validate_config(config, SCHEMA)


def test_the_wmt14_recipe_averages_vaswanis_last_5_checkpoints_in_steps():
    recipe = yaml.safe_load((ROOT / "config" / "studies" / "mukhoti2020.yaml").read_text())["recipes"][
        "wmt14_vaswani_base"
    ]
    assert recipe["average_checkpoints"] == {"count": 5, "every_steps": 1500}  # 10 minutes at 0.4 s a step
    config = make_config(**{k: v for k, v in recipe.items() if k != "epochs"})
    average, model = CheckpointAverage.for_recipe(config.recipe), torch.nn.Linear(1, 1)
    for step in range(1, config.recipe.max_steps + 1):
        average.after_step(step, model)
    average.finish(model)
    assert average.steps == [94_500, 96_000, 97_500, 99_000, 100_000]


def test_a_classification_run_averages_too(tmp_path, data_root):
    from focalcal.training import Trainer

    config = RunConfig.from_dict(
        {
            "dataset": {"name": "synthetic1d", "n_samples": 300},
            "model": {"name": "mlp", "hidden": 8},
            "loss": {"name": "cross_entropy"},
            "seed": 5,
            "device": "cpu",
            "recipe": {
                "epochs": 2,
                "batch_size": 64,
                "optimizer": {"name": "sgd", "lr": 0.1},
                "average_checkpoints": {"count": 2, "every_steps": 2},
            },
        }
    )
    trainer = Trainer(config, tmp_path, data_root=data_root, progress=False)
    seen = _fit_recording_each_step(trainer)
    assert sorted(seen) == list(range(1, 7))  # 180 training samples: 3 batches an epoch
    assert json.loads((tmp_path / "run.json").read_text())["averaged_steps"] == [4, 6]
    model = trainer.model
    model.load_state_dict({k: ((seen[4][k].double() + seen[6][k].double()) / 2).float() for k in seen[6]})
    model.eval()
    with torch.no_grad():
        expected = model(trainer.eval_splits["test"][0]).numpy()
    assert np.array_equal(np.load(tmp_path / "logits.npz")["test_logits"], expected)
