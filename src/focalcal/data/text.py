"""Text inputs shared by the text datasets: tokeniser, vocabulary, fixed-length ids, GloVe.

mukhoti2020's 20 Newsgroups code (torrvision/focal_calibration ``NewsGroup/ng_loader.py``,
"a PyTorch adaptation of" aviralkumar2907/MMCE, itself the Keras "pretrained word
embeddings" example) tokenises with Keras' ``Tokenizer``, keeps ``MAX_NUM_WORDS = 20000``
ids and cuts every document to ``MAX_SEQUENCE_LENGTH = 1000`` ids with ``pad_sequences``'
defaults. This module re-implements those conventions in a few lines of Python, so the
library needs no Keras:

* :func:`tokenise`: lower-case, every character of Keras' default filter set (punctuation,
  tab, newline) becomes a space, split on spaces, empty pieces dropped. The apostrophe is
  not filtered ("don't" stays one token).
* :class:`Vocabulary`: id 0 = padding, 1 = unknown, then words by decreasing count over the
  documents it is fitted on, ties in order of first occurrence (the order Keras'
  ``word_index`` gets from a stable sort of its insertion-ordered counts), capped at
  ``max_words`` ids in all. Keras' ``num_words`` counts id 0 too, so ``max_words=20000``
  gives a 20,000-row embedding matrix in both. :func:`sequence_data` fits it on the
  training split, or on the documents a data set names (20 Newsgroups: all of them, as the
  released code fit its tokenizer). Fitting a vocabulary reads words, never labels; a
  word that occurs only in the test split gets a row, which training never moves (no
  training document holds it), so the row is its pre-trained vector — the same vector a
  lookup at test time would give.
* :func:`encode_sequences`: unknown words become id 1, or with ``drop_unknown=True`` are
  dropped, as Keras without ``oov_token`` drops them; a longer document keeps its *last*
  ``length`` ids, a shorter one is left-padded with 0 (``pad_sequences``' ``padding="pre"``,
  ``truncating="pre"``).
* :func:`load_glove`: a GloVe text file (``word v1 … vD`` per line). Rows of words GloVe
  lacks — and of ids 0 and 1 — are zeros, as in the released 20 Newsgroups code ("words not
  found in embedding index will be all-zeros", ng_loader.py): a zero row adds nothing to a
  convolution or a sum, and a tuned embedding moves it from there. A data set may fill the
  missing words' rows otherwise (SST: random, as the released sst_train.py;
  :mod:`focalcal.data.sst`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._dataset import RawData

PAD_ID = 0
UNKNOWN_ID = 1
RESERVED_TOKENS = ("<pad>", "<unk>")  # the tokens of ids 0 and 1 in Vocabulary.tokens
#: The target of a position no loss counts in a text data set's targets (a padded tree node, a
#: padded target token): PyTorch's default ``ignore_index`` (torch.nn.CrossEntropyLoss), negative,
#: so no class, vocabulary id or argmax ever equals it. Segmentation masks mark their unlabelled
#: pixels with :data:`focalcal.data.segmentation.IGNORE_INDEX` (255).
TOKEN_IGNORE_INDEX = -100
KERAS_FILTERS = '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'  # Keras Tokenizer's default ``filters``
_FILTER_TABLE = str.maketrans({character: " " for character in KERAS_FILTERS})


def tokenise(text: str) -> list[str]:
    """Keras Tokenizer's words of ``text``: lower-cased, filter characters to spaces, split on spaces."""
    return [piece for piece in text.lower().translate(_FILTER_TABLE).split(" ") if piece]


