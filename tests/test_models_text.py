"""mukhoti2020's text models: the 20 Newsgroups Global Pooling CNN and the SST Tree-LSTM.

The level-by-level batched Tree-LSTM is checked against a one-tree-at-a-time, one-node-at-a-
time recursive implementation written here from the equations (Tai et al. 2015 binary
Tree-LSTM as in torrvision/focal_calibration treeLSTM/model.py), reading the same parameters.

``python tests/test_models_text.py`` prints the Tree-LSTM's CPU speed on SST-sized batches.
"""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from focalcal.models import build, count_parameters, last_layer, spec
from focalcal.models.tree_lstm import encode_tree, example_trees, pad_trees, random_tree

NEG, POS, NEUTRAL = 0, 1, 2


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def small_tree_lstm(**options):
    defaults = {"vocab_size": 30, "embedding_dim": 6, "memory_dim": 5, "dropout": 0.0}
    return build("tree_lstm", 2, **{**defaults, **options})


# --------------------------------------------------------------------------- reference Tree-LSTM


def reference_node_logits(model, rows: list[list[int]]) -> dict[int, torch.Tensor]:
    """Logits of every node of one encoded tree, recursing from the root one node at a time."""
    d = model.memory_dim
    emb = model.embedding.weight
    w_leaf, b_leaf = model.leaf.weight, model.leaf.bias
    w_l, b_l = model.compose_left.weight, model.compose_left.bias
    w_r, b_r = model.compose_right.weight, model.compose_right.bias
    block = lambda k: slice(k * d, (k + 1) * d)  # gate k's rows: i, f_left, f_right, u, o
    hidden = {}

    def visit(index: int):
        word, left, right, _ = rows[index]
        if left == -1:  # leaf: c = W_c x + b_c, h = sigmoid(W_o x + b_o) * tanh(c)
            x = emb[word]
            c = w_leaf[block(0)] @ x + b_leaf[block(0)]
            h = torch.sigmoid(w_leaf[block(1)] @ x + b_leaf[block(1)]) * torch.tanh(c)
        else:
            c_left, h_left = visit(left)
            c_right, h_right = visit(right)

            def gate(k):
                return w_l[block(k)] @ h_left + b_l[block(k)] + w_r[block(k)] @ h_right + b_r[block(k)]

            c = (torch.sigmoid(gate(0)) * torch.tanh(gate(3)) + torch.sigmoid(gate(1)) * c_left
                 + torch.sigmoid(gate(2)) * c_right)
            h = torch.tanh(c)
            if model.output_gate:
                h = torch.sigmoid(gate(4)) * h
        hidden[index] = h
        return c, h

    visit(0)
    return {i: model.classifier.weight @ h + model.classifier.bias for i, h in hidden.items()}


def left_chain(words):
    tree = words[0]
    for word in words[1:]:
        tree = (tree, word)
    return tree


def right_chain(words):
    tree = words[-1]
    for word in reversed(words[:-1]):
        tree = (word, tree)
    return tree


def shuffled_rows(rows: list[list[int]], rng: random.Random) -> list[list[int]]:
    """The same tree with its non-root nodes renumbered at random (root stays row 0)."""
    perm = [0] + rng.sample(range(1, len(rows)), len(rows) - 1)  # old index -> new index
    new = [None] * len(rows)
    for old, (word, left, right, height) in enumerate(rows):
        new[perm[old]] = [word, perm[left] if left >= 0 else -1, perm[right] if right >= 0 else -1, height]
    return new


def tree_zoo(vocab_size: int = 30, seed: int = 0) -> list[list[list[int]]]:
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    words = lambda n: [rng.randrange(vocab_size) for _ in range(n)]
    trees = [5, (1, 2), left_chain(words(9)), right_chain(words(7)), ((1, 2), (3, 4))]
    trees += [random_tree(words(n), generator) for n in (3, 6, 11, 19, 19, 25)]
    encoded = [encode_tree(tree) for tree in trees]
    return encoded + [shuffled_rows(rows, rng) for rows in encoded[5:8]]


def batched_outputs(model, encoded, num_nodes=None):
    batch = pad_trees(encoded, num_nodes)
    model.train()
    nodes = model(batch)
    model.eval()
    roots = model(batch)
    return nodes, roots


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("output_gate", [False, True])
def test_batched_tree_lstm_matches_the_recursive_reference(dtype, output_gate):
    model = small_tree_lstm(output_gate=output_gate).to(dtype)
    encoded = tree_zoo()
    atol = 1e-5 if dtype == torch.float32 else 1e-12
    for num_nodes in (None, max(map(len, encoded)) + 7):  # padding to a longer M changes nothing
        nodes, roots = batched_outputs(model, encoded, num_nodes)
        m = nodes.shape[2]
        assert nodes.shape == (len(encoded), 3, m) and roots.shape == (len(encoded), 2)
        for i, rows in enumerate(encoded):
            with torch.no_grad():
                expected = reference_node_logits(model, rows)
            for node, logits in expected.items():
                torch.testing.assert_close(nodes[i, :, node], logits, rtol=0, atol=atol)
            torch.testing.assert_close(roots[i], expected[0][:2], rtol=0, atol=atol)
            assert (nodes[i, :, len(rows):] == 0).all()  # padding positions


