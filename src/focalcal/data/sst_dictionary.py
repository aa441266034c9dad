"""SST read from ``stanfordSentimentTreebank.zip``, the files mukhoti2020's released code reads.

The released Tree-LSTM (torrvision/focal_calibration ``treeLSTM/dataset.py``, ``SSTDataset``)
reads ``sents.toks``, ``parents.txt`` and ``labels.txt`` per split, written by the
preprocessing of ttpro1995/treelstm.pytorch (``fetch_and_preprocess.sh`` runs
``scripts/preprocess-sst.py``, which follows stanfordnlp/treelstm's) from these files of the
treebank's release:

* ``SOStr.txt``: line i holds sentence i's tokens separated by ``|`` (``load_sents``). The
  tokens reach ``sents.toks`` unchanged: ``lib/DependencyParse.java`` runs without
  ``-tokenize`` and writes ``line.split(" ")`` back as it read it.
* ``STree.txt``: line i holds sentence i's parse as parent pointers separated by ``|``
  (``load_parents``): node k's parent is entry k (1-based), 0 marks the root, nodes 1..n are
  the n tokens in order and n+1.. the phrases (``load_constituency_tree`` gives the j-th node
  it meets without a tree the j-th token). A phrase's children are ordered by their tokens:
  the child met first from the lowest token is the left one (``load_constituency_tree``,
  ``dataset.py``'s ``read_tree``).
* ``datasetSplit.txt``: a header, then ``sentence_index,splitset_label`` with 1 = train,
  2 = test, 3 = dev (``load_splits``; ``split`` pairs the i-th row with the i-th sentence by
  position).
* ``dictionary.txt``: ``phrase|phrase id``; ``sentiment_labels.txt``: a header, then
  ``phrase id|sentiment value`` in [0, 1] (``load_dictionary``, which indexes the values by
  their row).

A node's phrase is its tokens joined by one space (``ConstTree.set_spans``). Its label is the
phrase's sentiment value cut as ``load_dictionary`` cuts it — at most 0.2 → −2, at most 0.4 →
−1, above 0.8 → +2, above 0.6 → +1, the rest 0 (the release README's [0, 0.2], (0.2, 0.4],
(0.4, 0.6], (0.6, 0.8], (0.8, 1.0]) — plus 2, as ``dataset.py``'s ``parse_dlabel_token``
shifts it for 5 classes: 0-4, the PTB trees' scale, so :func:`focalcal.data.sst.binary_treebank`
treats both sources alike.

What the released scripts would misread is refused here, each with one line naming the
file and line: a phrase missing from the dictionary (``write_labels`` writes ``None`` for it
and ``dataset.py``'s ``int`` fails on it), an empty token or one holding whitespace
(``load_trees`` splits on whitespace, so the token count would change), files whose rows do
not pair up by position (a sentence index or phrase id out of order, unequal line counts), a
parse that is not one binary tree over the tokens with contiguous phrases. Lines end at
``\\n`` only, as the released Python 2 scripts read them, and are decoded as UTF-8.
"""

from __future__ import annotations

from pathlib import Path

from .sst_tree import Node

SENTENCE_FILE, TREE_FILE, SPLIT_FILE = "SOStr.txt", "STree.txt", "datasetSplit.txt"
DICTIONARY_FILE, SENTIMENT_FILE = "dictionary.txt", "sentiment_labels.txt"
FILES = (SENTENCE_FILE, TREE_FILE, SPLIT_FILE, DICTIONARY_FILE, SENTIMENT_FILE)
SPLIT_POOLS = {1: "train", 2: "test", 3: "val"}  # datasetSplit.txt's labels; dev is the validation set
_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"  # what Python 2's str.split() and strip() take as whitespace


def five_class_label(value: float) -> int:
    """0-4 of a sentiment value: ``preprocess-sst.py``'s cut-offs, shifted by 2 (module docstring)."""
    if value <= 0.2:
        bucket = -2
    elif value <= 0.4:
        bucket = -1
    elif value > 0.8:
        bucket = 2
    elif value > 0.6:
        bucket = 1
    else:
        bucket = 0
    return bucket + 2


