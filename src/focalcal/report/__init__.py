"""The report: paper figures and tables from a config's runs, notebooks, and the HTML index.

* :mod:`~focalcal.report.targets` — which figures/tables each study supports (planned at
  Snakefile parse time, no heavy imports), the theory figure registry, the manifest.
* :mod:`~focalcal.report.naming` — what a config's loss/calibrator/dataset keys mean for
  the papers (focal γ, paradigm, calibrator role, the published setting a run stands for).
* :mod:`~focalcal.report.published` — the papers' published tables (package data).
* :mod:`~focalcal.report.tables` — paper tables from tidy study tables, published beside ours.
* :mod:`~focalcal.report.figures`, :mod:`~focalcal.report.study_figures` — draw one planned
  figure (theory: exact; experiments: from run files and stored calibrators, never refitting).
* :mod:`~focalcal.report.inventory` — what trained, how long, on what device.
* :mod:`~focalcal.report.notebooks`, :mod:`~focalcal.report.pages` — papermill execution
  and HTML conversion; the display helpers the notebooks call.
* :mod:`~focalcal.report.index` — ``results/report/index.html``.
* :mod:`~focalcal.report.browser` — the headless-Chromium check of the finished report.

Importing this package imports only the light planning modules.
"""

from focalcal.report.targets import (PAPERS, THEORY_FIGURES, Artifact, ReportPlan, StudyReport, report_plan,
                                     study_artifacts)

__all__ = ["PAPERS", "THEORY_FIGURES", "Artifact", "ReportPlan", "StudyReport", "report_plan", "study_artifacts"]
