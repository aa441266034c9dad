"""mukhoti2020's SST network: the constituency (binary) Tree-LSTM of Tai et al. 2015,
batched level by level over a whole batch of trees.

Architecture — mukhoti2020 App. D says the code "is inspired by" ttpro1995/TreeLSTMSentiment;
their release, torrvision/focal_calibration ``treeLSTM/model.py`` (the same file as
ttpro1995's ``model.py``), defines, with ``sst_train.py`` setting ``input_dim = 300`` (GloVe
840B 300-d) and ``mem_dim = 150`` for the constituency model:

* leaf (``BinaryTreeLeafModule``): from the word embedding x,
  c = W_c x + b_c,  o = sigmoid(W_o x + b_o),  h = o * tanh(c)  (no input or forget gate).
* internal node (``BinaryTreeComposer``): Tai et al.'s N-ary Tree-LSTM with N = 2 and no
  word input, one forget gate per child; every gate reads both children through its own
  Linear(h_left) + Linear(h_right) (so two biases per gate, kept here for equal parameter
  counts):  i, f_l, f_r = sigmoid(.),  u = tanh(.),  c = i*u + f_l*c_l + f_r*c_r,
  h = tanh(c). The released PyTorch code has no output gate at internal nodes (Tai et al.'s
  Lua code has one with ``gate_output``); ``output_gate=True`` adds it: h = o * tanh(c).
* output (``SentimentModule``): ``l1(dropout(h))`` at EVERY node, dropout p = 0.5
  (F.dropout's default), on the hidden state h, not on c; the training loss sums the
  per-node losses of a tree (``BinaryTreeLSTM.forward``).
* classes: 3 in binary mode (negative, neutral, positive: the node labels of the training
  trees); at evaluation the released trainer (``treeLSTM/trainer.py``, ``test`` and
  ``test_classification_net``) overwrites the neutral output with -9999 before the argmax.

TRAIN / EVAL OUTPUTS DIFFER (the one model in focalcal whose output shape depends on mode):

* ``model.train()``: node logits (N, node_classes, M) over every node of every tree — the
  (N, C, *) layout of the segmentation losses; padding nodes get 0 and must carry target
  -100 (ignore_index) in the loss.
* ``model.eval()``: root logits (N, num_classes), the root's first ``num_classes`` logits:
  the neutral class (index num_classes, last) is dropped. The argmax equals the released
  masked argmax; the softmax is renormalised over {negative, positive}, whereas the
  released evaluation (trainer.py ``test_classification_net``, Experiments/
  temperature_scaling_sst.py ``_ECELoss_sst``) takes the 3-class softmax and only hides the
  neutral probability, so its confidences are max(p_neg, p_pos) of a 3-way softmax.

Input (N, M, 4) int64, one row per node, node 0 the root: [word id (>= 0 leaf, -1 internal),
left child, right child (-1 for a leaf), height (0 leaf, 1 + max child height)]; padding
rows are all -1. Heights make the batching possible: all nodes of one height, across the
batch, depend only on lower heights, so they are computed in one vectorised step; the only
Python loop runs over heights (our own implementation; the released code recurses one node
at a time).
"""

from __future__ import annotations

import torch
from torch import nn

from ._layers import check_positive_int, check_probability
from ._text import EmbeddingMixin

COLUMNS = ("word", "left", "right", "height")


#: The vocabulary size of a Tree-LSTM built without data (tests, benchmarks, example inputs); a
#: run's model gets its data set's (focalcal.training.factories.DATASET_MODEL_OPTIONS).
PLACEHOLDER_VOCAB_SIZE = 20000


