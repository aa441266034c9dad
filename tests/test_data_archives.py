"""CIFAR-10/100, SVHN and Tiny-ImageNet from small archives built here in the real on-disk
formats; downloads come from file:// URLs (there is no network), checksums from the files."""

import dataclasses
import io
import pickle
import tarfile
import urllib.error
import zipfile

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.io import savemat

from focalcal import data
from focalcal.data import download, sources
from focalcal.data.download import ChecksumError, DatasetNotFoundError, extract, md5sum
from focalcal.data.tiny_imagenet import CACHE_NAME, reorganise_val

pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py


# ---------------------------------------------------------------- builders in the real formats


def _write_pickle(path, content):
    with open(path, "wb") as handle:
        pickle.dump(content, handle, protocol=2)


def build_cifar10(root, rng, *, per_batch=10, test_n=20, byte_keys=False):
    """cifar-10-batches-py with 5 train batches of ``per_batch`` images (each class once per 10)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    key = (lambda k: k.encode()) if byte_keys else (lambda k: k)
    images, labels = {}, {}
    for name, n in [(f"data_batch_{i}", per_batch) for i in range(1, 6)] + [("test_batch", test_n)]:
        images[name] = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels[name] = rng.permutation(np.arange(n) % 10).tolist()
        _write_pickle(folder / name, {key("batch_label"): name, key("labels"): labels[name],
                                      key("data"): images[name], key("filenames"): [f"{name}_{i}.png" for i in range(n)]})
    _write_pickle(folder / "batches.meta", {key("label_names"): [f"class{k}" for k in range(10)], key("num_vis"): 3072})
    return folder, images, labels


def build_cifar100(root, rng, *, train_n=200, test_n=100):
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    content = {}
    for name, n in (("train", train_n), ("test", test_n)):
        fine = rng.permutation(np.arange(n) % 100)
        content[name] = (rng.integers(0, 256, (n, 3072), dtype=np.uint8), fine)
        _write_pickle(folder / name, {"filenames": [f"{i}.png" for i in range(n)], "batch_label": name,
                                      "fine_labels": fine.tolist(), "coarse_labels": (fine // 5).tolist(),
                                      "data": content[name][0]})
    _write_pickle(folder / "meta", {"fine_label_names": [f"fine{k}" for k in range(100)],
                                    "coarse_label_names": [f"coarse{k}" for k in range(20)]})
    return folder, content


def build_svhn(root, rng, *, train_n=40, test_n=20):
    """train_32x32.mat / test_32x32.mat: X 32×32×3×N uint8, y N×1 with 10 for the digit 0."""
    folder = root / "svhn"
    folder.mkdir(parents=True)
    content = {}
    for split, n in (("train", train_n), ("test", test_n)):
        digits = rng.permutation(np.arange(n) % 10)
        X = rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
        savemat(folder / f"{split}_32x32.mat", {"X": X, "y": np.where(digits == 0, 10, digits).astype(np.uint8).reshape(n, 1)})
        content[split] = (X, digits)
    return folder, content


WNIDS = ["n02124075", "n01443537", "n04067472"]  # deliberately not sorted


def build_tiny_imagenet(root, rng, *, train_per_class=4, val_per_class=2, grey=True):
    """The unpacked zip's layout; returns the folder and every image as decoded from disk."""
    folder = root / "tiny-imagenet-200"
    (folder / "val" / "images").mkdir(parents=True)
    (folder / "test" / "images").mkdir(parents=True)
    (folder / "wnids.txt").write_text("\n".join(WNIDS) + "\n")
    (folder / "words.txt").write_text("".join(f"{w}\tthing {w}\n" for w in WNIDS))
    decoded = {}

    def save(path, mode="RGB"):
        pixels = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        image = image.convert("L") if mode == "L" else image
        image.save(path, format="JPEG")
        with Image.open(path) as back:
            decoded[path.name] = np.asarray(back.convert("RGB"))

    for wnid in WNIDS:
        images = folder / "train" / wnid / "images"
        images.mkdir(parents=True)
        for i in range(train_per_class):
            save(images / f"{wnid}_{i}.JPEG", mode="L" if grey and i == 0 else "RGB")
        (folder / "train" / wnid / f"{wnid}_boxes.txt").write_text("")
    lines = []
    for j in range(val_per_class * len(WNIDS)):
        wnid = WNIDS[j % len(WNIDS)]
        save(folder / "val" / "images" / f"val_{j}.JPEG")
        lines.append(f"val_{j}.JPEG\t{wnid}\t0\t0\t63\t63\n")
    (folder / "val" / "val_annotations.txt").write_text("".join(lines))
    save(folder / "test" / "images" / "test_0.JPEG")
    return folder, decoded


