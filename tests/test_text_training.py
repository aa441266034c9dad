"""The text models trained by the Trainer on their offline stand-ins: the data set decides the
vocabulary size and the tree nodes' classes, padding nodes are skipped by every loss, the
reported weights are the best validation accuracy's, and each model learns its stand-in."""

import json

import numpy as np
import pytest

from focalcal.training import RunConfig, train_run

TOPICS = {"name": "synthetic_topics", "n_documents": 1200, "document_length": 40, "sequence_length": 60,
          "overlap": 0.2}
TREEBANK = {"name": "synthetic_treebank", "n_sentences": 400}


def _run(tmp_path, dataset, model, loss, optimizer, epochs, batch_size):
    config = RunConfig.from_dict({
        "dataset": dataset, "model": model, "loss": loss, "seed": 0, "device": "cpu",
        "recipe": {"epochs": epochs, "batch_size": batch_size, "optimizer": optimizer, "select": "best_val_accuracy"},
    })
    trainer = train_run(config, tmp_path / loss["name"], data_root=tmp_path / "data", progress=False)
    logits = np.load(tmp_path / loss["name"] / "logits.npz")
    info = json.loads((tmp_path / loss["name"] / "run.json").read_text())
    accuracy = float((logits["test_logits"].argmax(1) == logits["test_labels"]).mean())
    return trainer, logits, info, accuracy


def test_global_pooling_cnn_learns_the_synthetic_topics(tmp_path):
    model = {"name": "global_pooling_cnn", "embedding_dim": 32, "filters": 32, "hidden": 32, "freeze_embeddings": False}
    trainer, logits, info, accuracy = _run(tmp_path, TOPICS, model, {"name": "cross_entropy"},
                                           {"name": "adam", "lr": 0.003, "weight_decay": 0.0}, epochs=12, batch_size=32)
    assert logits["test_logits"].shape[1] == 20
    assert accuracy > 0.15  # chance is 0.05 (a few seconds of training on 720 short documents)
    assert trainer.model.embedding.num_embeddings == trainer.dataset.meta["vocab_size"]  # from the data set
    assert info["embedding_source"].startswith("random initialisation")
    assert 1 <= info["best_epoch"] <= 12


@pytest.mark.parametrize("loss", [{"name": "cross_entropy"}, {"name": "focal", "gamma": 3.0},
                                  {"name": "mmce", "lam": 8.0}, {"name": "brier"}], ids=["ce", "fl3", "mmce", "brier"])
def test_tree_lstm_trains_on_every_node_and_learns_the_synthetic_treebank(tmp_path, loss):
    model = {"name": "tree_lstm", "embedding_dim": 24, "memory_dim": 24}
    trainer, logits, info, accuracy = _run(tmp_path, TREEBANK, model, loss,
                                           {"name": "adagrad", "lr": 0.05, "weight_decay": 1e-4}, epochs=6,
                                           batch_size=25)
    assert trainer.loss_fn.ignore_index == -100  # the padding nodes' target, from the data set
    assert trainer.model.classifier.out_features == 3  # negative, positive, neutral nodes
    assert logits["test_logits"].shape[1] == 2  # the root's negative and positive outputs
    history = trainer.history
    labelled_nodes = int((trainer.train_y != -100).sum())
    assert labelled_nodes > len(trainer.train_y)  # every node's label trains, not only the roots
    assert all(np.isfinite(row["train_nll"]) for row in history)
    assert accuracy > 0.65  # chance is about 0.5
    assert info["config"]["recipe"]["select"] == "best_val_accuracy"