class BinaryTreeLSTM(EmbeddingMixin, nn.Module):
    """Constituency Tree-LSTM sentiment classifier; see the module docstring for the I/O contract."""

    def __init__(
        self,
        num_classes: int,
        *,
        vocab_size: int = PLACEHOLDER_VOCAB_SIZE,  # a run gets its data set's (the trainer passes it)
        embedding_dim: int = 300,
        memory_dim: int = 150,
        dropout: float = 0.5,
        node_classes: int | None = None,
        freeze_embeddings: bool = False,
        output_gate: bool = False,
    ):
        super().__init__()
        self._build_embedding(vocab_size, embedding_dim, freeze=freeze_embeddings)
        self.num_classes = check_positive_int(num_classes, "num_classes")
        self.node_classes = (num_classes + 1 if node_classes is None
                             else check_positive_int(node_classes, "node_classes"))
        if self.node_classes < num_classes:
            raise ValueError(f"node_classes={node_classes} must be >= num_classes={num_classes}")
        if not isinstance(output_gate, bool):
            raise ValueError(f"output_gate must be True or False, got {output_gate!r}")  # noqa: TRY004
        self.memory_dim = check_positive_int(memory_dim, "memory_dim")
        self.output_gate = output_gate
        gates = 5 if output_gate else 4  # i, f_left, f_right, u (, o) — in this order
        self.leaf = nn.Linear(embedding_dim, 2 * memory_dim)  # rows: c, then o
        self.compose_left = nn.Linear(memory_dim, gates * memory_dim)
        self.compose_right = nn.Linear(memory_dim, gates * memory_dim)
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))
        self.classifier = nn.Linear(memory_dim, self.node_classes)

    # ------------------------------------------------------------------ cells
    def _leaf_states(self, words: torch.Tensor) -> torch.Tensor:
        c, o = self.leaf(self.embedding(words)).chunk(2, dim=1)
        return torch.cat([c, torch.sigmoid(o) * torch.tanh(c)], dim=1)

    def _compose(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """[c | h] of the parents from the [c | h] rows of their left and right children."""
        d = self.memory_dim
        gates = self.compose_left(left[:, d:]) + self.compose_right(right[:, d:])
        i, f_left, f_right, u = (gates[:, k * d:(k + 1) * d] for k in range(4))
        c = (torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_left) * left[:, :d]
             + torch.sigmoid(f_right) * right[:, :d])
        h = torch.tanh(c)
        if self.output_gate:
            h = torch.sigmoid(gates[:, 4 * d:]) * h
        return torch.cat([c, h], dim=1)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        valid = self._check_trees(x)
        n, m = x.shape[:2]
        flat = x.reshape(n * m, 4)
        height = flat[:, 3]
        offsets = torch.arange(n, device=x.device).repeat_interleave(m) * m
        # Nodes grouped by height, padding (-1) first: one sort instead of a mask per level.
        order = torch.argsort(height, stable=True)
        counts = torch.bincount(height + 1).tolist() if n * m else [0]
        states = torch.zeros(n * m, 2 * self.memory_dim, dtype=self.leaf.weight.dtype, device=x.device)
        start = counts[0]
        for level, count in enumerate(counts[1:]):
            nodes = order[start:start + count]
            start += count
            if level == 0:
                new = self._leaf_states(flat[nodes, 0])
            else:
                left = states.index_select(0, flat[nodes, 1] + offsets[nodes])
                right = states.index_select(0, flat[nodes, 2] + offsets[nodes])
                new = self._compose(left, right)
            # In place on the buffer is safe for autograd: index_select saves only indices, so
            # no op needs the buffer's old values in backward.
            states.index_copy_(0, nodes, new)
        hidden = states[:, self.memory_dim:]
        if not self.training:
            root = hidden[torch.arange(n, device=x.device) * m]
            return self.classifier(root)[:, : self.num_classes]
        logits = self.classifier(self.dropout(hidden)).view(n, m, self.node_classes)
        logits = logits.masked_fill(~valid.unsqueeze(2), 0.0)
        return logits.permute(0, 2, 1).contiguous()

    def _check_trees(self, x: torch.Tensor) -> torch.Tensor:
        """Validate the (N, M, 4) encoding (vectorised); return the (N, M) mask of real nodes.

        The level loop trusts the heights: a wrong height would silently read a child state
        not computed yet, so the contract is checked, not assumed."""
        if x.ndim != 3 or x.shape[2] != 4 or x.dtype != torch.int64 or x.shape[1] < 1:
            raise ValueError(
                "BinaryTreeLSTM expects int64 trees of shape (N, M, 4) with columns "
                f"{list(COLUMNS)} and node 0 the root, got {x.dtype} {tuple(x.shape)}"
            )
        n, m = x.shape[:2]
        word, left, right, height = x.unbind(2)
        valid = height >= 0
        leaf, internal = height == 0, height > 0

        def fail(what: str):
            raise ValueError(f"BinaryTreeLSTM: malformed tree batch: {what}")

        if not valid[:, 0].all():
            fail("node 0 (the root) is a padding row")
        if not (x[~valid] == -1).all():
            fail("padding rows must be [-1, -1, -1, -1] (height -1 marks padding)")
        if not ((word[leaf] >= 0).all() and (left[leaf] == -1).all() and (right[leaf] == -1).all()):
            fail("a height-0 node must be a leaf: word id >= 0, children -1")
        if not (word[internal] == -1).all():
            fail("an internal node (height > 0) must have word id -1")
        children_in_range = (left >= 0) & (left < m) & (right >= 0) & (right < m)
        if not children_in_range[internal].all():
            fail(f"an internal node's children must be node indices in [0, {m})")
        self._check_token_range(word[leaf], "BinaryTreeLSTM")
        rows = torch.arange(n, device=x.device).unsqueeze(1).expand(n, m)
        left_height = height[rows, left.clamp(min=0)]
        right_height = height[rows, right.clamp(min=0)]
        expected = 1 + torch.maximum(left_height, right_height)
        if not ((left_height >= 0) & (right_height >= 0) & (height == expected))[internal].all():
            fail("an internal node's height must be 1 + max(child heights), its children real nodes")
        return valid


