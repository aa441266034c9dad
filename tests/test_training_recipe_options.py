"""Recipe options loss_reduction (mean | sum) and grad_clip_norm: the step they give, their
schema and library checks, and their record in run_config.json (old records still load)."""

import copy
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from focalcal import losses
from focalcal.pipeline import ConfigError, build_plan, validate_config
from focalcal.training import RunConfig, Trainer
from focalcal.training.checkpoint import load_checkpoint
from focalcal.training.config import LATER_OPTIMIZER_DEFAULTS, LATER_RECIPE_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
STUDIES = ROOT / "config" / "studies"
N_SAMPLES = 300  # synthetic1d: 180 training samples, one batch


def raw_config(loss=None, **recipe) -> dict:
    """A one-batch-per-epoch run: plain SGD (no momentum, no weight decay), so one epoch is one step."""
    return {
        "dataset": {"name": "synthetic1d", "n_samples": N_SAMPLES},
        "model": {"name": "mlp", "hidden": 8},
        "loss": loss or {"name": "cross_entropy"},
        "recipe": {"epochs": 1, "batch_size": 512,
                   "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.0, "weight_decay": 0.0}, **recipe},
        "seed": 5,
        "device": "cpu",
    }


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def one_step(tmp_path, data_root, loss=None, **recipe):
    """(trainer, parameters before, parameter change) of one epoch = one SGD step."""
    trainer = Trainer(RunConfig.from_dict(raw_config(loss, **recipe)), tmp_path / f"run{len(list(tmp_path.iterdir()))}",
                      data_root=data_root, progress=False)
    assert trainer.train_y.shape[0] <= trainer.config.recipe.batch_size  # one batch
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train_one_epoch(1)
    return trainer, before, [p.detach() - b for p, b in zip(trainer.model.parameters(), before)]


def total_norm(tensors) -> float:
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t.double()) for t in tensors])))


# --------------------------------------------------------------------------- loss_reduction


@pytest.mark.parametrize("loss", [{"name": "cross_entropy"}, {"name": "mmce", "lam": 2.0}], ids=["ce", "mmce"])
def test_sum_steps_batch_size_times_the_mean_step(tmp_path, data_root, loss):
    mean, mean_before, mean_delta = one_step(tmp_path, data_root, loss)
    summed, sum_before, sum_delta = one_step(tmp_path, data_root, loss, loss_reduction="sum")
    n = summed.train_y.shape[0]
    assert all(torch.equal(a, b) for a, b in zip(mean_before, sum_before))  # same initialisation
    if loss["name"] == "mmce":  # the batch-level term is in play, not just the cross-entropy
        start = copy.deepcopy(mean.model)
        with torch.no_grad():
            for parameter, initial in zip(start.parameters(), mean_before):
                parameter.copy_(initial)
            regulariser = mean.loss_fn.regulariser(start(mean.normalised_train_x()), mean.train_y.unsqueeze(1))
        assert float(regulariser) > 1e-3
    for d_mean, d_sum in zip(mean_delta, sum_delta):
        assert d_mean.abs().max() > 0
        torch.testing.assert_close(d_sum, n * d_mean, rtol=2e-4, atol=1e-6 * n)


def test_logged_train_loss_is_a_per_sample_mean_under_sum(tmp_path, data_root):
    rows = {}
    for reduction in ("mean", "sum"):
        trainer = Trainer(RunConfig.from_dict(raw_config(loss_reduction=reduction)), tmp_path / reduction,
                          data_root=data_root, progress=False)
        rows[reduction] = trainer.train_one_epoch(1)
    # one batch: the loss is evaluated before the step, from the same weights
    assert rows["sum"]["train_loss"] == pytest.approx(rows["mean"]["train_loss"], rel=1e-6)
    assert rows["sum"]["train_loss"] < 5  # a per-sample cross-entropy, not 180 of them


