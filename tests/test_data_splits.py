"""Splits, subsets, the load() entry point and the download-free datasets."""

import hashlib
import json
import random

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.stats import norm

from focalcal import data
from focalcal.data import mnist_1d, synthetic
from focalcal.data.splits import per_class_subset, resolve_size, split_hash, split_indices

# ---------------------------------------------------------------- split_indices


def _imbalanced_labels(rng):
    counts = np.array([500, 37, 250, 3, 1210])
    return rng.permutation(np.repeat(np.arange(counts.size), counts)), counts


def test_split_indices_partition_and_stratify_imbalanced_classes():
    labels, counts = _imbalanced_labels(np.random.default_rng(5))
    n = labels.size
    out = split_indices(labels, n, {"val": 300, "test": 450}, np.random.default_rng(0))
    assert {k: v.size for k, v in out.items()} == {"val": 300, "test": 450, "train": n - 750}
    everything = np.concatenate(list(out.values()))
    np.testing.assert_array_equal(np.sort(everything), np.arange(n))  # disjoint and complete
    for name, size in (("val", 300), ("test", 450), ("train", n - 750)):
        assert np.all(np.diff(out[name]) > 0)  # sorted
        got = np.bincount(labels[out[name]], minlength=counts.size)
        np.testing.assert_array_less(np.abs(got - size * counts / n), 1.5)


def test_split_indices_balanced_classes_are_exact():
    labels = np.random.default_rng(1).permutation(np.repeat(np.arange(200), 500))  # Tiny-ImageNet train
    out = split_indices(labels, labels.size, {"val": 10000}, np.random.default_rng(3))
    np.testing.assert_array_equal(np.bincount(labels[out["val"]]), np.full(200, 50))
    np.testing.assert_array_equal(np.bincount(labels[out["train"]]), np.full(200, 450))


def test_split_indices_is_seeded():
    labels, _ = _imbalanced_labels(np.random.default_rng(5))
    a = split_indices(labels, labels.size, {"val": 100}, np.random.default_rng(7))
    b = split_indices(labels, labels.size, {"val": 100}, np.random.default_rng(7))
    c = split_indices(labels, labels.size, {"val": 100}, np.random.default_rng(8))
    np.testing.assert_array_equal(a["val"], b["val"])
    assert not np.array_equal(a["val"], c["val"])


def test_split_indices_unstratified_and_too_large():
    out = split_indices(None, 10, {"val": 3}, np.random.default_rng(0), stratify=False)
    assert sorted(np.concatenate([out["val"], out["train"]]).tolist()) == list(range(10))
    with pytest.raises(ValueError, match="no training samples"):
        split_indices(np.zeros(10, int), 10, {"val": 5, "test": 5}, np.random.default_rng(0))


def test_resolve_size():
    assert resolve_size(0.2, 1797, "val_size") == 359
    assert resolve_size(5000, 50000, "val_size") == 5000
    assert resolve_size(0.5, 5, "val_size") == 3  # half up, not to even
    for bad in (0, -1, 1.0, 0.0, "10", True, None):
        with pytest.raises(ValueError, match="val_size"):
            resolve_size(bad, 100, "val_size")


