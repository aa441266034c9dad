"""Rule report_index: results/report/index.html, the report's entry page."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal._io import read_csv, read_json  # noqa: E402
from focalcal.report.claims import read_claims  # noqa: E402
from focalcal.report.index import write_index  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    manifest = read_json(snakemake.input.manifest)  # noqa: F821
    inventory = read_csv(snakemake.input.inventory)  # noqa: F821
    claims = read_claims(snakemake.input.claims)  # noqa: F821
    write_index(manifest, inventory, snakemake.output[0], snakemake.params.config_files, claims)  # noqa: F821
