"""Rule claims: results/tables/claims.csv, every paper's claims tested on the study tables."""

import copy
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline import build_plan  # noqa: E402
from focalcal.report.claims import write_claims  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    plan = build_plan(copy.deepcopy(snakemake.config))  # noqa: F821  (validated and defaulted at parse time)
    write_claims(plan, snakemake.output[0])  # noqa: F821
