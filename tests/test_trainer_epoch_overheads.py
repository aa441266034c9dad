"""What an epoch spends outside the step: its phases timed (``Trainer.timings``), the checkpoint
copied to the CPU and written in a background thread (the same bytes; waited for before the next
write, at the end of ``fit``, on errors, and before anything reads it; a run whose last write
died resumes from the last complete checkpoint, to the same logits), and evaluation read back
once per split, not per batch."""

import io
import threading

import numpy as np
import pandas as pd
import pytest
import torch

from focalcal.training import RunConfig, Trainer, train_run
from focalcal.training import trainer as trainer_module
from focalcal.training.checkpoint import BackgroundWriter, cpu_snapshot, load_checkpoint
from focalcal.training.trainer import PHASES


def make_config(epochs=3):
    return RunConfig.from_dict({
        "dataset": {"name": "synthetic1d", "n_samples": 600}, "model": {"name": "mlp", "hidden": 16},
        "loss": {"name": "focal", "gamma": 2}, "seed": 5, "device": "cpu",
        "recipe": {"epochs": epochs, "batch_size": 64, "lr_milestones": [2], "reliability_epochs": [2],
                   "gradient_norm_epochs": [2], "eval_batch_size": 50,
                   "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4}},
    })


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_root):
    run_dir = tmp_path_factory.mktemp("full")
    trainer = train_run(make_config(), run_dir, data_root=data_root, progress=False)
    return run_dir, trainer


def test_every_epoch_has_its_phases_timed(uninterrupted):
    _, trainer = uninterrupted
    assert [t["epoch"] for t in trainer.timings] == [1, 2, 3]
    for timing in trainer.timings:
        assert set(timing) == {"epoch", *PHASES, "other", "total", "checkpoint_write"}
        phases = [timing[p] for p in (*PHASES, "other")]
        assert all(s >= 0 for s in phases) and timing["train"] > 0 and timing["evaluate"] > 0
        assert sum(phases) == pytest.approx(timing["total"], rel=1e-6, abs=1e-6)
        assert timing["checkpoint_write"] > 0  # the background write's own seconds, joined later
    # epoch 2 also passes over the training set for its reliability table and gradient norms
    assert trainer.timings[1]["diagnostics"] > trainer.timings[0]["diagnostics"]
    assert sorted(pd.read_csv(uninterrupted[0] / "train_gradient_norms.csv")["epoch"].unique()) == [2]


def test_the_snapshot_writes_the_bytes_of_the_live_state(uninterrupted, data_root):
    run_dir, _ = uninterrupted
    trainer = Trainer(make_config(), run_dir, data_root=data_root, progress=False)
    trainer.resume_if_possible()
    state = trainer.state()

    def saved(value) -> bytes:
        buffer = io.BytesIO()
        torch.save(value, buffer)
        return buffer.getvalue()

    snapshot = cpu_snapshot(state)
    assert saved(snapshot) == saved(state)
    # tied tensors stay tied, distinct empty ones distinct: the same storages, so the same bytes
    tied = torch.arange(12.0).reshape(3, 4)
    extra = {"tied": [tied, tied[1:], tied.t()], "empty": [torch.empty(0), torch.empty(0)]}
    copied = cpu_snapshot(extra)
    assert saved(copied) == saved(extra)
    assert copied["tied"][1].untyped_storage().data_ptr() == copied["tied"][0].untyped_storage().data_ptr()
    # training on does not reach the copy
    weight = next(iter(state["model"]))
    before = snapshot["model"][weight].clone()
    trainer.model.state_dict()[weight].add_(1.0)
    assert torch.equal(snapshot["model"][weight], before)
    assert not torch.equal(state["model"][weight], before)


def test_the_write_runs_in_the_background_and_is_waited_for(tmp_path, data_root, monkeypatch):
    release, started = threading.Event(), threading.Event()
    real_save = trainer_module.atomic_torch_save

    def slow_save(state, path):
        started.set()
        assert release.wait(timeout=60)
        real_save(state, path)

    monkeypatch.setattr(trainer_module, "atomic_torch_save", slow_save)
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    assert not trainer.background_checkpoint  # on the CPU the write shares the training's cores: in place
    trainer.background_checkpoint = True  # as on a GPU
    trainer.save()  # returns while its write waits
    assert started.wait(timeout=60) and trainer._writer.pending and not (tmp_path / "checkpoint.pt").exists()
    release.set()
    trainer.wait_for_checkpoint()
    assert not trainer._writer.pending and load_checkpoint(tmp_path / "checkpoint.pt")["epochs_done"] == 0
    # written in place when asked: save() returns with the file written
    (tmp_path / "checkpoint.pt").unlink()
    trainer.background_checkpoint = False
    trainer.save()
    assert (tmp_path / "checkpoint.pt").exists() and not trainer._writer.pending


