"""Experiment figures from what the workflow wrote: run files, calibration.json, study tables.

A figure never recalibrates what it can read: calibrated probabilities come from the fitted
calibrators stored in ``calibration.json`` (``Calibrator.from_dict``), applied to the run's
``logits.npz``; metric values printed on a figure come from the study's tidy table. Each
builder takes the artifact's ``params`` (planned by :mod:`focalcal.report.targets`), the
working directory and the study key, and returns a matplotlib Figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from focalcal import plots
from focalcal._io import load_npz, read_csv, read_json
from focalcal.calibration import KOMISARENKO_GAMMAS, Calibrator
from focalcal.plots.style import color_for, status_label
from focalcal.report.tables import ece_frame, read_study_table
from focalcal.report.targets import TABLES

# --------------------------------------------------------------------------- run files


def read_logits(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ValueError(f"no logits file {str(path)!r}; run the workflow's export_logits rule first")
    return load_npz(path)


def read_calibration(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"no calibration file {str(path)!r}; run the workflow's calibrate rule first")
    return read_json(path)


def stored_calibrator(calibration: dict, key: str, where: str = "calibration.json"):
    """The fitted calibrator ``key`` and, for a chained one, the temperature it follows."""
    if key not in calibration:
        raise ValueError(f"{where} has no calibrator {key!r}; it has {sorted(calibration)}")
    entry = calibration[key]
    calibrator = Calibrator.from_dict(entry["fitted"])
    before = Calibrator.from_dict(entry["after"]).temperature_ if "after" in entry else None
    return calibrator, before


def apply_stored(calibration: dict, key: str, logits: np.ndarray, where: str = "calibration.json") -> np.ndarray:
    """Probabilities of a stored (already fitted) calibrator on ``logits`` — no refitting."""
    calibrator, before = stored_calibrator(calibration, key, where)
    return calibrator.transform(logits if before is None else logits / before)


def run_status(run_dir: Path) -> str | None:
    """The health status ("trained", "diverged", "collapsed", "not converged") a run's
    ``run.json`` records under "health", or None (no run.json, or one written before runs
    recorded their health). Figures mark a run that did not train with
    :func:`focalcal.plots.style.status_label`."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        return None
    health = read_json(path).get("health")
    return health.get("status") if isinstance(health, dict) else None


def study_table(root: Path, study: str) -> pd.DataFrame:
    path = root / TABLES / f"{study}.csv"
    if not path.is_file():
        raise ValueError(f"no study table {str(path)!r}; run the workflow's study_table rule first")
    return read_study_table(path)


def inputs_of_test_points(root: Path, run: dict, arrays: dict, data_root: str) -> np.ndarray:
    """x of a run's test points: ``test_inputs`` from logits.npz, else the data set reloaded.

    Reloading uses the run's own ``run_config.json`` and checks the split against the hash
    its ``run.json`` recorded, so the x belong to exactly the logits on disk.
    """
    if "test_inputs" in arrays:
        return np.asarray(arrays["test_inputs"], dtype=np.float64).reshape(len(arrays["test_labels"]), -1)
    from focalcal.data import verify_split
    from focalcal.training.config import RunConfig
    from focalcal.training.trainer import load_dataset

    config = RunConfig.from_dict(read_json(root / run["run_config"]))
    dataset = load_dataset(config, root / data_root)
    verify_split(dataset, read_json(root / run["info"])["split_hash"])
    labels = dataset.test.y.numpy()
    if not np.array_equal(labels, arrays["test_labels"]):
        raise ValueError(f"reloaded test labels of {run['path']} differ from its logits.npz; re-export the logits")
    return dataset.test.x.numpy().astype(np.float64).reshape(len(labels), -1)


def _rows_of(table: pd.DataFrame, columns: dict) -> pd.DataFrame:
    mask = np.ones(len(table), dtype=bool)
    for column, value in columns.items():
        mask &= (table[column].astype(str) == str(value)).to_numpy()
    return table[mask]


