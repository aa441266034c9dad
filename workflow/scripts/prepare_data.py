"""Rule prepare_data: make one dataset available under the data root and write its marker.

The spec and `download` come from the config, not the rule's params (workflow/rules/data.smk says why)."""

from focalcal import paths
from focalcal.pipeline.joblog import job_process
from focalcal.pipeline.jobs import prepare_dataset

with job_process(snakemake.log[0]):
    prepare_dataset(snakemake.config["datasets"][snakemake.wildcards.dataset],
                    paths.data_root_from_marker(snakemake.output[0]), snakemake.config["download"], snakemake.output[0])
