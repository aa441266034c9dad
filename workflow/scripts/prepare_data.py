"""Rule prepare_data: make one dataset available under the data root and write its marker."""

from focalcal.pipeline.joblog import logged
from focalcal.pipeline.jobs import prepare_dataset

with logged(snakemake.log[0]):
    prepare_dataset(snakemake.params.spec, snakemake.params.data_root, snakemake.params.download, snakemake.output[0])
