"""Rule claims_forest: the forest plot of a paper page's claims, or of every claim for the index."""

from focalcal.pipeline.joblog import job_process
from focalcal.report.claims_table import write_forest

with job_process(snakemake.log[0]):
    write_forest(snakemake.wildcards.page, snakemake.input.claims, snakemake.input.pairs, snakemake.output[0])
