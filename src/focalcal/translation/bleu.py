"""Corpus BLEU by sacrebleu (Post 2018), with the signature that makes a score reproducible.

sacrebleu's defaults: one reference per sentence, mixed case, its "13a" tokeniser (the WMT
standard mteval-v13a) and exponential smoothing. The signature records them and sacrebleu's
version, so a score can be set beside a published one only where the signatures say how.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BleuScore:
    """BLEU in [0, 100] and sacrebleu's signature of how it was computed."""

    score: float
    signature: str


def signature() -> str:
    """sacrebleu's signature of the BLEU :func:`corpus_bleu` computes: its settings and sacrebleu's
    version (the number of references is known once a corpus is scored: one, as the decodes are)."""
    return corpus_bleu(["."], ["."]).signature


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> BleuScore:
    """Corpus BLEU of detokenised hypotheses against one detokenised reference each."""
    from sacrebleu.metrics import BLEU

    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(
            f"need one reference per hypothesis and at least one pair, got {len(hypotheses)} "
            f"hypotheses and {len(references)} references"
        )
    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
        if bad is not None:
            raise ValueError(f"{name}[{bad}] is not a string: {texts[bad]!r}")
    metric = BLEU()
    score = metric.corpus_score(hypotheses, [references])
    return BleuScore(float(score.score), str(metric.get_signature()))
