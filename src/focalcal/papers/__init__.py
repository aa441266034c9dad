"""One package per paper: everything of that paper, behind the small :class:`Paper` interface.

``focalcal/papers/<paper>/`` holds

* ``__init__.py`` — ``PAPER``, its :class:`Paper`: key, page title, place among the report's
  pages, theory figures. Torch-free and cheap: the workflow reads it at parse time.
* ``claims.py`` — ``CLAIMS``: what the paper claims, as checks over its studies' tables
  (:mod:`focalcal.claims` judges them). Optional.
* ``page.py`` — its report page: ``SUMMARY`` (the top of the page), ``PUBLISHED_SHOWN``
  (published tables shown in full), ``plan(study)`` (the figures and tables a study supports,
  and notes on what it cannot show), ``TABLE_BUILDERS`` (its
  :class:`~focalcal.report.tables.PaperTable` entries) and ``FIGURE_BUILDERS`` (its
  draw(params, root, study) functions). A planned artifact names its builder by the function's
  name (a table's: its ``build`` function's), looked up among its paper's builders.
* ``figures.py`` — the functions that draw its figures from runs' data (a Figure from tables
  and arrays; the page's figure builders read the files and call them). Optional.
* ``theory_figures.py`` — the functions that draw its theory figures (exact, no runs).
* ``labels.py`` — what the paper calls our losses, data sets and models, where it needs more
  than :mod:`focalcal.catalog`'s facts. Optional.
* ``published/`` — its published tables as CSV with a README.md on their provenance
  (:mod:`focalcal.report.published`). Optional.

The packages are found by listing this folder: a new paper is one new package here plus a
study file that names it. Shared code reaches a paper only through :data:`PAPERS` and the
functions below, never by its key.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from focalcal.papers._paper import Paper, TheoryFigure


def _discover() -> dict[str, Paper]:
    found = []
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        package = import_module(f"{__name__}.{module.name}")
        declared = getattr(package, "PAPER", None)
        if not isinstance(declared, Paper) or declared.key != module.name:
            raise ValueError(f"{package.__file__}: a paper package declares PAPER = Paper({module.name!r}, ...)")
        found.append(declared)
    return {paper.key: paper for paper in sorted(found, key=lambda paper: (paper.order, paper.key))}


PAPERS: dict[str, Paper] = _discover()  # key -> Paper, in the order of the report's pages


def paper(key: str) -> Paper:
    try:
        return PAPERS[key]
    except KeyError:
        raise ValueError(f"unknown paper {key!r}; known: {list(PAPERS)}") from None


def theory_figures() -> dict[str, TheoryFigure]:
    """Every paper's theory figures, name -> :class:`TheoryFigure`, page by page."""
    return {name: figure for entry in PAPERS.values() for name, figure in entry.theory.items()}


def builder_name(builder) -> str:
    """The name an artifact records for its builder: a figure builder's function name, a table
    builder's (a ``PaperTable``) ``build`` function name."""
    return getattr(builder, "build", builder).__name__


def _builder(key: str, kind: str, name: str):
    declared = {builder_name(builder): builder for builder in getattr(paper(key).page(), f"{kind.upper()}_BUILDERS")}
    if name not in declared:
        raise ValueError(f"paper {key!r} has no {kind} builder {name!r}; its {kind} builders: {sorted(declared)}")
    return declared[name]


def table_builder(key: str, name: str):
    """The :class:`focalcal.report.tables.PaperTable` of paper ``key`` named ``name``."""
    return _builder(key, "table", name)


def figure_builder(key: str, name: str):
    """draw(params, root, study) of paper ``key`` named ``name``."""
    return _builder(key, "figure", name)


__all__ = ["PAPERS", "Paper", "TheoryFigure", "builder_name", "figure_builder", "paper", "table_builder",
           "theory_figures"]
