"""Check the HTML report in headless Chromium: pages load, images decode, links resolve.

* Links: every ``href``/``src`` of every page that points at a local file must exist
  (``data:``, ``http(s):``, ``mailto:`` and in-page anchors are not files).
* Pages and images: each page is copied to a temporary folder with a ``<base>`` pointing
  back at the report (so its relative links still resolve) and a small script that, once
  the page has loaded, writes every image's natural size and any script error into the
  DOM; ``chromium --headless --dump-dom`` prints that DOM and we read it back.
* A screenshot of the index is saved next to it.

Chromium comes from Debian's ``chromium`` package; :func:`find_chromium` says how to
install it when it is missing. ``python -m focalcal.report.browser results/report`` runs
the whole check and exits non-zero on any failure.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from focalcal.files.artefacts import read_text, written_in_place

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MARKER = "focalcal-browser-check"
NOT_FILES = ("data:", "http:", "https:", "mailto:", "javascript:", "about:")

_PROBE = """<script>
window.__focalcalErrors = [];
window.addEventListener('error', function (event) { window.__focalcalErrors.push(String(event.message)); });
window.addEventListener('load', function () {
  var images = Array.prototype.map.call(document.images, function (image) {
    return {src: image.getAttribute('src') ? image.getAttribute('src').slice(0, 60) : '',
            width: image.naturalWidth, height: image.naturalHeight, complete: image.complete};
  });
  var svgs = Array.prototype.map.call(document.querySelectorAll('svg'), function (svg) {
    var box = svg.getBoundingClientRect();
    return {width: box.width, height: box.height, texts: svg.querySelectorAll('text').length};
  });
  var out = document.createElement('pre');
  out.id = '%s';
  out.textContent = JSON.stringify({title: document.title, images: images, svgs: svgs, errors: window.__focalcalErrors,
                                    scroll_width: document.documentElement.scrollWidth, viewport_width: window.innerWidth});
  document.body.appendChild(out);
});
</script>""" % MARKER  # noqa: UP031  an f-string or .format would need every JavaScript brace doubled


class ChromiumMissing(RuntimeError):
    """No Chromium on PATH."""


def find_chromium() -> str:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumMissing("headless Chromium is needed to check the report: install Debian's package with "
                          "`apt-get update && apt-get install -y chromium` (as root), then re-run")


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def local_links(page: Path) -> list[str]:
    """The href/src values of ``page`` that name local files."""
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return [link for link in parser.links if not link.startswith("#") and not link.lower().startswith(NOT_FILES)]


def broken_links(report_dir: Path) -> list[str]:
    """``page: link`` for every local link of every page in ``report_dir`` that resolves to no file."""
    broken = []
    for page in sorted(Path(report_dir).glob("*.html")):
        for link in local_links(page):
            target = unquote(urlsplit(link).path)
            if not target or not (page.parent / target).exists():
                broken.append(f"{page.name}: {link}")
    return broken


def _chromium_command(chromium: str, profile: str, *args: str) -> list[str]:
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
            "--hide-scrollbars", "--allow-file-access-from-files", f"--user-data-dir={profile}", *args]


def _probed_copy(page: Path, folder: Path) -> Path:
    text = read_text(page)
    base = f'<base href="{page.parent.resolve().as_uri()}/">'
    text, found = re.subn(r"<head[^>]*>", lambda m: m.group(0) + base + _PROBE, text, count=1, flags=re.IGNORECASE)
    if not found:
        raise ValueError(f"{page} has no <head>: not an HTML page")
    copy = folder / page.name
    copy.write_text(text, encoding="utf-8")
    return copy


def inspect_page(page: Path, chromium: str | None = None, timeout: float = 60.0) -> dict:
    """Load ``page`` in headless Chromium; return its title, images (natural sizes), inline SVGs
    (rendered sizes, number of text elements), script errors,
    and its width against the window's (``scroll_width`` > ``viewport_width``: it scrolls sideways)."""
    chromium = chromium or find_chromium()
    with tempfile.TemporaryDirectory(prefix="focalcal-chromium-") as folder:
        copy = _probed_copy(Path(page), Path(folder))
        command = _chromium_command(chromium, f"{folder}/profile", "--virtual-time-budget=10000", "--dump-dom",
                                    copy.as_uri())
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    match = re.search(rf'<pre id="{MARKER}">(.*?)</pre>', result.stdout, flags=re.DOTALL)
    if not match:
        raise ValueError(f"{page}: the page did not finish loading in Chromium (exit {result.returncode}); "
                         f"stderr tail: {result.stderr[-500:]}")
    import html as html_lib

    return json.loads(html_lib.unescape(match.group(1)))


def screenshot(page: Path, output: Path, chromium: str | None = None, width: int = 1280, height: int = 2400,
               timeout: float = 60.0) -> Path:
    """A PNG of ``page`` as Chromium renders it at ``width`` x ``height`` pixels."""
    chromium = chromium or find_chromium()
    output = Path(output).resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="focalcal-chromium-") as folder:
        command = _chromium_command(chromium, f"{folder}/profile", f"--window-size={width},{height}",
                                    "--run-all-compositor-stages-before-draw", "--virtual-time-budget=5000",
                                    f"--screenshot={output}", Path(page).resolve().as_uri())
        with written_in_place(output):
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
            if not output.is_file() or output.stat().st_size == 0:
                raise ValueError(f"Chromium wrote no screenshot of {page} (exit {result.returncode}): "
                                 f"{result.stderr[-500:]}")
    return output


def check_report(report_dir, screenshot_name: str = "index.png") -> dict:
    """Run every check on ``report_dir``; the result lists pages, images and failures."""
    report_dir = Path(report_dir)
    chromium = find_chromium()
    pages = sorted(report_dir.glob("*.html"))
    if not (report_dir / "index.html").is_file():
        raise ValueError(f"{report_dir} has no index.html")
    failures = [f"broken link {link}" for link in broken_links(report_dir)]
    results = {}
    for page in pages:
        try:
            info = inspect_page(page, chromium)
        except (ValueError, subprocess.TimeoutExpired) as error:
            failures.append(str(error))
            continue
        results[page.name] = info
        for image in info["images"]:
            if not image["complete"] or image["width"] <= 0 or image["height"] <= 0:
                failures.append(f"{page.name}: image {image['src']!r} did not decode (natural size "
                                f"{image['width']}x{image['height']})")
        failures += [f"{page.name}: script error {error}" for error in info["errors"]]
        if info["scroll_width"] > info["viewport_width"]:
            failures.append(f"{page.name}: {info['scroll_width']} px wide in a {info['viewport_width']} px window: "
                            "the page scrolls sideways and cuts off its right edge")
    shot = screenshot(report_dir / "index.html", report_dir / screenshot_name, chromium)
    return {"pages": results, "failures": failures, "screenshot": str(shot)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m focalcal.report.browser REPORT_DIR", file=sys.stderr)
        return 2
    try:
        outcome = check_report(argv[0])
    except ChromiumMissing as error:
        print(error, file=sys.stderr)
        return 3
    for name, info in outcome["pages"].items():
        sizes = ", ".join(f"{i['width']}x{i['height']}" for i in info["images"]) or "no images"
        print(f"{name}: loaded, {len(info['images'])} image(s) [{sizes}]")
    print(f"screenshot: {outcome['screenshot']}")
    for failure in outcome["failures"]:
        print(f"FAIL {failure}", file=sys.stderr)
    return 1 if outcome["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
