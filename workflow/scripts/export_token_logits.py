"""Rule export_token_logits: a translation run's token_logits.npz, published or dumped from its checkpoint."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import export_token_logits

with job_process(snakemake.log[0]):
    export_token_logits(snakemake.params.run_dir, snakemake.params.data_root, snakemake.threads)
