"""MkDocs hook: the CLI reference (docs/api/cli.md) rendered from `focalcal.commands.cli.build_parser()` at build time.

Every command and option the parser knows is on the page, with its flags, value, default and help, so
the reference cannot drift from what `focalcal --help` prints. The page marks the place with
`<!-- focalcal-cli-reference -->`.
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

MARKER = "<!-- focalcal-cli-reference -->"
PAGE = "api/cli.md"
USAGE_WIDTH = 76  # the usage blocks wrap alike on every machine, whatever the terminal's width
OPTION_MENTION = re.compile(r"(?<![\w`-])(--[a-z][a-z0-9-]*)")


def _ensure_importable() -> None:
    """The hook runs from the checkout; without an installed focalcal, src/ is on the path as mkdocstrings has it."""
    src = Path(__file__).resolve().parents[2] / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))


def _text(text: str | None, *, markdown: bool = True) -> str:
    """A plain-text help string on the page: HTML-escaped, one line, option names shown as code."""
    if not text:
        return ""
    escaped = html.escape(" ".join(text.split()), quote=False)
    if markdown:
        return OPTION_MENTION.sub(r"`\1`", escaped.replace("|", "\\|"))
    return OPTION_MENTION.sub(r"<code>\1</code>", escaped)


def _code(text: str) -> str:
    """Inline code that may break only after a comma (`{pinned,native}`), never at a flag's hyphens."""
    return f"<code>{html.escape(text, quote=False).replace(',', ',<wbr>')}</code>" if text else ""


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser.formatter_class(prog=parser.prog)
    return formatter._expand_help(action) if action.help else ""  # %(default)s etc., as --help prints them


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _value(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """What follows the flag, as --help writes it (`{pinned,native}`, `FILE [FILE ...]`); empty for a switch."""
    if action.nargs == 0:
        return ""
    formatter = parser.formatter_class(prog=parser.prog)
    if action.option_strings:
        metavar = formatter._get_default_metavar_for_optional(action)
    else:
        metavar = formatter._get_default_metavar_for_positional(action)
    return formatter._format_args(action, metavar)


def _default(action: argparse.Action) -> str:
    if action.required:
        return "<em>required</em>"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.default == []:
        return ""
    return _code(str(action.default))


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments in the order --help lists them, positionals first; `-h` left out (every command has it)."""
    actions = [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    return [action for action in actions if not action.option_strings] + [
        action for action in actions if action.option_strings]


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            return [(name, helps.get(name) or "", sub) for name, sub in action.choices.items()]
    return []


def argument_table(parser: argparse.ArgumentParser) -> list[str]:
    """One row per argument: its flags (or a positional's name), the value it takes, its default, its help.

    An HTML table, so the CSS (api-reference.css) can keep flags on one line.
    """
    header = "".join(f"<th>{title}</th>" for title in ("Argument", "Value", "Default", "Description"))
    rows = ['<div class="cli-arguments"><table>', f"<thead><tr>{header}</tr></thead>", "<tbody>"]
    for action in _arguments(parser):
        value = _value(parser, action)
        if action.option_strings:
            names = ", ".join(_code(flag) for flag in action.option_strings)
        else:
            name = action.metavar or action.dest
            names, value = _code(name), ("" if value == name else value)
        rows.append(f"<tr><td>{names}</td><td>{_code(value)}</td><td>{_default(action)}</td>"
                    f"<td>{_text(_help(parser, action), markdown=False)}</td></tr>")
    return [*rows, "</tbody>", "</table></div>"]


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """The markdown of the whole reference: the commands' table, then each command's usage and arguments."""
    lines = [_text(parser.description), "", "```text", _usage(parser), "```", "",
             '<div class="cli-commands"><table>', "<thead><tr><th>Command</th><th>What it does</th></tr></thead>",
             "<tbody>"]
    commands = _subcommands(parser)
    for name, help_text, _ in commands:
        anchor = f"{parser.prog}-{name}"  # the id toc gives the command's heading
        lines.append(f'<tr><td><a href="#{anchor}">{_code(f"{parser.prog} {name}")}</a></td>'
                     f"<td>{_text(help_text, markdown=False)}</td></tr>")
    lines += ["</tbody>", "</table></div>"]
    for name, help_text, sub in commands:
        lines += ["", f"## `{parser.prog} {name}`", "",  # toc's id: {prog}-{name}
                  _text(sub.description or help_text), "", "```text", _usage(sub), "```", ""]
        lines += argument_table(sub)
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page, **_) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    from mkdocs.exceptions import PluginError  # here, so tests import the renderer without mkdocs

    if MARKER not in markdown:
        raise PluginError(f"docs/hooks/cli_reference.py: {PAGE} lacks the line {MARKER} that places the CLI reference")
    _ensure_importable()
    from focalcal.commands.cli import build_parser

    return markdown.replace(MARKER, cli_reference(build_parser()))
