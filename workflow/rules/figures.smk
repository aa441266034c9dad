# Stage 6: the papers' figures and tables, each its own target (delete one and re-make it
# alone). Theory figures need no runs: results/figures/theory/<name>.png. A study's figures
# and paper tables: results/figures/<study>/<name>.png, results/tables/<study>/<name>.csv.
# What a study gets depends on its paper and its grids (focalcal.report.targets); a figure
# whose inputs the config does not provide is not planned, and the report says so.
# Figures read run files, stored calibrators and study tables: they never refit.

from focalcal.report.rules import rst_text
from focalcal.report.targets import CLAIMS_INDEX, PAPER_TITLES, THEORY_FIGURES


localrules:
    paper_table,
    claims_forest,


rule theory_figure:
    output:
        **kept(
            figure=report(
                paths.figure(paths.THEORY),
                caption="../report/caption.rst",
                category=lambda wildcards: THEORY_FIGURES[wildcards.name].paper,
                subcategory="theory",
                labels=lambda wildcards: {"figure": wildcards.name},
            )
        ),
    log:
        paths.log(f"figures/{paths.THEORY}", "{name}"),
    benchmark:
        paths.benchmark(f"figures/{paths.THEORY}", "{name}")
    wildcard_constraints:
        name=one_of(THEORY_FIGURES),
    conda:
        "../envs/report.yaml"
    params:
        artifact=lambda wildcards: REPORT_PLAN.artifact(
            None, wildcards.name, "figure"
        ).to_dict(),
        caption=lambda wildcards: rst_text(
            f"{THEORY_FIGURES[wildcards.name].title} (exact, no training)."
        ),
    script:
        "../scripts/figure_make.py"


rule study_figure:
    input:
        lambda wildcards: REPORT_PLAN.artifact(
            wildcards.study, wildcards.name, "figure"
        ).inputs,
    output:
        **kept(
            figure=report(
                paths.figure(),
                caption="../report/caption.rst",
                category=lambda wildcards: REPORT_PLAN.studies[wildcards.study].paper,
                subcategory="{study}",
                labels=lambda wildcards: {"figure": wildcards.name},
            )
        ),
    log:
        paths.log("figures/{study}", "{name}"),
    benchmark:
        paths.benchmark("figures/{study}", "{name}")
    wildcard_constraints:
        study=one_of(FIGURE_STUDIES),
        name=one_of(FIGURE_NAMES),
    conda:
        "../envs/report.yaml"
    params:
        artifact=lambda wildcards: REPORT_PLAN.artifact(
            wildcards.study, wildcards.name, "figure"
        ).to_dict(),
        caption=lambda wildcards: rst_text(
            REPORT_PLAN.artifact(wildcards.study, wildcards.name, "figure").title
            + f" — study {wildcards.study}: {REPORT_PLAN.studies[wildcards.study].mirrors}"
        ),
    script:
        "../scripts/figure_make.py"


rule paper_table:
    input:
        paths.study_table(),
    output:
        **kept(
            table=report(
                paths.paper_table(),
                caption="../report/caption.rst",
                category=lambda wildcards: REPORT_PLAN.studies[wildcards.study].paper,
                subcategory="{study}",
                labels=lambda wildcards: {"table": wildcards.name},
            )
        ),
    log:
        paths.log("tables/{study}", "{name}"),
    wildcard_constraints:
        study=one_of(TABLE_STUDIES),
        name=one_of(TABLE_NAMES),
    conda:
        "../envs/report.yaml"
    params:
        artifact=lambda wildcards: REPORT_PLAN.artifact(
            wildcards.study, wildcards.name, "table"
        ).to_dict(),
        caption=lambda wildcards: rst_text(
            REPORT_PLAN.artifact(wildcards.study, wildcards.name, "table").title
            + " — ours (mean and std over seeds) beside the published value of the paper's setting"
        ),
    script:
        "../scripts/table_paper.py"


# The claims' evidence as pictures: per paper page one row per claim (pairs, mean, 95 %
# interval, threshold, coloured by verdict); results/figures/claims/index.png: every claim.
rule claims_forest:
    input:
        claims=paths.CLAIMS_TABLE,
        pairs=paths.CLAIMS_PAIRS,
    output:
        **kept(figure=paths.figure(paths.CLAIMS, "{page}")),
    log:
        paths.log(f"figures/{paths.CLAIMS}", "{page}"),
    wildcard_constraints:
        page=one_of([*PAPER_TITLES, CLAIMS_INDEX]),
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/claims_forest.py"
