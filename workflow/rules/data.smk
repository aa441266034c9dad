# Stage 1: make each dataset of the config available under the data root (download only
# where `download: true`), once per dataset key. Local: cluster nodes often lack internet.


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
    params:
        spec=lambda wildcards: config["datasets"][wildcards.dataset],
        data_root=lambda wildcards, output: paths.data_root_from_marker(output[0]),
        download=config["download"],
    script:
        "../scripts/prepare_data.py"
