"""mukhoti2020 Fig 9: the confidence of each model on a few test inputs that every model
classifies correctly and a few that every model misclassifies, before and after temperature
scaling.

The paper shows CIFAR-10 images; our inputs are 1-D signals (MNIST-1D), so each input is
drawn as a line, with beneath it one pair of bars per model: the confidence of its
prediction before temperature scaling (light) and after (solid), the predicted class written
at the bar end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.patches import Patch

from focalcal.plots.style import REPORT_WIDTH, color_for, paper_title, status_label, styled

PANEL_KEYS = ("predicted", "confidence_pre", "confidence_post")
LIGHT_SHARE = 0.35  # the bar of the confidence before TS: the model's colour, 35 % of it over white
ROW_TITLES = ("correctly classified by every model", "misclassified by every model")
EMPTY_ROW_TEXT = ("no test input is classified correctly by every model",
                  "no test input is misclassified by every model")
_BAR_HEIGHT = 0.38  # per bar; a model's pair spans 0.76 of its unit slot
_X_MIN_RIGHT = 1.3  # the bar axes run from 0 to at least this, leaving room right of 1 for "→ class"
_X_MAX_RIGHT = 2.0
_TEXT_SIZE = 8


# ---------------------------------------------------------------------------- choosing inputs


def _labels(labels, name: str = "labels") -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one class per sample), got shape {labels.shape}")
    if labels.size and not np.issubdtype(labels.dtype, np.integer):
        if not np.issubdtype(labels.dtype, np.number) or not np.all(np.isfinite(labels)) \
                or not np.all(labels == np.round(labels)):
            raise ValueError(f"{name} must hold integer class indices")
        labels = labels.astype(np.int64)
    return labels


def _predictions(labels: np.ndarray, predictions) -> dict[str, np.ndarray]:
    if not isinstance(predictions, Mapping) or not predictions:
        raise ValueError("predictions must be a non-empty mapping model label -> (n,) predicted classes")
    checked = {}
    for model, predicted in predictions.items():
        predicted = _labels(predicted, f"predictions[{model!r}]")
        if predicted.shape != labels.shape:
            raise ValueError(f"predictions[{model!r}] has shape {predicted.shape}, expected {labels.shape} "
                             "(one predicted class per label)")
        checked[model] = predicted
    return checked


def choose_samples(labels, predictions: Mapping[str, np.ndarray], n_per_row: int = 4,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of test inputs for :func:`sample_confidences_figure`: up to ``n_per_row`` that
    every model classifies correctly and up to ``n_per_row`` that every model misclassifies.

    ``labels`` (N,) true classes; ``predictions`` maps a model label to its (N,) predicted
    classes. The choice is random but fixed by ``seed``, and prefers inputs of distinct true
    classes (as the paper's figure shows one input per class) before repeating a class. Either
    list is shorter — possibly empty — when fewer inputs qualify. Each list is sorted.
    """
    labels = _labels(labels)
    predictions = _predictions(labels, predictions)
    if isinstance(n_per_row, bool) or not isinstance(n_per_row, (int, np.integer)) or n_per_row < 0:
        raise ValueError(f"n_per_row must be a non-negative integer, got {n_per_row!r}")
    hits = np.stack([predicted == labels for predicted in predictions.values()])
    rng = np.random.default_rng(seed)
    chosen = []
    for candidates in (np.flatnonzero(hits.all(axis=0)), np.flatnonzero((~hits).all(axis=0))):
        shuffled = rng.permutation(candidates)
        _, first = np.unique(labels[shuffled], return_index=True)  # first input of each class in random order
        distinct = shuffled[np.sort(first)]
        rest = shuffled[~np.isin(shuffled, distinct)]
        chosen.append(np.sort(np.concatenate([distinct, rest])[:n_per_row]).astype(np.int64))
    return chosen[0], chosen[1]


# ------------------------------------------------------------------------------------ figure


def _signals(signals) -> np.ndarray:
    signals = np.asarray(signals, dtype=np.float64)
    if signals.ndim == 3:
        signals = signals[:, 0, :]  # (n, C, L): the first channel
    if signals.ndim != 2 or signals.shape[1] == 0:
        raise ValueError(f"signals must be (n, L) or (n, C, L) with L > 0, got shape {np.shape(signals)}")
    if not np.all(np.isfinite(signals)):
        raise ValueError("signals must be finite")
    return signals


def _panels(panels, n: int) -> dict[str, dict[str, np.ndarray]]:
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError("panels must be a non-empty mapping model label -> {predicted, confidence_pre, "
                         "confidence_post}")
    checked = {}
    for model, panel in panels.items():
        if not isinstance(panel, Mapping):
            raise TypeError(f"panels[{model!r}] must be a mapping with keys {list(PANEL_KEYS)}")
        missing = [key for key in PANEL_KEYS if key not in panel]
        if missing:
            raise ValueError(f"panels[{model!r}] lacks {missing} (needs {list(PANEL_KEYS)})")
        entry = {"predicted": _labels(panel["predicted"], f"panels[{model!r}]['predicted']")}
        for key in ("confidence_pre", "confidence_post"):
            values = np.asarray(panel[key], dtype=np.float64)
            if values.ndim != 1:
                raise ValueError(f"panels[{model!r}][{key!r}] must be 1-D, got shape {values.shape}")
            if not np.all(np.isfinite(values)) or np.any(values < 0) or np.any(values > 1):
                raise ValueError(f"panels[{model!r}][{key!r}] must hold confidences in [0, 1]")
            entry[key] = values
        for key, values in entry.items():
            if len(values) != n:
                raise ValueError(f"panels[{model!r}][{key!r}] has {len(values)} values, expected {n} "
                                 "(one per signal)")
        checked[model] = entry
    return checked


