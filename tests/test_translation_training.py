"""Translation runs (mukhoti2020 §5.2) on the one trainer: Vaswani's schedule, token-level losses
that never see padding, an end-to-end stand-in run whose token_logits.npz equals an independent
teacher-forced pass, and resume."""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from focalcal import paths
from focalcal.data.translation import BOS_ID, EOS_ID, synthetic_translation
from focalcal.files import sidecar
from focalcal.models import build
from focalcal.pipeline import jobs
from focalcal.training import RunConfig, TranslationTrainer, train_run
from focalcal.training.factories import InverseSqrt, build_loss, build_scheduler
from focalcal.training.translation import TOKEN_IGNORE_INDEX
from focalcal.translation.token_profile import TOKEN_TEMPERATURES, profile_from_logits, read_token_profile

# mukhoti2020 §5.2's three losses as config/config.yaml declares them
LOSSES = {
    "ce": {"name": "cross_entropy"},
    "ls0.1": {"name": "label_smoothing", "smoothing": 0.1, "convention": "uniform"},
    "focal1": {"name": "focal", "gamma": 1},
}


def make_config(loss=None, **recipe):
    raw = {
        "dataset": {"name": "synthetic-translation", "n_train": 160, "n_val": 24, "n_test": 24, "seed": 0},
        "model": {"name": "transformer-small"},
        "loss": loss or LOSSES["ce"],
        "recipe": {
            "epochs": 2,
            "max_tokens": 400,
            "optimizer": {"name": "adam", "lr": 64**-0.5, "betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.0},
            "lr_schedule": "inverse_sqrt",
            "warmup_steps": 10,
            **recipe,
        },
        "seed": 1,
        "device": "cpu",
    }
    return RunConfig.from_dict(raw)


# ------------------------------------------------------------------------------ the schedule


def test_inverse_sqrt_schedule_is_vaswani_equation_3_stepped_per_batch():
    d_model, warmup = 512, 400
    config = make_config(warmup_steps=warmup, optimizer={"name": "adam", "lr": d_model**-0.5, "betas": [0.9, 0.98],
                                                         "eps": 1e-9, "weight_decay": 0.0})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=config.recipe.optimizer.lr)
    scheduler = build_scheduler(optimizer, config)
    seen = {}
    for step in range(1, 1201):  # step = the batch about to be trained, 1-based as in the paper
        seen[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
    for step in (1, 2, 100, 399, 400, 401, 800, 1200):
        vaswani = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert seen[step] == pytest.approx(vaswani, rel=1e-12), step
    assert max(seen, key=seen.get) == warmup  # the peak is at the end of the warm-up
    # the paper's base model (warm-up 4000) peaks near 7e-4
    assert d_model**-0.5 * InverseSqrt(4000)(3999) == pytest.approx(7e-4, rel=0.01)


def test_inverse_sqrt_factor_survives_the_checkpoint():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, InverseSqrt(7))
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    fresh_optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    fresh = torch.optim.lr_scheduler.LambdaLR(fresh_optimizer, InverseSqrt(7))
    fresh.load_state_dict(state)
    fresh_optimizer.load_state_dict(optimizer.state_dict())
    optimizer.step(), scheduler.step(), fresh_optimizer.step(), fresh.step()
    assert fresh_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == pytest.approx(7**-1.5 * 7)


@pytest.mark.parametrize(("recipe", "message"), [
    ({"warmup_steps": None}, "needs recipe.warmup_steps"),
    ({"warmup_steps": 0}, r"recipe\.warmup_steps must be an integer in \[1, inf\) or None, got 0"),
    ({"lr_milestones": [1]}, "leave recipe.lr_milestones"),
    ({"lr_schedule": "epoch"}, "recipe.warmup_steps is for"),
    ({"lr_schedule": "cosine"}, "recipe.lr_schedule must be one of 'epoch', 'inverse_sqrt', got 'cosine'"),
    ({"max_tokens": 0}, "recipe.max_tokens must be"),
])
def test_bad_schedule_or_batch_settings_name_the_key(recipe, message):
    with pytest.raises(ValueError, match=message):
        make_config(**recipe)


def test_adam_eps_at_its_default_keeps_the_fingerprint_of_runs_written_before_it():
    base = make_config().to_dict()
    base["recipe"]["optimizer"]["eps"] = 1e-8
    at_default = RunConfig.from_dict(base)
    del base["recipe"]["optimizer"]["eps"]
    assert RunConfig.from_dict(base).fingerprint() == at_default.fingerprint()
    assert make_config().fingerprint() != at_default.fingerprint()  # 1e-9 is another run


# ------------------------------------------------------------------------------ the losses


