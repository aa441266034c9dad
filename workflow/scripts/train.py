"""Rule train: train (or resume from its checkpoint) one run."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.jobs import train  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    train(snakemake.params.run_config, snakemake.params.run_dir, snakemake.params.data_root, snakemake.threads)  # noqa: F821
