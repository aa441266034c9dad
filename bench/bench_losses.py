"""Forward + backward time of every loss against cross-entropy, measured in the same run.

Two shapes: classification logits (128, 100) and segmentation logits (8, 11, 224, 224).
The baseline is ``torch.nn.functional.cross_entropy``, timed alternately with each loss; ratios above 3 on CPU are flagged
(the budget of issue 3; AdaFocal's once-per-epoch validation update is timed separately).
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from focalcal import losses

BUDGET = 3.0
CLASSIFICATION_ONLY = {"mmce"}  # quadratic in the batch: no per-pixel version


def _configured(name: str, targets: torch.Tensor, num_classes: int):
    loss = losses.build({"name": name})
    loss.set_training_targets(torch.cat([targets.flatten(), torch.arange(num_classes)]), num_classes)
    loss.set_epoch(0, 10)
    return loss


def _time_pair(baseline, fn, logits: torch.Tensor, targets: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Best-of-``repeats`` seconds for one forward + backward of ``baseline`` and of ``fn``.

    The two are timed alternately, so a load spike on a shared machine hits both; the
    minimum is the least noisy estimate of each.
    """
    def once(f) -> float:
        x = logits.detach().requires_grad_()
        start = time.perf_counter()
        f(x, targets).backward()
        return time.perf_counter() - start

    once(baseline), once(fn), once(fn)  # warm-up
    best_baseline = best = float("inf")
    for _ in range(repeats):
        best_baseline = min(best_baseline, once(baseline))
        best = min(best, once(fn))
    return best_baseline, best


def _cases(quick: bool):
    spatial = 64 if quick else 224
    return [("(128, 100)", (128, 100), 20 if quick else 200),
            (f"(8, 11, {spatial}, {spatial})", (8, 11, spatial, spatial), 2 if quick else 7)]


def main(quick: bool = False) -> None:
    torch.manual_seed(0)
    names = [n for n in losses.available() if n not in losses.PRESETS] + ["focal+smoothing"]
    rows = []
    for label, shape, repeats in _cases(quick):
        logits = 3 * torch.randn(*shape)
        targets = torch.randint(0, shape[1], (shape[0], *shape[2:]))
        for name in names:
            if name in CLASSIFICATION_ONLY and len(shape) > 2:
                continue
            if name == "focal+smoothing":
                loss = losses.build({"name": "focal", "gamma": 3, "smoothing": 0.1})
            else:
                loss = _configured(name, targets, shape[1])
            baseline, seconds = _time_pair(F.cross_entropy, loss, logits, targets, repeats)
            rows.append((label, name, baseline, seconds))
    # AdaFocal's epoch-level update on a validation set of 5000 x 100.
    val_logits, val_labels = 3 * torch.randn(5000, 100), torch.randint(0, 100, (5000,))
    adafocal = losses.build({"name": "adafocal"})
    start = time.perf_counter()
    adafocal.update_from_validation(val_logits, val_labels)
    update_seconds = time.perf_counter() - start

    print(f"threads: {torch.get_num_threads()}; ratio = time / torch cross_entropy on the same shape")
    print(f"{'logits':<22} {'loss':<24} {'CE ms':>9} {'loss ms':>9} {'ratio':>7}")
    for label, name, baseline, seconds in rows:
        ratio = seconds / baseline
        flag = "  > budget" if ratio > BUDGET else ""
        print(f"{label:<22} {name:<24} {baseline * 1e3:9.3f} {seconds * 1e3:9.3f} {ratio:7.2f}{flag}")
    print(f"adafocal.update_from_validation on (5000, 100): {update_seconds * 1e3:.2f} ms (once per epoch)")


if __name__ == "__main__":
    main()
