"""The claims table of a config: every study's table read as :class:`StudyEvidence`.

``results/tables/claims.csv`` (its own target, rule ``claims``) has one row per claim x
study; the report's scoreboard and each paper page's Claims section read it. The evidence
of a study is its tidy table plus, read on demand, its runs' ``history.csv`` (mukhoti2020's
training-dynamics claims) and ``calibration.json`` (komisarenko2024's Fig 8 claim).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from focalcal._io import atomic_write_text, read_csv, read_json
from focalcal.claims import claims_table
from focalcal.claims.verdict import INTERVAL, MIN_PAIRS
from focalcal.claims.evidence import StudyEvidence
from focalcal.catalog import calibrator_role
from focalcal.report.naming import loss_info, paper_setting
from focalcal.report.targets import CLAIMS_TABLE, TABLES


def claims_inputs(plan) -> list[str]:
    """The files the claims table reads: study tables, and each calibrated run's history and calibrators."""
    files = []
    for key, study in plan.studies.items():
        if not study.has_table(plan):
            continue
        files.append(f"{TABLES}/{key}.csv")
        for run in study.runs:
            if not run.imported:  # an imported run has no training history
                files.append(f"{run.run_dir}/history.csv")
            if plan.calibrators[run.path]:
                files.append(f"{run.calibration_dir}/calibration.json")
    return list(dict.fromkeys(files))


def study_evidence(plan, study_key: str, root=".") -> StudyEvidence:
    """One study's evidence from its table on disk under ``root``."""
    root = Path(root)
    study = plan.studies[study_key]
    config = plan.config
    table = read_csv(root / TABLES / f"{study_key}.csv", dtype={"calibrator": str, "class": str})
    roles = {}
    for run, keys in study.runs.items():
        for key in keys:
            roles.setdefault(key, calibrator_role(plan.calibrators[run.path][key]))
    runs = {run.path: run for run in study.runs}
    datasets = {run.dataset for run in study.runs}
    models = {run.dataset: run.model for run in study.runs}
    return StudyEvidence(
        study=study_key, paper=study.paper, table=table,
        losses={run.loss: loss_info(config["losses"][run.loss]) for run in study.runs},
        roles=roles,
        paper_datasets={d: paper_setting(config["datasets"][d], config["models"][models[d]]).dataset for d in datasets},
        # imported runs (logits files) have no training history: claims that need one are not testable
        history=None if any(run.imported for run in study.runs)
        else (lambda path: read_csv(root / runs[path].run_dir / "history.csv")),
        calibration=lambda path: read_json(root / runs[path].calibration_dir / "calibration.json"),
    )


def read_claims(path) -> pd.DataFrame:
    """A claims table written by :func:`write_claims` (text columns: empty, never NaN)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"the claims table {path} is missing; run the workflow's claims rule (snakemake {CLAIMS_TABLE})")
    table = read_csv(path, dtype={"reason": str, "excluded_runs": str, "interval": str, "study": str})
    for column in ("reason", "excluded_runs", "interval"):
        table[column] = table[column].fillna("")
    return table


def write_claims(plan, path, root=".") -> pd.DataFrame:
    evidences = [study_evidence(plan, key, root) for key, study in plan.studies.items() if study.has_table(plan)]
    table = claims_table(evidences)
    atomic_write_text(table.to_csv(index=False), path)
    return table


# ------------------------------------------------------------------------------ display

VERDICT_COLORS = {"holds": "#1a7f37", "does not hold": "#b00020", "inconclusive": "#8a6d00",
                  "not testable with this config": "#666666"}


def _e(value) -> str:
    import html

    return html.escape("" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value))


def statistic_text(row) -> str:
    """"mean [low, high], n pairs" of a claims row, or what there is of it."""
    if not row.n_pairs:
        return ""
    if pd.isna(row.ci_low):
        return f"{row.mean:.3g} (n = {row.n_pairs})"
    return f"{row.mean:.3g} [{row.ci_low:.3g}, {row.ci_high:.3g}], n = {row.n_pairs}"


def verdict_html(verdict: str) -> str:
    color = VERDICT_COLORS.get(verdict, "#222")
    return (f"<span style='display:inline-block;padding:1px 6px;border-radius:3px;color:#fff;background:{color};"
            f"text-align:center'>{_e(verdict)}</span>")


def claims_html(table: pd.DataFrame, notes: dict | None = None, with_paper: bool = False) -> str:
    """The claims as an HTML table: statement, source, our statistic and interval, verdict, why.

    ``notes`` (config ``claim_notes``: claim key -> text) explain a verdict other than "holds"
    for this config; they are shown under the verdict's own reason.
    """
    from focalcal.claims import scoreboard

    notes = notes or {}
    if table.empty:
        return "<p>No study of this config tests these claims: its studies do not reproduce this paper.</p>"
    board = scoreboard(table)
    shares = (14, 22, 10, 14, 12, 11, 17) if with_paper else (27, 11, 16, 13, 11, 22)
    names = (["paper"] if with_paper else []) + ["claim", "where in the paper", "ours: d = …",
                                                 "mean d [95 % interval]", "verdict", "why / note"]
    columns = list(zip(names, shares))
    # Fixed column shares of the page's width: the table wraps its text instead of running off the page.
    widths = "".join(f"<col style='width:{share}%'>" for _, share in columns)
    head = "".join(f"<th>{name}</th>" for name, _ in columns)
    rows = []
    for row in board.itertuples(index=False):
        why = [_e(row.reason)] if row.reason else []
        if row.excluded_runs:
            why.append(_e(row.excluded_runs))
        if row.verdict != "holds" and notes.get(row.claim):
            why.append(f"<em>Note:</em> {_e(notes[row.claim])}")
        paper = re.sub(r"(\d{4})$", r"<wbr>\1", _e(row.paper))  # a narrow column breaks before the year
        cells = ([f"<td>{paper}</td>"] if with_paper else []) + [
            f"<td>{_e(row.statement)}<br><code style='font-size:11px'>{_e(row.claim)}</code> "
            f"<span style='color:#666;font-size:11px'>({_e(row.study)})</span></td>",
            f"<td>{_e(row.source)}</td>",
            f"<td>{_e(row.compares)}; claimed {_e(row.direction)} {row.threshold:g}</td>",
            f"<td>{_e(statistic_text(row))}</td>",
            f"<td>{verdict_html(row.verdict)}</td>",
            f"<td>{'<br>'.join(why)}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    counts = board["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICT_COLORS if v in counts)
    return (f"<p><strong>{len(board)} claim(s): {_e(summary)}.</strong> d is a paired difference (same data set, "
            f"model, recipe and seed); interval: {_e(INTERVAL)}; fewer than {MIN_PAIRS} pairs is inconclusive; "
            "unhealthy runs are left out.</p>"
            "<table style='table-layout:fixed;width:100%;overflow-wrap:break-word'>"
            f"<colgroup>{widths}</colgroup><tr>{head}</tr>{''.join(rows)}</table>")
