"""Rule run_inventory: one row per run — epochs, training time, device, size."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal._io import atomic_write_text  # noqa: E402
from focalcal.report.inventory import run_inventory  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    inventory = run_inventory(".", snakemake.params.runs)  # noqa: F821
    atomic_write_text(inventory.to_csv(index=False), snakemake.output[0])  # noqa: F821