@pytest.mark.parametrize("loss", list(LOSSES))
def test_padding_never_reaches_the_loss_and_the_mean_is_over_real_tokens(loss):
    """The trainer's loss on (tokens, vocabulary) logits: changing only the logits of padded
    positions changes neither the loss nor any gradient but theirs (zero), and the loss is
    the mean of the per-token losses of the real tokens."""
    config = make_config(LOSSES[loss])
    loss_fn = build_loss(config, SimpleNamespace(meta={"ignore_index": TOKEN_IGNORE_INDEX}))
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(40, 23, generator=generator, dtype=torch.float64)
    targets = torch.randint(0, 23, (40,), generator=generator)
    padded = torch.zeros(40, dtype=torch.bool)
    padded[[3, 4, 17, 30, 31, 39]] = True
    targets[padded] = TOKEN_IGNORE_INDEX
    moved = logits.clone()
    moved[padded] = 50 * torch.randn(int(padded.sum()), 23, generator=generator, dtype=torch.float64)
    first, second = logits.clone().requires_grad_(), moved.clone().requires_grad_()
    value, value_moved = loss_fn(first, targets), loss_fn(second, targets)
    assert float(value.detach()) == pytest.approx(float(value_moved.detach()), rel=1e-12)
    value.backward(), value_moved.backward()
    assert torch.equal(first.grad[padded], torch.zeros_like(first.grad[padded]))
    assert torch.allclose(first.grad[~padded], second.grad[~padded], rtol=1e-12, atol=0)
    each = torch.stack([loss_fn(logits[i : i + 1], targets[i : i + 1]) for i in torch.nonzero(~padded).ravel()])
    assert float(value.detach()) == pytest.approx(float(each.mean()), rel=1e-12)


def test_label_smoothing_0_1_is_muller_et_al_uniform_target():
    """LS-0.1 of §5.2 is Müller et al. 2019's (1 − α) q + α/K: the cross-entropy against that target."""
    loss_fn = build_loss(make_config(LOSSES["ls0.1"]), SimpleNamespace(meta={"ignore_index": TOKEN_IGNORE_INDEX}))
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    targets = torch.tensor([0, 3, 10, 4, 4])
    smoothed = torch.full((5, 11), 0.1 / 11, dtype=torch.float64).scatter_(1, targets[:, None], 0.9 + 0.1 / 11)
    expected = -(smoothed * torch.log_softmax(logits, 1)).sum(1).mean()
    assert float(loss_fn(logits, targets)) == pytest.approx(float(expected), rel=1e-12)


# ------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_root):
    run_dir = tmp_path_factory.mktemp("translation")
    train_run(make_config(LOSSES["focal1"]), run_dir, data_root=data_root, progress=False)
    return run_dir


def test_a_stand_in_run_trains_through_the_trainer_and_records_per_token_history(uninterrupted):
    history = pd.read_csv(uninterrupted / "history.csv")
    assert list(history["epoch"]) == [1, 2]
    corpus = synthetic_translation(160, 24, 24, 0)
    assert list(history["train_tokens"]) == [sum(len(y) + 1 for y in corpus.train.target)] * 2  # y + EOS, no PAD
    assert history["steps"].iloc[-1] == 2 * history["steps"].iloc[0]
    # per-batch schedule: the first epoch starts at step 1 of the warm-up, the second after its batches
    steps = int(history["steps"].iloc[0])
    assert history["lr"].iloc[0] == pytest.approx(64**-0.5 * 10**-1.5)
    assert history["lr"].iloc[1] == pytest.approx(64**-0.5 * min((steps + 1) ** -0.5, (steps + 1) * 10**-1.5))
    for column in ("train_loss", "val_nll", "val_error", "val_ece", "test_nll", "weight_norm"):
        assert np.isfinite(history[column]).all(), column
    info = json.loads((uninterrupted / "run.json").read_text())
    assert info["split_sizes"] == {"train": 160, "val": 24, "test": 24}
    assert info["num_classes"] == len(corpus.pieces)
    assert info["health"]["status"] in ("trained", "collapsed", "not converged")
    assert info["token_logits_sha256"] == sidecar.digest_file(uninterrupted / "token_logits.npz").sha256
    assert sidecar.read(uninterrupted / "token_logits.npz") == sidecar.digest_file(uninterrupted / "token_logits.npz")
    assert not (uninterrupted / "logits.npz").exists()


def test_token_logits_equal_an_independent_teacher_forced_pass(uninterrupted, data_root):
    """Every array of token_logits.npz from one sentence at a time through the checkpoint's model:
    source + EOS in, BOS + y as the decoder's input, y + EOS the labels, no padding anywhere."""
    config = make_config(LOSSES["focal1"])
    model = build("transformer-small", num_classes=455)
    model.load_state_dict(torch.load(uninterrupted / "checkpoint.pt", weights_only=False)["model"])
    model.eval()
    corpus = synthetic_translation(160, 24, 24, 0)
    stored = read_token_profile(uninterrupted / "token_logits.npz")
    assert config.recipe.max_tokens and len(stored["val"]) == sum(len(y) + 1 for y in corpus.val.target)
    for split in ("val", "test"):
        part = getattr(corpus, split)
        logits, labels, sentence = [], [], []
        with torch.no_grad():
            for index, (x, y) in enumerate(zip(part.source, part.target, strict=True)):
                source = torch.tensor([[*x, EOS_ID]])
                target_in = torch.tensor([[BOS_ID, *y]])
                logits.append(model(source, target_in)[0])
                labels += [*y, EOS_ID]
                sentence += [index] * (len(y) + 1)
        alone = profile_from_logits(torch.cat(logits), labels, sentence, TOKEN_TEMPERATURES)
        for field in ("labels", "sentence", "top_index"):
            assert np.array_equal(getattr(stored[split], field), getattr(alone, field)), (split, field)
        for field in ("top_logit", "label_logit", "logsumexp"):
            assert np.allclose(getattr(stored[split], field), getattr(alone, field), rtol=1e-5, atol=1e-5), (split, field)
        assert stored[split].nll(1.0) == pytest.approx(alone.nll(1.0), rel=1e-6)


