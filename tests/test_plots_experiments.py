"""Figures drawn from runs (reliability diagrams, box plots, training diagnostics, synthetic
posteriors, optimal temperatures) on synthetic inputs made here. Drawn values are compared
with focalcal.metrics / focalcal.theory and with the input tables, and the tables use the
trainer's own diagnostics so their columns are the real ones."""

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.colors import to_hex
from scipy import special

from focalcal import metrics, theory
from focalcal.papers.charoenphakdee2021 import figures as c21_figures
from focalcal.papers.hossain2021 import figures as h21_figures
from focalcal.papers.komisarenko2024 import figures as k24_figures
from focalcal.papers.mukhoti2020 import figures as m20_figures
from focalcal.plots import reliability, style
from focalcal.training import diagnostics


def _logits(n=600, k=4, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) * scale
    logits[np.arange(n), labels] += rng.normal(1.5, 1.0, n)  # better than chance, not perfect
    return logits.astype(np.float32), labels


def _bar_heights(container):
    return np.array([bar.get_height() for bar in container])


# ------------------------------------------------------------------------------ reliability


def test_reliability_diagram_bars_are_the_metrics_bins():
    logits, labels = _logits()
    probs = special.softmax(logits.astype(np.float64), axis=1)
    figure = reliability.reliability_diagram(probs, labels, n_bins=12, binning="mass")
    top, bottom = figure.axes[:2]
    bins = metrics.reliability_bins(probs, labels, n_bins=12, binning="mass")
    np.testing.assert_allclose(_bar_heights(top.containers[0]), bins["accuracy"].fillna(0.0).to_numpy())
    np.testing.assert_allclose([bar.get_x() for bar in top.containers[0]], bins["lower"])
    np.testing.assert_allclose(_bar_heights(bottom.containers[0]).sum(), 100.0)
    ece = metrics.ece(probs, labels, n_bins=12, binning="mass")
    assert f"ECE = {100 * ece:.2f} %" in top.texts[0].get_text()


def test_smooth_curve_spans_only_the_observed_confidences_and_the_legend_sits_above_the_bars():
    logits, labels = _logits()
    probs = special.softmax(3 * logits.astype(np.float64), axis=1)  # confident: no confidence near 1/K
    curve = metrics.smooth_reliability_curve(probs, labels)
    figure = reliability.reliability_diagram(probs, labels, n_bins=15, smooth=curve)
    top = figure.axes[0]
    x, y = top.lines[-1].get_data()
    confidence = probs.max(axis=1)
    assert x.min() >= confidence.min() and x.max() <= confidence.max()
    assert curve.mesh.min() < confidence.min()  # relplot's mesh starts at 0: the cut is real
    np.testing.assert_array_equal(y, curve.accuracy[(curve.mesh >= confidence.min()) & (curve.mesh <= confidence.max())])
    figure.canvas.draw()
    legend_box = figure.legends[0].get_window_extent()
    assert legend_box.y0 >= top.get_window_extent().y1  # above the panel, clear of every bar
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["smoothed accuracy", "accuracy (bins)"]


def test_raw_vs_psi_grid_draws_red_raw_and_green_psi_bars_from_the_same_bins():
    panels = {}
    for paradigm in ("Standard", "LS"):
        for gamma in (1.0, 3.0):
            panels[(paradigm, gamma)] = _logits(seed=int(gamma) + len(paradigm))
    del panels[("LS", 3.0)]  # a missing combination leaves its panel hidden
    figure = c21_figures.raw_vs_psi_reliability_figure(panels, n_bins=10, dataset="synthetic")
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 3 and len(figure.axes) == 4
    for ax in visible:
        paradigm, gamma = ax.get_title().split(", γ = ")
        logits, labels = panels[(paradigm, float(gamma))]
        raw = special.softmax(logits.astype(np.float64), axis=1)
        psi = theory.psi_from_logits(logits.astype(np.float64), float(gamma))
        raw_bars, psi_bars = ax.containers
        for bars, probs, colour in ((raw_bars, raw, style.RAW_COLOR), (psi_bars, psi, style.PSI_COLOR)):
            expected = metrics.reliability_bins(probs, labels, n_bins=10)["accuracy"].fillna(0.0)
            np.testing.assert_allclose(_bar_heights(bars), expected.to_numpy())
            assert to_hex(bars[0].get_facecolor()) == colour
        text = ax.texts[0].get_text()
        assert f"ECE-raw = {100 * metrics.ece(raw, labels, n_bins=10):.2f}" in text
        assert f"ECE-Ψ = {100 * metrics.ece(psi, labels, n_bins=10):.2f}" in text
        assert f"ERR = {100 * metrics.error(raw, labels):.2f}" in text
    assert "charoenphakdee2021 Fig. 4" in figure.get_suptitle()
    assert style.clipped_texts(figure) == []
    marked = c21_figures.raw_vs_psi_reliability_figure(panels, n_bins=10, health={("LS", 1.0): "collapsed"})
    assert [ax.get_title() for ax in marked.axes if ax.get_visible()] == [
        "Standard, γ = 1", "Standard, γ = 3", "LS, γ = 1 [collapsed]"]


