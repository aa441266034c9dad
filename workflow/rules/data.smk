# Stage 1: make each dataset of the config available under the data root (download only
# where `download: true`), once per dataset key. Local: cluster nodes often lack internet.


localrules:
    prepare_data,


rule prepare_data:
    output:
        f"{DATA_ROOT}/ready/{{dataset}}.json",
    log:
        "results/logs/prepare_data/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare_data/{dataset}.tsv"
    conda:
        "../envs/torch.yaml"
    params:
        spec=lambda wildcards: config["datasets"][wildcards.dataset],
        data_root=lambda wildcards, output: data_root_from_marker(output[0]),
        download=config["download"],
    script:
        "../scripts/prepare_data.py"
