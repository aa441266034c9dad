"""The repository speaks of the product, not of how it was made.

Every tracked text file (documents, the documentation site's pages under docs/ and its
mkdocs.yml, configs, source and its comments, tests, notebooks, CI scripts, the Makefile) is scanned for words that belong to a lab diary rather than a manual:

- work stops and their numbers: "stop 26", "stops 23-25", "stop-24", "the stop's", "earlier stops";
- numbered tracker items: "issue 17", "Issue #3", "the issue's floor", "this issue";
- sessions: "this session", except pytest's own vocabulary (``scope="session"``, a
  session-scoped fixture, the test session, once per session);
- the project's history: "previously", "formerly", "no longer", "used to be", "was X, now Y";
- the people who worked on it: "engineer(s)".

A bug in an upstream project is cited by its address (``https://github.com/<owner>/<repo>/issues/<n>``),
which none of these patterns match. This file is not scanned: it has to spell the patterns out.
A file that is not UTF-8 text (an image, an archive) is skipped.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()
# Folders a checkout may hold that are not part of the repository (used without git only).
UNTRACKED = {".git", ".venv", "results", "data", ".snakemake", "__pycache__", ".pytest_cache", ".ruff_cache",
             "build", "dist", ".ipynb_checkpoints", "site"}

DIARY = re.compile(
    r"\bstops?[ -]\d+"  # stop 26, stops 23-25, stop-24
    r"|\bstop's\b|\b(?:earlier|previous|this|next|last) stops?\b"
    r"|\bissues? #?\d+"  # issue 17, Issue #3 (an upstream bug is cited by its URL: .../issues/17)
    r"|\b(?:the|this|that) issue(?:'s)?\b"
    r"|\bsessions?\b"
    r"|\bpreviously\b|\bformerly\b|\bno longer\b|\bused to be\b"
    r"|\bwas\b[^.\n]{0,40}?,? now\b"  # "was X, now Y"
    r"|\bengineers?\b",
    re.IGNORECASE,
)
# pytest's vocabulary and pip's HTTP session (``pip._internal.network.session``, ``session=``),
# removed from a line before it is checked.
PYTEST_SESSION = re.compile(r"""scope\s*=\s*["']session["']|\bsession[- ]scoped?\b|\b(?:pytest|test) session\b"""
                            r"|\bonce per session\b|\bnetwork\.session\b|\bsession=PipSession\(\)", re.IGNORECASE)


def tracked_files() -> list[str]:
    """The repository's files: ``git ls-files``, or, in a copy without git, every file outside
    the folders a run or a virtual environment adds."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [name for name in listed.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        return sorted(path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*")
                      if path.is_file() and not UNTRACKED & set(path.relative_to(ROOT).parts))


def diary_lines(text: str) -> list[tuple[int, str]]:
    """(line number, matched words) for each line of ``text`` that reads as a lab diary."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = DIARY.search(PYTEST_SESSION.sub("", line))
        if match:
            found.append((number, match.group(0)))
    return found


def test_the_patterns_catch_diary_words_and_leave_code_alone():
    diary = ["measured in stop 26 (2026-11-25)", "stops 23-25 kept it", "since stop-24", "the issue's 17 listed claims",
             "Issue 13's budget", "see issue #3", "in this session", "the value previously used",
             "pandas is no longer imported", "the index used to be 1,197 px wide", "was 15 s, now 9 s",
             "four other engineers' jobs", "the machine in earlier stops"]
    for line in diary:
        assert diary_lines(line), line
    code = ['@pytest.fixture(scope="session")', "a session-scoped finished run", "built once per session", "stop = min(start + 4, n)",
            "A diverging run stops, naming where", "history.csv", "betas = 1.0 / temperatures[start:stop]",
            "https://github.com/pytorch/pytorch/issues/12345", "it stops when the gradient is below tol",
            "Nothing was changed; wait for it to finish", "max_iter stops it first",
            "jobs that stop when their Snakemake dies"]
    for line in code:
        assert not diary_lines(line), line


def test_no_tracked_file_reads_as_a_lab_diary():
    files = [name for name in tracked_files() if name != SELF]
    assert len(files) > 100  # the scan saw the repository, not an empty listing
    pages = {name for name in files if name.startswith("docs/") and name.endswith(".md")}
    assert {"README.md", "mkdocs.yml"} <= set(files) and len(pages) >= 15  # the manual: README, guide, API pages
    problems = []
    for name in files:
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        problems += [f"{name}:{number}: {words!r}" for number, words in diary_lines(text)]
    assert not problems, "lab-diary words (say what the product does, not its history):\n" + "\n".join(problems)
