"""Rule evaluate_segmentation: test-fold metrics and sample masks of one segmentation run."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import evaluate_segmentation

with job_process(snakemake.log[0]):
    evaluate_segmentation(
        snakemake.params.run_dir,
        snakemake.params.data_root,
        snakemake.threads,
        snakemake.output.metrics,
        snakemake.output.samples,
        snakemake.params.n_bins,
        snakemake.output.info,
    )
