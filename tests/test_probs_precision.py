"""check_probs scales its row-sum tolerance with the dtype: float16/bfloat16 softmax outputs pass,
garbage fails in every dtype, and metrics of half-precision probabilities match float32's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from focalcal import metrics
from focalcal.core.validation import check_probs, row_sum_tolerance
from focalcal.theory import psi

HALF_DTYPES = {"torch.float16": torch.float16, "torch.bfloat16": torch.bfloat16, "numpy.float16": np.float16}
CLASSES = [2, 10, 100, 1000]


def unit_roundoff(dtype) -> float:
    return (torch.finfo(dtype).eps if isinstance(dtype, torch.dtype) else float(np.finfo(dtype).eps)) / 2


def logits_of(kind: str, k: int, n: int = 300, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + k)
    x = torch.randn(n, k, generator=generator)
    if kind == "random":  # from nearly uniform to confident rows
        return x * torch.logspace(-1, 2, n)[:, None]
    # extreme: huge logits (one-hot after rounding), ties, all equal, one class far below the others
    x = x * 1e4
    x[0] = 0.0
    x[1, :] = 5.0
    x[1, 0] = -1e4
    x[2, : k // 2] = 7.0
    return x


def half_softmaxes(x: torch.Tensor, dtype) -> dict[str, object]:
    """What user code produces: softmax in the dtype, softmax cast to it, and the dtype's own arithmetic."""
    if dtype is np.float16:
        x16 = x.numpy().astype(np.float16)
        with np.errstate(over="ignore"):  # x - max below -65504 is -inf, whose exp is a fine 0
            e = np.exp(x16 - x16.max(axis=1, keepdims=True))
        return {"float32 softmax cast": torch.softmax(x, 1).numpy().astype(np.float16),
                "float16 arithmetic": e / e.sum(axis=1, keepdims=True)}
    e = torch.exp((x - x.max(1, keepdim=True).values).to(dtype))
    return {"softmax in dtype": torch.softmax(x.to(dtype), 1), "float32 softmax cast": torch.softmax(x, 1).to(dtype),
            "dtype arithmetic": e / e.sum(1, keepdim=True)}


@pytest.mark.parametrize("k", CLASSES)
@pytest.mark.parametrize("kind", ["random", "extreme"])
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_half_precision_softmax_rows_are_accepted(dtype, kind, k):
    for how, probs in half_softmaxes(logits_of(kind, k), HALF_DTYPES[dtype]).items():
        checked = check_probs(probs)
        assert checked.dtype == np.float32, how  # numpy cannot hold bfloat16; float16 sums overflow at 65504
        np.testing.assert_array_equal(checked, torch.as_tensor(probs).float().numpy())


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_the_tolerance_is_a_few_roundings_of_the_dtype_not_a_constant(dtype):
    dtype = HALF_DTYPES[dtype]
    u = unit_roundoff(dtype)
    for k in CLASSES:
        assert 2 * u < row_sum_tolerance(dtype, k) <= 3.2 * u  # a correctly rounded row is within u
    assert row_sum_tolerance(np.float32, 10) == row_sum_tolerance(torch.float64, 10) == 1e-4  # the floor
    assert row_sum_tolerance(np.int64, 10) == 1e-4


GARBAGE = {  # rows a rounding could never make
    "sum 0.9": ([[0.45, 0.45], [0.5, 0.5]], "rows must sum to 1"),
    "sum 1.1": ([[0.55, 0.55], [0.5, 0.5]], "rows must sum to 1"),
    "negative": ([[-0.125, 0.5, 0.625], [0.25, 0.25, 0.5]], r"must lie in \[0, 1\]"),
    "NaN": ([[np.nan, 1.0], [0.5, 0.5]], "contains NaN"),
}


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("dtype", [*HALF_DTYPES, "numpy.float32", "numpy.float64"])
def test_garbage_is_refused_in_every_dtype(dtype, garbage):
    rows, message = GARBAGE[garbage]
    probs = (torch.tensor(rows, dtype=HALF_DTYPES[dtype]) if dtype.startswith("torch")
             else np.asarray(rows, dtype=HALF_DTYPES.get(dtype, dtype.removeprefix("numpy."))))
    with pytest.raises(ValueError, match=message):
        check_probs(probs)
    with pytest.raises(ValueError, match=message):
        metrics.ece(probs, [0, 1])


def test_float16_rows_off_by_one_percent_are_refused():
    with pytest.raises(ValueError, match=r"within 0.0015 for float16\); row 0 sums to 0.99"):
        check_probs(np.array([[0.495, 0.495], [0.5, 0.5]], dtype=np.float16))


@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_psi_accepts_half_precision_probabilities(dtype):
    probs = half_softmaxes(logits_of("random", 10), HALF_DTYPES[dtype])["float32 softmax cast"]
    out = psi(probs, 2.0)
    assert np.isfinite(np.asarray(torch.as_tensor(out).float())).all()


METRICS = {
    "nll": metrics.nll,
    "brier": metrics.brier,
    "error": metrics.error,
    "top5_error": lambda p, y: metrics.top_k_error(p, y, k=5),
    "ece": lambda p, y: metrics.ece(p, y, n_bins=15),
    "adaece": lambda p, y: metrics.ece(p, y, n_bins=15, binning="mass"),
    "classwise_ece": lambda p, y: metrics.classwise_ece(p, y, n_bins=15),
    "mce": lambda p, y: metrics.mce(p, y, n_bins=15),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", HALF_DTYPES)
def test_metrics_of_half_precision_probabilities_match_float32(dtype, seed):
    rng = np.random.default_rng(seed)
    n, k = 4000, 10
    logits = torch.from_numpy((rng.standard_normal((n, k)) * 2).astype(np.float32))
    p32 = torch.softmax(logits, 1)
    exact = p32.double() / p32.double().sum(1, keepdim=True)
    labels = np.array([rng.choice(k, p=row) for row in exact.numpy()])  # calibrated labels
    half = half_softmaxes(logits, HALF_DTYPES[dtype])["float32 softmax cast"]
    u = unit_roundoff(HALF_DTYPES[dtype])
    assert p32[np.arange(n), labels].min() > 1e-4  # true-class probabilities stay normal numbers in float16
    for name, metric in METRICS.items():
        # each probability is off by at most u (relative): NLL and Brier move by at most ~2u; a binned
        # metric or the error moves further only through the few samples that change bin or argmax
        tolerance = 2 * u if name in ("nll", "brier") else 8 * u
        assert metric(half, labels) == pytest.approx(metric(p32, labels), abs=tolerance), name
