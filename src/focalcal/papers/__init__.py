"""One package per paper: the code of that paper, reached through its entry in :mod:`focalcal.catalog`.

A paper is declared in ``catalog.PAPERS`` (:class:`~focalcal.catalog.Paper`: key, page title,
place among the report's pages, theory figures, reference model and its package's import
string), torch-free, so the workflow reads every paper at parse time without importing any of
this. ``focalcal/papers/<paper>/`` holds its code, imported only when used:

* ``__init__.py`` — ``PAPER``, its catalog entry, and ``KEY``, its key, for the modules below.
* ``claims.py`` — ``CLAIMS``: what the paper claims, as checks over its studies' tables
  (:mod:`focalcal.claims` judges them). Optional.
* ``page.py`` — its report page: ``SUMMARY`` (the top of the page), ``PUBLISHED_SHOWN``
  (published tables shown in full), ``plan(study)`` (the figures and tables a study supports,
  and notes on what it cannot show), ``TABLE_BUILDERS`` (its
  :class:`~focalcal.report.tables.PaperTable` entries) and ``FIGURE_BUILDERS`` (its
  draw(params, root, study) functions). A planned artifact names its builder by the function's
  name (a table's: its ``build`` function's), looked up among its paper's builders
  (:meth:`~focalcal.catalog.Paper.table_builder`, :meth:`~focalcal.catalog.Paper.figure_builder`).
* ``figures.py`` — the functions that draw its figures from runs' data (a Figure from tables
  and arrays; the page's figure builders read the files and call them). Optional.
* ``theory_figures.py`` — the functions that draw its theory figures (exact, no runs), each
  named by a :class:`~focalcal.catalog.TheoryFigure` of its entry.
* ``labels.py`` — what the paper calls our losses, data sets and models, where it needs more
  than :mod:`focalcal.catalog`'s facts. Optional.
* ``published/`` — its published tables as CSV with a README.md on their provenance
  (:mod:`focalcal.report.published`). Optional.

A new paper is one new package here, its entry in ``catalog.PAPERS`` and a study file that
names it. These packages sit above the rest of the library: shared code reaches a paper only
through its catalog entry, never by importing it or naming its key.
"""