def _class_name(label: int, class_names) -> str:
    if class_names is None:
        return str(int(label))
    if isinstance(class_names, Mapping):
        return str(class_names.get(int(label), label))
    if not 0 <= int(label) < len(class_names):
        raise ValueError(f"class {int(label)} has no name in class_names ({len(class_names)} names)")
    return str(class_names[int(label)])


def _model_colors(models: Sequence[str], colors) -> dict[str, str]:
    if colors is None:
        return {model: color_for(model) for model in models}
    missing = [model for model in models if model not in colors]
    if missing:
        raise ValueError(f"colors has no colour for model(s) {missing}")
    return {model: colors[model] for model in models}


def _model_labels(models: Sequence[str], statuses) -> dict[str, str]:
    statuses = dict(statuses or {})
    unknown = [key for key in statuses if key not in models]
    if unknown:
        raise ValueError(f"statuses names model(s) {unknown} that are not in panels {list(models)}")
    labels = {}
    for model in models:
        status = statuses.get(model)
        runs = [] if status is None else [status] if isinstance(status, str) else list(status)
        labels[model] = status_label(model, runs)
    return labels


def _light(color) -> tuple[float, float, float, float]:
    """``color`` washed out towards white (opaque, so grid lines do not show through the bar)."""
    red, green, blue, _ = to_rgba(color)
    return tuple(LIGHT_SHARE * c + (1 - LIGHT_SHARE) for c in (red, green, blue)) + (1.0,)


def _draw_signal(ax, signal: np.ndarray, title: str) -> None:
    ax.plot(np.arange(len(signal)), signal, color="0.2", lw=1.3)
    ax.set_xlim(0, len(signal) - 1)
    ax.set_xticks([]), ax.set_yticks([])
    ax.set_title(title, fontsize=10, pad=3)


def _x_right(figure: Figure, panels, class_names, ncols: int) -> float:
    """Right end of the bar axes: far enough right of confidence 1 for the widest "→ class"."""
    renderer = figure.canvas.get_renderer()
    widest = 0.0
    for name in {_class_name(c, class_names) for entry in panels.values() for c in entry["predicted"]}:
        probe = figure.text(0, 0, f"→ {name}", fontsize=_TEXT_SIZE)
        widest = max(widest, probe.get_window_extent(renderer).width / figure.dpi)
        probe.remove()
    axes_width = REPORT_WIDTH / ncols - 0.3  # inches, less the padding between columns
    share = min(widest / axes_width + 0.02, 0.45)  # of the axes' width the text takes
    return float(np.clip(1.04 / (1.0 - share), _X_MIN_RIGHT, _X_MAX_RIGHT))


def _draw_bars(ax, index: int, panels, colors, class_names, show_axis_label: bool, x_right: float) -> None:
    models = list(panels)
    slots = np.arange(len(models), dtype=np.float64)
    pre = [panels[model]["confidence_pre"][index] for model in models]
    post = [panels[model]["confidence_post"][index] for model in models]
    ax.barh(slots - _BAR_HEIGHT / 2, pre, height=_BAR_HEIGHT, label="before TS",
            color=[_light(colors[model]) for model in models],
            edgecolor=[colors[model] for model in models], linewidth=0.6)
    ax.barh(slots + _BAR_HEIGHT / 2, post, height=_BAR_HEIGHT, label="after TS",
            color=[colors[model] for model in models], linewidth=0)
    for slot, model, a, b in zip(slots, models, pre, post):
        name = _class_name(panels[model]["predicted"][index], class_names)
        ax.text(max(a, b) + 0.03, slot, f"→ {name}", ha="left", va="center", fontsize=_TEXT_SIZE, color="0.15",
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    ax.set_xlim(0, x_right)
    ax.set_ylim(len(models) - 0.5, -0.5)  # first model on top
    ax.axvline(1.0, color="0.6", lw=0.7, ls=":")
    ax.set_xticks([0, 0.5, 1], ["0", ".5", "1"], fontsize=8)
    ax.set_yticks([])
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="x", pad=1)
    if show_axis_label:
        ax.set_xlabel("confidence", fontsize=8, labelpad=1)


