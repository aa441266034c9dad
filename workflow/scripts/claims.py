"""Rule claims: results/tables/claims.csv, every paper's claims tested on the study tables, and
claims_pairs.csv, every pair behind them."""

import copy

from focalcal.pipeline import build_plan
from focalcal.pipeline.joblog import job_process
from focalcal.report.claims_table import write_claims

with job_process(snakemake.log[0]):
    plan = build_plan(copy.deepcopy(snakemake.config))  # validated and defaulted at parse time
    write_claims(plan, snakemake.output.claims, snakemake.output.pairs)
