"""Rule calibrate_tokens: fit temperature scaling on a translation run's val tokens, measure on its test tokens."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.translation import calibrate_tokens

with job_process(snakemake.log[0]):
    calibrate_tokens(
        snakemake.input.profile,
        snakemake.params.calibrators,
        snakemake.params.ece_bins,
        snakemake.output.params,
        snakemake.output.metrics,
        snakemake.output.curve,
        snakemake.params.temperatures,
    )
