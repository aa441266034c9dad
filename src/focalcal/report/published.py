"""The papers' published numbers, shipped as package data (``focalcal/report/published/``).

The CSVs were transcribed from the papers (see ``published/README.md`` for columns, units
and the few cells rebuilt from garbled extractions). The report puts them beside ours;
nothing here is used to compute a result.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import pandas as pd

PACKAGE = "focalcal.report"
FOLDER = "published"


def available() -> list[str]:
    """Names of the published tables, e.g. ``mukhoti2020_table1``."""
    folder = resources.files(PACKAGE) / FOLDER
    return sorted(entry.name[:-4] for entry in folder.iterdir() if entry.name.endswith(".csv"))


@lru_cache(maxsize=None)
def _read(name: str) -> pd.DataFrame:
    path = resources.files(PACKAGE) / FOLDER / f"{name}.csv"
    with resources.as_file(path) as local:
        return pd.read_csv(local, keep_default_na=True)


def load(name: str) -> pd.DataFrame:
    """One published table as a DataFrame (a fresh copy; empty cells are NaN)."""
    if not isinstance(name, str) or name not in available():
        raise ValueError(f"no published table {name!r}; available: {available()}")
    return _read(name).copy()


def readme() -> str:
    """The provenance notes that come with the tables (markdown)."""
    return (resources.files(PACKAGE) / FOLDER / "README.md").read_text(encoding="utf-8")
