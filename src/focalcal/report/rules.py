"""Small helpers of workflow/rules/figures.smk and report.smk (kept out of the rule files).

They only look things up in the run plan and the report plan; nothing here is needed
outside Snakemake.
"""

from __future__ import annotations

import re

from focalcal.paths import HISTORY, INVENTORY, RUN_CONFIG, RUN_INFO
from focalcal.report.targets import OVERVIEW, ReportPlan


def rst_text(text: str) -> str:
    """Caption text safe inside reStructuredText (Snakemake renders captions with docutils)."""
    return re.sub(r"([\\`*_|])", r"\\\1", text)


def study_artifact_names(report: ReportPlan, kind: str) -> tuple[list[str], list[str]]:
    """(study keys, artifact names) of the planned study figures or tables, for wildcard constraints."""
    planned = [a for a in report.artifacts() if a.kind == kind and a.study is not None]
    return [a.study for a in planned], [a.name for a in planned]


def inventory_inputs(plan) -> list[str]:
    """Every run's history and settings, and its run.json: written with the logits where they
    were exported or imported (an imported run has no history), with the test-fold scores for
    segmentation runs."""
    files = []
    for path, run in plan.runs.items():
        files += ([] if run.imported else [f"{run.run_dir}/{HISTORY}"]) + [f"{run.run_dir}/{RUN_CONFIG}"]
        if run.segmentation:
            files.append(f"{run.evaluation_dir}/{RUN_INFO}")
        elif plan.calibrators[path]:
            files.append(f"{run.run_dir}/{RUN_INFO}")
    return files


def notebook_template(page: str) -> str:
    """The notebook of a report page: the overview's own, or the one notebook every paper's page
    runs with its ``paper`` parameter."""
    return "overview.ipynb" if page == OVERVIEW else "paper.ipynb"


def notebook_inputs(report: ReportPlan, notebook: str) -> list[str]:
    """What a notebook page shows (the overview also shows the run inventory)."""
    files = report.notebook_inputs(notebook)
    return files + [INVENTORY] if notebook == OVERVIEW else files
