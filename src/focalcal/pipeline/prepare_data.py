"""Rule prepare_data's job: ``python -m focalcal.pipeline.prepare_data DATASET MARKER LOG``.

It makes one dataset available under the data root (the marker's grandparent folder) and
writes its ready marker. The dataset's spec and ``download`` come from the workflow's config,
which the Snakefile hands to its jobs in the environment (:data:`SPECS_ENV`), never from rule
params: workflow/rules/data.smk says why. The rule runs a shell command, not a ``script:``,
because Snakemake re-runs a ``script:`` job whose outputs are older than its script file,
metadata or not: a ``data/`` copied into a fresh clone (whose files all carry the clone's
time) would re-plan prepare_data for every marker it holds.
"""

from __future__ import annotations

import json
import os
import sys

SPECS_ENV = "FOCALCAL_DATASETS"  # {"datasets": {key: spec}, "download": bool}, set by workflow/rules/data.smk
PYTHON_ENV = "FOCALCAL_PREPARE_PYTHON"  # the Python the rule's shell command runs this module with


def specs_for_jobs(config: dict) -> str:
    """What :data:`SPECS_ENV` holds for a workflow with ``config``."""
    return json.dumps({"datasets": config["datasets"], "download": config["download"]}, sort_keys=True)


def main(argv: list[str] | None = None) -> None:
    from focalcal import paths
    from focalcal.pipeline.joblog import job_process
    from focalcal.pipeline.jobs import prepare_dataset

    dataset, marker, log = sys.argv[1:] if argv is None else argv
    specs = json.loads(os.environ[SPECS_ENV])
    with job_process(log):
        prepare_dataset(specs["datasets"][dataset], paths.data_root_from_marker(marker), specs["download"], marker)


if __name__ == "__main__":
    main()