def test_a_tree_gives_the_same_outputs_alone_and_in_any_batch():
    model = small_tree_lstm()
    encoded = tree_zoo()
    nodes, roots = batched_outputs(model, encoded)
    for i in (0, 2, 8):
        alone_nodes, alone_root = batched_outputs(model, [encoded[i]])
        torch.testing.assert_close(alone_nodes[0], nodes[i, :, : len(encoded[i])], rtol=0, atol=1e-6)
        torch.testing.assert_close(alone_root[0], roots[i], rtol=0, atol=1e-6)


def test_batched_gradients_match_the_reference():
    model = small_tree_lstm(output_gate=True).double()
    encoded = tree_zoo()[:9]
    weights = [torch.randn(len(rows), 3, dtype=torch.float64) for rows in encoded]

    model.train()
    nodes = model(pad_trees(encoded))
    batched_loss = sum((nodes[i, :, : len(rows)].T * w).sum() for i, (rows, w) in enumerate(zip(encoded, weights)))
    batched = torch.autograd.grad(batched_loss, list(model.parameters()))

    reference_loss = 0
    for rows, w in zip(encoded, weights):
        logits = reference_node_logits(model, rows)
        reference_loss = reference_loss + sum((logits[node] * w[node]).sum() for node in logits)
    reference = torch.autograd.grad(reference_loss, list(model.parameters()))

    for (name, _), got, want in zip(model.named_parameters(), batched, reference):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12, msg=name)
    assert batched[0].abs().sum() > 0  # the (tuned) embedding is reached


# --------------------------------------------------------------------------- learning


