"""The papers' published numbers, shipped as package data of each paper package
(``focalcal/papers/<paper>/published/<paper>_<table>.csv``).

The CSVs were transcribed from the papers (each folder's ``README.md`` gives columns, units
and the few cells rebuilt from garbled extractions; ``published/README.md`` here the
conventions they share). The report puts them beside ours; nothing here is used to compute a
result.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import pandas as pd

from focalcal.catalog import PAPERS

FOLDER = "published"


def _folders() -> list:
    """The ``published/`` folder of every paper package that has one, page by page."""
    folders = [resources.files(paper.package) / FOLDER for paper in PAPERS.values()]
    return [folder for folder in folders if folder.is_dir()]


@cache
def _files() -> dict:
    return {entry.name[:-4]: entry for folder in _folders() for entry in folder.iterdir() if entry.name.endswith(".csv")}


def available() -> list[str]:
    """Names of the published tables, e.g. ``mukhoti2020_table1``."""
    return sorted(_files())


@cache
def _read(name: str) -> pd.DataFrame:
    with resources.as_file(_files()[name]) as local:
        return pd.read_csv(local, keep_default_na=True)


def load(name: str) -> pd.DataFrame:
    """One published table as a DataFrame (a fresh copy; empty cells are NaN)."""
    if not isinstance(name, str) or name not in _files():
        raise ValueError(f"no published table {name!r}; available: {available()}")
    return _read(name).copy()


def readme() -> str:
    """The provenance notes that come with the tables (markdown): the shared conventions, then
    each paper's."""
    texts = [(resources.files("focalcal.report") / FOLDER / "README.md").read_text(encoding="utf-8")]
    texts += [(folder / "README.md").read_text(encoding="utf-8") for folder in _folders()
              if (folder / "README.md").is_file()]
    return "\n".join(texts)
