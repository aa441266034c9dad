"""Parallel corpora for translation, token-based batching, and the synthetic stand-in language pair.

A :class:`ParallelCorpus` holds int64 id arrays (without BOS/EOS) over one shared vocabulary
(``pieces``: id -> piece; ids 0-3 are PAD, BOS, EOS, UNK) and each split's detokenised
references for BLEU.

The stand-in (:func:`synthetic_translation`) needs no download. All its choices are our own:

* **source** ("English-like"): ``Det Adj* Noun Verb [Det Adj* Noun] [with Det Adj* Noun]``.
  Determiners ``the`` / ``a`` / ``some``; nouns ``n07`` (singular) and ``n07s`` (plural: with
  ``some`` always, with ``the`` at random); adjectives ``j03`` (0-2 per noun phrase); verbs
  ``v05``, a quarter of them intransitive (no object). 3-14 words.
* **word order**: the target puts the verb last (SVO -> S [mit-phrase] O V, SOV) and
  adjectives after their noun.
* **agreement**: every target noun has a gender (m/f/n, drawn once from the seed). The target
  determiner depends on gender, number and definiteness (``der die das`` / ``ein eine ein``,
  plural ``die`` / ``einige``); an adjective takes a gender/number ending (``q03r q03e q03s
  q03n``); the verb takes the subject's number (``w05t`` singular, ``w05n`` plural), which the
  source marks only on the subject noun.
* **ambiguity**: 30 % of nouns have two translations (``x07`` / ``y07``, each with its own
  gender, so the choice also moves the determiner and adjective endings). For half of them
  the verb decides (even verb index -> ``x``, odd -> ``y``: learnable from context); for the
  other half the choice is random, ``x`` with probability 0.7. A quarter of verbs have two
  synonyms (``w05`` / ``z05``) chosen at random, ``w`` with probability 0.6. These random
  choices make the task irreducibly uncertain: a model that learns the generator exactly is
  still right only with the fixed probabilities, so its confidence can be calibrated or not.

Sizes: the default vocabulary (40 nouns, 20 adjectives, 20 verbs) gives 455 pieces (source and target words share one vocabulary); see
bench/RESULTS.md for what a small Transformer reaches on it in a minute of CPU.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_PIECES = ("<pad>", "<s>", "</s>", "<unk>")

AMBIGUOUS_NOUNS = 0.3  # share of nouns with two translations
RANDOM_NOUN_CHOICE = 0.7  # P(first translation) of a noun whose choice is random
AMBIGUOUS_VERBS = 0.25  # share of verbs with two synonyms
RANDOM_VERB_CHOICE = 0.6  # P(first synonym)
INTRANSITIVE = 0.25  # share of verbs without an object
ADJECTIVE_COUNTS = (0.5, 0.35, 0.15)  # P(0, 1, 2 adjectives) in a noun phrase
P_PREPOSITION = 0.3  # P(a "with" phrase)
P_DEFINITE = 0.5
P_PLURAL = 0.4  # P(plural | definite); "a" is singular, "some" plural
GENDERS = ("m", "f", "n")
TARGET_DETERMINERS = {
    ("def", "m"): "der",
    ("def", "f"): "die",
    ("def", "n"): "das",
    ("def", "pl"): "die",
    ("indef", "m"): "ein",
    ("indef", "f"): "eine",
    ("indef", "n"): "ein",
    ("indef", "pl"): "einige",
}
ADJECTIVE_ENDINGS = {"m": "r", "f": "e", "n": "s", "pl": "n"}


@dataclass(frozen=True)
class ParallelSplit:
    """Sentence pairs as int64 id arrays without BOS/EOS; ``references`` are the detokenised targets."""

    source: tuple[np.ndarray, ...]
    target: tuple[np.ndarray, ...]
    references: tuple[str, ...]

    def __post_init__(self):
        if not len(self.source) == len(self.target) == len(self.references):
            raise ValueError(
                f"a split needs as many sources, targets and references, got {len(self.source)}, "
                f"{len(self.target)} and {len(self.references)}"
            )

    def __len__(self) -> int:
        return len(self.source)

    def source_lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.source], dtype=np.int64)

    def target_lengths(self) -> np.ndarray:
        return np.array([len(t) for t in self.target], dtype=np.int64)


SPLITS = ("train", "val", "test")


class ParallelCorpus:
    """A translation data set over one shared vocabulary (``pieces``: id -> piece).

    A split is a :class:`ParallelSplit`, or a zero-argument loader of one, called on the
    split's first use and kept: a job that reads only the test set (a decode) never loads the
    training pairs, millions at WMT scale."""

    def __init__(self, name: str, pieces: Sequence[str], train, val, test, detokenise: Callable[[Sequence[int]], str]):
        self.name = name
        self.pieces = tuple(pieces)
        self.detokenise = detokenise
        self._splits = {"train": train, "val": val, "test": test}

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def split(self, name: str) -> ParallelSplit:
        """The split ``name``, loaded on its first use."""
        if name not in SPLITS:
            raise ValueError(f"split must be 'train', 'val' or 'test', got {name!r}")
        part = self._splits[name]
        if not isinstance(part, ParallelSplit):
            part = part()
            if not isinstance(part, ParallelSplit):
                raise TypeError(
                    f"corpus {self.name!r}: the loader of split {name!r} returned "
                    f"{type(part).__name__}, not a ParallelSplit"
                )
            self._splits[name] = part
        return part

    @property
    def train(self) -> ParallelSplit:
        return self.split("train")

    @property
    def val(self) -> ParallelSplit:
        return self.split("val")

    @property
    def test(self) -> ParallelSplit:
        return self.split("test")


def strip_special(ids: Sequence[int]) -> list[int]:
    """Ids up to the first EOS, without PAD and BOS."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out