def make_tar(folder, archive):
    with tarfile.open(archive, "w:gz") as bundle:
        bundle.add(folder, arcname=folder.name)
    return archive


def make_zip(folder, archive):
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.rglob("*")):
            bundle.write(path, arcname=str(path.relative_to(folder.parent)))
    return archive


def trust_members(monkeypatch, name, folder):
    """Point the md5 table of ``sources.<name>`` at the members of ``folder`` (our small files)."""
    source = getattr(sources, name)
    files = {member: md5sum(folder / member) for member in source.files}
    monkeypatch.setattr(sources, name, dataclasses.replace(source, files=files))


def serve_archive(monkeypatch, name, archive, md5=None):
    """Make ``sources.<name>`` download ``archive`` through a file:// URL."""
    source = getattr(sources, name)
    remote = dataclasses.replace(source.archive, url=archive.as_uri(), md5=md5 or md5sum(archive))
    monkeypatch.setattr(sources, name, dataclasses.replace(source, archive=remote))


# ---------------------------------------------------------------- CIFAR


@pytest.mark.parametrize("byte_keys", [False, True])
def test_cifar10_loads_pickles_and_splits(tmp_path, monkeypatch, byte_keys):
    folder, images, labels = build_cifar10(tmp_path, np.random.default_rng(0), byte_keys=byte_keys)
    trust_members(monkeypatch, "CIFAR10", folder)
    ds = data.load("cifar10", root=tmp_path, split_seed=2, val_size=10)
    assert ds.sizes() == {"train": 40, "val": 10, "test": 20}
    assert (ds.num_classes, ds.input_shape) == (10, (3, 32, 32))
    assert ds.meta["class_names"] == [f"class{k}" for k in range(10)]
    assert ds.meta["augmentation"] == {"random_crop_padding": 4, "horizontal_flip": True}
    assert len(ds.meta["mean"]) == len(ds.meta["std"]) == 3
    np.testing.assert_array_equal(np.bincount(ds.val.y.numpy()), np.ones(10))  # stratified: one per class
    pool_x = np.concatenate([images[f"data_batch_{i}"] for i in range(1, 6)]).reshape(-1, 3, 32, 32)
    pool_y = np.concatenate([labels[f"data_batch_{i}"] for i in range(1, 6)])
    for split in ("train", "val"):
        index = ds.split_indices[split]
        np.testing.assert_array_equal(getattr(ds, split).x.numpy(), pool_x[index].astype(np.float32) / 255)
        np.testing.assert_array_equal(getattr(ds, split).y.numpy(), pool_y[index])
    # Channel-major rows: the first 1024 bytes are the red plane of the image.
    np.testing.assert_array_equal(ds.test.x[3, 0].numpy().ravel(), images["test_batch"][3, :1024] / np.float32(255))
    np.testing.assert_array_equal(ds.test.y.numpy(), labels["test_batch"])
    assert ds.meta["pools"] == {"train": "train", "val": "train", "test": "test"}


def test_cifar10_s_keeps_ten_percent_per_class(tmp_path, monkeypatch):
    folder, _, _ = build_cifar10(tmp_path, np.random.default_rng(1), per_batch=100)
    trust_members(monkeypatch, "CIFAR10", folder)
    ds = data.load("cifar10-s", root=tmp_path, val_size=50)
    np.testing.assert_array_equal(np.bincount(ds.train.y.numpy()), np.full(10, 5))  # 10 % of 45 per class, 4.5 rounded up
    assert ds.sizes()["val"] == 50 and ds.sizes()["test"] == 20


