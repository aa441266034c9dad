"""The Transformer encoder-decoder of Vaswani et al. 2017, from torch's own layers.

As in the paper: post-norm residual blocks (LayerNorm after each residual sum), sinusoidal
positions added to embeddings scaled by sqrt(d_model), ReLU feed-forward layers, and one
embedding matrix shared by the source, the target and the pre-softmax projection (§3.4; the
shared source/target vocabulary makes this possible). ``dropout`` is §5.4's residual dropout:
on each sub-layer's output before its residual sum and on the embedding + position sums.
Dropout on the attention weights (``attention_dropout``) and after the feed-forward ReLU
(``activation_dropout``), which torch's layers would tie to ``dropout`` and the paper does not
state, are options of their own. Embeddings start from N(0, d_model^-1/2), as fairseq's Transformer (the paper is
silent). Padding (``pad_id``) is masked in every attention over it; the decoder's
self-attention is causal.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def sinusoidal_positions(max_length: int, d_model: int) -> torch.Tensor:
    """(max_length, d_model) table: sin at even, cos at odd dimensions, wavelengths 2π..10000·2π (§3.5)."""
    position = torch.arange(max_length, dtype=torch.float64)[:, None]
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table.float()


class Transformer(nn.Module):
    """Encoder-decoder over one shared vocabulary; ``forward(source, target_in)`` gives (B, T, V) logits."""

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        d_ff: int,
        dropout: float,
        max_length: int,
        pad_id: int = 0,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
    ):
        super().__init__()
        for name, value in (
            ("vocab_size", vocab_size),
            ("d_model", d_model),
            ("n_heads", n_heads),
            ("n_layers", n_layers),
            ("d_ff", d_ff),
            ("max_length", max_length),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if d_model % n_heads or d_model % 2:
            raise ValueError(f"d_model must be even and divisible by n_heads, got d_model={d_model}, n_heads={n_heads}")
        for name, value in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
            ("activation_dropout", activation_dropout),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
        if not 0 <= pad_id < vocab_size:
            raise ValueError(f"pad_id must be a token id below vocab_size={vocab_size}, got {pad_id!r}")
        self.d_model, self.pad_id, self.max_length = d_model, pad_id, max_length
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model**-0.5)
        with torch.no_grad():
            self.embedding.weight[pad_id].zero_()
        self.register_buffer("positions", sinusoidal_positions(max_length, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

        def encoder_layer():
            layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=False)
            return _set_inner_dropout(layer, attention_dropout, activation_dropout)

        def decoder_layer():
            layer = nn.TransformerDecoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=False)
            return _set_inner_dropout(layer, attention_dropout, activation_dropout)

        # enable_nested_tensor=False: the fast path would change padded rows' arithmetic
        self.encoder = nn.TransformerEncoder(encoder_layer(), n_layers, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(decoder_layer(), n_layers)

    @property
    def vocab_size(self) -> int:
        return self.embedding.num_embeddings

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"token ids must be (batch, length), got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.max_length:
            raise ValueError(f"a sequence of {tokens.shape[1]} tokens exceeds max_length={self.max_length}")
        scaled = self.embedding(tokens) * math.sqrt(self.d_model)
        return self.dropout(scaled + self.positions[: tokens.shape[1]])

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(memory (B, S, d_model), source padding mask (B, S), True at PAD)."""
        padding = source == self.pad_id
        with attention_kernels(source.device):
            return self.encoder(self._embed(source), src_key_padding_mask=padding), padding

    def decode(self, memory: torch.Tensor, source_padding_mask: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of the next token after each prefix of ``target_in`` (BOS first)."""
        length = target_in.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=target_in.device).triu(1)
        with attention_kernels(target_in.device):
            hidden = self.decoder(
                self._embed(target_in),
                memory,
                tgt_mask=causal,
                tgt_key_padding_mask=target_in == self.pad_id,
                memory_key_padding_mask=source_padding_mask,
                tgt_is_causal=True,
            )
        return F.linear(hidden, self.embedding.weight)

    def decode_step(
        self,
        memory: torch.Tensor,
        source_padding_mask: torch.Tensor,
        target_in: torch.Tensor,
        cache: list[torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (B, V) after the last token of ``target_in``, and the cache for the next step.

        The same as ``decode(...)[:, -1]`` in eval mode, computing only the last position: in a
        post-norm decoder a layer's output at position t depends on that layer's inputs at
        positions <= t alone, so ``cache`` keeps each layer's inputs (B, t, d_model) of the
        earlier positions (None at the first step). Beam search reorders it with the beams.
        """
        if self.training:
            raise ValueError("decode_step runs in eval mode only (dropout off); call model.eval() first")
        position = target_in.shape[1] - 1
        if position >= self.max_length:
            raise ValueError(f"a sequence of {position + 1} tokens exceeds max_length={self.max_length}")
        x = self.embedding(target_in[:, -1:]) * math.sqrt(self.d_model) + self.positions[position]
        layers = self.decoder.layers
        cache = [None] * len(layers) if cache is None else cache
        updated = []
        for layer, past in zip(layers, cache):
            keys = x if past is None else torch.cat([past, x], dim=1)
            updated.append(keys)
            x = layer.norm1(x + layer.self_attn(x, keys, keys, need_weights=False)[0])
            attended = layer.multihead_attn(
                x, memory, memory, key_padding_mask=source_padding_mask, need_weights=False
            )[0]
            x = layer.norm2(x + attended)
            x = layer.norm3(x + layer.linear2(layer.activation(layer.linear1(x))))
        return F.linear(x[:, 0], self.embedding.weight), updated

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        memory, padding = self.encode(source)
        return self.decode(memory, padding, target_in)


def attention_kernels(device: torch.device):
    """Where the attention runs: on the CPU, torch's plain (math) kernel. With the stand-in's
    heads of 16 dimensions and sentences of ~30 tokens its training steps take less CPU than
    with the fused flash kernel torch would pick (bench/RESULTS.md, "Translation");
    elsewhere torch's own choice."""
    import contextlib

    if device.type != "cpu":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH)


