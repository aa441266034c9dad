"""Rule evaluate_segmentation: test-fold metrics and sample masks of one segmentation run."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.jobs import evaluate_segmentation  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    evaluate_segmentation(
        snakemake.params.run_dir,  # noqa: F821
        snakemake.params.data_root,  # noqa: F821
        snakemake.threads,  # noqa: F821
        snakemake.output.metrics,  # noqa: F821
        snakemake.output.samples,  # noqa: F821
        snakemake.params.n_bins,  # noqa: F821
        snakemake.output.info,  # noqa: F821
    )