# --------------------------------------------------------------------------- building trees


def encode_tree(tree) -> list[list[int]]:
    """Rows [word, left, right, height] of a nested tree: an int is a leaf's word id, a pair
    ``(left, right)`` an internal node. Pre-order numbering puts the root at row 0."""
    rows: list[list[int]] = []

    def visit(node) -> tuple[int, int]:
        index = len(rows)
        rows.append([])
        if isinstance(node, int):
            rows[index] = [node, -1, -1, 0]
            return index, 0
        left, left_height = visit(node[0])
        right, right_height = visit(node[1])
        rows[index] = [-1, left, right, 1 + max(left_height, right_height)]
        return index, rows[index][3]

    visit(tree)
    return rows


def pad_trees(encoded: list[list[list[int]]], num_nodes: int | None = None) -> torch.Tensor:
    """Stack encoded trees into (N, M, 4), padding with [-1, -1, -1, -1] rows."""
    m = max(len(rows) for rows in encoded) if num_nodes is None else num_nodes
    batch = torch.full((len(encoded), m, 4), -1, dtype=torch.int64)
    for i, rows in enumerate(encoded):
        batch[i, : len(rows)] = torch.tensor(rows, dtype=torch.int64)
    return batch


def random_tree(words: list[int], generator: torch.Generator | None = None):
    """A random binary bracketing of ``words`` (order kept, as in a parse tree)."""
    nodes: list = list(words)
    while len(nodes) > 1:
        i = int(torch.randint(len(nodes) - 1, (1,), generator=generator))
        nodes[i:i + 2] = [(nodes[i], nodes[i + 1])]
    return nodes[0]


def example_trees(n: int, leaves: int = 19, vocab_size: int = PLACEHOLDER_VOCAB_SIZE, *, generator=None) -> torch.Tensor:
    """``n`` random trees of ``leaves`` words (2 * leaves - 1 nodes; 19 words ~ an SST sentence)."""
    trees = [random_tree(torch.randint(vocab_size, (leaves,), generator=generator).tolist(), generator)
             for _ in range(n)]
    return pad_trees([encode_tree(tree) for tree in trees], 2 * leaves - 1)


__all__ = ["COLUMNS", "BinaryTreeLSTM", "encode_tree", "example_trees", "pad_trees", "random_tree"]
