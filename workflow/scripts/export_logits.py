"""Rule export_logits: dump a trained run's val/test logits from its checkpoint (no training)."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import export_logits

with job_process(snakemake.log[0]):
    export_logits(snakemake.params.run_dir, snakemake.params.data_root, snakemake.threads)
