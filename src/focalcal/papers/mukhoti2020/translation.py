"""mukhoti2020 §5.2, machine translation: Table 3 (test ECE before and after temperature scaling,
with T, and test BLEU before and after) and Fig 5 (test BLEU and val ECE against the softmax
temperature, one panel per loss), from the translation runs of a study.

Every number is per target token (ECE: top label, 15 equal-width bins) or per test corpus
(BLEU, sacrebleu). "Pre T" is the model as trained (T = 1); "post T" its temperature fitted on
the val tokens (by val ECE on the paper's grid, or by val NLL when the study has only that);
BLEU post T is the beam search run at that temperature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import catalog, paths
from focalcal.core.spec_facts import LossInfo, loss_color_key
from focalcal.files.artefacts import read_csv
from focalcal.papers.mukhoti2020 import calibration_stages
from focalcal.plots.frames import require_columns
from focalcal.plots.style import color_for, new_figure, paper_title, status_label, styled
from focalcal.report import published
from focalcal.report.figure_inputs import run_status
from focalcal.report.tables import format_cell, health_mark, mean_std, metric_rows, row_marks

TABLE = "mukhoti2020_table3"
FIGURE = "mukhoti2020_fig5_bleu_ece_temperature"
PUBLISHED_DATASET = "WMT 2014 English-German"  # the published table's setting
BINS = 15


def table3_name(info: LossInfo) -> str | None:
    """The column Table 3 prints for a loss: "CE (alpha=0.0)", "LS (alpha=0.1)", "FL (gamma=1.0)"."""
    if info.name == "cross_entropy" or (info.name == "focal" and info.gamma == 0 and not info.smoothing):
        return "CE (alpha=0.0)"
    if info.name == "label_smoothing":
        return f"LS (alpha={float(info.label.removeprefix('LS-')):.1f})"
    if info.name == "focal" and info.gamma is not None and not info.smoothing:
        return f"FL (gamma={float(info.gamma):.1f})"
    return None


# ------------------------------------------------------------------------------ planning


def plan(study, views) -> tuple[list, list[str]]:
    """Table 3 and Fig 5 from the study's translation runs ``views``."""
    artifacts, notes = [], []
    pre, post, post_role = calibration_stages(study, views)
    losses = {v.run.loss: table3_name(v.loss) for v in views}
    if pre is None:
        notes.append("Table 3: needs the uncalibrated model (an identity calibrator) of the translation runs")
    else:
        settings = {f"{v.run.dataset}/{v.run.model}": study.setting(v) for v in views}
        params = {"pre": pre, "post": post, "post_label": catalog.ROLE_LABELS.get(post_role, ""), "losses": losses,
                  "settings": settings, "bins": BINS if BINS in study.ece_bins else study.ece_bins[0],
                  "note": bleu_note()}
        title = "Table 3: test ECE (%, 15 bins, per token) and BLEU before and after temperature scaling (T)"
        if post is None:
            title += " (no temperature scaling in this study: before only)"
        artifacts.append(study.artifact("table", TABLE, title, table3, [study.table], params))
    by_loss: dict[str, list] = {}
    for v in views:
        by_loss.setdefault(v.run.loss, []).append(v)
    panels = {v[0].loss.label: {"sweeps": [f"{r.run.calibration_dir}/{paths.TEMPERATURE_SWEEP}" for r in v],
                                "run_dirs": [r.run.run_dir for r in v], "color": list(loss_color_key(v[0].loss))}
              for v in by_loss.values()}
    inputs = [sweep for panel in panels.values() for sweep in panel["sweeps"]]
    artifacts.append(study.artifact(
        "figure", FIGURE, "Fig 5: test BLEU and val ECE (15 bins, per token) against the softmax temperature of "
        "beam search, one panel per loss (mean over seeds, the seeds' range shaded)", temperature_sweep,
        inputs, {"panels": panels}))
    return artifacts, notes


def bleu_note() -> str:
    """What Table 3's BLEU is, for its page: sacreBLEU's signature, and what the paper leaves unsaid."""
    from focalcal.translation.bleu import signature

    return (f"BLEU: sacreBLEU's corpus BLEU of the detokenised decodes against one reference each, signature "
            f"`{signature()}`. The paper does not say how its BLEU was tokenised or computed, so its column and "
            "ours may differ by tokenisation alone.")


# --------------------------------------------------------------------------------- Table 3

_METRICS = (("ece", 100.0), ("bleu", 1.0))
COLUMNS = ["table", "dataset", "model", "loss", "paper_loss", "metric", "stage", "bins", "calibrator", "ours_mean",
           "ours_std", "n_seeds", "ours_temperature", "paper_dataset", "paper_model", "stand_in", "published",
           "published_temperature", "health"]


