"""Rule report_index: results/report/index.html, the report's entry page."""

from focalcal.files.artefacts import read_csv, read_json
from focalcal.pipeline.joblog import job_process
from focalcal.report.claims_table import read_claims, read_pairs
from focalcal.report.index import write_index

with job_process(snakemake.log[0]):
    manifest = read_json(snakemake.input.manifest)
    inventory = read_csv(snakemake.input.inventory)
    claims = read_claims(snakemake.input.claims)
    pairs = read_pairs(snakemake.input.claims_pairs)
    write_index(manifest, inventory, snakemake.output[0], snakemake.params.config_files, claims, pairs)
