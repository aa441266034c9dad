"""Rule prepare_data: make one dataset available under the data root and write its marker."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal.pipeline.jobs import prepare_dataset  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    prepare_dataset(snakemake.params.spec, snakemake.params.data_root, snakemake.params.download, snakemake.output[0])  # noqa: F821
