"""The figures' style without seaborn: its palette and "whitegrid" theme as seaborn gives them,
and a diagram drawn under them the same, byte for byte, as under seaborn's own theme."""

from __future__ import annotations

import subprocess
import sys

import matplotlib as mpl
import numpy as np
import seaborn as sns

from focalcal.plots import reliability_diagram, save, style


def test_the_written_out_palette_and_theme_are_seaborns():
    assert style.SEABORN_COLORBLIND == sns.color_palette("colorblind", 10).as_hex()
    theirs = dict(sns.axes_style("whitegrid"))
    assert theirs.pop("image.cmap") == "rocket"  # registered by seaborn's import only; no figure here uses it
    assert style.SEABORN_WHITEGRID == theirs


def test_a_diagram_is_drawn_as_under_seaborns_theme(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(5) * 0.3, size=400)
    labels = rng.integers(0, 5, 400)
    save(reliability_diagram(probs, labels, title="ours"), tmp_path / "ours.png")

    def seaborn_style():
        with mpl.rc_context(), sns.axes_style("whitegrid"):
            mpl.rcParams.update(style._rc())
            yield

    monkeypatch.setattr(style, "plot_style", style.contextmanager(seaborn_style))
    save(reliability_diagram(probs, labels, title="ours"), tmp_path / "seaborn.png")
    assert (tmp_path / "ours.png").read_bytes() == (tmp_path / "seaborn.png").read_bytes()


def test_drawing_a_diagram_imports_neither_seaborn_nor_scipy_stats_nor_pandas():
    code = ("import sys, numpy as np\nfrom focalcal.plots import reliability_diagram\n"
            "reliability_diagram(np.full((4, 2), 0.5), np.array([0, 1, 0, 1]))\n"
            "print(sorted(m for m in ('seaborn', 'scipy.stats', 'sklearn', 'pandas') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_diagrams_fixed_margins_keep_every_text_whole_and_apart():
    """Fixed margins (no constrained layout): the legend, title, three-digit ticks and labels fit
    and do not overlap, with and without the smooth curve's legend."""
    from focalcal.plots.style import clipped_texts

    probs, labels = np.tile([0.999, 0.001], (500, 1)), np.zeros(500, dtype=int)  # one bin holds 100 %
    for smooth in (False, True):
        figure = reliability_diagram(probs, labels, title="isotonic regression (val)", smooth=smooth)
        assert clipped_texts(figure) == []
        renderer = figure.canvas.get_renderer()
        top, bottom = figure.axes
        title = top.title.get_window_extent(renderer)
        assert not title.overlaps(top.get_window_extent(renderer))
        assert top.get_window_extent(renderer).y0 > bottom.get_window_extent(renderer).y1
        if smooth:
            assert not figure.legends[0].get_window_extent(renderer).overlaps(title)


def test_the_diagrams_columns_are_the_bin_tables():
    from focalcal import metrics

    rng = np.random.default_rng(4)
    probs, labels = rng.dirichlet(np.ones(4), size=300), rng.integers(0, 4, 300)
    for binning in ("width", "mass"):
        table = metrics.reliability_bins(probs, labels, n_bins=12, binning=binning)
        columns = metrics.reliability_columns(probs, labels, n_bins=12, binning=binning)
        assert list(columns) == list(table.columns)
        for name, values in columns.items():
            np.testing.assert_array_equal(values, table[name].to_numpy())
