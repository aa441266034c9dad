"""Crafted .npz and .npy files: every array header is checked against what its member really
holds before anything is allocated, and each refusal is one line naming the file and the key."""

from __future__ import annotations

import io
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from focalcal.files.artefacts import CorruptArtefactError, load_npz
from focalcal.files.npz import read_npz
from focalcal.logits_file import read_logits


def good_arrays(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {"val_logits": rng.normal(size=(30, 5)), "val_labels": rng.integers(0, 5, 30),
            "test_logits": rng.normal(size=(40, 5)), "test_labels": rng.integers(0, 5, 40)}


def npy_bytes(header: dict, data: bytes) -> bytes:
    """An .npy stream with a hand-written header (shape, dtype descr, order) and raw data bytes."""
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, header)  # magic, length and header
    return stream.getvalue() + data


def write_archive(path, members: dict[str, bytes], compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for key, content in members.items():
            archive.writestr(f"{key}.npy", content)
    return path


def good_members() -> dict[str, bytes]:
    members = {}
    for key, value in good_arrays().items():
        stream = io.BytesIO()
        np.save(stream, value)
        members[key] = stream.getvalue()
    return members


def crafted(tmp_path, key: str, content: bytes, name="crafted.npz"):
    return write_archive(tmp_path / name, {**good_members(), key: content})


def test_a_plain_archive_reads_as_np_load_reads_it(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, **good_arrays(), class_names=np.array(["a", "b", "c", "d", "e"]),
             fortran=np.asfortranarray(np.arange(12.0).reshape(3, 4)), big_endian=np.arange(6, dtype=">i4"))
    compressed = tmp_path / "compressed.npz"
    np.savez_compressed(compressed, **good_arrays())
    for archive in (path, compressed):
        expected = dict(np.load(archive))
        arrays = read_npz(archive)
        assert arrays.keys() == expected.keys()
        for key, value in expected.items():
            np.testing.assert_array_equal(arrays[key], value)
            assert arrays[key].dtype == value.dtype and arrays[key].flags.writeable
    assert read_npz(path)["fortran"].flags.f_contiguous


def test_a_huge_declared_shape_is_refused_by_name_without_allocating_it(tmp_path):
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**13, 5)}
    path = crafted(tmp_path, "val_logits", npy_bytes(header, b"\0" * 400))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as error:
            read_logits(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(error.value)
    assert message.startswith(f"{path} [val_logits]: header declares shape (10000000000000, 5)")
    assert "holds 400 data bytes (truncated)" in message and "\n" not in message
    assert peak < 1_000_000  # the archive is a few kB; nothing near the declared 400 TB is allocated


def test_a_member_shorter_than_its_header_says_is_truncated(tmp_path):
    header = {"descr": "<f8", "fortran_order": False, "shape": (40, 5)}
    path = crafted(tmp_path, "test_logits", npy_bytes(header, np.zeros(199).tobytes()))
    with pytest.raises(ValueError, match=r"crafted\.npz \[test_logits\]: header declares shape \(40, 5\) of float64 "
                                         r"\(1600 bytes\) but the member holds 1592 data bytes \(truncated\)"):
        read_logits(path)


def test_trailing_bytes_after_the_data_are_refused(tmp_path):
    header = {"descr": "<i8", "fortran_order": False, "shape": (30,)}
    path = crafted(tmp_path, "val_labels", npy_bytes(header, np.zeros(31, np.int64).tobytes()))
    with pytest.raises(ValueError, match=r"\[val_labels\]: .* holds 248 data bytes \(trailing bytes"):
        read_logits(path)


def test_structured_object_and_too_many_dimensions_are_refused(tmp_path):
    structured = np.zeros((30, 5), dtype=[("a", "<f8")])
    stream = io.BytesIO()
    np.save(stream, structured)
    with pytest.raises(ValueError, match=r"crafted\.npz \[val_logits\]: structured dtype"):
        read_logits(crafted(tmp_path, "val_logits", stream.getvalue()))
    objects = io.BytesIO()
    np.save(objects, np.array([{"a": 1}] * 30, dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"crafted\.npz \[val_labels\]: cannot read it without pickle"):
        read_logits(crafted(tmp_path, "val_labels", objects.getvalue()))
    cube = io.BytesIO()
    np.save(cube, np.zeros((30, 5, 2)))
    with pytest.raises(ValueError, match=r"crafted\.npz \[val_logits\]: 3-D shape \(30, 5, 2\); at most 2"):
        read_logits(crafted(tmp_path, "val_logits", cube.getvalue()))
    complex_ = io.BytesIO()
    np.save(complex_, np.zeros((30, 5), np.complex128))
    with pytest.raises(ValueError, match=r"\[val_logits\]: dtype complex128 is not a number, boolean or string"):
        read_logits(crafted(tmp_path, "val_logits", complex_.getvalue()))


def test_a_truncated_file_and_a_lying_zip_entry_are_refused(tmp_path):
    whole = tmp_path / "whole.npz"
    np.savez(whole, **good_arrays())
    cut = tmp_path / "cut.npz"
    cut.write_bytes(whole.read_bytes()[:-300])  # the central directory is gone
    with pytest.raises(ValueError, match=r"cut\.npz: not a readable \.npz file"):
        read_logits(cut)
    # a deflated member whose directory entry claims far more than deflate can expand
    bomb = write_archive(tmp_path / "bomb.npz", good_members(), zipfile.ZIP_DEFLATED)
    data = bytearray(bomb.read_bytes())
    with zipfile.ZipFile(bomb) as archive:
        info = archive.getinfo("val_logits.npy")
    entry = data.find(b"PK\x01\x02")  # its central-directory entry: signature, then the name at byte 46
    while data[entry + 46:entry + 46 + len(info.filename)] != info.filename.encode():
        entry = data.find(b"PK\x01\x02", entry + 4)
    data[entry + 24:entry + 28] = (10**9).to_bytes(4, "little")  # uncompressed size
    bomb.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bomb\.npz \[val_logits\]: claims 1000000000 bytes from \d+ compressed"):
        read_logits(bomb)


def test_a_folder_of_npy_files_is_checked_the_same_way(tmp_path):
    for key, value in good_arrays().items():
        np.save(tmp_path / f"{key}.npy", value)
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**13, 5)}
    (tmp_path / "test_logits.npy").write_bytes(npy_bytes(header, b"\0" * 80))
    with pytest.raises(ValueError, match=r"test_logits\.npy: header declares shape \(10000000000000, 5\)"):
        read_logits(tmp_path)


def test_workflow_artefacts_are_checked_too(tmp_path):
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**13, 5)}
    path = crafted(tmp_path, "val_logits", npy_bytes(header, b"\0" * 400), name="logits.npz")
    with pytest.raises(CorruptArtefactError, match=r"logits\.npz.*\[val_logits\]: header declares shape"):
        load_npz(path)


def test_calibrate_refuses_a_crafted_file_in_one_line(tmp_path):
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**13, 5)}
    path = crafted(tmp_path, "val_logits", npy_bytes(header, b"\0" * 400))
    result = subprocess.run([sys.executable, "-m", "focalcal", "calibrate", str(path), "--out", str(tmp_path / "out")],
                            check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"focalcal calibrate: {path} [val_logits]: header declares shape")
    assert not (tmp_path / "out").exists()
