"""The claims table of a config: every study's table read as :class:`StudyEvidence`.

``results/tables/claims.csv`` (rule ``claims``) has one row per claim x study, with the
evidence behind each verdict; ``results/tables/claims_pairs.csv`` (the same rule, its own
target) has every pair's difference with its unit. The report's scoreboard, each paper
page's Claims section and the forest plots (rule ``claims_forest``) read them. The evidence
of a study is its tidy table plus, read on demand, its runs' ``history.csv`` (mukhoti2020's
training-dynamics claims) and ``calibration.json`` (komisarenko2024's Fig 8 claim).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from focalcal import catalog, paths
from focalcal.catalog import calibrator_role
from focalcal.claims import evaluate
from focalcal.claims.evidence import StudyEvidence, unit_label
from focalcal.claims.verdict import FAILS, HOLDS, INTERVAL, MIN_PAIRS, VERDICT_COLORS
from focalcal.core.spec_facts import loss_info, paper_setting
from focalcal.files.artefacts import atomic_write_text, read_csv, read_json
from focalcal.paths import CLAIMS_PAIRS, CLAIMS_TABLE, study_table
from focalcal.report.targets import CLAIMS_INDEX, PAPER_TITLES


def claims_inputs(plan) -> list[str]:
    """The files the claims table reads: study tables, and each calibrated run's history and calibrators."""
    files = []
    for key, study in plan.studies.items():
        if not study.has_table(plan):
            continue
        files.append(study_table(key))
        for run in study.runs:
            if not run.imported:  # an imported run has no training history
                files.append(f"{run.run_dir}/{paths.HISTORY}")
            if plan.calibrators[run.path]:
                files.append(f"{run.calibration_dir}/{paths.CALIBRATION_PARAMS}")
    return list(dict.fromkeys(files))


def study_evidence(plan, study_key: str, root=".") -> StudyEvidence:
    """One study's evidence from its table on disk under ``root``."""
    root = Path(root)
    study = plan.studies[study_key]
    config = plan.config
    table = read_csv(root / study_table(study_key), dtype={"calibrator": str, "class": str})
    roles = {}
    for run, keys in study.runs.items():
        for key in keys:
            roles.setdefault(key, calibrator_role(plan.calibrators[run.path][key]))
    runs = {run.path: run for run in study.runs}
    datasets = {run.dataset for run in study.runs}
    models = {run.dataset: run.model for run in study.runs}
    reference = catalog.paper(study.paper).reference_model
    return StudyEvidence(
        study=study_key, paper=study.paper, table=table,
        losses={run.loss: loss_info(config["losses"][run.loss]) for run in study.runs},
        roles=roles,
        paper_datasets={d: paper_setting(config["datasets"][d], config["models"][models[d]], reference).dataset for d in datasets},
        # imported runs (logits files) have no training history: claims that need one are not testable
        history=None if any(run.imported for run in study.runs)
        else (lambda path: read_csv(root / runs[path].run_dir / paths.HISTORY)),
        calibration=lambda path: read_json(root / runs[path].calibration_dir / paths.CALIBRATION_PARAMS),
    )


def read_claims(path) -> pd.DataFrame:
    """A claims table written by :func:`write_claims` (text columns: empty, never NaN)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"the claims table {path} is missing; run the workflow's claims rule (snakemake {CLAIMS_TABLE})")
    text = ("reason", "excluded_runs", "interval", "interval_contains")
    table = read_csv(path, dtype={**dict.fromkeys(text, str), "study": str, "pairs_needed": "Int64"})
    for column in text:
        table[column] = table[column].fillna("")
    return table


def read_pairs(path) -> pd.DataFrame:
    """The pairs table written by :func:`write_claims`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"the claims' pairs table {path} is missing; run the workflow's claims rule "
                         f"(snakemake {CLAIMS_PAIRS})")
    return read_csv(path, dtype={"study": str, "seed": str, "pair": str, "dataset": str, "model": str, "recipe": str})


def write_claims(plan, path, pairs_path, root=".") -> pd.DataFrame:
    """Write ``claims.csv`` to ``path`` and its pairs to ``pairs_path``; returns the claims."""
    evidences = [study_evidence(plan, key, root) for key, study in plan.studies.items() if study.has_table(plan)]
    table, pairs = evaluate(evidences)
    atomic_write_text(pairs.to_csv(index=False), pairs_path)
    atomic_write_text(table.to_csv(index=False), path)
    return table


