# Stage 1: make each dataset of the config available under the data root (download only
# where `download: true`), once per dataset key. Local: cluster nodes often lack internet.
#
# The marker is an ancient() input of every job that reads the data set, so re-preparing a
# data set re-runs nothing downstream. Snakemake (9.x, snakemake/snakemake#4166) never plans
# the jobs behind an ancient() input of a job it re-runs for provenance (params, code) while
# its output exists: a changed dataset spec under one key (two configs sharing a data root)
# would then plan prepare_data alone and report success. So this rule has no params: the job
# reads its dataset's spec and `download` from the config, and runs only when the marker is
# missing (or forced); the onsuccess check of the Snakefile catches any other way to lose a target.


localrules:
    prepare_data,


rule prepare_data:
    output:
        DATA_READY,
    log:
        paths.log("prepare_data", "{dataset}"),
    benchmark:
        paths.benchmark("prepare_data", "{dataset}")
    conda:
        "../envs/torch.yaml"
    script:
        "../scripts/prepare_data.py"
