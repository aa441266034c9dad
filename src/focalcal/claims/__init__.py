"""Does the paper hold? Each paper's claims as executable checks over a study's table.

    from focalcal.claims import StudyEvidence, evaluate_study
    rows = evaluate_study(StudyEvidence(study, paper, table, losses, roles, paper_datasets))

Each paper's claims live in its package (``focalcal/papers/<paper>/claims.py``, found through
its entry in ``catalog.PAPERS``); this package judges them. Every claim of the study's paper gets one row: its statement and source, the paired
difference it compares, the mean difference with its 95 % interval, and a verdict
(:mod:`focalcal.claims.verdict`), with the evidence that decided it: how many pairs point the
paper's way, what the interval contains and, for an inconclusive verdict, how many pairs of
this mean and spread would decide it. Unhealthy runs are left out and the row names each with
its status and the rule that flagged it. :func:`pairs_table` lists every pair's difference
with its unit, one row per pair.
"""

from __future__ import annotations

import pandas as pd

from focalcal import catalog
from focalcal.claims.claim import Claim
from focalcal.claims.evidence import UNIT_COLUMNS, StudyEvidence
from focalcal.claims.verdict import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    INTERVAL,
    NOT_TESTABLE,
    VERDICTS,
    Direction,
    LowerBounds,
    NotTestable,
    Outcome,
    Pairs,
    judge,
    on_paper_side,
)


def paper_claims(paper: str) -> list[Claim]:
    """The claims of ``paper`` (none for a paper without claims), from its package."""
    return catalog.paper(paper).claims()


def __getattr__(name: str):
    """``CLAIMS``: paper -> its claims, for every paper package (read on use: the claims load pandas)."""
    if name == "CLAIMS":
        return {key: paper.claims() for key, paper in catalog.PAPERS.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


COLUMNS = ("paper", "claim", "study", "statement", "source", "compares", "direction", "threshold", "n_pairs",
           "n_paper_way", "mean", "ci_low", "ci_high", "interval", "interval_contains", "verdict", "pairs_needed",
           "reason", "excluded_runs")
# One row per pair: the unit it was measured on (``seed`` holds the fold of a cross-validated run).
PAIR_COLUMNS = ("paper", "claim", "study", *UNIT_COLUMNS, "pair", "difference", "paper_way")


def evaluate_claim(claim: Claim, evidence: StudyEvidence) -> Outcome:
    return judge(claim.test(evidence), claim.direction, claim.threshold)


def evaluate_study(evidence: StudyEvidence) -> list[tuple[dict, list[dict]]]:
    """(claims row, its pairs' rows) per claim of the study's paper (none for a paper without claims)."""
    results = []
    for claim in paper_claims(evidence.paper):
        outcome = evaluate_claim(claim, evidence)
        key = {"paper": claim.paper, "claim": claim.key, "study": evidence.study}
        row = {
            **key, "statement": claim.statement, "source": claim.source, "compares": claim.compares,
            "direction": claim.direction.symbol, "threshold": claim.threshold, "n_pairs": outcome.n_pairs,
            "n_paper_way": outcome.n_paper_way, "mean": outcome.mean, "ci_low": outcome.low, "ci_high": outcome.high,
            "interval": INTERVAL if outcome.n_pairs else "", "interval_contains": outcome.contains,
            "verdict": outcome.verdict, "pairs_needed": outcome.pairs_needed, "reason": outcome.reason,
            "excluded_runs": evidence.exclusion_note(),
        }
        pairs = outcome.pairs
        pair_rows = [{**key, **dict(zip(UNIT_COLUMNS, unit)), "pair": label, "difference": difference,
                      "paper_way": on_paper_side(difference, claim.direction, claim.threshold)}
                     for difference, unit, label in zip(pairs.differences, pairs.units, pairs.labels)]
        results.append((row, pair_rows))
    return results


def evaluate(evidences) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``results/tables/claims.csv``: one row per claim x study, ``claims_pairs.csv``: one row per pair)."""
    results = [result for evidence in evidences for result in evaluate_study(evidence)]
    table = pd.DataFrame([row for row, _ in results], columns=list(COLUMNS))
    table["pairs_needed"] = table["pairs_needed"].astype("Int64")
    pairs = pd.DataFrame([pair for _, rows in results for pair in rows], columns=list(PAIR_COLUMNS))
    return table, pairs


def claims_table(evidences) -> pd.DataFrame:
    """``results/tables/claims.csv``: one row per claim x study."""
    return evaluate(evidences)[0]


def scoreboard(table: pd.DataFrame) -> pd.DataFrame:
    """One row per claim for the report: the studies that test it, or the reasons none can.

    A claim is "not testable" in a study that lacks its runs (charoenphakdee2021's posterior
    claims in its paradigms study); such rows are dropped when another study tests the claim.
    """
    tested = table[table["verdict"] != NOT_TESTABLE]
    untested = table[(table["verdict"] == NOT_TESTABLE) & ~table["claim"].isin(tested["claim"])]
    untested = untested.groupby("claim", sort=False).agg(
        {**{c: "first" for c in table.columns if c not in ("study", "reason")},
         "study": lambda s: ", ".join(s), "reason": lambda s: "; ".join(dict.fromkeys(s))}).reset_index(drop=True)
    board = pd.concat([tested, untested[table.columns]], ignore_index=True)
    order = {key: i for i, key in enumerate(table["claim"].drop_duplicates())}
    return board.sort_values("claim", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


__all__ = [
    "CLAIMS",
    "COLUMNS",
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "NOT_TESTABLE",
    "PAIR_COLUMNS",
    "VERDICTS",
    "Claim",
    "Direction",
    "LowerBounds",
    "NotTestable",
    "Outcome",
    "Pairs",
    "StudyEvidence",
    "claims_table",
    "evaluate",
    "evaluate_claim",
    "evaluate_study",
    "judge",
    "paper_claims",
    "scoreboard",
]
