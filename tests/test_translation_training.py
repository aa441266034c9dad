"""Translation runs (mukhoti2020 §5.2) on the one trainer: Vaswani's schedule, token-level losses
that never see padding, an end-to-end stand-in run whose token_logits.npz equals an independent
teacher-forced pass, and resume."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from focalcal.training import RunConfig
from focalcal.training.trainer import InverseSqrt, build_loss, build_scheduler
from focalcal.training.translation import TOKEN_IGNORE_INDEX

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
    ({"warmup_steps": 0}, "needs recipe.warmup_steps"),
    ({"lr_milestones": [1]}, "leave recipe.lr_milestones"),
    ({"lr_schedule": "epoch"}, "recipe.warmup_steps is for"),
    ({"lr_schedule": "cosine"}, "recipe.lr_schedule = 'cosine'"),
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
