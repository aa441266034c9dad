"""Which figures and tables a config supports: the report's plan, built from the run plan.

Each study of a config names the paper it reproduces; what it can show depends on its grids.
:func:`study_artifacts` maps one study to the paper figures and tables its runs support —
charoenphakdee2021 Fig 3 only with a data set of known posterior, mukhoti2020 Fig 1 only when
the recipe records training reliability, komisarenko2024 Table 1 only with focal temperature
scaling among the calibrators, and so on — and says in words what it leaves out and why.
The theory figures need no runs and are always planned.

An :class:`Artifact` is one Snakemake target: its output path, the files it reads and the
JSON-able parameters its builder needs. Nothing here imports matplotlib, pandas or torch,
so the Snakefile can plan at parse time for free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from focalcal import catalog
from focalcal.catalog import ROLE_LABELS, calibrator_role
from focalcal.report.naming import (HOSSAIN_TABLES, LossInfo, hossain_setting, loss_color_key, loss_info,
                                    paper_setting)

FIGURES = "results/figures"
TABLES = "results/tables"
REPORT = "results/report"
THEORY = "theory"  # results/figures/theory/<name>.png

PAPERS = catalog.PAPERS  # paper -> its page title
OVERVIEW = "overview"
INVENTORY = f"{REPORT}/runs.csv"
CLAIMS = "claims"
CLAIMS_TABLE = f"{TABLES}/{CLAIMS}.csv"  # every paper's claims tested on the study tables (focalcal.report.claims)


@dataclass
class Artifact:
    """One figure (PNG) or table (CSV) of the report, each its own Snakemake target."""

    kind: str  # "figure" | "table"
    paper: str
    name: str  # file stem, unique within its study (or among the theory figures)
    title: str  # what it shows and which paper figure/table it reproduces
    builder: str  # key of the function that makes it (focalcal.report.figures / .tables)
    study: str | None = None  # None: a theory figure
    inputs: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)

    @property
    def path(self) -> str:
        if self.kind == "figure":
            return f"{FIGURES}/{self.study or THEORY}/{self.name}.png"
        return f"{TABLES}/{self.study}/{self.name}.csv"

    def to_dict(self) -> dict:
        return {**asdict(self), "path": self.path}

    @classmethod
    def from_dict(cls, data: dict) -> Artifact:
        return cls(**{key: value for key, value in data.items() if key != "path"})


# ------------------------------------------------------------------------ theory figures

THEORY_FIGURES = catalog.THEORY_FIGURES  # name -> paper, title and plotting call


THEORY_GRIDS = ("paper", "coarse")  # config report.theory_grid: the papers' grids, or quick ones for tests


def theory_artifacts(grid: str = "paper") -> list[Artifact]:
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
class _RunView:
    """A run of one study with what the report needs to know about it."""

    run: object  # focalcal.pipeline.plan.Run
    loss: LossInfo
    roles: dict  # role -> calibrator key

    @property
    def path(self) -> str:
        return self.run.path


class _Study:
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
            self.runs.append(_RunView(run, loss_info(config["losses"][run.loss]), roles))
        self.table = f"{TABLES}/{key}.csv" if self.view.has_table(plan) else None
        self.ece_bins = list(self.view.ece_bins)

    def dataset_name(self, dataset_key: str) -> str:
        return self.plan.config["datasets"][dataset_key]["name"]

    def role_key(self, role: str, runs: Iterable[_RunView] | None = None) -> str | None:
        """The calibrator key playing ``role`` (the first one met over ``runs``), or None."""
        for view in self.runs if runs is None else runs:
            if role in view.roles:
                return view.roles[role]
        return None

    def setting(self, view: _RunView) -> dict:
        config = self.plan.config
        setting = paper_setting(config["datasets"][view.run.dataset], config["models"][view.run.model])
        return {"dataset": setting.dataset, "model": setting.model, "stand_in": setting.stand_in,
                "describe": setting.describe()}

    def calibration(self, view: _RunView) -> str:
        return f"{view.run.calibration_dir}/calibration.json"

    def logits(self, view: _RunView) -> str:
        return f"{view.run.run_dir}/logits.npz"

    def history(self, view: _RunView) -> str:
        return f"{view.run.run_dir}/history.csv"

    def artifact(self, kind: str, name: str, title: str, builder: str, inputs, params) -> Artifact:
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
            "epochs": {r.recipe: config["recipes"][r.recipe].get("epochs") for r in runs},
            "calibrators": list(dict.fromkeys(k for keys in self.view.runs.values() for k in keys)),
            "settings": sorted({self.setting(view)["describe"] for view in self.runs}),
        }


def _first_seed(views: list[_RunView]) -> list[_RunView]:
    """Keep the runs of the first (model, recipe) met and of its smallest seed."""
    if not views:
        return []
    model, recipe = views[0].run.model, views[0].run.recipe
    same = [v for v in views if v.run.model == model and v.run.recipe == recipe]
    seed = min(v.run.seed for v in same)
    return [v for v in same if v.run.seed == seed]


def _focal_family(view: _RunView) -> bool:
    return view.loss.gamma is not None


# ----------------------------------------------------------------- charoenphakdee2021


def _charoenphakdee2021(study: _Study) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    posterior_sets = [d for d in dict.fromkeys(v.run.dataset for v in study.runs)
                      if catalog.dataset(study.dataset_name(d)).known_posterior]
    # Fig 3: raw scores, TS_NLL and Ψ^γ along x against the known posterior.
    for dataset in posterior_sets:
        views = _first_seed([v for v in study.runs if v.run.dataset == dataset and _focal_family(v)
                             and not v.loss.smoothing and "raw" in v.roles])
        if not views:
            notes.append(f"Fig 3 on {dataset}: needs uncalibrated cross-entropy or focal runs")
            continue
        views.sort(key=lambda v: v.loss.gamma)
        panels = [{"run": v.path, "calibrator": v.roles["raw"], "label": v.loss.label} for v in views]
        for role, suffix in (("ts_nll", "TS_NLL"), ("psi", "Ψ^γ")):
            panels += [{"run": v.path, "calibrator": v.roles[role], "label": f"{v.loss.label} + {suffix}"}
                       for v in views if v.loss.gamma > 0 and role in v.roles]
        runs = [{"path": v.path, "columns": v.run.columns(), "run_config": f"{v.run.run_dir}/run_config.json",
                 "info": f"{v.run.run_dir}/run.json"} for v in views]
        inputs = [study.table] + [study.logits(v) for v in views] + [study.calibration(v) for v in views]
        inputs += [r["run_config"] for r in runs] + [r["info"] for r in runs]
        params = {"dataset": dataset, "runs": runs, "panels": panels, "bins": study.ece_bins[0],
                  "data_root": study.plan.config.get("data_root", "data")}
        artifacts.append(study.artifact("figure", f"charoenphakdee2021_fig3_{dataset}",
                                        f"Fig 3: predicted scores against x on {dataset} (known posterior): raw, TS_NLL, Ψ^γ",
                                        "c21_synthetic_posterior", inputs, params))
        artifacts.append(study.artifact("table", f"charoenphakdee2021_fig3_{dataset}",
                                        f"Fig 3 numbers on {dataset}: ERR, KLD and ECE of each panel",
                                        "c21_synthetic_scores", [study.table], params))
    if not posterior_sets:
        notes.append("Fig 3 (scores against x): needs a data set with a known posterior (synthetic1d); this study has none")

    # Figs 4-6: the training paradigms on real data.
    real = [v for v in study.runs if _focal_family(v) and not catalog.dataset(study.dataset_name(v.run.dataset)).known_posterior]
    standard = [v for v in real if v.loss.paradigm == "Standard"]
    smoothed = [v for v in real if v.loss.paradigm == "LS"]
    raw_psi = lambda v: {"raw", "psi"} <= set(v.roles)  # noqa: E731
    paradigm_runs = {
        "Standard": [v for v in standard if raw_psi(v)],
        "TS_FL": [v for v in standard if {"ts_focal", "ts_focal_psi"} <= set(v.roles)],
        "LS": [v for v in smoothed if raw_psi(v)],
    }
    if not any(paradigm_runs.values()):
        notes.append("Figs 4-6 (ECE-raw vs ECE-Ψ): need focal/CE runs on real data with uncalibrated and Ψ^γ "
                     "(or TS_FL and TS_FL+Ψ^γ) among the calibrators; this study has none")
        return artifacts, notes

    for dataset in dict.fromkeys(v.run.dataset for views in paradigm_runs.values() for v in views):
        artifact = _c21_reliability(study, dataset, paradigm_runs)
        if artifact is not None:
            artifacts.append(artifact)

    comparisons = []  # (paradigm, loss keys, "raw" key, "psi" key)
    if paradigm_runs["Standard"]:
        comparisons.append(("Standard", paradigm_runs["Standard"], "raw", "psi"))
    if paradigm_runs["TS_FL"]:
        comparisons.append(("TS_FL", paradigm_runs["TS_FL"], "ts_focal", "ts_focal_psi"))
    if paradigm_runs["LS"]:
        comparisons.append(("LS", paradigm_runs["LS"], "raw", "psi"))
    groups = [{"paradigm": paradigm, "losses": {v.run.loss: v.loss.gamma for v in views},
               "datasets": sorted({v.run.dataset for v in views}),
               "raw": study.role_key(raw, views), "psi": study.role_key(psi, views)}
              for paradigm, views, raw, psi in comparisons]
    params = {"groups": groups, "bins": study.ece_bins[0]}
    if paradigm_runs["Standard"]:
        artifacts.append(study.artifact("figure", "charoenphakdee2021_fig5_ece_boxplots",
                                        "Fig 5: ECE over seeds against γ, raw vs Ψ^γ (Standard training), per data set and model",
                                        "c21_ece_boxplots", [study.table], {**params, "paradigms": ["Standard"]}))
    else:
        notes.append("Fig 5 (Standard paradigm box plots): needs cross-entropy/focal runs with uncalibrated and Ψ^γ")
    later = [p for p in ("TS_FL", "LS") if paradigm_runs[p]]
    if later:
        artifacts.append(study.artifact("figure", "charoenphakdee2021_fig6_ece_boxplots",
                                        f"Fig 6: ECE over seeds against γ, raw vs Ψ^γ, for the {' and '.join(later)} paradigm(s)",
                                        "c21_ece_boxplots", [study.table], {**params, "paradigms": later}))
    else:
        notes.append("Fig 6 (TS_FL and LS paradigms): needs TS_FL and TS_FL+Ψ^γ calibrators, or label-smoothed focal runs")
    artifacts.append(study.artifact("table", "charoenphakdee2021_ece_summary",
                                    "ECE-raw and ECE-Ψ over seeds per paradigm, data set, model and γ (the numbers behind Figs 5-6)",
                                    "c21_ece_summary", [study.table], params))
    return artifacts, notes


def _c21_reliability(study: _Study, dataset: str, paradigm_runs: dict) -> Artifact | None:
    """Fig 4 for one data set: reliability raw vs Ψ^γ per paradigm (rows) and γ (columns)."""
    on_dataset = {p: [v for v in views if v.run.dataset == dataset] for p, views in paradigm_runs.items()}
    models = list(dict.fromkeys(v.run.model for views in on_dataset.values() for v in views))
    coverage = {m: sum(any(v.run.model == m for v in views) for views in on_dataset.values()) for m in models}
    best = max(coverage.values())
    model = [m for m in models if coverage[m] == best][-1]  # ties: the last listed (grids list small to large)
    panels, inputs = [], []
    for paradigm, views in on_dataset.items():
        views = _first_seed([v for v in views if v.run.model == model])
        for v in sorted(views, key=lambda v: v.loss.gamma):
            panel = {"paradigm": paradigm, "gamma": v.loss.gamma, "run": v.path, "temperature_from": None}
            inputs.append(study.logits(v))
            if paradigm == "TS_FL":
                panel["temperature_from"] = v.roles["ts_focal"]
                inputs.append(study.calibration(v))
            panels.append(panel)
    if not panels:
        return None
    return study.artifact("figure", f"charoenphakdee2021_fig4_{dataset}",
                          f"Fig 4: reliability of raw vs Ψ^γ scores on {dataset} ({model}), per paradigm and γ",
                          "c21_reliability", inputs, {"dataset": dataset, "model": model, "panels": panels,
                                                      "bins": study.ece_bins[0]})


# ------------------------------------------------------------------------- komisarenko2024


def _komisarenko2024(study: _Study) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    fts = {c: study.role_key(f"fts_{c}") for c in ("ece", "nll")}
    ts = {c: study.role_key(f"ts_grid_{c}") or study.role_key(f"ts_{c}") for c in ("ece", "nll")}
    if not any(fts.values()):
        notes.append("Table 1 and Fig 8: need focal temperature scaling (focal_temperature_scaling over several γ_ev) "
                     "among the calibrators; this study has none")
        return artifacts, notes
    losses = {}
    for v in study.runs:
        approach = v.loss.komisarenko_approach
        losses[v.run.loss] = {"label": v.loss.label, "approach": approach[0] if approach else None,
                              "gamma_train": approach[1] if approach else None}
    settings = {f"{v.run.dataset}/{v.run.model}": study.setting(v) for v in study.runs}
    params = {"ts": ts, "fts": fts, "losses": losses, "settings": settings, "bins": 15 if 15 in study.ece_bins else study.ece_bins[0]}
    artifacts.append(study.artifact("table", "komisarenko2024_table1",
                                    "Table 1: TS vs focal TS — accuracy, log-loss and ECE (15 equal-mass bins) with the chosen T and γ_ev, mean ± std over seeds",
                                    "k24_table1", [study.table], params))
    criterion = "ece" if fts["ece"] else "nll"
    views = [v for v in study.runs if v.loss.komisarenko_approach and v.loss.komisarenko_approach[0] in ("cross_entropy", "focal")
             and f"fts_{criterion}" in v.roles]
    if views:
        runs = [{"path": v.path, "dataset": v.run.dataset, "loss": v.loss.label, "gamma_train": v.loss.gamma,
                 "color": list(loss_color_key(v.loss)),
                 "calibration": study.calibration(v), "calibrator": v.roles[f"fts_{criterion}"]} for v in views]
        artifacts.append(study.artifact("figure", "komisarenko2024_fig8_optimal_temperature",
                                        f"Fig 8: optimal T of focal TS against γ_ev (chosen by val {criterion.upper()}), one line per γ_tr",
                                        "k24_optimal_temperature", [r["calibration"] for r in runs],
                                        {"runs": runs, "criterion": criterion}))
    else:
        notes.append("Fig 8: needs focal temperature scaling on cross-entropy or focal-loss runs")
    return artifacts, notes


# ---------------------------------------------------------------------------- mukhoti2020

# table -> (metric, stages, which losses, title). Losses: "main" = the paper's Tables 1-2
# columns (everything but fixed-γ focal and the FLSc/FLSD-532 variants, plus FLSD-53),
# "focal" = its appendix Tables 5-7 (the focal variants), "all" = every loss.
MUKHOTI_TABLES = {
    1: ("ece", ("pre_t", "post_t"), "main", "Table 1: ECE (%, 15 bins) before and after temperature scaling"),
    2: ("adaece", ("pre_t", "post_t"), "main", "Table 2: AdaECE (%, 15 equal-mass bins) before and after temperature scaling"),
    4: ("error", ("none",), "main", "Table 4: test error (%)"),
    5: ("ece", ("pre_t", "post_t"), "focal", "Table 5: ECE (%) of the focal-loss variants, before and after TS"),
    6: ("adaece", ("pre_t", "post_t"), "focal", "Table 6: AdaECE (%) of the focal-loss variants, before and after TS"),
    7: ("error", ("none",), "focal", "Table 7: test error (%) of the focal-loss variants"),
    8: ("top5_error", ("none",), "main", "Table 8: top-5 error (%); the paper prints top-1 and top-5 accuracy"),
    9: ("nll", ("pre_t",), "all", "Table 9: NLL (×100) before temperature scaling"),
    10: ("nll", ("post_t",), "all", "Table 10: NLL (×100) after temperature scaling"),
    11: ("mce", ("pre_t",), "all", "Table 11: MCE (%) before temperature scaling"),
    12: ("mce", ("post_t",), "all", "Table 12: MCE (%) after temperature scaling"),
    13: ("s99", ("pre_t", "post_t"), "all", "Table 13: |S99| (% of test samples with confidence ≥ 0.99) and accuracy on S99"),
}
_FOCAL_VARIANTS = ("flsc531", "flsc532", "flsd53", "flsd532")
_MAIN_EXTRAS = {4: ("FL-3", "FLSc-532")}  # Table 4 also prints these two focal variants


def _in_table(table: int, info: LossInfo) -> bool:
    group = MUKHOTI_TABLES[table][2]
    focal_variant = (info.name == "focal" and not info.smoothing and (info.gamma or 0) > 0) or info.name in _FOCAL_VARIANTS
    if group == "all":
        return True
    if group == "focal":
        return focal_variant
    return not focal_variant or info.name == "flsd53" or info.mukhoti_name in _MAIN_EXTRAS.get(table, ())


def _mukhoti2020(study: _Study) -> tuple[list[Artifact], list[str]]:
    artifacts, notes = [], []
    pre = study.role_key("raw")
    post = study.role_key("ts_ece") or study.role_key("ts_nll")
    post_role = "ts_ece" if study.role_key("ts_ece") else ("ts_nll" if post else None)
    if pre is None:
        notes.append("Tables 1-13: need the uncalibrated model (an identity calibrator); this study has none")
    else:
        for number, (metric, stages, _, title) in MUKHOTI_TABLES.items():
            if "post_t" in stages and post is None and "pre_t" not in stages:
                notes.append(f"Table {number}: needs temperature scaling (by val ECE or NLL) among the calibrators")
                continue
            losses = {v.run.loss: v.loss.mukhoti_name for v in study.runs if _in_table(number, v.loss)}
            if not losses:
                notes.append(f"Table {number}: none of this study's losses is in that table")
                continue
            settings = {f"{v.run.dataset}/{v.run.model}": study.setting(v) for v in study.runs}
            params = {"table": number, "metric": metric, "stages": [s for s in stages if s != "post_t" or post],
                      "pre": pre, "post": post, "post_label": ROLE_LABELS.get(post_role, ""), "losses": losses,
                      "settings": settings, "bins": 15 if 15 in study.ece_bins else study.ece_bins[0]}
            if post is None and "post_t" in stages:
                title += " (no temperature scaling in this study: before only)"
            artifacts.append(study.artifact("table", f"mukhoti2020_table{number}", title, "m20_table", [study.table], params))
    # Figs 1-3: per-epoch diagnostics of one cross-entropy run and its focal companions.
    ce = [v for v in study.runs if v.loss.gamma == 0 and not v.loss.smoothing]
    if not ce:
        notes.append("Figs 1-3 (training diagnostics): need a cross-entropy run; this study has none")
        return artifacts, notes
    anchor = ce[0].run
    same_setting = lambda v: (v.run.dataset, v.run.model, v.run.recipe, v.run.seed) == (  # noqa: E731
        anchor.dataset, anchor.model, anchor.recipe, anchor.seed)
    where = f"{anchor.dataset}, {anchor.model}, seed {anchor.seed}"
    recipe = study.plan.config["recipes"][anchor.recipe]
    if recipe.get("reliability_epochs"):
        artifacts.append(study.artifact("figure", "mukhoti2020_fig1_training_reliability",
                                        f"Fig 1: training-set reliability at several epochs (cross-entropy, {where})",
                                        "m20_training_reliability", [study.history(ce[0])],
                                        {"run_dir": anchor.run_dir, "epochs": list(recipe["reliability_epochs"])}))
    else:
        notes.append(f"Fig 1: recipe {anchor.recipe!r} records no training reliability (set reliability_epochs)")
    artifacts.append(study.artifact("figure", "mukhoti2020_fig2_training_curves",
                                    f"Fig 2: NLL, entropy, error and ECE per epoch (cross-entropy, {where})",
                                    "m20_training_curves", [study.history(ce[0])], {"history": study.history(ce[0])}))
    focal = [v for v in study.runs if same_setting(v) and v.loss.name == "focal" and not v.loss.smoothing and v.loss.gamma]
    if focal:
        companions = [ce[0]] + sorted(focal, key=lambda v: v.loss.gamma)
        histories = {v.loss.label: study.history(v) for v in companions}
        colors = {v.loss.label: list(loss_color_key(v.loss)) for v in companions}
        artifacts.append(study.artifact("figure", "mukhoti2020_fig3_training_comparison",
                                        f"Fig 3: per-epoch diagnostics of cross-entropy vs focal loss ({where})",
                                        "m20_training_comparison", list(histories.values()),
                                        {"histories": histories, "colors": colors}))
    else:
        notes.append(f"Fig 3: needs focal-loss runs beside the cross-entropy run ({where})")
    companions = [ce[0]] + sorted(focal, key=lambda v: v.loss.gamma)
    colors = {v.loss.label: list(loss_color_key(v.loss)) for v in companions}
    if focal and recipe.get("gradient_norm_epochs"):
        epochs = list(recipe["gradient_norm_epochs"])
        artifacts.append(study.artifact(
            "figure", "mukhoti2020_fig4bcd_gradient_norms",
            f"Fig 4b-d: per-sample gradient norms of the last linear layer over the training set at epochs "
            f"{', '.join(map(str, epochs))} (cross-entropy vs focal loss, {where})",
            "m20_gradient_norms", [study.history(v) for v in companions],
            {"run_dirs": {v.loss.label: v.run.run_dir for v in companions}, "epochs": epochs, "colors": colors}))
    elif focal:
        notes.append(f"Fig 4b-d: recipe {anchor.recipe!r} records no per-sample gradient norms (set gradient_norm_epochs)")
    if focal:
        artifacts.append(study.artifact(
            "figure", "mukhoti2020_fig10_feature_norms",
            f"Fig 10: L2 norm of the last block's features, mean over the training set, per epoch ({where})",
            "m20_feature_norms", [study.history(v) for v in companions],
            {"histories": {v.loss.label: study.history(v) for v in companions}, "colors": colors}))
    artifacts += _m20_fig9(study, [v for v in study.runs if same_setting(v)], where, notes)
    return artifacts, notes


# M20 Fig 9's four models, by loss name (cross-entropy: γ = 0 without smoothing).
_FIG9_LOSSES = ("cross_entropy", "brier", "mmce", "flsd53")


def _m20_fig9(study: _Study, views: list[_RunView], where: str, notes: list[str]) -> list[Artifact]:
    """Fig 9: a few test inputs every model classifies correctly / wrongly, with each model's
    prediction and confidence before and after temperature scaling."""
    by_loss = {}
    for v in views:
        name = "cross_entropy" if v.loss.gamma == 0 and not v.loss.smoothing else v.loss.name
        by_loss.setdefault(name, v)
    missing = [name for name in _FIG9_LOSSES if name not in by_loss]
    chosen = [by_loss[name] for name in _FIG9_LOSSES if name in by_loss]
    uncalibrated = [v.loss.label for v in chosen if "raw" not in v.roles or not ({"ts_ece", "ts_nll"} & set(v.roles))]
    if missing or uncalibrated:
        lacks = (f"runs with {', '.join(missing)}" if missing else
                 f"the uncalibrated model and temperature scaling of {', '.join(uncalibrated)}")
        notes.append(f"Fig 9: needs {lacks} beside the cross-entropy run ({where})")
        return []
    models = [{"label": v.loss.label, "color": list(loss_color_key(v.loss)), "logits": study.logits(v),
               "calibration": study.calibration(v), "raw": v.roles["raw"], "post": v.roles.get("ts_ece") or v.roles.get("ts_nll"),
               "run_dir": v.run.run_dir} for v in chosen]
    anchor = chosen[0]
    run = {"path": anchor.path, "run_config": f"{anchor.run.run_dir}/run_config.json", "info": f"{anchor.run.run_dir}/run.json"}
    inputs = [m["logits"] for m in models] + [m["calibration"] for m in models] + [run["run_config"], run["info"]]
    params = {"models": models, "run": run, "data_root": study.plan.config.get("data_root", "data")}
    return [study.artifact("figure", "mukhoti2020_fig9_test_confidences",
                           f"Fig 9: test inputs all four models classify correctly (top) or wrongly (bottom), with each "
                           f"model's prediction and confidence before and after temperature scaling ({where})",
                           "m20_test_confidences", inputs, params)]


def _hossain2021(study: _Study) -> tuple[list[Artifact], list[str]]:
    views = [v for v in study.runs if v.run.segmentation]
    if not views:
        return [], ["Tables 2-3 and Figs 3-6: need segmentation runs (IoU and Hausdorff distance); this study has none"]
    config = study.plan.config
    settings = {}
    for v in views:
        setting = hossain_setting(config["datasets"][v.run.dataset], config["models"][v.run.model])
        settings[f"{v.run.dataset}/{v.run.model}"] = {
            "dataset": setting.dataset, "model": setting.model, "stand_in": setting.stand_in,
            "table": HOSSAIN_TABLES.get(setting.model), "describe": setting.describe()}
    losses = {v.run.loss: {"label": v.loss.label if v.loss.name != "focal" else "FL",
                           "paper": catalog.loss(v.loss.name).paper_names.get("hossain2021"), "color": list(loss_color_key(v.loss))}
              for v in views}
    params = {"losses": losses, "settings": settings}
    artifacts = [
        study.artifact("table", "hossain2021_tables2_3",
                       "Tables 2-3: IoU (%) and Hausdorff distance (pixels; the paper's in mm) per data set, "
                       "architecture and loss, mean ± std over folds, beside the published values",
                       "h21_tables", [study.table], params),
        study.artifact("figure", "hossain2021_scores_over_folds",
                       "Tables 2-3 as box plots: mean IoU and Hausdorff distance of every fold, per loss",
                       "h21_scores", [study.table], params),
    ]
    # Figs 3-6: one test fold's images with every loss's prediction, per data set and architecture.
    for dataset, model in dict.fromkeys((v.run.dataset, v.run.model) for v in views):
        same = [v for v in views if (v.run.dataset, v.run.model) == (dataset, model)]
        first = min(v.run.seed for v in same)
        chosen = [v for v in same if v.run.seed == first]
        runs = [{"loss": v.run.loss, "samples": f"{v.run.evaluation_dir}/samples.npz"} for v in chosen]
        where = f"fold {first}" if chosen[0].run.n_folds else f"seed {first}"
        artifacts.append(study.artifact("figure", f"hossain2021_overlays_{dataset}_{model}",
                                        f"Figs 3-6: test images of {dataset} ({model}, {where}) with each loss's "
                                        "predicted mask", "h21_overlays", [r["samples"] for r in runs],
                                        {"runs": runs, "losses": losses}))
    return artifacts, []


_PAPER_PLANNERS = {
    "charoenphakdee2021": _charoenphakdee2021,
    "komisarenko2024": _komisarenko2024,
    "mukhoti2020": _mukhoti2020,
    "hossain2021": _hossain2021,
}


def study_artifacts(plan, study_key: str) -> StudyReport:
    """The figures and tables one study of ``plan`` (a :class:`focalcal.pipeline.Plan`) supports."""
    if study_key not in plan.studies:
        raise ValueError(f"no study {study_key!r} in the plan; it has {sorted(plan.studies)}")
    study = _Study(plan, study_key)
    report = StudyReport(study_key, study.view.paper, study.view.mirrors, study.table, study.scale())
    planner = _PAPER_PLANNERS.get(study.view.paper)
    if planner is None:
        report.not_planned.append(f"no paper figures for paper {study.view.paper!r}; the study's tidy table is shown")
    elif study.table is None and study.view.paper != "hossain2021":
        report.not_planned.append("this study calibrates no run, so it has no metrics to tabulate or plot")
    else:
        report.artifacts, report.not_planned = planner(study)
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
        return [OVERVIEW, *PAPERS]

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
        if notebook not in PAPERS:
            raise ValueError(f"no notebook {notebook!r}; they are {self.notebooks}")
        paths = [CLAIMS_TABLE] + [a.path for a in self.theory if a.paper == notebook]
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
                       for paper, title in PAPERS.items()},
            "studies": {key: study.to_dict() for key, study in self.studies.items()},
            "notebooks": self.notebooks,
            "inventory": INVENTORY,
            "claims": CLAIMS_TABLE,
            "claim_notes": dict((config.get("report") or {}).get("claim_notes") or {}),
        }


def report_plan(plan) -> ReportPlan:
    """Plan every figure and table of the report for a :class:`focalcal.pipeline.Plan`."""
    if THEORY in plan.studies:
        raise ValueError(f"a study may not be called {THEORY!r}: results/figures/{THEORY}/ holds the theory figures")
    if CLAIMS in plan.studies:
        raise ValueError(f"a study may not be called {CLAIMS!r}: {TABLES}/{CLAIMS}.csv holds the claims table")
    grid = (plan.config.get("report") or {}).get("theory_grid", "paper")
    return ReportPlan(theory_artifacts(grid), {key: study_artifacts(plan, key) for key in plan.studies})
