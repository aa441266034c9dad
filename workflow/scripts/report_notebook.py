"""Rule report_notebook: execute one report notebook with papermill and convert it to HTML."""

import os
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.report.notebooks import render  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    name = snakemake.wildcards.notebook  # noqa: F821
    parameters = {"manifest_path": snakemake.input.manifest, "root": "."}  # noqa: F821
    if name != "overview":
        parameters["paper"] = name
    render(snakemake.input.notebook, snakemake.output.executed, snakemake.output.html, parameters,  # noqa: F821
           cwd=os.getcwd(), title=f"focalcal report — {name}")
