"""The page ``focalcal calibrate`` writes: the metrics table with intervals and the diagrams, one HTML file."""

from __future__ import annotations

import html

from focalcal import paths
from focalcal.commands.calibrator_choice import LABELS
from focalcal.logits_file import LogitsSet

METRIC_LABELS = {"ece": "ECE", "adaece": "AdaECE", "mce": "MCE", "classwise_ece": "classwise ECE",
                 "smooth_ece": "smECE", "nll": "NLL", "brier": "Brier", "error": "error", "top5_error": "top-5 error"}
PERCENT_METRICS = {"ece", "adaece", "mce", "classwise_ece", "smooth_ece", "error", "top5_error"}


def _cell(row: dict) -> str:
    scale = 100 if row["metric"] in PERCENT_METRICS else 1
    value = f"{scale * row['value']:.2f}"
    if row["ci_low"] == "":
        return value
    return f"{value}<br><small>[{scale * row['ci_low']:.2f}, {scale * row['ci_high']:.2f}]</small>"


def render_page(logits: LogitsSet, rows: list[dict], diagrams: dict[str, str], n_resamples: int) -> str:
    """One self-contained HTML page: the metrics table with intervals and the diagrams (SVG text) inlined."""
    metrics = [m for m in METRIC_LABELS if any(row["metric"] == m for row in rows)]
    by_key = {(row["calibrator"], row["metric"]): row for row in rows}
    header = "".join(f"<th>{html.escape(METRIC_LABELS[m])}{' (%)' if m in PERCENT_METRICS else ''}</th>"
                     for m in metrics)
    body = "".join(
        f"<tr><th>{html.escape(LABELS[key])}</th>"
        + "".join(f"<td>{_cell(by_key[key, m]) if (key, m) in by_key else ''}</td>" for m in metrics) + "</tr>"
        for key in diagrams)
    images = "".join(f"<figure>{svg}</figure>" for svg in diagrams.values())
    source = html.escape(logits.source)
    sizes = f"{len(logits.val_labels):,} validation and {len(logits.test_labels):,} test samples, {logits.num_classes} classes"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Calibration of {source}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; vertical-align: top; }}
thead th {{ background: #f2f2f2; }} tbody th {{ text-align: left; }}
small {{ color: #666; }}
.diagrams {{ display: flex; flex-wrap: wrap; gap: 1em; }}
figure {{ margin: 0; }} figure svg {{ width: 22em; height: auto; }}
</style></head><body>
<h1>Calibration of <code>{source}</code></h1>
<p>{sizes}. Calibrators are fitted on the validation split and measured on the test split.
Each cell: the value on the whole test set and its 95 % percentile bootstrap interval over
{n_resamples} resamples of the test samples (the same resamples for every calibrator).
Binned metrics use {next((r['bins'] for r in rows if r['bins'] != ''), 15)} bins (AdaECE: equal-mass; the rest equal-width);
smECE is the smooth calibration error of Błasiok &amp; Nakkiran (2023), computed by <code>relplot</code>.</p>
<table><thead><tr><th>calibrator</th>{header}</tr></thead><tbody>{body}</tbody></table>
<h2>Reliability diagrams (test split)</h2>
<div class="diagrams">{images}</div>
<p><small>Fitted parameters: <code>{paths.CALIBRATION_PARAMS}</code>; every number: <code>{paths.METRICS}</code>.</small></p>
</body></html>
"""

