"""A synthetic topic corpus: the offline stand-in for 20 Newsgroups, generated from a seed.

20 topics in six groups shaped like the newsgroup hierarchy (5 comp, 4 rec, 4 sci, 3 talk,
3 religion, 1 misc): topics of a group share most of their vocabulary, as rec.autos and
rec.motorcycles do (mukhoti2020 App. D), while different groups barely overlap. Every
document is a bag of words drawn from its topic's word distribution

    p(w | topic k) = 0.60 background(w) + 0.25 group(w) + 0.15 topic_k(w)

* background: the first half of the vocabulary, Zipf-distributed (weight 1/rank) — common
  words every topic uses;
* group: half of the group's block of the remaining words, Zipf-distributed — the words
  of the group's subject;
* topic_k: the other half of the block, cut into one slice per topic of the group; topic k
  puts ``1 - overlap`` of this mass on its own slice and ``overlap`` on its siblings'
  slices (a one-topic group keeps it all).

So a document names its group in about a quarter of its words, and its topic only through
the balance of a dozen or so topic words against its siblings': with the defaults a
multinomial naive Bayes classifier on word counts (close to the best linear rule for this
model) is right on about 85 % of test documents and names the right group for all of them
(``tests/test_data_text.py`` checks both), and a small embedding + convolution + mean-pool
network trained for 40 epochs reaches about 80 %; not 100 %, so a model is confidently
wrong on some documents and calibration differs between losses. Document lengths are uniform on [length/2, 3·length/2]; words are the
strings ``w0000`` ... and go through the same vocabulary and encoding as 20 Newsgroups
(:func:`focalcal.data.text.sequence_data`), so one model runs on both. All choices here
are our own; the mixture weights were tuned for that accuracy band.
"""

from __future__ import annotations

import numpy as np

from ._dataset import RawData
from .text import check_length, sequence_data

GROUPS = (("comp", 5), ("rec", 4), ("sci", 4), ("talk", 3), ("religion", 3), ("misc", 1))
NUM_TOPICS = sum(size for _, size in GROUPS)
BACKGROUND_SHARE = 0.5  # of the vocabulary
WEIGHTS = {"background": 0.60, "group": 0.25, "topic": 0.15}


def class_names() -> list[str]:
    return [f"{group}.{t}" for group, size in GROUPS for t in range(size)]


def _zipf(size: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1)
    return weights / weights.sum()


def topic_word_distributions(vocab_size: int, overlap: float) -> np.ndarray:
    """(20, vocab_size) float64 rows p(w | topic), each summing to 1."""
    n_background = int(vocab_size * BACKGROUND_SHARE)
    background = np.zeros(vocab_size)
    background[:n_background] = _zipf(n_background)
    rows = []
    for block, (_, size) in zip(np.array_split(np.arange(n_background, vocab_size), len(GROUPS)), GROUPS):
        shared, own = np.array_split(block, 2)
        group = np.zeros(vocab_size)
        group[shared] = _zipf(shared.size)
        slices = np.array_split(own, size)
        for topic in range(size):
            specific = np.zeros(vocab_size)
            for other, words in enumerate(slices):
                share = (1 - overlap if other == topic else overlap / (size - 1)) if size > 1 else 1.0
                specific[words] = share / words.size
            rows.append(WEIGHTS["background"] * background + WEIGHTS["group"] * group + WEIGHTS["topic"] * specific)
    return np.asarray(rows)


def generate_topics(n_documents: int, document_length: int, vocab_size: int, overlap: float,
                    data_seed: int) -> tuple[list[list[str]], np.ndarray]:
    """(documents as word lists, int64 topic labels); balanced topics, in random order."""
    rng = np.random.default_rng(data_seed)
    labels = rng.permutation(np.arange(n_documents) % NUM_TOPICS).astype(np.int64)
    lengths = rng.integers(document_length // 2, 3 * document_length // 2 + 1, size=n_documents)
    cumulative = np.cumsum(topic_word_distributions(vocab_size, overlap), axis=1)
    uniforms = rng.random((n_documents, int(lengths.max())))
    words = np.empty(uniforms.shape, dtype=np.int64)
    for topic in range(NUM_TOPICS):
        rows = labels == topic
        words[rows] = np.minimum(np.searchsorted(cumulative[topic], uniforms[rows], side="right"), vocab_size - 1)
    names = np.asarray([f"w{i:04d}" for i in range(vocab_size)], dtype=object)
    return [names[words[i, :lengths[i]]].tolist() for i in range(n_documents)], labels


def load_synthetic_topics(root, download: bool, *, n_documents: int = 2000, document_length: int = 100,
                          vocab_size: int = 2000, overlap: float = 0.4, sequence_length: int | None = None,
                          data_seed: int = 0) -> RawData:
    """The corpus as one pool ("all"); ``sequence_length`` None: the longest possible document
    (3·document_length/2), so nothing is cut. Nothing is read or written under ``root``."""
    check_length(n_documents, "n_documents")
    check_length(document_length, "document_length")
    if n_documents < NUM_TOPICS:
        raise ValueError(f"n_documents must be at least {NUM_TOPICS} (one per topic), got {n_documents}")
    if document_length < 2:
        raise ValueError(f"document_length must be at least 2, got {document_length}")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 8 * len(GROUPS) * 5:
        raise ValueError(f"vocab_size must be an int >= {8 * len(GROUPS) * 5}, got {vocab_size!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, (int, float)) or not 0 <= overlap < 1:
        raise ValueError(f"overlap must be a number in [0, 1), got {overlap!r}")
    if sequence_length is None:
        sequence_length = 3 * document_length // 2
    documents, labels = generate_topics(int(n_documents), int(document_length), int(vocab_size), float(overlap),
                                        int(data_seed))
    return sequence_data({"all": (documents, labels)}, class_names=class_names(), info={"groups": [g for g, _ in GROUPS]},
                         max_words=None, sequence_length=sequence_length,
                         embedding_source="random initialisation: synthetic words have no GloVe vectors")
