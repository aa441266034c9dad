"""Forward + backward time of every loss against cross-entropy, measured in the same run.

Two shapes: classification logits (128, 100) and segmentation logits (8, 11, 224, 224).
Two baselines, both timed in the same rounds as each loss:

- ``torch CE``: ``torch.nn.functional.cross_entropy``, one fused kernel — the budget
  (no loss above 3x on CPU; AdaFocal's once-per-epoch validation update is timed
  separately);
- each loss is timed twice: as the trainer calls it (``validate_inputs = False``: the targets
  were checked once at load) — the figure the budget applies to — and as a user calls it by
  default, checking its targets on every call (one sync and a few small kernels more).

Built for a small shared machine: in every round the three functions run back to back (in a
rotating order), each time is the minimum over all rounds, and rounds go on until a time
budget per row is spent (with a floor on their number), so a load spike hits all three and
the minimum filters it out. Threads: ``FOCALCAL_BENCH_THREADS`` if set, else 1 when the machine
is oversubscribed (load average above the core count: multi-threaded kernels then mostly time
the scheduler, by whole milliseconds), else torch's default. The count is printed.
"""

from __future__ import annotations

import gc
import os
import time

import torch
import torch.nn.functional as F

from focalcal import losses
from focalcal.losses import _fused

BUDGET = 3.0
CLASSIFICATION_ONLY = {"mmce"}  # quadratic in the batch: no per-pixel version
EXTRA = {"focal+smoothing": {"name": "focal", "gamma": 3, "smoothing": 0.1}}


def _configured(name: str, targets: torch.Tensor, num_classes: int, *, trusted: bool):
    loss = losses.build(EXTRA.get(name, {"name": name}))
    loss.validate_inputs = not trusted
    loss.set_training_targets(torch.cat([targets.flatten(), torch.arange(num_classes)]), num_classes)
    loss.set_epoch(0, 10)
    return loss


def _timer(fn, logits: torch.Tensor, targets: torch.Tensor):
    """A function that times one forward + backward of ``fn`` (seconds)."""
    x = logits.detach().clone().requires_grad_()

    def once() -> float:
        x.grad = None
        start = time.perf_counter()
        fn(x, targets).backward()
        return time.perf_counter() - start

    return once


def time_interleaved(fns, logits, targets, *, min_rounds: int, max_rounds: int, seconds: float) -> list[float]:
    """Minimum time of each of ``fns`` over rounds in which all run once, in rotating order."""
    timers = [_timer(fn, logits, targets) for fn in fns]
    for t in timers:  # warm-up (allocator, first-call dispatch)
        t(), t()
    best = [float("inf")] * len(timers)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for round_ in range(max_rounds):
            for shift in range(len(timers)):
                i = (round_ + shift) % len(timers)
                best[i] = min(best[i], timers[i]())
            if round_ + 1 >= min_rounds and time.perf_counter() - start > seconds:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return best


def _cases(quick: bool):
    """(label, shape, min rounds, max rounds, seconds per row)."""
    if quick:
        return [("(128, 100)", (128, 100), 20, 200, 0.2), ("(8, 11, 64, 64)", (8, 11, 64, 64), 5, 50, 0.3)]
    return [("(128, 100)", (128, 100), 200, 5000, 1.5), ("(8, 11, 224, 224)", (8, 11, 224, 224), 7, 40, 4.0)]


def _threads() -> tuple[int, str]:
    if os.environ.get("FOCALCAL_BENCH_THREADS"):
        return int(os.environ["FOCALCAL_BENCH_THREADS"]), "FOCALCAL_BENCH_THREADS"
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        return 1, f"load average {load:.1f} > {cores} cores"
    return torch.get_num_threads(), f"torch default; load average {load:.1f} on {cores} cores"


def main(quick: bool = False) -> None:
    torch.manual_seed(0)
    threads, why = _threads()
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _run(quick, f"{threads} ({why})")
    finally:
        torch.set_num_threads(previous_threads)


def _run(quick: bool, threads: str) -> None:
    names = [n for n in losses.available() if n not in losses.PRESETS and n != "cross_entropy"] + list(EXTRA)
    rows = []
    for label, shape, min_rounds, max_rounds, seconds in _cases(quick):
        logits = 3 * torch.randn(*shape)
        targets = torch.randint(0, shape[1], (shape[0], *shape[2:]))
        for name in ["cross_entropy"] + names:
            if name in CLASSIFICATION_ONLY and len(shape) > 2:
                continue
            trusted = _configured(name, targets, shape[1], trusted=True)
            checked = _configured(name, targets, shape[1], trusted=False)
            torch_ce, this, this_checked = time_interleaved(
                [F.cross_entropy, trusted, checked], logits, targets,
                min_rounds=min_rounds, max_rounds=max_rounds, seconds=seconds)
            rows.append((label, name, torch_ce, this, this_checked))
    # AdaFocal's epoch-level update on a validation set of 5000 x 100.
    val_logits, val_labels = 3 * torch.randn(5000, 100), torch.randint(0, 100, (5000,))
    adafocal = losses.build({"name": "adafocal"})
    update_seconds = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        adafocal.update_from_validation(val_logits, val_labels)
        update_seconds = min(update_seconds, time.perf_counter() - start)

    kernels = f"on ({torch.backends.cpu.get_cpu_capability()})" if _fused.usable(torch.zeros(1)) else "off (eager path)"
    print(f"fused CPU loss kernels: {kernels} ({_fused.ENV_SWITCH}=0 times the eager reference path)")
    print(f"torch threads: {threads}; forward + backward, minimum over interleaved rounds; "
          f"ratios = loss time / baseline time on the same shape (budget {BUDGET:g}x torch CE)")
    print(f"{'logits':<19} {'loss':<24} {'torch CE ms':>11} {'loss ms':>9} {'x torch CE':>10} "
          f"{'checked ms':>10} {'x torch CE':>10}")
    for label, name, torch_ce, seconds, checked in rows:
        ratio = seconds / torch_ce
        flag = "  > budget" if ratio > BUDGET else ""
        print(f"{label:<19} {name:<24} {torch_ce * 1e3:11.3f} {seconds * 1e3:9.3f} {ratio:10.2f} "
              f"{checked * 1e3:10.3f} {checked / torch_ce:10.2f}{flag}")
    print(f"adafocal.update_from_validation on (5000, 100): {update_seconds * 1e3:.2f} ms (once per epoch)")


if __name__ == "__main__":
    main()
