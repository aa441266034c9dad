"""Rule export_logits: dump a trained run's val/test logits from its checkpoint (no training)."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.jobs import export_logits  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    export_logits(snakemake.params.run_dir, snakemake.params.data_root, snakemake.threads)  # noqa: F821
