"""Rules decode and decode_calibrated: beam-search a finished translation run's test set at each
temperature of the decode grid, or at the one a calibrator fitted, and score it with BLEU."""

from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.translation import decode_calibrated, decode_grid

with job_process(snakemake.log[0]):
    if snakemake.rule == "decode_calibrated":
        decode_calibrated(
            snakemake.params.run_dir,
            snakemake.params.data_root,
            snakemake.input.calibration,
            snakemake.wildcards.calibrator,
            snakemake.output.result,
            snakemake.output.hypotheses,
            snakemake.threads,
        )
    else:
        decode_grid(
            snakemake.params.run_dir,
            snakemake.params.data_root,
            snakemake.params.temperatures,
            snakemake.output.decodes,
            snakemake.output.hypotheses,
            snakemake.threads,
        )