LOSS_FAMILIES = {
    "cross_entropy": ({"name": "cross_entropy"}, False),
    "focal": ({"name": "focal", "gamma": 3}, False),
    "flsd53": ({"name": "flsd53"}, False),
    "label_smoothing": ({"name": "label_smoothing", "smoothing": 0.05}, False),
    "brier": ({"name": "brier"}, False),
    "mmce": ({"name": "mmce", "lam": 2.0}, False),
    "mmce_ignore": ({"name": "mmce", "lam": 2.0, "ignore_index": 255}, False),
    "dual_focal_pixels": ({"name": "dual_focal", "ignore_index": 255}, True),
    "weighted_ce_pixels": ({"name": "weighted_cross_entropy", "weights": [1.0, 2.0, 0.5], "ignore_index": 255}, True),
    "focal_pixels": ({"name": "focal", "gamma": 2}, True),
}


@pytest.mark.parametrize("family", list(LOSS_FAMILIES))
def test_the_summed_objective_is_the_losss_own_sum(family):
    """Mean × labelled count is the library's reduction='sum' (value and gradient), ignored
    samples/pixels counting 0 — what the trainer descends under ``loss_reduction: sum``."""
    spec, pixels = LOSS_FAMILIES[family]
    generator = torch.Generator().manual_seed(0)
    shape = (4, 3, 5, 6) if pixels else (24, 3)
    logits = torch.randn(shape, generator=generator, dtype=torch.float64) * 2
    targets = torch.randint(0, 3, (shape[0], *shape[2:]), generator=generator)
    if spec.get("ignore_index") is not None:
        targets[0] = 255  # a whole unlabelled sample (pixels: image row block)
        targets.view(-1)[5::7] = 255
    mean_loss = losses.build(spec)
    stand_in = SimpleNamespace(config=RunConfig.from_dict(raw_config(loss_reduction="sum")), loss_fn=mean_loss)
    summed_loss = losses.build({**spec, "reduction": "sum"})
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    objective = Trainer.objective(stand_in, mean_loss(a, targets), targets)
    reference = summed_loss(b, targets)
    objective.backward()
    reference.backward()
    torch.testing.assert_close(objective, reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-12)


def test_mmce_sum_is_n_times_ce_mean_plus_lambda_mmce():
    """The released code's MMCE under sum: N·(mean CE + λ·MMCE), the regulariser once per sample."""
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(32, 4, generator=generator, dtype=torch.float64)
    targets = torch.randint(0, 4, (32,), generator=generator)
    loss = losses.build({"name": "mmce", "lam": 2.0, "reduction": "sum"})
    regulariser = loss.regulariser(logits, targets.unsqueeze(1))
    assert float(regulariser) > 0
    expected = 32 * (torch.nn.functional.cross_entropy(logits, targets) + 2.0 * regulariser)
    torch.testing.assert_close(loss(logits, targets), expected, rtol=1e-12, atol=1e-12)


def test_sum_refuses_a_set_level_loss(tmp_path, data_root):
    with pytest.raises(ValueError, match=r"loss_reduction = 'sum'.*'generalized_dice' is a set-level loss"):
        Trainer(RunConfig.from_dict(raw_config({"name": "generalized_dice"}, loss_reduction="sum")), tmp_path,
                data_root=data_root, progress=False)


# --------------------------------------------------------------------------- grad_clip_norm


def test_clipping_bounds_the_steps_gradient_norm_and_leaves_small_ones_alone(tmp_path, data_root):
    free, _, free_delta = one_step(tmp_path, data_root)
    lr = free.config.recipe.optimizer.lr
    gradient_norm = total_norm(free_delta) / lr
    assert gradient_norm > 0.05

    clip = gradient_norm / 4
    _, _, clipped_delta = one_step(tmp_path, data_root, grad_clip_norm=clip)
    assert total_norm(clipped_delta) / lr <= clip * (1 + 1e-4)
    assert total_norm(clipped_delta) / lr == pytest.approx(clip, rel=1e-3)
    for d_free, d_clipped in zip(free_delta, clipped_delta):  # the same direction, scaled down
        torch.testing.assert_close(d_clipped, d_free * (clip / gradient_norm), rtol=2e-3, atol=1e-6)

    _, _, loose_delta = one_step(tmp_path, data_root, grad_clip_norm=gradient_norm * 10)
    assert all(torch.equal(a, b) for a, b in zip(loose_delta, free_delta))  # below the bound: untouched


