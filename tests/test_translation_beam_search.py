"""Beam search: beam 1 at T = 1 is greedy decoding; a wider beam finds what greedy misses; the
temperature and the length penalty move the choice where they should."""

import itertools
import math

import pytest
import torch

from focalcal.data.translation import BOS_ID, EOS_ID, pad_batch
from focalcal.models.transformer import Transformer
from focalcal.translation.beam_search import beam_search, finished_hypotheses, greedy_decode, length_penalty

A, B, C, D = 4, 5, 6, 7
VOCAB = 8
TINY = 1e-9


class BigramTable(torch.nn.Module):
    """A "model" whose next-token distribution depends only on the previous token: a fixed table."""

    def __init__(self, table: dict[int, dict[int, float]]):
        super().__init__()
        probs = torch.full((VOCAB, VOCAB), TINY, dtype=torch.float64)
        for previous, row in table.items():
            for token, p in row.items():
                probs[previous, token] = p
        self.register_buffer("log_probs", (probs / probs.sum(1, keepdim=True)).log().float())

    def encode(self, source):
        return torch.zeros(source.shape[0], 1, 1), torch.zeros(source.shape[0], 1, dtype=torch.bool)

    def decode(self, memory, padding, target_in):
        return self.log_probs[target_in]

    def probability(self, sequence, temperature=1.0):
        """P(sequence + EOS) under softmax(log p / T), by hand."""
        scaled = torch.log_softmax(self.log_probs.double() / temperature, dim=1)
        path = [BOS_ID, *sequence, EOS_ID]
        return math.exp(sum(scaled[a, b].item() for a, b in itertools.pairwise(path)))


# BOS -> A (0.6) or B (0.4); A spreads its mass (EOS 0.4, C 0.3, D 0.3); B almost surely ends.
GARDEN_PATH = BigramTable(
    {
        BOS_ID: {A: 0.6, B: 0.4},
        A: {EOS_ID: 0.4, C: 0.3, D: 0.3},
        B: {EOS_ID: 0.9, C: 0.1},
        C: {EOS_ID: 1.0},
        D: {EOS_ID: 1.0},
    }
)
SOURCE = torch.tensor([[9, 9, 9]])


def best_by_enumeration(model, temperature, alpha, max_tokens=3):
    sequences = [list(s) for n in range(max_tokens) for s in itertools.product([A, B, C, D], repeat=n)]
    return max(sequences, key=lambda s: math.log(model.probability(s, temperature)) / length_penalty(len(s) + 1, alpha))


def test_greedy_misses_what_beam_two_finds():
    assert greedy_decode(GARDEN_PATH, SOURCE, max_length=5) == [[A]]  # 0.6 × 0.4 = 0.24
    assert beam_search(GARDEN_PATH, SOURCE, beam_size=2, length_penalty=0.0, max_length=5) == [[B]]  # 0.36
    assert best_by_enumeration(GARDEN_PATH, 1.0, 0.0) == [B]
    assert beam_search(GARDEN_PATH, SOURCE, beam_size=1, length_penalty=0.0, max_length=5) == [[A]]


def test_a_sharper_softmax_moves_the_beam_to_the_branching_path():
    # softmax(log p / 0.5) ∝ p²: A's path 0.69 × 0.47 = 0.33 beats B's 0.31 × 0.99 = 0.30
    assert GARDEN_PATH.probability([A], 0.5) > GARDEN_PATH.probability([B], 0.5)
    assert beam_search(GARDEN_PATH, SOURCE, beam_size=2, length_penalty=0.0, temperature=0.5, max_length=5) == [[A]]
    assert beam_search(GARDEN_PATH, SOURCE, beam_size=2, length_penalty=0.0, temperature=1.0, max_length=5) == [[B]]
    assert best_by_enumeration(GARDEN_PATH, 0.5, 0.0) == [A]


def test_the_length_penalty_favours_longer_hypotheses_as_alpha_grows():
    assert length_penalty(3, 0.6) == pytest.approx((8 / 6) ** 0.6)
    # A EOS has P 0.5, A C EOS 0.45: log P / lp prefers the shorter at α = 0, the longer at α = 1.5
    table = BigramTable({BOS_ID: {A: 1.0}, A: {EOS_ID: 0.5, C: 0.5}, C: {EOS_ID: 0.9, D: 0.1}, D: {EOS_ID: 1.0}})
    assert table.probability([A]) > table.probability([A, C])
    assert beam_search(table, SOURCE, beam_size=3, length_penalty=0.0, max_length=6) == [[A]]
    assert beam_search(table, SOURCE, beam_size=3, length_penalty=1.5, max_length=6) == [[A, C]]
    for alpha in (0.0, 1.5):
        assert beam_search(table, SOURCE, beam_size=3, length_penalty=alpha, max_length=6) == [
            best_by_enumeration(table, 1.0, alpha)
        ]


