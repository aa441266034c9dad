"""Rule report_check: load every report page in headless Chromium; fail on any broken item."""

import json
import os

from focalcal.files.artefacts import atomic_write_text
from focalcal.pipeline.joblog import job_process
from focalcal.report.browser import check_report

with job_process(snakemake.log[0]):
    outcome = check_report(os.path.dirname(snakemake.input[0]), os.path.basename(snakemake.output.screenshot))
    atomic_write_text(json.dumps(outcome, indent=1) + "\n", snakemake.output.result)
    if outcome["failures"]:
        raise SystemExit("report check failed:\n" + "\n".join(outcome["failures"]))