def test_clipping_applies_to_the_summed_loss(tmp_path, data_root):
    """Clipping acts on the gradient actually descended: under sum it is N times larger."""
    trainer, _, delta = one_step(tmp_path, data_root, loss_reduction="sum", grad_clip_norm=2)
    assert total_norm(delta) / trainer.config.recipe.optimizer.lr == pytest.approx(2.0, rel=1e-3)


# --------------------------------------------------------------------------- checks


@pytest.fixture
def ci_config() -> dict:
    return yaml.safe_load((ROOT / "config" / "test.yaml").read_text())


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("loss_reduction", "median",
         r"recipes\.tiny\.loss_reduction: 'median' is not allowed; allowed values: mean, sum"),
        ("grad_clip_norm", 0, r"recipes\.tiny\.grad_clip_norm: 0 is less than or equal to the minimum of 0"),
        ("grad_clip_norm", -1, r"recipes\.tiny\.grad_clip_norm: -1 is less than or equal to the minimum of 0"),
        ("grad_clip_norm", "2", r"recipes\.tiny\.grad_clip_norm: '2' is not of type 'number', 'null'"),
    ],
)
def test_the_schema_refuses_bad_values_naming_the_key(ci_config, key, value, message):
    ci_config["recipes"]["tiny"][key] = value
    with pytest.raises(ConfigError, match=message):
        validate_config(ci_config, SCHEMA)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("loss_reduction", "median", r"recipe\.loss_reduction must be one of 'mean', 'sum', 'mean_of_sums', got 'median'"),
        ("grad_clip_norm", 0, r"recipe\.grad_clip_norm must be a real number in \(0, inf\) or None, got 0"),
        ("grad_clip_norm", -1.0, r"recipe\.grad_clip_norm must be .* got -1\.0"),
        ("grad_clip_norm", "2", r"recipe\.grad_clip_norm must be .* got '2'"),
        ("grad_clip_norm", True, r"recipe\.grad_clip_norm must be .* got True"),
    ],
)
def test_the_trainer_config_refuses_bad_values_naming_the_key(key, value, message):
    with pytest.raises(ValueError, match=message):
        RunConfig.from_dict(raw_config(**{key: value}))


def test_the_schema_accepts_the_options_and_fills_no_default(ci_config):
    ci_config["recipes"]["tiny"].update(loss_reduction="sum", grad_clip_norm=2)
    config = validate_config(ci_config, SCHEMA)
    assert config["recipes"]["tiny"]["grad_clip_norm"] == 2
    # no default is filled in: a recipe that does not set them keeps the identity its runs had
    assert not {"loss_reduction", "grad_clip_norm"} & set(config["recipes"]["tiny_lr100"])


# --------------------------------------------------------------------------- records


def test_run_config_json_records_both_keys(tmp_path, data_root):
    from focalcal.pipeline import jobs

    identity = {key: value for key, value in raw_config(loss_reduction="sum", grad_clip_norm=2.5).items()
                if key != "device"}
    threads = torch.get_num_threads()
    try:
        jobs.train(identity, {"device": "cpu", "compile": "none"}, tmp_path, data_root, threads=threads)
    finally:
        torch.set_num_threads(threads)
    recorded = json.loads((tmp_path / "run_config.json").read_text())
    assert recorded["recipe"]["loss_reduction"] == "sum" and recorded["recipe"]["grad_clip_norm"] == 2.5
    config = RunConfig.from_dict(recorded)
    assert (config.recipe.loss_reduction, config.recipe.grad_clip_norm) == ("sum", 2.5)
    assert config.to_dict()["recipe"]["grad_clip_norm"] == 2.5  # run.json's config too


