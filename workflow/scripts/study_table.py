"""Rule study_table: one study's tidy metrics table from its runs' metrics files."""

import copy
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline import build_plan  # noqa: E402
from focalcal.pipeline.tables import write_study_table  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    plan = build_plan(copy.deepcopy(snakemake.config))  # noqa: F821  (validated and defaulted at parse time)
    write_study_table(plan, snakemake.wildcards.study, snakemake.output[0])  # noqa: F821
