"""A paper's claim as data, and the comparisons claims are made of.

A :class:`Claim` has its statement (paraphrased from the paper), where the paper makes it,
what it compares (runs, metric, calibrator), the direction of the paired difference, and a
function from :class:`StudyEvidence` to the paired differences — or to :class:`NotTestable`
naming what the config lacks. The comparison helpers below build those differences for the
three shapes claims take: loss against loss, calibrator against calibrator on the same run,
and a trend along an ordered ladder (γ = 0, 1, 2, 3 …) within a unit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import pandas as pd

from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import Direction, NotTestable, Pairs


@dataclass(frozen=True)
class Claim:
    key: str
    paper: str
    statement: str
    source: str  # the paper's section / table / figure
    compares: str  # the difference d, in words: "ECE before TS: FL-3 − CE"
    direction: Direction  # where the paper puts the mean of d against the threshold
    test: Callable[[StudyEvidence], Pairs | NotTestable]
    threshold: float = 0.0  # 0 except for "on par" claims, whose margin is ours (said in `compares`)


def _missing(what: str) -> NotTestable:
    return NotTestable(f"this study has no {what}")


def pair_series(pairs: Pairs, a: pd.Series, b: pd.Series, label: str) -> None:
    """Add a − b for every unit the two series share."""
    for unit in a.index.intersection(b.index):
        pairs.add(float(a[unit] - b[unit]), unit, label)


def compare_losses(evidence: StudyEvidence, candidates: Sequence[str], baseline: str | None, metric: str,
                   calibrator: str | None, *, bins=None, datasets=None, what: str = "") -> Pairs | NotTestable:
    """d = metric(candidate) − metric(baseline) on the same unit and calibrator."""
    if baseline is None:
        return _missing(f"baseline run for {what}" if what else "baseline run")
    if not candidates:
        return _missing(f"candidate run for {what}" if what else "candidate run")
    pairs = Pairs()
    base = evidence.values(baseline, metric, calibrator, bins, datasets=datasets)
    for loss in candidates:
        pair_series(pairs, evidence.values(loss, metric, calibrator, bins, datasets=datasets), base, f"{loss} − {baseline}")
    return pairs


def compare_calibrators(evidence: StudyEvidence, losses: Sequence[str], calibrator: str | None, comparator: str | None,
                    metric: str, *, bins=None, datasets=None) -> Pairs:
    """d = metric(calibrator) − metric(comparator) on the same run, for each of ``losses``."""
    pairs = Pairs()
    for loss in losses:
        pair_series(pairs, evidence.values(loss, metric, calibrator, bins, datasets=datasets),
                    evidence.values(loss, metric, comparator, bins, datasets=datasets), f"{loss}: {calibrator} − {comparator}")
    return pairs


def compare_with_best(evidence: StudyEvidence, candidate: str, others: Sequence[str], metric: str, calibrator: str | None,
                      *, bins=None, cls=None, best=min, datasets=None) -> Pairs:
    """d = metric(candidate) − best(metric of every other loss) on the same unit (of ``datasets``, if given)."""
    pairs = Pairs()
    mine = evidence.values(candidate, metric, calibrator, bins, cls=cls, datasets=datasets)
    frame = pd.concat({loss: evidence.values(loss, metric, calibrator, bins, cls=cls, datasets=datasets)
                       for loss in others}, axis=1)
    frame = frame.dropna()  # a unit counts only where every other loss ran
    if frame.empty:
        return pairs
    reference = frame.min(axis=1) if best is min else frame.max(axis=1)
    pair_series(pairs, mine, reference, f"{candidate} − {best.__name__} of {len(others)} others")
    return pairs


def trend(evidence: StudyEvidence, ladder: Sequence[tuple[float, str]], metric: str, calibrator: str | None, *,
          bins=None, datasets=None) -> Pairs:
    """d = metric(next level) − metric(level) for neighbouring levels of ``ladder`` within each unit.

    ``ladder`` is (level, loss key) sorted by level (e.g. γ_train). A unit contributes one
    difference per neighbouring pair it has both of.
    """
    pairs = Pairs()
    series = [(level, loss, evidence.values(loss, metric, calibrator, bins, datasets=datasets)) for level, loss in ladder]
    for (low_level, low_loss, low), (high_level, high_loss, high) in pairwise(series):
        pair_series(pairs, high, low, f"{metric} at {high_level:g} − at {low_level:g} ({high_loss} − {low_loss})")
    return pairs


def ladder(evidence: StudyEvidence, accept: Callable) -> list[tuple[float, str]]:
    """(γ, loss key) of the study's losses with a single γ that pass ``accept``, by γ; one key per γ."""
    found: dict[float, str] = {}
    for key in evidence.loss_keys(lambda info: info.gamma is not None and accept(info)):
        found.setdefault(evidence.losses[key].gamma, key)
    return sorted(found.items())
