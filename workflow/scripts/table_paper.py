"""Rule paper_table: one paper table (ours beside the published values) from a study table."""

from focalcal.files.artefacts import atomic_write_text
from focalcal.pipeline.joblog import job_process
from focalcal.report.tables import build, read_study_table
from focalcal.report.targets import Artifact

with job_process(snakemake.log[0]):
    table = build(Artifact.from_dict(snakemake.params.artifact), read_study_table(snakemake.input[0]))
    atomic_write_text(table.to_csv(index=False), snakemake.output[0])
