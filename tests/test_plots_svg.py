"""The SVG reliability diagram of ``focalcal calibrate``: its bars, numbers and curve are the
metrics' own, read back from the SVG's elements; it imports no matplotlib."""

from __future__ import annotations

import os
import subprocess
import sys
from xml.etree import ElementTree

import numpy as np
import pytest
from scipy.special import softmax

from focalcal import metrics
from focalcal.plots import svg

NS = {"svg": "http://www.w3.org/2000/svg"}


def model(n=2000, k=5, temperature=2.0, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 3
    labels = (rng.uniform(size=(n, 1)) > softmax(logits / temperature, axis=1).cumsum(axis=1)).sum(axis=1)
    return softmax(logits, axis=1), labels.clip(max=k - 1)


def bars_of(root, panel: tuple[float, float], y_max: float) -> list[tuple[float, float, float]]:
    """(lower, upper, height) in data units of the filled rects inside one panel's box."""
    top, bottom = panel
    found = []
    for rect in root.iterfind("svg:rect", NS):
        if rect.get("fill-opacity") != str(svg.BAR_OPACITY) or float(rect.get("y")) < top - 1e-6:
            continue
        y, height = float(rect.get("y")), float(rect.get("height"))
        if y + height > bottom + 0.01:
            continue
        x, width = float(rect.get("x")), float(rect.get("width"))
        span = svg._RIGHT - svg._LEFT
        found.append(((x - svg._LEFT) / span, (x + width - svg._LEFT) / span, height / (bottom - top) * y_max))
    return sorted(found)


def test_the_bars_are_the_bins_accuracies_and_shares():
    """A bar per bin with a non-zero height, spanning the bin, as high as its accuracy (top) and its
    share of the samples (bottom)."""
    probs, labels = model()
    columns = metrics.reliability_columns(probs, labels, n_bins=10)
    root = ElementTree.fromstring(svg.reliability_svg(probs, labels, n_bins=10, title="model"))
    accuracy = np.nan_to_num(columns["accuracy"])
    drawn = accuracy > 0
    assert drawn.any() and (~drawn).any()  # bins with and without a bar: both cases
    expected = np.column_stack([columns["lower"], columns["upper"], accuracy])[drawn]
    np.testing.assert_allclose(bars_of(root, svg._TOP_PANEL, 1.0), expected, atol=1e-4)
    share = 100 * columns["count"] / columns["count"].sum()
    y_max = svg.nice_ticks(share.max() * 1.05)[-1]
    expected = np.column_stack([columns["lower"], columns["upper"], share])[share > 0]
    np.testing.assert_allclose(bars_of(root, svg._BOTTOM_PANEL, y_max), expected, atol=1e-4 * y_max)


def test_the_corner_states_the_ece_and_smece_of_the_same_bins_and_curve():
    probs, labels = model(seed=3)
    curve = metrics.smooth_reliability_curve(probs, labels)
    text = svg.reliability_svg(probs, labels, n_bins=15, binning="mass", smooth=curve)
    root = ElementTree.fromstring(text)
    strings = [element.text for element in root.iterfind("svg:text", NS)]
    assert f"ECE = {100 * metrics.ece(probs, labels, n_bins=15, binning='mass'):.2f} %  (15 mass bins)" in strings
    assert f"smECE = {100 * curve.smooth_ece:.2f} %" in strings
    assert {"smoothed accuracy", "accuracy (bins)", "accuracy", "% of samples"} <= set(strings)
    # the curve: relplot's mesh within the observed confidences, at its accuracies
    points = np.array([point.split(",") for point in root.find("svg:polyline", NS).get("points").split()], dtype=float)
    mesh, accuracy = svg.observed_part(curve, probs)
    span = svg._RIGHT - svg._LEFT
    top, bottom = svg._TOP_PANEL
    np.testing.assert_allclose((points[:, 0] - svg._LEFT) / span, mesh, atol=0.1 / span)
    np.testing.assert_allclose((bottom - points[:, 1]) / (bottom - top), accuracy, atol=0.1 / (bottom - top))
    confidence = probs.max(axis=1)
    assert confidence.min() <= mesh.min() and mesh.max() <= confidence.max()


def test_without_smooth_there_is_no_curve_and_no_legend():
    probs, labels = model(n=300)
    root = ElementTree.fromstring(svg.reliability_svg(probs, labels))
    assert root.find("svg:polyline", NS) is None
    assert "smoothed accuracy" not in [element.text for element in root.iterfind("svg:text", NS)]


def test_a_title_is_escaped_and_no_element_has_an_id():
    """Several diagrams are inlined into one page: an id would repeat, markup in a title would break it."""
    probs, labels = model(n=300)
    text = svg.reliability_svg(probs, labels, title='TS <"val"> & more', smooth=True)
    root = ElementTree.fromstring(text)
    assert 'TS <"val"> & more' in [element.text for element in root.iterfind("svg:text", NS)]
    assert not [element for element in root.iter() if "id" in element.attrib]


@pytest.mark.parametrize("top", [1e-4, 0.03, 0.9, 1.0, 4.2, 7.5, 10.0, 36.9, 99.0, 105.0, 12345.0])
def test_nice_ticks_cover_the_top_in_round_steps(top):
    ticks = svg.nice_ticks(top)
    steps = np.diff(ticks)
    assert ticks[0] == 0 and ticks[-1] >= top and ticks[-2] < top
    np.testing.assert_allclose(steps, steps[0])
    mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
    assert any(np.isclose(mantissa, allowed) for allowed in (1, 2, 2.5, 5, 10))
    assert 2 <= len(ticks) <= 6


def test_drawing_an_svg_diagram_imports_no_matplotlib():
    code = ("import sys, numpy as np\nfrom focalcal.plots import reliability_svg\n"
            "p = np.full((50, 2), 0.5); p[:, 0] += np.linspace(0, 0.4, 50); p[:, 1] = 1 - p[:, 0]\n"
            "reliability_svg(p, np.arange(50) % 2, smooth=True)\nprint('matplotlib' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.stdout.strip() == "False"
