"""The logits format read from a user's .npz or folder of .npy files: every bad input is a
ValueError naming the file, the key and the problem, raised before anything is written."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from focalcal.logits_file import REQUIRED_KEYS, read_logits


def arrays(n_val=30, n_test=40, k=4, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {"val_logits": rng.normal(size=(n_val, k)).astype(np.float32), "val_labels": rng.integers(0, k, n_val),
            "test_logits": rng.normal(size=(n_test, k)), "test_labels": rng.integers(0, k, n_test)}


def write_npz(tmp_path, content, name="model.npz"):
    path = tmp_path / name
    np.savez(path, **content)
    return path


def test_reads_npz_and_a_folder_of_npy_files_alike(tmp_path):
    content = arrays()
    from_npz = read_logits(write_npz(tmp_path, {**content, "class_names": np.array(["a", "b", "c", "d"])}))
    folder = tmp_path / "folder"
    folder.mkdir()
    for key, value in content.items():
        np.save(folder / f"{key}.npy", value)
    (folder / "class_names.txt").write_text("a\nb\nc\nd\n")
    from_folder = read_logits(folder)
    for key in REQUIRED_KEYS:
        np.testing.assert_array_equal(getattr(from_npz, key), getattr(from_folder, key))
    assert from_npz.val_logits.dtype == np.float64 and from_npz.val_labels.dtype == np.int64
    assert from_npz.class_names == from_folder.class_names == ("a", "b", "c", "d")
    assert read_logits(write_npz(tmp_path, content, "plain.npz")).class_names == ("class 0", "class 1", "class 2",
                                                                                   "class 3")


def broken(key, value):
    content = arrays()
    content[key] = value
    return content


BAD = {
    "missing key": ({k: v for k, v in arrays().items() if k != "test_labels"}, r"\[test_labels\]: missing"),
    "1-D logits": (broken("val_logits", np.zeros(30)), r"\[val_logits\]: logits must be 2-D"),
    "one class": (broken("test_logits", np.zeros((40, 1))), r"\[test_logits\]: at least 2 classes"),
    "no samples": (broken("val_logits", np.zeros((0, 4))), r"\[val_logits\]: no samples"),
    "integer logits": (broken("val_logits", np.zeros((30, 4), dtype=np.int64)), (r"\[val_logits\]: logits must be "
                                                                               "floating point, got dtype int64")),
    "NaN": (broken("test_logits", np.where(np.eye(40, 4) > 0, np.nan, 0.0)), (r"\[test_logits\]: 4 non-finite "
                                                                           r"value\(s\); the first is NaN at row 0")),
    "Inf": (broken("val_logits", np.full((30, 4), np.inf)), (r"\[val_logits\]: 120 non-finite value\(s\); the first "
                                                                 "is Inf")),
    "float labels": (broken("val_labels", np.zeros(30)), (r"\[val_labels\]: labels must be integers, got dtype "
                                                          "float64")),
    "2-D labels": (broken("test_labels", np.zeros((40, 1), dtype=int)), r"\[test_labels\]: labels must be 1-D"),
    "length": (broken("test_labels", np.zeros(39, dtype=int)), r"\[test_labels\]: 39 labels for 40 rows of"),
    "label range": (broken("val_labels", np.full(30, 4)), r"\[val_labels\]: label 4 is outside 0..3 \(30 such"),
    "negative label": (broken("test_labels", np.full(40, -1)), r"\[test_labels\]: label -1 is outside 0..3"),
    "other K": (broken("test_logits", np.zeros((40, 5))), r"\[test_logits\]: 5 classes, but .*\[val_logits\] has 4"),
    "names count": ({**arrays(), "class_names": np.array(["a", "b"])}, r"\[class_names\]: \(2,\) names for 4"),
    "names dtype": ({**arrays(), "class_names": np.arange(4)}, r"\[class_names\]: class names must be strings"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_bad_input_names_the_file_the_key_and_the_problem(tmp_path, case):
    content, message = BAD[case]
    path = write_npz(tmp_path, content)
    with pytest.raises(ValueError, match=message) as raised:
        read_logits(path)
    assert str(path) in str(raised.value)


def test_unreadable_inputs_are_named(tmp_path):
    with pytest.raises(ValueError, match="no such file or folder"):
        read_logits(tmp_path / "absent.npz")
    text = tmp_path / "notes.npz"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match=r"notes\.npz: not a readable \.npz file"):
        read_logits(text)
    objects = tmp_path / "objects.npz"
    np.savez(objects, **arrays(), class_names=np.array([{"a": 1}] * 4, dtype=object))
    with pytest.raises(ValueError, match=r"objects\.npz \[class_names\]: cannot read it without pickle"):
        read_logits(objects)
    folder = tmp_path / "folder"
    folder.mkdir()
    for key, value in arrays().items():
        np.save(folder / f"{key}.npy", value)
    np.save(folder / "val_labels.npy", np.full(30, 9))
    with pytest.raises(ValueError, match=r"folder/val_labels\.npy: label 9 is outside"):
        read_logits(folder)


def probability_arrays(k=4, seed=0) -> dict:
    content = arrays(k=k, seed=seed)
    for split in ("val", "test"):
        logits = content[f"{split}_logits"].astype(np.float64)
        content[f"{split}_logits"] = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return content


def test_probabilities_are_refused_as_logits_and_read_as_their_log_when_declared(tmp_path):
    content = probability_arrays()
    path = write_npz(tmp_path, content)
    with pytest.raises(ValueError, match=r"model.npz \[val_logits\]: looks like probabilities, not logits .*"
                                         r"--inputs probabilities.*inputs: probabilities"):
        read_logits(path)
    read = read_logits(path, inputs="probabilities")
    np.testing.assert_array_equal(read.test_logits, np.log(content["test_logits"]))
    np.testing.assert_allclose(np.exp(read.val_logits).sum(axis=1), 1.0, rtol=0, atol=1e-12)
    content["val_logits"] = np.abs(arrays()["val_logits"])  # logits that happen to be non-negative
    content["test_logits"] = np.log(content["test_logits"])
    assert read_logits(write_npz(tmp_path, content, "mixed.npz")).num_classes == 4


@pytest.mark.parametrize("change, message", [
    (lambda p: p.__setitem__((2, 1), 1.5), (r"\[test_logits\]: not probabilities: 2 value\(s\) outside \[0, 1\], "
                                           r"the first 1.5 at row 2, column 1")),
    (lambda p: p.__setitem__(5, p[5] * 0.9), (r"\[test_logits\]: not probabilities: 1 row\(s\) do not sum to 1 .* "
                                             r"row 5, summing to 0.9")),
    (lambda p: p.__setitem__((7, slice(None)), [0.0, 0.5, 0.5, 0.0]),
     r"\[test_logits\]: 2 probabilit\(ies\) exactly 0, the first at row 7, column 0: log 0 = -inf"),
])
def test_declared_probabilities_that_are_none_are_refused_naming_the_entry(tmp_path, change, message):
    content = probability_arrays()
    change(content["test_logits"])
    if "outside" in message:
        content["test_logits"][2, 2] = -0.5  # the row still sums to 1
    with pytest.raises(ValueError, match=message):
        read_logits(write_npz(tmp_path, content), inputs="probabilities")


def test_an_imported_run_declared_as_probabilities_stores_their_log(tmp_path):
    from focalcal.pipeline.jobs import import_logits

    content = probability_arrays()
    source = write_npz(tmp_path, content)
    identity = {"dataset": {"name": "cifar10"}, "model": {"name": "logits_file", "path": str(source),
                                                          "inputs": "probabilities"},
                "loss": {"name": "cross_entropy"}, "recipe": None, "seed": 0}
    paths = [tmp_path / name for name in ("logits.npz", "run.json", "run_config.json")]
    import_logits(source, identity, *paths)
    with np.load(paths[0]) as stored:
        np.testing.assert_array_equal(stored["val_logits"], np.log(content["val_logits"]))
    # run.json names the logits it was written with (focalcal verify pairs them)
    assert json.loads(paths[1].read_text())["logits_sha256"] == hashlib.sha256(paths[0].read_bytes()).hexdigest()
    identity["model"].pop("inputs")  # undeclared: refused, nothing written
    with pytest.raises(ValueError, match="looks like probabilities"):
        import_logits(source, identity, *(tmp_path / f"again_{path.name}" for path in paths))
    assert not (tmp_path / "again_logits.npz").exists()


def test_a_damaged_archive_is_refused_naming_the_file_and_the_key(tmp_path):
    content = arrays()
    crc = write_npz(tmp_path, content, "crc.npz")
    data = bytearray(crc.read_bytes())
    start = bytes(data).index(content["test_logits"].tobytes())  # stored uncompressed: the array's own bytes
    data[start + 100] ^= 0x01  # one bit of one logit: the size is right, the member's CRC-32 is not
    crc.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"crc\.npz \[test_logits\]: damaged, not a readable array \(Bad CRC-32"):
        read_logits(crc)

    header = write_npz(tmp_path, content, "header.npz")
    data = header.read_bytes()
    offset = data.index(b"'descr'", data.index(b"val_labels.npy"))
    header.write_bytes(data[:offset] + b"'dexcr'" + data[offset + 7:])
    with pytest.raises(ValueError, match=r"header\.npz \[val_labels\]: damaged, not a readable array"):
        read_logits(header)


def test_the_calibrate_command_names_a_damaged_archive_without_a_traceback(tmp_path):
    import subprocess
    import sys

    path = write_npz(tmp_path, arrays(), "model.npz")
    data = bytearray(path.read_bytes())
    data[data.index(arrays()["val_logits"].tobytes()) + 8] ^= 0x01
    path.write_bytes(bytes(data))
    result = subprocess.run([sys.executable, "-m", "focalcal", "calibrate", str(path), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{path} [val_logits]: damaged" in result.stderr
    assert not (tmp_path / "out").exists()
