"""Rule paper_table: one paper table (ours beside the published values) from a study table."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal._io import atomic_write_text  # noqa: E402
from focalcal.report.tables import build, read_study_table  # noqa: E402
from focalcal.report.targets import Artifact  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    table = build(Artifact.from_dict(snakemake.params.artifact), read_study_table(snakemake.input[0]))  # noqa: F821
    atomic_write_text(table.to_csv(index=False), snakemake.output[0])  # noqa: F821
