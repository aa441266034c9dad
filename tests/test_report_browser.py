"""The headless-Chromium report check catches what it must: broken links, images that do not
decode, script errors — and passes a sound report, leaving a screenshot.

Chromium is Debian's ``chromium`` package: installed here when missing if the tests run as
root with CI=true, otherwise the tests fail saying how to install it (never skipped).
"""

from __future__ import annotations

import base64
import io
import re

import pytest
from matplotlib.figure import Figure

from focalcal.report.browser import ChromiumMissing, broken_links, check_report, find_chromium, inspect_page


def ensure_chromium() -> str:
    """Chromium's path. Tests never install it: ``.ci/system_packages.sh`` does, once, before
    the tests start (two xdist workers installing it at once would race for apt's lock)."""
    try:
        return find_chromium()
    except ChromiumMissing as missing:
        pytest.fail(f"{missing}; CI installs it before the tests with .ci/system_packages.sh")


@pytest.fixture(scope="module")
def chromium() -> str:
    return ensure_chromium()


def png_data_uri(width: int = 120, height: int = 80) -> str:
    figure = Figure(figsize=(width / 40, height / 40), dpi=40)
    figure.add_subplot().plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def page(body: str, title: str = "t") -> str:
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>{body}</body></html>"


def test_local_links_that_resolve_to_nothing_are_reported(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(b"x")
    (tmp_path / "index.html").write_text(page(
        '<a href="other.html#part">ok</a><a href="figures/a.png">ok</a><a href="figures/b.png">missing</a>'
        '<a href="https://example.org/x">web</a><a href="#top">anchor</a><img src="data:image/png;base64,AAAA">'
        '<a href="figures/with%20space.png">missing, escaped</a>'))
    (tmp_path / "other.html").write_text(page('<a href="index.html">back</a>'))
    assert broken_links(tmp_path) == ["index.html: figures/b.png", "index.html: figures/with%20space.png"]


def test_chromium_reports_natural_sizes_undecodable_images_and_script_errors(tmp_path, chromium):
    (tmp_path / "p.html").write_text(page(
        f'<img src="{png_data_uri()}"><img src="nothere.png"><img src="data:image/png;base64,bm90IGEgcG5n">'
        "<script>callsSomethingUndefined();</script>", title="probe"))
    info = inspect_page(tmp_path / "p.html", chromium)
    assert info["title"] == "probe"
    sizes = [(image["width"], image["height"]) for image in info["images"]]
    assert sizes == [(120, 80), (0, 0), (0, 0)]
    assert any("callsSomethingUndefined" in error for error in info["errors"])


def test_check_report_passes_a_sound_report_and_fails_a_broken_one(tmp_path, chromium):
    (tmp_path / "index.html").write_text(page('<a href="paper.html">paper</a>'))
    (tmp_path / "paper.html").write_text(page(f'<img src="{png_data_uri()}"><a href="index.html">index</a>'))
    outcome = check_report(tmp_path)
    assert outcome["failures"] == []
    assert set(outcome["pages"]) == {"index.html", "paper.html"}
    screenshot = tmp_path / "index.png"
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 1000

    (tmp_path / "paper.html").write_text(page('<div style="width:3000px">a table too wide for the window</div>'))
    assert any(re.fullmatch(r"paper\.html: 30\d\d px wide in a \d{3,4} px window: the page scrolls sideways.*", failure)
               for failure in check_report(tmp_path)["failures"])

    (tmp_path / "paper.html").write_text(page('<img src="gone.png"><a href="missing.html">x</a>'))
    failures = check_report(tmp_path)["failures"]
    assert "broken link paper.html: gone.png" in failures and "broken link paper.html: missing.html" in failures
    assert any("image 'gone.png' did not decode" in failure for failure in failures)
