"""Rule import_logits: check a model's own logits file and copy it into its run directory."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import import_logits

with job_process(snakemake.log[0]):
    import_logits(
        snakemake.input[0],
        snakemake.params.run_identity,
        snakemake.output.logits,
        snakemake.output.info,
        snakemake.output.run_config,
    )
