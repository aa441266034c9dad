# Stage 5: one tidy table per study (a row per run x calibrator x metric), for figures and report.


localrules:
    study_table,


rule study_table:
    input:
        lambda wildcards: PLAN.study_inputs(wildcards.study),
    output:
        **kept(table=paths.study_table()),
    log:
        paths.log("study_table", "{study}"),
    benchmark:
        paths.benchmark("study_table", "{study}")
    wildcard_constraints:
        study=one_of(PLAN.studies),
    conda:
        "../envs/analysis.yaml"
    script:
        "../scripts/study_table.py"


# Does the paper hold? Every paper's claims tested on the study tables (focalcal.claims):
# one row per claim x study, its paired statistic, 95 % interval, verdict and the evidence
# behind it; every pair's difference with its unit in claims_pairs.csv (its own target).

from focalcal.report.claims_table import claims_inputs


localrules:
    claims,


rule claims:
    input:
        claims_inputs(PLAN),
    output:
        **kept(claims=paths.CLAIMS_TABLE, pairs=paths.CLAIMS_PAIRS),
    log:
        paths.log("claims", "claims"),
    conda:
        "../envs/analysis.yaml"
    script:
        "../scripts/claims.py"
