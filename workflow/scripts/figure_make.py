"""Rules theory_figure and study_figure: draw one planned figure and save it as PNG."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.report.figures import make  # noqa: E402
from focalcal.report.targets import Artifact  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    make(Artifact.from_dict(snakemake.params.artifact), snakemake.output[0])  # noqa: F821
