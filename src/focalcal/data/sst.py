"""Stanford Sentiment Treebank, binary (Socher et al. 2013): mukhoti2020's Tree-LSTM set.

Read from the standard release's PTB-format trees (``trainDevTestTrees_PTB.zip`` ->
``trees/train.txt``, ``dev.txt``, ``test.txt``; one sentence per line, e.g.
``(3 (2 It) (4 (4 (2 's) ...)))``, labels 0-4 on every node). The binary task drops the
sentences whose root is neutral (label 2): 6,920 / 872 / 1,821 sentences (mukhoti2020 App. D),
the official train / dev / test sets; dev is the validation set.

Node labels. The released code (torrvision/focal_calibration ``treeLSTM/dataset.py``, from
ttpro1995/TreeLSTMSentiment ``dataset.py``) maps every node to negative / neutral / positive
in binary mode and trains a 3-class output on *every* node (``sst_train.py``:
``num_classes = 3 # 0 1 2 (1 neutral)``; ``treeLSTM/model.py`` adds the loss of each node
whose label is not None — all nodes of the PTB trees), then ignores the neutral output when
it predicts a root (``treeLSTM/trainer.py``: ``output[:,1] = -9999``). Neutral nodes are
therefore a third training class, not ignored; we keep that with the classes reordered so
that the two task classes come first: 0 = negative (PTB 0, 1), 1 = positive (3, 4),
2 = neutral (2). ``info["train_node_classes"] = 3``.

Encoding (one contract for this set and :mod:`focalcal.data.synthetic_treebank`):

* ``x``: int64 (N, M, 4), M = the largest node count over all three pools. Node 0 is the root;
  nodes are in pre-order (a node, then its left subtree, then its right), so children come
  after their parent and leaves in sentence order. Columns: word id (>= 0 for a leaf, -1
  for an internal node), left child, right child (-1 for a leaf), height (0 for a leaf,
  1 + the larger child height). Padding rows are -1 throughout.
* train ``y``: int64 (N, M) node labels 0/1/2 as above, :data:`TOKEN_IGNORE_INDEX` on padding rows.
* val/test ``y``: int64 (N,) root labels, 0 = negative, 1 = positive.

Words are the leaves verbatim: cased (the released code's ``vocab-cased.txt`` and cased
glove.840B.300d, ``sst_train.py``), brackets as the source writes them (see "Token source"
below): the released code takes tokens as they are (``line.split()`` in
``treeLSTM/dataset.py``), unescaping nothing. In a PTB line a literal parenthesis is always
structure.

Vocabulary and word vectors, as the released code: the vocabulary holds the words of all
three splits (``vocab-cased.txt``, written from the train, dev and test token files by the
preprocessing script, ``preprocess-sst.py``; ``sst_train.py`` reads it) unless ``max_words``
caps it, and every word GloVe has starts from its GloVe vector. A word's pre-trained vector
is not a label: knowing that a test sentence holds "wryly" and looking up its GloVe vector
uses nothing a classifier of that sentence could not look up at test time, and training
never moves the row of a word no training sentence holds. Words GloVe lacks start from
``torch.Tensor.normal_(-0.05, 0.05)`` in ``sst_train.py`` — torch's ``normal_(mean, std)``,
i.e. N(−0.05, 0.05²) per coordinate — drawn here once per vocabulary from a fixed seed
(:data:`MISSING_WORD_SEED`), as the released code drew one matrix (``sst_embed.pth``) that
every run reused. The word on GloVe's first line gets its GloVe vector too: ``sst_train.py``'s
``if glove_vocab.getIndex(word):`` takes that word's index, 0, for "missing" and gives it a
random vector, a defect not copied here.

Token source (``token_source``). "ptb", the default, reads the PTB trees above. "released"
reads what mukhoti2020's released code reads: ``stanfordSentimentTreebank.zip``'s ``SOStr.txt``
(tokens), ``STree.txt`` (parses), ``dictionary.txt`` and ``sentiment_labels.txt`` (every node's
label, its phrase's sentiment value cut at 0.2 / 0.4 / 0.6 / 0.8) and ``datasetSplit.txt``
(splits), as its preprocessing does (:mod:`focalcal.data.sst_dictionary`). The two spell
brackets differently: the PTB trees write ``-LRB-`` and ``-RRB-`` where ``SOStr.txt`` and
``dictionary.txt`` write ``(`` and ``)`` (stored copies of the real files), so the two
vocabularies look up different GloVe rows for them. On a sample written in both formats
(``tests/test_data_sst_release.py``) the two give the same trees, labels and splits and
differ in those tokens only; the full files are not compared here.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from . import sources, sst_dictionary
from ._dataset import RawData
from .download import ensure_archive_folder
from .sst_tree import Node
from .text import TOKEN_IGNORE_INDEX, UNKNOWN_ID, Vocabulary, check_glove_path, check_max_words, vocabulary_info

NEGATIVE, POSITIVE, NEUTRAL = 0, 1, 2  # node classes; the task's classes are 0 and 1
NODE_CLASS_NAMES = ("negative", "positive", "neutral")
CLASS_NAMES = ["negative", "positive"]
COLUMNS = ("word", "left", "right", "height")
PTB_TO_NODE_CLASS = {0: NEGATIVE, 1: NEGATIVE, 2: NEUTRAL, 3: POSITIVE, 4: POSITIVE}
TREE_FILES = {"train": "train.txt", "val": "dev.txt", "test": "test.txt"}
TOKEN_SOURCES = ("ptb", "released")  # load_sst_binary's token_source
# sst_train.py: ``emb[...] = torch.Tensor(...).normal_(-0.05, 0.05)`` for a word GloVe lacks
MISSING_WORD_MEAN, MISSING_WORD_STD = -0.05, 0.05
MISSING_WORD_SEED = 0  # one draw per vocabulary, shared by every run (sst_embed.pth in the released code)

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def parse_tree(line: str, where: str = "tree") -> Node:
    """The binary tree of one PTB line; ValueError naming ``where`` (file and line) otherwise."""
    tokens = _TOKEN.findall(line)
    position = 0

    def fail(message: str):
        raise ValueError(f"{where}: {message} in {line.strip()[:120]!r}")

    def node() -> Node:
        nonlocal position
        if position >= len(tokens) or tokens[position] != "(":
            fail("expected '('")
        position += 1
        if position >= len(tokens) or not tokens[position].lstrip("-").isdigit():
            fail("expected an integer label after '('")
        label = int(tokens[position])
        position += 1
        if position < len(tokens) and tokens[position] not in ("(", ")"):
            word = tokens[position]
            position += 1
            if position >= len(tokens) or tokens[position] != ")":
                fail(f"a leaf holds one word; expected ')' after {word!r}")
            position += 1
            return Node(label, word=word)
        children = []
        while position < len(tokens) and tokens[position] == "(":
            children.append(node())
        if position >= len(tokens) or tokens[position] != ")":
            fail("unbalanced parentheses")
        position += 1
        if len(children) != 2:
            fail(f"non-binary node: {len(children)} children (SST trees are binary)")
        return Node(label, left=children[0], right=children[1])

    root = node()
    if position != len(tokens):
        fail("text after the end of the tree")
    return root


def flatten(root: Node) -> list[tuple[str | None, int, int, int, int]]:
    """Rows ``(word, left, right, height, label)`` in pre-order (root first)."""
    rows: list = []

    def visit(node: Node) -> int:
        index = len(rows)
        rows.append(None)
        if node.word is not None:
            rows[index] = (node.word, -1, -1, 0, node.label)
        else:
            left, right = visit(node.left), visit(node.right)
            rows[index] = (None, left, right, 1 + max(rows[left][3], rows[right][3]), node.label)
        return index

    visit(root)
    return rows


def read_trees(path: Path) -> list[Node]:
    """Every non-empty line of a PTB tree file, parsed (UTF-8)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_tree(line, f"{path}, line {number}") for number, line in enumerate(lines, start=1) if line.strip()]