def test_the_workflow_training_job_stages_a_tree_runs_root_logits_for_export(tmp_path):
    """A tree model's training targets are per node, but its run is a classifier: the training job
    stages root logits and run.json (not a segmentation evaluation), and export publishes them."""
    from focalcal.pipeline import jobs

    identity = {"dataset": TREEBANK, "model": {"name": "tree_lstm", "embedding_dim": 8, "memory_dim": 8},
                "loss": {"name": "cross_entropy"}, "seed": 0,
                "recipe": {"epochs": 1, "batch_size": 50, "optimizer": {"name": "adagrad", "lr": 0.05, "weight_decay": 0.0},
                           "reliability_epochs": [1], "gradient_norm_epochs": [1]}}
    run_dir = tmp_path / "run"
    jobs.train(identity, {"device": "cpu", "compile": "none"}, run_dir, tmp_path / "data", threads=1)
    jobs.export_logits(run_dir, tmp_path / "data", threads=1)
    logits = np.load(run_dir / "logits.npz")
    assert logits["val_logits"].shape[1] == 2 and logits["test_labels"].ndim == 1
    assert json.loads((run_dir / "run.json").read_text())["health"]["status"] in {"trained", "not converged",
                                                                                 "collapsed"}
    assert not (run_dir / "train_reliability.csv").exists()  # training-set diagrams need one label per sample


@pytest.mark.parametrize("name", __import__("focalcal.losses", fromlist=["available"]).available())
def test_every_loss_of_the_registry_trains_the_tree_lstm_on_its_nodes(name):
    """mukhoti2020's text rows train all 11 losses; every registry loss takes the Tree-LSTM's node
    logits (N, 3, M) unchanged, skips the padding nodes (target -100: zero gradient there) and
    gives finite gradients, with the trainer's hooks called as the trainer calls them."""
    import torch

    from focalcal import losses, models

    torch.manual_seed(0)
    model = models.build("tree_lstm", 2, vocab_size=60, embedding_dim=8, memory_dim=8).train()
    trees = models.spec("tree_lstm").example_input(4, generator=torch.Generator().manual_seed(1))
    trees[:, :, 0] = torch.where(trees[:, :, 0] >= 0, trees[:, :, 0] % 60, trees[:, :, 0])
    trees = torch.cat([trees, torch.full((4, 5, 4), -1)], dim=1)  # padding nodes, as in a batch of unequal trees
    targets = torch.randint(0, 3, trees.shape[:2]).masked_fill(trees[:, :, 3] < 0, -100)
    loss_fn = losses.build({"name": name, "ignore_index": -100})
    for hook, arguments in (("set_training_targets", (targets, 3)), ("set_epoch", (0, 10))):
        if hasattr(loss_fn, hook):
            getattr(loss_fn, hook)(*arguments)
    logits = model(trees)
    logits.retain_grad()
    loss = loss_fn(logits, targets)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    padding = (trees[:, :, 3] < 0).unsqueeze(1).expand_as(logits)
    assert padding.any() and float(logits.grad[padding].abs().max()) == 0.0


def _sst_recipe_trainer(tmp_path, **recipe):
    from focalcal.training.trainer import Trainer

    config = RunConfig.from_dict({
        "dataset": {"name": "synthetic_treebank", "n_sentences": 60},
        "model": {"name": "tree_lstm", "embedding_dim": 8, "memory_dim": 6, "dropout": 0.0},
        "loss": {"name": "cross_entropy"}, "seed": 0, "device": "cpu",
        "recipe": {"epochs": 1, "batch_size": 1000, "optimizer": {"name": "adagrad", "lr": 0.05, "weight_decay": 1e-4},
                   **recipe},
    })
    return Trainer(config, tmp_path / "run", data_root=tmp_path / "data", progress=False)


