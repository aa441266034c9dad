"""The documentation site's machinery, checked without building it: the CLI reference that
docs/hooks/cli_reference.py renders lists every command and argument of the real parser, the help
texts read as plain text in a terminal, and mkdocs.yml keeps the settings the site needs to work
opened from disk with its maths typeset (KaTeX from docs/package-lock.json, no CDN).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from focalcal.commands.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _load_hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml may name Python objects (`!!python/name:...`); their values do not matter here."""


_IgnoreTags.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


@pytest.fixture(scope="module")
def mkdocs_config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_IgnoreTags)


@pytest.fixture(scope="module")
def cli_reference():
    return _load_hook("cli_reference")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(action.choices)


def _all_help_texts(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.description or ""]
    for action in parser._actions:
        texts.append(action.help or "")
        if isinstance(action, argparse._SubParsersAction):
            texts += [choice.help or "" for choice in action._choices_actions]
            for sub in action.choices.values():
                texts += _all_help_texts(sub)
    return texts


def test_cli_reference_lists_every_command_and_argument_of_the_parser(cli_reference):
    parser = build_parser()
    page = cli_reference.cli_reference(parser)
    commands = _subparsers(parser)
    assert {"calibrate", "train", "export-logits", "plan", "verify", "build-kernels"} <= set(commands)
    for name, sub in commands.items():
        assert f"## `focalcal {name}`" in page
        assert f'href="#focalcal-{name}"' in page  # the commands' table links to the heading
        assert cli_reference._usage(sub) in page
        section = page.split(f"## `focalcal {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings or [action.metavar or action.dest]:
                assert f"<code>{flag}</code>" in section, (name, flag)
            if action.help:
                assert cli_reference._text(action.help, markdown=False) in section, (name, action.dest)
            for choice in action.choices or ():
                assert choice in section, (name, action.dest, choice)
            if action.default not in (None, False, [], argparse.SUPPRESS):
                assert f"<code>{action.default}</code>" in section, (name, action.dest)


def test_cli_reference_escapes_help_text_as_html(cli_reference):
    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command")
    sub = commands.add_parser("go", help="a | b", description="reads <key>.npy; see --fast")
    sub.add_argument("--fast", action="store_true", help="x < y & z")
    page = cli_reference.cli_reference(parser)
    assert "reads &lt;key&gt;.npy; see `--fast`" in page
    assert "x &lt; y &amp; z" in page
    assert "<key>" not in page


def test_help_texts_read_as_plain_text_in_a_terminal():
    parser = build_parser()
    for text in _all_help_texts(parser):
        assert "`" not in text, text  # no RST ``code`` nor markdown `code`: --help prints them as they are
    assert "`" not in parser.format_help()


def test_mkdocs_config_builds_a_site_that_works_opened_from_disk(mkdocs_config):
    assert mkdocs_config["use_directory_urls"] is False  # links are setup.html, not setup/
    assert mkdocs_config["repo_url"] == "https://github.com/focalcal/focalcal"
    plugins = [next(iter(plugin)) if isinstance(plugin, dict) else plugin for plugin in mkdocs_config["plugins"]]
    assert "offline" in plugins  # the search index is bundled, so search works from file://
    assert mkdocs_config["theme"].get("font") is False  # no font CDN


def test_mkdocs_config_typesets_maths_with_the_katex_hook(mkdocs_config):
    extensions = {
        next(iter(extension)) if isinstance(extension, dict) else extension: extension
        for extension in mkdocs_config["markdown_extensions"]
    }
    assert extensions["pymdownx.arithmatex"] == {"pymdownx.arithmatex": {"generic": True}}
    hooks = mkdocs_config["hooks"]
    assert "docs/hooks/offline_assets.py" in hooks and "docs/hooks/cli_reference.py" in hooks
    assert not any(re.match(r"(https?:)?//", path) for path in mkdocs_config.get("extra_javascript", []))


def test_front_end_files_come_from_the_npm_lock_and_stay_out_of_git():
    package = json.loads((ROOT / "docs" / "package.json").read_text())
    lock = json.loads((ROOT / "docs" / "package-lock.json").read_text())
    for name in ("katex", "iframe-worker"):
        assert lock["packages"][f"node_modules/{name}"]["version"] == package["dependencies"][name]
    assert "/docs/node_modules/" in (ROOT / ".gitignore").read_text().splitlines()
    assert _load_hook("offline_assets").INSTALL_COMMAND == "npm ci --prefix docs"


def test_no_script_comes_from_a_cdn():
    """Material's offline plugin names iframe-worker on a CDN unless the site's own copy is in extra.polyfills."""
    hook = _load_hook("offline_assets")

    class Config(dict):
        __getattr__ = dict.__getitem__

    config = Config(extra_css=[], extra_javascript=[], extra={"polyfills": ["https://unpkg.com/iframe-worker/shim"]})
    hook.on_config(config)
    assert config.extra["polyfills"] == [hook.IFRAME_WORKER_SITE_PATH]
    for url in config.extra_css + config.extra_javascript + config.extra["polyfills"]:
        assert not re.match(r"(https?:)?//", url), url


def test_source_links_point_at_the_repository(mkdocs_config):
    (mkdocstrings,) = [plugin["mkdocstrings"] for plugin in mkdocs_config["plugins"]
                       if isinstance(plugin, dict) and "mkdocstrings" in plugin]
    options = mkdocstrings["handlers"]["python"]["options"]
    assert options["extra"]["source_url"] == mkdocs_config["repo_url"] + "/blob/main/src/"
    assert options["show_signature_annotations"] is True
    templates = ROOT / mkdocstrings["custom_templates"] / "python" / "material"
    for kind in ("function", "class", "module", "attribute"):
        assert '{% include "_source_link.html.jinja"' in (templates / f"{kind}.html.jinja").read_text()


def test_cli_page_places_the_reference():
    assert "<!-- focalcal-cli-reference -->" in (ROOT / "docs" / "api" / "cli.md").read_text()


def test_named_tuple_fields_are_listed_where_the_docstring_has_no_attributes_section():
    griffe = pytest.importorskip("griffe")
    extension = _load_hook("griffe_namedtuple_fields")
    code = '''
from typing import NamedTuple

class Bare(NamedTuple):
    """Two numbers."""

    low: float
    high: int

class Described(NamedTuple):
    """One number.

    Attributes:
        value: the number.
    """

    value: float
'''
    extensions = griffe.load_extensions(extension.NamedTupleFields())
    with griffe.temporary_visited_module(code, extensions=extensions, docstring_parser="google") as module:
        (section,) = [section for section in module["Bare"].docstring.parsed if section.kind.value == "attributes"]
        assert [(field.name, str(field.annotation)) for field in section.value] == [("low", "float"), ("high", "int")]
        (section,) = [section for section in module["Described"].docstring.parsed if section.kind.value == "attributes"]
        assert [(field.name, field.description) for field in section.value] == [("value", "the number.")]
