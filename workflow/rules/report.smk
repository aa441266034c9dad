# Stage 7: the HTML report. notebooks/overview.ipynb and, once per paper, notebooks/paper.ipynb
# are executed with papermill (parameters: the manifest of planned figures/tables, the paper;
# a paper's text, tables and figures come from its package in focalcal.papers) and converted
# to a self-contained HTML page; results/report/index.html links them and shows the config,
# the run inventory and what each paper reproduced at what scale. Needs figures.smk.
# `snakemake report_check` then loads every page in headless Chromium (not part of `all`:
# it needs Debian's chromium package).

from focalcal.report.rules import inventory_inputs, notebook_inputs, notebook_template
from focalcal.report.targets import claims_forest

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
        **kept(manifest=paths.REPORT_MANIFEST),
    log:
        paths.log("report", "manifest"),
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
        **kept(
            inventory=report(
                paths.INVENTORY,
                caption="../report/caption.rst",
                category="report",
            )
        ),
    log:
        paths.log("report", "run_inventory"),
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
        manifest=paths.REPORT_MANIFEST,
        shown=lambda wildcards: notebook_inputs(REPORT_PLAN, wildcards.notebook),
    output:
        **kept(html=paths.report_page(), executed=paths.executed_notebook()),
    log:
        paths.log("report", "{notebook}"),
    benchmark:
        paths.benchmark("report", "{notebook}")
    wildcard_constraints:
        notebook=one_of(REPORT_PLAN.notebooks),
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/report_notebook.py"


rule report_index:
    input:
        manifest=paths.REPORT_MANIFEST,
        inventory=paths.INVENTORY,
        claims=paths.CLAIMS_TABLE,
        claims_pairs=paths.CLAIMS_PAIRS,
        forest=claims_forest("index"),
        pages=[paths.report_page(notebook) for notebook in REPORT_PLAN.notebooks],
        linked=REPORT_PLAN.figure_targets() + REPORT_PLAN.table_targets(),
    output:
        **kept(index=paths.REPORT_INDEX),
    log:
        paths.log("report", "index"),
    conda:
        "../envs/report.yaml"
    params:
        config_files=[str(path) for path in workflow.overwrite_configfiles]
        or [paths.DEFAULT_CONFIG],
    script:
        "../scripts/report_index.py"


rule report_check:
    input:
        paths.REPORT_INDEX,
    # plain outputs: a failed check leaves no result, never the previous page's verdict
    output:
        screenshot=paths.REPORT_SCREENSHOT,
        result=paths.BROWSER_CHECK,
    log:
        paths.log("report", "check"),
    conda:
        "../envs/report.yaml"
    script:
        "../scripts/report_check.py"
