"""The synthetic stand-in language pair, token-based batches and padding."""

import numpy as np
import pytest
import torch

from focalcal.data.translation import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    RANDOM_NOUN_CHOICE,
    RANDOM_VERB_CHOICE,
    ParallelCorpus,
    pad_batch,
    synthetic_translation,
    token_batches,
)


@pytest.fixture(scope="module")
def corpus():
    return synthetic_translation(n_train=3000, n_val=200, n_test=200, seed=3)


def _words(corpus, ids):
    return [corpus.pieces[i] for i in ids]


def test_the_stand_in_is_deterministic_in_its_seed(corpus):
    again = synthetic_translation(n_train=3000, n_val=200, n_test=200, seed=3)
    other = synthetic_translation(n_train=3000, n_val=200, n_test=200, seed=4)
    assert again.pieces == corpus.pieces
    assert again.test.references == corpus.test.references
    assert all(np.array_equal(a, b) for a, b in zip(again.train.source, corpus.train.source))
    assert other.train.references != corpus.train.references


def test_splits_ids_and_references_agree(corpus):
    assert (len(corpus.train), len(corpus.val), len(corpus.test)) == (3000, 200, 200)
    for split in (corpus.train, corpus.test):
        for source, target, reference in zip(split.source, split.target, split.references):
            assert source.dtype == np.int64 and target.dtype == np.int64
            assert 3 <= len(source) <= 14 and 3 <= len(target) <= 14
            assert min(source.min(), target.min()) > 3  # no PAD / BOS / EOS / UNK inside sentences
            assert corpus.detokenise(np.concatenate([[BOS_ID], target, [EOS_ID, 17, PAD_ID]])) == reference
            assert " ".join(_words(corpus, target)) == reference


def test_target_puts_the_verb_last_and_agrees_with_the_subject_number(corpus):
    for source, target in zip(corpus.train.source, corpus.train.target):
        src, tgt = _words(corpus, source), _words(corpus, target)
        verb = next(i for i, w in enumerate(src) if w.startswith("v"))
        subject_plural = src[verb - 1].endswith("s")
        assert tgt[-1][0] in "wz" and tgt[-1][1:3] == src[verb][1:3]  # SVO -> SOV
        assert tgt[-1].endswith("n" if subject_plural else "t")
        assert src[0] == "the" or (src[0] == "some") == subject_plural


def test_adjectives_follow_their_noun_with_the_determiners_gender(corpus):
    determiners = {"der": "r", "das": "s", "eine": "e"}  # unambiguous singular forms
    seen = 0
    for target in corpus.train.target:
        words = _words(corpus, target)
        for i, word in enumerate(words):
            if word in determiners and i + 2 < len(words) and words[i + 2].startswith("q"):
                assert words[i + 1][0] in "xy"  # noun first, then its adjectives
                assert words[i + 2].endswith(determiners[word])
                seen += 1
    assert seen > 100


def test_random_ambiguity_has_its_fixed_probabilities():
    corpus = synthetic_translation(n_train=20000, n_val=1, n_test=1, seed=0)
    by_verb = {}  # verb -> counts of w / z synonyms
    by_noun = {}  # noun -> {verb parity: counts of x / y}
    for source, target in zip(corpus.train.source, corpus.train.target):
        src, tgt = _words(corpus, source), _words(corpus, target)
        verb = next(w for w in src if w.startswith("v"))
        by_verb.setdefault(verb, []).append(tgt[-1][0] == "w")
        parity = int(verb[1:]) % 2
        for word in tgt:
            if word[0] in "xy":
                by_noun.setdefault(word[1:3], {0: [], 1: []})[parity].append(word[0] == "x")
    synonym_rates = [np.mean(v) for v in by_verb.values() if np.mean(v) < 1]
    assert len(synonym_rates) == 5  # a quarter of 20 verbs
    assert np.allclose(synonym_rates, RANDOM_VERB_CHOICE, atol=0.05)
    kinds = {"fixed": 0, "context": 0, "random": 0}
    for counts in by_noun.values():
        rates = [np.mean(counts[0]), np.mean(counts[1])]
        if rates == [1.0, 1.0]:
            kinds["fixed"] += 1
        elif rates == [1.0, 0.0]:
            kinds["context"] += 1  # even verb -> x, odd -> y
        else:
            assert np.allclose(rates, RANDOM_NOUN_CHOICE, atol=0.06)
            kinds["random"] += 1
    assert kinds == {"fixed": 28, "context": 6, "random": 6}