def panel_scores(table: pd.DataFrame, columns: dict, calibrator: str, bins: int) -> dict[str, float]:
    """ERR, KLD and ECE of one run and calibrator, read from the study table."""
    rows = _rows_of(table, columns)
    rows = rows[rows["calibrator"] == calibrator]
    values = {}
    for key, metric, binned in (("ERR", "error", False), ("KLD", "kl_posterior", False), ("ECE", "ece", True)):
        hit = rows[(rows["metric"] == metric) & ((rows["bins"] == bins) if binned else rows["bins"].isna())]
        if len(hit) != 1:
            raise ValueError(f"study table has {len(hit)} rows of {metric} for {columns} / {calibrator} (expected 1)")
        values[key] = float(hit["value"].iloc[0])
    return values


# ------------------------------------------------------------------ charoenphakdee2021


def synthetic_posterior(params: dict, root: Path, study: str):
    """C21 Fig 3: scores against x of each panel (run x stored calibrator), truth dashed."""
    table = study_table(root, study)
    runs = {run["path"]: run for run in params["runs"]}
    arrays = {path: read_logits(root / f"results/runs/{path}/logits.npz") for path in runs}
    stored = {path: read_calibration(root / f"results/calibration/{path}/calibration.json") for path in runs}
    first = next(iter(runs))
    for path, data in arrays.items():
        if "test_posterior" not in data:
            raise ValueError(f"results/runs/{path}/logits.npz has no test_posterior; Fig 3 needs a data set with a known posterior")
        if not np.array_equal(data["test_labels"], arrays[first]["test_labels"]):
            raise ValueError(f"runs {first} and {path} were tested on different points; Fig 3 needs one test set")
    x = inputs_of_test_points(root, runs[first], arrays[first], params["data_root"])
    if x.shape[1] != 1:
        raise ValueError(f"Fig 3 plots scores against a 1-D input; {first} has {x.shape[1]}-D inputs")
    order = np.argsort(x[:, 0], kind="stable")
    eta = arrays[first]["test_posterior"][order]
    predictions, scores = {}, {}
    for panel in params["panels"]:
        run = panel["run"]
        probs = apply_stored(stored[run], panel["calibrator"], arrays[run]["test_logits"], f"calibration.json of {run}")
        label = status_label(panel["label"], [run_status(root / f"results/runs/{run}")])
        predictions[label] = probs[order]
        scores[label] = panel_scores(table, runs[run]["columns"], panel["calibrator"], params["bins"])
    density = None
    if _is_registered_synthetic(runs[first], root):  # its p(x) is known: draw panel (a) of the paper
        from focalcal.data.synthetic import THREE_CLASS

        density = THREE_CLASS.density(x[order, 0])
    return plots.synthetic_posterior_figure(x[order, 0], eta, predictions, density=density, scores=scores,
                                            n_bins=params["bins"])


def _is_registered_synthetic(run: dict, root: Path) -> bool:
    """True when the run trained on the registered 1-D mixture (its density is then known)."""
    config = read_json(root / run["run_config"])
    return config["dataset"]["name"] == "synthetic1d"


def raw_vs_psi_reliability(params: dict, root: Path, study: str):
    """C21 Fig 4: raw vs Ψ^γ reliability per paradigm and γ; TS_FL logits divided by the stored T."""
    panels, health = {}, {}
    for panel in params["panels"]:
        run = panel["run"]
        health[(panel["paradigm"], float(panel["gamma"]))] = run_status(root / f"results/runs/{run}")
        data = read_logits(root / f"results/runs/{run}/logits.npz")
        logits = data["test_logits"].astype(np.float64)
        if panel["temperature_from"]:
            calibration = read_calibration(root / f"results/calibration/{run}/calibration.json")
            calibrator, _ = stored_calibrator(calibration, panel["temperature_from"], f"calibration.json of {run}")
            logits = logits / calibrator.temperature_
        panels[(panel["paradigm"], float(panel["gamma"]))] = (logits, data["test_labels"])
    return plots.raw_vs_psi_reliability_figure(panels, n_bins=params["bins"], health=health,
                                               dataset=f"{params['dataset']} ({params['model']})")


