"""MkDocs hook: a page's pictures are drawn by the page's own code blocks while the site builds.

A fenced ``python`` or ``bash`` block on the line after ``<!-- run -->`` is run when the site
builds; after ``<!-- run: output -->`` its standard output is shown under it too (paths
relative to the working folder). The blocks of a page run in order, in one fresh working
folder: the Python blocks in one interpreter and one namespace (as a notebook's cells), the
shell blocks in ``bash`` with this interpreter's scripts (``focalcal``) first on ``PATH``. A page that names ``pictures/<page>/<file>`` (its
path without ``.md``: ``pictures/quickstart/after.svg``; an ``.svg``, ``.png`` or ``.html``
file, in a Markdown image or an HTML ``src``) gets the file its code wrote as ``<file>`` in that
folder, added to the site at that path. A block that fails, or a named file the code did not
write, fails the build, naming the page.

So the code a reader copies is the code that drew the picture beside it, and no picture is
committed. Pages run side by side, one process each (they share nothing).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RUN = re.compile(r"^<!-- run(?P<output>: output)? -->\n(?P<fence>`{3,})(?P<language>python|bash)[^\n]*\n"
                 r"(?P<code>.*?)\n(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
PICTURE_SUFFIXES = ("svg", "png", "html")
TIMEOUT_S = 300
PARALLEL_PAGES = 2
log = logging.getLogger("mkdocs.hooks.pictures")

# page src_uri -> (the stdout of each runnable block, the files the page names: name -> bytes)
_results: dict[str, tuple[list[str], dict[str, bytes]]] = {}


def _page_key(src_uri: str) -> str:
    return src_uri.removesuffix(".md")


def _named_files(markdown: str, key: str) -> set[str]:
    """The files ``pictures/<key>/...`` a page names."""
    return set(re.findall(rf"pictures/{re.escape(key)}/([\w.\-/]+\.(?:{'|'.join(PICTURE_SUFFIXES)}))", markdown))


def _run_page(src_uri: str, markdown: str) -> tuple[list[str], dict[str, bytes]]:
    """Run the page's blocks in a fresh folder; (each block's stdout, the named files' bytes)."""
    from mkdocs.exceptions import PluginError

    blocks = [{"language": match["language"], "code": match["code"]} for match in RUN.finditer(markdown)]
    with tempfile.TemporaryDirectory(prefix="focalcal-docs-") as root:
        work, job, result = Path(root, "work"), Path(root, "job.json"), Path(root, "result.json")
        work.mkdir()
        job.write_text(json.dumps({"page": src_uri, "blocks": blocks, "result": str(result)}))
        scripts = str(Path(sys.executable).parent)
        env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""), "MPLBACKEND": "Agg"}
        started = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, __file__, str(job)], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as error:
            raise PluginError(f"pictures: {src_uri}'s code blocks ran past {TIMEOUT_S} s") from error
        if done.returncode != 0:
            raise PluginError(f"pictures: a code block of {src_uri} failed:\n{done.stderr.strip()}")
        # the output as a reader's own folder would show it: paths relative to where the code ran
        outputs = json.loads(result.read_text())
        for folder in {str(work.resolve()), str(work)}:
            outputs = [output.replace(folder + os.sep, "") for output in outputs]
        named = _named_files(markdown, _page_key(src_uri))
        missing = sorted(name for name in named if not (work / name).is_file())
        if missing:
            written = sorted(str(path.relative_to(work)) for path in work.rglob("*") if path.is_file())
            raise PluginError(f"pictures: {src_uri} names {missing}, which its code blocks did not write "
                              f"(they wrote {written})")
        files = {name: (work / name).read_bytes() for name in named}
    log.info("pictures: ran %d code block(s) of %s in %.1f s", len(blocks), src_uri, time.perf_counter() - started)
    return outputs, files


def on_files(files, *, config):
    """Run every page's marked blocks, and add the pictures they draw to the site."""
    from mkdocs.structure.files import File

    pages = {file.src_uri: file.content_string for file in files.documentation_pages()}
    pages = {src_uri: text for src_uri, text in pages.items() if RUN.search(text)}
    _results.clear()
    with ThreadPoolExecutor(PARALLEL_PAGES) as pool:
        _results.update(zip(pages, pool.map(_run_page, pages, pages.values())))
    for src_uri, (_, named) in _results.items():
        for name, content in named.items():
            files.append(File.generated(config, f"pictures/{_page_key(src_uri)}/{name}", content=content))
    return files


def on_page_markdown(markdown: str, *, page, **_) -> str:
    """Each ``output`` block's stdout under it."""
    if page.file.src_uri not in _results:
        return markdown
    outputs, _ = _results[page.file.src_uri]
    runs = iter(outputs)

    def with_output(match: re.Match) -> str:
        output = next(runs)
        if not match["output"]:
            return match[0]
        fence = "`" * max(3, len(match["fence"]))
        return f"{match[0]}\n\n{fence}text\n{output.rstrip()}\n{fence}"

    return RUN.sub(with_output, markdown)


# ------------------------------------------------------------------ the page's own process


def _run_blocks(job_path: str) -> int:
    """Run a page's blocks in this folder (the job file lists them); write each block's stdout."""
    job = json.loads(Path(job_path).read_text())
    namespace = {"__name__": "__main__"}
    outputs = []
    for number, block in enumerate(job["blocks"], start=1):
        where = f"{job['page']}, code block {number} ({block['language']})"
        if block["language"] == "python":
            captured = io.StringIO()
            try:
                with contextlib.redirect_stdout(captured):
                    exec(compile(block["code"], f"<{where}>", "exec"), namespace)  # noqa: S102  the page's own code
            except Exception:  # noqa: BLE001  every failure is reported, with where it happened
                print(f"{where}:\n{traceback.format_exc()}", file=sys.stderr)
                return 1
            outputs.append(captured.getvalue())
        else:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]], capture_output=True,
                                  text=True, check=False)
            if done.returncode != 0:
                print(f"{where} exited with {done.returncode}:\n{done.stdout}{done.stderr}", file=sys.stderr)
                return 1
            outputs.append(done.stdout)
    Path(job["result"]).write_text(json.dumps(outputs))
    return 0


if __name__ == "__main__":
    sys.exit(_run_blocks(sys.argv[1]))
