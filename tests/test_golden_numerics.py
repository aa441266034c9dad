"""The same bytes on every x86-64 machine: two short CPU runs whose logits' sha256 are committed.

Each run trains in a fresh process started as ``focalcal train`` (numerics pinned to AVX2
kernels, MKL's vendor-neutral branch and one thread, :mod:`focalcal.core.pinned_numerics`) and its val and
test logits are hashed. ``tests/golden/numerics_logits.json`` holds the hashes and the machine
classes (CPU vendor and widest vector extension) on which they were measured equal. On a
verified class a mismatch is a regression: some kernel picks its numerics by the machine again,
or a dependency's version changed (the file records the versions; after a deliberate upgrade,
regenerate with ``python tests/test_golden_numerics.py --write`` and check the other classes
with ``python -m bench.numerics_hashes``). On a class nobody has verified, a mismatch says so
and prints this machine's hashes, instead of calling the committed ones wrong.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's bench/ package
from bench.numerics_hashes import GOLDEN, RUNS, machine_class, train_and_hash


def mismatch_message(name: str, golden: dict, produced: dict) -> str:
    numerics, versions = produced["numerics"], produced["versions"]
    here = machine_class(numerics)
    hashes = json.dumps(produced["logits_sha256"])
    same_versions = all(versions.get(key) == golden["versions"][key] for key in ("torch", "numpy"))
    if not same_versions:
        return (f"{name}: torch {versions['torch']} / numpy {versions['numpy']} here, the golden hashes were written "
                f"with torch {golden['versions']['torch']} / numpy {golden['versions']['numpy']}: regenerate them "
                f"(python tests/test_golden_numerics.py --write). This machine's hashes: {hashes}")
    if here in golden["verified_on"]:
        return (f"{name}: logits differ from the ones committed, on a machine class where they were verified ({here}; "
                f"{numerics['machine']}): some kernel picks its numerics by the machine again. This machine's "
                f"hashes: {hashes}")
    return (f"{name}: this machine class ({here}; {numerics['machine']}) is not among those the golden hashes were "
            f"verified on ({', '.join(golden['verified_on'])}), and it computes other bytes: the promise of the same "
            f"bytes does not hold here. Its hashes: {hashes}; `python -m bench.numerics_hashes` measures the "
            "variants of the pins on it")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the golden bytes are x86-64's")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_pinned_cpu_run_reproduces_the_committed_logits(name, tmp_path):
    from focalcal.core.pinned_numerics import pinned_environment

    golden = json.loads(GOLDEN.read_text())
    produced = train_and_hash(name, tmp_path)
    numerics = produced["numerics"]
    assert numerics["mode"] == "pinned" and numerics["torch_cpu_capability"] == "AVX2"
    assert numerics["torch_threads"] == 1 and numerics["environment"] == pinned_environment(1)
    assert produced["logits_sha256"] == golden["runs"][name], mismatch_message(name, golden, produced)


def test_the_mismatch_message_tells_a_regression_from_an_unverified_machine():
    golden = {"verified_on": ["AuthenticAMD AVX2"], "versions": {"torch": "2.14.1", "numpy": "2.4.6"}}
    produced = {"logits_sha256": {"val_logits": "ab", "test_logits": "cd"},
                "versions": {"torch": "2.14.1", "numpy": "2.4.6"},
                "numerics": {"vendor": "AuthenticAMD", "machine_isa": "AVX2", "machine": "AMD EPYC"}}
    assert "where they were verified (AuthenticAMD AVX2" in mismatch_message("mlp", golden, produced)
    produced["numerics"] = {"vendor": "CentaurHauls", "machine_isa": "AVX2", "machine": "VIA"}
    message = mismatch_message("mlp", golden, produced)
    assert "is not among those the golden hashes were verified on (AuthenticAMD AVX2)" in message
    assert '"val_logits": "ab"' in message
    produced["versions"] = {"torch": "2.15.0", "numpy": "2.4.6"}
    assert "regenerate them" in mismatch_message("mlp", golden, produced)


def test_the_golden_file_names_the_classes_it_was_verified_on():
    golden = json.loads(GOLDEN.read_text())
    assert set(golden["runs"]) == set(RUNS)
    # measured equal on both vendors (bench/RESULTS.md, "Pinned CPU numerics")
    assert {"AuthenticAMD AVX2", "GenuineIntel AVX512"} <= set(golden["verified_on"])


def test_pin_sets_every_variable_and_refuses_once_torch_is_loaded():
    from focalcal.core.pinned_numerics import NATIVE, PINNED, pin, pinned_environment

    environ = {"OMP_NUM_THREADS": "8"}
    assert pin(PINNED, 2, environ) == pinned_environment(2) and environ == pinned_environment(2)
    assert environ["ATEN_CPU_CAPABILITY"] == "avx2" and environ["OMP_NUM_THREADS"] == "2"
    assert environ["MKL_CBWR"] == "COMPATIBLE,STRICT"
    assert pin(NATIVE, 2, {}) == {}
    with pytest.raises(ValueError, match="training.numerics must be one of"):
        pin("fast", 1, {})
    # a process that imported torch before pinning cannot be pinned: it says so instead of running unpinned
    code = "import torch\nfrom focalcal.core.pinned_numerics import pin\npin('pinned', 1)"
    clean = {key: value for key, value in os.environ.items() if key not in pinned_environment(1)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=clean, check=False)
    assert result.returncode != 0 and "torch and numpy were imported before the numerics were pinned" in result.stderr


def write_golden(workdir: Path) -> dict:
    """Train both runs here and write their hashes to :data:`GOLDEN`, verified on this machine's
    class only: another class is added once it has measured the same bytes."""
    produced = {name: train_and_hash(name, workdir) for name in sorted(RUNS)}
    first = next(iter(produced.values()))
    golden = {"machine": f"{first['numerics']['machine']} ({first['numerics']['machine_isa']})",
              "verified_on": [machine_class(first["numerics"])], "versions": first["versions"],
              "runs": {name: result["logits_sha256"] for name, result in produced.items()}}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    return golden


if __name__ == "__main__":
    import tempfile

    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_golden_numerics.py --write")
    with tempfile.TemporaryDirectory() as directory:
        print(json.dumps(write_golden(Path(directory)), indent=1))