def ece_boxplots(params: dict, root: Path, study: str):
    """C21 Figs 5 (Standard) and 6 (TS_FL, LS): ECE over seeds against γ, raw vs Ψ^γ (a γ whose
    runs did not all train is marked from the table's ``status`` column, when it has one)."""
    paradigms = params["paradigms"]
    frame = ece_frame(study_table(root, study), params["groups"], paradigms, params["bins"])
    frame["gamma"] = frame["gamma"].map(lambda gamma: f"{gamma:g}")  # box positions labelled 0, 1, 2, 3
    panel_by = ("dataset", "model") if paradigms == ["Standard"] else ("paradigm", "dataset", "model")
    figure_name = "Fig. 5" if paradigms == ["Standard"] else "Fig. 6"
    return plots.ece_box_plots(frame, metric="ece", panel_by=panel_by, reproduces=f"charoenphakdee2021 {figure_name}")


# --------------------------------------------------------------------- komisarenko2024


def optimal_temperature(params: dict, root: Path, study: str):
    """K24 Fig 8: the stored best T per γ_ev of focal temperature scaling, one line per loss
    (its legend entry marked when some of the loss's runs did not train, from their run.json)."""
    rows, colors, statuses = [], {}, {}
    runs = sorted(params["runs"], key=lambda r: (r["dataset"], r["gamma_train"]))
    for run in runs:
        statuses.setdefault((run["dataset"], run["loss"]), []).append(run_status(root / f"results/runs/{run['path']}"))
    for run in runs:
        calibration = read_calibration(root / run["calibration"])
        calibrator, _ = stored_calibrator(calibration, run["calibrator"], run["calibration"])
        gammas = KOMISARENKO_GAMMAS if calibrator.gammas is None else calibrator.gammas
        temperatures = np.asarray(calibrator.best_temperature_per_gamma_, dtype=np.float64)
        if len(temperatures) != len(gammas):
            raise ValueError(f"{run['calibration']}: {len(temperatures)} temperatures for {len(gammas)} γ_ev values")
        label = status_label(run["loss"], statuses[(run["dataset"], run["loss"])])
        rows += [{"dataset": run["dataset"], "loss": label, "gamma_ev": float(g), "temperature": float(t)}
                 for g, t in zip(gammas, temperatures)]
        colors[label] = color_for(*run["color"])
    return plots.optimal_temperature_figure(pd.DataFrame(rows), panel_by="dataset", colors=colors)


# ------------------------------------------------------------------------ mukhoti2020


def training_reliability(params: dict, root: Path, study: str):
    """M20 Fig 1 from the run's train_reliability.csv (written when the recipe asks for it)."""
    path = root / params["run_dir"] / "train_reliability.csv"
    if not path.is_file():
        raise ValueError(f"no {str(path)!r}: the run's recipe must set reliability_epochs (retrain to record it)")
    table = read_csv(path)
    epochs = [e for e in params["epochs"] if e in set(table["epoch"])] or None
    return plots.training_reliability_figure(table, epochs=epochs, status=run_status(root / params["run_dir"]))


def training_curves(params: dict, root: Path, study: str):
    history = root / params["history"]
    return plots.training_curves_figure(read_csv(history), status=run_status(history.parent))


def training_comparison(params: dict, root: Path, study: str):
    """M20 Fig 3: one line per run; a run that did not train is marked in the legend (its run.json)."""
    labels = {label: status_label(label, [run_status((root / path).parent)]) for label, path in params["histories"].items()}
    histories = {labels[label]: read_csv(root / path) for label, path in params["histories"].items()}
    colors = {labels[label]: color_for(name, gamma) for label, (name, gamma) in params["colors"].items()}
    return plots.training_comparison_figure(histories, colors=colors)


def gradient_norms(params: dict, root: Path, study: str):
    """M20 Fig 4b-d from each run's train_gradient_norms.csv (written when the recipe asks)."""
    tables = {}
    for label, run_dir in params["run_dirs"].items():
        path = root / run_dir / "train_gradient_norms.csv"
        if not path.is_file():
            raise ValueError(f"no {str(path)!r}: the run's recipe must set gradient_norm_epochs (retrain to record it)")
        tables[status_label(label, [run_status(root / run_dir)])] = read_csv(path)
    colors = {status_label(label, [run_status(root / params["run_dirs"][label])]): color_for(name, gamma)
              for label, (name, gamma) in params["colors"].items()}
    return plots.gradient_norm_histograms_figure(tables, epochs=params["epochs"], colors=colors)


