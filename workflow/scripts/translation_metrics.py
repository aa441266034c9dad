"""Rule translation_metrics: a translation run's metrics.csv (token metrics and BLEU) and its temperature sweep."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.translation import translation_metrics

with job_process(snakemake.log[0]):
    translation_metrics(
        snakemake.input.token_metrics,
        snakemake.input.curve,
        snakemake.params.decodes,
        snakemake.params.calibrated,
        snakemake.output.metrics,
        snakemake.output.sweep,
    )
