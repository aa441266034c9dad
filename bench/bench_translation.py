"""mukhoti2020 §5.2's paper-scale step on the CPU: one training step of the Transformer base
(Vaswani et al. 2017: 6+6 layers, d_model 512, a shared vocabulary of 37,000 pieces) with
Adam, the recipe's loss and teacher forcing, on random WMT-like sentence pairs.

The recipe's batch holds about 25,000 tokens a side (Vaswani §5.1); one such step takes minutes
on one core, so the step is timed at ``TOKENS`` tokens and scaled linearly to 25,000
(the step's work is linear in the tokens at these lengths: the attention's L² term is a few
percent at 27 tokens a sentence). Printed: CPU seconds per step measured, per 25,000-token
step, and per 100,000-step run.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from focalcal.data.translation import pad_batch
from focalcal.losses import build as build_loss
from focalcal.models import build

VOCAB, RECIPE_TOKENS, RUN_STEPS = 37_000, 25_000, 100_000  # Vaswani §5.1 and §5.2
TOKENS, MEAN_LENGTH = 1_000, 27  # WMT14 En-De sentences: about 27 subword pieces on average (our estimate)


def batch(generator: np.random.Generator, tokens: int):
    """Sentence pairs of WMT-like lengths holding about ``tokens`` padded target tokens."""
    pairs = []
    while sum(len(t) + 1 for _, t in pairs) < tokens:
        n = int(np.clip(generator.normal(MEAN_LENGTH, 10), 3, 80))
        pairs.append((generator.integers(4, VOCAB, n), generator.integers(4, VOCAB, n)))
    source = pad_batch([s for s, _ in pairs], add_eos=True)
    target_in = pad_batch([t for _, t in pairs], add_bos=True)
    target_out = pad_batch([t for _, t in pairs], add_eos=True)
    return source, target_in, target_out.masked_fill(target_out == 0, -100)


def main(quick: bool = False) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokens = 300 if quick else TOKENS
    model = build("transformer-base", num_classes=VOCAB)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = build_loss({"name": "focal", "gamma": 1, "ignore_index": -100})
    generator = np.random.default_rng(0)
    batches = [batch(generator, tokens) for _ in range(3)]

    def step(source, target_in, target_out):
        logits = model(source, target_in)
        loss = loss_fn(logits.reshape(-1, VOCAB), target_out.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step(*batches[0])  # warm-up: allocations and Adam's state
    real = sum(int((b[2] != -100).sum()) for b in batches[1:])
    start = time.process_time()
    for b in batches[1:]:
        step(*b)
    per_step = (time.process_time() - start) / (len(batches) - 1)
    per_recipe_step = per_step * RECIPE_TOKENS / (real / (len(batches) - 1))
    print(f"transformer-base, vocabulary {VOCAB:,}, 1 thread: {per_step:.1f} CPU s per step of "
          f"{real // (len(batches) - 1):,} target tokens; {per_recipe_step:.0f} CPU s per {RECIPE_TOKENS:,}-token step; "
          f"{per_recipe_step * RUN_STEPS / 86400:,.0f} CPU-days per {RUN_STEPS:,}-step run")


if __name__ == "__main__":
    main()