def read_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of every line of ``path``, split at ``\\n`` only, UTF-8."""
    pieces = path.read_bytes().split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()  # the newline that ends the last line
    lines = []
    for number, piece in enumerate(pieces, start=1):
        try:
            lines.append((number, piece.decode("utf-8")))
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}, line {number}: not UTF-8 ({error.reason} at byte {error.start})") from None
    return lines


def parse_tokens(line: str, where: str) -> list[str]:
    """The tokens of one ``SOStr.txt`` line; ValueError naming ``where`` if one is empty or holds whitespace."""
    tokens = line.strip(_ASCII_WHITESPACE).split("|")
    for position, token in enumerate(tokens, start=1):
        if not token or any(c in _ASCII_WHITESPACE for c in token):
            raise ValueError(f"{where}: token {position} ({token!r}) is empty or holds whitespace")
    return tokens


def parse_parents(line: str, n_tokens: int, where: str) -> list[int]:
    """Parent pointers of one ``STree.txt`` line, checked to make one binary tree over ``n_tokens`` leaves."""
    fields = line.strip(_ASCII_WHITESPACE).split("|")
    try:
        parents = [int(field) for field in fields]
    except ValueError:
        raise ValueError(f"{where}: parent pointers must be integers separated by '|', got {line.strip()[:120]!r}") from None
    size = len(parents)
    if size != 2 * n_tokens - 1:
        raise ValueError(f"{where}: {size} nodes for {n_tokens} tokens; a binary tree over them has {2 * n_tokens - 1}")
    roots = [k for k, parent in enumerate(parents, start=1) if parent == 0]
    if len(roots) != 1:
        raise ValueError(f"{where}: {len(roots)} roots (parent 0); a tree has one")
    for k, parent in enumerate(parents, start=1):
        if not 0 <= parent <= size or parent == k:
            raise ValueError(f"{where}: node {k}'s parent {parent} is not another node of 1..{size} or 0")
        if 0 < parent <= n_tokens:
            raise ValueError(f"{where}: node {k}'s parent {parent} is a token (nodes 1..{n_tokens} are the tokens)")
    return parents


def build_tree(tokens: list[str], parents: list[int], where: str) -> Node:
    """The binary :class:`Node` tree (every label 0) of parent pointers checked by :func:`parse_parents`."""
    n = len(tokens)
    children: dict[int, list[int]] = {}
    for k, parent in enumerate(parents, start=1):
        children.setdefault(parent, []).append(k)
    for k in range(n + 1, len(parents) + 1):
        if len(children.get(k, ())) != 2:
            raise ValueError(f"{where}: phrase node {k} has {len(children.get(k, ()))} children; SST's trees are binary")
    spans: dict[int, tuple[int, int]] = {}  # node -> its tokens lo..hi-1 (0-based)

    def span(k: int) -> tuple[int, int]:
        if k <= n:
            spans[k] = (k - 1, k)
        else:
            first, second = sorted(span(c) for c in children[k])
            if first[1] != second[0]:
                raise ValueError(f"{where}: phrase node {k} joins tokens {first[0] + 1}-{first[1]} and "
                                 f"{second[0] + 1}-{second[1]}, which are not adjacent")
            spans[k] = (first[0], second[1])
        return spans[k]

    root = children[0][0]
    span(root)  # follows children from the root, so it meets no cycle
    if len(spans) != len(parents):
        unreached = sorted(set(range(1, len(parents) + 1)) - set(spans))
        raise ValueError(f"{where}: nodes {unreached} do not reach the root")

    def node(k: int) -> Node:
        if k <= n:
            return Node(0, word=tokens[k - 1])
        left, right = sorted(children[k], key=lambda c: spans[c])
        return Node(0, left=node(left), right=node(right))

    return node(root)


def label_tree(tree: Node, tokens: list[str], labels: dict[str, int], where: str) -> Node:
    """``tree`` with every node labelled by its phrase's dictionary entry; ValueError naming the phrase."""

    def visit(node: Node, lo: int) -> tuple[Node, int]:
        if node.word is not None:
            hi = lo + 1
            left = right = None
        else:
            left, middle = visit(node.left, lo)
            right, hi = visit(node.right, middle)
        phrase = " ".join(tokens[lo:hi])
        if phrase not in labels:
            raise ValueError(f"{where}: the phrase {phrase!r} (tokens {lo + 1}-{hi}) is not in {DICTIONARY_FILE}")
        return Node(labels[phrase], word=node.word, left=left, right=right), hi

    return visit(tree, 0)[0]


