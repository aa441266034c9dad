"""MkDocs hook: KaTeX renders the pages' and docstrings' maths, from files inside the site.

`pymdownx.arithmatex` (generic) wraps each `$...$` and `$$...$$` in a `.arithmatex` element; KaTeX,
installed from the npm registry at the version docs/package-lock.json pins (`npm ci --prefix docs`),
typesets them in the browser. Its script, stylesheet and fonts are copied into site/assets/katex/,
so the maths renders with no network and with the site opened from disk (file://), where a CDN
would leave the raw LaTeX on an offline machine.

After the build, every formula is typeset once more with the same KaTeX under Node.js: one that
KaTeX cannot parse is a warning naming its page (so `mkdocs build --strict` fails), where the
browser would show it in red.
"""

from __future__ import annotations

import html
import json
import logging
import re
import shutil
import subprocess
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

KATEX_DIST = Path(__file__).resolve().parents[1] / "node_modules" / "katex" / "dist"
INSTALL_COMMAND = "npm ci --prefix docs"
SITE_FOLDER = "assets/katex"
SCRIPTS = ("katex.min.js", "katex-init.js")
MATHS = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.DOTALL)
log = logging.getLogger("mkdocs.hooks.katex")  # under "mkdocs": --strict counts its warnings
formulas: list[tuple[str, str, bool]] = []  # (page, LaTeX, display) of this build

# Reads [[page, tex, display], ...] on stdin; prints [[page, tex, error], ...] for those KaTeX refuses.
CHECK_SCRIPT = """
const katex = require("katex");
const items = JSON.parse(require("fs").readFileSync(0, "utf8"));
const failures = [];
for (const [page, tex, display] of items) {
  try { katex.renderToString(tex, {displayMode: display, throwOnError: true}); }
  catch (error) { failures.push([page, tex, error.message]); }
}
process.stdout.write(JSON.stringify(failures));
"""
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


def on_pre_build(config) -> None:
    formulas.clear()  # `mkdocs serve` rebuilds in the same process


def on_page_content(html_text: str, page, **_) -> str:
    for _tag, body in MATHS.findall(html_text):
        tex = html.unescape(body).strip()
        formulas.append((page.file.src_uri, tex[2:-2], tex.startswith("\\[")))
    return html_text


def on_post_build(config) -> None:
    if not formulas:
        return
    node = shutil.which("node")
    if node is None:
        log.info("katex: no node on PATH, so the maths is not checked before the browser typesets it")
        return
    result = subprocess.run([node, "-e", CHECK_SCRIPT], input=json.dumps(formulas), capture_output=True, text=True,
                            cwd=KATEX_DIST.parents[2], check=False)
    if result.returncode != 0:
        log.warning(f"katex: checking the maths failed: {result.stderr.strip()}")
        return
    for page, tex, error in json.loads(result.stdout):
        log.warning(f"katex: {page}: KaTeX cannot typeset ${tex}$: {error}")