def test_raw_vs_psi_grid_handles_extreme_float32_logits():
    logits, labels = _logits(n=300)
    extreme = (logits * 1e3).astype(np.float32)  # softmax saturates to one-hot in float32
    figure = c21_figures.raw_vs_psi_reliability_figure({("Standard", 3.0): (extreme, labels)})
    raw_bars, psi_bars = figure.axes[0].containers
    raw = special.softmax(extreme.astype(np.float64), axis=1)
    psi = theory.psi_from_logits(extreme.astype(np.float64), 3.0)
    assert np.all(np.isfinite(psi)) and np.all(np.isfinite(_bar_heights(psi_bars)))
    for bars, probs in ((raw_bars, raw), (psi_bars, psi)):
        expected = metrics.reliability_bins(probs, labels, n_bins=10)["accuracy"].fillna(0.0).to_numpy()
        np.testing.assert_allclose(_bar_heights(bars), expected)
    # Nearly every prediction is at confidence ~1, so the top bin holds them and has the accuracy.
    assert _bar_heights(raw_bars)[-1] == pytest.approx(1.0 - metrics.error(raw, labels), abs=0.02)


def test_raw_vs_psi_grid_rejects_bad_panels():
    with pytest.raises(ValueError, match="panels"):
        c21_figures.raw_vs_psi_reliability_figure({})
    logits, labels = _logits()
    with pytest.raises(ValueError, match="NaN"):
        bad = logits.copy()
        bad[0, 0] = np.nan
        c21_figures.raw_vs_psi_reliability_figure({("Standard", 1.0): (bad, labels)})


def _training_reliability_table():
    frames = []
    for epoch, scale in ((1, 0.5), (5, 2.0), (30, 6.0)):
        logits, labels = _logits(n=800, seed=epoch, scale=scale)
        frames.append(diagnostics.training_reliability(torch.from_numpy(logits), torch.from_numpy(labels), epoch, 25))
    return pd.concat(frames)


def test_training_reliability_figure_columns_per_epoch(tmp_path):
    table = _training_reliability_table()
    path = tmp_path / "train_reliability.csv"
    table.to_csv(path, index=False)
    figure = m20_figures.training_reliability_figure(path, epochs=[1, 30])
    assert len(figure.axes) == 4
    for column, epoch in enumerate((1, 30)):
        rows = table[table["epoch"] == epoch]
        top, bottom = figure.axes[column], figure.axes[2 + column]
        np.testing.assert_allclose(_bar_heights(top.containers[0]), rows["accuracy"].fillna(0.0).to_numpy())
        np.testing.assert_allclose(_bar_heights(bottom.containers[0]), 100 * rows["share"].to_numpy())
        assert top.get_title() == f"epoch {epoch}"
    with pytest.raises(ValueError, match="epochs"):
        m20_figures.training_reliability_figure(table, epochs=[2])
    with pytest.raises(ValueError, match="lacks column"):
        m20_figures.training_reliability_figure(table.drop(columns="share"))


# ------------------------------------------------------------------------------ C21 Fig 3


def _synthetic_posterior(n=200):
    x = np.linspace(-3, 3, n)
    eta = special.softmax(np.column_stack([1.5 * x, np.zeros(n), -1.5 * x + 0.5 * x**2 - 1]), axis=1)
    return x, eta


def test_posterior_scores_ece_matches_sampled_labels():
    x, eta = _synthetic_posterior()
    q = theory.focal_risk_minimizer(eta, 3.0)  # an η-underconfident prediction
    scores = c21_figures.posterior_scores(eta, q)
    rng = np.random.default_rng(1)
    repeats = 400
    sampled = (rng.random((repeats, len(x), 1)) > np.cumsum(eta, axis=1)[None]).sum(axis=2).ravel()
    q_repeated = np.tile(q, (repeats, 1))
    assert scores["ECE"] == pytest.approx(metrics.ece(q_repeated, sampled, n_bins=10), abs=0.01)
    assert scores["ERR"] == pytest.approx(metrics.error(q_repeated, sampled), abs=0.01)
    assert scores["KLD"] == pytest.approx(metrics.kl_divergence(eta, q))
    perfect = c21_figures.posterior_scores(eta, eta)
    assert perfect["KLD"] == 0.0 and perfect["ECE"] < 1e-12


def test_synthetic_posterior_figure_prints_scores_and_psi_recovers_the_posterior():
    x, eta = _synthetic_posterior()
    focal = theory.focal_risk_minimizer(eta, 5.0)
    predictions = {"CE": eta, "FL γ=5": focal, "FL γ=5 + Ψ": theory.psi(focal, 5.0)}
    density = np.exp(-x**2 / 2)
    figure = c21_figures.synthetic_posterior_figure(x, eta, predictions, density=density)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 5  # p(x), p(y|x) and three methods
    texts = {ax.get_title().split(") ", 1)[1]: ax.texts[0].get_text() for ax in visible[2:]}
    kld = {name: float(text.split("KLD = ")[1].split("\n")[0]) for name, text in texts.items()}
    assert kld["CE"] == 0.0 and kld["FL γ=5 + Ψ"] < 1e-4
    assert kld["FL γ=5"] == pytest.approx(metrics.kl_divergence(eta, focal), abs=1e-4)
    errs = {text.split("\n")[0] for text in texts.values()}
    assert len(errs) == 1  # Ψ and the focal minimiser keep the decision rule: same ERR
    solid = [line for line in visible[3].get_lines() if line.get_linestyle() == "-"]
    np.testing.assert_allclose(np.column_stack([line.get_ydata() for line in solid]), focal)
    assert style.clipped_texts(figure) == []