def write_forest(page: str, claims_path, pairs_path, output) -> Path:
    """The forest plot of a paper page's claims, or the compact one of every claim (``page``:
    ``index``); a page whose paper has no claim in this config gets a figure saying so."""
    from focalcal.claims import scoreboard
    from focalcal.plots import save
    from focalcal.plots.claims_forest import claims_forest_compact, claims_forest_figure, empty_forest

    table, pairs = read_claims(claims_path), read_pairs(pairs_path)
    if page == CLAIMS_INDEX:
        board = scoreboard(table)
        draw = claims_forest_compact
        title = f"Every claim tested on this config's runs ({len(board)} rows)"
    elif page in PAPER_TITLES:
        board = scoreboard(table[table["paper"] == page])
        draw = claims_forest_figure
        title = f"{page}: each claim's pairs (dots), mean (◆) and 95 % interval (bar); dashed: threshold"
    else:
        raise ValueError(f"no claims forest plot {page!r}; they are {[*PAPER_TITLES, CLAIMS_INDEX]}")
    figure = draw(board, pairs, title) if len(board) else empty_forest(f"{page}: no claim of this paper is tested "
                                                                           "by this config's studies")
    return save(figure, output)


# ------------------------------------------------------------------------------ display



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


def evidence_html(row, pairs: pd.DataFrame | None) -> str:
    """What decided a verdict: the statistic, how many pairs point the paper's way, what the
    interval contains, how many pairs would decide an inconclusive one, and every pair."""
    if not row.n_pairs:
        return ""
    parts = [_e(statistic_text(row)),
             f"{row.n_paper_way} of {row.n_pairs} pair(s) point the paper's way ({_e(row.direction)} {row.threshold:g})"]
    if row.interval_contains:
        parts.append(f"the interval contains {_e(row.interval_contains)}")
    if not pd.isna(row.pairs_needed):
        parts.append(f"{int(row.pairs_needed)} pairs of this mean and spread would exclude {row.threshold:g}")
    text = "<br>".join(parts)
    if pairs is not None:
        mine = pairs[(pairs["claim"] == row.claim) & (pairs["study"].astype(str) == str(row.study))]
        items = "".join(
            f"<li style='color:{VERDICT_COLORS[HOLDS if way else FAILS]}'>{_e(unit_label((p.dataset, p.model, p.recipe, p.seed)))}"
            f" — {_e(p.pair)}: <strong>{p.difference:+.4g}</strong></li>"
            for p, way in zip(mine.itertuples(index=False), mine["paper_way"].astype(bool)))
        text += (f"<details><summary>the {len(mine)} pair(s)</summary><ul style='margin:0;padding-left:1.2em;"
                 f"font-size:11px'>{items}</ul></details>")
    return text


def claims_html(table: pd.DataFrame, notes: dict | None = None, with_paper: bool = False,
                pairs: pd.DataFrame | None = None) -> str:
    """The claims as an HTML table: statement, source, the evidence (statistic, interval,
    pairs) from this run, verdict, why.

    ``notes`` (config ``claim_notes``: claim key -> text) explain a verdict other than "holds"
    for this config; they are shown under the verdict's own reason. ``pairs``
    (``claims_pairs.csv``) lists each row's pairs.
    """
    from focalcal.claims import scoreboard

    notes = notes or {}
    if table.empty:
        return "<p>No study of this config tests these claims: its studies do not reproduce this paper.</p>"
    board = scoreboard(table)
    shares = (12, 20, 10, 13, 19, 10, 16) if with_paper else (24, 10, 15, 22, 11, 18)
    names = (["paper"] if with_paper else []) + ["claim", "where in the paper", "ours: d = …",
                                                 "evidence from this run", "verdict", "why / note"]
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
            why.append(f"<em>Note (from the config):</em> {_e(notes[row.claim])}")
        paper = re.sub(r"(\d{4})$", r"<wbr>\1", _e(row.paper))  # a narrow column breaks before the year
        cells = ([f"<td>{paper}</td>"] if with_paper else []) + [
            (f"<td>{_e(row.statement)}<br><code style='font-size:11px'>{_e(row.claim)}</code> "
            f"<span style='color:#666;font-size:11px'>({_e(row.study)})</span></td>"),
            f"<td>{_e(row.source)}</td>",
            f"<td>{_e(row.compares)}; claimed {_e(row.direction)} {row.threshold:g}</td>",
            f"<td>{evidence_html(row, pairs)}</td>",
            f"<td>{verdict_html(row.verdict)}</td>",
            f"<td>{'<br>'.join(why)}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    counts = board["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICT_COLORS if v in counts)
    return (f"<p><strong>{len(board)} claim(s): {_e(summary)}.</strong> d is a paired difference (same data set, "
            f"model, recipe and seed or fold); interval: {_e(INTERVAL)}; fewer than {MIN_PAIRS} pairs is "
            "inconclusive; unhealthy runs are left out. Every figure in this table comes from this run's tables; "
            "notes from the config give reasons only.</p>"
            "<table style='table-layout:fixed;width:100%;overflow-wrap:break-word'>"
            f"<colgroup>{widths}</colgroup><tr>{head}</tr>{''.join(rows)}</table>")
