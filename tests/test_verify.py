"""``focalcal verify``: every artefact under results/ against its sidecar; a flipped byte is found
and named with the command that re-makes it, with the config files given."""

from __future__ import annotations

import os

import numpy as np
import pytest

from focalcal.commands.cli import main
from focalcal.files import remake
from focalcal.files.artefacts import atomic_savez, atomic_write_text

RUN = "results/runs/digits/cnn_small/ce/tiny/seed0"


def flip_one_byte(path, offset: int) -> None:
    """Change one byte, keeping the size and the modification time (what Snakemake looks at)."""
    stat = os.stat(path)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture(autouse=True)
def no_workflow_recorded(monkeypatch):
    """``focalcal verify`` records the workflow it is given in the environment: undone after each test."""
    monkeypatch.setenv(remake.WORKFLOW_ENV, "{}")


def make_tree(workdir):
    atomic_savez(workdir / RUN / "logits.npz", val_logits=np.arange(12.0).reshape(4, 3), val_labels=np.arange(4) % 3)
    atomic_write_text("epoch,lr\n1,0.1\n", workdir / RUN / "history.csv")
    atomic_write_text("calibrator,metric\nraw,ece\n", workdir / "results/calibration/x/metrics.csv")
    (workdir / "results/logs").mkdir(parents=True)
    (workdir / "results/logs/train.log").write_text("no sidecar: not an artefact it can check\n")


def test_an_intact_tree_passes(tmp_path, capsys, monkeypatch):
    make_tree(tmp_path)
    assert main(["verify", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "focalcal verify: 3 artefacts checked, 0 damaged"


def test_one_flipped_byte_is_named_with_its_remake_command(tmp_path, capsys, monkeypatch):
    make_tree(tmp_path)
    flip_one_byte(tmp_path / RUN / "logits.npz", 100)
    config = tmp_path / "study.yaml"
    assert main(["verify", str(tmp_path), "--configfile", str(config)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "focalcal verify: 3 artefacts checked, 1 damaged"
    assert out[0].startswith(f"damaged: {tmp_path / RUN / 'logits.npz'}: its sha256 ")
    assert out[1] == (f"  re-make it: cd {tmp_path} && snakemake --cores 1 -f {RUN}/logits.npz --configfile {config}"
                      "   (rule export_logits re-dumps it from the run's checkpoint; nothing is retrained)")


def test_a_missing_artefact_and_a_truncated_one_are_listed(tmp_path, capsys, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / RUN / "history.csv").unlink()
    metrics = tmp_path / "results/calibration/x/metrics.csv"
    metrics.write_bytes(metrics.read_bytes()[:5])
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert "damaged: results/calibration/x/metrics.csv: it is 5 bytes but was written as 26 bytes: truncated" in out
    assert f"damaged: {RUN}/history.csv: it is missing\n  re-make it: snakemake --cores 1 -f {RUN}/history.csv" in out


def test_without_results_it_says_what_it_needs(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 2
    assert "no results folder" in capsys.readouterr().err
