"""Rule report_manifest: the planned figures, tables and studies, for the notebooks and index."""

import json

from focalcal.files.artefacts import atomic_write_text
from focalcal.pipeline.joblog import job_process

with job_process(snakemake.log[0]):
    text = json.dumps(snakemake.params.manifest, indent=1, ensure_ascii=False)
    atomic_write_text(text + "\n", snakemake.output[0])
