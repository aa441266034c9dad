"""Measured figures live in ``bench/``, not in the code's comments.

A timing written beside the code (``~3 s of CPU``, ``bench compare: 22 -> 16 s``, ``~18 % less
CPU``) goes stale the day the code or the machine changes, and nothing re-measures it. A
comment or docstring in ``src/`` or ``workflow/`` gives the reason alone and names the bench
that measures it (``python -m bench <name>``, bench/README.md), whose recorded results carry
their machine, date and commit.

What reads as a measured figure, in a comment (``#``) or a docstring:

- an approximate duration: ``~1 s``, ``about 4 s``, ``≈ 20 ms``;
- a before/after: ``22 -> 16 s``, ``0.4 → 0.3 ms``;
- a CPU cost: ``1.4 s of CPU``, ``3 s CPU``, ``0.3 s of 2.8 s``;
- a relative cost or speed-up: ``18 % less CPU``, ``2-4x faster``, ``10× slower``;
- any duration on a line that says ``measured`` or ``bench``.

A setting or a rule stated in seconds (``every 10 minutes``, Snakemake's sampling cadence), a
format example in double backticks (````10 s````) and a paper's published figure (a line
citing ``et al.``) are not measurements of this code.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

UNIT = r"(?:s|ms|µs|us|sec|secs|seconds?|min|minutes?|h|hours?)\b"
NUMBER = r"\d[\d.,]*"
MEASURED = re.compile(
    rf"(?:~|≈|\babout |\broughly |\baround |\bsome )\s?{NUMBER}\s?{UNIT}"  # ~1 s, about 4 s
    rf"|{NUMBER}\s?(?:->|→)\s?{NUMBER}\s?(?:{UNIT}|%)"  # 22 -> 16 s
    rf"|{NUMBER}\s?(?:s|ms|seconds?) (?:of (?:CPU|{NUMBER})|CPU\b)"  # 1.4 s of CPU, 0.3 s of 2.8 s
    r"|\d+\s?% (?:less|more|fewer) (?:CPU|time|wall)"  # 18 % less CPU
    r"|\d[\d.-]*\s?[x×] (?:faster|slower)",  # 2-4x faster, 10× slower
    re.IGNORECASE,
)
DURATION = re.compile(rf"(?<![\w.-]){NUMBER}\s{UNIT}")
SAYS_MEASURED = re.compile(r"\bmeasured\b|\bbench(?:mark)?s?\b", re.IGNORECASE)
EXAMPLE = re.compile(r"``[^`]*``")
CITED = re.compile(r"\bet al\.")


def comment_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every comment and docstring line of a Python file, or of every
    ``#`` comment of a Snakemake file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return [(number, line[line.index("#"):]) for number, line in enumerate(text.splitlines(), 1) if "#" in line]
    lines = [(token.start[0], token.string) for token in tokenize.generate_tokens(io.StringIO(text).readline)
             if token.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        for statement in body if isinstance(body, list) else []:
            if (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
                    and isinstance(statement.value.value, str)):
                lines += [(statement.lineno + offset, line)
                          for offset, line in enumerate(statement.value.value.splitlines())]
    return lines


def measured_figures(line: str) -> list[str]:
    """The measured figures a comment line states (see the module's docstring)."""
    if CITED.search(line):
        return []
    line = EXAMPLE.sub("", line)
    found = [match.group(0) for match in MEASURED.finditer(line)]
    if SAYS_MEASURED.search(line):
        found += [match.group(0) for match in DURATION.finditer(line)]
    return found


def sources() -> list[Path]:
    return sorted(path for folder in ("src", "workflow") for path in (ROOT / folder).rglob("*")
                  if path.is_file() and (path.suffix in (".py", ".smk") or path.name == "Snakefile"))


def test_the_pattern_reads_measured_figures_and_leaves_settings():
    assert measured_figures("# importing sklearn costs ~1 s per job")
    assert measured_figures("# cost more CPU than they save (bench compare: 22 -> 16 s).")
    assert measured_figures("so that the fit imports no torch (~3 s of CPU, most of a")
    assert measured_figures("costs a torch job about 1.4 s of CPU, a fifth of a small run")
    assert measured_figures("its training steps take ~18 % less CPU")
    assert measured_figures("# a matrix-vector product is 2-4x faster than sum(axis=1)")
    assert measured_figures("# the fit, measured at 2.8 s on 100 classes")
    assert not measured_figures("#: CPU every 0.5 s for its first 15 s, then every 30 s")
    assert not measured_figures("# the last 5 checkpoints, written every 10 minutes")
    assert not measured_figures("a figure with its unit: ``1.46×``, ``10 s``;")
    assert not measured_figures('#: Vaswani et al. 2017: "each training step took about 0.4 seconds"')
    assert not measured_figures("labels: Integer array (N,) of 0s and 1s.")
    assert not measured_figures("FCN-8s starts from FCN-32s behaviour")
    assert not measured_figures("# the reason, measured by python -m bench compare (bench/README.md)")


def test_no_comment_in_the_code_states_a_measured_figure():
    found = [f"{path.relative_to(ROOT)}:{number}: {figure!r} in {line.strip()!r}"
             for path in sources() for number, line in comment_lines(path) for figure in measured_figures(line)]
    assert not found, ("comments that state a measured figure: give the reason alone and point to the bench "
                       "that measures it (python -m bench <name>, bench/README.md):\n" + "\n".join(found))
