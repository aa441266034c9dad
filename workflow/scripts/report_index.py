"""Rule report_index: results/report/index.html, the report's entry page."""

import json
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

import pandas as pd  # noqa: E402

from focalcal.report.index import write_index  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    with open(snakemake.input.manifest) as handle:  # noqa: F821
        manifest = json.load(handle)
    inventory = pd.read_csv(snakemake.input.inventory)  # noqa: F821
    write_index(manifest, inventory, snakemake.output[0], snakemake.params.config_files)  # noqa: F821