def test_synthetic_posterior_figure_uses_given_scores_and_checks_shapes():
    x, eta = _synthetic_posterior(50)
    figure = c21_figures.synthetic_posterior_figure(x, eta, {"CE": eta}, scores={"CE": {"ERR": 0.25, "KLD": 0.5, "ECE": 0.125}})
    assert "ERR = 25.00 %" in figure.axes[1].texts[0].get_text()
    with pytest.raises(ValueError, match="shape"):
        c21_figures.synthetic_posterior_figure(x, eta, {"CE": eta[:10]})
    with pytest.raises(ValueError, match="no entry"):
        c21_figures.synthetic_posterior_figure(x, eta, {"CE": eta}, scores={})


# --------------------------------------------------------------------------- C21 Figs 5-6


def _tidy_ece_table():
    rng = np.random.default_rng(2)
    rows = []
    for dataset in ("mnist1d", "digits"):
        for gamma in (0, 1, 2, 3):
            for seed in range(5):
                for method in ("raw", "psi", "ts_nll"):
                    rows.append({"study": "c21", "dataset": dataset, "model": "cnn_small", "loss": "focal",
                                 "gamma": gamma, "seed": seed, "calibrator": method, "metric": "ece",
                                 "value": rng.uniform(0.01, 0.1) + 0.01 * gamma * (method == "raw")})
                rows.append({"study": "c21", "dataset": dataset, "model": "cnn_small", "loss": "focal", "gamma": gamma,
                             "seed": 0, "calibrator": "raw", "metric": "error", "value": 0.3})
    return pd.DataFrame(rows)


def test_ece_box_plots_one_box_per_gamma_and_method_with_the_right_medians():
    table = _tidy_ece_table()
    figure = c21_figures.ece_box_plots(table)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 2
    for ax, dataset in zip(visible, ("mnist1d", "digits")):
        assert dataset in ax.get_title()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
        assert len(ax.containers) == 2 and all(len(c.boxes) == 4 for c in ax.containers)  # one box per (γ, raw/Ψ)
        for container, method in zip(ax.containers, ("raw", "psi")):
            rows = table[(table["dataset"] == dataset) & (table["calibrator"] == method) & (table["metric"] == "ece")]
            medians = 100 * rows.groupby("gamma")["value"].median().to_numpy()
            np.testing.assert_allclose([line.get_ydata()[0] for line in container.medians], medians)
            assert to_hex(container.boxes[0].get_facecolor()) == style.color_for(method)
    assert [t.get_text() for t in visible[0].get_legend().get_texts()] == ["ECE-raw", "ECE-Ψ"]


def test_ece_box_plots_reject_missing_columns_and_empty_selection():
    table = _tidy_ece_table()
    with pytest.raises(ValueError, match="lacks column"):
        c21_figures.ece_box_plots(table.drop(columns="model"))
    with pytest.raises(ValueError, match="no rows"):
        c21_figures.ece_box_plots(table, metric="adaece")


# ------------------------------------------------------------------------------ K24 Fig 8


def test_optimal_temperature_figure_one_averaged_line_per_training_loss():
    rows = [{"dataset": dataset, "loss": loss, "gamma_ev": g, "seed": seed,
             "temperature": 1.0 + 0.1 * g + 0.2 * offset + 0.01 * seed}
            for dataset in ("mnist1d", "cifar10") for offset, loss in enumerate(("cross_entropy", "focal γ=3"))
            for g in (-1.0, 0.0, 1.0, 2.0) for seed in range(3)]
    table = pd.DataFrame(rows)
    figure = k24_figures.optimal_temperature_figure(table)
    assert len(figure.axes) == 2
    ax = figure.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"cross_entropy", "focal γ=3"}
    expected = table[(table["dataset"] == "mnist1d") & (table["loss"] == "focal γ=3")].groupby("gamma_ev")["temperature"].mean()
    np.testing.assert_allclose(lines["focal γ=3"].get_ydata(), expected.to_numpy())
    assert to_hex(lines["focal γ=3"].get_color()) == style.gamma_color(3)
    single = k24_figures.optimal_temperature_figure(table.drop(columns="dataset"))
    assert len(single.axes) == 1


# --------------------------------------------------------------------------- M20 Figs 2-3


def _history(seed=0, epochs=12, spread=1.0):
    """A history.csv as the trainer writes it: its split_statistics for val/test per epoch."""
    rows = []
    for epoch in range(1, epochs + 1):
        row = {"epoch": epoch, "lr": 0.1 if epoch <= 6 else 0.01 if epoch <= 9 else 0.001,
               "train_loss": 1.0 / epoch, "train_nll": 1.1 / epoch, "train_error": 0.5 / epoch}
        for split in ("val", "test"):
            logits, labels = _logits(n=300, seed=seed * 100 + epoch, scale=spread * (1 + epoch / 4))
            row.update(diagnostics.split_statistics(torch.from_numpy(logits), torch.from_numpy(labels), 0.0, split))
        row["weight_norm"] = 3.0 + spread * epoch
        rows.append(row)
    return pd.DataFrame(rows)


