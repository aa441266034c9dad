"""ECE speed: focalcal.metrics.ece (searchsorted + bincount) vs a per-bin loop with boolean masks;
classwise ECE: focalcal.metrics.classwise_ece (one blockwise pass) vs one binning per class.

The baseline is how the papers' code computes ECE: take max and argmax, then loop over
the bins and average confidences and hits under a boolean mask per bin. Both run here,
on the same random (N, K) probabilities, and must agree to rounding.
"""

from __future__ import annotations

import time

import numpy as np

from focalcal.core.validation import check_labels, check_probs
from focalcal.metrics import classwise_ece, ece
from focalcal.metrics.binning import bin_statistics


def per_bin_loop_ece(probs, labels, n_bins=15, binning="width"):
    """Straightforward reference: one boolean mask per bin, bins ((i-1)/M, i/M] or rank quantiles."""
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    if binning == "width":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:  # equal mass: cut the sorted confidences after ranks ceil(i N / M)
        n = len(confidence)
        cuts = np.sort(confidence)[[-(-i * n // n_bins) - 1 for i in range(1, n_bins)]]
        edges = np.concatenate([[0.0], cuts, [1.0]])
    total = 0.0
    for i in range(n_bins):
        in_bin = (confidence > edges[i]) & (confidence <= edges[i + 1])
        if i == 0:
            in_bin |= confidence == edges[0]
        share = in_bin.mean()
        if share > 0:
            total += abs(correct[in_bin].mean() - confidence[in_bin].mean()) * share
    return total


def per_class_loop_classwise_ece(probs, labels, n_bins=15):
    """The per-class loop: one ``bin_statistics`` call per class."""
    total = 0.0
    for k in range(probs.shape[1]):
        bins = bin_statistics(np.ascontiguousarray(probs[:, k]), labels == k, n_bins, "width")
        total += np.abs(bins.score_sum - bins.hit_sum).sum()
    return total / probs.size


def best_time(function, repeats):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def random_probabilities(n, k, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, k)) * 3.0
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    labels = rng.integers(0, k, n)
    return probs, labels


def main(quick: bool = False) -> None:
    n, k = (100_000, 10) if quick else (1_000_000, 10)
    repeats = 2 if quick else 5
    probs64, labels = random_probabilities(n, k)
    print(f"ece on {n:,} x {k} random probabilities, 15 bins, best of {repeats}")
    print("'checks' = the input validation inside ece (finite, in [0, 1], rows sum to 1, labels);")
    print("the loop baseline does none, so the last speed-up compares the metric work alone.")
    header = (
        f"{'binning':<8} {'dtype':<8} {'focalcal ms':>12} {'checks ms':>10} {'loop ms':>10}"
        f" {'speed-up':>9} {'w/o checks':>11} {'|diff|':>9}"
    )
    print(header)
    print("-" * len(header))
    for dtype in (np.float64, np.float32):
        probs = probs64.astype(dtype)
        checks_s, _ = best_time(lambda probs=probs: (check_probs(probs), check_labels(labels, n, k)), repeats)
        for binning in ("width", "mass"):
            fast_s, fast = best_time(lambda probs=probs, binning=binning: ece(probs, labels, binning=binning), repeats)
            loop_s, loop = best_time(lambda probs=probs, binning=binning: per_bin_loop_ece(probs, labels, binning=binning),
                                     repeats)
            print(
                f"{binning:<8} {np.dtype(dtype).name:<8} {fast_s * 1e3:12.1f} {checks_s * 1e3:10.1f}"
                f" {loop_s * 1e3:10.1f} {loop_s / fast_s:8.1f}x {loop_s / (fast_s - checks_s):10.1f}x"
                f" {abs(fast - loop):9.1e}"
            )

    n, k = (1_000, 10_000) if quick else (5_000, 10_000)
    probs64, labels = random_probabilities(n, k)
    print(f"\nclasswise_ece on {n:,} x {k:,} random probabilities, 15 equal-width bins, best of {repeats}")
    header = f"{'dtype':<8} {'focalcal ms':>12} {'class loop ms':>14} {'speed-up':>9} {'|diff|':>9}"
    print(header)
    print("-" * len(header))
    for dtype in (np.float64, np.float32):
        probs = probs64.astype(dtype)
        fast_s, fast = best_time(lambda probs=probs: classwise_ece(probs, labels), repeats)
        loop_s, loop = best_time(lambda probs=probs: per_class_loop_classwise_ece(probs, labels), repeats)
        print(f"{np.dtype(dtype).name:<8} {fast_s * 1e3:12.1f} {loop_s * 1e3:14.1f} {loop_s / fast_s:8.1f}x"
              f" {abs(fast - loop):9.1e}")


if __name__ == "__main__":
    main()
