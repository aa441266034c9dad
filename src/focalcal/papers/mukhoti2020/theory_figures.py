"""mukhoti2020's theory figures, exact curves from :mod:`focalcal.theory`: Fig 4a (g(p, γ) and
γ*(p0)), Fig 6 (the binary optimum) and App. B's Figs 7-8 (a logistic regression trained with
cross-entropy and focal loss). Every function returns a Figure and writes nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from focalcal import theory
from focalcal.papers.mukhoti2020 import linear_model
from focalcal.plots.figure_arguments import check_gammas, check_points, gamma_label
from focalcal.plots.style import CLASS_COLORS, color_for, corner_text, gamma_color, new_figure, paper_title, styled

# ------------------------------------------------------------------------------ M20 Fig 4a


@styled
def gradient_ratio_figure(gammas: Sequence[float] = (1, 2, 3, 4, 5, 7, 10), *, n_points: int = 1000,
                          schedule_points: Sequence[tuple[float, float]] = ((0.2, 5.0), (0.25, 3.0))):
    """M20 Fig 4a: g(p, γ) (Prop 1; ∂L_focal/∂w = g · ∂L_CE/∂w) against p; right: γ*(p0)
    (Prop 2, Lambert W) — the γ at which g(p0, γ) = 1, with FLSD-53's (p0, γ) pairs marked.
    """
    gammas = check_gammas(gammas, owner="gradient_ratio_figure")
    p = np.linspace(0.0, 1.0, check_points(n_points))
    figure, axes = new_figure(1, 2, height=3.8)
    left, right = axes[0]
    for gamma in gammas:
        left.plot(p, theory.gradient_ratio(p, gamma), color=gamma_color(gamma), label=gamma_label(gamma))
    left.axhline(1.0, color="0.3", ls="--", lw=1, label="g = 1 (cross-entropy)")
    left.set(xlabel="probability of the true class p", ylabel="g(p, γ)", xlim=(0, 1), title="(a) gradient ratio")
    left.legend(ncols=2, fontsize=8)
    p0 = np.linspace(0.1, 0.5, 300)
    right.plot(p0, theory.gamma_star(p0), color=color_for("flsd53"), label="γ*(p0)")
    for p_point, gamma_point in schedule_points:
        right.plot(p_point, gamma_point, "o", color="0.2")
        right.annotate(f"(p0 = {p_point:g}, γ = {gamma_point:g})", (p_point, gamma_point),
                       xytext=(10, 4), textcoords="offset points", fontsize=8)
    right.set(xlabel="threshold p0", ylabel="γ*(p0), where g(p0, γ*) = 1", ylim=(0, None),
              title="(b) γ* from Lambert W (Prop. 2); dots: FLSD-53")
    paper_title(figure, "Focal-to-cross-entropy gradient ratio", "mukhoti2020 Fig. 4(a) and Prop. 2")
    return figure


def binary_optimum(q, gamma: float) -> np.ndarray:
    """M20 Eq 5: p̂ = argmin_x −q (1 − x)^γ log x − (1 − q) x^γ log(1 − x), the prediction of
    class 1 that minimises the expected focal loss of a binary problem with P(y = 1) = q.
    It is the K = 2 focal risk minimiser (p̂ = q for cross-entropy, γ = 0)."""
    q = np.asarray(q, dtype=np.float64)
    return theory.focal_risk_minimizer(np.stack([q, 1.0 - q], axis=-1), gamma)[..., 0]


def binary_optimum_figure(gammas: Sequence[float] = (0, 1, 2, 3, 5), *, n_points: int = 401):
    """M20 Fig 6: the optimal p̂ against q for cross-entropy (γ = 0: p̂ = q) and focal loss.

    Focal loss's optimum lies between q and 1/2: a more entropic prediction for every γ > 0
    (mukhoti2020 §4, "focal loss favours a more entropic solution p̂ that is closer to 0.5").
    """
    gammas = check_gammas(gammas, owner="binary_optimum_figure")
    q = np.linspace(0.0, 1.0, check_points(n_points))
    figure, axes = new_figure(1, 1, height=4.2)
    ax = axes[0, 0]
    for gamma in gammas:
        label = "cross-entropy (γ = 0): p̂ = q" if gamma == 0 else gamma_label(gamma)
        ax.plot(q, binary_optimum(q, gamma), color=gamma_color(gamma), label=label)
    ax.set(xlabel="q = P(y = 1)", ylabel="optimal p̂ (Eq. 5)", xlim=(0, 1), ylim=(0, 1), aspect="equal")
    ax.legend(fontsize=8)
    paper_title(figure, "Optimal prediction of a binary problem", "mukhoti2020 Fig. 6")
    return figure


# --------------------------------------------------------------------------- M20 Figs 7, 8


def _linear_experiment(experiment, focal_gamma: float, seed: int, iterations: int, lr: float):
    """The App. B experiment for CE (γ = 0) and FL (``focal_gamma``), or ``experiment`` if given."""
    focal_gamma = float(check_gammas([focal_gamma], "focal_gamma", owner="_linear_experiment")[0])
    if focal_gamma == 0:
        raise ValueError("focal_gamma must be > 0 (γ = 0 is the cross-entropy curve already drawn)")
    if experiment is None:
        experiment = linear_model.linear_model_experiment((0.0, focal_gamma), seed, lr=lr, iterations=iterations)
    missing = {0.0, focal_gamma} - set(experiment.fits)
    if missing:
        raise ValueError(f"experiment has no fit for γ = {sorted(missing)}")
    return experiment, focal_gamma


def _linear_runs(focal_gamma: float):
    return ((0.0, "cross-entropy", color_for("cross_entropy")),
            (focal_gamma, f"focal, {gamma_label(focal_gamma)}", gamma_color(focal_gamma)))


@styled
def linear_model_norms_figure(*, focal_gamma: float = 1.0, seed: int = 0, iterations: int = 1000, lr: float = 0.1,
                              experiment=None):
    """M20 Fig 7: (a) norm of the logits, (b) norm of the weights over gradient-descent iterations
    of the 2-parameter logistic model of App. B (:func:`.linear_model.linear_model_experiment`),
    cross-entropy against focal loss. "Norm of logits" is the RMS training logit ‖Xw‖/√N.
    Pass ``experiment`` to reuse fits; fewer ``iterations`` make it cheaper.
    """
    experiment, focal_gamma = _linear_experiment(experiment, focal_gamma, seed, iterations, lr)
    figure, axes = new_figure(1, 2, height=3.8)
    left, right = axes[0]
    for gamma, label, colour in _linear_runs(focal_gamma):
        fit = experiment.fits[gamma]
        keep = fit.steps >= 1
        left.plot(fit.steps[keep], fit.logit_rms[keep], color=colour, label=label)
        right.plot(fit.steps[keep], fit.weight_norm[keep], color=colour, label=label)
    for ax, what, values in ((left, "logits", "logit_rms"), (right, "weights", "weight_norm")):
        final = {label: getattr(experiment.fits[gamma], values)[-1] for gamma, label, _ in _linear_runs(focal_gamma)}
        corner_text(ax, "final:\n" + "\n".join(f"{label}: {value:.3f}" for label, value in final.items()),
                    loc="lower right")
        ax.set(xscale="log", xlabel="gradient-descent iteration", ylim=(0, None))
        ax.legend(loc="upper left")
    left.set(ylabel="RMS logit ‖Xw‖/√N (train)", title="(a) norm of logits")
    right.set(ylabel="‖w‖", title="(b) norm of weights")
    paper_title(figure, "Logistic model on noisy Gaussian clusters: CE grows larger logits and weights than FL",
                "mukhoti2020 Fig. 7")
    return figure


def _decision_panel(ax, data, w: np.ndarray, title: str) -> None:
    for label in (0, 1):
        points = data.x_test[data.y_test == label]
        ax.scatter(points[:, 0], points[:, 1], s=5, alpha=0.45, color=CLASS_COLORS[label], lw=0,
                   label=f"test points, label {label}")
    norm = float(np.linalg.norm(w))
    direction = np.array([-w[1], w[0]]) / norm
    reach = 12.0
    for offset, style, label in ((0.0, "-", "boundary w·x = 0"),
                                 (np.log(9.0), "--", "confidence 0.9"), (-np.log(9.0), "--", None)):
        centre = offset * w / norm**2
        ends = np.stack([centre - reach * direction, centre + reach * direction])
        ax.plot(ends[:, 0], ends[:, 1], color="0.15", ls=style, lw=1.6 if offset == 0 else 1.0, label=label)
    ax.set(xlim=(-6.5, 6.5), ylim=(-6.5, 6.5), aspect="equal", xlabel="x1", ylabel="x2", title=title)


@styled
def linear_model_mistakes_figure(*, focal_gamma: float = 1.0, seed: int = 0, iterations: int = 1000, lr: float = 0.1,
                                 experiment=None):
    """M20 Fig 8: (a) histogram of the confidence max(p, 1 − p) of misclassified test points,
    CE against FL; (b) CE's and (c) FL's decision boundary w·x = 0 over the test points, with
    the lines where the confidence is 0.9 (w·x = ±log 9). Options as :func:`linear_model_norms_figure`.
    """
    experiment, focal_gamma = _linear_experiment(experiment, focal_gamma, seed, iterations, lr)
    figure, axes = new_figure(1, 3, height=4.0)
    hist_ax = axes[0, 0]
    bins = np.linspace(0.5, 1.0, 11)
    for gamma, label, colour in _linear_runs(focal_gamma):
        wrong = experiment.misclassified_confidence(gamma)
        summary = f"{label}\n{wrong.size} points, mean {wrong.mean():.2f}, {np.mean(wrong > 0.9):.0%} > 0.9"
        hist_ax.hist(wrong, bins=bins, color=colour, alpha=0.45, label=summary)
        hist_ax.hist(wrong, bins=bins, color=colour, histtype="step", lw=1.4)
    hist_ax.set(xlabel="confidence max(p, 1 − p)", ylabel="misclassified test points", xlim=(0.5, 1.0),
                title="(a) confidence of mistakes")
    hist_ax.set_ylim(0, hist_ax.get_ylim()[1] * 1.6)
    hist_ax.legend(loc="upper left", fontsize=8)
    for ax, (gamma, label, _), letter in zip(axes[0, 1:], _linear_runs(focal_gamma), "bc"):
        w = experiment.fits[gamma].w
        _decision_panel(ax, experiment.data, w, f"({letter}) {label}: ‖w‖ = {np.linalg.norm(w):.2f}")
    handles, labels = axes[0, 1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9, markerscale=3)
    paper_title(figure, "Logistic model: same decision boundary, but CE is more confident on its mistakes",
                "mukhoti2020 Fig. 8")
    return figure
