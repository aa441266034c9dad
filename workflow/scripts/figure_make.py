"""Rules theory_figure and study_figure: draw one planned figure and save it as PNG."""

import sys

sys.path.insert(0, snakemake.scriptdir)
from _common import logged

from focalcal.report.figures import make
from focalcal.report.targets import Artifact

with logged(snakemake.log[0]):
    make(Artifact.from_dict(snakemake.params.artifact), snakemake.output[0])