def test_cifar_checksum_failure_names_the_file_and_deletes_nothing(tmp_path, monkeypatch):
    folder, _, _ = build_cifar10(tmp_path, np.random.default_rng(0))
    trust_members(monkeypatch, "CIFAR10", folder)
    expected = sources.CIFAR10.files["data_batch_3"]
    with open(folder / "data_batch_3", "ab") as handle:
        handle.write(b"corrupt")
    actual = md5sum(folder / "data_batch_3")
    with pytest.raises(ChecksumError) as error:
        data.load("cifar10", root=tmp_path, val_size=10)
    message = str(error.value)
    assert str(folder / "data_batch_3") in message and expected in message and actual in message
    assert sorted(p.name for p in folder.iterdir()) == sorted(sources.CIFAR10.files)


def test_real_cifar_checksums_reject_fake_files(tmp_path):
    build_cifar10(tmp_path, np.random.default_rng(0))
    with pytest.raises(ChecksumError, match="c99cafc152244af753f735de768cd75f"):
        data.load("cifar10", root=tmp_path)


def test_missing_cifar_without_network_says_where_to_put_it(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("cifar100", root=tmp_path)
    message = str(error.value)
    assert "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz" in message
    assert "eb9058c3a382ffc7106e4002c42a8d85" in message
    assert str(tmp_path / "cifar-100-python.tar.gz") in message and str(tmp_path / "cifar-100-python") in message
    assert list(tmp_path.iterdir()) == []


def test_cifar10_downloads_verifies_and_extracts(tmp_path, monkeypatch):
    staging, root = tmp_path / "staging", tmp_path / "data"
    folder, images, _ = build_cifar10(staging, np.random.default_rng(4))
    trust_members(monkeypatch, "CIFAR10", folder)
    serve_archive(monkeypatch, "CIFAR10", make_tar(folder, tmp_path / "cifar-10-python.tar.gz"))
    ds = data.load("cifar10", root=root, download=True, val_size=10)
    np.testing.assert_array_equal(ds.test.x.numpy(), images["test_batch"].reshape(-1, 3, 32, 32) / np.float32(255))
    assert sorted(p.name for p in root.iterdir()) == ["cifar-10-batches-py", "cifar-10-python.tar.gz"]  # no .part, no scratch
    # The archive alone (saved by hand) is enough without network.
    (root / "cifar-10-batches-py").rename(tmp_path / "moved")
    again = data.load("cifar10", root=root, val_size=10)
    assert again.split_hash == ds.split_hash and torch.equal(again.train.x, ds.train.x)


def test_cifar100_fine_labels(tmp_path, monkeypatch):
    folder, content = build_cifar100(tmp_path, np.random.default_rng(5))
    trust_members(monkeypatch, "CIFAR100", folder)
    ds = data.load("cifar100", root=tmp_path, val_size=100)
    assert ds.sizes() == {"train": 100, "val": 100, "test": 100} and ds.num_classes == 100
    np.testing.assert_array_equal(np.bincount(ds.val.y.numpy(), minlength=100), np.ones(100))
    np.testing.assert_array_equal(ds.test.y.numpy(), content["test"][1])
    np.testing.assert_array_equal(ds.train.x.numpy(), content["train"][0][ds.split_indices["train"]].reshape(-1, 3, 32, 32) / np.float32(255))
    assert ds.meta["class_names"][:2] == ["fine0", "fine1"]


# ---------------------------------------------------------------- the downloader itself


def test_fetch_checksum_failure_keeps_part_and_touches_nothing_else(tmp_path):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(b"some bytes")
    root = tmp_path / "root"
    root.mkdir()
    (root / "other.txt").write_text("keep me")
    remote = sources.RemoteFile(url=payload.as_uri(), filename="payload.bin", md5="0" * 32)
    with pytest.raises(ChecksumError) as error:
        download.fetch(remote, root / "payload.bin", dataset="demo")
    message = str(error.value)
    assert payload.as_uri() in message and "0" * 32 in message and md5sum(payload) in message
    assert sorted(p.name for p in root.iterdir()) == ["other.txt", "payload.bin.part"]
    assert (root / "other.txt").read_text() == "keep me"
    good = dataclasses.replace(remote, md5=md5sum(payload))
    assert download.fetch(good, root / "payload.bin", dataset="demo").read_bytes() == b"some bytes"


def test_fetch_network_failure_explains_the_manual_download(tmp_path, monkeypatch):
    def offline(url):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(download, "_open_url", offline)
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("cifar10", root=tmp_path, download=True)
    message = str(error.value)
    assert sources.CIFAR10.archive.url in message and sources.CIFAR10.archive.md5 in message
    assert str(tmp_path / "cifar-10-python.tar.gz") in message


def test_existing_corrupt_archive_is_reported_not_deleted(tmp_path):
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not the archive")
    with pytest.raises(ChecksumError, match="c58f30108f718f92721af3b95e74349a"):
        data.load("cifar10", root=tmp_path)
    assert (tmp_path / "cifar-10-python.tar.gz").read_bytes() == b"not the archive"


def test_extract_refuses_escaping_members_and_missing_folder(tmp_path):
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as bundle:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 3
        bundle.addfile(info, io.BytesIO(b"bad"))
    (tmp_path / "root").mkdir()
    with pytest.raises(tarfile.FilterError):
        extract(archive, tmp_path / "root", "cifar-10-batches-py")
    assert not (tmp_path / "escaped.txt").exists()
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as bundle:
        bundle.writestr("something/else.txt", "x")
    with pytest.raises(ValueError, match="does not contain the folder 'tiny-imagenet-200'"):
        extract(tmp_path / "other.zip", tmp_path / "root", "tiny-imagenet-200")
    assert list((tmp_path / "root").iterdir()) == []


# ---------------------------------------------------------------- SVHN


def test_svhn_reads_mat_layout_and_maps_label_10_to_0(tmp_path, monkeypatch):
    folder, content = build_svhn(tmp_path, np.random.default_rng(6))
    remotes = {s: dataclasses.replace(r, md5=md5sum(folder / r.filename)) for s, r in sources.SVHN.items()}
    monkeypatch.setattr(sources, "SVHN", remotes)
    ds = data.load("svhn", root=tmp_path, val_size=10)
    assert ds.sizes() == {"train": 30, "val": 10, "test": 20} and ds.input_shape == (3, 32, 32)
    X_test, digits_test = content["test"]
    np.testing.assert_array_equal(ds.test.y.numpy(), digits_test)
    assert (ds.test.y == 0).sum() == 2  # stored as label 10
    for i in (0, 7):
        np.testing.assert_array_equal(ds.test.x[i].numpy(), X_test[:, :, :, i].transpose(2, 0, 1) / np.float32(255))
    X_train, digits_train = content["train"]
    index = ds.split_indices["train"]
    np.testing.assert_array_equal(ds.train.y.numpy(), digits_train[index])
    np.testing.assert_array_equal(ds.train.x.numpy(), X_train[:, :, :, index].transpose(3, 2, 0, 1) / np.float32(255))
    assert ds.meta["augmentation"] == {"random_crop_padding": 4, "horizontal_flip": False}


def test_svhn_checksum_failure_and_missing_files(tmp_path, monkeypatch):
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("svhn", root=tmp_path)
    message = str(error.value)
    for remote in sources.SVHN.values():
        assert remote.url in message and remote.md5 in message and str(tmp_path / "svhn" / remote.filename) in message
    build_svhn(tmp_path, np.random.default_rng(7))
    with pytest.raises(ChecksumError, match="e26dedcc434d2e4c54c9b2d4a06d8373"):
        data.load("svhn", root=tmp_path)
    assert (tmp_path / "svhn" / "train_32x32.mat").exists()


def test_svhn_downloads_both_files(tmp_path, monkeypatch):
    staging, root = tmp_path / "staging", tmp_path / "data"
    folder, content = build_svhn(staging, np.random.default_rng(8))
    remotes = {s: dataclasses.replace(r, url=(folder / r.filename).as_uri(), md5=md5sum(folder / r.filename))
               for s, r in sources.SVHN.items()}
    monkeypatch.setattr(sources, "SVHN", remotes)
    ds = data.load("svhn", root=root, download=True, val_size=10)
    np.testing.assert_array_equal(ds.test.y.numpy(), content["test"][1])
    assert sorted(p.name for p in (root / "svhn").iterdir()) == ["test_32x32.mat", "train_32x32.mat"]


# ---------------------------------------------------------------- Tiny-ImageNet


def test_tiny_imagenet_download_reorganise_and_cache(tmp_path, monkeypatch):
    staging, root = tmp_path / "staging", tmp_path / "data"
    folder, decoded = build_tiny_imagenet(staging, np.random.default_rng(9))
    serve_archive(monkeypatch, "TINY_IMAGENET", make_zip(folder, tmp_path / "tiny-imagenet-200.zip"))
    ds = data.load("tiny_imagenet", root=root, download=True, val_size=3)
    assert ds.sizes() == {"train": 9, "val": 3, "test": 6}
    assert (ds.num_classes, ds.input_shape) == (200, (3, 64, 64))
    classes = sorted(WNIDS)
    assert ds.meta["class_names"] == classes
    np.testing.assert_array_equal(np.bincount(ds.val.y.numpy()), [1, 1, 1])

    # Official val set as test, labelled through val_annotations.txt, classes in sorted order.
    val_files = sorted((classes.index(WNIDS[j % 3]), f"val_{j}.JPEG") for j in range(6))
    np.testing.assert_array_equal(ds.test.y.numpy(), [label for label, _ in val_files])
    expected_test = np.stack([decoded[name] for _, name in val_files]).transpose(0, 3, 1, 2) / np.float32(255)
    np.testing.assert_array_equal(ds.test.x.numpy(), expected_test)
    train_files = [(classes.index(w), f"{w}_{i}.JPEG") for w in classes for i in range(4)]
    expected_train = np.stack([decoded[name] for _, name in train_files]).transpose(0, 3, 1, 2) / np.float32(255)
    pool_y = np.array([label for label, _ in train_files])
    for split in ("train", "val"):
        index = ds.split_indices[split]
        np.testing.assert_array_equal(getattr(ds, split).x.numpy(), expected_train[index])
        np.testing.assert_array_equal(getattr(ds, split).y.numpy(), pool_y[index])

    unpacked = root / "tiny-imagenet-200"
    assert not (unpacked / "val" / "images").exists()
    for j in range(6):
        assert (unpacked / "val" / WNIDS[j % 3] / "images" / f"val_{j}.JPEG").is_file()
    assert (unpacked / CACHE_NAME).is_file() and not list(unpacked.glob("*.part"))

    # Later loads read only the cache.
    for sub in ("train", "val"):
        for path in sorted((unpacked / sub).rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
    again = data.load("tiny_imagenet", root=root, val_size=3)
    assert again.split_hash == ds.split_hash and torch.equal(again.test.x, ds.test.x)


def test_tiny_imagenet_greyscale_becomes_rgb(tmp_path, monkeypatch):
    _folder, decoded = build_tiny_imagenet(tmp_path, np.random.default_rng(10))
    grey_name = f"{WNIDS[0]}_0.JPEG"
    assert decoded[grey_name].shape == (64, 64, 3)
    ds = data.load("tiny_imagenet", root=tmp_path, val_size=3, split_seed=0)
    position = sorted(WNIDS).index(WNIDS[0]) * 4  # first file of its class in the training pool
    split = "train" if position in ds.split_indices["train"] else "val"
    image = getattr(ds, split).x[np.searchsorted(ds.split_indices[split], position)]
    assert torch.equal(image[0], image[1]) and torch.equal(image[1], image[2])
    np.testing.assert_array_equal(image.numpy(), decoded[grey_name].transpose(2, 0, 1) / np.float32(255))


def test_reorganise_val_resumes_and_rejects_unlisted_images(tmp_path):
    folder, _ = build_tiny_imagenet(tmp_path, np.random.default_rng(11), train_per_class=1)
    first = folder / "val" / WNIDS[0] / "images"
    first.mkdir(parents=True)
    (folder / "val" / "images" / "val_0.JPEG").rename(first / "val_0.JPEG")  # an interrupted earlier run
    reorganise_val(folder)
    reorganise_val(folder)  # no-op once done
    assert sorted(p.name for p in (folder / "val").rglob("*.JPEG")) == sorted(f"val_{j}.JPEG" for j in range(6))
    assert not (folder / "val" / "images").exists()

    other, _ = build_tiny_imagenet(tmp_path / "second", np.random.default_rng(12), train_per_class=1)
    Image.new("RGB", (64, 64)).save(other / "val" / "images" / "stray.JPEG")
    with pytest.raises(ValueError, match="stray.JPEG"):
        reorganise_val(other)


def test_tiny_imagenet_rejects_wrong_image_size(tmp_path):
    folder, _ = build_tiny_imagenet(tmp_path, np.random.default_rng(13), train_per_class=1)
    bad = folder / "train" / WNIDS[1] / "images" / f"{WNIDS[1]}_0.JPEG"
    Image.new("RGB", (32, 32)).save(bad, format="JPEG")
    with pytest.raises(ValueError, match=f"{bad}: expected a 64x64 image"):
        data.load("tiny_imagenet", root=tmp_path, val_size=3)


def test_missing_tiny_imagenet_says_where_to_put_it(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("tiny_imagenet", root=tmp_path)
    message = str(error.value)
    assert "http://cs231n.stanford.edu/tiny-imagenet-200.zip" in message
    assert "90528d7ca1a48142e341f4ef8d21d0de" in message and str(tmp_path / "tiny-imagenet-200.zip") in message


# ---------------------------------------------------------------- sha256 checksums (the text archives)


def test_fetch_checks_a_sha256_when_one_is_recorded(tmp_path):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(b"text archive bytes")
    digest = download.sha256sum(payload)
    assert digest == "df79cd6dbbc3d7e2587097caa8352a8b4defd6f164b1d740129acb658bbf6b23"  # sha256 of those bytes
    root = tmp_path / "root"
    wrong = sources.RemoteFile(url=payload.as_uri(), filename="payload.bin", sha256="f" * 64)
    assert wrong.checksum == ("sha256", "f" * 64)
    with pytest.raises(ChecksumError) as error:
        download.fetch(wrong, root / "payload.bin", dataset="demo")
    message = str(error.value)
    assert f"expected sha256 {'f' * 64}, got {digest}" in message
    assert sorted(p.name for p in root.iterdir()) == ["payload.bin.part"]
    # With both recorded, the sha256 decides: a wrong md5 is not consulted.
    both = dataclasses.replace(wrong, sha256=digest, md5="0" * 32)
    assert download.fetch(both, root / "payload.bin", dataset="demo").read_bytes() == b"text archive bytes"
    download.fetch(both, root / "payload.bin", dataset="demo")  # already there: verified, not fetched
    with pytest.raises(ChecksumError, match=f"expected sha256 {'f' * 64}"):
        download.fetch(wrong, root / "payload.bin", dataset="demo")
    assert "(sha256 " + digest + ")" in download.manual_download_hint([(both, root / "payload.bin")])


def test_fetch_refuses_a_file_without_any_checksum(tmp_path):
    remote = sources.RemoteFile(url=(tmp_path / "x").as_uri(), filename="x")
    assert remote.checksum is None
    with pytest.raises(ValueError, match="no checksum is known"):
        download.fetch(remote, tmp_path / "root" / "x", dataset="demo")
    assert not (tmp_path / "root").exists()
    assert "(no checksum known)" in download.manual_download_hint([(remote, tmp_path / "x")])