def _set_inner_dropout(layer: nn.Module, attention: float, activation: float) -> nn.Module:
    """A torch encoder/decoder layer built with ``dropout`` = the residual rate, its attention
    weights' dropout and its feed-forward activation's dropout set apart (torch ties all to one)."""
    for attention_module in (layer.self_attn, getattr(layer, "multihead_attn", None)):
        if attention_module is not None:
            attention_module.dropout = float(attention)  # MultiheadAttention's dropout on its softmax weights
    layer.dropout = nn.Dropout(activation)  # linear2(dropout(relu(linear1(x)))); dropout1..3 stay residual
    return layer


def transformer_base(
    vocab_size: int,
    max_length: int = 1024,
    *,
    dropout: float = 0.1,
    attention_dropout: float = 0.0,
    activation_dropout: float = 0.0,
) -> Transformer:
    """Vaswani et al. 2017's base model (Table 3): d_model 512, 8 heads, 6 + 6 layers, d_ff 2048,
    residual dropout 0.1 (§5.4). No dropout on the attention weights or after the ReLU: the
    authors' released set-up, tensor2tensor's ``transformer_base_v1``
    (tensor2tensor/models/transformer.py: ``attention_dropout`` 0.0, ``relu_dropout`` 0.0, with
    ``layer_prepostprocess_dropout`` 0.1 from tensor2tensor/layers/common_hparams.py
    ``basic_params1``, whose post-norm "dan" it notes is the published Transformer); the later
    ``transformer_base_v2`` sets both to 0.1 together with pre-norm and 8,000 warm-up steps, a
    set-up the paper does not describe. fairseq agrees: ``attention_dropout`` and
    ``activation_dropout`` 0.0 in fairseq/models/transformer/transformer_legacy.py
    ``base_architecture``, which ``transformer_wmt_en_de`` is."""
    return Transformer(
        vocab_size,
        512,
        8,
        6,
        2048,
        dropout,
        max_length,
        attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
    )


def transformer_small(
    vocab_size: int,
    max_length: int = 64,
    *,
    dropout: float = 0.1,
    attention_dropout: float = 0.0,
    activation_dropout: float = 0.0,
) -> Transformer:
    """The stand-in's size (our choice, bench/RESULTS.md "Translation"): d_model 64, 4 heads, 2 + 2
    layers, d_ff 128, and the base model's dropout (residual 0.1 only). In trials on the stand-in
    (``translation_standin`` at 6 epochs) d_ff 128 left the plateau sooner than d_ff 256, for
    less CPU a step (``python -m bench translation_standin``), and dropout on the attention weights and the ReLU slowed
    training without a gain."""
    return Transformer(
        vocab_size,
        64,
        4,
        2,
        128,
        dropout,
        max_length,
        attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
    )
