"""MkDocs hook: the docstrings' Sphinx roles (:func:`x`, :mod:`x`, ...) shown as the code they name.

mkdocstrings renders a role as its name followed by the code span, ``:func:<code>x</code>``;
the reader needs the code alone.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|obj|exc|py:\w+):(?=<code>)")


def on_page_content(html: str, **_) -> str:
    return ROLE.sub("", html)
