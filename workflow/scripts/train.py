"""Rule train: train (or resume from its checkpoint) one run."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.jobs import train  # noqa: E402
from focalcal.pipeline.plan import execution_settings  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    train(
        snakemake.params.run_identity,  # noqa: F821
        execution_settings(snakemake.config),  # noqa: F821
        snakemake.params.run_dir,  # noqa: F821
        snakemake.params.data_root,  # noqa: F821
        snakemake.threads,  # noqa: F821
    )