def test_training_curves_figure_plots_the_history_columns_and_marks_lr_drops():
    history = _history()
    figure = m20_figures.training_curves_figure(history)
    train_ax, test_ax, error_ax = figure.axes[:3]
    labelled = {line.get_label(): line for line in test_ax.get_lines() if not line.get_label().startswith("_")}
    assert set(labelled) == {"NLL", "NLL, correct", "NLL, incorrect", "entropy, correct", "entropy, incorrect"}
    np.testing.assert_allclose(labelled["NLL, incorrect"].get_ydata(), history["test_nll_incorrect"])
    assert [line.get_label() for line in train_ax.get_lines() if not line.get_label().startswith("_")] == ["NLL"]
    drops = sorted(line.get_xdata()[0] for line in error_ax.get_lines() if line.get_gid() == "lr_drop")
    assert drops == [7, 10]
    (ece_line,) = [line for line in error_ax.get_lines() if line.get_label() == "test ECE"]
    np.testing.assert_allclose(ece_line.get_ydata(), 100 * history["test_ece"])
    with pytest.raises(ValueError, match="lacks column"):
        m20_figures.training_curves_figure(history.drop(columns="test_ece"))


def test_training_comparison_figure_one_line_per_run_in_each_panel(tmp_path):
    histories = {"cross_entropy": _history(0, spread=1.5), "focal γ=1": _history(1), "focal γ=3": _history(2, spread=0.5)}
    path = tmp_path / "history.csv"
    histories["focal γ=3"].to_csv(path, index=False)
    figure = m20_figures.training_comparison_figure({**histories, "focal γ=3": path})
    panels = figure.axes[:5]
    for ax, column in zip(panels, ("test_nll", "test_nll_correct", "test_nll_incorrect", "test_entropy_incorrect",
                                   "weight_norm")):
        lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
        assert set(lines) == set(histories)
        for label, history in histories.items():
            np.testing.assert_allclose(lines[label].get_ydata(), history[column].to_numpy())
        assert to_hex(lines["cross_entropy"].get_color()) == style.color_for("cross_entropy")
    legend_texts = [t.get_text() for t in figure.axes[5].get_legend().get_texts()]
    assert legend_texts == list(histories)
    with pytest.raises(ValueError, match="non-empty mapping"):
        m20_figures.training_comparison_figure({})


# ------------------------------------------------------------------------------ style, save


def test_colours_are_fixed_per_name_and_aliases_agree():
    assert style.color_for("CE") == style.color_for("cross_entropy") == style.color_for("Cross-Entropy")
    assert style.color_for("FL-3") == style.color_for("focal γ=3") == style.color_for("focal", gamma=3) == style.gamma_color(3)
    assert style.color_for("raw") == style.RAW_COLOR and style.color_for("psi") == style.PSI_COLOR
    assert style.color_for("DFL") == style.color_for("dual_focal") != style.color_for("focal")
    assert style.color_for("some_new_method") == style.color_for("Some New Method")  # stable, order-independent
    assert style.gamma_color(1) != style.gamma_color(2) != style.gamma_color(3)
    with pytest.raises(ValueError, match="non-empty string"):
        style.color_for("")


def test_figures_use_the_report_style_without_changing_global_rcparams():
    import matplotlib as mpl

    before = mpl.rcParams["font.size"]
    figure = m20_figures.training_curves_figure(_history(epochs=3))
    assert mpl.rcParams["font.size"] == before
    assert figure.axes[0].title.get_fontsize() == style.BASE_FONT_SIZE
    assert figure.get_figwidth() == style.REPORT_WIDTH


def test_save_writes_png_and_svg_and_rejects_other_suffixes(tmp_path):
    png = style.save(m20_figures.training_curves_figure(_history(epochs=3)), tmp_path / "a" / "curves.png")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 10_000
    width = int.from_bytes(data[16:20], "big")
    assert width == int(style.REPORT_WIDTH * style.DPI)
    svg = style.save(m20_figures.training_curves_figure(_history(epochs=3)), tmp_path / "curves.svg")
    assert svg.read_text().lstrip().startswith("<?xml") and svg.stat().st_size > 10_000
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        style.save(m20_figures.training_curves_figure(_history(epochs=3)), tmp_path / "curves.pdf")


# ------------------------------------------------------- few seeds, run health, nothing clipped


def _seeds_table(n_seeds, gammas=(0, 1, 2, 3), datasets=("mnist1d", "digits"), status=None):
    """ECE rows of ``n_seeds`` seeds per (dataset, γ, raw/Ψ); ``status(dataset, gamma, seed)``
    adds a run-health column."""
    rng = np.random.default_rng(n_seeds)
    rows = []
    for dataset in datasets:
        for gamma in gammas:
            for seed in range(n_seeds):
                for method in ("raw", "psi"):
                    row = {"dataset": dataset, "model": "cnn_small", "gamma": f"{gamma:g}", "seed": seed,
                           "calibrator": method, "metric": "ece",
                           "value": rng.uniform(0.01, 0.05) + 0.01 * gamma * (method == "raw")}
                    if status is not None:
                        row["status"] = status(dataset, gamma, seed)
                    rows.append(row)
    return pd.DataFrame(rows)


