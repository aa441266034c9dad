"""Training CPU of the default config against a frozen baseline config.

The default run (config/config.yaml) may cost at most 1.25x the training CPU of the baseline
(bench/default_config_before_claims.yaml, a smaller default with fewer seeds and
grids), measured as the sum of the training jobs' CPU, each read from the last line of its log
(:mod:`bench.job_cpu`: the whole process, start-up included), over the jobs of
``results/benchmarks/train/``. Both are
measured here on the same machine, one after the other: each config's training jobs alone
(``snakemake --until train``) in a fresh copy of this checkout, so start-up (interpreter and
torch imports) counts as it does in a real run. The workflow builds the fused loss kernels
before its first job, once for every checkout (``onstart``), so no training job pays a
compile. Absolute seconds vary about 2x between
machines; the ratio is the figure. The translation stand-in's share of the default's training
CPU is printed against its own budget (90 s). ``--quick`` keeps the first two studies of each
config.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.job_cpu import job_cpu
from focalcal import catalog

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"baseline (bench/default_config_before_claims.yaml)": ROOT / "bench/default_config_before_claims.yaml",
           "default (config/config.yaml)": ROOT / "config/config.yaml"}
BUDGET = 1.25
TRANSLATION_BUDGET_S = 90  # the training CPU the translation stand-in may add to the default run


def checkout_copy(destination: Path) -> None:
    """The tracked files of this checkout (no results, no data), as a fresh clone has them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)


def training_cpu(workdir: Path, datasets: dict, task: str | None = None) -> tuple[float, int]:
    """Sum of the train jobs' CPU (:func:`bench.job_cpu.job_cpu`), and their number; with ``task``,
    over the runs whose data set (the first part of the run path: a key of the config's
    ``datasets``, whose ``name`` the catalog declares) has that task."""
    root = workdir / "results/benchmarks/train"
    files = sorted(path for path in root.rglob("*.tsv")
                   if task is None or catalog.DATASETS[datasets[path.relative_to(root).parts[0]]["name"]].task == task)
    return sum(job_cpu(workdir, path)[0] for path in files), len(files)


def run_config(label: str, config: Path, quick: bool) -> dict[str, tuple[float, int]]:
    with tempfile.TemporaryDirectory(prefix="focalcal-bench-") as temporary:
        workdir = Path(temporary)
        checkout_copy(workdir)
        settings = yaml.safe_load(config.read_text())
        if quick:
            settings["studies"] = dict(list(settings["studies"].items())[:2])
        (workdir / "config/config.yaml").write_text(yaml.safe_dump(settings, sort_keys=False, allow_unicode=True))
        print(f"{label}: training every run of the config ...", flush=True)
        subprocess.run([str(Path(sys.executable).with_name("snakemake")), "--cores", "2", "--until", "train",
                        "--quiet", "all"], cwd=workdir, check=True)
        return {"all": training_cpu(workdir, settings["datasets"]),
                "translation": training_cpu(workdir, settings["datasets"], "translation")}


def main(quick: bool = False) -> None:
    results = {label: run_config(label, path, quick) for label, path in CONFIGS.items()}
    for label, parts in results.items():
        seconds, runs = parts["all"]
        print(f"  {label}: {seconds:.0f} s over {runs} training jobs")
    baseline, default = (parts["all"][0] for parts in results.values())
    print(f"training CPU, default / baseline: {default / baseline:.2f}x (budget {BUDGET}x)")
    seconds, runs = list(results.values())[-1]["translation"]
    print(f"  of the default's, the translation stand-in: {seconds:.0f} s over {runs} training jobs "
          f"(budget {TRANSLATION_BUDGET_S} s)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
