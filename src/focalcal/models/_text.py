"""The word-embedding layer the two text models share (mukhoti2020 §5: 20 Newsgroups, SST).

Both released pipelines keep the embedding outside the network, fill it with GloVe vectors
and then either freeze it (20 Newsgroups: torrvision/focal_calibration 20newsgroup_train.py
optimises ``net.parameters()`` only and looks the words up under ``torch.no_grad``) or tune
it (SST: treeLSTM/trainer.py steps it by hand with ``--emblr``). Here the embedding is part of
the model, so a checkpoint and ``count_parameters`` include it; ``freeze_embeddings`` says
which of the two it is.
"""

from __future__ import annotations

import torch
from torch import nn

from ._layers import check_positive_int


class EmbeddingMixin:
    """``self.embedding`` (an ``nn.Embedding``) plus loading GloVe-style matrices into it."""

    embedding: nn.Embedding

    def _build_embedding(
        self, vocab_size: int, embedding_dim: int, *, freeze: bool, padding_idx: int | None = None
    ) -> None:
        check_positive_int(vocab_size, "vocab_size")
        check_positive_int(embedding_dim, "embedding_dim")
        if not isinstance(freeze, bool):  # option errors are ValueErrors throughout focalcal.models
            raise ValueError(f"freeze_embeddings must be True or False, got {freeze!r}")  # noqa: TRY004
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=padding_idx)
        self.embedding.weight.requires_grad_(not freeze)

    @property
    def embeddings_frozen(self) -> bool:
        return not self.embedding.weight.requires_grad

    def load_pretrained_embeddings(self, matrix: torch.Tensor) -> None:
        """Copy ``matrix`` (vocab_size, embedding_dim), e.g. GloVe rows in vocabulary order, into
        the embedding. The padding row, where the model has one, is kept at zero: no word maps
        to it (in the released 20 Newsgroups matrix row 0 is zero for the same reason)."""
        expected = tuple(self.embedding.weight.shape)
        if not isinstance(matrix, torch.Tensor) or not matrix.is_floating_point():
            raise ValueError(f"pretrained embeddings must be a floating-point tensor of shape {expected}, "
                             f"got {type(matrix).__name__} {getattr(matrix, 'dtype', '')}")
        if tuple(matrix.shape) != expected:
            raise ValueError(f"pretrained embeddings must have shape (vocab_size, embedding_dim) = {expected}, "
                             f"got {tuple(matrix.shape)}")
        if not torch.isfinite(matrix).all():
            raise ValueError("pretrained embeddings contain NaN or infinite values")
        with torch.no_grad():
            self.embedding.weight.copy_(matrix)
            if self.embedding.padding_idx is not None:
                self.embedding.weight[self.embedding.padding_idx].zero_()

    def _check_token_range(self, tokens: torch.Tensor, model: str) -> None:
        """Out-of-vocabulary ids would otherwise fail inside the embedding with an index error.

        Checked in the forward on the CPU only: on a GPU, or while compiling, reading the largest
        id back would stall the device and stop a CUDA-graph capture, so there the trainer checks
        each data set's ids once at load (``check_inputs``)."""
        if tokens.device.type == "cpu" and not torch.compiler.is_compiling():
            self.check_token_ids(tokens, model)

    def check_token_ids(self, tokens: torch.Tensor, model: str) -> None:
        """Every id in ``tokens`` is below ``vocab_size`` (one read-back)."""
        if tokens.numel():
            largest = int(tokens.max())
            if largest >= self.embedding.num_embeddings:
                raise ValueError(f"{model} got word id {largest} >= vocab_size={self.embedding.num_embeddings}; "
                                 "build the model with the data set's vocab_size")