def test_a_run_stopped_after_epoch_1_resumes_to_the_same_weights_and_token_logits(uninterrupted, tmp_path, data_root):
    config = make_config(LOSSES["focal1"])
    TranslationTrainer(config, tmp_path, data_root=data_root, progress=False).fit(stop_after_epoch=1)
    assert len(pd.read_csv(tmp_path / "history.csv")) == 1 and not (tmp_path / "token_logits.npz").exists()
    train_run(config, tmp_path, data_root=data_root, progress=False)  # a fresh process resumes it
    full = torch.load(uninterrupted / "checkpoint.pt", weights_only=False)
    resumed = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    for name, weight in full["model"].items():
        assert torch.equal(weight, resumed["model"][name]), name
    assert full["scheduler"]["last_epoch"] == resumed["scheduler"]["last_epoch"]
    one, other = np.load(uninterrupted / "token_logits.npz"), np.load(tmp_path / "token_logits.npz")
    for key in one.files:
        assert np.array_equal(one[key], other[key]), key
    columns = ["lr", "train_loss", "val_nll", "val_ece", "steps"]
    pd.testing.assert_frame_equal(pd.read_csv(uninterrupted / "history.csv")[columns],
                                  pd.read_csv(tmp_path / "history.csv")[columns])


def test_max_steps_ends_the_run_inside_an_epoch(tmp_path, data_root):
    trainer = train_run(make_config(epochs=20, max_steps=5), tmp_path, data_root=data_root, progress=False, export=False)
    history = pd.read_csv(tmp_path / "history.csv")
    assert history["steps"].iloc[-1] == 5 and len(history) < 20
    assert trainer.finished and trainer.scheduler.last_epoch == 5


# ------------------------------------------------------------------------------ the workflow's jobs


def test_the_training_job_stages_token_logits_and_the_export_job_publishes_or_redumps_them(tmp_path, data_root):
    config = make_config(LOSSES["ls0.1"], epochs=1).to_dict()
    identity = {key: config[key] for key in ("dataset", "model", "loss", "recipe", "seed")}
    run_dir = tmp_path / "run"
    jobs.train(identity, {"device": "cpu", "compile": "auto"}, run_dir, data_root, threads=1)
    staged = run_dir / "staged_export" / "token_logits.npz"
    assert staged.exists() and not (run_dir / "token_logits.npz").exists()
    jobs.export_token_logits(run_dir, data_root, threads=1)
    published = read_token_profile(run_dir / "token_logits.npz")  # its sidecar checked
    assert (run_dir / "token_logits.npz").read_bytes() == staged.read_bytes()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["token_logits_sha256"] == sidecar.digest_file(run_dir / "token_logits.npz").sha256
    # without the staged copy, the export dumps the same tokens from the checkpoint
    for name in ("token_logits.npz", "token_logits.npz.sha256", "run.json", "run.json.sha256"):
        (run_dir / "staged_export" / name).unlink()
    (run_dir / "token_logits.npz").unlink()
    jobs.export_token_logits(run_dir, data_root, threads=1)
    again = read_token_profile(run_dir / "token_logits.npz")
    for split in ("val", "test"):
        assert np.array_equal(again[split].logsumexp, published[split].logsumexp)


def test_a_translation_grid_holds_translation_corpora_only():
    from focalcal.pipeline import ConfigError, load_config_file, validate_config

    root = Path(__file__).resolve().parents[1]
    config = load_config_file(root / "config" / "config.yaml")
    config["studies"]["mukhoti2020_translation"]["grids"][0]["datasets"] = ["translation", "digits"]
    with pytest.raises(ConfigError, match=r"translation corpora \['translation'\] .*kept in grids of their own"):
        validate_config(config, root / "workflow" / "schemas" / "config.schema.yaml")


def test_the_paths_of_a_translation_runs_files():
    run = "translation/transformer_small/ce/translation_standin/seed0"
    assert paths.token_logits(run) == f"results/runs/{run}/token_logits.npz"
    assert paths.translation_decode(run, 1) == f"results/runs/{run}/decode/T1.00.json"
    assert paths.translation_hypotheses(run, 0.85) == f"results/runs/{run}/decode/T0.85.txt"
    assert paths.translation_decode() == "results/runs/{dataset}/{model}/{loss}/{recipe}/seed{seed}/decode/T{temperature}.json"
