"""On-device crop/flip augmentation and normalisation, against per-sample slicing references."""

import itertools

import numpy as np
import pytest
import torch

from focalcal.data import apply_augmentation, normalise, random_crop_flip
from focalcal.data.augment import crop_flip_at


def _reference_crop(image, padding, top, left, flip):
    """One sample by plain slicing of a zero-padded copy."""
    c, h, w = image.shape
    padded = torch.zeros(c, h + 2 * padding, w + 2 * padding, dtype=image.dtype)
    padded[:, padding:padding + h, padding:padding + w] = image
    crop = padded[:, top:top + h, left:left + w]
    return crop.flip(-1) if flip else crop


def _candidates(image, padding):
    """Every crop/flip the augmentation may produce, with its (top, left, flip)."""
    keys = list(itertools.product(range(2 * padding + 1), range(2 * padding + 1), (False, True)))
    return keys, torch.stack([_reference_crop(image, padding, *key) for key in keys])


def test_crop_flip_at_equals_slicing_reference():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 3, 9, 7, generator=gen)
    top = torch.randint(0, 7, (16,), generator=gen)
    left = torch.randint(0, 7, (16,), generator=gen)
    flip = torch.rand(16, generator=gen) < 0.5
    out = crop_flip_at(x, 3, top, left, flip)
    for i in range(16):
        torch.testing.assert_close(out[i], _reference_crop(x[i], 3, int(top[i]), int(left[i]), bool(flip[i])), rtol=0, atol=0)


def test_random_crop_flip_draws_every_crop_and_flip_uniformly():
    padding, n = 2, 10_000
    image = torch.arange(1, 3 * 6 * 6 + 1, dtype=torch.float32).reshape(3, 6, 6)  # all values distinct, nonzero
    keys, candidates = _candidates(image, padding)
    out = random_crop_flip(image.expand(n, -1, -1, -1), padding, generator=torch.Generator().manual_seed(1))
    matches = (out.reshape(n, 1, -1) == candidates.reshape(1, len(keys), -1)).all(dim=2)
    assert torch.equal(matches.sum(dim=1), torch.ones(n, dtype=torch.long))  # each output is exactly one candidate
    counts = matches.sum(dim=0).double().numpy()
    expected = n / len(keys)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 100  # 49 degrees of freedom: P(chi2 > 100) < 1e-4
    flips = np.array([key[2] for key in keys])
    assert counts[flips].sum() / n == pytest.approx(0.5, abs=0.03)


def test_random_crop_flip_without_flip_never_mirrors():
    image = torch.arange(1, 2 * 5 * 5 + 1, dtype=torch.float32).reshape(2, 5, 5)
    keys, candidates = _candidates(image, 1)
    out = random_crop_flip(image.expand(500, -1, -1, -1), 1, flip=False, generator=torch.Generator().manual_seed(2))
    matches = (out.reshape(500, 1, -1) == candidates.reshape(1, len(keys), -1)).all(dim=2)
    hit = matches.any(dim=0).numpy()
    assert matches.sum(dim=1).eq(1).all()
    assert not any(h for h, key in zip(hit, keys) if key[2])
    assert all(h for h, key in zip(hit, keys) if not key[2])


def test_random_crop_flip_is_seeded_and_keeps_dtype_and_shape():
    x = torch.rand(32, 3, 8, 8)
    a = random_crop_flip(x, generator=torch.Generator().manual_seed(5))
    b = random_crop_flip(x, generator=torch.Generator().manual_seed(5))
    c = random_crop_flip(x, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == x.shape and a.dtype == torch.float32
    half = random_crop_flip(x.double(), generator=torch.Generator().manual_seed(5))
    assert half.dtype == torch.float64 and torch.equal(half.float(), a)


def test_random_crop_flip_rejects_bad_input():
    with pytest.raises(ValueError, match="N×C×H×W"):
        random_crop_flip(torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="padding"):
        random_crop_flip(torch.zeros(1, 3, 8, 8), padding=-1)


def test_apply_augmentation_follows_the_dataset_meta():
    x = torch.rand(8, 3, 6, 6)
    assert apply_augmentation(x, {"random_crop_padding": 0, "horizontal_flip": False}) is x
    only_flip = apply_augmentation(x, {"random_crop_padding": 0, "horizontal_flip": True}, torch.Generator().manual_seed(0))
    for i in range(8):
        assert torch.equal(only_flip[i], x[i]) or torch.equal(only_flip[i], x[i].flip(-1))
    same = random_crop_flip(x, 4, flip=True, generator=torch.Generator().manual_seed(3))
    via_meta = apply_augmentation(x, {"random_crop_padding": 4, "horizontal_flip": True}, torch.Generator().manual_seed(3))
    assert torch.equal(same, via_meta)
    with pytest.raises(ValueError, match="unknown augmentation keys"):
        apply_augmentation(x, {"rotate": 10})


def test_normalise_per_channel():
    x = torch.rand(4, 3, 5, 5)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    out = normalise(x, mean, std)
    for ch in range(3):
        torch.testing.assert_close(out[:, ch], (x[:, ch] - mean[ch]) / std[ch])
    assert normalise(x, None, None) is x
    signals = torch.rand(4, 1, 40)
    torch.testing.assert_close(normalise(signals, (0.5,), (2.0,)), (signals - 0.5) / 2.0)
    with pytest.raises(ValueError, match="3 channels"):
        normalise(x, (0.1,), (1.0,))
    with pytest.raises(ValueError, match="std must be positive"):
        normalise(x, (0, 0, 0), (1, 0, 1))


def test_the_normaliser_checks_once_and_gives_normalise_s_numbers_with_no_read_back():
    from focalcal.data.augment import Normaliser
    from focalcal.training.graph_safety import GraphUnsafe, StepGuard

    mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
    x = torch.rand(5, 3, 4, 4)
    normaliser = Normaliser(mean, std)
    expected = normalise(x, mean, std)
    with StepGuard(torch.device("cpu")):  # fails on any read-back or tensor from another device
        out = normaliser(x)
    with pytest.raises(GraphUnsafe, match="host read"), StepGuard(torch.device("cpu")):
        normalise(x, mean, std)  # the per-call check reads back
    assert torch.equal(out, expected)
    assert Normaliser(None, None)(x) is x
    with pytest.raises(ValueError, match="std must be positive"):
        Normaliser(mean, (0.2, 0.0, 0.2))
    with pytest.raises(ValueError, match="3 entries but x has shape"):
        normaliser(torch.rand(2, 1, 4, 4))
