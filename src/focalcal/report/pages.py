"""What the report notebooks call to show a paper's figures and tables.

A notebook receives the manifest path (papermill parameter) and calls these functions, so
the notebooks stay short and every page shows artifacts the same way: a heading with what
the item reproduces, the image (embedded when the notebook is converted), or the table with
ours beside the published values, and the list of what the config could not support.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from focalcal import catalog
from focalcal.files.artefacts import read_csv, read_json
from focalcal.report import published, tables

TABLE_STYLE = "font-size: 12px; border-collapse: collapse;"


def _display(*objects) -> None:
    from IPython.display import display

    display(*objects)


def _markdown(text: str) -> None:
    from IPython.display import Markdown

    _display(Markdown(text))


def _html(text: str) -> None:
    from IPython.display import HTML

    _display(HTML(text))


def load_manifest(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no report manifest {str(path)!r}; run the workflow's report_manifest rule")
    return read_json(path)


def frame_html(frame: pd.DataFrame, caption: str | None = None, float_format: str = "{:.3g}") -> str:
    """A DataFrame as a compact HTML table (numbers rounded, NaN shown as a dash)."""
    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            shown[column] = shown[column].map(lambda v: "—" if pd.isna(v) else float_format.format(v))
    body = shown.to_html(index=False, na_rep="—", escape=True, border=0)
    body = body.replace("<table", f'<table style="{TABLE_STYLE}"', 1)
    if caption:
        body = body.replace(">", f"><caption style='caption-side: top; text-align: left'>{html.escape(caption)}</caption>", 1)
    return body


def show_figure(artifact: dict, root=".") -> None:
    from IPython.display import Image

    path = Path(root) / artifact["path"]
    _markdown(f"#### {artifact['title']}\n`{artifact['path']}`")
    if not path.is_file():
        raise ValueError(f"planned figure {artifact['path']} is missing; run its Snakemake target")
    _display(Image(filename=str(path), width=900))


def show_table(artifact: dict, root=".") -> None:
    path = Path(root) / artifact["path"]
    _markdown(f"#### {artifact['title']}\n`{artifact['path']}` — ours beside the published value of the paper's "
              "setting (*published* columns; cells: mean ± std over seeds, T in brackets).")
    if not path.is_file():
        raise ValueError(f"planned table {artifact['path']} is missing; run its Snakemake target")
    note = artifact.get("params", {}).get("note")  # what a measure of this table is, where the paper's may differ
    if note:
        _markdown(note)
    built = read_csv(path)
    shown = tables.present(artifact["paper"], artifact["builder"], built)
    settings = _settings_note(built)
    if settings:
        _markdown(settings)
    _html(frame_html(shown))


def _settings_note(built: pd.DataFrame) -> str:
    if "paper_dataset" not in built.columns:
        return ""
    pairs = built[["dataset", "model", "paper_dataset", "stand_in"]].drop_duplicates()
    lines = []
    for row in pairs.itertuples(index=False):
        if pd.isna(row.paper_dataset):
            lines.append(f"- {row.dataset} / {row.model}: no published counterpart")
        else:
            kind = "stands in for" if row.stand_in else "is"
            lines.append(f"- {row.dataset} / {row.model} {kind} the paper's {row.paper_dataset} setting")
    return "Published setting compared with:\n" + "\n".join(lines)


def show_artifact(artifact: dict, root=".") -> None:
    (show_figure if artifact["kind"] == "figure" else show_table)(artifact, root)


def show_claims(manifest: dict, paper: str, root=".") -> None:
    """Does the paper hold here? Its claims' forest plot, then each claim with the evidence
    from this run (statistic, interval, pairs) and its verdict."""
    from IPython.display import Image

    from focalcal.report.claims_table import claims_html, read_claims, read_pairs

    table = read_claims(Path(root) / manifest["claims"])
    pairs = read_pairs(Path(root) / manifest["claims_pairs"])
    mine = table[table["paper"] == paper]
    forest = manifest["claims_forest"][paper]
    _markdown(f"## Claims: does the paper hold here?\n`{manifest['claims']}`, `{manifest['claims_pairs']}`")
    if not (Path(root) / forest).is_file():
        raise ValueError(f"the claims' forest plot {forest} is missing; run its Snakemake target")
    _display(Image(filename=str(Path(root) / forest), width=900))
    _html(claims_html(mine, manifest.get("claim_notes"), pairs=pairs))


def show_theory(manifest: dict, paper: str, root=".") -> None:
    """The paper's theory figures (exact, no training)."""
    figures = manifest["papers"][paper]["theory"]
    _markdown(f"## Theory (exact, no training): {len(figures)} figure(s)")
    for artifact in figures:
        show_figure(artifact, root)


