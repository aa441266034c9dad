"""focalcal: one DAG from data to report.

    snakemake --cores 2                                  # the embedded default config
    snakemake --cores 8 --configfile config/studies/mukhoti2020.yaml
    snakemake --profile profiles/slurm --configfile config/studies/*.yaml

With --configfile the default config/config.yaml is not loaded: a study config is complete
on its own, and several study configs merge (they must agree on the keys they share).
"""

import os
import sys

from snakemake.utils import min_version

min_version("9.0")

# The library lives in src/ (rule scripts put it on their own path too, for conda envs).
sys.path.insert(0, os.path.join(workflow.basedir, "src"))

if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    loss=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    recipe=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    seed=r"\d+",
    study=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/logits.smk"
include: "workflow/rules/calibrate.smk"
include: "workflow/rules/segment.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        PLAN.table_targets(),
        CLAIMS_TABLE,
        CLAIMS_PAIRS,
        [claims_forest(page) for page in [*PAPERS, CLAIMS_INDEX]],
        REPORT_PLAN.figure_targets(),
        REPORT_PLAN.table_targets(),
        "results/report/index.html",
        PLAN.logits_targets(),
        PLAN.evaluation_targets(),
        PLAN.training_targets(),


onstart:
    from focalcal.losses import _fused

    _fused.build()  # a no-op when built; without a compiler the jobs use the eager path


onsuccess:
    # One line per unhealthy run (diverged, collapsed, not converged) among the runs on disk.
    from focalcal.report.inventory import health_warnings

    for line in health_warnings(".", PLAN.runs):
        print(line, file=sys.stderr)
