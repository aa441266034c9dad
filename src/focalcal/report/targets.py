"""Which figures and tables a config supports: the report's plan, built from the run plan.

Each study of a config names the paper it reproduces; what it can show depends on its grids.
:func:`study_artifacts` hands a :class:`StudyView` of one study to its paper's planner
(the ``plan`` of its paper's page, :mod:`focalcal.papers`), which lists the paper figures and
tables its runs support — a figure of a known posterior only with a data set that has one, a
table of focal temperature scaling only with that calibrator, and so on — and says in words
what it leaves out and why.
The theory figures need no runs and are always planned.

An :class:`Artifact` is one Snakemake target: its output path, the files it reads and the
JSON-able parameters its builder needs. Nothing here imports matplotlib, pandas or torch,
so the Snakefile can plan at parse time for free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from focalcal import catalog, paths
from focalcal.catalog import THEORY_GRIDS, calibrator_role
from focalcal.core.spec_facts import LossInfo, loss_info, paper_setting
from focalcal.paths import CLAIMS, CLAIMS_FIGURES, CLAIMS_PAIRS, CLAIMS_TABLE, INVENTORY, THEORY

PAPER_TITLES = catalog.PAPER_TITLES  # paper -> its page title
OVERVIEW = "overview"
CLAIMS_INDEX = "index"  # results/figures/claims/index.png: the compact plot of every claim


def claims_forest(page: str) -> str:
    """The forest plot of a paper page's claims (``page``: a paper) or of all claims (``index``)."""
    if page not in (*PAPER_TITLES, CLAIMS_INDEX):
        raise ValueError(f"no claims forest plot {page!r}; they are {[*PAPER_TITLES, CLAIMS_INDEX]}")
    return f"{CLAIMS_FIGURES}/{page}.png"


@dataclass
class Artifact:
    """One figure (PNG) or table (CSV) of the report, each its own Snakemake target."""

    kind: str  # "figure" | "table"
    paper: str
    name: str  # file stem, unique within its study (or among the theory figures)
    title: str  # what it shows and which paper figure/table it reproduces
    builder: str  # a theory figure: its name; else the name of its paper's builder (focalcal.catalog.builder_name)
    study: str | None = None  # None: a theory figure
    inputs: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        if self.kind == "figure":
            return paths.figure(self.study or THEORY, self.name)
        return paths.paper_table(self.study, self.name)

    def to_dict(self) -> dict:
        return {**asdict(self), "path": self.path}

    @classmethod
    def from_dict(cls, data: dict) -> Artifact:
        return cls(**{key: value for key, value in data.items() if key != "path"})


# ------------------------------------------------------------------------ theory figures

THEORY_FIGURES = catalog.theory_figures()  # name -> paper, title and plotting call


def theory_artifacts(grid: str = THEORY_GRIDS[0]) -> list[Artifact]:
    if grid not in THEORY_GRIDS:
        raise ValueError(f"report.theory_grid must be one of {THEORY_GRIDS}, got {grid!r}")
    suffix = "" if grid == "paper" else " [coarse grid: config report.theory_grid]"
    return [Artifact("figure", figure.paper, name, figure.title + suffix, builder=name, params={"grid": grid})
            for name, figure in THEORY_FIGURES.items()]


# ---------------------------------------------------------------------- study artifacts


@dataclass
class StudyReport:
    """What the report shows for one study, what it leaves out, and at what scale it ran."""

    key: str
    paper: str
    mirrors: str
    table: str | None  # the study's tidy table, None when the study calibrates nothing
    scale: dict
    artifacts: list[Artifact] = field(default_factory=list)
    not_planned: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "key": self.key, "paper": self.paper, "mirrors": self.mirrors, "table": self.table, "scale": self.scale,
            "artifacts": [a.to_dict() for a in self.artifacts], "not_planned": list(self.not_planned),
        }


@dataclass(frozen=True)
class RunView:
    """A run of one study with what the report needs to know about it."""

    run: object  # focalcal.pipeline.plan.Run
    loss: LossInfo
    roles: dict  # role -> calibrator key

    @property
    def path(self) -> str:
        return self.run.path


class StudyView:
    """A study's runs seen through the report's eyes (loss meaning, calibrator roles)."""

    def __init__(self, plan, key: str):
        self.plan, self.key = plan, key
        self.view = plan.studies[key]
        config = plan.config
        self.runs = []
        for run, keys in self.view.runs.items():
            roles = {}
            for calibrator in keys:
                roles.setdefault(calibrator_role(plan.calibrators[run.path][calibrator]), calibrator)
            self.runs.append(RunView(run, loss_info(config["losses"][run.loss]), roles))
        self.table = paths.study_table(key) if self.view.has_table(plan) else None
        self.ece_bins = list(self.view.ece_bins)

    def dataset_name(self, dataset_key: str) -> str:
        return self.plan.config["datasets"][dataset_key]["name"]

    def role_key(self, role: str, runs: Iterable[RunView] | None = None) -> str | None:
        """The calibrator key playing ``role`` (the first one met over ``runs``), or None."""
        for view in self.runs if runs is None else runs:
            if role in view.roles:
                return view.roles[role]
        return None

    def setting(self, view: RunView) -> dict:
        config = self.plan.config
        setting = paper_setting(config["datasets"][view.run.dataset], config["models"][view.run.model],
                                catalog.paper(self.view.paper).reference_model)
        return {"dataset": setting.dataset, "model": setting.model, "stand_in": setting.stand_in,
                "describe": setting.describe()}

    def calibration(self, view: RunView) -> str:
        return f"{view.run.calibration_dir}/{paths.CALIBRATION_PARAMS}"

    def logits(self, view: RunView) -> str:
        return f"{view.run.run_dir}/{paths.LOGITS}"

    def history(self, view: RunView) -> str:
        return f"{view.run.run_dir}/{paths.HISTORY}"

    def artifact(self, kind: str, name: str, title: str, builder, inputs, params) -> Artifact:
        """``builder``: one of the paper's ``FIGURE_BUILDERS`` functions, or a table's ``build`` function."""
        builder = catalog.builder_name(builder)
        if kind == "table":
            catalog.paper(self.view.paper).table_builder(builder)
        else:
            catalog.paper(self.view.paper).figure_builder(builder)
        return Artifact(kind, self.view.paper, name, title, builder, self.key, sorted(set(inputs)), params)

    def scale(self) -> dict:
        runs = [view.run for view in self.runs]
        config = self.plan.config
        return {
            "runs": len(runs),
            "datasets": sorted({r.dataset for r in runs}),
            "models": sorted({r.model for r in runs}),
            "losses": list(dict.fromkeys(r.loss for r in runs)),
            "seeds": sorted({r.seed for r in runs}),
            "folds": sorted({r.n_folds for r in runs if r.n_folds}),
            "epochs": {r.recipe: "not trained here (logits files)" if r.imported else config["recipes"][r.recipe].get("epochs")
                       for r in runs},
            "calibrators": list(dict.fromkeys(k for keys in self.view.runs.values() for k in keys)),
            "settings": sorted({self.setting(view)["describe"] for view in self.runs}),
        }


