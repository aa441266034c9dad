"""BLEU equals sacrebleu's on fixed strings and a value worked out by hand, with its signature."""

import math

import pytest
import sacrebleu

from focalcal.translation.bleu import corpus_bleu

HYPOTHESES = [
    "Die Katze sitzt auf der Matte.",
    "Er hat gestern ein Buch gelesen",
    "Das ist ein kleines Haus , sagte sie .",
    "",
]
REFERENCES = [
    "Die Katze saß auf der Matte.",
    "Er las gestern ein Buch.",
    "Das ist ein kleines Haus, sagte sie.",
    "Guten Morgen.",
]


def test_equals_sacrebleu_on_fixed_strings():
    ours = corpus_bleu(HYPOTHESES, REFERENCES)
    theirs = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert ours.score == theirs.score
    assert 10 < ours.score < 90
    assert ours.signature == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"


def test_a_value_worked_out_by_hand():
    # n-gram precisions 5/6, 3/5, 2/4, 1/3; the lengths agree, so no brevity penalty
    expected = 100 * math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(2 / 4) + math.log(1 / 3)) / 4)
    assert corpus_bleu(["the cat sat on a mat"], ["the cat sat on the mat"]).score == pytest.approx(expected, abs=1e-9)
    assert corpus_bleu(["der x07 q03r w05t"], ["der x07 q03r w05t"]).score == pytest.approx(100.0)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="1 hypotheses and 2 references"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match=r"references\[1\] is not a string"):
        corpus_bleu(["a", "b"], ["a", None])
