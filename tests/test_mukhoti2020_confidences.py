"""mukhoti2020 Fig 9 (confidence on inputs every model gets right / wrong, before and after
temperature scaling), on synthetic 1-D signals and predictions made here: the choice of inputs
is checked on a case with a known answer, and the drawn bars are read back and compared with
the confidences given."""

import numpy as np
import pytest
from matplotlib.colors import to_hex

from focalcal.papers.mukhoti2020 import confidences
from focalcal.plots import style

MODELS = ("Cross-entropy", "Brier", "MMCE", "FLSD-53")
LENGTH = 40


def _case(n_correct=4, n_wrong=4, channels=None, seed=0):
    """Signals, labels and panels of n_correct inputs all models get right, then n_wrong that
    all models get wrong (each model a different wrong class)."""
    rng = np.random.default_rng(seed)
    n = n_correct + n_wrong
    labels = rng.integers(0, 10, n)
    shape = (n, LENGTH) if channels is None else (n, channels, LENGTH)
    signals = rng.normal(size=shape)
    panels = {}
    for shift, model in enumerate(MODELS, start=1):
        predicted = labels.copy()
        predicted[n_correct:] = (labels[n_correct:] + shift) % 10
        panels[model] = {"predicted": predicted, "confidence_pre": rng.uniform(0.5, 1.0, n),
                         "confidence_post": rng.uniform(0.3, 1.0, n)}
    return signals, labels, panels


def _bar_axes(figure):
    return [ax for ax in figure.axes if ax.get_visible() and ax.containers]


def _signal_axes(figure):
    return [ax for ax in figure.axes if ax.get_visible() and ax.lines and not ax.containers]


# ----------------------------------------------------------------------------- choose_samples


def test_choose_samples_takes_only_inputs_every_model_gets_right_or_wrong():
    labels = np.array([0, 1, 2, 3, 4, 5, 0, 1, 2])
    a = np.array([0, 1, 2, 9, 4, 9, 0, 9, 2])
    b = np.array([0, 1, 2, 8, 7, 8, 0, 1, 2])
    # all right: 0, 1, 2, 6, 8; all wrong: 3, 5; mixed: 4 (b wrong), 7 (a wrong)
    correct, wrong = confidences.choose_samples(labels, {"A": a, "B": b}, n_per_row=10)
    assert correct.tolist() == [0, 1, 2, 6, 8] and wrong.tolist() == [3, 5]
    correct, wrong = confidences.choose_samples(labels, {"A": a, "B": b}, n_per_row=3, seed=4)
    assert set(correct) <= {0, 1, 2, 6, 8} and len(correct) == 3 and wrong.tolist() == [3, 5]
    assert len(set(labels[correct])) == 3  # distinct true classes come first
    assert list(correct) == sorted(correct)


def test_choose_samples_is_deterministic_per_seed():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 10, 500)
    predictions = {model: np.where(rng.random(500) < 0.4, (labels + i + 1) % 10, labels)
                   for i, model in enumerate(MODELS)}
    first = confidences.choose_samples(labels, predictions, seed=7)
    second = confidences.choose_samples(labels, predictions, seed=7)
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    correct, wrong = first
    assert len(correct) == len(wrong) == 4
    hits = np.stack([p == labels for p in predictions.values()])
    assert hits[:, correct].all() and not hits[:, wrong].any()


def test_choose_samples_handles_no_misclassified_input():
    labels = np.array([0, 1, 2, 1])
    correct, wrong = confidences.choose_samples(labels, {"A": labels.copy(), "B": labels.copy()}, n_per_row=4)
    assert correct.tolist() == [0, 1, 2, 3]
    assert wrong.size == 0 and wrong.dtype == np.int64
    _, none = confidences.choose_samples(labels, {"A": labels, "B": labels}, n_per_row=0)
    assert none.size == 0


def test_choose_samples_rejects_bad_inputs_naming_the_culprit():
    labels = np.array([0, 1, 2])
    with pytest.raises(ValueError, match="non-empty mapping"):
        confidences.choose_samples(labels, {})
    with pytest.raises(ValueError, match="predictions\\['B'\\]"):
        confidences.choose_samples(labels, {"A": labels, "B": np.array([0, 1])})
    with pytest.raises(ValueError, match="n_per_row"):
        confidences.choose_samples(labels, {"A": labels}, n_per_row=-1)


# ------------------------------------------------------------------------------------ figure


def test_figure_with_four_and_four_inputs_draws_the_given_confidences():
    signals, labels, panels = _case()
    figure = confidences.sample_confidences_figure(signals, labels, panels)
    assert len(figure.axes) == 16
    bars, lines = _bar_axes(figure), _signal_axes(figure)
    assert len(bars) == 8 and len(lines) == 8
    for index, (bar_ax, line_ax) in enumerate(zip(bars, lines)):
        assert line_ax.get_title() == f"true: {labels[index]}"
        np.testing.assert_allclose(line_ax.lines[0].get_ydata(), signals[index])
        pre, post = bar_ax.containers
        np.testing.assert_allclose([bar.get_width() for bar in pre],
                                   [panels[m]["confidence_pre"][index] for m in MODELS])
        np.testing.assert_allclose([bar.get_width() for bar in post],
                                   [panels[m]["confidence_post"][index] for m in MODELS])
        assert [to_hex(bar.get_facecolor()) for bar in post] == [style.color_for(m) for m in MODELS]
        assert [text.get_text() for text in bar_ax.texts] == [f"→ {panels[m]['predicted'][index]}" for m in MODELS]
    assert "mukhoti2020 Fig. 9" in figure.get_suptitle()
    rows = [subfigure._suptitle.get_text() for subfigure in figure.subfigs]
    assert rows == ["correctly classified by every model", "misclassified by every model"]
    assert style.clipped_texts(figure) == []


