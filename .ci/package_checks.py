"""The checks of .ci/package_test.sh, each a subcommand; each prints what it measured and exits
non-zero, naming the culprit, where the package is not what users should get.

  distributions DIST   the wheel and sdist in DIST: version, SPDX licence and its file, ranges
                       (never ==) in Requires-Dist, the extras, the compiled kernels' sources
  lowest EXTRA...      a constraints file pinning the core and EXTRAs' requirements to their
                       declared lower bounds (the "lowest" environment), on stdout
  core                 in a core-only environment: no torch, matplotlib or pandas installed,
                       the core modules import, the library pages' recipes run
  own-logits           with focalcal[plots] (no torch): docs/own-logits.md's quick start, its
                       np.savez block and its `focalcal calibrate` line, writes the report
  plan REPORT          pip's --dry-run --report for the research environment: only focalcal
                       and threadpoolctl may be installed, nothing up- or downgraded
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: The pages whose recipes need only the core install (their ```python blocks run here).
CORE_RECIPES = ("docs/library.md", "docs/quickstart.md")
EXTRAS_ONLY = ("torch", "torchvision", "matplotlib", "pandas", "seaborn", "relplot", "scikit-learn", "sacrebleu")


def fail(message: str) -> None:
    sys.exit(f"package-test: FAILED: {message}")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def version() -> str:
    text = (ROOT / "src" / "focalcal" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, flags=re.MULTILINE).group(1)


def distributions(folder: str) -> None:
    dist = Path(folder)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        fail(f"expected one wheel and one sdist in {dist}, found {[p.name for p in dist.iterdir()]}")
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(wheel.read(metadata_name).decode())
    checks = {
        "version": metadata["Version"] == version(),
        "License-Expression: MIT": metadata["License-Expression"] == "MIT",
        "LICENSE in the wheel": any(n.endswith("licenses/LICENSE") for n in names),
        "kernel sources in the wheel": {"focalcal/losses/kernels", "focalcal/calibration/kernels"}
        <= {n.rsplit("/", 1)[0] for n in names},
        "project URLs": len(metadata.get_all("Project-URL") or []) >= 4,
    }
    requires = metadata.get_all("Requires-Dist") or []
    pinned = [r for r in requires if "==" in r.split(";")[0]]  # the version part, not an `extra == ` marker
    checks["no == in Requires-Dist"] = not pinned
    core = sorted(normalise(re.split(r"[<>=!~ ;\[]", r)[0]) for r in requires if "extra ==" not in r)
    checks["core requires numpy, scipy, threadpoolctl"] = core == ["numpy", "scipy", "threadpoolctl"]
    checks["extras"] = set(metadata.get_all("Provides-Extra") or []) == set(PROJECT["optional-dependencies"])
    with tarfile.open(sdists[0]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    for needed in ("LICENSE", "CITATION.cff", "CHANGELOG.md", "pyproject.toml", "src/focalcal/__init__.py"):
        checks[f"{needed} in the sdist"] = needed in members
    for name, ok in checks.items():
        print(f"  {'ok ' if ok else 'BAD'} {name}")
    if not all(checks.values()):
        fail(f"the distributions in {dist} miss: {[name for name, ok in checks.items() if not ok]}; pinned: {pinned}")
    print(f"  {wheels[0].name}: {wheels[0].stat().st_size / 1e3:.0f} kB; {sdists[0].name}: "
          f"{sdists[0].stat().st_size / 1e3:.0f} kB; {len(requires)} Requires-Dist lines, none pinned")


def lowest(*extras: str) -> None:
    extra_table = PROJECT["optional-dependencies"]
    todo, seen, lines = list(extras), set(), {}
    requirements = list(PROJECT["dependencies"])
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in extra_table[extra]:
            if requirement.startswith("focalcal["):
                todo.extend(requirement[len("focalcal["):-1].split(","))
            else:
                requirements.append(requirement)
    for requirement in requirements:
        requirement = requirement.split(";")[0].split("#")[0].strip()
        match = re.match(r"^([A-Za-z0-9_.\-]+)\s*>=\s*([^,\s]+)", requirement)
        if not match:
            fail(f"{requirement!r} has no lower bound to test")
        lines[normalise(match.group(1))] = f"{match.group(1)}=={match.group(2)}"
    print("\n".join(sorted(lines.values())))


def installed() -> set[str]:
    from importlib.metadata import distributions as installed_distributions

    return {normalise(d.metadata["Name"]) for d in installed_distributions()}


def core() -> None:
    present = sorted(installed() & {normalise(n) for n in EXTRAS_ONLY})
    if present:
        fail(f"the core install brought {present}")
    probe = ("import sys, focalcal.metrics, focalcal.calibration, focalcal.theory; "
             "print(sorted(m for m in ('torch', 'matplotlib', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    if out != "[]":
        fail(f"importing the core modules loaded {out}")
    workdir = tempfile.mkdtemp(prefix="focalcal-core-recipes-")
    for page in CORE_RECIPES:
        blocks = re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.DOTALL)
        if not blocks:
            fail(f"{page} has no python block to run")
        for number, code in enumerate(blocks, 1):
            result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=workdir)
            if result.returncode:
                fail(f"{page}'s python block {number} failed without the extras:\n{result.stderr[-2000:]}")
            print(f"  ok {page} block {number}: {result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ''}")


def own_logits() -> None:
    page = (ROOT / "docs" / "own-logits.md").read_text().split("## Quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", page, flags=re.DOTALL).group(1)
    command = re.search(r"```bash\n(focalcal calibrate .*?)\n```", page, flags=re.DOTALL).group(1)
    if "torch" in installed():
        fail("focalcal[plots] brought torch")
    workdir = Path(tempfile.mkdtemp(prefix="focalcal-own-logits-"))
    subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True)
    binary = Path(sys.executable).parent / "focalcal"
    # As on a user's machine that never ran `focalcal build-kernels`: an empty kernel cache.
    fresh_cache = {**os.environ, "TORCH_EXTENSIONS_DIR": str(workdir / "kernel-cache")}
    result = subprocess.run([str(binary), *command.split()[1:]], cwd=workdir, capture_output=True, text=True,
                            check=False, env=fresh_cache)
    if result.returncode:
        fail(f"`{command}` failed with focalcal[plots] and no torch:\n{result.stderr[-3000:]}")
    report = workdir / command.split("--out")[1].split()[0] / "index.html"
    if not report.is_file():
        fail(f"`{command}` wrote no {report}")
    print(f"  ok `{command}` without torch: {len(list(report.parent.rglob('*.svg')))} diagrams, "
          f"{result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ''}")


def plan(report_path: str) -> None:
    report = json.loads(Path(report_path).read_text())
    planned = {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}
    print(f"  pip would install {len(planned)}: " + ", ".join(f"{n} {v}" for n, v in sorted(planned.items())))
    unexpected = set(planned) - {"focalcal", "threadpoolctl"}
    if unexpected:
        fail(f"installing focalcal into the research environment would also install or change {sorted(unexpected)}")


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"distributions": distributions, "lowest": lowest, "core": core, "own-logits": own_logits,
     "plan": plan}[command](*arguments)
