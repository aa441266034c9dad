"""A synthetic sentiment treebank: the offline stand-in for SST binary, generated from a seed.

Sentences of random words under random binary bracketings, labelled at every node by a
compositional sentiment with negation, written as PTB lines and read by the SST parser
(:mod:`focalcal.data.sst`), so the result has exactly SST's encoding and one Tree-LSTM runs
on both. All choices here are our own:

* words: 40 positive (``good00``...; sentiment +1, the last 10 +2), 40 negative (``bad00``...;
  -1, the last 10 -2), 150 neutral fillers (``w000``...) and 3 negators (``not``,
  ``never``, ``hardly``), drawn with probabilities 0.15 / 0.15 / 0.63 / 0.07;
* structure: a span is cut at a uniformly random point, recursively, down to single words;
* sentiment: a word's value as above (0 for fillers and negators); a node whose one child
  is a negator word takes minus the other child's value (negation flips the phrase it
  scopes over), any other node the sum of its children's values;
* labels: each node's value plus independent Gaussian noise (sd ``label_noise``) is cut at
  ±0.5 into negative / neutral / positive, and beyond ±2.5 into very negative / very
  positive (PTB labels 0-4). The noise makes the labels of borderline phrases
  irreducibly uncertain, so even the generating rule is not always right and the
  confidences a model learns can be miscalibrated.

Like SST's binary task, sentences whose root is neutral are dropped (and regenerated until
``n_sentences`` remain), then split into official train / val / test in SST's proportions
(6,920 / 872 / 1,821).
"""

from __future__ import annotations

import numpy as np

from ._dataset import RawData
from .sst import binary_treebank, parse_tree
from .text import check_length

POSITIVE_WORDS = [f"good{i:02d}" for i in range(40)]
NEGATIVE_WORDS = [f"bad{i:02d}" for i in range(40)]
STRONG = 10  # the last STRONG positive and negative words count double
FILLERS = [f"w{i:03d}" for i in range(150)]
NEGATORS = ["not", "never", "hardly"]
KIND_PROBABILITIES = {"positive": 0.15, "negative": 0.15, "filler": 0.63, "negator": 0.07}
NEUTRAL_BAND = 0.5
STRONG_BAND = 2.5
SST_SIZES = {"train": 6920, "val": 872, "test": 1821}  # mukhoti2020 App. D


def word_value(word: str) -> int:
    """The sentiment a word carries on its own (negators and fillers: 0)."""
    for words, sign in ((POSITIVE_WORDS, 1), (NEGATIVE_WORDS, -1)):
        if word in words:
            return sign * (2 if words.index(word) >= len(words) - STRONG else 1)
    return 0


def _label(value: float) -> int:
    """PTB label 0-4 of a noisy sentiment value."""
    if value > STRONG_BAND:
        return 4
    if value > NEUTRAL_BAND:
        return 3
    if value < -STRONG_BAND:
        return 0
    if value < -NEUTRAL_BAND:
        return 1
    return 2


def _draw_words(rng: np.random.Generator, length: int) -> list[str]:
    kinds = rng.choice(list(KIND_PROBABILITIES), size=length, p=list(KIND_PROBABILITIES.values()))
    pools = {"positive": POSITIVE_WORDS, "negative": NEGATIVE_WORDS, "filler": FILLERS, "negator": NEGATORS}
    return [pools[kind][rng.integers(len(pools[kind]))] for kind in kinds]


def generate_sentence(rng: np.random.Generator, length: int, label_noise: float) -> str:
    """One random labelled sentence as a PTB line."""
    words = _draw_words(rng, length)

    def build(start: int, stop: int) -> tuple[str, float]:
        if stop - start == 1:
            value = word_value(words[start])
            return f"({_label(value + label_noise * rng.standard_normal())} {words[start]})", value
        cut = int(rng.integers(start + 1, stop))
        (left, left_value), (right, right_value) = build(start, cut), build(cut, stop)
        if cut - start == 1 and words[start] in NEGATORS and not (stop - cut == 1 and words[cut] in NEGATORS):
            value = -right_value
        elif stop - cut == 1 and words[cut] in NEGATORS and not (cut - start == 1 and words[start] in NEGATORS):
            value = -left_value
        else:
            value = left_value + right_value
        return f"({_label(value + label_noise * rng.standard_normal())} {left} {right})", value

    return build(0, length)[0]


def load_synthetic_treebank(root, download: bool, *, n_sentences: int = 1500, min_length: int = 3,
                            max_length: int = 15, label_noise: float = 0.6, data_seed: int = 0) -> RawData:
    """Official "train" / "val" / "test" pools in SST's encoding; nothing is read or written under ``root``."""
    check_length(n_sentences, "n_sentences")
    check_length(min_length, "min_length")
    check_length(max_length, "max_length")
    if n_sentences < 30:
        raise ValueError(f"n_sentences must be at least 30 (a few per split), got {n_sentences}")
    if not 2 <= min_length <= max_length:
        raise ValueError(f"need 2 <= min_length <= max_length, got {min_length} and {max_length}")
    if isinstance(label_noise, bool) or not isinstance(label_noise, (int, float)) or label_noise < 0:
        raise ValueError(f"label_noise must be a non-negative number, got {label_noise!r}")
    rng = np.random.default_rng(data_seed)
    total = sum(SST_SIZES.values())
    counts = {pool: round(n_sentences * size / total) for pool, size in SST_SIZES.items() if pool != "train"}
    counts["train"] = n_sentences - sum(counts.values())
    trees, generated = [], 0
    while len(trees) < n_sentences:
        line = generate_sentence(rng, int(rng.integers(min_length, max_length + 1)), float(label_noise))
        generated += 1
        tree = parse_tree(line, "synthetic sentence")
        if tree.label != 2:
            trees.append(tree)
    bounds = np.cumsum([0, counts["train"], counts["val"], counts["test"]])
    pools = {pool: trees[bounds[i]:bounds[i + 1]] for i, pool in enumerate(("train", "val", "test"))}
    return binary_treebank(pools, max_words=None, glove=None,
                           info={"sentences_generated": generated, "neutral_roots_dropped": generated - n_sentences},
                           embedding_source="random initialisation: synthetic words have no GloVe vectors")
