"""Input checks for the tables the figures read (history.csv, tidy metric tables)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from focalcal.files.artefacts import read_csv


def as_frame(table, name: str) -> pd.DataFrame:
    """A DataFrame from a DataFrame or a CSV path; anything else is a ValueError naming ``name``."""
    if isinstance(table, pd.DataFrame):
        return table
    if isinstance(table, (str, Path)):
        path = Path(table)
        if not path.is_file():
            raise ValueError(f"{name}: no such CSV file {str(path)!r}")
        return read_csv(path)
    raise ValueError(f"{name} must be a pandas DataFrame or a CSV path, got {type(table).__name__}")


def require_columns(frame: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; it has {list(frame.columns)}")
    if frame.empty:
        raise ValueError(f"{name} has no rows")