def _legend_columns(n_entries: int) -> int:
    return n_entries if n_entries <= 6 else -(-n_entries // 2) if n_entries <= 12 else 6


def _sorted_rows(labels: np.ndarray, panels) -> tuple[list[int], list[int]]:
    hits = np.stack([entry["predicted"] == labels for entry in panels.values()])
    mixed = np.flatnonzero(hits.any(axis=0) & ~hits.all(axis=0))
    if mixed.size:
        index = int(mixed[0])
        right = [model for model, hit in zip(panels, hits[:, index]) if hit]
        raise ValueError(f"sample {index} (true class {labels[index]}) is classified correctly by {right} but not "
                         "by the other models: each input must be right for every model or wrong for every "
                         "model (choose them with choose_samples)")
    return list(np.flatnonzero(hits.all(axis=0))), list(np.flatnonzero(~hits.any(axis=0)))


@styled
def sample_confidences_figure(signals, labels, panels: Mapping[str, Mapping[str, np.ndarray]], *,
                            colors: Mapping[str, str] | None = None, class_names=None,
                            statuses: Mapping[str, object] | None = None, title_what: str | None = None):
    """M20 Fig 9: per test input, its signal and each model's confidence before and after
    temperature scaling (TS); top row the inputs every model classifies correctly, bottom row
    those every model misclassifies.

    ``signals`` (n, L) — or (n, C, L), of which the first channel is drawn — are the chosen test
    inputs (e.g. by :func:`choose_samples`), ``labels`` (n,) their true classes. ``panels`` maps
    a model label (e.g. "Cross-entropy", "Brier", "MMCE", "FLSD-53") to arrays over the same n
    inputs: ``predicted`` classes, ``confidence_pre`` and ``confidence_post`` (the top-label
    probability before / after TS). Each input goes in the top row when every model predicts
    its label, in the bottom row when none does; an input right for some models and wrong for
    others is refused. A row with no input says so.

    ``colors`` maps model label -> colour (default :func:`~focalcal.plots.style.color_for`);
    ``class_names`` (sequence or mapping class -> name) names classes (default the index);
    ``statuses`` maps model label -> run-health status (or a list of them), marking a model
    whose run did not train in the legend, e.g. "MMCE [collapsed]". ``title_what`` replaces the
    first line of the title.
    """
    signals = _signals(signals)
    n = len(signals)
    labels = _labels(labels)
    if len(labels) != n:
        raise ValueError(f"labels has {len(labels)} values, expected {n} (one per signal)")
    if n == 0:
        raise ValueError("signals is empty: no test input to draw")
    panels = _panels(panels, n)
    models = list(panels)
    model_colors = _model_colors(models, colors)
    legend_labels = _model_labels(models, statuses)
    rows = _sorted_rows(labels, panels)
    for index in range(n):
        _class_name(labels[index], class_names)  # every true class has a name (ValueError otherwise)

    ncols = max(len(row) for row in rows)
    signal_height, bar_height = 0.95, 0.3 * len(models) + 0.35
    row_heights = [signal_height + bar_height + 0.45 if row else 0.75 for row in rows]
    legend_height = 0.3 * -(-(len(models) + 3) // _legend_columns(len(models) + 3)) + 0.1
    figure = Figure(figsize=(REPORT_WIDTH, sum(row_heights) + legend_height + 0.75), layout="constrained")
    FigureCanvasAgg(figure)
    x_right = _x_right(figure, panels, class_names, ncols)
    subfigures = figure.subfigures(2, 1, height_ratios=row_heights)
    for row, (subfigure, samples) in enumerate(zip(subfigures, rows)):
        subfigure.suptitle(ROW_TITLES[row], fontsize=10, fontweight="bold")
        if not samples:
            ax = subfigure.subplots()
            ax.set_axis_off()
            ax.text(0.5, 0.5, EMPTY_ROW_TEXT[row], transform=ax.transAxes, ha="center", va="center", fontsize=10,
                    color="0.35", style="italic")
            continue
        axes = subfigure.subplots(2, ncols, squeeze=False, height_ratios=[signal_height, bar_height])
        for column in range(ncols):
            if column >= len(samples):
                axes[0, column].set_visible(False), axes[1, column].set_visible(False)
                continue
            index = samples[column]
            _draw_signal(axes[0, column], signals[index], f"true: {_class_name(labels[index], class_names)}")
            _draw_bars(axes[1, column], index, panels, model_colors, class_names, show_axis_label=column == 0,
                       x_right=x_right)
    handles = [Patch(facecolor=model_colors[model], label=legend_labels[model]) for model in models]
    handles += [tuple(Patch(facecolor=_light(model_colors[model]), edgecolor=model_colors[model],
                            linewidth=0.6) for model in models),
                tuple(Patch(facecolor=model_colors[model]) for model in models),
                Patch(facecolor="none", edgecolor="none")]
    names = [legend_labels[model] for model in models]
    names += ["light: before TS", "solid: after TS", "→ c: predicted class"]
    figure.legend(handles, names, loc="outside lower center", ncols=_legend_columns(len(names)), fontsize=8,
                  frameon=False, handler_map={tuple: HandlerTuple(ndivide=None, pad=0)})
    what = title_what or ("Confidence on test inputs every model gets right (top) or wrong (bottom), "
                          "before and after TS")
    paper_title(figure, what, "mukhoti2020 Fig. 9")
    return figure