@dataclass(frozen=True)
class Vocabulary:
    """Tokens by id: ``tokens[0]`` is padding, ``tokens[1]`` unknown, then the kept words."""

    tokens: tuple[str, ...]
    index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(self.tokens[:len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"a vocabulary starts with {RESERVED_TOKENS}, got {tuple(self.tokens[:2])}")
        words = self.tokens[len(RESERVED_TOKENS):]
        index = {word: i for i, word in enumerate(words, start=len(RESERVED_TOKENS))}
        if len(index) != len(words) or set(RESERVED_TOKENS) & set(index):
            raise ValueError("vocabulary words must be distinct and differ from the reserved tokens")
        object.__setattr__(self, "index", index)

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def from_documents(cls, documents: Iterable[Sequence[str]], max_words: int | None = None) -> Vocabulary:
        """The words of ``documents`` by decreasing count, ties by first occurrence, at most
        ``max_words`` ids including the two reserved ones (None: every word)."""
        check_max_words(max_words)
        counts: Counter = Counter()
        for document in documents:
            counts.update(document)
        for reserved in RESERVED_TOKENS:
            counts.pop(reserved, None)
        ordered = sorted(counts.items(), key=lambda item: -item[1])  # stable: ties keep first-occurrence order
        if max_words is not None:
            ordered = ordered[:max_words - len(RESERVED_TOKENS)]
        return cls(RESERVED_TOKENS + tuple(word for word, _ in ordered))

    def lookup(self, words: Sequence[str]) -> np.ndarray:
        """int64 ids of ``words`` (unknown words: :data:`UNKNOWN_ID`)."""
        return np.fromiter((self.index.get(word, UNKNOWN_ID) for word in words), dtype=np.int64, count=len(words))


def check_max_words(max_words) -> None:
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, (int, np.integer))
                                  or max_words <= len(RESERVED_TOKENS)):
        raise ValueError(f"max_words must be None or an int > {len(RESERVED_TOKENS)} (ids 0 and 1 are reserved), "
                         f"got {max_words!r}")


def check_length(length, name: str = "sequence_length") -> None:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise ValueError(f"{name} must be a positive int, got {length!r}")


def encode_sequences(documents: Sequence[Sequence[str]], vocabulary: Vocabulary, length: int, *,
                     drop_unknown: bool = False) -> np.ndarray:
    """int64 (N, length) ids: the last ``length`` ids of each document, left-padded with 0."""
    check_length(length)
    out = np.full((len(documents), length), PAD_ID, dtype=np.int64)
    index = vocabulary.index
    for row, document in enumerate(documents):
        if drop_unknown:
            ids = [index[word] for word in document if word in index]
        else:
            ids = [index.get(word, UNKNOWN_ID) for word in document]
        ids = ids[-length:]
        if ids:
            out[row, length - len(ids):] = ids
    return out