def show_studies(manifest: dict, paper: str, root=".") -> None:
    """Every study of the config that reproduces ``paper``: scale, figures, tables, omissions."""
    keys = manifest["papers"][paper]["studies"]
    if not keys:
        _markdown("## Experiments\nThe active config has no study of this paper: no experiment was run for it.")
        return
    for key in keys:
        study = manifest["studies"][key]
        scale = study["scale"]
        _markdown(
            f"## Study `{key}`\n*Mirrors:* {study['mirrors']}\n\n"
            f"*Scale:* {scale['runs']} run(s) — data sets {', '.join(scale['datasets'])}; models "
            f"{', '.join(scale['models'])}; losses {', '.join(scale['losses'])}; seeds {scale['seeds']}; epochs "
            f"{scale['epochs']}; calibrators {', '.join(scale['calibrators'])}.\n\n"
            f"*Published setting(s):* {'; '.join(scale['settings'])}."
        )
        for artifact in study["artifacts"]:
            show_artifact(artifact, root)
        if study["not_planned"]:
            _markdown("**Not produced by this config:**\n" + "\n".join(f"- {note}" for note in study["not_planned"]))


def show_summary(paper: str) -> None:
    """The top of a paper's page: the paper, its claims and what the page shows (its page's SUMMARY)."""
    _markdown(catalog.paper(paper).page().SUMMARY)


def show_published_tables(paper: str) -> None:
    """The published tables a paper's page shows in full (``PUBLISHED_SHOWN``)."""
    for name, caption in catalog.paper(paper).page().PUBLISHED_SHOWN:
        show_published(name, caption)


def show_published(name: str, caption: str) -> None:
    """A published table as transcribed (for papers whose experiments the config cannot run)."""
    _markdown(f"#### Published: {caption}")
    _html(frame_html(published.load(name), float_format="{:g}"))


def show_overview(manifest: dict, root=".") -> None:
    """The config, the run inventory and, per study, a glance at its headline metric."""
    import yaml

    inventory_path = Path(root) / manifest["inventory"]
    _markdown("## Runs")
    if inventory_path.is_file():
        inventory = read_csv(inventory_path)
        total = inventory["train_time_s"].fillna(0).sum()
        _markdown(f"{len(inventory)} training run(s), {total / 60:.1f} min of training in total; devices: "
                  f"{', '.join(sorted(inventory['device'].dropna().astype(str).unique())) or 'unknown'}.")
        by = inventory.groupby(["dataset", "model", "recipe"], sort=False).agg(
            runs=("run", "count"), epochs=("epochs", "max"), train_time_s=("train_time_s", "sum")).reset_index()
        _html(frame_html(by))
    _markdown("## Studies")
    for key, study in manifest["studies"].items():
        _markdown(f"### `{key}` ({study['paper']})\n{study['mirrors']}\n\n"
                  f"{study['scale']['runs']} run(s); {len(study['artifacts'])} figure(s)/table(s) planned; "
                  f"{len(study['not_planned'])} item(s) not supported by the config.")
        if study["table"] and (Path(root) / study["table"]).is_file():
            tidy = tables.read_study_table(Path(root) / study["table"])
            headline = tidy[tidy["metric"].isin(["error", "ece"])]
            if not headline.empty:
                headline = headline.assign(column=headline["metric"] + headline["bins"].map(
                    lambda b: "" if pd.isna(b) else f" ({int(b)} bins)") + " — " + headline["calibrator"])
                summary = headline.pivot_table(index=["dataset", "model", "loss"], columns="column", values="value",
                                               aggfunc="mean", sort=False) * 100
                _html(frame_html(summary.reset_index(), caption="test error and ECE (%) per calibrator, mean over seeds"))
    _markdown("## The config that produced this report")
    _markdown("```yaml\n" + yaml.safe_dump(manifest["config"], sort_keys=False, allow_unicode=True) + "```")
