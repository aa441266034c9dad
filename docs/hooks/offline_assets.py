"""MkDocs hook: the site's front-end files come from inside the site, so it works offline and opened from disk.

Two npm packages, at the versions docs/package-lock.json pins (`npm ci --prefix docs` installs them
into the git-ignored docs/node_modules/), are copied into site/assets/:

- KaTeX typesets the maths. `pymdownx.arithmatex` (generic) wraps each `$...$` and `$$...$$` of the
  pages and docstrings in an `.arithmatex` element, which the script below hands to KaTeX. A CDN
  would leave the raw LaTeX on an offline machine.
- iframe-worker lets search run from file://, where a browser refuses to start the search's web
  worker. Material's offline plugin loads it from a CDN unless `extra.polyfills` names a copy.

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

NODE_MODULES = Path(__file__).resolve().parents[1] / "node_modules"
KATEX_DIST = NODE_MODULES / "katex" / "dist"
IFRAME_WORKER_SHIM = NODE_MODULES / "iframe-worker" / "shim" / "index.js"
INSTALL_COMMAND = "npm ci --prefix docs"
KATEX_FOLDER = "assets/katex"
IFRAME_WORKER_SITE_PATH = "assets/javascripts/iframe-worker-shim.js"
MATHS = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.DOTALL)
log = logging.getLogger("mkdocs.hooks.offline_assets")  # under "mkdocs": --strict counts its warnings
formulas: list[tuple[str, str, bool]] = []  # (page, LaTeX, display) of this build

# Each `.arithmatex` element holds `\(...\)` (inline) or `\[...\]` (display); only those are typeset,
# so a dollar sign elsewhere (a shell variable in a code block) stays as written.
KATEX_INIT_SCRIPT = r"""
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

# Reads [[page, tex, display], ...] on stdin; prints [[page, tex, error], ...] for those KaTeX refuses.
KATEX_CHECK_SCRIPT = """
const katex = require("katex");
const items = JSON.parse(require("fs").readFileSync(0, "utf8"));
const failures = [];
for (const [page, tex, display] of items) {
  try { katex.renderToString(tex, {displayMode: display, throwOnError: true}); }
  catch (error) { failures.push([page, tex, error.message]); }
}
process.stdout.write(JSON.stringify(failures));
"""


def on_config(config):
    config.extra_css.append(f"{KATEX_FOLDER}/katex.min.css")
    config.extra_javascript.extend([f"{KATEX_FOLDER}/katex.min.js", f"{KATEX_FOLDER}/katex-init.js"])
    # Whichever runs first, the offline plugin's on_config or this one, only the copy in the site is left.
    polyfills = [url for url in config.extra.get("polyfills", []) if "iframe-worker" not in str(url)]
    config.extra["polyfills"] = [*polyfills, IFRAME_WORKER_SITE_PATH]
    return config


def on_files(files, config):
    from mkdocs.exceptions import PluginError
    from mkdocs.structure.files import File

    missing = [path for path in (KATEX_DIST / "katex.min.js", IFRAME_WORKER_SHIM) if not path.is_file()]
    if missing:
        raise PluginError(f"{missing[0]} is missing: run `{INSTALL_COMMAND}` first")
    for source in [KATEX_DIST / "katex.min.js", KATEX_DIST / "katex.min.css", *sorted((KATEX_DIST / "fonts").iterdir())]:
        relative = source.relative_to(KATEX_DIST).as_posix()
        files.append(File.generated(config, f"{KATEX_FOLDER}/{relative}", abs_src_path=str(source)))
    files.append(File.generated(config, f"{KATEX_FOLDER}/katex-init.js", content=KATEX_INIT_SCRIPT))
    files.append(File.generated(config, IFRAME_WORKER_SITE_PATH, abs_src_path=str(IFRAME_WORKER_SHIM)))
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
        log.info("offline_assets: no node on PATH, so the maths is not checked before the browser typesets it")
        return
    result = subprocess.run([node, "-e", KATEX_CHECK_SCRIPT], input=json.dumps(formulas), capture_output=True,
                            text=True, cwd=NODE_MODULES.parent, check=False)
    if result.returncode != 0:
        log.warning(f"offline_assets: checking the maths with KaTeX failed: {result.stderr.strip()}")
        return
    for page, tex, error in json.loads(result.stdout):
        log.warning(f"offline_assets: {page}: KaTeX cannot typeset ${tex}$: {error}")
