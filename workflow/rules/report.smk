# Stage 7: the HTML report. notebooks/overview.ipynb and, once per paper, notebooks/paper.ipynb
# are executed with papermill (parameters: the manifest of planned figures/tables, the paper;
# a paper's text, tables and figures come from focalcal.report.papers) and converted
# to a self-contained HTML page; results/report/index.html links them and shows the config,
# the run inventory and what each paper reproduced at what scale. Needs figures.smk.
# `snakemake report_check` then loads every page in headless Chromium (not part of `all`:
# it needs Debian's chromium package).

from focalcal.report.rules import inventory_inputs, notebook_inputs, notebook_template
from focalcal.report.targets import CLAIMS_PAIRS, CLAIMS_TABLE, claims_forest

NOTEBOOKS = os.path.normpath(
    os.path.join(workflow.current_basedir, "..", "..", "notebooks")
)


localrules:
    report_manifest,
    run_inventory,
    report_index,
    report_check,


rule report_manifest:
    output:
        "results/report/manifest.json",
    log:
        "results/logs/report/manifest.log",
    conda:
        "../envs/report.yaml"
    params:
        manifest=lambda wildcards: REPORT_PLAN.manifest(config),
    script:
        "../scripts/report_manifest.py"


rule run_inventory:
    input:
        inventory_inputs(PLAN),
    output:
        report(
            "results/report/runs.csv",
            caption="../report/caption.rst",
            category="report",
        ),
    log:
        "results/logs/report/run_inventory.log",
    conda:
        "../envs/report.yaml"
    params:
        runs=list(PLAN.runs),
        caption="Run inventory: epochs, training time, device and size of every run.",
    script:
        "../scripts/report_inventory.py"


rule report_notebook:
    input:
        notebook=lambda wildcards: os.path.join(
            NOTEBOOKS, notebook_template(wildcards.notebook)
        ),
        manifest="results/report/manifest.json",
        shown=lambda wildcards: notebook_inputs(REPORT_PLAN, wildcards.notebook),
    output:
        html="results/report/{notebook}.html",
        executed="results/report/notebooks/{notebook}.ipynb",
    log:
        "results/logs/report/{notebook}.log",
    benchmark:
        "results/benchmarks/report/{notebook}.tsv"
    wildcard_constraints:
        notebook=one_of(REPORT_PLAN.notebooks),
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/report_notebook.py"


rule report_index:
    input:
        manifest="results/report/manifest.json",
        inventory="results/report/runs.csv",
        claims=CLAIMS_TABLE,
        claims_pairs=CLAIMS_PAIRS,
        forest=claims_forest("index"),
        pages=expand("results/report/{notebook}.html", notebook=REPORT_PLAN.notebooks),
        linked=REPORT_PLAN.figure_targets() + REPORT_PLAN.table_targets(),
    output:
        "results/report/index.html",
    log:
        "results/logs/report/index.log",
    conda:
        "../envs/report.yaml"
    params:
        config_files=[str(path) for path in workflow.overwrite_configfiles]
        or ["config/config.yaml"],
    script:
        "../scripts/report_index.py"


rule report_check:
    input:
        "results/report/index.html",
    output:
        screenshot="results/report/index.png",
        result="results/report/browser_check.json",
    log:
        "results/logs/report/check.log",
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/report_check.py"
