"""System packages are installed once, before the tests, by one script that takes a lock: no
test installs anything, so two xdist workers cannot race for apt's lock."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "system_packages.sh"


SHELL_APT = re.compile(r"^\s*(if\s+)?!?\s*(sudo\s+)?apt(-get)?\s+(install|update)\b")  # a command, not a hint
PYTHON_APT = re.compile(r"""["']apt(-get)?["']\s*,""")  # an argument list: subprocess.run(["apt-get", ...])


def test_only_the_ci_script_runs_apt():
    callers = []
    scripts = [path for path in (ROOT / ".ci").iterdir() if path != SCRIPT] + [ROOT / "Makefile"]
    tests = [path for path in ROOT.glob("tests/**/*.py") if path != Path(__file__)]
    for path, pattern in [*((p, PYTHON_APT) for p in tests),
                          *((p, PYTHON_APT) for p in ROOT.glob("src/**/*.py")), *((p, SHELL_APT) for p in scripts)]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                callers.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert callers == [], "apt is run outside .ci/system_packages.sh:\n" + "\n".join(callers)


def test_the_apt_detector_finds_an_install():
    assert SHELL_APT.search("    apt-get update -qq") and SHELL_APT.search("sudo apt-get install -y chromium")
    assert PYTHON_APT.search('subprocess.run(["apt-get", "install", "-y", "chromium"])')
    assert not SHELL_APT.search("# (.ci/system_packages.sh: chromium; apt-get update first)")


def test_ci_installs_the_packages_before_the_tests():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    installer = next(i for i, line in enumerate(lines) if "system_packages.sh" in line and not line.startswith("#"))
    tests = next(i for i, line in enumerate(lines) if line.strip() == "make test")
    assert installer < tests


def waiting_on(inode: int) -> bool:
    """Whether some process is blocked on a lock of the file with this inode: /proc/locks lists
    each waiter as ``N: -> FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> <start> <end>``."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 6 and fields[1] == "->" and fields[6].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


def test_a_second_caller_waits_for_the_first(tmp_path):
    lock = tmp_path / "packages.lock"
    env = dict(os.environ, FOCALCAL_SYSTEM_PACKAGES="coreutils", FOCALCAL_SYSTEM_PACKAGES_LOCK=str(lock))
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the first caller, still at work
        second = subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        inode = os.fstat(held.fileno()).st_ino
        deadline = time.monotonic() + 30
        while not waiting_on(inode):  # the second caller's flock, queued behind ours (/proc/locks "->")
            assert second.poll() is None, "the second caller went on while the first held the lock"
            assert time.monotonic() < deadline, "the second caller never asked for the lock"
            time.sleep(0.05)
        assert second.poll() is None
    output, _ = second.communicate(timeout=30)
    assert second.returncode == 0 and "coreutils already installed" in output


def test_check_names_what_is_missing():
    env = dict(os.environ, FOCALCAL_SYSTEM_PACKAGES="coreutils focalcal-no-such-package")
    result = subprocess.run(["bash", str(SCRIPT), "--check"], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "missing Debian package(s): focalcal-no-such-package" in result.stderr
    assert "coreutils" not in result.stderr
