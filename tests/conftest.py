"""Shared test set-up: one thread per process, fixtures, and the one way the tests run Snakemake.

pytest-xdist runs two workers on this 2-core machine; each torch process would otherwise
start one thread per core and the workers would thrash each other (observed: 20 s → 260 s).

The workflow tests import the Snakemake helpers from here (``from conftest import snakemake``)
and read the one finished run of config/test.yaml, ``finished``, made once per session.

The library's tests run with this file in environments that hold only focalcal[torch,plots,test]
(.ci/package_test.sh), so what needs the workflow's packages (yaml, focalcal.pipeline) is
imported where it is used, and ``SHIPPED_CONFIGS`` is computed on first use.
"""

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)


import pytest

ROOT = Path(__file__).resolve().parents[1]
# The workflow's entry point, looked up as `snakemake` does from the repository root.
SNAKEFILE = ROOT / "workflow" / "Snakefile"
TEST_CONFIG = ROOT / "config" / "test.yaml"
BIN = Path(sys.executable).parent
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"


def _as_run(path: Path) -> tuple[Path, ...]:
    """The files a shipped config runs with: an overlay example (no data sets of its own: it
    changes or adds to the default's studies) after the default config, as its header's command
    line gives them."""
    from focalcal.pipeline import load_config_file

    return (DEFAULT_CONFIG, path) if "datasets" not in load_config_file(path) else (path,)


def __getattr__(name: str):
    """``SHIPPED_CONFIGS``: every shipped config as the files it runs with (an overlay after
    config/config.yaml), computed when a test module first imports it."""
    if name != "SHIPPED_CONFIGS":
        raise AttributeError(name)
    value = [_as_run(path) for path in [DEFAULT_CONFIG, TEST_CONFIG, *sorted((ROOT / "config" / "studies").glob("*.yaml")),
                                        *sorted((ROOT / "config" / "examples").glob("*.yaml"))]]
    globals()[name] = value
    return value


