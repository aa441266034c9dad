"""MkDocs hook: KaTeX renders the pages' and docstrings' maths, from files inside the site.

`pymdownx.arithmatex` (generic) wraps each `$...$` and `$$...$$` in a `.arithmatex` element; KaTeX,
installed from the npm registry at the version docs/package-lock.json pins (`npm ci --prefix docs`),
typesets them in the browser. Its script, stylesheet and fonts are copied into site/assets/katex/,
so the maths renders with no network and with the site opened from disk (file://), where a CDN
would leave the raw LaTeX on an offline machine.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

KATEX_DIST = Path(__file__).resolve().parents[1] / "node_modules" / "katex" / "dist"
INSTALL_COMMAND = "npm ci --prefix docs"
SITE_FOLDER = "assets/katex"
SCRIPTS = ("katex.min.js", "katex-init.js")
STYLESHEETS = ("katex.min.css",)

# Each `.arithmatex` element holds `\(...\)` (inline) or `\[...\]` (display); only those are typeset,
# so a dollar sign elsewhere (a shell variable in a code block) stays as written.
INIT_SCRIPT = r"""
(function () {
  function typeset(root) {
    root.querySelectorAll(".arithmatex").forEach(function (element) {
      var text = element.textContent.trim();
      var display = text.startsWith("\\[");
      if (display || text.startsWith("\\(")) text = text.slice(2, -2);
      katex.render(text, element, {displayMode: display, throwOnError: false});
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { typeset(document.body); });
  } else {
    document.addEventListener("DOMContentLoaded", function () { typeset(document.body); });
  }
})();
"""


def on_config(config):
    config.extra_css.extend(f"{SITE_FOLDER}/{name}" for name in STYLESHEETS)
    config.extra_javascript.extend(f"{SITE_FOLDER}/{name}" for name in SCRIPTS)
    return config


def on_files(files: Files, config) -> Files:
    if not (KATEX_DIST / "katex.min.js").is_file():
        raise PluginError(f"KaTeX is not installed in docs/node_modules: run `{INSTALL_COMMAND}` first")
    for source in [KATEX_DIST / "katex.min.js", KATEX_DIST / "katex.min.css", *sorted((KATEX_DIST / "fonts").iterdir())]:
        relative = source.relative_to(KATEX_DIST).as_posix()
        files.append(File.generated(config, f"{SITE_FOLDER}/{relative}", abs_src_path=str(source)))
    files.append(File.generated(config, f"{SITE_FOLDER}/katex-init.js", content=INIT_SCRIPT))
    return files
