"""The report: paper figures and tables from a config's runs, notebooks, and the HTML index.

* :mod:`~focalcal.report.targets` — the report plan: each study handed to its paper's planner
  (planned at Snakefile parse time, no heavy imports), the theory figures, the manifest.
  Each paper's page (text, planner, table and figure builders) lives in its package,
  :mod:`focalcal.papers`.
* :mod:`~focalcal.report.published` — the papers' published tables (package data of each
  paper package).
* :mod:`~focalcal.report.tables` — shared helpers of the paper tables, build and present.
* :mod:`~focalcal.report.figure_drawing`, :mod:`~focalcal.report.figure_inputs` — draw one planned
  figure (theory: exact; experiments: from run files and stored calibrators, never refitting);
  the files every paper's figures read.
* :mod:`~focalcal.report.claims_table` — the claims table of a config (``claims.csv``), its
  forest plots and its HTML.

Each paper's own ``figures.py`` and ``claims.py`` (:mod:`focalcal.papers`) draw that paper's
figures and declare its claims over these.
* :mod:`~focalcal.report.inventory` — what trained, how long, on what device.
* :mod:`~focalcal.report.notebooks`, :mod:`~focalcal.report.pages` — papermill execution
  and HTML conversion; the display helpers the notebooks call.
* :mod:`~focalcal.report.index` — ``results/report/index.html``.
* :mod:`~focalcal.report.browser` — the headless-Chromium check of the finished report.

Importing this package imports only the light planning modules.
"""

from focalcal.report.targets import (
    PAPER_TITLES,
    THEORY_FIGURES,
    Artifact,
    ReportPlan,
    StudyReport,
    report_plan,
    study_artifacts,
)

__all__ = ["PAPER_TITLES", "THEORY_FIGURES", "Artifact", "ReportPlan", "StudyReport", "report_plan", "study_artifacts"]
