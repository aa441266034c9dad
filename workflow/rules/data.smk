# Stage 1: make each dataset of the config available under the data root (download only
# where `download: true`), once per dataset key. Local: cluster nodes often lack internet.
#
# The marker is an ancient() input of every job that reads the data set, so re-preparing a
# data set re-runs nothing downstream. Snakemake (9.x, snakemake/snakemake#4166) never plans
# the jobs behind an ancient() input of a job it re-runs for provenance (params, code) while
# its output exists: a changed dataset spec under one key (two configs sharing a data root)
# would then plan prepare_data alone and report success. So this rule has no params: the job
# reads its dataset's spec and `download` from the config, and runs only when the marker is
# missing (or forced); the onsuccess check of the Snakefile catches any other way to lose a target.
#
# The job is a shell command, not a `script:`: Snakemake re-runs a script job whose outputs are
# older than its script file, with or without metadata, so a `data/` copied into a fresh clone
# (whose files carry the clone's time) would re-plan prepare_data for every marker it holds, and
# nothing behind them. The config reaches the job in the environment
# (focalcal.pipeline.prepare_data); a localrule shares the Snakemake process's environment.

import sys

from snakemake.settings.types import DeploymentMethod

from focalcal.pipeline.prepare_data import PYTHON_ENV, SPECS_ENV, specs_for_jobs

os.environ[SPECS_ENV] = specs_for_jobs(config)
# The job's Python: the conda env's under --use-conda (as a script: job would use), else
# Snakemake's own. Neither is a rule param, so neither can re-plan a prepared data set.
os.environ[PYTHON_ENV] = (
    "python"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else sys.executable
)


localrules:
    prepare_data,


rule prepare_data:
    output:
        DATA_READY,
    log:
        paths.log("prepare_data", "{dataset}"),
    benchmark:
        paths.benchmark("prepare_data", "{dataset}")
    conda:
        "../envs/torch.yaml"
    shell:
        '"$FOCALCAL_PREPARE_PYTHON" -m focalcal.pipeline.prepare_data {wildcards.dataset:q} {output:q} {log:q}'
