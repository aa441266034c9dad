"""Beam search and greedy decoding with the softmax at a temperature T, batched over sentences.

Each step scores a hypothesis's next token by log softmax(z / T); a finished hypothesis Y
(EOS included in |Y|) scores log P(Y) / lp(Y) with the length penalty of Wu et al. 2016,
lp(Y) = ((5 + |Y|) / 6)^α, which Vaswani et al. 2017 §6.1 use with beam 4 and α = 0.6.
Which hypotheses finish follows fairseq's sequence generator: of the 2K best extensions of a
sentence's K beams, an EOS among the best K finishes a hypothesis (in rank order, while fewer
than K have finished: a sentence keeps at most K), the best K others carry on, and a sentence
is done once K hypotheses have finished (or at its length limit). A hypothesis the cap drops
never is the output: it finished at the same length as a kept one, after it in rank order, so
with a lower score. So beam size 1 is exactly greedy decoding. A sentence's output is at most
``max_length`` tokens, EOS included: at that length EOS is forced (default length: the
source's plus 50, Vaswani §6.1, capped by the model's positions). PAD and BOS are never generated; the other tokens keep their probabilities.

``model`` is anything with ``encode(source) -> (memory, source_padding_mask)`` and
``decode(memory, source_padding_mask, target_in) -> logits (B, T, V)``
(:class:`~focalcal.models.transformer.Transformer`). A model with ``decode_step`` (the
Transformer's) computes only the new position at each step from its cache; otherwise each
step re-decodes the whole prefix.
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from focalcal.data.translation import BOS_ID, EOS_ID, PAD_ID

EXTRA_LENGTH = 50  # Vaswani et al. 2017 §6.1: maximum output length = input length + 50


def length_penalty(length: int, alpha: float) -> float:
    """((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def _check(beam_size, length_penalty_alpha, temperature) -> None:
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}")
    if not (isinstance(length_penalty_alpha, (int, float)) and math.isfinite(length_penalty_alpha)):
        raise ValueError(f"length_penalty must be a finite number, got {length_penalty_alpha!r}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}")


def _limits(model, source: torch.Tensor, max_length) -> torch.Tensor:
    """Per sentence, the most tokens it may generate, EOS included."""
    if source.dim() != 2 or source.shape[0] == 0:
        raise ValueError(f"source must be a non-empty (batch, length) tensor of ids, got shape {tuple(source.shape)}")
    if max_length is None:
        limits = (source != PAD_ID).sum(1) + EXTRA_LENGTH
    elif isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length must be a positive integer or None, got {max_length!r}")
    else:
        limits = torch.full((source.shape[0],), max_length, dtype=torch.long)
    cap = getattr(model, "max_length", None)
    return limits.clamp(max=cap).cpu() if cap is not None else limits.cpu()


def _next_log_probs(model, memory, padding, tokens, temperature: float, cache):
    """(log softmax(z / T) of the next token (rows, V), the decoder's cache or None)."""
    if hasattr(model, "decode_step"):
        logits, cache = model.decode_step(memory, padding, tokens, cache)
    else:
        logits = model.decode(memory, padding, tokens)[:, -1]
    log_probs = F.log_softmax(logits.float() / temperature, dim=-1)
    log_probs[:, [PAD_ID, BOS_ID]] = -math.inf  # never generated (as fairseq's PAD)
    return log_probs, cache


@torch.no_grad()
def beam_search(
    model,
    source: torch.Tensor,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    temperature: float = 1.0,
    max_length: int | None = None,
) -> list[list[int]]:
    """The best hypothesis of each source sentence (ids without BOS/EOS); see the module docstring."""
    hypotheses = finished_hypotheses(model, source, beam_size, length_penalty, temperature, max_length)
    return [best[0][1] for best in hypotheses]


@torch.no_grad()
def finished_hypotheses(
    model,
    source: torch.Tensor,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    temperature: float = 1.0,
    max_length: int | None = None,
) -> list[list[tuple[float, list[int]]]]:
    """Per source sentence, the (at most ``beam_size``) hypotheses beam search finished, best
    first: (log P(Y) / lp(Y), ids without BOS/EOS). :func:`beam_search` returns the first of each."""
    alpha = length_penalty
    _check(beam_size, alpha, temperature)
    limits = _limits(model, source, max_length)
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        return _search(model, source, beam_size, alpha, float(temperature), limits)
    finally:
        if was_training:
            model.train()


def _search(model, source, beam_size: int, alpha: float, temperature: float,
            limits: torch.Tensor) -> list[list[tuple[float, list[int]]]]:
    n, k = source.shape[0], beam_size
    memory, padding = model.encode(source)
    memory, padding = memory.repeat_interleave(k, 0), padding.repeat_interleave(k, 0)
    device = source.device
    tokens = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((n, k), -math.inf, device=device)
    scores[:, 0] = 0.0  # one live beam at the start: the others would repeat it
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    alive = list(range(n))  # sentences still decoding, in the order of the rows of memory / tokens
    step, cache = 0, None
    while alive:
        log_probs, cache = _next_log_probs(model, memory, padding, tokens, temperature, cache)
        vocab = log_probs.shape[-1]
        candidates = scores[:, :, None] + log_probs.view(len(alive), k, vocab)
        at_limit = limits[alive] <= step + 1
        if at_limit.any():  # force EOS
            eos_scores = candidates[at_limit.to(device), :, EOS_ID].clone()
            candidates[at_limit.to(device)] = -math.inf
            candidates[at_limit.to(device), :, EOS_ID] = eos_scores
        top_scores, top_ids = candidates.view(len(alive), k * vocab).topk(min(2 * k, k * vocab), dim=1)
        top_beams, top_tokens = (top_ids // vocab).tolist(), (top_ids % vocab).tolist()
        top_values = top_scores.tolist()
        limited = at_limit.tolist()
        keep_rows, keep_tokens, keep_scores, still_alive = [], [], [], []
        penalty = length_penalty(step + 1, alpha)
        for row, sentence in enumerate(alive):
            rows, new_tokens, new_scores = [], [], []
            for rank, (beam, token, value) in enumerate(zip(top_beams[row], top_tokens[row], top_values[row])):
                if token == EOS_ID:
                    if rank < k and value > -math.inf and len(finished[sentence]) < k:
                        prefix = tokens[row * k + beam, 1:].tolist()
                        finished[sentence].append((value / penalty, prefix))
                elif len(rows) < k:
                    rows.append(row * k + beam)
                    new_tokens.append(token)
                    new_scores.append(value)
            # done: K finished, EOS forced at its length limit, or no live beam left
            if len(finished[sentence]) >= k or limited[row] or all(v == -math.inf for v in new_scores):
                continue
            while len(rows) < k:  # fewer than K live extensions (tiny vocabularies): pad with dead beams
                rows.append(row * k)
                new_tokens.append(PAD_ID)
                new_scores.append(-math.inf)
            still_alive.append(sentence)
            keep_rows += rows
            keep_tokens += new_tokens
            keep_scores.append(new_scores)
        if not still_alive:
            break
        index = torch.tensor(keep_rows, dtype=torch.long, device=device)
        tokens = torch.cat([tokens[index], torch.tensor(keep_tokens, device=device)[:, None]], dim=1)
        memory, padding = memory[index], padding[index]
        cache = None if cache is None else [layer[index] for layer in cache]
        scores = torch.tensor(keep_scores, device=device)
        alive = still_alive
        step += 1
    return [sorted(hypotheses, key=lambda pair: -pair[0]) for hypotheses in finished]  # stable: ties keep their order


@torch.no_grad()
def greedy_decode(
    model, source: torch.Tensor, max_length: int | None = None, temperature: float = 1.0
) -> list[list[int]]:
    """The argmax token at each step until EOS (or EOS forced at ``max_length``, as in beam search).

    argmax softmax(z / T) = argmax z for every T > 0, so ``temperature`` does not change the
    output; it is checked and kept for a signature like :func:`beam_search`'s.
    """
    _check(1, 0.0, temperature)
    limits = _limits(model, source, max_length)
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        memory, padding = model.encode(source)
        tokens = torch.full((source.shape[0], 1), BOS_ID, dtype=torch.long, device=source.device)
        done = torch.zeros(source.shape[0], dtype=torch.bool)
        outputs: list[list[int]] = [[] for _ in range(source.shape[0])]
        cache = None
        for step in range(int(limits.max())):
            log_probs, cache = _next_log_probs(model, memory, padding, tokens, float(temperature), cache)
            log_probs = log_probs.cpu()
            best = log_probs.argmax(-1)
            best[limits <= step + 1] = EOS_ID
            for sentence in torch.nonzero(~done).flatten().tolist():
                if int(best[sentence]) == EOS_ID:
                    done[sentence] = True
                else:
                    outputs[sentence].append(int(best[sentence]))
            if done.all():
                break
            tokens = torch.cat([tokens, best.to(source.device)[:, None]], dim=1)
        return outputs
    finally:
        if was_training:
            model.train()
