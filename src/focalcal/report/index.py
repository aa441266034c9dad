"""``results/report/index.html``: the entry page of the report.

It links the notebook pages and shows the config that produced the report, the run
inventory (what trained, how long, on what device, and each run's health: unhealthy runs are
listed above the table and their status is shown in red) and, for each paper, what was reproduced
at what scale: the theory figures, each study's figures and tables (linked), and what the
config could not support. Plain HTML with inline CSS, no scripts, relative links only.
"""

from __future__ import annotations

import html
import os
import time
from pathlib import Path

import pandas as pd

from focalcal.files.artefacts import atomic_write_text
from focalcal.paths import REPORT
from focalcal.report.claims_table import claims_html
from focalcal.report.inventory import summary
from focalcal.report.targets import CLAIMS_INDEX, OVERVIEW, PAPER_TITLES
from focalcal.training.health import NOT_ASSESSED, UNHEALTHY

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; max-width: 1000px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.7em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 13px; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; }
th { background: #f4f4f4; }
pre { background: #f7f7f7; padding: .8em; overflow-x: auto; font-size: 12px; }
.note { color: #555; } .missing { color: #8a4b00; }
.unhealthy { color: #b00020; font-weight: bold; } .unassessed { color: #8a4b00; }
nav a { margin-right: 1em; }
"""


def _e(value) -> str:
    return html.escape(str(value))


def _link(target: str, text: str, report_dir: str = REPORT) -> str:
    """A link from the report folder to ``target`` (a path relative to the working directory)."""
    href = os.path.relpath(target, report_dir).replace(os.sep, "/")
    return f'<a href="{_e(href)}">{_e(text)}</a>'


def _inventory_html(inventory: pd.DataFrame) -> str:
    if inventory.empty:
        return "<p>No runs in this config.</p>"
    totals = summary(inventory)
    head = (f"<p>{totals['runs']} run(s), {totals['epochs']} epoch(s), {totals['train_time_s'] / 60:.1f} min of "
            f"training ({totals['job_wall_s'] / 60:.1f} min of training jobs incl. start-up) on "
            f"{_e(', '.join(totals['devices']) or 'unknown devices')}"
            f"{' — hosts: ' + _e(', '.join(totals['hosts'])) if totals['hosts'] else ''}.</p>")
    unhealthy = inventory[inventory["status"].isin(UNHEALTHY)] if "status" in inventory else inventory.iloc[:0]
    if len(unhealthy):
        counts = ", ".join(f"{n} {status}" for status, n in totals["unhealthy"].items())
        items = "".join(f"<li><code>{_e(row.run)}</code> {_status(row.status, None)}: "
                        f"{_e(row.status_reason)}</li>" for row in unhealthy.itertuples())
        head += (f"<p class='unhealthy'>⚠ {len(unhealthy)} unhealthy run(s) ({_e(counts)}), left out of the claims:"
                 f"</p><ul>{items}</ul>")
    if totals["not_assessed"]:
        head += (f"<p class='unassessed'>{totals['not_assessed']} run(s) not assessed for health "
                 "(hover over the status for why).</p>")
    shown = inventory.copy()
    for column in ("train_time_s", "job_wall_s"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.1f}")
    columns = ["run", "status", "epochs", "train_time_s", "job_wall_s", "device", "parameters", "finished_at"]
    columns = [c for c in columns if c in shown]
    shown = shown[columns].map(lambda v: "" if pd.isna(v) else _e(v))
    if "status" in inventory:
        shown["status"] = [_status(s, r) for s, r in zip(inventory["status"], inventory["status_reason"])]
    table = shown.to_html(index=False, border=0, escape=False)
    return head + f"<details><summary>All runs</summary>{table}</details>"


def _status(status, reason) -> str:
    """A run's health status word, red when unhealthy; the reason shows on hover."""
    css = "unhealthy" if status in UNHEALTHY else "unassessed" if status == NOT_ASSESSED else "healthy"
    title = f" title='{_e(reason)}'" if isinstance(reason, str) and reason else ""
    return f"<span class='{css}'{title}>{_e('' if pd.isna(status) else status)}</span>"


def _study_html(study: dict) -> str:
    scale = study["scale"]
    parts = [f"<h3>Study <code>{_e(study['key'])}</code></h3>",
             f"<p><em>Mirrors:</em> {_e(study['mirrors'])}</p>",
             ("<table><tr><th>runs</th><th>data sets</th><th>models</th><th>losses</th><th>seeds</th><th>epochs</th>"
              "<th>published setting(s)</th></tr>"
              f"<tr><td>{scale['runs']}</td><td>{_e(', '.join(scale['datasets']))}</td><td>{_e(', '.join(scale['models']))}</td>"
              f"<td>{_e(', '.join(scale['losses']))}</td><td>{_e(scale['seeds'])}</td>"
              f"<td>{_e(', '.join(f'{k}: {v}' for k, v in scale['epochs'].items()))}</td>"
              f"<td>{_e('; '.join(scale['settings']))}</td></tr></table>")]
    if study["artifacts"]:
        items = "".join(f"<li>{_link(a['path'], a['title'])} ({a['kind']})</li>" for a in study["artifacts"])
        parts.append(f"<p>Reproduced:</p><ul>{items}</ul>")
    if study["table"]:
        parts.append(f"<p class='note'>All metrics of the study: {_link(study['table'], study['table'])}</p>")
    if study["not_planned"]:
        items = "".join(f"<li>{_e(note)}</li>" for note in study["not_planned"])
        parts.append(f"<p class='missing'>Not supported by this config:</p><ul class='missing'>{items}</ul>")
    return "\n".join(parts)


def build_index(manifest: dict, inventory: pd.DataFrame, config_text: str, config_files=(),
                claims: pd.DataFrame | None = None, pairs: pd.DataFrame | None = None) -> str:
    """The index page as an HTML string (links relative to ``results/report/``); ``claims``
    (``results/tables/claims.csv``) and ``pairs`` (``claims_pairs.csv``) give the scoreboard
    at the top, under the compact forest plot of every claim."""
    pages = [OVERVIEW, *PAPER_TITLES]
    nav = " ".join(f'<a href="{_e(page)}.html">{_e(page)}</a>' for page in pages)
    sections = [(f"<h1>focalcal report</h1><p class='note'>Generated {_e(time.strftime('%Y-%m-%d %H:%M:%S %Z'))}. "
                 f"Pages: </p><nav>{nav}</nav>")]
    if claims is not None:
        forest = manifest["claims_forest"][CLAIMS_INDEX]
        href = os.path.relpath(forest, REPORT).replace(os.sep, "/")
        sections.append("<h2 id='claims'>Does each paper hold here?</h2>"
                        f"<p class='note'>Every claim of the papers tested on this config's runs "
                        f"({_link(manifest['claims'], manifest['claims'])}, every pair in "
                        f"{_link(manifest['claims_pairs'], manifest['claims_pairs'])}); details on each paper's page.</p>"
                        f"<p><img src='{_e(href)}' alt='forest plot of every claim' style='max-width:100%'></p>"
                        + claims_html(claims, manifest.get("claim_notes"), with_paper=True, pairs=pairs))
    sections.append("<h2>What was reproduced, per paper</h2>")
    for paper, title in PAPER_TITLES.items():
        about = manifest["papers"][paper]
        theory = "".join(f"<li>{_link(a['path'], a['title'])}</li>" for a in about["theory"])
        sections.append(f"<h2 id='{_e(paper)}'>{_e(title)}</h2><p>Page: <a href='{_e(paper)}.html'>{_e(paper)}.html</a></p>"
                        f"<p>Theory figures (exact, no training):</p><ul>{theory}</ul>")
        if not about["studies"]:
            sections.append("<p class='missing'>No study of this paper in the active config: no experiment was run.</p>")
        for key in about["studies"]:
            sections.append(_study_html(manifest["studies"][key]))
    sections.append(f"<h2>Run inventory</h2>{_inventory_html(inventory)}")
    origin = ", ".join(map(str, config_files)) if config_files else "the embedded default config/config.yaml"
    sections.append(f"<h2>Config</h2><p>From {_e(origin)} (as validated, defaults filled in):</p>"
                    f"<details><summary>Show the config</summary><pre>{_e(config_text)}</pre></details>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>focalcal report</title>"
            f"<style>{STYLE}</style></head><body>" + "\n".join(sections) + "</body></html>\n")


def write_index(manifest: dict, inventory: pd.DataFrame, path, config_files=(), claims: pd.DataFrame | None = None,
                pairs: pd.DataFrame | None = None) -> Path:
    import yaml

    config_text = yaml.safe_dump(manifest["config"], sort_keys=False, allow_unicode=True)
    path = Path(path)
    atomic_write_text(build_index(manifest, inventory, config_text, config_files, claims, pairs), path)
    return path