@pytest.mark.parametrize("bad", [{"n_train": 0}, {"n_nouns": 1}, {"seed": -1}, {"n_verbs": 2.5}, {"n_adjectives": 101}])
def test_bad_sizes_are_refused_by_name(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        synthetic_translation(**{"n_train": 10, "n_val": 2, "n_test": 2, **bad})


def test_token_batches_cover_every_sentence_once_within_the_budget():
    rng = np.random.default_rng(0)
    source, target = rng.integers(1, 30, size=500), rng.integers(1, 30, size=500)
    batches = token_batches(source, target, max_tokens=200, shuffle=True, seed=1)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(500))
    for batch in batches:
        assert len(batch) * max(source[batch].max(), target[batch].max()) <= 200
    # greedy packing of the length-sorted order: each batch could not take the next sentence
    assert np.mean([len(b) * max(source[b].max(), target[b].max()) for b in batches]) > 150
    again = token_batches(source, target, max_tokens=200, shuffle=True, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    other = token_batches(source, target, max_tokens=200, shuffle=True, seed=2)
    assert any(not np.array_equal(a, b) for a, b in zip(batches, other))


def test_token_batches_unshuffled_run_in_length_order():
    batches = token_batches([3, 1, 2, 2], [1, 1, 4, 2], max_tokens=6, shuffle=False)
    assert [b.tolist() for b in batches] == [[1, 0], [3], [2]]


def test_token_batches_refuse_a_sentence_beyond_the_budget():
    with pytest.raises(ValueError, match="sentence 1 has 9 tokens, more than max_tokens=8"):
        token_batches([2, 9], [2, 3], max_tokens=8)
    with pytest.raises(ValueError, match="of one size"):
        token_batches([2, 3], [2], max_tokens=8)


def test_pad_batch_adds_bos_eos_and_right_pads():
    batch = pad_batch([np.array([5, 6, 7]), [8]], add_bos=True, add_eos=True)
    assert batch.dtype == torch.long
    assert batch.tolist() == [[BOS_ID, 5, 6, 7, EOS_ID], [BOS_ID, 8, EOS_ID, PAD_ID, PAD_ID]]
    assert pad_batch([[5], [6, 7]]).tolist() == [[5, PAD_ID], [6, 7]]
    with pytest.raises(ValueError, match="at least one"):
        pad_batch([])
    with pytest.raises(ValueError, match="only empty sequences"):
        pad_batch([[], []])


@pytest.mark.parametrize(("add_bos", "add_eos"), [(False, False), (True, False), (False, True), (True, True)])
def test_pad_batch_equals_the_rows_written_out_one_by_one(add_bos, add_eos):
    rng = np.random.default_rng(3)
    sequences = [rng.integers(4, 400, size=rng.integers(0, 12)) for _ in range(40)] + [[]]
    rows = [[BOS_ID] * add_bos + [int(i) for i in seq] + [EOS_ID] * add_eos for seq in sequences]
    width = max(len(row) for row in rows)
    expected = [row + [PAD_ID] * (width - len(row)) for row in rows]
    assert pad_batch(sequences, add_bos=add_bos, add_eos=add_eos).tolist() == expected


def test_a_corpus_loads_a_split_given_as_a_loader_on_its_first_use_only(corpus):
    calls = []

    def loader(name):
        return lambda: calls.append(name) or getattr(corpus, name)

    lazy = ParallelCorpus(
        "lazy", corpus.pieces, *(loader(name) for name in ("train", "val", "test")), corpus.detokenise
    )
    assert lazy.vocab_size == corpus.vocab_size and calls == []
    assert lazy.test is corpus.test and lazy.split("test") is corpus.test
    assert calls == ["test"]  # read once, kept; train and val never read
    assert lazy.train is corpus.train and calls == ["test", "train"]
    broken = ParallelCorpus("broken", corpus.pieces, corpus.train, lambda: None, corpus.test, corpus.detokenise)
    with pytest.raises(
        TypeError, match="corpus 'broken': the loader of split 'val' returned NoneType, not a ParallelSplit"
    ):
        broken.split("val")
