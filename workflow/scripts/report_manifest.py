"""Rule report_manifest: the planned figures, tables and studies, for the notebooks and index."""

import json
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _common import logged  # noqa: E402

from focalcal._io import atomic_write_text  # noqa: E402

with logged(snakemake.log[0]):  # noqa: F821
    text = json.dumps(snakemake.params.manifest, indent=1, ensure_ascii=False)  # noqa: F821
    atomic_write_text(text + "\n", snakemake.output[0])  # noqa: F821