def table3(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Table 3: per loss, test ECE (%) and BLEU before and after TS, ours (mean, std over
    seeds, mean fitted T) beside the published cell."""
    reference = published.load(TABLE)
    rows = []
    chosen = table[table["loss"].isin(list(params["losses"]))]
    for (dataset, model, loss), group in chosen.groupby(["dataset", "model", "loss"], sort=False):
        setting = params["settings"].get(f"{dataset}/{model}") or {"dataset": None, "model": None, "stand_in": True}
        paper_loss = params["losses"][loss]
        for metric, scale in _METRICS:
            for stage in ("pre_t", "post_t") if params["post"] else ("pre_t",):
                calibrator = params["post"] if stage == "post_t" else params["pre"]
                temperature = (mean_std(metric_rows(group, calibrator, "temperature")["value"])[0]
                               if stage == "post_t" and metric == "ece" else np.nan)
                bins = params["bins"] if metric == "ece" else None
                cell = metric_rows(group, calibrator, metric, bins)
                mean, std, n = mean_std(cell["value"] * scale)
                hit = reference[(reference["method"] == paper_loss) & (reference["metric"] == metric)
                                & (reference["stage"] == stage)] if paper_loss else reference.iloc[:0]
                rows.append({
                    "table": TABLE, "dataset": dataset, "model": model, "loss": loss, "paper_loss": paper_loss,
                    "metric": metric, "stage": stage, "bins": bins, "calibrator": calibrator, "ours_mean": mean,
                    "ours_std": std, "n_seeds": n, "ours_temperature": temperature,
                    "paper_dataset": PUBLISHED_DATASET, "paper_model": "Transformer",
                    "stand_in": bool(setting.get("stand_in", True)),
                    "published": float(hit["value"].iloc[0]) if len(hit) else np.nan,
                    "published_temperature": float(hit["temperature"].iloc[0]) if len(hit) else np.nan,
                    "health": health_mark(cell),
                })
    return pd.DataFrame(rows, columns=COLUMNS)


def present_table3(table: pd.DataFrame) -> pd.DataFrame:
    """Table 3 as the paper prints it: a row per loss; ECE and BLEU pre / post T, ours beside the paper's."""
    shown = table.assign(
        ours=[format_cell(m, s, t, mark=h) for m, s, t, h in zip(table["ours_mean"], table["ours_std"],
                                                                  table["ours_temperature"], row_marks(table))],
        published_cell=[format_cell(m, np.nan, t) for m, t in zip(table["published"], table["published_temperature"])],
        setting=table["dataset"] + " / " + table["model"],
    )
    wide = shown.pivot_table(index=["setting", "loss", "paper_loss"], columns=["metric", "stage"],
                             values=["ours", "published_cell"], aggfunc="first", sort=False)
    wide.columns = [f"{'ours' if who == 'ours' else 'published'} {metric} {stage}" for who, metric, stage in wide.columns]
    return wide.reset_index()


# ---------------------------------------------------------------------------------- Fig 5

SWEEP_COLUMNS = ("temperature", "val_ece", "bleu")


@styled
def temperature_sweep_figure(panels: Mapping[str, Sequence[pd.DataFrame]], *, colors: Mapping[str, str] | None = None):
    """Fig 5: per loss (a panel), test BLEU (left axis) and val ECE in % (right axis) against the
    decoding temperature T: the mean over the loss's runs, their range shaded; the dotted line
    marks T = 1 (the model as trained).

    ``panels`` maps a loss label to its runs' sweeps (DataFrames with columns temperature,
    val_ece, bleu: ``temperature_sweep.csv``)."""
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError("panels must be a non-empty mapping loss label -> its runs' temperature sweeps")
    colors = dict(colors or {})
    figure, axes = new_figure(1, len(panels), height=3.6, squeeze=False)
    for index, (ax, (label, sweeps)) in enumerate(zip(axes[0], panels.items())):
        if not sweeps:
            raise ValueError(f"panel {label!r} has no run")
        frames = []
        for number, sweep in enumerate(sweeps):
            require_columns(sweep, SWEEP_COLUMNS, f"panels[{label!r}][{number}]")
            frames.append(sweep.set_index("temperature")[["val_ece", "bleu"]])
        joined = pd.concat(frames, axis=1, keys=range(len(frames))).dropna()
        if joined.empty:
            raise ValueError(f"the runs of panel {label!r} share no temperature")
        t = joined.index.to_numpy(dtype=float)
        bleu = joined.xs("bleu", axis=1, level=1).to_numpy(dtype=float)
        ece = 100 * joined.xs("val_ece", axis=1, level=1).to_numpy(dtype=float)
        color = colors.get(label) or color_for(str(label))
        ax.plot(t, bleu.mean(1), color=color, marker="o", ms=3, label="test BLEU")
        ax.fill_between(t, bleu.min(1), bleu.max(1), color=color, alpha=0.2, lw=0)
        right = ax.twinx()
        right.grid(False)  # the left axis draws the grid
        right.plot(t, ece.mean(1), color="0.25", ls="--", marker="s", ms=3, label="val ECE")
        right.fill_between(t, ece.min(1), ece.max(1), color="0.25", alpha=0.12, lw=0)
        ax.axvline(1.0, color="0.6", ls=":", lw=1)
        ax.set(xlabel="temperature T", ylabel="test BLEU" if index == 0 else "",
               title=f"({chr(ord('a') + index)}) {label}" + (f", {len(frames)} seeds" if len(frames) > 1 else ""))
        right.set_ylabel("val ECE (%)" if index == len(panels) - 1 else "")
        lines = ax.get_lines()[:1] + right.get_lines()[:1]
        ax.legend(lines, [line.get_label() for line in lines], fontsize=7, loc="lower center")
    paper_title(figure, "Test BLEU and validation ECE against the temperature of beam search", "mukhoti2020 Fig. 5")
    return figure


def temperature_sweep(params: dict, root: Path, study: str):
    """M20 Fig 5 from each run's temperature_sweep.csv (token ECE and BLEU per decode temperature)."""
    panels, colors = {}, {}
    for label, panel in params["panels"].items():
        statuses = [run_status(root / run_dir) for run_dir in panel["run_dirs"]]
        shown = status_label(label, statuses)
        panels[shown] = [read_csv(root / sweep) for sweep in panel["sweeps"]]
        colors[shown] = color_for(*panel["color"])
    return temperature_sweep_figure(panels, colors=colors)
