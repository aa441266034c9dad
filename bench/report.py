"""The benchmarks' results page: ``python -m bench report`` writes bench/RESULTS.md from the
recorded results under bench/results/.

Each ``bench/results/NN_<topic>.yaml`` holds one benchmark's recorded results, in the order of
its number: ``title`` (the page's section), ``run`` (the command that measures them, where one
does) and ``records``, each a ``heading`` (None for the section's opening), the ``machines``,
``dates`` and ``commits`` its figures name, and its ``text`` (Markdown). A new measurement is a
record added there; the page is then written again, never edited by hand
(tests/test_bench_report.py holds the committed page equal to :func:`render`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
PAGE = BENCH / "RESULTS.md"

HEADER = """# Benchmark results

<!-- Written by `python -m bench report` from bench/results/*.yaml: edit those, then run it. -->

The figures each benchmark recorded, with the machines, dates and commits they name. What each
benchmark measures, how to run it and how to read its ratios: bench/README.md, which also
describes the machines. A figure whose machine is not named was measured on the AVX-512 machine.
"""


def topics() -> list[dict]:
    """The recorded results, one mapping per ``bench/results/*.yaml``, in their ``order``."""
    loaded = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(RESULTS.glob("*.yaml"))]
    return sorted(loaded, key=lambda topic: topic["order"])


def _provenance(record: dict) -> str:
    parts = [f"machines: {', '.join(record['machines'])}"]
    if record["dates"]:
        parts.append(f"dates: {', '.join(record['dates'])}")
    if record["commits"]:
        parts.append(f"commits: {', '.join(record['commits'])}")
    return "*" + "; ".join(parts) + "*"


def render() -> str:
    """bench/RESULTS.md's text."""
    blocks = [HEADER]
    for topic in topics():
        blocks.append(f"## {topic['title']}\n")
        if topic.get("run"):
            blocks.append(f"Measured by `{topic['run']}`.\n")
        for record in topic["records"]:
            if record["heading"]:
                blocks.append(f"### {record['heading']}\n")
            if record["text"]:
                blocks.append(_provenance(record) + "\n")
                blocks.append(record["text"] + "\n")
    return "\n".join(blocks)


def main() -> None:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(BENCH.parent)}")


if __name__ == "__main__":
    main()
