"""What a claim is tested on: one study's tidy table, read through what its keys mean.

A study table names losses and calibrators by config key (``focal3``, ``ts_ece``); a claim
speaks of "FL with γ = 3" and "after temperature scaling by val ECE". :class:`StudyEvidence`
holds the table and the meaning of each key (the loss's :class:`LossInfo`, the calibrator's
role, the dataset the run stands in for), and gives claims the values they compare, keyed
by paired unit. Runs whose health (the table's ``status`` column) is not "trained" are left
out here, once, and listed so every verdict can say so.

Per-epoch histories and fitted calibrators are read lazily through the ``history`` and
``calibration`` callables (run path -> DataFrame / dict), so tests need no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from focalcal.core.spec_facts import LossInfo
from focalcal.training.health import HEALTHY

UNIT_COLUMNS = ("dataset", "model", "recipe", "seed")  # a paired unit: same data, model, recipe, seed


def unit_label(unit: tuple) -> str:
    dataset, model, recipe, seed = unit
    return f"{dataset}/{model}/{recipe}/seed{seed}"


@dataclass
class StudyEvidence:
    """One study's runs as claims see them.

    ``losses``: loss key -> :class:`LossInfo`; ``roles``: calibrator key -> role
    (:data:`focalcal.catalog.ROLE_LABELS`); ``paper_datasets``: dataset key -> the
    published dataset it is or stands in for ("CIFAR-10", "SVHN", ...; None if none).
    """

    study: str
    paper: str
    table: pd.DataFrame
    losses: dict[str, LossInfo]
    roles: dict[str, str] = field(default_factory=dict)
    paper_datasets: dict[str, str | None] = field(default_factory=dict)
    history: Callable[[str], pd.DataFrame] | None = None
    calibration: Callable[[str], dict] | None = None
    excluded: dict[str, str] = field(default_factory=dict)  # run path -> status, filled by __post_init__

    def __post_init__(self):
        table = self.table
        if "status" in table.columns:
            unhealthy = table[table["status"].fillna(HEALTHY) != HEALTHY]
            for row in unhealthy.drop_duplicates(["dataset", "model", "loss", "recipe", "seed"]).itertuples():
                self.excluded[run_path(row)] = row.status
            table = table[table["status"].fillna(HEALTHY) == HEALTHY]
        self.table = table

    # ------------------------------------------------------------------ lookups
    @property
    def segmentation(self) -> bool:
        return "class" in self.table.columns

    def loss_keys(self, accept: Callable[[LossInfo], bool]) -> list[str]:
        """Loss keys of the study's healthy runs whose meaning passes ``accept``, in table order."""
        present = dict.fromkeys(self.table["loss"].astype(str))
        return [key for key in present if key in self.losses and accept(self.losses[key])]

    def calibrator(self, *roles: str) -> str | None:
        """The first calibrator key playing one of ``roles`` (in the order given), or None."""
        for role in roles:
            for key, found in self.roles.items():
                if found == role and (self.table.empty or "calibrator" not in self.table or
                                      (self.table["calibrator"] == key).any()):
                    return key
        return None

    def values(self, loss: str, metric: str, calibrator: str | None = None, bins=None, cls: str | None = None,
               datasets: set[str] | None = None) -> pd.Series:
        """One value per paired unit (index: :data:`UNIT_COLUMNS`) of ``loss`` for ``metric``."""
        rows = self.table[(self.table["loss"] == loss) & (self.table["metric"] == metric)]
        if calibrator is not None:
            rows = rows[rows["calibrator"] == calibrator]
        if bins is not None and "bins" in rows:
            rows = rows[rows["bins"] == bins]
        if cls is not None:
            rows = rows[rows["class"].astype(str) == str(cls)]
        if datasets is not None:
            rows = rows[rows["dataset"].isin(datasets)]
        return rows.groupby(list(UNIT_COLUMNS))["value"].mean()

    def runs(self, loss: str) -> list[tuple[tuple, str]]:
        """(unit, run path) of each healthy run of ``loss``."""
        rows = self.table[self.table["loss"] == loss].drop_duplicates(list(UNIT_COLUMNS))
        return [(tuple(getattr(row, c) for c in UNIT_COLUMNS), run_path(row)) for row in rows.itertuples()]

    def datasets_standing_for(self, *paper_datasets: str) -> set[str]:
        return {key for key, name in self.paper_datasets.items() if name in paper_datasets}

    def exclusion_note(self) -> str:
        """Each run left out, with its health status and the rule that flagged it."""
        if not self.excluded:
            return ""
        from focalcal.training.health import status_rules

        rules = status_rules()
        listed = "; ".join(f"{path} ({status}: {rules.get(status, 'not trained')})"
                           for path, status in sorted(self.excluded.items()))
        return f"left out {len(self.excluded)} unhealthy run(s): {listed}"


def run_path(row) -> str:
    return f"{row.dataset}/{row.model}/{row.loss}/{row.recipe}/seed{row.seed}"
