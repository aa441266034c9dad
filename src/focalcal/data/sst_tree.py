"""The parse tree both SST sources give: :mod:`focalcal.data.sst` reads it from the PTB trees,
:mod:`focalcal.data.sst_dictionary` from the released parent pointers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """A parsed tree node: its PTB label and either a word (leaf) or two children."""

    label: int
    word: str | None = None
    left: Node | None = None
    right: Node | None = None