def test_global_pooling_cnn_learns_topics_from_token_presence():
    """20 Newsgroups in miniature: class k's documents draw half their tokens from its own
    10-word topic vocabulary, the rest from shared filler words; frozen random embeddings."""
    generator = torch.Generator().manual_seed(0)
    k, length, vocab, topic = 4, 40, 100, 10

    def documents(n):
        labels = torch.randint(k, (n,), generator=generator)
        filler = torch.randint(2 + k * topic, vocab, (n, length), generator=generator)
        topical = 2 + labels[:, None] * topic + torch.randint(topic, (n, length), generator=generator)
        x = torch.where(torch.rand(n, length, generator=generator) < 0.5, topical, filler)
        x[:, :5] = 0  # front padding
        return x, labels

    model = build("global_pooling_cnn", k, vocab_size=vocab, embedding_dim=32, filters=16, hidden=16)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    model.train()
    for _ in range(150):
        x, y = documents(32)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    x, y = documents(500)
    with torch.no_grad():
        accuracy = (model.eval()(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.9  # chance: 0.25


GOOD, BAD, NOT = 1, 2, 3  # word ids; 4.. are neutral filler words


def sentiment_tree(rng: random.Random):
    """A sentence with one sentiment word and 0-2 negations, each wrapped around a subtree
    holding it; node labels follow: "not X" flips X, a phrase takes its sentiment word's."""
    words = [rng.randrange(4, 12) for _ in range(rng.randint(1, 5))]
    words.insert(rng.randrange(len(words) + 1), rng.choice([GOOD, BAD]))
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    tree = random_tree(words, generator)
    for _ in range(rng.choice([0, 1, 1, 2])):
        tree = negate_somewhere(tree, rng)
    return tree


def negate_somewhere(tree, rng):
    if isinstance(tree, int) or rng.random() < 0.4:
        return (NOT, tree)
    left, right = tree
    if holds_sentiment(left):
        return (negate_somewhere(left, rng), right)
    return (left, negate_somewhere(right, rng))


def holds_sentiment(tree) -> bool:
    return tree in (GOOD, BAD) if isinstance(tree, int) else holds_sentiment(tree[0]) or holds_sentiment(tree[1])


def node_labels(tree, labels: list[int]) -> int:
    """Pre-order labels (the encode_tree order) of every node."""
    index = len(labels)
    labels.append(NEUTRAL)
    if isinstance(tree, int):
        labels[index] = {GOOD: POS, BAD: NEG}.get(tree, NEUTRAL)
    else:
        left, right = node_labels(tree[0], labels), node_labels(tree[1], labels)
        if tree[0] == NOT and right != NEUTRAL:
            labels[index] = 1 - right
        else:
            labels[index] = left if left != NEUTRAL else right
    return labels[index]


def sentiment_batch(n: int, rng: random.Random):
    trees = [sentiment_tree(rng) for _ in range(n)]
    labels = []
    for tree in trees:
        labels.append([])
        node_labels(tree, labels[-1])
    x = pad_trees([encode_tree(tree) for tree in trees])
    targets = torch.full(x.shape[:2], -100, dtype=torch.int64)
    for i, row in enumerate(labels):
        targets[i, : len(row)] = torch.tensor(row)
    return x, targets


def test_tree_lstm_learns_sentiment_with_negation():
    rng = random.Random(0)
    model = build("tree_lstm", 2, vocab_size=12, embedding_dim=16, memory_dim=32, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(250):
        x, targets = sentiment_batch(25, rng)
        model.train()
        optimizer.zero_grad()
        F.cross_entropy(model(x), targets, ignore_index=-100).backward()
        optimizer.step()
    x, targets = sentiment_batch(1000, rng)
    negated = x[:, 1, 0] == NOT  # the root is "not (...)"
    with torch.no_grad():
        correct = model.eval()(x).argmax(1) == targets[:, 0]
    assert correct.float().mean() > 0.9  # chance: 0.5
    assert correct[negated].float().mean() > 0.85  # negation is composed, not ignored


# --------------------------------------------------------------------------- shapes, options, errors


def test_tree_lstm_train_and_eval_output_shapes():
    x = pad_trees([encode_tree(t) for t in [(1, (2, 3)), 4]], num_nodes=9)
    model = build("tree_lstm", 2, vocab_size=10)
    assert model.train()(x).shape == (2, 3, 9)  # node logits, neutral included
    assert model.eval()(x).shape == (2, 2)  # root logits, neutral dropped
    no_neutral = build("tree_lstm", 5, vocab_size=10, node_classes=5)  # fine-grained SST: 5 classes everywhere
    assert no_neutral.train()(x).shape == (2, 5, 9) and no_neutral.eval()(x).shape == (2, 5)
    with pytest.raises(ValueError, match="node_classes"):
        build("tree_lstm", 3, vocab_size=10, node_classes=2)


def test_eval_drops_exactly_the_neutral_logit_of_the_root():
    model = small_tree_lstm(dropout=0.3)
    x = pad_trees([encode_tree(((1, 2), 3))])
    with torch.no_grad():
        model.eval()
        roots = model(x)
        model.train()
        model.dropout.p = 0.0
        nodes = model(x)
    torch.testing.assert_close(roots, nodes[:, :2, 0])


def test_dropout_acts_on_node_outputs_only_in_training():
    model = small_tree_lstm(dropout=0.5)
    x = example_trees(3, vocab_size=30)
    with torch.no_grad():
        assert not torch.equal(model.train()(x), model(x))
        assert torch.equal(model.eval()(x), model(x))


def test_registered_examples_are_valid_batches():
    for name, shape in (("global_pooling_cnn", (3, 1000)), ("tree_lstm", (3, 37, 4))):
        x = spec(name).example_input(3, generator=torch.Generator().manual_seed(1))
        assert x.dtype == torch.int64 and x.shape == shape and spec(name).sample_shape == shape[1:]
    trees = spec("tree_lstm").example_input(4)
    assert (trees[:, 0, 3] > 0).all() and ((trees[..., 3] == 0).sum(1) == 19).all()


def test_the_cnn_accepts_any_document_length_above_its_minimum():
    model = build("global_pooling_cnn", 20, vocab_size=100).eval()
    assert model.min_length == 21
    for length in (21, 64, 1000):
        assert model(torch.randint(100, (2, length))).shape == (2, 20)
    with pytest.raises(ValueError, match=r"\(N, L\) with L >= 21"):
        model(torch.randint(100, (2, 20)))


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.randn(2, 50), r"int64 token ids of shape \(N, L\)"),
        (torch.randint(100, (2, 50), dtype=torch.int32), r"int64 token ids of shape \(N, L\)"),
        (torch.randint(100, (2, 1, 50)), r"int64 token ids of shape \(N, L\)"),
        (torch.full((2, 50), 100), "word id 100 >= vocab_size=100"),
    ],
)
def test_cnn_rejects_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        build("global_pooling_cnn", 20, vocab_size=100)(bad)


def _tree_batch():
    return pad_trees([encode_tree(((1, 2), 3)), encode_tree(4), encode_tree((5, 6))])  # M = 5


