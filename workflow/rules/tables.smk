# Stage 5: one tidy table per study (a row per run x calibrator x metric), for figures and report.

from focalcal.report.rules import one_of


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
    wildcard_constraints:
        study=one_of(PLAN.studies),
    conda:
        "../envs/analysis.yaml"
    script:
        "../scripts/study_table.py"


# Does the paper hold? Every paper's claims tested on the study tables (focalcal.claims):
# one row per claim x study, its paired statistic, 95 % interval, verdict and the evidence
# behind it; every pair's difference with its unit in claims_pairs.csv (its own target).

from focalcal.report.claims import claims_inputs
from focalcal.report.targets import CLAIMS_PAIRS, CLAIMS_TABLE


localrules:
    claims,


rule claims:
    input:
        claims_inputs(PLAN),
    output:
        claims=CLAIMS_TABLE,
        pairs=CLAIMS_PAIRS,
    log:
        "results/logs/claims.log",
    conda:
        "../envs/analysis.yaml"
    script:
        "../scripts/claims.py"