def study_artifacts(plan, study_key: str) -> StudyReport:
    """The figures and tables one study of ``plan`` (a :class:`focalcal.pipeline.Plan`) supports."""
    if study_key not in plan.studies:
        raise ValueError(f"no study {study_key!r} in the plan; it has {sorted(plan.studies)}")
    study = StudyView(plan, study_key)
    report = StudyReport(study_key, study.view.paper, study.view.mirrors, study.table, study.scale())
    paper = catalog.paper(study.view.paper)
    if study.table is None and paper.needs_study_table:
        report.not_planned.append("this study calibrates no run, so it has no metrics to tabulate or plot")
    else:
        report.artifacts, report.not_planned = paper.page().plan(study)
    names = [a.name + a.kind for a in report.artifacts]
    if len(names) != len(set(names)):
        raise ValueError(f"study {study_key!r} planned two artifacts with one name: {names}")
    return report


# ------------------------------------------------------------------------------ the plan


@dataclass
class ReportPlan:
    theory: list[Artifact]
    studies: dict[str, StudyReport]

    @property
    def notebooks(self) -> list[str]:
        return [OVERVIEW, *PAPER_TITLES]

    def artifacts(self) -> list[Artifact]:
        return [*self.theory, *(a for s in self.studies.values() for a in s.artifacts)]

    def artifact(self, study: str | None, name: str, kind: str) -> Artifact:
        for candidate in self.theory if study in (None, THEORY) else self.studies[study].artifacts:
            if candidate.name == name and candidate.kind == kind:
                return candidate
        raise ValueError(f"no {kind} {name!r} planned for {study or THEORY!r}")

    def figure_targets(self) -> list[str]:
        return [a.path for a in self.artifacts() if a.kind == "figure"]

    def table_targets(self) -> list[str]:
        return [a.path for a in self.artifacts() if a.kind == "table"]

    def notebook_inputs(self, notebook: str) -> list[str]:
        """The artifact files (and study tables) a notebook page shows; a paper page also shows its claims."""
        if notebook == OVERVIEW:
            return [s.table for s in self.studies.values() if s.table]
        if notebook not in PAPER_TITLES:
            raise ValueError(f"no notebook {notebook!r}; they are {self.notebooks}")
        paths = [CLAIMS_TABLE, CLAIMS_PAIRS, claims_forest(notebook)] + [a.path for a in self.theory if a.paper == notebook]
        for study in self.studies.values():
            if study.paper == notebook:
                paths += [a.path for a in study.artifacts] + ([study.table] if study.table else [])
        return paths

    def manifest(self, config: dict) -> dict:
        """The JSON the notebooks and the index read: config, papers, studies, artifacts."""
        return {
            "config": config,
            "papers": {paper: {"title": title, "studies": [k for k, s in self.studies.items() if s.paper == paper],
                               "theory": [a.to_dict() for a in self.theory if a.paper == paper]}
                       for paper, title in PAPER_TITLES.items()},
            "studies": {key: study.to_dict() for key, study in self.studies.items()},
            "notebooks": self.notebooks,
            "inventory": INVENTORY,
            "claims": CLAIMS_TABLE,
            "claims_pairs": CLAIMS_PAIRS,
            "claims_forest": {page: claims_forest(page) for page in (*PAPER_TITLES, CLAIMS_INDEX)},
            "claim_notes": dict((config.get("report") or {}).get("claim_notes") or {}),
        }


def report_plan(plan) -> ReportPlan:
    """Plan every figure and table of the report for a :class:`focalcal.pipeline.Plan`."""
    if THEORY in plan.studies:
        raise ValueError(f"a study may not be called {THEORY!r}: results/figures/{THEORY}/ holds the theory figures")
    for reserved, path in ((CLAIMS, CLAIMS_TABLE), (f"{CLAIMS}_pairs", CLAIMS_PAIRS)):
        if reserved in plan.studies:
            raise ValueError(f"a study may not be called {reserved!r}: {path} holds the claims' evidence")
    grid = (plan.config.get("report") or {}).get("theory_grid", THEORY_GRIDS[0])
    return ReportPlan(theory_artifacts(grid), {key: study_artifacts(plan, key) for key in plan.studies})
