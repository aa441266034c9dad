"""Rule train: train (or resume from its checkpoint) one run."""

from focalcal.core.pinned_numerics import pin

pin(snakemake.config["training"]["numerics"], snakemake.threads)  # before torch is imported

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import train
from focalcal.pipeline.plan import execution_settings, segmentation_bins

with job_process(snakemake.log[0], keep_attempt=True):
    train(
        snakemake.params.run_identity,
        execution_settings(snakemake.config),
        snakemake.params.run_dir,
        snakemake.params.data_root,
        snakemake.threads,
        segmentation_bins(snakemake.config),
    )
