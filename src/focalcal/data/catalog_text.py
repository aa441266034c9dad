"""The registered text datasets of mukhoti2020 (App. D) and their offline stand-ins.

* ``20newsgroups``: the original 19,997-message release split 15,098 / 900 / 3,999
  (mukhoti2020 App. D); ``20newsgroups_bydate``: the 11,314 / 7,532 release with 900
  validation messages from train. Token ids (N, 1000), vocabulary of 20,000 ids from every
  document of the release (:mod:`focalcal.data.newsgroups`).
* ``sst_binary``: SST's PTB trees without neutral sentences, official 6,920 / 872 / 1,821
  (dev as val); node tables (N, M, 4) (:mod:`focalcal.data.sst`).
* ``synthetic_topics`` / ``synthetic_treebank``: generated stand-ins in the same encodings,
  small enough to train on a CPU in seconds.

No text set is augmented and none is normalised (the inputs are ids). Every one carries its
vocabulary and optional GloVe matrix in ``meta`` (``vocabulary``, ``vocab_size``,
``pretrained_embeddings``, ``embedding_source``).
"""

from __future__ import annotations

from .augment import NO_AUGMENTATION
from .newsgroups import NUM_GROUPS, SHUFFLE_SEED, TEST_SIZE, VAL_SIZE, load_newsgroups, load_newsgroups_bydate
from .registry import register
from .sst import CLASS_NAMES, load_sst_binary
from .synthetic_topics import NUM_TOPICS, load_synthetic_topics
from .synthetic_treebank import load_synthetic_treebank

register("20newsgroups", load_newsgroups, num_classes=NUM_GROUPS, val_size=VAL_SIZE, test_size=TEST_SIZE,
         augmentation=NO_AUGMENTATION, needs_download=True, fixed_shuffle_seed=SHUFFLE_SEED,
         summary="20 Newsgroups, original 19,997 messages, 15,098/900/3,999 (mukhoti2020 App. D)")
register("20newsgroups_bydate", load_newsgroups_bydate, num_classes=NUM_GROUPS, val_size=VAL_SIZE,
         augmentation=NO_AUGMENTATION, needs_download=True,
         summary="20 Newsgroups bydate release, 10,414/900/7,532 (official test set)")
register("sst_binary", load_sst_binary, num_classes=len(CLASS_NAMES), val_size=None, test_size=None,
         augmentation=NO_AUGMENTATION, needs_download=True,
         summary="SST binary parse trees, 6,920/872/1,821 (official train/dev/test; mukhoti2020 App. D)")
register("synthetic_topics", load_synthetic_topics, num_classes=NUM_TOPICS, val_size=0.15, test_size=0.2,
         augmentation=NO_AUGMENTATION,
         summary="20 synthetic topics in 6 related groups, token ids like 20newsgroups, no download")
register("synthetic_treebank", load_synthetic_treebank, num_classes=len(CLASS_NAMES), val_size=None, test_size=None,
         augmentation=NO_AUGMENTATION,
         summary="random binary sentiment trees with negation, encoded like sst_binary, no download")
