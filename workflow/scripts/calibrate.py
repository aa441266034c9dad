"""Rule calibrate: fit every calibrator of one run on val logits, measure on test logits."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.calibrate import calibrate_run  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    calibrate_run(
        snakemake.input.logits,  # noqa: F821
        snakemake.params.methods,  # noqa: F821
        snakemake.params.ece_bins,  # noqa: F821
        snakemake.output.params,  # noqa: F821
        snakemake.output.metrics,  # noqa: F821
    )
