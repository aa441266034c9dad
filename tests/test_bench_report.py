"""bench/RESULTS.md is written from the recorded results (``python -m bench report``), and
bench/README.md says how to run every benchmark."""

from __future__ import annotations

import re
from pathlib import Path

from bench import report

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_results_page_is_the_generators_output():
    assert report.PAGE.read_text(encoding="utf-8") == report.render(), (
        "bench/RESULTS.md differs from bench/results/*.yaml: run `python -m bench report`")


def test_every_record_names_its_machines_and_when_it_was_measured():
    machines = {"AVX-512 machine", "AVX2 machine", "Intel Xeon AVX-512 machine", "NVIDIA H200"}
    for topic in report.topics():
        for record in topic["records"]:
            if not record["text"]:
                continue
            where = f"{topic['title']} / {record['heading']}"
            assert record["machines"] and set(record["machines"]) <= machines, where
            assert record["dates"] or record["commits"], f"{where} names neither a date nor a commit"
            for named in record["dates"] + record["commits"]:
                assert named in record["text"], f"{where}: {named} is not in its text"


def test_the_results_keep_their_order_and_commands():
    topics = report.topics()
    orders = [topic["order"] for topic in topics]
    assert len(set(orders)) == len(orders)
    for topic in topics:
        if topic.get("run"):
            assert f"`{topic['run']}`" in topic["title"] or topic["run"] in topic["title"], topic["title"]


def test_the_readme_says_how_to_run_every_benchmark():
    readme = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    headings = "\n".join(line for line in readme.splitlines() if line.startswith("## "))
    topics = sorted(path.stem[len("bench_"):] for path in (ROOT / "bench").glob("bench_*.py"))
    missing = [topic for topic in topics if not re.search(rf"`python -m bench {topic}`", headings)]
    assert not missing, f"bench/README.md has no section headed by `python -m bench <topic>` for {missing}"


def test_python_m_bench_report_writes_the_page(tmp_path, monkeypatch):
    page = tmp_path / "RESULTS.md"
    monkeypatch.setattr(report, "PAGE", page)
    monkeypatch.setattr(report, "BENCH", tmp_path)
    report.main()
    assert page.read_text(encoding="utf-8") == report.render()
