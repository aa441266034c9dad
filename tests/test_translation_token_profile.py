"""The per-token profile equals an independent computation on the full logits, and TS on it
equals TemperatureScaling on the full logits."""

import numpy as np
import pytest
import torch

from focalcal.calibration import TemperatureScaling
from focalcal.calibration.temperature import MUKHOTI_TEMPERATURES
from focalcal.metrics.calibration import ece
from focalcal.translation.token_profile import (
    TOKEN_TEMPERATURES,
    TokenProfile,
    fit_temperature,
    profile_from_logits,
    read_token_profile,
    write_token_profile,
)

CHECKED_TEMPERATURES = (0.1, 0.55, 1.0, 1.2, 2.0, 10.0)


def overconfident_tokens(n=700, vocab=37, scale=3.0, true_temperature=2.3, seed=0):
    """float32 logits whose labels follow softmax(z / 2.3), so the best T is far from 1."""
    generator = torch.Generator().manual_seed(seed)
    logits = (scale * torch.randn(n, vocab, generator=generator)).float()
    labels = torch.multinomial(torch.softmax(logits.double() / true_temperature, 1), 1, generator=generator)[:, 0]
    return logits, labels


def reference(logits, labels, temperature):
    """Confidence, correctness, mean NLL and ECE from torch.log_softmax over all V of the float32
    logits (evaluated in float64: float32 arithmetic itself errs by ~1e-5 at z / T ~ 100)."""
    log_probs = torch.log_softmax(logits.double() / temperature, dim=1)
    probs = log_probs.exp()
    confidence = probs.max(1).values.numpy()
    nll = -log_probs.gather(1, labels[:, None])[:, 0].mean().item()
    return confidence, (probs.argmax(1) == labels).numpy(), nll, ece(probs.numpy(), labels.numpy())


@pytest.mark.parametrize("scale", [3.0, 2000.0], ids=["ordinary", "extreme"])
def test_every_quantity_equals_the_full_logits_computation(scale):
    logits, labels = overconfident_tokens(scale=scale)
    profile = profile_from_logits(logits, labels, np.arange(len(labels)) // 7)
    assert profile.logsumexp.shape == (700, len(TOKEN_TEMPERATURES))
    for temperature in CHECKED_TEMPERATURES:
        confidence, correct, nll, expected_ece = reference(logits, labels, temperature)
        assert np.array_equal(profile.correct, correct)
        assert np.allclose(profile.confidences(temperature), confidence, rtol=0, atol=1e-6)
        assert profile.nll(temperature) == pytest.approx(nll, rel=1e-6)
        assert profile.ece(temperature) == pytest.approx(expected_ece, abs=1e-6)
    assert np.all(profile.confidences(0.1) <= 1.0)


def test_grid_temperature_scaling_equals_temperature_scaling_on_the_full_logits():
    logits, labels = overconfident_tokens()
    profile = profile_from_logits(logits, labels, np.zeros(len(labels)))
    full = logits.double().numpy()
    for objective in ("ece", "nll"):
        scaler = TemperatureScaling(objective=objective, temperatures=MUKHOTI_TEMPERATURES).fit(full, labels.numpy())
        grid, scores = profile.grid_scores(objective)
        assert np.array_equal(grid, MUKHOTI_TEMPERATURES)
        assert np.allclose(scores, scaler.grid_scores_, rtol=1e-9, atol=1e-12)
        assert fit_temperature(profile, objective) == scaler.temperature_
        assert 1.5 < scaler.temperature_ < 3.5  # labels drawn at T = 2.3: a fit away from 1
    fine = [0.5, 0.55, 0.6, 1.85, 1.9, 1.95, 2.0]
    scaler = TemperatureScaling(objective="ece", temperatures=fine).fit(full, labels.numpy())
    assert fit_temperature(profile, "ece", temperatures=fine) == scaler.temperature_


def test_the_file_round_trips_and_bad_files_are_named(tmp_path):
    logits, labels = overconfident_tokens(n=300)
    val = profile_from_logits(logits[:200], labels[:200], np.arange(200) // 5)
    test = profile_from_logits(logits[200:], labels[200:], np.arange(100) // 5)
    path = tmp_path / "token_logits.npz"
    write_token_profile(path, val, test)
    back = read_token_profile(path)
    for split, profile in (("val", val), ("test", test)):
        for field in ("temperatures", "top_logit", "top_index", "label_logit", "labels", "sentence", "logsumexp"):
            assert np.array_equal(getattr(back[split], field), getattr(profile, field)), (split, field)
    arrays = dict(np.load(path))
    arrays["test_sentence"] = arrays["test_sentence"][:-1]
    np.savez(tmp_path / "short.npz", **arrays)
    with pytest.raises(ValueError, match=r"short.npz \[test\]: sentence must have shape \(100,\)"):
        read_token_profile(tmp_path / "short.npz")
    del arrays["val_logsumexp"]
    np.savez(tmp_path / "missing.npz", **arrays)
    with pytest.raises(ValueError, match=r"missing.npz: not a token profile, missing \['val_logsumexp'\]"):
        read_token_profile(tmp_path / "missing.npz")


def test_concatenated_batches_equal_one_profile():
    logits, labels = overconfident_tokens(n=300)
    whole = profile_from_logits(logits, labels, np.arange(300))
    parts = TokenProfile.concatenate(
        [profile_from_logits(logits[a:b], labels[a:b], np.arange(a, b)) for a, b in ((0, 120), (120, 300))]
    )
    assert np.array_equal(parts.logsumexp, whole.logsumexp) and np.array_equal(parts.sentence, whole.sentence)


def test_bad_input_is_named():
    logits, labels = overconfident_tokens(n=20)
    profile = profile_from_logits(logits, labels, np.zeros(20))
    with pytest.raises(ValueError, match="temperature 0.33 is not on the profile's grid"):
        profile.confidences(0.33)
    with pytest.raises(ValueError, match="labels has 19 tokens but logits has 20 rows"):
        profile_from_logits(logits, labels[:19], np.zeros(19))
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 37\)"):
        profile_from_logits(logits, labels + 40, np.zeros(20))
    with pytest.raises(ValueError, match="objective must be one of"):
        fit_temperature(profile, "brier")


def test_no_confidence_rounds_above_one_at_any_grid_temperature():
    """A top logit far above the rest makes logsumexp(z / T) equal top / T in float64; the
    profile's division must then match the confidences' bit for bit, or exp(top / T − lse)
    exceeds 1 by an ulp at some grid T and every ECE on it is refused."""
    generator = torch.Generator().manual_seed(3)
    logits = 2.0 * torch.randn(5000, 1000, generator=generator, dtype=torch.float64)
    logits[:, 0] += 25.0
    labels = torch.zeros(5000, dtype=torch.long)
    profile = profile_from_logits(logits.float(), labels, np.arange(5000))
    for temperature in profile.temperatures:
        assert profile.confidences(temperature).max() <= 1.0, temperature
    assert fit_temperature(profile, "ece") in MUKHOTI_TEMPERATURES
