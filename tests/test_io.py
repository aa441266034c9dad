"""focalcal.files.artefacts: atomic writes with checksum sidecars; reads that name a damaged file and its remedy."""

import io
import json
import os
import stat
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from focalcal.files import artefacts, sidecar
from focalcal.files.artefacts import (
    CorruptArtefactError,
    atomic_savez,
    atomic_torch_save,
    atomic_write,
    atomic_write_json,
    atomic_write_text,
    load_npz,
    read_csv,
    read_json,
    read_text,
    verified_bytes,
    written_in_place,
)
from focalcal.files.remake import remake_hint

RUN = "results/runs/digits/cnn_small/ce/tiny/seed0"
CALIBRATION = "results/calibration/digits/cnn_small/ce/tiny/seed0"


def test_atomic_write_replaces_whole_files_with_the_umask_mode(tmp_path):
    path = tmp_path / "sub" / "table.csv"
    atomic_write_text("a,b\n1,2\n", path)
    atomic_write_text("a,b\n3,4\n", path)
    assert path.read_text() == "a,b\n3,4\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0600
    assert stat.S_IMODE(sidecar.sidecar_path(path).stat().st_mode) == 0o666 & ~mask
    atomic_write_json({"b": 1, "a": [1, 2]}, tmp_path / "x.json")
    assert (tmp_path / "x.json").read_text().startswith('{\n  "a": [')
    atomic_savez(tmp_path / "x.npz", logits=np.eye(2, dtype=np.float32))
    assert np.load(tmp_path / "x.npz")["logits"].dtype == np.float32


def test_a_failed_write_keeps_the_old_file_and_its_sidecar_and_leaves_no_part_file(tmp_path):
    path = tmp_path / "run.json"
    atomic_write_text("old\n", path)

    with pytest.raises(Exception, match="pickle"):  # torch.save fails part-way through the file
        atomic_torch_save({"weights": [1.0], "hook": lambda: None}, path)
    assert read_text(path) == "old\n"  # still verified against its own checksum
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.json.sha256"]


# ------------------------------------------------------------------------- sidecars


