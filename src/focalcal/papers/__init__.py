"""One module per paper of :data:`focalcal.catalog.PAPERS`: what a study of it shows.

Each module holds, for its paper, ``SUMMARY`` (the top of its page: the paper, its claims,
what the page shows), ``PUBLISHED_SHOWN`` (published tables shown in full), ``plan(study)``
(the figures and tables a study supports, and notes on what it cannot show),
``TABLE_BUILDERS`` (builder name -> :class:`~focalcal.report.tables.PaperTable`: build from the
study table, present for reading) and ``FIGURE_BUILDERS`` (builder name -> draw(params, root,
study)). Planned artifacts name their builder; the report's general machinery
(:mod:`focalcal.report.targets`, ``.tables``, ``.figures``) finds it here. Modules load on
first use, so that planning a workflow imports no plotting code.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from focalcal.catalog import PAPERS


def paper_module(paper: str) -> ModuleType:
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; known: {list(PAPERS)}")
    return import_module(f"{__name__}.{paper}")


def _builders(kind: str) -> dict:
    return {name: builder for paper in PAPERS for name, builder in getattr(paper_module(paper), kind).items()}


def table_builder(name: str):
    """The :class:`focalcal.report.tables.PaperTable` of a table builder name."""
    builders = _builders("TABLE_BUILDERS")
    if name not in builders:
        raise ValueError(f"unknown table builder {name!r}; known: {sorted(builders)}")
    return builders[name]


def figure_builder(name: str):
    """draw(params, root, study) of a figure builder name."""
    builders = _builders("FIGURE_BUILDERS")
    if name not in builders:
        raise ValueError(f"unknown figure builder {name!r}; known: {sorted(builders)}")
    return builders[name]
