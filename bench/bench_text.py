"""mukhoti2020's text models on the CPU: one training epoch of the paper-scale recipes, estimated
from timed batches.

* Tree-LSTM (SST: 6,920 trees, batch 25, 300-d vectors tuned, memory 150, AdaGrad): the
  level-batched model against a node-at-a-time loop over each tree (how Tai et al.'s and the
  released code run it) with the same weights, in the same run. Trees are random bracketings
  of SST-like sentence lengths (19 words on average, 3 to 50).
* Global-pooling CNN (20 Newsgroups: 15,098 documents of 1,000 tokens, batch 128, Adam).

Printed: milliseconds per batch, the epoch estimate and the level-batched speed-up.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from focalcal import models
from focalcal.models.tree_lstm import encode_tree, pad_trees, random_tree

SST_TRAIN, SST_BATCH, SST_VOCAB = 6920, 25, 20000  # a 20,000-word vocabulary: SST's training split's order of size
NG_TRAIN, NG_BATCH, NG_LENGTH, NG_VOCAB = 15098, 128, 1000, 20000


def sst_like_batch(generator: torch.Generator) -> torch.Tensor:
    lengths = (torch.randn(SST_BATCH, generator=generator) * 9 + 19).round().clamp(3, 50).int().tolist()
    trees = [random_tree(torch.randint(SST_VOCAB, (n,), generator=generator).tolist(), generator) for n in lengths]
    return pad_trees([encode_tree(tree) for tree in trees])


def node_at_a_time_logits(model, trees: torch.Tensor) -> list[torch.Tensor]:
    """Every node's logits, computed recursively one node at a time (the reference loop)."""
    def state(rows: list, node: int) -> torch.Tensor:
        word, left, right, _ = rows[node]
        if word >= 0:
            return model._leaf_states(torch.tensor([word]))
        return model._compose(state(rows, left), state(rows, right))

    out = []
    for tree in trees:
        rows = tree.tolist()
        states = {node: state(rows, node) for node, row in enumerate(rows) if row[3] >= 0}
        hidden = torch.cat([states[k] for k in sorted(states)])[:, model.memory_dim:]
        out.append(model.classifier(model.dropout(hidden)))
    return out


def time_steps(step, batches: list, repeats: int = 1) -> float:
    step(batches[0])  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        for batch in batches:
            step(batch)
    return (time.perf_counter() - start) / (repeats * len(batches))


def main(quick: bool = False) -> None:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    n_batches = 3 if quick else 12
    batches = [sst_like_batch(generator) for _ in range(n_batches)]
    model = models.build("tree_lstm", 2, vocab_size=SST_VOCAB)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05, weight_decay=1e-4)
    model.train()

    def batched_step(trees):
        targets = torch.randint(0, 3, trees.shape[:2]).masked_fill(trees[:, :, 3] < 0, -100)
        loss = F.cross_entropy(model(trees), targets, ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def node_step(trees):
        logits = node_at_a_time_logits(model, trees)
        loss = sum(F.cross_entropy(z, torch.randint(0, 3, (z.shape[0],)), reduction="sum") for z in logits)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    batched = time_steps(batched_step, batches)
    node = time_steps(node_step, batches[: max(1, n_batches // 4)])
    sst_batches = SST_TRAIN // SST_BATCH
    print(f"Tree-LSTM, SST-sized ({torch.get_num_threads()} threads), batch {SST_BATCH}, forward+backward+AdaGrad:")
    print(f"  node at a time   {1000 * node:8.1f} ms/batch   epoch ~{node * sst_batches:6.0f} s   (baseline)")
    print(f"  level-batched    {1000 * batched:8.1f} ms/batch   epoch ~{batched * sst_batches:6.0f} s   "
          f"{node / batched:5.1f}x faster")

    cnn = models.build("global_pooling_cnn", 20, vocab_size=NG_VOCAB)
    cnn_optimizer = torch.optim.Adam(cnn.parameters(), lr=1e-3)
    cnn.train()
    documents = [torch.randint(2, NG_VOCAB, (NG_BATCH, NG_LENGTH), generator=generator) for _ in range(2 if quick else 4)]

    def cnn_step(x):
        loss = F.cross_entropy(cnn(x), torch.randint(0, 20, (x.shape[0],)))
        cnn_optimizer.zero_grad()
        loss.backward()
        cnn_optimizer.step()

    per_batch = time_steps(cnn_step, documents)
    print(f"Global-pooling CNN, 20 Newsgroups-sized, batch {NG_BATCH} x {NG_LENGTH} tokens, Adam:")
    print(f"  {1000 * per_batch:8.1f} ms/batch   epoch ~{per_batch * (NG_TRAIN / NG_BATCH):6.0f} s")


if __name__ == "__main__":
    main()
