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

from focalcal.pipeline import (
    build_plan,
    check_config_files,
    check_entries,
    check_run_directories,
    validate_config,
)

if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


check_config_files(workflow.overwrite_configfiles or workflow.configfiles)
validate_config(
    config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml")
)
# Builds every loss and calibrator of the config (imports torch, ~2 s): in the main
# process only, not again in each job that re-parses this file (cluster jobs).
if workflow.is_main_process:
    check_entries(config)
PLAN = build_plan(config)
check_run_directories(PLAN)

# The fused CPU loss kernels are compiled once, before the first job (onstart below, or
# `make venv`), into a build every checkout shares; a job only loads it and never compiles.
os.environ.setdefault("FOCALCAL_KERNEL_BUILD", "never")

DATA_ROOT = config["data_root"]
RUN = "{dataset}/{arch}/{loss}/{recipe}/seed{seed}"


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    arch=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
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
