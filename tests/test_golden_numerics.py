"""The same bytes on every x86-64 machine: two short CPU runs whose logits' sha256 are committed.

Each run trains in a fresh process started as ``focalcal train`` (numerics pinned to AVX2
kernels and one thread, :mod:`focalcal.numerics`) and its val and test logits are hashed.
The hashes in ``tests/golden/numerics_logits.json`` were written on one x86-64 machine; any
other, AVX2 or AVX-512, must reproduce them. A mismatch means some kernel still picks its
numerics by the machine, or a dependency's version changed (the file records the versions;
after a deliberate upgrade, regenerate with ``python tests/test_golden_numerics.py --write``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).with_name("golden") / "numerics_logits.json"
RECIPE = {"epochs": 2, "batch_size": 64, "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4},
          "lr_milestones": [], "reliability_epochs": []}
RUNS = {
    "synthetic1d_mlp": {"dataset": {"name": "synthetic1d", "n_samples": 1200}, "model": {"name": "mlp", "hidden": 64},
                        "loss": {"name": "focal", "gamma": 3}, "recipe": RECIPE, "seed": 0, "device": "cpu"},
    "mnist1d_cnn1d": {"dataset": {"name": "mnist1d", "n_samples": 1000}, "model": {"name": "cnn1d"},
                      "loss": {"name": "cross_entropy"}, "recipe": RECIPE, "seed": 0, "device": "cpu"},
}


def train_and_hash(name: str, workdir: Path) -> dict:
    """Train run ``name`` in a fresh pinned process; sha256 of its val and test logits' bytes."""
    config = workdir / f"{name}.json"
    config.write_text(json.dumps(RUNS[name]))
    run_dir = workdir / name
    command = [sys.executable, "-m", "focalcal", "train", "--config", str(config), "--run-dir", str(run_dir),
               "--data-root", str(workdir / "data"), "--progress", "lines", "--numerics", "pinned", "--threads", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=dict(os.environ), check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(run_dir / "logits.npz") as logits:
        hashes = {key: hashlib.sha256(np.ascontiguousarray(logits[key]).tobytes()).hexdigest()
                  for key in ("val_logits", "test_logits")}
    info = json.loads((run_dir / "run.json").read_text())
    return {"logits_sha256": hashes, "numerics": info["numerics"], "versions": info["versions"]}


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the golden bytes are x86-64's")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_pinned_cpu_run_reproduces_the_committed_logits(name, tmp_path):
    golden = json.loads(GOLDEN.read_text())
    produced = train_and_hash(name, tmp_path)
    numerics = produced["numerics"]
    assert numerics["mode"] == "pinned" and numerics["torch_cpu_capability"] == "AVX2"
    assert numerics["torch_threads"] == 1 and numerics["environment"]["MKL_CBWR"] == "AVX2,STRICT"
    assert produced["logits_sha256"] == golden["runs"][name], (
        f"{name}: logits differ from the ones committed (written on {golden['machine']}, torch "
        f"{golden['versions']['torch']}, numpy {golden['versions']['numpy']}); this machine: {numerics['machine']} "
        f"({numerics['machine_isa']}), "
        f"torch {produced['versions']['torch']}, numpy {produced['versions']['numpy']}")


def test_pin_sets_every_variable_and_refuses_once_torch_is_loaded():
    from focalcal.numerics import NATIVE, PINNED, pin, pinned_environment

    environ = {"OMP_NUM_THREADS": "8"}
    assert pin(PINNED, 2, environ) == pinned_environment(2) and environ == pinned_environment(2)
    assert environ["ATEN_CPU_CAPABILITY"] == "avx2" and environ["OMP_NUM_THREADS"] == "2"
    assert pin(NATIVE, 2, {}) == {}
    with pytest.raises(ValueError, match="training.numerics must be one of"):
        pin("fast", 1, {})
    # a process that imported torch before pinning cannot be pinned: it says so instead of running unpinned
    code = "import torch\nfrom focalcal.numerics import pin\npin('pinned', 1)"
    clean = {key: value for key, value in os.environ.items() if key not in pinned_environment(1)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=clean, check=False)
    assert result.returncode != 0 and "torch and numpy were imported before the numerics were pinned" in result.stderr


def write_golden(workdir: Path) -> dict:
    """Train both runs here and write their hashes to :data:`GOLDEN`."""
    produced = {name: train_and_hash(name, workdir) for name in sorted(RUNS)}
    first = next(iter(produced.values()))
    machine = f"{first['numerics']['machine']} ({first['numerics']['machine_isa']})"
    golden = {"machine": machine, "versions": first["versions"],
              "runs": {name: result["logits_sha256"] for name, result in produced.items()}}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return golden


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_golden_numerics.py --write")
    with tempfile.TemporaryDirectory() as directory:
        print(json.dumps(write_golden(Path(directory)), indent=1))
