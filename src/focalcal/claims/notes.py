"""A claim note gives reasons, never measurements: every figure on the report comes from the run.

``report.claim_notes`` (claim key -> text) may explain why a setting differs from the paper,
with its source; the figures that decided a verdict are the run's own, in ``claims.csv`` and
``claims_pairs.csv``, and the report shows them. A figure typed into a note was measured on
some other run (another machine, another commit) and would stand beside this run's numbers
as if it were one of them, so :func:`measured_figures` finds what reads as one and the config
check refuses the note. A published value is cited by its table or figure, not copied.

What reads as a measured figure:

* a number with a unit of measurement: ``14.6 %``, ``0.3 points``, ``2.7 px``, ``0.19 nats``,
  ``1.46×``, ``10 s``;
* a signed number: ``+0.2``, ``-1.4``, ``−0.005``, ``± 0.4``;
* a decimal range: ``0.82-0.83``, ``1.0 to 2.7``;
* a metric followed by a number: ``T = 2.7``, ``ECE 14.6``, ``IoU 0.82``, ``mean of 3``;
* a count of the evidence: ``21 pairs``, ``4 of 5 folds``.

Settings and references stay allowed: ``γ = 3``, ``LS 0.1``, ``3 seeds``, ``§6.1``,
``Table 1``, ``MNIST-1D``, ``FLSD-53``.
"""

from __future__ import annotations

import re

_NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
_PATTERNS = (
    # a number with a unit of measurement
    (rf"(?<![\w.]){_NUMBER}\s*(?:%|×|(?:percent|percentage points?|points?|pp|px|pixels?|nats?|bits|s|seconds?|min|"
     rf"minutes?|hours?)\b)"),
    # a signed number (a hyphen inside a word or between digits, as in FL-3 or γ = 0-3, is no sign)
    rf"(?<![\w.)])[+\-−±]\s?{_NUMBER}",
    # a decimal range
    rf"(?<![\w.§]){_NUMBER}\.?\d*\s*(?:to|–|—|-)\s*[+\-−]?\d+\.\d+|(?<![\w.§])\d+\.\d+\s*(?:to|–|—|-)\s*[+\-−]?\d",
    # a metric followed by its value
    (r"\b(?:ECE|AdaECE|NLL|error|accuracy|IoU|Dice|Hausdorff(?: distance)?|temperature|T|KL|mean|median|"
     rf"confidence|share|norm|gap|difference|interval)\s*(?:=|≈|:|of|is|was|at)?\s*(?:about\s+)?{_NUMBER}"),
    # a count of the evidence
    r"\b\d+\s+(?:pairs?|rows?)\b",
    r"\b\d+\s+(?:of|out of)\s+\d+\b",
)
_MEASURED = re.compile("|".join(f"(?:{pattern})" for pattern in _PATTERNS), re.IGNORECASE)


def measured_figures(text: str) -> list[str]:
    """The parts of ``text`` that read as figures a run measures (empty: the note is reasons only)."""
    return [match.group(0).strip() for match in _MEASURED.finditer(text)]


def note_problems(notes: dict, where: str = "report.claim_notes") -> list[str]:
    """One line per note that states a measured figure, naming its key path and the figures."""
    problems = []
    for key, text in notes.items():
        found = measured_figures(str(text))
        if found:
            shown = ", ".join(repr(figure) for figure in found[:5]) + (" …" if len(found) > 5 else "")
            problems.append(f"{where}.{key}: states figure(s) the run measures ({shown}); a note gives reasons (why a "
                            "setting differs from the paper, with its source), the report shows this run's own "
                            "figures beside it; cite a published value by its table or figure")
    return problems
