"""20 Newsgroups (Lang 1995): mukhoti2020's document-classification set, 20 classes.

Two releases (qwone.com, see :mod:`focalcal.data.sources`):

* ``20newsgroups``: the original 19,997 messages (``20news-19997.tar.gz``, folders
  ``20_newsgroups/<group>/<message id>``), pooled and split 15,098 / 900 / 3,999 — the
  counts of mukhoti2020 App. D, which sum to 19,997, i.e. this release. The split is the
  released code's (torrvision/focal_calibration ``NewsGroup/ng_loader.py``): the messages in
  reading order shuffled once by numpy's ``RandomState(1)``, the last ``int(0.2 N) = 3,999``
  the test set, the 900 before them validation, the rest training — whatever
  ``split_seed`` (registered with ``fixed_shuffle_seed``; :mod:`focalcal.data.registry`).
* ``20newsgroups_bydate``: the 11,314 / 7,532 train/test release (``20news-bydate.tar.gz``,
  duplicates and newsgroup-identifying headers removed), 900 validation documents carved
  from train, stratified by ``split_seed`` (the released code never read this release).

Each message is read as the released code reads it (ng_loader.py): groups in sorted order
(label = position), files whose name is all digits in string order, decoded as latin-1, and
the header dropped — everything before the first blank line, when there is one after the
first character. Then :mod:`focalcal.data.text` turns the documents into ids as the released
code's Keras ``Tokenizer`` did: fitted on every document of the release in reading order
(``tokenizer.fit_on_texts(texts)`` before the split; test documents included — a vocabulary
reads words, not labels), capped at 20,000 ids, words outside the cap dropped rather than
mapped to an unknown id (Keras without ``oov_token``; ``drop_unknown_words``), the last
1,000 ids per document, left-padded.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from . import sources
from ._dataset import RawData
from .download import ensure_archive_folder
from .text import check_glove_path, check_length, check_max_words, sequence_data, tokenise

NUM_GROUPS = 20
ENCODING = "latin-1"  # ng_loader.py opens every message with encoding='latin-1'
MAX_WORDS = 20000  # ng_loader.py MAX_NUM_WORDS
SEQUENCE_LENGTH = 1000  # ng_loader.py MAX_SEQUENCE_LENGTH
VAL_SIZE = 900  # mukhoti2020 App. D (ng_loader.py's "+900" validation slice)
TEST_SIZE = 3999  # mukhoti2020 App. D; int(0.2 * 19,997) in ng_loader.py
SHUFFLE_SEED = 1  # ng_loader.py: np.random.seed(1); np.random.shuffle(indices)


def strip_header(message: str) -> str:
    """The message from its first blank line on; unchanged if that is at position 0 or absent
    (ng_loader.py: ``i = t.find('\\n\\n'); if 0 < i: t = t[i:]``)."""
    position = message.find("\n\n")
    return message[position:] if position > 0 else message


def read_groups(folder: Path) -> tuple[list[str], np.ndarray, list[str]]:
    """(message texts without headers, int64 labels, sorted group names) of ``folder/<group>/<id>``."""
    groups = sorted(entry.name for entry in folder.iterdir() if entry.is_dir())
    if len(groups) != NUM_GROUPS:
        raise ValueError(f"{folder} holds {len(groups)} group folders, expected the {NUM_GROUPS} newsgroups: "
                         f"delete it and load again to unpack the archive afresh")
    texts, labels = [], []
    for label, group in enumerate(groups):
        for name in sorted(os.listdir(folder / group)):  # string order, as ng_loader.py
            path = folder / group / name
            if name.isdigit() and path.is_file():
                texts.append(strip_header(path.read_text(encoding=ENCODING)))
                labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64), groups


def _check_options(max_words, sequence_length, glove, drop_unknown_words) -> Path | None:
    check_max_words(max_words)
    check_length(sequence_length)
    if not isinstance(drop_unknown_words, bool):
        raise TypeError(f"drop_unknown_words must be true or false, got {drop_unknown_words!r}")
    return check_glove_path(glove)


def load_newsgroups(root, download: bool, *, max_words: int | None = MAX_WORDS, sequence_length: int = SEQUENCE_LENGTH,
                    glove: str | None = None, drop_unknown_words: bool = True) -> RawData:
    """The 19,997-message release as one pool ("all"); see the module docstring.

    ``drop_unknown_words=False`` maps out-of-vocabulary words to id 1 (a zero vector that
    takes a token slot) instead of dropping them as the released code's Keras tokenizer did.
    """
    glove_path = _check_options(max_words, sequence_length, glove, drop_unknown_words)
    folder = ensure_archive_folder(sources.NEWSGROUPS_19997, Path(root), download=download, dataset="20newsgroups")
    texts, labels, groups = read_groups(folder)
    documents = [tokenise(text) for text in texts]
    return sequence_data({"all": (documents, labels)}, class_names=groups,
                         info={"folder": str(folder), "release": "20news-19997"}, max_words=max_words,
                         sequence_length=sequence_length, glove=glove_path, drop_unknown=drop_unknown_words,
                         vocabulary_documents=documents)


def load_newsgroups_bydate(root, download: bool, *, max_words: int | None = MAX_WORDS,
                           sequence_length: int = SEQUENCE_LENGTH, glove: str | None = None,
                           drop_unknown_words: bool = True) -> RawData:
    """The bydate release: official "train" and "test" pools; see the module docstring."""
    glove_path = _check_options(max_words, sequence_length, glove, drop_unknown_words)
    pools, folders, group_names = {}, {}, {}
    for split, source in sources.NEWSGROUPS_BYDATE.items():
        folders[split] = ensure_archive_folder(source, Path(root), download=download, dataset="20newsgroups_bydate")
        texts, labels, group_names[split] = read_groups(folders[split])
        pools[split] = ([tokenise(text) for text in texts], labels)
    if group_names["train"] != group_names["test"]:
        raise ValueError(f"the groups of {folders['train']} and {folders['test']} differ: "
                         f"{sorted(set(group_names['train']) ^ set(group_names['test']))}")
    return sequence_data(pools, class_names=group_names["train"],
                         info={"folder": str(folders["train"].parent), "release": "20news-bydate"},
                         max_words=max_words, sequence_length=sequence_length, glove=glove_path,
                         drop_unknown=drop_unknown_words,
                         vocabulary_documents=pools["train"][0] + pools["test"][0])