def _figure_writer(path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from focalcal.plots import save

    figure = Figure()
    figure.add_subplot().plot([0, 1], [1, 0])
    save(figure, path)


WRITERS = {
    "text": lambda path: atomic_write_text("a,b\n1,2\n", path),
    "json": lambda path: atomic_write_json({"a": 1}, path),
    "npz": lambda path: atomic_savez(path, x=np.arange(5)),
    "torch": lambda path: atomic_torch_save({"w": torch.ones(3)}, path),
    "stream": lambda path: atomic_write(path, lambda handle: handle.write(b"\x00\x01")),
    "figure": _figure_writer,
    "in place": lambda path: _write_in_place(path),
}


def _write_in_place(path):
    with written_in_place(path):
        path.write_bytes(b"written by another program")


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_leaves_a_sidecar_with_the_files_size_and_sha256(tmp_path, writer):
    path = tmp_path / ("figure.png" if writer == "figure" else f"artefact.{writer.replace(' ', '_')}")
    WRITERS[writer](path)
    recorded = sidecar.read(path)
    assert recorded == sidecar.digest_file(path) and recorded.size == path.stat().st_size
    assert verified_bytes(path) == path.read_bytes()


def test_a_sidecar_is_checked_by_sha256sum_too(tmp_path):
    atomic_savez(tmp_path / "logits.npz", x=np.arange(5))
    result = subprocess.run(["sha256sum", "-c", "logits.npz.sha256"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "logits.npz: OK", result.stderr


def test_the_sidecar_is_written_atomically_after_the_file_and_the_old_one_is_dropped_first(tmp_path, monkeypatch):
    path = tmp_path / "metrics.csv"
    atomic_write_text("v\n1\n", path)
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (replaced.append((str(src), str(dst))), real_replace(src, dst)))
    atomic_write_text("v\n2\n", path)
    # the file, then its sidecar, each from a temporary file in the same folder
    assert [dst for _, dst in replaced] == [str(path), str(sidecar.sidecar_path(path))]
    assert all(os.path.dirname(src) == str(tmp_path) and src.endswith(".part") for src, _ in replaced)

    # a crash between the two leaves the new file without a sidecar: unverified, never mismatched
    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(artefacts, "_write_sidecar", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text("v\n3\n", path)
    assert not sidecar.sidecar_path(path).exists()
    assert read_csv(path)["v"].tolist() == [3]


def test_a_file_rewritten_while_it_is_read_is_read_again_not_reported(tmp_path, monkeypatch):
    path = tmp_path / "history.csv"
    atomic_write_text("epoch\n1\n", path)
    stale = sidecar.read(path)
    atomic_write_text("epoch\n1\n2\n", path)
    real_read, calls = sidecar.read, []

    def first_stale(target):  # the reader fetched the sidecar just before a writer swapped both
        calls.append(target)
        return stale if len(calls) == 1 else real_read(target)

    monkeypatch.setattr(sidecar, "read", first_stale)
    assert read_csv(path)["epoch"].tolist() == [1, 2]
    calls.clear()
    assert verified_bytes(path) == b"epoch\n1\n2\n"


# ------------------------------------------------- damaged artefacts and their remedy


def _write_logits(path):
    atomic_savez(path, val_logits=np.zeros((4, 3), np.float32), val_labels=np.arange(4) % 3,
                 test_logits=np.ones((4, 3), np.float32), test_labels=np.arange(4) % 3)


def _write_calibration(path):
    atomic_write_text(json.dumps({"ts": {"fitted": {"temperature": 1.5}}}, indent=1) + "\n", path)


def _write_checkpoint(path):
    atomic_torch_save({"fingerprint": "f", "model": {"w": torch.arange(200.0)}}, path)


def _write_metrics(path):
    atomic_write_text("method,metric,bins,value\nts,ece,15,0.031\nts,nll,,0.52\n", path)


def _read_checkpoint(path):
    return torch.load(io.BytesIO(verified_bytes(path)), weights_only=True)


def _read_calibration(path):
    from focalcal.report.figure_inputs import read_calibration

    return read_calibration(path)


def _read_logits(path):
    from focalcal.pipeline.calibrate import _load_logits

    return _load_logits(path)


ARTEFACTS = {  # name: (path, writer, the consumer's reader, exact re-make command)
    "logits.npz": (f"{RUN}/logits.npz", _write_logits, _read_logits,
                   f"snakemake --cores 1 -f {RUN}/logits.npz"),
    "calibration.json": (f"{CALIBRATION}/calibration.json", _write_calibration, _read_calibration,
                         f"snakemake --cores 1 -f {CALIBRATION}/calibration.json"),
    "checkpoint.pt": (f"{RUN}/checkpoint.pt", _write_checkpoint, _read_checkpoint,
                      f"rm -f {RUN}/checkpoint.pt && snakemake --cores 1 -f {RUN}/history.csv"),
    "metrics.csv": (f"{CALIBRATION}/metrics.csv", _write_metrics, read_csv,
                    f"snakemake --cores 1 -f {CALIBRATION}/metrics.csv"),
}


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_a_bit(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _flip_a_bit], ids=["truncated", "bit-flipped"])
@pytest.mark.parametrize("name", ARTEFACTS)
def test_a_damaged_artefact_names_itself_what_is_wrong_and_the_command_that_re_makes_it(tmp_path, monkeypatch,
                                                                                        name, damage):
    monkeypatch.chdir(tmp_path)
    relative, write, read, command = ARTEFACTS[name]
    write(tmp_path / relative)
    read(Path(relative))  # intact: reads
    damage(tmp_path / relative)
    with pytest.raises(CorruptArtefactError) as caught:
        read(Path(relative))
    message = str(caught.value)
    assert f"corrupt artefact {relative}: " in message
    assert ("truncated" if damage is _truncate else "its content changed after it was written") in message
    assert f"Re-make it: {command}   (" in message
    assert caught.value.remake.startswith(command) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("name", ARTEFACTS)
def test_an_artefact_without_a_sidecar_still_loads(tmp_path, name):
    relative, write, read, _ = ARTEFACTS[name]
    path = tmp_path / relative
    write(path)
    expected = read(path)
    sidecar.sidecar_path(path).unlink()  # written before sidecars existed, or by hand
    got = read(path)
    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(got, expected)
    elif name == "logits.npz":
        assert got.keys() == expected.keys() and all(np.array_equal(got[k], expected[k]) for k in got)
    elif name == "checkpoint.pt":
        assert torch.equal(got["model"]["w"], expected["model"]["w"])
    else:
        assert got == expected


@pytest.mark.parametrize("reader, content, kind", [
    (load_npz, b"PK\x03\x04 not a whole zip", "an .npz archive"),
    (read_json, b'{"ts": {"fitted": ', "JSON"),
    (read_csv, b"method,value\n\xff\xfe\xfa,1\n", "CSV"),
    (read_text, b"\xff\xfe\xfa", "UTF-8 text"),
])
def test_without_a_sidecar_a_parse_failure_is_reported_the_same_way(tmp_path, monkeypatch, reader, content, kind):
    monkeypatch.chdir(tmp_path)
    path = f"{RUN}/run.json"
    os.makedirs(RUN)
    with open(path, "wb") as handle:
        handle.write(content)
    with pytest.raises(CorruptArtefactError, match=rf"corrupt artefact {path}: it is not valid {kind} .*no checksum "
                                                   rf"sidecar.*Re-make it: snakemake --cores 1 -f {path} "):
        reader(path)


def test_a_file_that_matches_its_checksum_but_does_not_parse_is_reported_as_written_wrong(tmp_path):
    path = tmp_path / "results/report/manifest.json"
    atomic_write_text("{not json", path)
    with pytest.raises(CorruptArtefactError, match="matches its checksum but is not valid JSON"):
        read_json(path)


def test_an_unreadable_sidecar_is_reported(tmp_path):
    path = tmp_path / "logits.npz"
    atomic_savez(path, x=np.arange(3))
    sidecar.sidecar_path(path).write_text("garbage\n")
    with pytest.raises(CorruptArtefactError, match=r"its checksum file logits.npz.sha256 is unreadable"):
        load_npz(path)


def test_parse_time_reads_skip_the_hash_but_still_name_a_damaged_file(tmp_path):
    path = tmp_path / f"{RUN}/run_config.json"
    atomic_write_json({"seed": 0}, path)
    _flip_a_bit(path)  # '"seed"' becomes another valid key: only the hash could tell
    assert read_json(path, verify=False) != {"seed": 0}
    path.write_text('{"seed": ')
    with pytest.raises(CorruptArtefactError, match="rm -f .*run_config.json && snakemake --cores 1 -f .*run_config.json"):
        read_json(path, verify=False)


# --------------------------------------------------------------------------- remedies


def test_the_remedy_runs_from_the_workflow_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert remake_hint(f"{RUN}/logits.npz").startswith(f"snakemake --cores 1 -f {RUN}/logits.npz   (")
    assert "nothing is retrained" in remake_hint(f"{RUN}/logits.npz")
    assert remake_hint(f"{RUN}/token_logits.npz") == (f"snakemake --cores 1 -f {RUN}/token_logits.npz   (rule "
                                                      "export_token_logits re-dumps it from the run's checkpoint; "
                                                      "nothing is retrained)")
    elsewhere = tmp_path / "other place"
    assert remake_hint(elsewhere / RUN / "logits.npz").startswith(
        f"cd '{elsewhere}' && snakemake --cores 1 -f {RUN}/logits.npz")
    assert remake_hint(tmp_path / RUN / "logits.npz").startswith("snakemake --cores 1 -f ")  # the cwd: no cd
    assert remake_hint("data/mnist1d/mnist1d_n2000_seed42.npz").startswith("rm -f data/mnist1d/mnist1d_n2000_seed42.npz")
    assert remake_hint("data/ready/digits.json").startswith("snakemake --cores 1 -f data/ready/digits.json")
    assert remake_hint("results/tables/c21/fig5.csv").endswith("(rule paper_table rebuilds it from its study's tidy table)")
    assert remake_hint("/somewhere/notes.txt") == "delete /somewhere/notes.txt and re-run what wrote it"


def test_the_remedy_names_the_workflow_in_use_and_a_real_target(tmp_path, monkeypatch):
    from focalcal.files.remake import set_workflow

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FOCALCAL_WORKFLOW", "{}")
    set_workflow("/repo/Snakefile", ["config/a.yaml", "/etc/b c.yaml"])
    config = f"--configfile {tmp_path}/config/a.yaml '/etc/b c.yaml'"
    assert remake_hint(f"{RUN}/logits.npz").startswith(
        f"snakemake --cores 1 -s /repo/Snakefile -f {RUN}/logits.npz {config}   (")
    assert remake_hint(f"{RUN}/checkpoint.pt").startswith(
        f"rm -f {RUN}/checkpoint.pt && snakemake --cores 1 -s /repo/Snakefile -f {RUN}/history.csv {config}   (")
    assert remake_hint(f"{RUN}/staged_export/run.json").startswith(
        f"rm -rf {RUN}/staged_export && snakemake --cores 1 -s /repo/Snakefile -f {RUN}/logits.npz {config}   (")
    segmentation = RUN.replace("results/runs/", "results/segmentation/")
    assert remake_hint(f"{RUN}/staged_export/samples.npz").startswith(
        f"rm -rf {RUN}/staged_export && snakemake --cores 1 -s /repo/Snakefile -f {segmentation}/metrics.csv {config}")
    set_workflow(tmp_path / "Snakefile", [])  # the workflow directory's own Snakefile, the default config
    assert remake_hint(f"{RUN}/logits.npz").startswith(f"snakemake --cores 1 -f {RUN}/logits.npz   (")
    assert remake_hint("data/mnist1d/mnist1d_n2000_seed42.npz").startswith("rm -f data/mnist1d/mnist1d_n2000_seed42.npz   (")


def test_the_error_survives_pickling_between_processes():
    import pickle

    error = CorruptArtefactError(f"{RUN}/logits.npz", "it is 3 bytes but was written as 9 bytes: truncated")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)