def test_sst_recipe_steps_word_vectors_by_plain_sgd_and_the_rest_by_adagrad_on_summed_tree_losses(tmp_path):
    """One step of the released SST recipe (treeLSTM/trainer.py), computed by hand: the objective
    is each tree's summed node losses over the batch's trees; the word vectors move by
    −0.1 × gradient (no decay), every other weight by AdaGrad's first step with decay 1e-4."""
    import copy

    import torch
    import torch.nn.functional as F

    trainer = _sst_recipe_trainer(tmp_path, loss_reduction="mean_of_sums", embedding_lr=0.1)
    before = copy.deepcopy(trainer.model)
    trainer.train_one_epoch(1)  # batch 1000 > 42 training trees: one step
    before.train()
    trees = trainer.train_y.shape[0]
    node_losses = F.cross_entropy(before(trainer.train_x), trainer.train_y, ignore_index=-100, reduction="none")
    per_tree = node_losses.sum(dim=1)  # padding nodes add 0
    (per_tree.sum() / trees).backward()
    vectors, gradient = before.embedding.weight.detach(), before.embedding.weight.grad
    torch.testing.assert_close(trainer.model.embedding.weight.detach(), vectors - 0.1 * gradient, rtol=0, atol=1e-6)
    untouched = gradient.abs().sum(dim=1) == 0  # ids 0 and 1 (no tree holds them): no decay moves them
    assert untouched[:2].all()
    assert torch.equal(trainer.model.embedding.weight[untouched], vectors[untouched])
    weight = before.classifier.weight.detach()
    decayed = before.classifier.weight.grad + 1e-4 * weight
    adagrad = weight - 0.05 * decayed / (decayed.abs() + 1e-10)  # first step: sqrt(g²) = |g|
    torch.testing.assert_close(trainer.model.classifier.weight.detach(), adagrad, rtol=0, atol=1e-6)
    # The trainer's objective for this reduction is that scaling of the per-node mean loss.
    targets = torch.tensor([[0, 2, 1, -100], [1, -100, -100, -100]])
    assert float(trainer.objective(torch.tensor(0.6), targets)) == pytest.approx(0.6 * 4 / 2, rel=1e-7)


def test_embedding_lr_refuses_a_model_whose_vectors_are_frozen(tmp_path):
    config = RunConfig.from_dict({
        "dataset": dict(TOPICS), "model": {"name": "global_pooling_cnn", "embedding_dim": 8, "filters": 8, "hidden": 8},
        "loss": {"name": "cross_entropy"}, "device": "cpu", "recipe": {"epochs": 1, "embedding_lr": 0.1}})
    from focalcal.training.trainer import Trainer

    with pytest.raises(ValueError, match="recipe.embedding_lr steps the word vectors, but model 'global_pooling_cnn' "
                                         "freezes them"):
        Trainer(config, tmp_path / "run", data_root=tmp_path / "data", progress=False)
    with pytest.raises(ValueError, match=r"recipe\.embedding_lr must be a real number in \(0, inf\) or None"):
        RunConfig.from_dict({**config.to_dict(), "recipe": {"embedding_lr": 0.0}})


def test_the_study_files_text_grids_switch_flsc_gamma_at_the_released_scripts_epochs():
    """sst_train.py switches γ at epochs 3 and 7 of 25; 20newsgroup_train.py at int(50·100/350) = 14
    and int(50·250/350) = 35 of 50 (0-based epochs)."""
    from pathlib import Path

    import yaml

    from focalcal import losses

    study = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/studies/mukhoti2020.yaml").read_text())
    expected = {"sst": [3, 7], "20newsgroups": [14, 35]}
    seen = set()
    for grid in study["studies"]["mukhoti2020"]["grids"]:
        dataset = grid["datasets"][0]
        epochs = study["recipes"][grid["recipe"]]["epochs"]
        for key in grid["losses"]:
            loss = losses.build(study["losses"][key])
            if not isinstance(loss, losses.ScheduledFocalLoss):
                continue
            gammas = [loss.gamma_at(epoch, epochs) for epoch in range(epochs)]
            switches = [epoch for epoch in range(1, epochs) if gammas[epoch] != gammas[epoch - 1]]
            assert switches == expected.get(dataset, [round(2 / 7 * epochs), round(5 / 7 * epochs)]), (dataset, key)
            assert gammas[0] == 5.0 and gammas[-1] in (1.0, 2.0)
            seen.add(dataset)
    assert {"sst", "20newsgroups"} <= seen