def object_array(items: Sequence) -> np.ndarray:
    """A 1-D object array holding ``items`` (token lists stay lists, whatever their lengths)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


# ------------------------------------------------------------------------------------ GloVe


def check_glove_path(glove) -> Path | None:
    """``glove`` as a Path (None stays None); FileNotFoundError naming it when it is no file."""
    if glove is None:
        return None
    if not isinstance(glove, (str, os.PathLike)):
        raise TypeError(f"glove must be None or the path of a glove.*.txt file, got {glove!r}")
    path = Path(glove).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"GloVe file not found: {path} (glove= must name a GloVe text file, e.g. "
                                f"glove.6B.100d.txt from https://nlp.stanford.edu/projects/glove/)")
    return path


def load_glove(path: str | os.PathLike, vocabulary: Vocabulary, missing=None) -> tuple[np.ndarray, int]:
    """(float32 (len(vocabulary), D) matrix, number of vocabulary words found) from a GloVe text file.

    D is read from the first line. A word may contain spaces (glove.840B has a few): the last
    D fields are the vector. The first line of a repeated word wins. Rows of the padding and
    unknown ids are zeros; rows of words not in the file are zeros too, or ``missing(n, D)``
    (n rows, in vocabulary order) when given (see the module docstring).
    """
    path = check_glove_path(path)
    index = vocabulary.index
    matrix, found, dim = None, np.zeros(len(vocabulary), dtype=bool), 0
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").rstrip("\r").split(" ")
            if matrix is None:
                dim = len(fields) - 1
                if dim < 1:
                    raise ValueError(f"{path}, line 1: expected a word and its vector, got {line[:80]!r}")
                matrix = np.zeros((len(vocabulary), dim), dtype=np.float32)
            if len(fields) < dim + 1:
                raise ValueError(f"{path}, line {number}: expected a word and {dim} numbers, got {len(fields)} fields")
            word = fields[0] if len(fields) == dim + 1 else " ".join(fields[:-dim])
            row = index.get(word)
            if row is not None and not found[row]:
                try:
                    matrix[row] = np.asarray(fields[-dim:], dtype=np.float32)
                except ValueError as error:
                    raise ValueError(f"{path}, line {number}: the vector of {word!r} is not {dim} numbers") from error
                found[row] = True
    if matrix is None:
        raise ValueError(f"{path} holds no word vectors")
    if missing is not None:
        absent = ~found
        absent[:len(RESERVED_TOKENS)] = False
        matrix[absent] = missing(int(absent.sum()), dim)
    return matrix, int(found.sum())


def vocabulary_info(vocabulary: Vocabulary, glove: Path | None, missing=None) -> dict:
    """The ``RawData.info`` keys every text dataset carries: the vocabulary and its embeddings
    (``missing``: how :func:`load_glove` fills the rows of words GloVe lacks; None: zeros)."""
    words = len(vocabulary) - len(RESERVED_TOKENS)
    if glove is None:
        embeddings, source = None, "random initialisation: no GloVe path in the config"
    else:
        embeddings, found = load_glove(glove, vocabulary, missing)
        source = f"GloVe {Path(glove).name}: {found:,} of {words:,} words found"
    return {
        "vocabulary": list(vocabulary.tokens),
        "vocab_size": len(vocabulary),
        "padding_id": PAD_ID,
        "unknown_id": UNKNOWN_ID,
        "pretrained_embeddings": embeddings,
        "embedding_source": source,
    }


# ---------------------------------------------------------------------- sequence datasets


def sequence_data(pools: dict[str, tuple[Sequence[Sequence[str]], np.ndarray]], *, class_names: list[str],
                  info: dict, max_words: int | None, sequence_length: int, glove: Path | None = None,
                  drop_unknown: bool = False, embedding_source: str | None = None,
                  vocabulary_documents: Sequence[Sequence[str]] | None = None) -> RawData:
    """RawData of tokenised documents whose ``finalise`` builds the vocabulary and encodes every
    pool to int64 (N, sequence_length) ids.

    The vocabulary is fitted on ``vocabulary_documents`` (in their order) when given, else on
    the training split. ``embedding_source`` replaces the "no GloVe path" sentence where
    there can be none (synthetic words).
    """
    check_max_words(max_words)
    check_length(sequence_length)
    tokenised = {name: (object_array(documents), np.asarray(labels, dtype=np.int64))
                 for name, (documents, labels) in pools.items()}

    def finalise(pool: str, train_indices: np.ndarray) -> RawData:
        documents = tokenised[pool][0]
        fitted_on = (documents[i] for i in train_indices) if vocabulary_documents is None else vocabulary_documents
        vocabulary = Vocabulary.from_documents(fitted_on, max_words)
        encoded = {name: (encode_sequences(docs, vocabulary, sequence_length, drop_unknown=drop_unknown), labels)
                   for name, (docs, labels) in tokenised.items()}
        text_info = vocabulary_info(vocabulary, glove)
        if embedding_source is not None and glove is None:
            text_info["embedding_source"] = embedding_source
        return RawData(pools=encoded, class_names=class_names,
                       info={**info, **text_info, "sequence_length": int(sequence_length)})

    return RawData(pools=tokenised, class_names=class_names, info=info, finalise=finalise)
