"""What a paper package declares: :class:`Paper` and its :class:`TheoryFigure` entries.

Declaring them imports nothing heavy, so the workflow reads every paper at parse time; the
parts that need pandas or matplotlib (claims, page, theory drawings) load on first use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType

PACKAGE = "focalcal.papers"


@dataclass(frozen=True)
class TheoryFigure:
    """A figure of a paper's theory, exact and run-free: ``draw`` names the function of the
    paper's ``theory`` module that draws it, with ``options`` at the paper's grid; ``coarse``
    replaces some of them for config ``report.theory_grid: coarse`` (quick grids for tests and
    previews)."""

    paper: str
    title: str
    draw: str
    options: dict = field(default_factory=dict)
    coarse: dict = field(default_factory=dict)

    def arguments(self, grid: str) -> dict:
        return {**self.options, **(self.coarse if grid == "coarse" else {})}

    def drawing(self):
        """The plotting function (imported on first use: it needs matplotlib)."""
        return getattr(import_module(f"{PACKAGE}.{self.paper}.theory_figures"), self.draw)


@dataclass(frozen=True)
class Paper:
    """One paper as the workflow and the report see it.

    ``key``: its package name, the ``paper`` a study names. ``title``: the title of its report
    page. ``order``: where its page sits among the report's pages (ascending). ``theory``:
    name -> :class:`TheoryFigure`, each name starting with the key. ``needs_study_table``:
    whether its page shows only what a study's calibration table holds (a study that
    calibrates no run then plans nothing); False for a paper whose runs are scored without
    calibrating (segmentation). ``reference_model``: the published model a run on a model the
    paper does not use is compared with (:func:`focalcal.naming.paper_setting`); None: the
    data set alone.

    Its package's modules hold the rest: ``claims`` (``CLAIMS``, optional), ``page``
    (``SUMMARY``, ``PUBLISHED_SHOWN``, ``plan(study)``, ``TABLE_BUILDERS``,
    ``FIGURE_BUILDERS``), ``figures`` (the drawing of its figures from runs), ``theory``
    (the drawing of its theory figures) and ``published/`` (its published tables, optional).
    """

    key: str
    title: str
    order: int
    theory: dict[str, TheoryFigure] = field(default_factory=dict)
    needs_study_table: bool = True
    reference_model: str | None = None

    def __post_init__(self):
        for name, figure in self.theory.items():
            if not name.startswith(self.key) or figure.paper != self.key:
                raise ValueError(f"paper {self.key!r}: theory figure {name!r} must start with the paper's key and "
                                 f"name it as its paper (it names {figure.paper!r})")

    def part(self, name: str) -> ModuleType:
        """One module of the paper's package (``claims``, ``page``, ``figures``, ``theory``, ``labels``)."""
        return import_module(f"{PACKAGE}.{self.key}.{name}")

    def page(self) -> ModuleType:
        return self.part("page")

    def claims(self) -> list:
        """Its claims (:class:`focalcal.claims.Claim`), none when the package has no ``claims`` module."""
        if find_spec(f"{PACKAGE}.{self.key}.claims") is None:
            return []
        return list(self.part("claims").CLAIMS)
