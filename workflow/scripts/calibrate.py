"""Rule calibrate: fit every calibrator of one run on val logits, measure on test logits."""

from focalcal.pipeline.calibrate import calibrate_run
from focalcal.pipeline.joblog import job_process

with job_process(snakemake.log[0]):
    calibrate_run(
        snakemake.input.logits,
        snakemake.params.calibrators,
        snakemake.params.ece_bins,
        snakemake.output.params,
        snakemake.output.metrics,
    )