def test_per_class_subset_counts():
    labels, counts = _imbalanced_labels(np.random.default_rng(2))
    keep = per_class_subset(labels, 0.1, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(labels[keep], minlength=5), np.maximum(1, np.floor(0.1 * counts + 0.5)))
    assert np.all(np.diff(keep) > 0) and keep.max() < labels.size
    np.testing.assert_array_equal(keep, per_class_subset(labels, 0.1, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="1-D class labels"):
        per_class_subset(np.zeros((4, 2), int), 0.5, np.random.default_rng(0))


def test_split_hash_matches_hand_computation_and_detects_changes():
    indices = {"train": np.array([0, 2, 5]), "val": np.array([1]), "test": np.array([3, 4])}
    pools = {"train": "all", "val": "all", "test": "all"}
    digest = hashlib.sha256()
    for name in ("train", "val", "test"):
        digest.update(f"{name}:all:{indices[name].size};".encode())
        digest.update(b"".join(int(i).to_bytes(8, "little", signed=True) for i in indices[name]))
    assert split_hash(indices, pools) == digest.hexdigest()
    moved = {**indices, "train": np.array([0, 2, 6])}
    assert split_hash(moved, pools) != digest.hexdigest()
    assert split_hash(indices, {**pools, "test": "test"}) != digest.hexdigest()


# ---------------------------------------------------------------- load(): the interface


def test_available_lists_datasets_and_subset_aliases():
    names = data.available()
    for name in ("synthetic1d", "digits", "mnist1d", "cifar10", "cifar100", "svhn", "tiny_imagenet", "cifar10-s", "mnist1d-s"):
        assert name in names
    assert data.available("segmentation") == ["camvid", "segmentation_folder", "synthetic_segmentation"]
    with pytest.raises(ValueError, match="task"):
        data.available("regression")


def test_an_absolute_val_size_is_carved_from_outside_the_test_fold():
    # hossain2021: 10 folds with Table 1's validation count, e.g. TRUS 4 of 55 (config/studies/hossain2021.yaml)
    k, n = 10, 55
    folds = [data.load("synthetic_segmentation", n_samples=n, size=32, n_folds=k, fold=i, val_size=4) for i in range(k)]
    np.testing.assert_array_equal(np.sort(np.concatenate([f.split_indices["test"] for f in folds])), np.arange(n))
    for f in folds:
        sizes = f.sizes()
        assert sizes["val"] == 4 and sizes["test"] in (5, 6) and sizes["train"] == n - 4 - sizes["test"]
        np.testing.assert_array_equal(np.sort(np.concatenate([f.split_indices[s] for s in ("train", "val", "test")])),
                                      np.arange(n))
        assert f.meta["options"]["val_size"] == 4 and "test_size" not in f.meta["options"]
    with pytest.raises(ValueError, match="leaves no training samples from the 50 samples outside test fold 0"):
        data.load("synthetic_segmentation", n_samples=n, size=32, n_folds=k, fold=0, val_size=50)


def test_load_rejects_unknown_names_and_options():
    with pytest.raises(ValueError, match="unknown dataset 'cifar11'.*cifar10, cifar10-s"):
        data.load("cifar11")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['n_samples'\] for dataset 'digits'; accepted: \['test_size', 'val_size'\]"):
        data.load("digits", n_samples=10)
    with pytest.raises(ValueError, match="test_size"):
        data.load("cifar10", test_size=100)  # official test set: no test_size
    with pytest.raises(ValueError, match="already means subset_fraction"):
        data.load("digits-s", subset_fraction=0.2)
    with pytest.raises(ValueError, match="subset_fraction"):
        data.load("digits", subset_fraction=1.5)
    with pytest.raises(ValueError, match="split_seed"):
        data.load("digits", split_seed=-1)


def test_load_digits_values_sizes_and_constants():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    ds = data.load("digits", split_seed=3)
    assert ds.sizes() == {"train": 1079, "val": 359, "test": 359}
    assert (ds.num_classes, ds.input_shape, ds.name) == (10, (1, 8, 8), "digits")
    for split in ("train", "val", "test"):
        x, y = getattr(ds, split)
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        index = ds.split_indices[split]
        np.testing.assert_array_equal(x.numpy()[:, 0], (bunch.images[index] / 16).astype(np.float32))
        np.testing.assert_array_equal(y.numpy(), bunch.target[index])
        assert np.abs(np.bincount(y.numpy(), minlength=10) - len(y) * np.bincount(bunch.target) / 1797).max() < 1.5
    images = bunch.images / 16
    assert ds.meta["mean"][0] == pytest.approx(images.mean(), abs=1e-4)
    assert ds.meta["std"][0] == pytest.approx(images.std(), abs=1e-4)
    assert ds.meta["augmentation"] == {"random_crop_padding": 0, "horizontal_flip": False}


def test_load_is_deterministic_and_independent_of_global_rng():
    np.random.seed(1)
    torch.manual_seed(1)
    a = data.load("digits", split_seed=11)
    np.random.seed(2)
    torch.manual_seed(2)
    random.seed(2)
    b = data.load("digits", split_seed=11)
    c = data.load("digits", split_seed=12)
    assert a.split_hash == b.split_hash != c.split_hash
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    data.verify_split(b, a.split_hash)
    with pytest.raises(ValueError, match="split of dataset 'digits' has hash"):
        data.verify_split(c, a.split_hash)


def test_split_sizes_are_options():
    ds = data.load("digits", val_size=100, test_size=0.5)
    assert ds.sizes() == {"train": 1797 - 100 - 899, "val": 100, "test": 899}  # 898.5 rounds up


def test_subset_keeps_ten_percent_of_each_train_class_only():
    full = data.load("digits", split_seed=4)
    small = data.load("digits-s", split_seed=4)
    assert small.name == "digits-s" and small.meta["subset_fraction"] == 0.1
    assert torch.equal(full.val.x, small.val.x) and torch.equal(full.test.y, small.test.y)
    assert set(small.split_indices["train"]) < set(full.split_indices["train"])
    full_counts = np.bincount(full.train.y.numpy(), minlength=10)
    np.testing.assert_array_equal(np.bincount(small.train.y.numpy(), minlength=10), np.floor(0.1 * full_counts + 0.5))
    assert small.split_hash != full.split_hash
    quarter = data.load("digits", split_seed=4, subset_fraction=0.25)
    assert quarter.name == "digits-s0.25"
    np.testing.assert_array_equal(np.bincount(quarter.train.y.numpy(), minlength=10), np.floor(0.25 * full_counts + 0.5))


def test_record_is_json_serialisable():
    record = data.load("synthetic1d", n_samples=500).record()
    assert json.loads(json.dumps(record))["split_hash"] == record["split_hash"]
    assert record["sizes"] == {"train": 300, "val": 100, "test": 100}
    assert record["options"] == {"val_size": 0.2, "test_size": 0.2, "n_samples": 500, "data_seed": 0}


# ---------------------------------------------------------------- synthetic 1-D


def _bayes_posterior(x):
    """η from Bayes' rule with scipy's normal pdf: the independent reference."""
    mix = synthetic.THREE_CLASS
    joint = np.stack([p * norm.pdf(x, m, s) for p, m, s in zip(mix.priors, mix.means, mix.stds)], axis=1)
    return joint / joint.sum(axis=1, keepdims=True)


def test_synthetic_posterior_matches_bayes_rule_and_is_finite_far_out():
    x = np.linspace(-8, 8, 161)
    np.testing.assert_allclose(data.posterior(x), _bayes_posterior(x), rtol=1e-10, atol=1e-14)
    far = data.posterior(np.array([-1e3, -60.0, 60.0, 1e3]))  # pdfs underflow to 0 here
    assert np.isfinite(far).all()
    np.testing.assert_allclose(far.sum(axis=1), 1.0)
    assert far[-1].argmax() == 2  # the widest class owns the tails


def test_synthetic_density_is_a_density():
    total, _ = integrate.quad(lambda t: synthetic.THREE_CLASS.density([t])[0], -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-8)


def test_synthetic_has_certain_and_ambiguous_regions():
    max_eta = data.posterior(np.linspace(-5, 5, 1001)).max(axis=1)
    assert max_eta.max() > 0.99 and max_eta.min() < 0.45


def test_synthetic_samples_follow_the_stated_distribution():
    mix = synthetic.THREE_CLASS
    x, y = mix.sample(200_000, np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(y) / y.size, mix.priors, atol=0.005)
    for k in range(3):
        assert x[y == k].mean() == pytest.approx(mix.means[k], abs=0.02)
        assert x[y == k].std() == pytest.approx(mix.stds[k], rel=0.02)
    # Labels given x are drawn from η(x): per bin, the label frequencies equal the mean posterior.
    bins = np.quantile(x, np.linspace(0, 1, 21))
    which = np.clip(np.searchsorted(bins, x, side="right") - 1, 0, 19)
    eta = mix.posterior(x)
    for b in range(20):
        in_bin = which == b
        np.testing.assert_allclose(np.bincount(y[in_bin], minlength=3) / in_bin.sum(), eta[in_bin].mean(axis=0), atol=0.02)


def test_load_synthetic_carries_the_posterior_of_every_split():
    ds = data.load("synthetic1d", n_samples=1000, data_seed=3, split_seed=1)
    assert ds.sizes() == {"train": 600, "val": 200, "test": 200}
    assert (ds.input_shape, ds.num_classes) == ((1,), 3)
    for split in ("train", "val", "test"):
        x = getattr(ds, split).x.numpy()[:, 0]
        np.testing.assert_allclose(ds.meta["posterior"][split], _bayes_posterior(x.astype(np.float64)), rtol=1e-9)
    again = data.load("synthetic1d", n_samples=1000, data_seed=3, split_seed=1)
    assert torch.equal(ds.test.x, again.test.x)
    other = data.load("synthetic1d", n_samples=1000, data_seed=4, split_seed=1)
    assert not torch.equal(ds.test.x, other.test.x)
    with pytest.raises(ValueError, match="n_samples"):
        data.load("synthetic1d", n_samples=5)


# ---------------------------------------------------------------- MNIST-1D


def test_mnist1d_matches_the_package_generator_and_is_cached(tmp_path, monkeypatch):
    from mnist1d.data import get_dataset_args, make_dataset

    np.random.seed(123)
    state_before = np.random.get_state()[1].copy()
    ds = data.load("mnist1d", root=tmp_path, n_samples=200, data_seed=7)
    np.testing.assert_array_equal(np.random.get_state()[1], state_before)  # global RNG untouched
    assert ds.sizes() == {"train": 120, "val": 40, "test": 40}
    assert (ds.input_shape, ds.num_classes) == ((1, 40), 10)
    cache = tmp_path / "mnist1d" / "mnist1d_n200_seed7.npz"
    assert cache.is_file()

    args = get_dataset_args()
    args.num_samples, args.seed = 200, 7
    reference = make_dataset(args)
    pool_x = np.concatenate([reference["x"], reference["x_test"]]).astype(np.float32)
    pool_y = np.concatenate([reference["y"], reference["y_test"]])
    for split in ("train", "val", "test"):
        index = ds.split_indices[split]
        np.testing.assert_array_equal(getattr(ds, split).x.numpy()[:, 0], pool_x[index])
        np.testing.assert_array_equal(getattr(ds, split).y.numpy(), pool_y[index])

    def must_not_run(*args):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(mnist_1d, "generate_mnist1d", must_not_run)
    cached = data.load("mnist1d", root=tmp_path, n_samples=200, data_seed=7)
    assert cached.split_hash == ds.split_hash and torch.equal(cached.train.x, ds.train.x)
    assert not list((tmp_path / "mnist1d").glob("*.part"))


def test_mnist1d_rejects_sizes_the_generator_cannot_make(tmp_path):
    with pytest.raises(ValueError, match="multiple of 10"):
        data.load("mnist1d", root=tmp_path, n_samples=205)


# ---------------------------------------------------------------- generality (segmentation comes later)


def test_targets_of_any_shape_go_through_the_same_interface(fresh_catalog):
    from focalcal.data import RawData

    def toy_masks(root, download, *, n_samples=50):
        rng = np.random.default_rng(0)
        x = rng.random((n_samples, 1, 8, 8)).astype(np.float32)
        return RawData(pools={"all": (x, (x[:, 0] > 0.5).astype(np.int64))})

    data.register("toy_masks", toy_masks, task="segmentation", num_classes=2, val_size=10, test_size=10,
                  augmentation={"random_crop_padding": 0, "horizontal_flip": False})
    assert "toy_masks" in data.available("segmentation")
    assert "toy_masks-s" not in data.available()  # no "-s" alias: subsets are per class
    ds = data.load("toy_masks", n_samples=40)
    assert ds.sizes() == {"train": 20, "val": 10, "test": 10}
    assert ds.train.y.shape == (20, 8, 8) and ds.train.y.dtype == torch.int64
    torch.testing.assert_close(ds.test.y, (ds.test.x[:, 0] > 0.5).long())
    with pytest.raises(ValueError, match="1-D class labels"):
        data.load("toy_masks", subset_fraction=0.5)
    with pytest.raises(ValueError, match="unknown dataset 'toy_masks-s'"):
        data.load("toy_masks-s")
    with pytest.raises(ValueError, match="already declared"):
        data.register("toy_masks", toy_masks, num_classes=2, val_size=1, test_size=1, augmentation={})


# ---------------------------------------------------------------- official val sets, finalise, integer inputs


def test_official_val_pools_are_used_as_they_are(fresh_catalog):
    from focalcal.data import RawData

    sizes = {"train": 12, "val": 5, "test": 7}

    def official(root, download, *, with_val=True):
        pools = {split: (np.arange(n * 3, dtype=np.float64).reshape(n, 3) + 100 * i, np.arange(n) % 2)
                 for i, (split, n) in enumerate(sizes.items()) if with_val or split != "val"}
        return RawData(pools=pools)

    data.register("toy_official", official, num_classes=2, val_size=None, test_size=None, augmentation={})
    assert data.spec("toy_official").options() == {"with_val": True}  # no val_size / test_size to set
    ds = data.load("toy_official", split_seed=5)
    assert ds.sizes() == sizes and ds.meta["pools"] == {"train": "train", "val": "val", "test": "test"}
    for i, split in enumerate(sizes):
        np.testing.assert_array_equal(ds.split_indices[split], np.arange(sizes[split]))
        assert getattr(ds, split).x[0, 0] == 100 * i and getattr(ds, split).x.dtype == torch.float32
    assert data.load("toy_official", split_seed=6).split_hash == ds.split_hash  # nothing is drawn
    np.testing.assert_array_equal(np.bincount(data.load("toy_official", subset_fraction=0.5).train.y.numpy()), [3, 3])
    with pytest.raises(ValueError, match=r"returned pools \['test', 'train'\]; its registration expects \['train', 'val', 'test'\]"):
        data.load("toy_official", with_val=False)
    with pytest.raises(ValueError, match="unknown option"):
        data.load("toy_official", val_size=2)
    with pytest.raises(ValueError, match="val_size=None means official val and test sets"):
        data.register("toy_bad", official, num_classes=2, val_size=None, test_size=3, augmentation={})


def test_finalise_sees_only_the_final_training_split(fresh_catalog):
    from focalcal.data import RawData

    calls = []

    def fitted(root, download, *, break_labels=False):
        words = np.array([f"w{i}" for i in range(40)], dtype=object)
        labels = np.arange(40) % 4

        def finalise(pool, train_indices):
            calls.append((pool, train_indices.copy()))
            known = {word: j for j, word in enumerate(words[train_indices], start=1)}  # 0: not in training
            x = np.array([known.get(word, 0) for word in words], dtype=np.int32)[:, None]
            return RawData(pools={"all": (x, (labels + 1) % 4 if break_labels else labels)}, info={"fitted": True})

        return RawData(pools={"all": (words, labels)}, finalise=finalise, info={"fitted": False})

    data.register("toy_fitted", fitted, num_classes=4, val_size=8, test_size=8, augmentation={})
    ds = data.load("toy_fitted", split_seed=2, subset_fraction=0.5)
    (pool, seen), = calls
    assert pool == "all" and ds.meta["fitted"] is True
    np.testing.assert_array_equal(seen, ds.split_indices["train"])  # after the subset: 12 of 24
    assert ds.sizes() == {"train": 12, "val": 8, "test": 8}
    assert ds.train.x.dtype == torch.int64 and (ds.train.x > 0).all()  # int32 ids become int64
    assert (ds.val.x == 0).all() and (ds.test.x == 0).all()  # nothing of val/test was fitted
    with pytest.raises(ValueError, match="finalise changed the samples or labels of pool 'all'"):
        data.load("toy_fitted", break_labels=True)


def test_to_tensor_keeps_integer_inputs_and_scales_images():
    from focalcal.data.registry import _to_tensor

    ids = _to_tensor(np.array([[0, 5, 70000]], dtype=np.int32))
    assert ids.dtype == torch.int64 and ids.tolist() == [[0, 5, 70000]]
    assert _to_tensor(np.array([-1, 2], dtype=np.int64)).dtype == torch.int64
    image = _to_tensor(np.array([0, 51, 255], dtype=np.uint8))
    assert image.dtype == torch.float32 and torch.allclose(image, torch.tensor([0.0, 0.2, 1.0]))
    assert _to_tensor(np.array([0.5], dtype=np.float64)).dtype == torch.float32
    assert _to_tensor(np.array([True, False])).dtype == torch.float32
