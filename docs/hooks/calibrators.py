"""MkDocs hook: the calibrators `focalcal calibrate` offers (docs/own-logits.md), rendered from the catalog at build time.

One row per role the command offers (``Role.cli`` in ``src/focalcal/catalog.py``), in the catalog's
order: the key `--calibrators` takes, its label, when it runs and what fitting it costs. A role
declared in the catalog is on the page without editing it. The page marks the place with
`<!-- focalcal-calibrators -->`.
"""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "<!-- focalcal-calibrators -->"
PAGE = "own-logits.md"


def _ensure_importable() -> None:
    """The hook runs from the checkout; without an installed focalcal, src/ is on the path as mkdocstrings has it."""
    src = Path(__file__).resolve().parents[2] / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))


def when_it_runs(key: str) -> str:
    """When ``focalcal calibrate`` fits the calibrator of role ``key``."""
    from focalcal.commands import calibrator_choice as command

    if key not in command.DEFAULT_CALIBRATORS:
        return "with `--calibrators`"
    if key == command.PSI_KEY:
        return "by default, given the training γ (`--gamma`)"
    if key in command.QUADRATIC_IN_K:
        return f"by default up to {command.MAX_CLASSES_QUADRATIC} classes"
    return "by default"


def calibrators_table() -> str:
    """The Markdown table of the offered calibrators."""
    _ensure_importable()
    from focalcal.commands import calibrator_choice as command

    lines = ["| `--calibrators` | calibrator | runs | cost on N validation rows of K classes |", "|---|---|---|---|"]
    for key in command.CALIBRATORS:
        label = command.LABELS[key].replace("|", "\\|")
        lines.append(f"| `{key}` | {label} | {when_it_runs(key)} | {command.COSTS[key]} |")
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page, **_) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    from mkdocs.exceptions import PluginError  # here, so tests import the renderer without mkdocs

    if MARKER not in markdown:
        raise PluginError(f"docs/hooks/calibrators.py: {PAGE} lacks the line {MARKER} that places the calibrators' table")
    return markdown.replace(MARKER, calibrators_table())