RUN = "results/runs/digits/cnn_small/ce/tiny/seed0"  # the first classification run of config/test.yaml


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt of focalcal.data to reach a non-file URL fails the test (downloads are
    tested against file:// archives the tests build in the real formats)."""
    from focalcal.data import download

    real_open = download._open_url

    def guarded(url):
        if not url.startswith("file:"):
            raise AssertionError(f"tests must not reach the network ({url})")
        return real_open(url)

    monkeypatch.setattr(download, "_open_url", guarded)


@pytest.fixture(params=["fused", "eager"])
def loss_kernels(request, monkeypatch):
    """Run a loss test twice: through the fused CPU kernels and through the eager PyTorch
    reference path (``FOCALCAL_FUSED_KERNELS=0``); loss test modules opt in with
    ``pytestmark = pytest.mark.usefixtures("loss_kernels")``."""
    from focalcal.losses import _fused

    monkeypatch.setenv(_fused.ENV_SWITCH, "1" if request.param == "fused" else "0")
    if request.param == "fused":
        assert _fused.kernels() is not None, "the fused CPU loss kernels failed to build (see the warning)"
    return request.param


@pytest.fixture
def fresh_catalog(monkeypatch):
    """The catalog's tables as copies, so that what a test declares (``catalog.declare``,
    ``data.register``, ``losses.register``, ...) leaves with it."""
    from focalcal import catalog

    for table in ("DATASETS", "MODELS", "LOSSES", "CALIBRATORS"):
        monkeypatch.setattr(catalog, table, dict(getattr(catalog, table)))


def copy_checkout(checkout: Path) -> Path:
    """A copy of the checkout's tracked workflow files (source, rules, configs, notebooks) at ``checkout``."""
    listed = subprocess.run(["git", "ls-files", "src", "workflow", "profiles", "notebooks", "config"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in listed:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, checkout / name)
    return checkout


@pytest.fixture
def workflow_checkout(tmp_path):
    """A copy of the checkout's tracked workflow files (source, rules, configs, notebooks), for
    tests that add a module to the package, or change a script, and run Snakemake on it without
    touching the tree."""
    return copy_checkout(tmp_path / "checkout")


def add_paper_entry(checkout: Path, entry: str) -> None:
    """``entry`` (a ``Paper(...)`` line) written last into ``PAPERS`` of the catalog in ``checkout``."""
    catalog = checkout / "src/focalcal/catalog.py"
    text = catalog.read_text()
    table = re.search(r"^PAPERS: dict\[str, Paper\] = \{entry.key: entry for entry in \(\n", text, flags=re.MULTILINE)
    assert table, "src/focalcal/catalog.py has no PAPERS table for a paper's entry"
    end = text.index("\n)}\n", table.end()) + 1
    catalog.write_text(text[:end] + entry + text[end:])


# ------------------------------------------------------------------------------ Snakemake runs


def snakemake_command(workdir: Path, *args: str, snakefile: Path = SNAKEFILE) -> list[str]:
    """The venv's ``snakemake`` on ``snakefile``, working in ``workdir`` (its own .snakemake/ and results/)."""
    return [str(BIN / "snakemake"), "-s", str(snakefile), "--directory", str(workdir), *args]


def snakemake(workdir: Path, *args: str, check: bool = True, snakefile: Path = SNAKEFILE, timeout: float = 600,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run Snakemake in ``workdir`` (with ``env``'s variables added to the environment); with
    ``check``, a failure raises with the output's tail."""
    command = snakemake_command(workdir, *args, snakefile=snakefile)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def planned_jobs(result: subprocess.CompletedProcess) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints, as {rule: count} with its 'total'; {} when it planned nothing."""
    text = result.stdout + result.stderr
    if "Job stats:" not in text:
        return {}
    counts = {}
    for line in text[text.index("Job stats:") :].splitlines()[3:]:
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if not match:
            break
        counts[match.group(1)] = int(match.group(2))
    return counts


def run_as_printed(command: str, workdir: Path) -> subprocess.CompletedProcess:
    """A command an error message printed, in a shell from the workflow directory, with the venv's
    snakemake and focalcal first on PATH."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "-c", command], cwd=workdir, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def one_run_config(path: Path, study: str, epochs: int, **recipe) -> Path:
    """config/test.yaml cut down to one study of one run (:data:`RUN`, recipe ``tiny`` trained for
    ``epochs`` with ``recipe``'s other settings), written to ``path``."""
    import yaml

    config = yaml.safe_load(TEST_CONFIG.read_text())
    config["recipes"]["tiny"].update(recipe, epochs=epochs)
    config["studies"] = {study: {
        "paper": "mukhoti2020", "mirrors": f"{study}: one run",
        "grids": [{"datasets": ["digits"], "models": ["cnn_small"], "losses": ["ce"], "recipe": "tiny", "seeds": [0],
                   "calibrators": ["uncalibrated"]}],
    }}
    path.write_text(yaml.safe_dump(config))
    return path


def copy_workdir(source: Path, target: Path) -> Path:
    """A private copy of a working directory: modification times and .snakemake/ kept, so that
    Snakemake finds in it what it found in ``source``."""
    shutil.copytree(source, target, symlinks=True)
    return target


def _run_the_test_config(workdir: Path) -> None:
    result = snakemake(workdir, "--cores", "2", "--configfile", str(TEST_CONFIG), timeout=1800)
    (workdir / "snakemake.out").write_text(result.stdout + result.stderr)


@pytest.fixture(scope="session")
def finished(tmp_path_factory, worker_id) -> Path:
    """A working directory in which config/test.yaml ran to the end (its output in snakemake.out),
    made once per test session: pytest-xdist's workers share it through a file lock, the first
    to ask runs it. Read it, never change it: tests that do work on ``finished_copy``."""
    if worker_id == "master":  # no xdist: the test session's own folder
        workdir = tmp_path_factory.mktemp("finished_test_config")
        _run_the_test_config(workdir)
        return workdir
    shared = tmp_path_factory.getbasetemp().parent  # the test session's, common to its workers
    workdir = shared / "finished_test_config"
    done, failed = workdir.with_suffix(".done"), workdir.with_suffix(".failed")
    with open(workdir.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if failed.exists():
            raise AssertionError(f"the shared run of config/test.yaml failed in another worker:\n{failed.read_text()}")
        if not done.exists():
            try:
                workdir.mkdir()
                _run_the_test_config(workdir)
            except BaseException as error:
                failed.write_text(str(error))
                raise
            done.touch()
    return workdir


@pytest.fixture
def finished_copy(finished, tmp_path) -> Path:
    """A private copy of ``finished`` for a test that re-runs or damages part of it."""
    return copy_workdir(finished, tmp_path / "finished")


def pytest_collection_modifyitems(items):
    """The modules that run Snakemake first, the others after them in their usual order, laid out
    for ``make test``'s work-stealing workers (pytest-xdist ``--dist worksteal``), which start by
    taking one half of the list each: the modules that read the shared finished run (``finished``)
    lead the first half, the other Snakemake modules the second, so both workers start on long
    tests, neither waits for the other's shared run, and the test session ends on short tests, which an
    idle worker takes from the busy one. A module's tests stay together, so that its module-scoped
    set-up is made by one worker."""
    runs_snakemake = lambda item: getattr(getattr(item, "module", None), "snakemake", None) is snakemake
    modules: dict[object, list] = {}
    for item in items:
        if runs_snakemake(item):
            modules.setdefault(item.module, []).append(item)
    reads_finished = [group for group in modules.values() if any("finished" in item.fixturenames for item in group)]
    first = [item for group in reads_finished for item in group]
    second = [item for group in modules.values() if group not in reads_finished for item in group]
    rest = [item for item in items if not runs_snakemake(item)]
    fill = max(0, len(items) // 2 - len(first))
    items[:] = first + rest[:fill] + second + rest[fill:]