def _boxes(ax):
    return [box for container in ax.containers for box in getattr(container, "boxes", [])]


def _point_sets(ax):
    """{colour: (x, y) arrays} of the scatter markers on ``ax`` (PathCollections with offsets)."""
    from matplotlib.collections import PathCollection

    points = {}
    for collection in ax.collections:
        if not isinstance(collection, PathCollection) or len(collection.get_offsets()) == 0:
            continue
        offsets = np.asarray(collection.get_offsets())
        for colour, (x, y) in zip([to_hex(c) for c in collection.get_facecolors()] * len(offsets), offsets):
            xs, ys = points.setdefault(colour, ([], []))
            xs.append(x)
            ys.append(y)
    return {colour: (np.array(xs), np.array(ys)) for colour, (xs, ys) in points.items()}


@pytest.mark.parametrize("n_seeds", [1, 2])
def test_ece_box_plots_draw_fewer_than_three_seeds_as_points_in_the_methods_colours(n_seeds):
    table = _seeds_table(n_seeds)
    figure = c21_figures.ece_box_plots(table)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert len(visible) == 2
    raw, psi = style.color_for("raw"), style.color_for("psi")
    for ax, dataset in zip(visible, ("mnist1d", "digits")):
        assert _boxes(ax) == []  # no box of one or two values (a line that shows no colour)
        points = _point_sets(ax)
        assert set(points) == {raw, psi}  # raw and Ψ told apart by colour
        for method, colour in (("raw", raw), ("psi", psi)):
            rows = table[(table["dataset"] == dataset) & (table["calibrator"] == method)]
            np.testing.assert_allclose(np.sort(points[colour][1]), np.sort(100 * rows["value"].to_numpy()))
            assert len(points[colour][0]) == 4 * n_seeds
        for position in range(4):  # raw left of Ψ at every γ, both near the γ tick
            raw_x = points[raw][0][np.abs(points[raw][0] - position) < 0.5]
            psi_x = points[psi][0][np.abs(points[psi][0] - position) < 0.5]
            assert len(raw_x) == len(psi_x) == n_seeds and raw_x.max() < position < psi_x.min()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
    legend = visible[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["ECE-raw", "ECE-Ψ"]
    assert [to_hex(h.get_markerfacecolor()) for h in legend.legend_handles] == [raw, psi]  # points, as drawn
    assert "3 seeds" in legend.get_title().get_text()
    assert style.clipped_texts(figure) == []


def test_ece_box_plots_draw_boxes_from_three_seeds_and_points_only_where_seeds_are_fewer():
    table = _seeds_table(3)
    figure = c21_figures.ece_box_plots(table)
    for ax in [ax for ax in figure.axes if ax.get_visible()]:
        assert len(_boxes(ax)) == 8 and _point_sets(ax) == {}  # 4 γ × raw/Ψ boxes, no coloured points
    assert visible_legend_title(figure) is None
    # γ = 3 with a single seed: its two groups become points, at the places their boxes would have
    single = table[(table["gamma"] != "3") | (table["seed"] == 0)]
    figure = c21_figures.ece_box_plots(single)
    ax = figure.axes[0]
    boxes = _boxes(ax)
    assert len(boxes) == 6
    centres = sorted(float(np.mean(box.get_path().vertices[:, 0][[0, 1]])) for box in boxes)
    points = _point_sets(ax)
    raw_x, psi_x = points[style.color_for("raw")][0], points[style.color_for("psi")][0]
    np.testing.assert_allclose(centres[:2], [-0.175, 0.175], atol=1e-9)  # seaborn's dodge of 2 boxes, width 0.7
    np.testing.assert_allclose([raw_x[0], psi_x[0]], [3 - 0.175, 3 + 0.175], atol=1e-9)


def visible_legend_title(figure):
    title = figure.axes[0].get_legend().get_title().get_text()
    return title or None


def test_ece_box_plots_order_gammas_as_numbers_and_mark_runs_that_did_not_train():
    status = lambda dataset, gamma, seed: "collapsed" if (dataset, gamma, seed) == ("digits", 10, 0) else "trained"
    table = _seeds_table(3, gammas=(0, 0.5, 2, 10), status=status)
    figure = c21_figures.ece_box_plots(table)
    first, second = figure.axes[:2]
    assert [t.get_text() for t in first.get_xticklabels()] == ["0", "0.5", "2", "10"]  # not "10" before "2"
    assert [t.get_text() for t in second.get_xticklabels()] == ["0", "0.5", "2", "10\n[collapsed 1/3]"]
    assert style.clipped_texts(figure) == []
    older = c21_figures.ece_box_plots(table.drop(columns="status"))  # a table written before run health
    assert [t.get_text() for t in older.axes[1].get_xticklabels()] == ["0", "0.5", "2", "10"]


def test_status_label_marks_only_runs_that_did_not_train():
    assert style.status_label("FL-3", ["trained", "trained"]) == "FL-3"
    assert style.status_label("FL-3", []) == style.status_label("FL-3", [None, float("nan"), ""]) == "FL-3"
    assert style.status_label("FL-3", ["collapsed"]) == "FL-3 [collapsed]"
    assert style.status_label("FL-3", ["collapsed", "trained", "diverged", None]) == "FL-3 [collapsed 1/4, diverged 1/4]"
    assert style.status_label("3", ["not converged"] * 2, sep="\n") == "3\n[not converged]"


def test_segmentation_scores_draw_one_or_two_folds_as_points_and_three_as_boxes():
    colors = {"CE": style.color_for("cross_entropy"), "FL": style.color_for("focal", 2.0),
              "DFL": style.color_for("dual_focal")}
    for n_folds, boxes, points in ((1, 0, 3), (2, 0, 3), (3, 3, 0)):
        rows = [{"dataset": "shapes", "model": "unet", "loss": loss, "seed": fold, "metric": metric,
                 "value": 0.5 + 0.1 * fold + 0.05 * index, "status": "diverged" if (loss, fold) == ("FL", 0) else "trained"}
                for index, loss in enumerate(colors) for fold in range(n_folds) for metric in ("iou", "hausdorff")]
        figure = h21_figures.segmentation_scores_figure(pd.DataFrame(rows), loss_order=list(colors), colors=colors)
        for ax in figure.axes:
            assert len(_boxes(ax)) == boxes
            coloured = {c for c in _point_sets(ax) if c != "#000000"}  # black dots: folds over a box
            assert len(coloured) == points and (not points or coloured == set(colors.values()))
            marked = "[diverged]" if n_folds == 1 else f"[diverged 1/{n_folds}]"
            assert [t.get_text() for t in ax.get_xticklabels()] == ["CE", f"FL\n{marked}", "DFL"]
        assert style.clipped_texts(figure) == []


def test_long_titles_are_wrapped_not_cut_and_the_check_sees_a_cut_one():
    from matplotlib.figure import Figure

    rows = [{"dataset": "mnist1d", "loss": loss, "gamma_ev": g, "temperature": 1.0 + 0.1 * g + 0.2 * offset}
            for offset, loss in enumerate(("cross_entropy", "focal γ=3 [collapsed]")) for g in (-1.0, 0.0, 1.0, 2.0)]
    figure = k24_figures.optimal_temperature_figure(pd.DataFrame(rows))  # one panel: 4.5 in wide, the K24 Fig 8 title is not
    assert figure.get_figwidth() == 4.5
    title = figure.get_suptitle()
    assert title.count("\n") >= 2 and " ".join(title.split()) == (
        "Optimal temperature of focal temperature scaling against γ_ev (reproduces komisarenko2024 Fig. 8)")
    assert style.clipped_texts(figure) == []
    assert "focal γ=3 [collapsed]" in [t.get_text() for t in figure.axes[0].get_legend().get_texts()]

    cut = Figure(figsize=(3, 2), layout="constrained")  # a title no one wrapped is reported
    cut.subplots()
    cut.suptitle("a title much too long for a figure only three inches wide")
    assert style.clipped_texts(cut) == ["a title much too long for a figure only three inches wide"]
    style.fit_titles(cut)
    assert style.clipped_texts(cut) == []


def test_box_plot_panels_with_long_names_keep_their_titles_inside():
    table = _seeds_table(2, datasets=("a_data_set_with_a_rather_long_name", "digits", "another_long_data_set_name"))
    figure = c21_figures.ece_box_plots(table, panel_by=("dataset", "model"))
    assert style.clipped_texts(figure) == []
    assert "\n" in figure.axes[2].get_title()


def test_training_figures_mark_runs_that_did_not_train_from_run_json(tmp_path):
    import json

    from focalcal.papers.mukhoti2020 import page as mukhoti2020
    from focalcal.report import figure_inputs

    paths = {}
    for label, health in (("cross_entropy", {"status": "trained"}), ("focal γ=1", {"status": "diverged"}),
                          ("focal γ=3", None)):
        run_dir = tmp_path / "results/runs" / label.replace(" ", "_")
        run_dir.mkdir(parents=True)
        _history(seed=len(paths), epochs=4).to_csv(run_dir / "history.csv", index=False)
        if health is not None or label.endswith("3"):
            (run_dir / "run.json").write_text(json.dumps({"health": health} if health else {"seed": 0}))
        paths[label] = str((run_dir / "history.csv").relative_to(tmp_path))
    assert figure_inputs.run_status(tmp_path / "nowhere") is None
    params = {"histories": paths, "colors": {"cross_entropy": ["cross_entropy", None], "focal γ=1": ["focal", 1.0],
                                             "focal γ=3": ["focal", 3.0]}}
    figure = mukhoti2020.training_comparison(params, tmp_path, "study")
    labels = [t.get_text() for t in figure.axes[-1].get_legend().get_texts()]
    assert labels == ["cross_entropy", "focal γ=1 [diverged]", "focal γ=3"]
    colours = [to_hex(line.get_color()) for line in figure.axes[0].get_lines() if not line.get_label().startswith("_")]
    assert colours == [style.color_for("cross_entropy"), style.gamma_color(1), style.gamma_color(3)]
    curves = mukhoti2020.training_curves({"history": paths["focal γ=1"]}, tmp_path, "study")
    assert "(cross-entropy [diverged])" in curves.get_suptitle()
    assert style.clipped_texts(curves) == []


def test_optimal_temperature_builder_marks_a_loss_whose_runs_did_not_all_train(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    from focalcal.papers.komisarenko2024 import page as komisarenko2024

    runs = []
    for loss, gamma, seed, status in (("CE", 0.0, 0, "trained"), ("FL-3", 3.0, 0, "collapsed"), ("FL-3", 3.0, 1, "trained")):
        path = f"mnist1d/cnn/{loss}/r/seed{seed}"
        (tmp_path / "results/runs" / path).mkdir(parents=True)
        (tmp_path / "results/runs" / path / "run.json").write_text(json.dumps({"health": {"status": status}}))
        runs.append({"path": path, "dataset": "mnist1d", "loss": loss, "gamma_train": gamma,
                     "color": ["focal", gamma] if gamma else ["cross_entropy", None],
                     "calibration": f"results/calibration/{path}/calibration.json", "calibrator": "fts"})
    fitted = SimpleNamespace(gammas=[-1.0, 0.0, 1.0], best_temperature_per_gamma_=[0.9, 1.0, 1.2])
    monkeypatch.setattr(komisarenko2024, "read_calibration", lambda path: {})
    monkeypatch.setattr(komisarenko2024, "stored_calibrator", lambda calibration, key, where: (fitted, None))
    figure = komisarenko2024.optimal_temperature({"runs": runs, "criterion": "ece"}, tmp_path, "study")
    lines = {line.get_label(): line for line in figure.axes[0].get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"CE", "FL-3 [collapsed 1/2]"}
    assert to_hex(lines["FL-3 [collapsed 1/2]"].get_color()) == style.gamma_color(3)
    assert style.clipped_texts(figure) == []


# --------------------------------------------------------------------------- M20 Figs 4b-d, 10


def _gradient_tables():
    """CE and FL γ=3 gradient norms at two epochs, from the trainer's own formula on real logits."""
    from focalcal import losses

    tables = {}
    for label, loss in (("CE", {"name": "cross_entropy"}), ("FL γ=3", {"name": "focal", "gamma": 3.0})):
        frames = []
        for epoch, scale in ((2, 1.0), (9, 4.0)):
            logits, labels = _logits(n=300, scale=scale, seed=epoch)
            features = torch.ones(300, 8)
            norms = diagnostics.last_layer_gradient_norms(torch.from_numpy(logits), features, torch.from_numpy(labels),
                                                          losses.build(loss))
            frames.append(pd.DataFrame({"epoch": epoch, "gradient_norm": norms.numpy()}))
        tables[label] = pd.concat(frames)
    return tables


def test_gradient_norm_histograms_count_every_sample_and_mark_medians():
    tables = _gradient_tables()
    figure = m20_figures.gradient_norm_histograms_figure(tables, colors={"CE": "#000000", "FL γ=3": "#ff0000"})
    assert len(figure.axes) == 2 and [ax.get_title() for ax in figure.axes] == ["(b) epoch 2", "(c) epoch 9"]
    for ax, epoch in zip(figure.axes, (2, 9)):
        assert ax.get_legend_handles_labels()[1] == [
            f"{label} (median {np.median(t[t.epoch == epoch].gradient_norm):.2g})" for label, t in tables.items()]
        for container in ax.containers:
            assert sum(bar.get_height() for bar in container) == 300  # no sample falls outside the bins
        medians = sorted(line.get_xdata()[0] for line in ax.get_lines())
        assert medians == pytest.approx(sorted(np.median(t[t.epoch == epoch].gradient_norm) for t in tables.values()))
    assert style.clipped_texts(figure) == []


def test_gradient_norm_histograms_refuse_missing_epochs_and_bad_values():
    tables = _gradient_tables()
    with pytest.raises(ValueError, match=r"no gradient norms recorded at epoch\(s\) \{'CE': \[5\], 'FL γ=3': \[5\]\}"):
        m20_figures.gradient_norm_histograms_figure(tables, epochs=[5])
    tables["CE"].loc[tables["CE"].index[0], "gradient_norm"] = np.nan
    with pytest.raises(ValueError, match=r"tables\['CE'\] has non-finite gradient norms"):
        m20_figures.gradient_norm_histograms_figure(tables)
    with pytest.raises(ValueError, match=r"tables\['CE'\] lacks column\(s\) \['gradient_norm'\]"):
        m20_figures.gradient_norm_histograms_figure({"CE": pd.DataFrame({"epoch": [1]})})


def test_feature_norms_figure_draws_both_norms_per_run():
    epochs = np.arange(1, 11)
    histories = {label: pd.DataFrame({"epoch": epochs, "train_feature_norm": epochs * scale,
                                      "weight_norm": 10.0 - epochs / scale, "lr": np.where(epochs > 5, 0.01, 0.1)})
                 for label, scale in (("CE", 2.0), ("FL γ=3", 1.0))}
    figure = m20_figures.feature_norms_figure(histories)
    features, weights = figure.axes
    for ax, column in ((features, "train_feature_norm"), (weights, "weight_norm")):
        lines = [line for line in ax.get_lines() if line.get_gid() != "lr_drop"]
        assert [line.get_label() for line in lines] == ["CE", "FL γ=3"]
        for line, history in zip(lines, histories.values()):
            np.testing.assert_allclose(line.get_ydata(), history[column])
        assert [line.get_xdata()[0] for line in ax.get_lines() if line.get_gid() == "lr_drop"] == [6]
    assert style.clipped_texts(figure) == []
    with pytest.raises(ValueError, match=r"histories\['CE'\].*train_feature_norm"):
        m20_figures.feature_norms_figure({"CE": histories["CE"].drop(columns="train_feature_norm")})


def test_fig9_builder_shows_each_models_stored_pre_and_post_ts_confidence(tmp_path):
    """M20 Fig 9 from run files: logits.npz + calibration.json written by the calibrate step;
    the bars are the stored calibrators' confidences (no refit), on inputs every model gets
    right (top) or wrong (bottom)."""
    from focalcal.files.artefacts import atomic_savez
    from focalcal.papers.mukhoti2020 import page as mukhoti2020
    from focalcal.pipeline.calibrate import calibrate_run
    from focalcal.report import figure_inputs

    rng = np.random.default_rng(4)
    n, k = 400, 5
    labels = rng.integers(0, k, n)
    signals = rng.normal(size=(n, 2))  # low-dimensional: logits.npz carries them as test_inputs
    shared = rng.normal(size=(n, k))
    shared[np.arange(n), labels] += np.where(rng.random(n) < 0.7, 4.0, -4.0)  # most right, some wrong for all
    methods = {"raw": {"build": {"name": "identity"}}, "ts_ece": {"build": {"name": "temperature_scaling", "objective": "ece"}}}
    models = []
    for index, (label, scale) in enumerate((("CE", 3.0), ("Brier", 1.0), ("MMCE", 1.5), ("FLSD-53", 0.7))):
        run_dir = tmp_path / f"run{index}"
        run_dir.mkdir()
        logits = (scale * (shared + 0.1 * rng.normal(size=(n, k)))).astype(np.float32)
        atomic_savez(run_dir / "logits.npz", val_logits=logits, val_labels=labels, test_logits=logits,
                     test_labels=labels, test_inputs=signals.astype(np.float32))
        calibrate_run(run_dir / "logits.npz", methods, [15], run_dir / "calibration.json", run_dir / "metrics.csv")
        models.append({"label": label, "color": [label.lower(), None], "logits": f"run{index}/logits.npz",
                       "calibration": f"run{index}/calibration.json", "raw": "raw", "post": "ts_ece", "run_dir": f"run{index}"})
    params = {"models": models, "run": {"path": "run0"}, "data_root": "data"}
    figure = mukhoti2020.sample_confidences(params, tmp_path, "study")
    assert style.clipped_texts(figure) == []
    bar_axes = [ax for ax in figure.axes if ax.patches]
    assert len(bar_axes) == 8  # 4 inputs all models get right, 4 all get wrong
    stored = {}
    for model in models:
        calibration = figure_inputs.read_calibration(tmp_path / model["calibration"])
        logits = np.load(tmp_path / model["logits"])["test_logits"]
        stored[model["label"]] = (figure_inputs.apply_stored(calibration, "raw", logits).max(1),
                                  figure_inputs.apply_stored(calibration, "ts_ece", logits).max(1))
    widths = sorted(round(bar.get_width(), 6) for ax in bar_axes for bar in ax.patches if bar.get_width() > 0)
    candidates = {round(float(v), 6) for pre, post in stored.values() for v in np.concatenate([pre, post])}
    assert len(widths) == 64 and set(widths) <= candidates  # 8 inputs x 4 models x (pre, post), each a stored confidence


def test_box_plot_points_land_in_the_same_place_every_time_and_leave_numpys_generator_alone():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from focalcal.plots.boxes import boxes_or_points

    rng = np.random.default_rng(3)
    data = pd.DataFrame({"loss": np.repeat(["ce", "fl"], 10), "fold": np.tile(np.arange(10), 2),
                         "iou": rng.uniform(0.5, 0.9, 20)})

    def point_offsets():
        ax = Figure().subplots()
        boxes_or_points(ax, data, x="loss", y="iou", hue="loss", order=["ce", "fl"], hue_order=["ce", "fl"],
                        palette={"ce": "#000000", "fl": "#ff0000"}, overlay="#777777", dodge=False)
        return np.concatenate([collection.get_offsets() for collection in ax.collections])

    np.random.seed(11)
    expected_next = np.random.random()
    np.random.seed(11)
    first = point_offsets()
    assert np.random.random() == expected_next  # the caller's global generator is where it was
    second = point_offsets()
    assert len(first) == 20
    assert np.array_equal(first, second)
    assert np.ptp(first[:10, 0]) > 0  # the points are spread (jittered), not stacked
