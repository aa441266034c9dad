"""config/examples/every_claim_3_seeds.yaml: the default config with every claim at 3 or more seeds.

It is a complete config (the workflow refuses two config files that define one key
differently), so these tests keep it from drifting away from config/config.yaml: the same
tables, the same grids but for seeds and folds, at least 3 seeds wherever a claim compares.
"""

from __future__ import annotations

import copy

import pytest
from test_config_entries import ROOT, SCHEMA

from focalcal.claims import CLAIMS
from focalcal.pipeline import build_plan, check_entries, load_config_file, validate_config

EXAMPLE = ROOT / "config" / "examples" / "every_claim_3_seeds.yaml"
DEFAULT = ROOT / "config" / "config.yaml"
TABLE_ONLY_LOSSES = {"flsc531", "flsc532", "flsd532"}  # mukhoti2020 table rows no claim compares


@pytest.fixture(scope="module")
def configs() -> tuple[dict, dict]:
    return load_config_file(EXAMPLE), load_config_file(DEFAULT)


def _without_replicates(grid: dict) -> dict:
    return {key: value for key, value in grid.items() if key not in ("seeds", "folds", "mirrors")}


def test_every_table_and_setting_is_the_defaults(configs):
    example, default = configs
    assert set(example) == set(default)
    for key in set(default) - {"studies", "report"}:
        assert example[key] == default[key], f"{key} differs from config/config.yaml"


def test_the_grids_differ_from_the_defaults_only_in_seeds_and_folds(configs):
    example, default = configs
    assert list(example["studies"]) == list(default["studies"])
    for key, study in default["studies"].items():
        mine = example["studies"][key]
        assert {k: v for k, v in mine.items() if k not in ("grids", "mirrors")} == \
               {k: v for k, v in study.items() if k not in ("grids", "mirrors")}
        assert [_without_replicates(grid) for grid in mine["grids"]] == \
               [_without_replicates(grid) for grid in study["grids"]], key


def test_every_grid_a_claim_compares_has_at_least_three_seeds_and_more_than_the_default(configs):
    example, default = configs
    raised = 0
    for key, study in example["studies"].items():
        for grid, base in zip(study["grids"], default["studies"][key]["grids"]):
            replicates = grid["folds"] if "folds" in grid else len(grid["seeds"])
            base_replicates = base["folds"] if "folds" in base else len(base["seeds"])
            assert replicates >= base_replicates
            raised += replicates > base_replicates
            if not set(grid["losses"]) <= TABLE_ONLY_LOSSES:
                assert replicates >= 3, (key, grid["losses"])
    assert raised >= 8


def test_it_passes_the_workflows_checks_and_plans_its_170_training_runs(configs):
    example, _ = configs
    config = validate_config(copy.deepcopy(example), SCHEMA)
    check_entries(config)
    plan = build_plan(config)
    trained = [run for run in plan.runs.values() if not run.imported]
    assert len(trained) == 170  # the count in the file's header


def test_its_notes_name_known_claims(configs):
    example, _ = configs
    known = {claim.key for claims in CLAIMS.values() for claim in claims}
    notes = example["report"]["claim_notes"]
    assert notes and set(notes) <= known
