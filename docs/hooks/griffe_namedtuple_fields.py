"""Griffe extension (mkdocstrings' `extensions` option): every NamedTuple's fields are listed in the API reference.

A NamedTuple's fields are its API, but fields without docstrings are not rendered as members. The
docstring standard lists them in an `Attributes:` section (rendered as a table with their types);
a NamedTuple whose docstring has none gets one naming each field, typed from its annotation.
"""

from __future__ import annotations

import re

import griffe

ATTRIBUTES_SECTION = re.compile(r"^\s*Attributes:\s*$", re.MULTILINE)


def is_named_tuple(cls: griffe.Class) -> bool:
    return any(str(base).rsplit(".", 1)[-1] == "NamedTuple" for base in cls.bases)


def fields(cls: griffe.Class) -> list[str]:
    """The annotated class attributes, in source order: a NamedTuple's fields."""
    return [name for name, member in cls.members.items()
            if not name.startswith("_") and member.is_attribute and member.annotation is not None]


class NamedTupleFields(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        if not is_named_tuple(cls) or cls.docstring is None or ATTRIBUTES_SECTION.search(cls.docstring.value):
            return
        names = fields(cls)
        if names:  # the types come from the annotations, as for any Attributes entry without one
            cls.docstring.value = cls.docstring.value.rstrip() + "\n\nAttributes:\n" + "".join(
                f"    {name}: \n" for name in names)