def test_a_sentence_keeps_at_most_k_finished_hypotheses_as_fairseq_does():
    """Beam 2: the empty output finishes at step 1; at step 2 both live beams end with EOS at ranks 0 and 1, and
    only the first fills the second place (fairseq's rule). The one dropped ([B], 0.2 × 0.9) is below the one
    kept at its length ([A], 0.5 × 0.9), so the output is the same as it would be with it."""
    table = BigramTable({BOS_ID: {A: 0.5, EOS_ID: 0.3, B: 0.2}, A: {EOS_ID: 0.9, C: 0.1},
                         B: {EOS_ID: 0.9, C: 0.1}, C: {EOS_ID: 1.0}})
    [found] = finished_hypotheses(table, SOURCE, beam_size=2, length_penalty=0.0, max_length=5)
    assert [ids for _, ids in found] == [[A], []]
    assert [score for score, _ in found] == pytest.approx([math.log(table.probability([A])),
                                                           math.log(table.probability([]))], rel=1e-6)
    assert math.log(table.probability([A])) == pytest.approx(math.log(0.45), rel=1e-6)
    assert beam_search(table, SOURCE, beam_size=2, length_penalty=0.0, max_length=5) == [[A]]


def test_max_length_forces_eos():
    loop = BigramTable({BOS_ID: {A: 1.0}, A: {A: 0.9, EOS_ID: 0.1}})
    assert greedy_decode(loop, SOURCE, max_length=4) == [[A, A, A]]
    assert beam_search(loop, SOURCE, beam_size=1, max_length=4) == [[A, A, A]]
    assert len(beam_search(loop, SOURCE, beam_size=2, max_length=6)[0]) <= 5


def test_a_beam_wider_than_the_live_extensions_ends_at_the_limit():
    # 5 tokens besides EOS, PAD and BOS: a beam of 6 keeps dead beams from the first step on
    assert beam_search(GARDEN_PATH, SOURCE, beam_size=6, length_penalty=0.0, max_length=1) == [[]]
    for max_length in (2, 3, 5):
        assert beam_search(GARDEN_PATH, SOURCE, beam_size=6, length_penalty=0.0, max_length=max_length) == [[B]]


@pytest.fixture(scope="module")
def transformer():
    """A random Transformer whose EOS embedding is scaled up, so that some sentences end early."""
    torch.manual_seed(7)
    model = Transformer(30, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.1, max_length=16).eval()
    with torch.no_grad():
        model.embedding.weight[EOS_ID] *= 4
    return model


def sources():
    generator = torch.Generator().manual_seed(0)
    return pad_batch([torch.randint(4, 30, (n,), generator=generator).tolist() for n in (3, 7, 5, 2, 6)], add_eos=True)


def test_beam_one_at_temperature_one_is_greedy_decoding(transformer):
    source = sources()
    greedy = greedy_decode(transformer, source, max_length=12)
    assert beam_search(transformer, source, beam_size=1, length_penalty=0.6, temperature=1.0, max_length=12) == greedy
    assert greedy_decode(transformer, source, max_length=12, temperature=3.0) == greedy  # argmax ignores T
    assert sorted(len(g) for g in greedy) == [2, 2, 8, 11, 11]  # EOS chosen and EOS forced


def test_batched_beams_equal_one_sentence_at_a_time(transformer):
    source = sources()
    batched = beam_search(transformer, source, beam_size=4, length_penalty=0.6, max_length=12)
    alone = [
        beam_search(transformer, source[i : i + 1, : int((source[i] != 0).sum())], beam_size=4, max_length=12)[0]
        for i in range(len(source))
    ]
    assert batched == alone
    assert all(BOS_ID not in h and EOS_ID not in h for h in batched)


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("beam_size", 0, "beam_size must be a positive integer"),
        ("temperature", 0.0, "temperature must be a finite number > 0"),
        ("max_length", 0, "max_length must be a positive integer"),
    ],
)
def test_bad_arguments_are_named(argument, value, message):
    with pytest.raises(ValueError, match=message):
        beam_search(GARDEN_PATH, SOURCE, **{argument: value})
