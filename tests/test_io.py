"""focalcal._io: atomic writes keep the old file on failure and give outputs the usual mode."""

import os
import stat

import numpy as np
import pytest

from focalcal._io import atomic_savez, atomic_torch_save, atomic_write_json, atomic_write_text


def test_atomic_write_replaces_whole_files_with_the_umask_mode(tmp_path):
    path = tmp_path / "sub" / "table.csv"
    atomic_write_text("a,b\n1,2\n", path)
    atomic_write_text("a,b\n3,4\n", path)
    assert path.read_text() == "a,b\n3,4\n"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0600
    atomic_write_json({"b": 1, "a": [1, 2]}, tmp_path / "x.json")
    assert (tmp_path / "x.json").read_text().startswith('{\n  "a": [')
    atomic_savez(tmp_path / "x.npz", logits=np.eye(2, dtype=np.float32))
    assert np.load(tmp_path / "x.npz")["logits"].dtype == np.float32


def test_a_failed_write_keeps_the_old_file_and_leaves_no_part_file(tmp_path):
    path = tmp_path / "run.json"
    atomic_write_text("old\n", path)

    with pytest.raises(Exception, match="pickle"):  # torch.save fails part-way through the file
        atomic_torch_save({"weights": [1.0], "hook": lambda: None}, path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
