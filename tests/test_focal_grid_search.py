"""Focal temperature scaling's coarse-to-fine search (``search="refine"``) against the papers'
whole (γ, T) grid: the same pair by NLL, a validation ECE within ECE_TOLERANCE of the grid's
minimum, every score it computes equal to the grid's, and about a third of the pairs scored."""

from __future__ import annotations

import json

import numpy as np
import pytest

from focalcal import catalog
from focalcal.calibration import FocalTemperatureScaling, _focal_grid
from focalcal.commands.calibrator_choice import CALIBRATORS
from focalcal.logits_file import stand_in_logits

#: The stated tolerance of the refined search by ECE: its pair's validation ECE at most this
#: above the whole grid's minimum (``_focal_grid.SEARCHES``; the last problem below: 1.7e-3).
ECE_TOLERANCE = 2e-3

# (validation samples, classes, temperature of the stand-in model, logit scale, seed): over- and
# underconfident models, few and many classes
PROBLEMS = [(1000, 10, 2.0, 3.0, 0), (1000, 10, 0.7, 3.0, 0), (2000, 10, 2.0, 3.0, 1), (600, 6, 2.0, 3.0, 4),
            (1000, 100, 2.5, 4.0, 2), (1000, 20, 0.5, 3.0, 3), (1000, 10, 2.5, 4.0, 2)]


def fits(problem, objective):
    arrays = stand_in_logits(problem[0], 10, problem[1], temperature=problem[2], scale=problem[3], seed=problem[4])
    logits, labels = arrays["val_logits"], arrays["val_labels"]
    _focal_grid._LAST_SCORES.clear()  # each search scores its own pairs
    refined = FocalTemperatureScaling(objective=objective, search="refine").fit(logits, labels)
    _focal_grid._LAST_SCORES.clear()
    grid = FocalTemperatureScaling(objective=objective).fit(logits, labels)
    return refined, grid


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: "x".join(map(str, p)))
def test_refined_search_is_within_its_tolerance_of_the_whole_grid(problem):
    for objective in ("nll", "ece"):
        refined, grid = fits(problem, objective)
        scored = ~np.isnan(refined.grid_scores_)
        # the pairs it scores get the grid's scores bit for bit; about a third of them
        np.testing.assert_array_equal(refined.grid_scores_[scored], grid.grid_scores_[scored])
        assert 0.1 < scored.mean() < 0.4, scored.mean()
        chosen = refined.grid_scores_[list(refined.gammas_).index(refined.gamma_),
                                      list(refined.temperatures_).index(refined.temperature_)]
        if objective == "nll":  # smooth in T: the grid's own pair
            assert (refined.gamma_, refined.temperature_) == (grid.gamma_, grid.temperature_)
        assert chosen - grid.grid_scores_.min() <= ECE_TOLERANCE if objective == "ece" else chosen == grid.grid_scores_.min()
        best = np.nanargmin(refined.grid_scores_, axis=1)
        np.testing.assert_array_equal(refined.best_temperature_per_gamma_, refined.temperatures_[best])


def test_refined_scores_round_trip_through_strict_json_with_null_where_not_scored():
    arrays = stand_in_logits(500, 10, 5, temperature=2.0)
    fitted = FocalTemperatureScaling(objective="nll", search="refine").fit(arrays["val_logits"], arrays["val_labels"])
    text = json.dumps(fitted.to_dict(), allow_nan=False)
    back = FocalTemperatureScaling.from_dict(json.loads(text))
    np.testing.assert_array_equal(back.grid_scores_, fitted.grid_scores_)  # NaN where not scored
    assert np.isnan(back.grid_scores_).any() and (back.gamma_, back.temperature_) == (fitted.gamma_, fitted.temperature_)
    np.testing.assert_array_equal(back.transform(arrays["test_logits"]), fitted.transform(arrays["test_logits"]))


def test_a_short_or_unsorted_temperature_grid_is_refined_in_sorted_order():
    arrays = stand_in_logits(500, 10, 5, temperature=2.0, seed=3)
    temperatures = np.random.default_rng(0).permutation(np.arange(1, 61) * 0.05)
    for grid in (temperatures, temperatures[:7]):
        _focal_grid._LAST_SCORES.clear()
        refined = FocalTemperatureScaling(temperatures=grid, objective="nll", search="refine").fit(
            arrays["val_logits"], arrays["val_labels"])
        _focal_grid._LAST_SCORES.clear()
        whole = FocalTemperatureScaling(temperatures=grid, objective="nll").fit(arrays["val_logits"], arrays["val_labels"])
        assert (refined.gamma_, refined.temperature_) == (whole.gamma_, whole.temperature_)
    assert not np.isnan(refined.grid_scores_).any()  # 7 temperatures: within one stride of the coarse one


def test_an_unknown_search_is_refused_by_name():
    with pytest.raises(ValueError, match="search must be one of"):
        FocalTemperatureScaling(search="bisect").fit(np.zeros((4, 3)), np.array([0, 1, 2, 0]))


def test_the_command_refines_and_the_workflow_scores_the_whole_grid():
    assert CALIBRATORS["fts_ece"]["search"] == CALIBRATORS["fts_nll"]["search"] == "refine"
    workflow = catalog.default_calibrators()
    assert "search" not in workflow["fts_ece"] and FocalTemperatureScaling().search == "grid"


def test_a_whole_grids_json_names_no_search_and_reads_back_as_the_whole_grid():
    """The workflow's focal TS (the papers' whole grid) is stored with the parameters it always had."""
    arrays = stand_in_logits(300, 10, 4, temperature=2.0)
    fitted = FocalTemperatureScaling(temperatures=np.arange(1, 41) * 0.1, objective="nll").fit(
        arrays["val_logits"], arrays["val_labels"])
    data = fitted.to_dict()
    assert set(data["params"]) == {"gammas", "temperatures", "objective", "n_bins", "binning", "dtype"}
    back = FocalTemperatureScaling.from_dict(json.loads(json.dumps(data, allow_nan=False)))
    assert back.search == "grid" and back.to_dict() == data