def feature_norms(params: dict, root: Path, study: str):
    """M20 Fig 10 from the runs' history.csv (column train_feature_norm)."""
    labels = {label: status_label(label, [run_status((root / path).parent)]) for label, path in params["histories"].items()}
    histories = {}
    for label, path in params["histories"].items():
        history = read_csv(root / path)
        if "train_feature_norm" not in history.columns:
            raise ValueError(f"{path} has no train_feature_norm column: the run was trained before feature norms "
                             "were logged; retrain it")
        histories[labels[label]] = history
    colors = {labels[label]: color_for(name, gamma) for label, (name, gamma) in params["colors"].items()}
    return plots.feature_norms_figure(histories, colors=colors)


def sample_confidences(params: dict, root: Path, study: str):
    """M20 Fig 9: the same test inputs for every model; confidences from each run's stored
    uncalibrated and temperature-scaled calibrators (no refitting)."""
    models = params["models"]
    arrays = {m["label"]: read_logits(root / m["logits"]) for m in models}
    labels = arrays[models[0]["label"]]["test_labels"]
    for m in models:
        if not np.array_equal(arrays[m["label"]]["test_labels"], labels):
            raise ValueError(f"{m['logits']} has other test labels than {models[0]['logits']}: Fig 9 compares one test set")
    panels, predictions = {}, {}
    for m in models:
        calibration = read_calibration(root / m["calibration"])
        logits = arrays[m["label"]]["test_logits"]
        pre = apply_stored(calibration, m["raw"], logits, m["calibration"])
        post = apply_stored(calibration, m["post"], logits, m["calibration"])
        label = status_label(m["label"], [run_status(root / m["run_dir"])])
        panels[label] = {"predicted": pre.argmax(1), "confidence_pre": pre.max(1), "confidence_post": post.max(1)}  # TS keeps the argmax
        predictions[label] = pre.argmax(1)
    correct, wrong = plots.choose_samples(labels, predictions, n_per_row=4)
    chosen = np.concatenate([correct, wrong])
    signals = inputs_of_test_points(root, params["run"], arrays[models[0]["label"]], params["data_root"])[chosen]
    panels = {label: {key: values[chosen] for key, values in panel.items()} for label, panel in panels.items()}
    colors = {status_label(m["label"], [run_status(root / m["run_dir"])]): color_for(*m["color"]) for m in models}
    return plots.sample_confidences_figure(signals, labels[chosen], panels, colors=colors)


# ------------------------------------------------------------------------ hossain2021


def segmentation_scores(params: dict, root: Path, study: str):
    """H21 Tables 2-3 as box plots: each fold's mean IoU and mean Hausdorff distance per loss (a
    loss whose runs did not all train is marked from the table's ``status`` column, if any)."""
    table = study_table(root, study)
    rows = table[(table["class"] == "mean") & table["metric"].isin(["iou", "hausdorff"])]
    labels = {key: info["label"] for key, info in params["losses"].items()}
    rows = rows.assign(loss=rows["loss"].map(labels).fillna(rows["loss"]))
    colors = {info["label"]: color_for(*info["color"]) for info in params["losses"].values()}
    return plots.segmentation_scores_figure(rows, loss_order=list(colors), colors=colors)


def segmentation_overlays(params: dict, root: Path, study: str):
    """H21 Figs 3-6: stored test images and masks (samples.npz of each run's evaluation)."""
    samples, class_names = {}, None
    for run in params["runs"]:
        path = root / run["samples"]
        if not path.is_file():
            raise ValueError(f"no {str(path)!r}; run the workflow's evaluate_segmentation rule first")
        data = load_npz(path)
        samples[params["losses"][run["loss"]]["label"]] = data
        class_names = [str(name) for name in data["class_names"]]
    return plots.segmentation_overlays_figure(samples, class_names=class_names)


BUILDERS = {
    "h21_scores": segmentation_scores,
    "h21_overlays": segmentation_overlays,
    "c21_synthetic_posterior": synthetic_posterior,
    "c21_reliability": raw_vs_psi_reliability,
    "c21_ece_boxplots": ece_boxplots,
    "k24_optimal_temperature": optimal_temperature,
    "m20_training_reliability": training_reliability,
    "m20_training_curves": training_curves,
    "m20_training_comparison": training_comparison,
    "m20_gradient_norms": gradient_norms,
    "m20_feature_norms": feature_norms,
    "m20_test_confidences": sample_confidences,
}
