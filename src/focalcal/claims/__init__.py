"""Does the paper hold? Each paper's claims as executable checks over a study's table.

    from focalcal.claims import StudyEvidence, evaluate_study
    rows = evaluate_study(StudyEvidence(study, paper, table, losses, roles, paper_datasets))

Every claim of the study's paper gets one row: its statement and source, the paired
difference it compares, the mean difference with its 95 % interval, and a verdict
(:mod:`focalcal.claims.verdict`). Unhealthy runs are left out and the row says so.
"""

from __future__ import annotations

import pandas as pd

from focalcal.claims import charoenphakdee2021, hossain2021, komisarenko2024, mukhoti2020
from focalcal.claims.claim import Claim
from focalcal.claims.evidence import StudyEvidence
from focalcal.claims.verdict import (FAILS, HOLDS, INCONCLUSIVE, INTERVAL, NOT_TESTABLE, VERDICTS, Direction,
                                     NotTestable, Outcome, Pairs, judge)

CLAIMS: dict[str, list[Claim]] = {
    "charoenphakdee2021": charoenphakdee2021.CLAIMS,
    "mukhoti2020": mukhoti2020.CLAIMS,
    "komisarenko2024": komisarenko2024.CLAIMS,
    "hossain2021": hossain2021.CLAIMS,
}

COLUMNS = ("paper", "claim", "study", "statement", "source", "compares", "direction", "threshold", "n_pairs",
           "mean", "ci_low", "ci_high", "interval", "verdict", "reason", "excluded_runs")


def evaluate_claim(claim: Claim, evidence: StudyEvidence) -> Outcome:
    return judge(claim.test(evidence), claim.direction, claim.threshold)


def evaluate_study(evidence: StudyEvidence) -> list[dict]:
    """One row per claim of the study's paper (none for a paper without claims)."""
    rows = []
    for claim in CLAIMS.get(evidence.paper, []):
        outcome = evaluate_claim(claim, evidence)
        excluded = evidence.exclusion_note()
        rows.append({
            "paper": claim.paper, "claim": claim.key, "study": evidence.study, "statement": claim.statement,
            "source": claim.source, "compares": claim.compares, "direction": claim.direction.symbol,
            "threshold": claim.threshold, "n_pairs": outcome.n_pairs, "mean": outcome.mean, "ci_low": outcome.low,
            "ci_high": outcome.high, "interval": INTERVAL if outcome.n_pairs else "", "verdict": outcome.verdict,
            "reason": outcome.reason, "excluded_runs": excluded,
        })
    return rows


def claims_table(evidences) -> pd.DataFrame:
    """``results/tables/claims.csv``: one row per claim x study."""
    rows = [row for evidence in evidences for row in evaluate_study(evidence)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


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


__all__ = ["CLAIMS", "COLUMNS", "Claim", "Direction", "FAILS", "HOLDS", "INCONCLUSIVE", "NOT_TESTABLE", "NotTestable",
           "Outcome", "Pairs", "StudyEvidence", "VERDICTS", "claims_table", "evaluate_claim", "evaluate_study",
           "judge", "scoreboard"]