def test_an_old_run_config_loads_with_the_defaults_and_keeps_its_fingerprint():
    old = raw_config()  # written before the keys existed: neither is present
    config = RunConfig.from_dict(copy.deepcopy(old))
    assert (config.recipe.loss_reduction, config.recipe.grad_clip_norm) == ("mean", None)
    # the fingerprint as it was computed before the keys existed: its checkpoint still resumes
    settings = config.to_dict()
    for key in ("device", "compile"):
        settings.pop(key)
    for key in LATER_RECIPE_DEFAULTS:  # keys added later
        settings["recipe"].pop(key)
    for key in LATER_OPTIMIZER_DEFAULTS:
        settings["recipe"]["optimizer"].pop(key)
    before = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    assert config.fingerprint() == before
    # setting either key is a different run
    assert RunConfig.from_dict(raw_config(loss_reduction="sum")).fingerprint() != before
    assert RunConfig.from_dict(raw_config(grad_clip_norm=2)).fingerprint() != before
    # and stating the defaults explicitly is the same run
    assert RunConfig.from_dict(raw_config(loss_reduction="mean", grad_clip_norm=None)).fingerprint() == before


def test_an_old_checkpoint_resumes(tmp_path, data_root):
    """A checkpoint whose config predates the keys (same fingerprint) resumes under the defaults."""
    config = RunConfig.from_dict(raw_config(epochs=2))
    trainer = Trainer(config, tmp_path, data_root=data_root, progress=False)
    trainer.fit(stop_after_epoch=1)
    state = load_checkpoint(tmp_path / "checkpoint.pt", torch.device("cpu"))
    old = copy.deepcopy(config.to_dict())
    for key in ("loss_reduction", "grad_clip_norm", "gradient_norm_epochs", "select"):
        old["recipe"].pop(key)
    resumed = Trainer(RunConfig.from_dict(old), tmp_path, data_root=data_root, progress=False)
    assert resumed.resume_if_possible() and resumed.epochs_done == 1
    assert state["fingerprint"] == resumed.config.fingerprint()


@pytest.mark.parametrize("study", ["mukhoti2020", "komisarenko2024"])
def test_the_released_code_studies_sum_and_clip_at_2(study):
    plan = build_plan(validate_config(yaml.safe_load((STUDIES / f"{study}.yaml").read_text()), SCHEMA))
    # released NewsGroup/ code: mean (LS-0.05 summed: CrossEntropySmoothed), no clipping;
    # treeLSTM/trainer.py: each tree's summed node losses over the batch's trees, no clipping
    text_recipes = {"newsgroups_adam_50": ("mean", None), "newsgroups_adam_50_sum": ("sum", None),
                    "sst_adagrad_25": ("mean_of_sums", None),
                    # §5.2 trains as Vaswani et al. 2017: the mean over the batch's tokens, no clipping
                    "wmt14_vaswani_base": ("mean", None)}
    for run in plan.runs.values():
        recipe = plan.run_identity(run)["recipe"]  # the identity run_config.json records
        expected = text_recipes.get(run.recipe, ("sum", 2))
        assert (recipe.get("loss_reduction", "mean"), recipe.get("grad_clip_norm")) == expected, run.path


def test_charoenphakdee2021_keeps_the_defaults():
    plan = build_plan(validate_config(yaml.safe_load((STUDIES / "charoenphakdee2021.yaml").read_text()), SCHEMA))
    for run in plan.runs.values():
        config = RunConfig.from_dict(plan.run_config(run))
        assert (config.recipe.loss_reduction, config.recipe.grad_clip_norm) == ("mean", None), run.path
