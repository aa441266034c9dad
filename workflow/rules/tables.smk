# Stage 5: one tidy table per study (a row per run x method x metric), for figures and report.


localrules:
    study_table,


rule study_table:
    input:
        lambda wildcards: PLAN.study_inputs(wildcards.study),
    output:
        "results/tables/{study}.csv",
    log:
        "results/logs/study_table/{study}.log",
    benchmark:
        "results/benchmarks/study_table/{study}.tsv"
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/study_table.py"
