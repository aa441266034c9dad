"""Rules theory_figure and study_figure: draw one planned figure and save it as PNG."""

from focalcal.pipeline.joblog import job_process
from focalcal.report.figure_drawing import make
from focalcal.report.targets import Artifact

with job_process(snakemake.log[0]):
    make(Artifact.from_dict(snakemake.params.artifact), snakemake.output[0])