def test_figure_with_an_empty_bottom_row_says_so():
    signals, labels, panels = _case(n_correct=4, n_wrong=0)
    figure = confidences.sample_confidences_figure(signals, labels, panels)
    assert len(figure.axes) == 9  # 4 signals + 4 bar charts + the empty row's note
    assert len(_bar_axes(figure)) == 4 and len(_signal_axes(figure)) == 4
    notes = [text.get_text() for ax in figure.axes for text in ax.texts]
    assert "no test input is misclassified by every model" in notes
    assert style.clipped_texts(figure) == []


def test_figure_with_rows_of_unequal_length_keeps_the_columns_aligned():
    signals, labels, panels = _case(n_correct=4, n_wrong=2)
    figure = confidences.sample_confidences_figure(signals, labels, panels)
    assert len(figure.axes) == 16 and sum(ax.get_visible() for ax in figure.axes) == 12
    widths = {round(ax.get_position().width, 4) for ax in figure.axes if ax.get_visible()}
    assert len(widths) == 1
    assert style.clipped_texts(figure) == []


def test_figure_draws_the_first_channel_names_classes_and_marks_status():
    signals, labels, panels = _case(n_correct=2, n_wrong=2, channels=3)
    names = [f"digit {k}" for k in range(10)]
    figure = confidences.sample_confidences_figure(signals, labels, panels, class_names=names,
                                                 statuses={"MMCE": "collapsed", "Brier": "trained"},
                                                 colors={m: "#123456" for m in MODELS}, title_what="Short")
    lines = _signal_axes(figure)
    np.testing.assert_allclose(lines[0].lines[0].get_ydata(), signals[0, 0])
    assert lines[0].get_title() == f"true: digit {labels[0]}"
    assert _bar_axes(figure)[0].texts[0].get_text() == f"→ digit {panels[MODELS[0]]['predicted'][0]}"
    legend = [text.get_text() for text in figure.legends[0].get_texts()]
    assert legend[:4] == ["Cross-entropy", "Brier", "MMCE [collapsed]", "FLSD-53"]
    assert to_hex(_bar_axes(figure)[0].containers[1][0].get_facecolor()) == "#123456"
    assert figure.get_suptitle().startswith("Short")
    assert style.clipped_texts(figure) == []


@pytest.mark.parametrize("change, match", [
    (lambda s, y, p: (s, y, {}), "non-empty mapping"),
    (lambda s, y, p: (s[..., None, None], y, p), "signals must be"),
    (lambda s, y, p: (s, y[:-1], p), "labels has 7 values"),
    (lambda s, y, p: (s, y, {**p, "MMCE": {**p["MMCE"], "confidence_pre": p["MMCE"]["confidence_pre"] + 0.6}}),
     r"panels\['MMCE'\]\['confidence_pre'\] must hold confidences in \[0, 1\]"),
    (lambda s, y, p: (s, y, {**p, "Brier": {**p["Brier"], "confidence_post": p["Brier"]["confidence_post"][:3]}}),
     r"panels\['Brier'\]\['confidence_post'\] has 3 values"),
    (lambda s, y, p: (s, y, {**p, "FLSD-53": {"predicted": p["FLSD-53"]["predicted"]}}),
     r"panels\['FLSD-53'\] lacks \['confidence_pre', 'confidence_post'\]"),
    (lambda s, y, p: (s, y, {**p, "Brier": {**p["Brier"], "predicted": np.where(
        np.arange(len(y)) == 0, (y + 1) % 10, p["Brier"]["predicted"])}}),
     r"sample 0 .* classified correctly by \['Cross-entropy', 'MMCE', 'FLSD-53'\]"),
])
def test_figure_rejects_bad_inputs_naming_the_culprit(change, match):
    signals, labels, panels = _case()
    signals, labels, panels = change(signals, labels, panels)
    with pytest.raises(ValueError, match=match):
        confidences.sample_confidences_figure(signals, labels, panels)


def test_figure_rejects_colours_statuses_and_class_names_that_do_not_fit():
    signals, labels, panels = _case(n_correct=2, n_wrong=2)
    with pytest.raises(ValueError, match=r"colors has no colour for model\(s\) \['FLSD-53'\]"):
        confidences.sample_confidences_figure(signals, labels, panels, colors={m: "red" for m in MODELS[:3]})
    with pytest.raises(ValueError, match=r"statuses names model\(s\) \['FL-3'\]"):
        confidences.sample_confidences_figure(signals, labels, panels, statuses={"FL-3": "collapsed"})
    with pytest.raises(ValueError, match="has no name in class_names"):
        confidences.sample_confidences_figure(signals, labels, panels, class_names=["zero"])


def test_long_class_names_stay_inside_their_bar_axes():
    signals, labels, panels = _case(n_correct=4, n_wrong=4)
    for panel in panels.values():
        panel["confidence_pre"][:] = 1.0  # the predicted class is written right of confidence 1
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    figure = confidences.sample_confidences_figure(signals, labels, panels, class_names=names)
    assert style.clipped_texts(figure) == []  # draws the figure
    renderer = figure.canvas.get_renderer()
    for ax in _bar_axes(figure):
        right = ax.get_window_extent(renderer).x1
        assert all(text.get_window_extent(renderer).x1 <= right for text in ax.texts)