def _node_class(label: int, where: str) -> int:
    if label not in PTB_TO_NODE_CLASS:
        raise ValueError(f"{where}: SST labels are 0-4, got {label}")
    return PTB_TO_NODE_CLASS[label]


def binary_treebank(trees: dict[str, list[Node]], *, max_words: int | None, glove: Path | None, info: dict,
                    embedding_source: str | None = None) -> RawData:
    """RawData in the encoding of the module docstring from official "train"/"val"/"test" trees;
    neutral roots are dropped, and ``finalise`` maps the words to ids of a vocabulary of all
    three splits' words. ``embedding_source`` replaces the "no GloVe path" sentence (synthetic words)."""
    check_max_words(max_words)
    kept = {pool: [flatten(tree) for tree in pool_trees if _node_class(tree.label, pool) != NEUTRAL]
            for pool, pool_trees in trees.items()}
    words = {}  # every distinct word, in order of first occurrence -> its position in this table
    for sentences in kept.values():
        for rows in sentences:
            for row in rows:
                if row[0] is not None:
                    words.setdefault(row[0], len(words))
    table = list(words)
    max_nodes = max(len(rows) for sentences in kept.values() for rows in sentences)
    pools = {}
    for pool, sentences in kept.items():
        x = np.full((len(sentences), max_nodes, len(COLUMNS)), -1, dtype=np.int64)
        node_y = np.full((len(sentences), max_nodes), TOKEN_IGNORE_INDEX, dtype=np.int64)
        for i, rows in enumerate(sentences):
            x[i, :len(rows)] = [(-1 if word is None else words[word], left, right, height)
                                for word, left, right, height, _ in rows]
            node_y[i, :len(rows)] = [_node_class(label, pool) for *_, label in rows]
        pools[pool] = (x, node_y if pool == "train" else node_y[:, 0].copy())

    def finalise(pool: str, train_indices: np.ndarray) -> RawData:
        documents = ([table[w] for w in sentence[:, 0] if w >= 0] for x, _ in pools.values() for sentence in x)
        vocabulary = Vocabulary.from_documents(documents, max_words)
        to_id = np.asarray([vocabulary.index.get(word, UNKNOWN_ID) for word in table], dtype=np.int64)
        encoded = {}
        for name, (x, y) in pools.items():
            x = x.copy()
            leaf = x[:, :, 0] >= 0
            x[:, :, 0][leaf] = to_id[x[:, :, 0][leaf]]
            encoded[name] = (x, y)
        text_info = vocabulary_info(vocabulary, glove, missing=missing_word_vectors)
        if embedding_source is not None and glove is None:
            text_info["embedding_source"] = embedding_source
        return RawData(pools=encoded, class_names=list(CLASS_NAMES), info={**full_info, **text_info})

    full_info = {**info, "train_node_classes": len(NODE_CLASS_NAMES), "node_class_names": list(NODE_CLASS_NAMES),
                 "node_columns": list(COLUMNS), "max_nodes": int(max_nodes), "ignore_index": TOKEN_IGNORE_INDEX}
    return RawData(pools=pools, class_names=list(CLASS_NAMES), info=full_info, finalise=finalise)


