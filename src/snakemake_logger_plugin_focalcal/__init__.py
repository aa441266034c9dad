"""focalcal's check of the config files on Snakemake's command line, run before Snakemake reads them.

Snakemake reads ``--configfile`` files in its command line interface, before any Snakefile, and
merges them with ``snakemake.utils.update_config``, which copies every mapping a YAML alias
stands for: a few hundred bytes of nested mappings built from anchors (``&name``/``*name``) or
merges (``<<: *name``) then cost minutes and gigabytes before the workflow's own check could run.
Snakemake imports every installed logger plugin while it builds its argument parser, which is
before it reads those files; so importing this package checks each file named by
``--configfile``/``--configfiles`` with :func:`focalcal.pipeline.config.load_config_file` (its
size, its values counted on the YAML node graph with every alias expanded, a key given twice)
and ends Snakemake with a line naming a refused file. A file that does not exist or does not
parse is left to Snakemake, which says so itself.

It covers every ``snakemake`` of focalcal's workflow whose environment has focalcal installed
(``make venv``'s ``.venv``, where the workflow runs), whatever the profile. Other workflows run
from the same environment are left alone: the check runs only where the Snakefile Snakemake will
read (``-s``/``--snakefile``, else Snakemake's default places) sits beside focalcal's config
schema. As a logger (``--logger focalcal``) it logs nothing.
"""

from __future__ import annotations

import os
import sys
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase

OPTIONS = ("--configfile", "--configfiles")
SNAKEFILE_OPTIONS = ("-s", "--snakefile")
# Where Snakemake looks for a Snakefile when none is named, in its order.
DEFAULT_SNAKEFILES = ("Snakefile", "snakefile", "workflow/Snakefile", "workflow/snakefile")
# The first lines of focalcal's config schema (workflow/schemas/config.schema.yaml) say whose it is.
SCHEMA_TITLE = "title: focalcal workflow configuration"


def named_config_files(argv: list[str]) -> list[str]:
    """The files ``argv`` gives ``--configfile``/``--configfiles`` (each takes one or more values)."""
    files: list[str] = []
    taking = False
    for argument in argv:
        option, equals, value = argument.partition("=")
        if option in OPTIONS:
            taking = not equals
            files += [value] if equals else []
        elif argument.startswith("-"):
            taking = False
        elif taking:
            files.append(argument)
    return files


def named_snakefile(argv: list[str]) -> str | None:
    """The Snakefile Snakemake will read: the one ``argv`` names, else the first of Snakemake's
    default places that exists; None when there is none."""
    for index, argument in enumerate(argv):
        option, equals, value = argument.partition("=")
        if option in SNAKEFILE_OPTIONS:
            return value if equals else (argv[index + 1] if index + 1 < len(argv) else None)
    return next((path for path in DEFAULT_SNAKEFILES if os.path.isfile(path)), None)


def runs_focalcal_workflow(argv: list[str]) -> bool:
    """Whether that Snakefile is focalcal's workflow: its folder holds focalcal's config schema."""
    snakefile = named_snakefile(argv)
    if snakefile is None:
        return False
    schema = os.path.join(os.path.dirname(os.path.abspath(snakefile)), "schemas", "config.schema.yaml")
    try:
        with open(schema, encoding="utf-8") as handle:
            return SCHEMA_TITLE in handle.read(4096)
    except OSError:
        return False


def refusal(argv: list[str]) -> str | None:
    """The message refusing the first config file of ``argv`` that is out of bounds (one line naming
    the file; a key given twice adds one line per such key); None when none is."""
    try:
        from yaml import YAMLError

        from focalcal.pipeline.config import ConfigError, load_config_file
    except ImportError:  # focalcal without its workflow extra (no yaml): not this workflow's environment
        return None
    for path in named_config_files(argv):
        if not os.path.isfile(path):
            continue
        try:
            load_config_file(path)
        except ConfigError as error:
            return f"focalcal: {error}"
        except (OSError, ValueError, YAMLError):  # unreadable or not YAML: Snakemake names it in its own words
            continue
    return None


def _is_snakemake_command_line() -> bool:
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parent = os.path.basename(os.path.dirname(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    return program.startswith("snakemake") or (program == "__main__.py" and parent == "snakemake")


class LogHandler(LogHandlerBase):
    """A logger that logs nothing: this package is installed for the check above."""

    def emit(self, record: LogRecord) -> None:
        pass

    @property
    def writes_to_stream(self) -> bool:
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False


if _is_snakemake_command_line() and runs_focalcal_workflow(sys.argv[1:]):
    _refused = refusal(sys.argv[1:])
    if _refused is not None:
        print(_refused, file=sys.stderr)
        sys.exit(1)
