"""Rule report_check: load every report page in headless Chromium; fail on any broken item."""

import json
import os
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal._io import atomic_write_text  # noqa: E402
from focalcal.report.browser import check_report  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    outcome = check_report(os.path.dirname(snakemake.input[0]), os.path.basename(snakemake.output.screenshot))  # noqa: F821
    atomic_write_text(json.dumps(outcome, indent=1) + "\n", snakemake.output.result)  # noqa: F821
    if outcome["failures"]:
        raise SystemExit("report check failed:\n" + "\n".join(outcome["failures"]))