@pytest.mark.parametrize("background", [False, True], ids=["in place (CPU)", "in the background (GPU)"])
def test_a_failed_write_is_raised_and_the_run_resumes_from_the_last_complete_checkpoint(uninterrupted, tmp_path,
                                                                                          data_root, monkeypatch,
                                                                                          background):
    """Epoch 2's write dies half-way (a full disk, a kill): fit raises it when it waits for the write,
    the checkpoint on disk is epoch 1's, and a fresh trainer resumes from it to the same logits."""
    real_save = trainer_module.atomic_torch_save
    calls = {"n": 0}

    def dies_on_the_second(state, path):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real_save(state, path)

    monkeypatch.setattr(trainer_module, "atomic_torch_save", dies_on_the_second)
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    trainer.background_checkpoint = background
    with pytest.raises(OSError, match="No space left on device"):
        trainer.fit(stop_after_epoch=2)
    assert load_checkpoint(tmp_path / "checkpoint.pt")["epochs_done"] == 1
    monkeypatch.setattr(trainer_module, "atomic_torch_save", real_save)
    resumed = train_run(make_config(), tmp_path, data_root=data_root, progress=False)
    assert resumed.epochs_done == 3 and [t["epoch"] for t in resumed.timings] == [2, 3]
    full, again = np.load(uninterrupted[0] / "logits.npz"), np.load(tmp_path / "logits.npz")
    for key in ("val_logits", "test_logits"):
        assert np.array_equal(full[key], again[key]), key


def test_an_error_in_training_waits_for_the_write_before_it_leaves(tmp_path, data_root, monkeypatch):
    release = threading.Event()
    real_save = trainer_module.atomic_torch_save
    monkeypatch.setattr(trainer_module, "atomic_torch_save",
                        lambda state, path: (release.wait(timeout=60), real_save(state, path)))
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    trainer.background_checkpoint = True  # as on a GPU: epoch 1's write still runs when epoch 2 fails
    real_train = trainer.train_one_epoch

    def fails_in_epoch_2(epoch):
        if epoch == 2:
            release.set()  # epoch 1's write is still waiting here
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_train(epoch)

    trainer.train_one_epoch = fails_in_epoch_2
    with pytest.raises(RuntimeError, match="illegal memory access"):
        trainer.fit()
    assert not trainer._writer.pending and load_checkpoint(tmp_path / "checkpoint.pt")["epochs_done"] == 1


def test_evaluation_reads_each_split_back_once(tmp_path, data_root, monkeypatch):
    """600 samples → 120 val and 120 test at eval batches of 50: three batches each, one read-back each."""
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    reads = {"cpu": 0, "item": 0}
    real_cpu, real_float = torch.Tensor.cpu, torch.Tensor.__float__

    def counting_cpu(self, *args, **kwargs):
        reads["cpu"] += 1
        return real_cpu(self, *args, **kwargs)

    def counting_float(self):
        reads["item"] += 1
        return real_float(self)

    monkeypatch.setattr(torch.Tensor, "cpu", counting_cpu)
    monkeypatch.setattr(torch.Tensor, "__float__", counting_float)
    logits = trainer.predict(trainer.eval_splits["val"][0])
    assert logits.shape[0] == 120 and reads["cpu"] == 1
    reads["item"] = 0
    trainer.batched_loss(trainer.predict_on_device(trainer.eval_splits["val"][0]), trainer.eval_splits["val"][1])
    assert reads["item"] == 1  # the split's summed loss, read once


def test_the_batched_loss_is_the_python_sum_of_its_batches(tmp_path, data_root):
    trainer = Trainer(make_config(), tmp_path, data_root=data_root, progress=False)
    inputs, labels = trainer.eval_splits["test"]
    logits = trainer.predict(inputs)
    expected = 0.0
    for start in range(0, labels.shape[0], 50):  # the loop it replaced: a Python float per batch
        part = slice(start, start + 50)
        expected += float(trainer.loss_fn(logits[part], labels[part])) * labels[part].shape[0]
    assert trainer.batched_loss(logits, labels) == expected / labels.shape[0]  # the same double, bit for bit


def test_the_writer_reports_each_write_once():
    writer = BackgroundWriter()
    assert writer.join() is None
    done = []
    writer.submit(lambda: done.append(1))
    seconds = writer.join()
    assert done == [1] and seconds is not None and seconds >= 0 and writer.join() is None
    writer.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        writer.join()
    assert writer.join() is None
    in_place = BackgroundWriter(background=False)  # the CPU's: the write runs in submit, its error raised there
    in_place.submit(lambda: done.append(2))
    assert done == [1, 2] and not in_place.pending and in_place.join() >= 0
    with pytest.raises(ZeroDivisionError):
        in_place.submit(lambda: 1 / 0)
    assert in_place.join() is None
