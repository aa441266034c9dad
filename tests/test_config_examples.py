"""config/examples/every_claim_3_seeds.yaml: an overlay on the default config that gives every
claim at least 3 seeds, and the overlay mechanism it uses (``replicates``, notes removed with null,
files merged as Snakemake merges them)."""

from __future__ import annotations

import copy
import re

import pytest
from snakemake.utils import update_config
from test_config_entries import ROOT, SCHEMA

from focalcal.claims import CLAIMS
from focalcal.pipeline import (
    ConfigError,
    build_plan,
    check_entries,
    load_config_file,
    load_config_files,
    validate_config,
)
from focalcal.pipeline.config import OVERLAID

EXAMPLE = ROOT / "config" / "examples" / "every_claim_3_seeds.yaml"
DEFAULT = ROOT / "config" / "config.yaml"
TABLE_ONLY_LOSSES = {"flsc531", "flsc532", "flsd532"}  # mukhoti2020 table rows no claim compares


@pytest.fixture(scope="module")
def configs() -> tuple[dict, dict]:
    """(default + overlay, validated; the default alone, validated)."""
    merged = validate_config(load_config_files([DEFAULT, EXAMPLE]), SCHEMA)
    return merged, validate_config(load_config_file(DEFAULT), SCHEMA)


def _without_replicates(grid: dict) -> dict:
    return {key: value for key, value in grid.items() if key not in ("seeds", "folds", "mirrors")}


def test_the_overlay_holds_only_what_it_changes():
    overlay = load_config_file(EXAMPLE)
    assert set(overlay) <= {*OVERLAID, "studies"}
    assert all(set(study) == {"mirrors"} for study in overlay["studies"].values())
    default = load_config_file(DEFAULT)
    for study, grids in overlay["replicates"].items():
        named = {grid.get("name"): grid for grid in default["studies"][study]["grids"]}
        for name, change in grids.items():
            assert any(named[name].get(key) != value for key, value in change.items()), (study, name)


def test_merging_equals_snakemakes_own_merge():
    expected = copy.deepcopy(load_config_file(DEFAULT))
    update_config(expected, load_config_file(EXAMPLE))
    assert load_config_files([DEFAULT, EXAMPLE]) == expected


def test_the_grids_differ_from_the_defaults_only_in_seeds_and_folds(configs):
    merged, default = configs
    assert list(merged["studies"]) == list(default["studies"])
    changed = 0
    for key, study in default["studies"].items():
        mine = merged["studies"][key]
        assert {k: v for k, v in mine.items() if k not in ("grids", "mirrors")} == \
               {k: v for k, v in study.items() if k not in ("grids", "mirrors")}
        assert [_without_replicates(grid) for grid in mine["grids"]] == \
               [_without_replicates(grid) for grid in study["grids"]], key
        changed += sum(a != b for a, b in zip(mine["grids"], study["grids"]))
    assert changed == sum(len(grids) for grids in load_config_file(EXAMPLE)["replicates"].values())
    for table in ("datasets", "models", "losses", "recipes", "calibrators", "training"):
        assert merged[table] == default[table]


def test_every_grid_a_claim_compares_has_at_least_three_seeds_and_more_than_the_default(configs):
    merged, default = configs
    raised = 0
    for key, study in merged["studies"].items():
        for grid, base in zip(study["grids"], default["studies"][key]["grids"]):
            replicates = grid["folds"] if "folds" in grid else len(grid["seeds"])
            base_replicates = base["folds"] if "folds" in base else len(base["seeds"])
            assert replicates >= base_replicates
            raised += replicates > base_replicates
            if not set(grid["losses"]) <= TABLE_ONLY_LOSSES:
                assert replicates >= 3, (key, grid["losses"])
    assert raised >= 8


def test_it_passes_the_workflows_checks_and_plans_the_runs_its_header_states(configs):
    merged, default = configs
    check_entries(merged)
    trained = [run for run in build_plan(merged).runs.values() if not run.imported]
    stated = re.search(r"plans ([\d,]+) training runs", EXAMPLE.read_text())
    assert stated, "the overlay's header states how many training runs it plans"
    assert len(trained) == int(stated.group(1).replace(",", ""))
    assert len(trained) > len([run for run in build_plan(default).runs.values() if not run.imported])


def test_its_notes_name_known_claims_and_null_removes_a_default_note(configs):
    merged, default = configs
    known = {claim.key for claims in CLAIMS.values() for claim in claims}
    notes = merged["report"]["claim_notes"]
    assert notes and set(notes) <= known
    removed = {key for key, text in load_config_file(EXAMPLE)["report"]["claim_notes"].items() if text is None}
    assert removed and removed <= set(default["report"]["claim_notes"])
    assert not removed & set(notes)


# ---------------------------------------------------------------- the replicates overlay


def _with_replicates(replicates: dict) -> dict:
    config = copy.deepcopy(load_config_file(DEFAULT))
    config["replicates"] = replicates
    return config


def test_replicates_give_a_named_grid_its_seeds_and_folds():
    config = validate_config(_with_replicates({"mukhoti2020": {"sst": {"seeds": [4, 5]}},
                                               "hossain2021": {"segmentation": {"folds": 4}}}), SCHEMA)
    sst = next(grid for grid in config["studies"]["mukhoti2020"]["grids"] if grid.get("name") == "sst")
    assert sst["seeds"] == [4, 5]
    assert config["studies"]["hossain2021"]["grids"][0]["folds"] == 4
    runs = build_plan(config).runs.values()
    assert {run.seed for run in runs if run.model == "tree_lstm_50"} == {4, 5}
    assert {run.seed for run in runs if run.n_folds} == {0, 1, 2, 3}


@pytest.mark.parametrize(("replicates", "message"), [
    ({"nope": {"sst": {"seeds": [0]}}}, "replicates.nope: unknown studies key"),
    ({"mukhoti2020": {"ssst": {"seeds": [0]}}}, "replicates.mukhoti2020.ssst: studies.mukhoti2020 has no grid named"),
    ({"mukhoti2020": {"sst": {"folds": 3}}}, "replicates.mukhoti2020.sst: the grid runs seeds, so give seeds, not folds"),
    ({"hossain2021": {"segmentation": {"seeds": [0]}}}, "the grid runs folds, so give folds, not seeds"),
])
def test_a_replicate_that_names_nothing_or_the_wrong_kind_is_refused(replicates, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        validate_config(_with_replicates(replicates), SCHEMA)


def test_two_grids_of_one_study_may_not_share_a_name():
    config = copy.deepcopy(load_config_file(DEFAULT))
    grids = config["studies"]["mukhoti2020"]["grids"]
    grids[1]["name"] = grids[0]["name"]
    with pytest.raises(ConfigError, match=re.escape("studies.mukhoti2020.grids: two grids are named 'claimed_losses'")):
        validate_config(config, SCHEMA)


def test_an_overlay_still_cannot_redefine_a_table_entry(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("recipes:\n  small_40: {epochs: 41, batch_size: 64, optimizer: {name: sgd, lr: 0.1}}\n"
                       "studies:\n  mukhoti2020: {paper: komisarenko2024}\n")
    with pytest.raises(ConfigError) as error:
        load_config_files([DEFAULT, overlay])
    assert "recipes.small_40" in str(error.value)
    assert "studies.mukhoti2020.paper" in str(error.value)
