"""Rule report_notebook: execute one report notebook with papermill and convert it to HTML."""

import os

from focalcal.pipeline.joblog import job_process
from focalcal.report.notebooks import render

with job_process(snakemake.log[0]):
    name = snakemake.wildcards.notebook
    parameters = {"manifest_path": snakemake.input.manifest, "root": "."}
    if name != "overview":
        parameters["paper"] = name
    render(snakemake.input.notebook, snakemake.output.executed, snakemake.output.html, parameters,
           cwd=os.getcwd(), title=f"focalcal report — {name}")