def word_detokeniser(pieces: Sequence[str]) -> Callable[[Sequence[int]], str]:
    """ids -> the words joined by spaces (for word-level vocabularies), stopping at EOS."""
    pieces = tuple(pieces)

    def detokenise(ids: Sequence[int]) -> str:
        return " ".join(pieces[i] for i in strip_special(ids))

    return detokenise


# -- the stand-in ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Lexicon:
    noun_gender: np.ndarray  # (n_nouns, 2): gender index of translation x and y
    noun_mode: np.ndarray  # (n_nouns,): 0 one translation, 1 chosen by the verb, 2 random
    verb_synonym: np.ndarray  # (n_verbs,) bool
    verb_transitive: np.ndarray  # (n_verbs,) bool


def _lexicon(rng: np.random.Generator, n_nouns: int, n_verbs: int) -> _Lexicon:
    ambiguous = rng.permutation(n_nouns)[: round(AMBIGUOUS_NOUNS * n_nouns)]
    mode = np.zeros(n_nouns, dtype=np.int64)
    mode[ambiguous[: len(ambiguous) // 2]] = 1
    mode[ambiguous[len(ambiguous) // 2 :]] = 2
    synonyms = np.zeros(n_verbs, dtype=bool)
    synonyms[rng.permutation(n_verbs)[: round(AMBIGUOUS_VERBS * n_verbs)]] = True
    transitive = np.ones(n_verbs, dtype=bool)
    transitive[rng.permutation(n_verbs)[: round(INTRANSITIVE * n_verbs)]] = False
    return _Lexicon(rng.integers(len(GENDERS), size=(n_nouns, 2)), mode, synonyms, transitive)


def _vocabulary(n_nouns: int, n_adjectives: int, n_verbs: int) -> tuple[str, ...]:
    source = ["the", "a", "some", "with"]
    source += [f"n{i:02d}{s}" for i in range(n_nouns) for s in ("", "s")]
    source += [f"j{i:02d}" for i in range(n_adjectives)] + [f"v{i:02d}" for i in range(n_verbs)]
    target = sorted(set(TARGET_DETERMINERS.values())) + ["mit"]
    target += [f"{p}{i:02d}{s}" for i in range(n_nouns) for p in "xy" for s in ("", "n")]
    target += [f"q{i:02d}{e}" for i in range(n_adjectives) for e in ADJECTIVE_ENDINGS.values()]
    target += [f"{p}{i:02d}{e}" for i in range(n_verbs) for p in "wz" for e in ("t", "n")]
    return SPECIAL_PIECES + tuple(source) + tuple(target)


def _noun_phrase(rng, lexicon: _Lexicon, n_nouns: int, n_adjectives: int, verb: int):
    """(source words, target words, plural) of one noun phrase."""
    noun = int(rng.integers(n_nouns))
    definite = rng.random() < P_DEFINITE
    plural = bool(rng.random() < P_PLURAL) if definite else bool(rng.random() < 0.5)
    adjectives = rng.integers(n_adjectives, size=rng.choice(len(ADJECTIVE_COUNTS), p=ADJECTIVE_COUNTS))
    mode = lexicon.noun_mode[noun]
    choice = 0 if mode == 0 else (verb % 2 if mode == 1 else int(rng.random() >= RANDOM_NOUN_CHOICE))
    gender = "pl" if plural else GENDERS[lexicon.noun_gender[noun, choice]]
    determiner = "the" if definite else ("some" if plural else "a")
    source = [determiner] + [f"j{a:02d}" for a in adjectives] + [f"n{noun:02d}{'s' if plural else ''}"]
    target = [
        TARGET_DETERMINERS["def" if definite else "indef", gender],
        f"{'xy'[choice]}{noun:02d}{'n' if plural else ''}",
    ]
    target += [f"q{a:02d}{ADJECTIVE_ENDINGS[gender]}" for a in adjectives]
    return source, target, plural


def _sentence(rng, lexicon: _Lexicon, n_nouns: int, n_adjectives: int, n_verbs: int) -> tuple[list[str], list[str]]:
    verb = int(rng.integers(n_verbs))
    subject_source, subject_target, plural = _noun_phrase(rng, lexicon, n_nouns, n_adjectives, verb)
    source, target = subject_source + [f"v{verb:02d}"], list(subject_target)
    if lexicon.verb_transitive[verb]:
        object_source, object_target, _ = _noun_phrase(rng, lexicon, n_nouns, n_adjectives, verb)
    else:
        object_source, object_target = [], []
    source += object_source
    if rng.random() < P_PREPOSITION:
        with_source, with_target, _ = _noun_phrase(rng, lexicon, n_nouns, n_adjectives, verb)
        source += ["with"] + with_source
        target += ["mit"] + with_target
    synonym = "z" if lexicon.verb_synonym[verb] and rng.random() >= RANDOM_VERB_CHOICE else "w"
    target += object_target + [f"{synonym}{verb:02d}{'n' if plural else 't'}"]
    return source, target


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def synthetic_translation(
    n_train: int = 6000,
    n_val: int = 500,
    n_test: int = 500,
    seed: int = 0,
    *,
    n_nouns: int = 40,
    n_adjectives: int = 20,
    n_verbs: int = 20,
) -> ParallelCorpus:
    """The stand-in language pair (module docstring), deterministic in ``seed`` and the sizes.

    The lexicon (genders, ambiguous words, transitivity) and all sentences come from one
    generator seeded with ``seed``; train, val and test are consecutive draws from it.
    """
    counts = {
        name: _check_count(v, name, 1) for name, v in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test))
    }
    n_nouns, n_adjectives, n_verbs = (
        _check_count(v, name, 2)
        for name, v in (("n_nouns", n_nouns), ("n_adjectives", n_adjectives), ("n_verbs", n_verbs))
    )
    if n_nouns > 100 or n_adjectives > 100 or n_verbs > 100:
        raise ValueError(
            f"n_nouns, n_adjectives and n_verbs must be at most 100 (two-digit word names), got "
            f"{n_nouns}, {n_adjectives} and {n_verbs}"
        )
    rng = np.random.default_rng(_check_count(seed, "seed", 0))
    lexicon = _lexicon(rng, n_nouns, n_verbs)
    pieces = _vocabulary(n_nouns, n_adjectives, n_verbs)
    index = {piece: i for i, piece in enumerate(pieces)}

    def draw(n: int) -> ParallelSplit:
        pairs = [_sentence(rng, lexicon, n_nouns, n_adjectives, n_verbs) for _ in range(n)]
        return ParallelSplit(
            source=tuple(np.array([index[w] for w in s], dtype=np.int64) for s, _ in pairs),
            target=tuple(np.array([index[w] for w in t], dtype=np.int64) for _, t in pairs),
            references=tuple(" ".join(t) for _, t in pairs),
        )

    train, val, test = (draw(counts[name]) for name in ("n_train", "n_val", "n_test"))
    return ParallelCorpus("synthetic_translation", pieces, train, val, test, word_detokeniser(pieces))


# -- batching --------------------------------------------------------------------------------------
def token_batches(
    source_lengths, target_lengths, max_tokens: int, shuffle: bool = True, seed: int = 0
) -> list[np.ndarray]:
    """Sentence indices grouped into batches of about ``max_tokens`` tokens (Vaswani et al. 2017 §5.1).

    Sentences are sorted by (target, source) length, ties broken at random when shuffling,
    and cut into consecutive batches whose padded size, sentences × the longest source or
    target length in the batch, stays within ``max_tokens``; the batch order is shuffled.
    Count BOS/EOS in the lengths passed if the batches should include them.
    """
    source_lengths = np.asarray(source_lengths, dtype=np.int64).reshape(-1)
    target_lengths = np.asarray(target_lengths, dtype=np.int64).reshape(-1)
    max_tokens = _check_count(max_tokens, "max_tokens", 1)
    if source_lengths.shape != target_lengths.shape or source_lengths.size == 0:
        raise ValueError(
            f"source_lengths and target_lengths must be non-empty and of one size, got "
            f"{source_lengths.size} and {target_lengths.size}"
        )
    longest = np.maximum(source_lengths, target_lengths)
    if longest.max() > max_tokens:
        worst = int(np.argmax(longest))
        raise ValueError(f"sentence {worst} has {int(longest[worst])} tokens, more than max_tokens={max_tokens}")
    rng = np.random.default_rng(seed)
    tie_break = rng.permutation(len(longest)) if shuffle else np.arange(len(longest))
    order = np.lexsort((tie_break, source_lengths, target_lengths))
    batches, start, widest = [], 0, 0
    for position, sentence in enumerate(order):
        wider = max(widest, int(longest[sentence]))
        if wider * (position - start + 1) > max_tokens:
            batches.append(order[start:position])
            start, wider = position, int(longest[sentence])
        widest = wider
    batches.append(order[start:])
    if shuffle:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def pad_batch(sequences: Sequence, add_bos: bool = False, add_eos: bool = False):
    """(B, L) LongTensor of the id sequences, optionally with BOS / EOS, right-padded with PAD_ID."""
    import torch

    if len(sequences) == 0:
        raise ValueError("pad_batch needs at least one sequence")
    rows = [np.asarray(seq, dtype=np.int64).reshape(-1) for seq in sequences]
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    width = int(lengths.max()) + add_bos + add_eos
    if width == 0:
        raise ValueError("pad_batch got only empty sequences and neither BOS nor EOS")
    out = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    if add_bos:
        out[:, 0] = BOS_ID
    for i, row in enumerate(rows):
        out[i, add_bos : add_bos + len(row)] = row
    if add_eos:
        out[np.arange(len(rows)), add_bos + lengths] = EOS_ID
    return torch.from_numpy(out)
