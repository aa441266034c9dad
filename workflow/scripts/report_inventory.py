"""Rule run_inventory: one row per run — epochs, training time, device, size."""

from focalcal.files.artefacts import atomic_write_text
from focalcal.pipeline.joblog import job_process
from focalcal.report.inventory import run_inventory

with job_process(snakemake.log[0]):
    inventory = run_inventory(".", snakemake.params.runs)
    atomic_write_text(inventory.to_csv(index=False), snakemake.output[0])