def read_phrase_labels(folder: Path) -> dict[str, int]:
    """Phrase -> 0-4 label from ``dictionary.txt`` and ``sentiment_labels.txt``."""
    path = folder / SENTIMENT_FILE
    values = []
    for number, line in read_lines(path)[1:]:  # the first line is a header
        fields = line.split("|")
        try:
            phrase_id, value = int(fields[0]), float(fields[1])
            if len(fields) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(f"{path}, line {number}: expected 'phrase id|sentiment value', got {line[:120]!r}") from None
        if phrase_id != len(values):
            raise ValueError(f"{path}, line {number}: phrase id {phrase_id} out of order (expected {len(values)}; "
                             f"preprocess-sst.py indexes the values by their row)")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{path}, line {number}: sentiment value {value} is outside [0, 1]")
        values.append(value)
    path = folder / DICTIONARY_FILE
    labels = {}
    for number, line in read_lines(path):
        fields = line.split("|")
        try:
            phrase_id = int(fields[1])
            if len(fields) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(f"{path}, line {number}: expected 'phrase|phrase id', got {line[:120]!r}") from None
        if not 0 <= phrase_id < len(values):
            raise ValueError(f"{path}, line {number}: phrase id {phrase_id} has no row in {SENTIMENT_FILE}")
        labels[fields[0]] = five_class_label(values[phrase_id])
    return labels


def read_splits(folder: Path) -> list[int]:
    """The split label (1, 2 or 3) of every sentence, in sentence order."""
    path = folder / SPLIT_FILE
    splits = []
    for number, line in read_lines(path)[1:]:  # the first line is a header
        fields = line.strip(_ASCII_WHITESPACE).split(",")
        try:
            index, label = int(fields[0]), int(fields[1])
            if len(fields) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise ValueError(f"{path}, line {number}: expected 'sentence_index,splitset_label', got {line[:120]!r}") from None
        if index != len(splits) + 1:
            raise ValueError(f"{path}, line {number}: sentence index {index} out of order (expected {len(splits) + 1}; "
                             f"preprocess-sst.py pairs the rows with the sentences by position)")
        if label not in SPLIT_POOLS:
            raise ValueError(f"{path}, line {number}: split label {label} is not 1 (train), 2 (test) or 3 (dev)")
        splits.append(label)
    return splits


def read_release(folder: Path) -> dict[str, list[Node]]:
    """The labelled trees of every sentence, by pool ("train", "val" = dev, "test"), in sentence order."""
    folder = Path(folder)
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} lacks {missing}: delete it and load again to unpack the archive afresh")
    sentences, trees, splits = read_lines(folder / SENTENCE_FILE), read_lines(folder / TREE_FILE), read_splits(folder)
    if not len(sentences) == len(trees) == len(splits):
        raise ValueError(f"{folder}: {SENTENCE_FILE} has {len(sentences)} lines, {TREE_FILE} {len(trees)} and "
                         f"{SPLIT_FILE} {len(splits)} rows; they pair up by position")
    labels = read_phrase_labels(folder)
    pools: dict[str, list[Node]] = {"train": [], "val": [], "test": []}
    for (number, sentence), (_, parents_line), split in zip(sentences, trees, splits):
        tokens = parse_tokens(sentence, f"{folder / SENTENCE_FILE}, line {number}")
        where = f"{folder / TREE_FILE}, line {number}"
        tree = build_tree(tokens, parse_parents(parents_line, len(tokens), where), where)
        pools[SPLIT_POOLS[split]].append(
            label_tree(tree, tokens, labels, f"sentence {number} ({folder / SENTENCE_FILE}, line {number})"))
    return pools