def missing_word_vectors(n: int, dim: int) -> np.ndarray:
    """float32 (n, dim) starting vectors of words GloVe lacks: N(−0.05, 0.05²), seeded (module docstring)."""
    rng = np.random.default_rng(MISSING_WORD_SEED)
    return rng.normal(MISSING_WORD_MEAN, MISSING_WORD_STD, size=(n, dim)).astype(np.float32)


def load_sst_binary(root, download: bool, *, max_words: int | None = None, glove: str | None = None,
                    token_source: str = "ptb") -> RawData:
    """SST binary; official train / dev (as val) / test. ``token_source`` "ptb" reads the PTB
    trees, "released" the files of ``stanfordSentimentTreebank.zip`` that mukhoti2020's released
    code reads (:mod:`focalcal.data.sst_dictionary`). See the module docstring."""
    check_max_words(max_words)
    glove_path = check_glove_path(glove)
    if token_source not in TOKEN_SOURCES:
        raise ValueError(f"token_source must be one of {list(TOKEN_SOURCES)}, got {token_source!r}")
    if token_source == "released":
        folder = ensure_archive_folder(sources.SST_RELEASE, Path(root), download=download, dataset="sst_binary")
        trees = sst_dictionary.read_release(folder)
    else:
        folder = ensure_archive_folder(sources.SST_PTB, Path(root), download=download, dataset="sst_binary")
        missing = [name for name in TREE_FILES.values() if not (folder / name).is_file()]
        if missing:
            raise ValueError(f"{folder} lacks {missing}: delete it and load again to unpack the archive afresh")
        trees = {pool: read_trees(folder / name) for pool, name in TREE_FILES.items()}
    return binary_treebank(trees, max_words=max_words, glove=glove_path,
                           info={"folder": str(folder), "token_source": token_source})