def _corrupt(edit):
    x = _tree_batch()
    edit(x)
    return x


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.randn(2, 5, 4), r"int64 trees of shape \(N, M, 4\)"),
        (_tree_batch()[..., :3], r"int64 trees of shape \(N, M, 4\)"),
        (_tree_batch()[0], r"int64 trees of shape \(N, M, 4\)"),
        (_corrupt(lambda x: x.__setitem__((1, 0), -1)), "root"),
        (_corrupt(lambda x: x.__setitem__((1, 1), torch.tensor([-1, -1, -1, 0]))), "leaf"),
        (_corrupt(lambda x: x.__setitem__((1, 2, 0), 3)), "padding rows"),
        (_corrupt(lambda x: x.__setitem__((0, 0, 0), 7)), "word id -1"),
        (_corrupt(lambda x: x.__setitem__((0, 0, 2), 9)), r"children must be node indices in \[0, 5\)"),
        (_corrupt(lambda x: x.__setitem__((0, 0, 3), 1)), r"1 \+ max\(child heights\)"),
        (_corrupt(lambda x: x.__setitem__((0, 1, 3), 3)), r"1 \+ max\(child heights\)"),
        (_corrupt(lambda x: x.__setitem__((2, 0, 2), 3)), "children real nodes"),  # row 3 of tree 2 is padding
        (_corrupt(lambda x: x.__setitem__((0, 2, 0), 10)), "word id 10 >= vocab_size=10"),
    ],
)
def test_tree_lstm_rejects_malformed_trees(bad, match):
    model = build("tree_lstm", 2, vocab_size=10)
    with pytest.raises(ValueError, match=match):
        model(bad)


@pytest.mark.parametrize("name", ["global_pooling_cnn", "tree_lstm"])
def test_pretrained_embeddings_are_loaded_and_shape_checked(name):
    model = build(name, 2, vocab_size=50, embedding_dim=8)
    matrix = torch.randn(50, 8, dtype=torch.float64)
    model.load_pretrained_embeddings(matrix)
    expected = matrix.float()
    if name == "global_pooling_cnn":
        expected[0] = 0  # the padding row stays zero
    assert torch.equal(model.embedding.weight.detach(), expected)
    with pytest.raises(ValueError, match=r"shape \(vocab_size, embedding_dim\) = \(50, 8\), got \(50, 9\)"):
        model.load_pretrained_embeddings(torch.randn(50, 9))
    with pytest.raises(ValueError, match="floating-point tensor of shape"):
        model.load_pretrained_embeddings(torch.zeros(50, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match="NaN"):
        model.load_pretrained_embeddings(torch.full((50, 8), float("nan")))


@pytest.mark.parametrize(("name", "frozen_by_default"), [("global_pooling_cnn", True), ("tree_lstm", False)])
def test_embeddings_freeze_or_tune_as_the_papers_did(name, frozen_by_default):
    x = spec(name).example_input(2)
    for freeze in (True, False):
        model = build(name, 2, freeze_embeddings=freeze).train()
        assert model.embeddings_frozen is freeze
        embedding = model.embedding.weight
        out = model(x)
        out.sum().backward()
        assert (embedding.grad is None) is freeze
        assert count_parameters(model) - count_parameters(model, trainable_only=True) == freeze * embedding.numel()
    assert build(name, 2).embeddings_frozen is frozen_by_default
    with pytest.raises(ValueError, match="freeze_embeddings"):
        build(name, 2, freeze_embeddings="yes")


def test_parameter_counts_follow_the_released_layers():
    # ng_model.py: Conv1d(100,128,5), 2 x Conv1d(128,128,5), Linear(128,128), Linear(128,20); GloVe 20000 x 100
    cnn = (100 * 128 * 5 + 128) + 2 * (128 * 128 * 5 + 128) + (128 * 128 + 128) + (128 * 20 + 20)
    assert count_parameters(build("global_pooling_cnn", 20), trainable_only=True) == cnn
    assert count_parameters(build("global_pooling_cnn", 20)) == cnn + 20000 * 100
    # treeLSTM/model.py: leaf cx, ox Linear(300,150); composer 8 x Linear(150,150); SentimentModule Linear(150,3)
    tree = 2 * (300 * 150 + 150) + 8 * (150 * 150 + 150) + (150 * 3 + 3)
    assert tree == 271_953
    model = build("tree_lstm", 2)
    assert count_parameters(model) - model.embedding.weight.numel() == tree
    assert last_layer(model).out_features == 3


def test_text_models_run_in_float64():
    for name in ("global_pooling_cnn", "tree_lstm"):
        model = build(name, 3, vocab_size=20000).double().eval()
        assert model(spec(name).example_input(2)).dtype == torch.float64
