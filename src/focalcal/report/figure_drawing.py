"""Draw one planned figure: the theory registry and the dispatch to the experiment figures.

Theory figures are exact (from :mod:`focalcal.theory`) and need no runs; each paper's
:class:`~focalcal.catalog.TheoryFigure` names its plotting call and its arguments at the paper's
settings (or, with the config's ``report.theory_grid: coarse``, on quick grids for tests).
Experiment figures read run files and study tables (each paper's ``page`` in
:mod:`focalcal.papers`). Plotting modules are imported inside the functions, so importing this
module (at Snakefile parse time) is free.
"""

from __future__ import annotations

from pathlib import Path

from focalcal import catalog
from focalcal.report.targets import THEORY_FIGURES, Artifact


def draw(artifact: Artifact, root: str | Path = "."):
    """The matplotlib Figure of a planned figure artifact; paths are relative to ``root``."""
    if artifact.kind != "figure":
        raise ValueError(f"{artifact.name!r} is a {artifact.kind}, not a figure")
    if artifact.study is None:
        if artifact.builder not in THEORY_FIGURES:
            raise ValueError(f"unknown theory figure {artifact.builder!r}; known: {sorted(THEORY_FIGURES)}")
        figure = THEORY_FIGURES[artifact.builder]
        return figure.drawing()(**figure.arguments(artifact.params.get("grid", "paper")))
    return catalog.paper(artifact.paper).figure_builder(artifact.builder)(artifact.params, Path(root), artifact.study)


def make(artifact: Artifact, output, root: str | Path = ".") -> Path:
    """Draw ``artifact`` and save it as PNG at ``output``."""
    from focalcal.plots import save

    return save(draw(artifact, root), output)
