"""mukhoti2020's 20 Newsgroups network: the Global Pooling CNN (Lin et al. 2014, "Network in
Network", global max pooling instead of a flatten + dense head).

mukhoti2020 App. D: "a PyTorch adaptation of" aviralkumar2907/MMCE. The layers below are
those of MMCE ``20ng_mmce.py`` (``model()``) and of the PyTorch port mukhoti2020 released,
torrvision/focal_calibration ``NewsGroup/ng_model.py`` (``GlobalPoolingCNN``):

    GloVe 6B 100-d embedding of 1000 token ids (ng_loader.py: MAX_SEQUENCE_LENGTH = 1000,
        MAX_NUM_WORDS = 20000, EMBEDDING_DIM = 100), frozen (see _text.py)
    Conv1D(128, 5, valid) + ReLU, MaxPool(5, stride 1)
    Conv1D(128, 5, valid) + ReLU, MaxPool(5, stride 1)
    Conv1D(128, 5, valid) + ReLU
    global max pooling over time -> 128
    Dense(128) + ReLU, dropout 0.3 (keep_prob 0.7 in 20newsgroup_train.py)
    Dense(num_classes)                                   -> ``classifier``

The pooling stride is 1 in both released files (the Keras example they descend from pools
with stride 5 and 35); we follow the released code. Token id 0 is padding (Keras pads with
0 and the released matrix's row 0 is zero); it embeds to a zero vector here too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._layers import check_positive_int, check_probability
from ._text import EmbeddingMixin

PADDING_ID = 0


class GlobalPoolingCNN(EmbeddingMixin, nn.Module):
    """Token ids (N, L) int64 -> logits (N, num_classes). Works for any L >= ``min_length``."""

    def __init__(
        self,
        num_classes: int,
        *,
        vocab_size: int = 20000,  # the released ng_loader.py's MAX_NUM_WORDS; a run gets its data set's
        embedding_dim: int = 100,
        filters: int = 128,
        kernel_size: int = 5,
        pool_size: int = 5,
        hidden: int = 128,
        dropout: float = 0.3,
        freeze_embeddings: bool = True,
    ):
        super().__init__()
        self._build_embedding(vocab_size, embedding_dim, freeze=freeze_embeddings, padding_idx=PADDING_ID)
        for value, name in ((filters, "filters"), (kernel_size, "kernel_size"), (pool_size, "pool_size"),
                            (hidden, "hidden")):
            check_positive_int(value, name)
        self.pool_size = pool_size
        # Channels-first Conv1d on (N, E, L): PyTorch's fast layout on CPU and GPU alike.
        self.conv1 = nn.Conv1d(embedding_dim, filters, kernel_size)
        self.conv2 = nn.Conv1d(filters, filters, kernel_size)
        self.conv3 = nn.Conv1d(filters, filters, kernel_size)
        self.fc = nn.Linear(filters, hidden)
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))
        self.classifier = nn.Linear(hidden, num_classes)
        # Shortest input every layer still has a position for: three valid convolutions, two pools.
        self.min_length = 3 * (kernel_size - 1) + 2 * (pool_size - 1) + 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 2 or x.dtype != torch.int64 or x.shape[1] < self.min_length:
            raise ValueError(
                f"GlobalPoolingCNN expects int64 token ids of shape (N, L) with L >= {self.min_length} "
                f"(0 = padding), got {x.dtype} {tuple(x.shape)}"
            )
        self._check_token_range(x, "GlobalPoolingCNN")
        out = self.embedding(x).transpose(1, 2)  # (N, E, L)
        out = F.max_pool1d(F.relu(self.conv1(out)), self.pool_size, stride=1)
        out = F.max_pool1d(F.relu(self.conv2(out)), self.pool_size, stride=1)
        out = F.relu(self.conv3(out)).amax(dim=2)  # global max pooling over time
        return self.classifier(self.dropout(F.relu(self.fc(out))))

    def check_inputs(self, tokens: torch.Tensor) -> None:
        """A whole split's ids checked once against the vocabulary (the trainer calls it at load),
        so the forward needs no read-back on a GPU."""
        self.check_token_ids(tokens, "GlobalPoolingCNN")


def example_documents(n: int, length: int = 1000, vocab_size: int = 20000, *, generator=None) -> torch.Tensor:
    """``n`` random documents of ``length`` ids, front-padded with 0 as Keras' pad_sequences does."""
    tokens = torch.randint(2, vocab_size, (n, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (n, 1), generator=generator)
    return tokens.masked_fill(torch.arange(length) < length - lengths, PADDING_ID)


__all__ = ["PADDING_ID", "GlobalPoolingCNN", "example_documents"]
