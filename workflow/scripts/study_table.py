"""Rule study_table: one study's tidy metrics table from its runs' metrics files."""

import copy

from focalcal.pipeline import build_plan
from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.tables import write_study_table

with job_process(snakemake.log[0]):
    plan = build_plan(copy.deepcopy(snakemake.config))  # validated and defaulted at parse time
    write_study_table(plan, snakemake.wildcards.study, snakemake.output[0])
