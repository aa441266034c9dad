"""SST from the treebank's own release (stanfordSentimentTreebank.zip, the files mukhoti2020's
released code reads) against SST from the PTB trees, on one constructed sample written in both
formats.

The sample: eight sentences, each written once by hand in both formats, as the stored copies
of the real files write them:

* PTB trees (trainDevTestTrees_PTB.zip, ``trees/train.txt``; e.g. munikarmanish/RNTN
  ``trees/train.txt``): ``(label word)`` leaves, brackets escaped as ``-LRB-`` and ``-RRB-``
  (its line "(3 (1 -LRB-) (3 (2 Wendigo) (3 (3 (2 (2 is) (3 -RRB-)) ...").
* ``SOStr.txt`` writes the same sentence's brackets as themselves: fzh14/SST_BRNN
  ``stanfordSentimentTreebank/SOStr.txt`` line 14, "(|Wendigo|is|)|why|we|go|...". So does
  ``dictionary.txt``: gensim's SST reader (``read_su_sentiment_rotten_tomatoes``) turns the
  ``-LRB-``/``-RRB-`` of ``datasetSentences.txt`` into ``(``/``)`` "for sentence-phrase
  consistency" with ``dictionary.txt``.
* ``STree.txt`` numbers the phrase nodes after the tokens as the stored file does (its line 3,
  "Effective|but|too-tepid|biopic" -> ``6|6|5|5|7|7|0``: the right phrase before the left,
  children before parents); the reader does not depend on that order.
* ``dictionary.txt`` holds each phrase once, sorted by phrase, ids in any order;
  ``sentiment_labels.txt`` and ``datasetSplit.txt`` open with a header line (the release
  README; both readers skip the first line, as ``preprocess-sst.py`` does).

The sentiment values sit on the cut-offs (0.2, 0.4, 0.6, 0.8 and just above 0.8) where the
README's intervals [0, 0.2], (0.2, 0.4], (0.4, 0.6], (0.6, 0.8], (0.8, 1.0] decide the class.
"""

import dataclasses
import zipfile

import numpy as np
import pytest

from focalcal import data
from focalcal.data import sources, sst, sst_dictionary
from focalcal.data.download import DatasetNotFoundError, sha256sum
from focalcal.data.sst import Node

pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py

# (split, PTB line, SOStr line, STree line); split: 1 train, 2 test, 3 dev (datasetSplit.txt)
SENTENCES = [
    (1, "(3 (2 It) (3 (3 (2 is) (4 good)) (2 .)))", "It|is|good|.", "7|5|5|6|6|7|0"),
    (1, "(4 (2 (1 -LRB-) (2 (2 Wendigo) (2 (2 is) (3 -RRB-)))) (4 fun))", "(|Wendigo|is|)|fun", "8|7|6|6|9|7|8|9|0"),
    (3, "(2 (2 a) (2 film))", "a|film", "3|3|0"),
    (2, "(0 (1 Not) (4 good))", "Not|good", "3|3|0"),
    (3, "(0 awful)", "awful", "0"),
    (1, "(4 (4 (4 Great) (4 fun)) (2 .))", "Great|fun|.", "4|4|5|5|0"),
    (2, "(4 (3 (2 is) (4 good)) (4 fun))", "is|good|fun", "4|4|5|5|0"),
    (3, "(1 (1 (2 so) (0 bad)) (2 (1 -LRB-) (2 (2 really) (3 -RRB-))))", "so|bad|(|really|)", "8|8|7|6|6|7|9|9|0"),
]
# Every phrase of the sample and its sentiment value; the PTB labels above are these values' classes.
PHRASES = {
    "It": 0.5, "is": 0.5, "good": 0.9, ".": 0.5, "is good": 0.8, "is good .": 0.75, "It is good .": 0.7,
    "(": 0.3, "Wendigo": 0.5, ")": 0.65, "is )": 0.5, "Wendigo is )": 0.55, "( Wendigo is )": 0.45, "fun": 0.85,
    "( Wendigo is ) fun": 0.95, "a": 0.5, "film": 0.5, "a film": 0.6, "Not": 0.4, "Not good": 0.2, "awful": 0.0,
    "Great": 1.0, "Great fun": 0.80001, "Great fun .": 0.9, "is good fun": 0.81, "so": 0.5, "bad": 0.1,
    "so bad": 0.25, "really": 0.5, "really )": 0.5, "( really )": 0.5, "so bad ( really )": 0.3,
    "an unused phrase": 0.5,
}
PTB_BRACKETS = {"-LRB-": "(", "-RRB-": ")"}  # PTB's escapes -> what SOStr.txt and dictionary.txt write


def release_files(sentences=SENTENCES, phrases=PHRASES) -> dict[str, str]:
    """The five files of stanfordSentimentTreebank.zip for ``sentences``, as text."""
    ids = {phrase: k for k, phrase in enumerate(reversed(list(phrases)))}  # ids not in dictionary order
    by_id = sorted(ids, key=ids.get)
    return {
        "SOStr.txt": "".join(f"{tokens}\n" for _, _, tokens, _ in sentences),
        "STree.txt": "".join(f"{parents}\n" for *_, parents in sentences),
        "datasetSplit.txt": "sentence_index,splitset_label\n"
                            + "".join(f"{i},{split}\n" for i, (split, *_) in enumerate(sentences, start=1)),
        "dictionary.txt": "".join(f"{phrase}|{ids[phrase]}\n" for phrase in sorted(phrases)),
        "sentiment_labels.txt": "phrase ids|sentiment values\n"
                                + "".join(f"{k}|{phrases[phrase]}\n" for k, phrase in enumerate(by_id)),
    }


def build_release_zip(path, files=None):
    files = release_files() if files is None else files
    with zipfile.ZipFile(path, "w") as bundle:
        for name, text in files.items():
            bundle.writestr(f"stanfordSentimentTreebank/{name}", text)
        bundle.writestr("__MACOSX/stanfordSentimentTreebank/._SOStr.txt", b"\x00\x05\x16\x07")
    return path


def build_ptb_zip(path, sentences=SENTENCES):
    with zipfile.ZipFile(path, "w") as bundle:
        for split, name in ((1, "train.txt"), (3, "dev.txt"), (2, "test.txt")):
            bundle.writestr(f"trees/{name}", "".join(f"{ptb}\n" for s, ptb, *_ in sentences if s == split))
    return path


def trust(monkeypatch, name, archive):
    source = getattr(sources, name)
    remote = dataclasses.replace(source.archive, sha256=sha256sum(archive))
    monkeypatch.setattr(sources, name, dataclasses.replace(source, archive=remote))


def unescape(node: Node) -> Node:
    """``node`` with the PTB's bracket escapes written as SOStr.txt writes them."""
    if node.word is not None:
        return Node(node.label, word=PTB_BRACKETS.get(node.word, node.word))
    return Node(node.label, left=unescape(node.left), right=unescape(node.right))


def words(node: Node) -> list[str]:
    return [node.word] if node.word is not None else words(node.left) + words(node.right)


@pytest.fixture
def both(tmp_path, monkeypatch):
    root = tmp_path / "data"
    root.mkdir()
    trust(monkeypatch, "SST_PTB", build_ptb_zip(root / "trainDevTestTrees_PTB.zip"))
    trust(monkeypatch, "SST_RELEASE", build_release_zip(root / "stanfordSentimentTreebank.zip"))
    return root


def test_five_classes_are_cut_as_preprocess_sst():
    values = [0.0, 0.2, 0.20001, 0.4, 0.40001, 0.6, 0.60001, 0.8, 0.80001, 1.0]
    assert [sst_dictionary.five_class_label(v) for v in values] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_both_sources_give_the_same_trees_and_labels_and_differ_only_in_bracket_tokens(both):
    sst.load_sst_binary(both, False)  # unpacks each archive
    sst.load_sst_binary(both, False, token_source="released")
    ptb = {pool: sst.read_trees(both / "trees" / name) for pool, name in sst.TREE_FILES.items()}
    released = sst_dictionary.read_release(both / "stanfordSentimentTreebank")
    assert {pool: len(trees) for pool, trees in released.items()} == {"train": 3, "val": 3, "test": 2}
    # One sentence spelled out: "( Wendigo is ) fun", labels from the dictionary's values.
    assert released["train"][1] == Node(4, left=Node(2, left=Node(1, word="("), right=Node(
        2, left=Node(2, word="Wendigo"), right=Node(2, left=Node(2, word="is"), right=Node(3, word=")")))),
        right=Node(4, word="fun"))
    assert released["val"][1] == Node(0, word="awful")  # a one-token sentence: STree "0"
    # The PTB trees spell the brackets -LRB- / -RRB-: the tokens differ there and nowhere else.
    assert ptb != released
    assert {pool: [unescape(tree) for tree in trees] for pool, trees in ptb.items()} == released
    differing = sorted({(a, b) for pool in ptb for p, r in zip(ptb[pool], released[pool])
                        for a, b in zip(words(p), words(r)) if a != b})
    assert differing == [("-LRB-", "("), ("-RRB-", ")")]


def test_loader_encodes_both_sources_alike_up_to_the_bracket_words(both):
    from_ptb = data.load("sst_binary", root=both)
    from_release = data.load("sst_binary", root=both, token_source="released")
    assert from_release.meta["token_source"] == "released" and from_ptb.meta["token_source"] == "ptb"
    assert from_release.sizes() == from_ptb.sizes() == {"train": 3, "val": 2, "test": 2}  # "a film" dropped
    for split in ("train", "val", "test"):  # the same ids: the brackets take the same vocabulary rows
        np.testing.assert_array_equal(getattr(from_release, split).x.numpy(), getattr(from_ptb, split).x.numpy())
        np.testing.assert_array_equal(getattr(from_release, split).y.numpy(), getattr(from_ptb, split).y.numpy())
    np.testing.assert_array_equal(from_release.val.y.numpy(), [0, 0])  # "awful", "so bad ( really )"
    np.testing.assert_array_equal(from_release.test.y.numpy(), [0, 1])  # "Not good", "is good fun"
    vocabulary = from_release.meta["vocabulary"]
    assert [PTB_BRACKETS.get(w, w) for w in from_ptb.meta["vocabulary"]] == vocabulary
    assert "(" in vocabulary and ")" in vocabulary and "-LRB-" not in vocabulary


def test_released_source_downloads_its_own_zip(tmp_path, monkeypatch):
    archive = build_release_zip(tmp_path / "stanfordSentimentTreebank.zip")
    source = sources.SST_RELEASE
    monkeypatch.setattr(sources, "SST_RELEASE", dataclasses.replace(source, archive=dataclasses.replace(
        source.archive, sha256=sha256sum(archive), url=archive.as_uri())))
    ds = data.load("sst_binary", root=tmp_path / "data", download=True, token_source="released")
    assert ds.sizes() == {"train": 3, "val": 2, "test": 2}
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["stanfordSentimentTreebank",
                                                                     "stanfordSentimentTreebank.zip"]


def test_missing_release_names_its_url_and_checksum(tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        data.load("sst_binary", root=tmp_path, token_source="released")
    message = str(error.value)
    assert "http://nlp.stanford.edu/~socherr/stanfordSentimentTreebank.zip" in message
    assert "sha256 3f5209483b46bbf129cacbbbe6ae02fe780407034f61cf6342b7833257c3f1db" in message
    assert str(tmp_path / "stanfordSentimentTreebank.zip") in message
    with pytest.raises(ValueError, match=r"token_source must be one of \['ptb', 'released'\], got 'sostr'"):
        data.load("sst_binary", root=tmp_path, token_source="sostr")


def _load_release_with(tmp_path, monkeypatch, **changes):
    root = tmp_path / "data"
    root.mkdir()
    files = {**release_files(), **changes}
    trust(monkeypatch, "SST_RELEASE", build_release_zip(root / "stanfordSentimentTreebank.zip", files))
    data.load("sst_binary", root=root, token_source="released")


def test_a_phrase_missing_from_the_dictionary_is_named_with_its_sentence(tmp_path, monkeypatch):
    phrases = {k: v for k, v in PHRASES.items() if k != "is )"}
    with pytest.raises(ValueError, match=r"sentence 2 \(.*stanfordSentimentTreebank/SOStr.txt, line 2\): "
                                         r"the phrase 'is \)' \(tokens 3-4\) is not in dictionary.txt"):
        _load_release_with(tmp_path, monkeypatch, **{"dictionary.txt": release_files(phrases=phrases)["dictionary.txt"],
                                                     "sentiment_labels.txt": release_files(phrases=phrases)[
                                                         "sentiment_labels.txt"]})


def test_a_malformed_stree_line_is_named_by_file_and_line(tmp_path, monkeypatch):
    lines = release_files()["STree.txt"].splitlines()
    lines[2] = "3|x|0"
    with pytest.raises(ValueError, match=r"stanfordSentimentTreebank/STree.txt, line 3: parent pointers must be "
                                         r"integers separated by '\|', got '3\|x\|0'"):
        _load_release_with(tmp_path, monkeypatch, **{"STree.txt": "\n".join(lines) + "\n"})


@pytest.mark.parametrize(("tokens", "parents", "problem"), [
    (["a", "b"], "3|3|3|0", "4 nodes for 2 tokens; a binary tree over them has 3"),
    (["a", "b"], "3|0|0", "2 roots"),
    (["a", "b"], "2|3|0", "node 1's parent 2 is a token"),
    (["a", "b"], "3|3|3", "0 roots"),
    (["a", "b"], "3|4|0", "node 2's parent 4 is not another node of 1..3 or 0"),
    (["a", "b", "c"], "4|4|4|5|0", "phrase node 4 has 3 children"),
    (["a", "b", "c"], "4|5|4|5|0", "phrase node 4 joins tokens 1-1 and 3-3, which are not adjacent"),
])
def test_stree_lines_that_are_not_one_binary_tree_are_refused(tokens, parents, problem):
    where = "STree.txt, line 7"
    with pytest.raises(ValueError, match=f"^{where}: {problem}"):
        sst_dictionary.build_tree(tokens, sst_dictionary.parse_parents(parents, len(tokens), where), where)


def test_stree_numbering_order_does_not_change_the_tree():
    where = "STree.txt, line 2"
    tokens = ["(", "Wendigo", "is", ")", "fun"]
    stored = sst_dictionary.build_tree(tokens, [8, 7, 6, 6, 9, 7, 8, 9, 0], where)  # children before parents
    root_first = sst_dictionary.build_tree(tokens, [7, 8, 9, 9, 6, 0, 6, 7, 8], where)  # parents before children
    assert stored == root_first == Node(0, left=Node(0, left=Node(0, word="("), right=Node(
        0, left=Node(0, word="Wendigo"), right=Node(0, left=Node(0, word="is"), right=Node(0, word=")")))),
        right=Node(0, word="fun"))
    # A phrase's left child is the one over the earlier tokens, whichever node number it has.
    assert sst_dictionary.build_tree(["a", "b", "c"], [5, 5, 4, 0, 4], where) == Node(
        0, left=Node(0, left=Node(0, word="a"), right=Node(0, word="b")), right=Node(0, word="c"))


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("SOStr.txt", release_files()["SOStr.txt"].replace("(|Wendigo|is|)", "(|Wendigo||)"),
     r"SOStr.txt, line 2: token 3 \(''\) is empty or holds whitespace"),
    ("SOStr.txt", release_files()["SOStr.txt"].replace("Wendigo", "Wen digo"),
     r"SOStr.txt, line 2: token 2 \('Wen digo'\) is empty or holds whitespace"),
    ("datasetSplit.txt", "sentence_index,splitset_label\n1,1\n3,1\n", r"datasetSplit.txt, line 3: sentence index 3 out of order"),
    ("datasetSplit.txt", "sentence_index,splitset_label\n1,1\n2,4\n", r"datasetSplit.txt, line 3: split label 4"),
    ("sentiment_labels.txt", "phrase ids|sentiment values\n0|0.5\n2|0.5\n", r"sentiment_labels.txt, line 3: phrase id 2 out"),
    ("sentiment_labels.txt", "phrase ids|sentiment values\n0|1.5\n", r"sentiment_labels.txt, line 2: sentiment value 1.5"),
    ("dictionary.txt", "It|0\nis 1\n", r"dictionary.txt, line 2: expected 'phrase\|phrase id', got 'is 1'"),
    ("dictionary.txt", "It|0\nis|99\n", r"dictionary.txt, line 2: phrase id 99 has no row in sentiment_labels.txt"),
])
def test_malformed_release_files_are_named_by_file_and_line(tmp_path, name, text, problem):
    files = release_files()
    files[name] = text
    for file_name, content in files.items():
        (tmp_path / file_name).write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=problem):
        sst_dictionary.read_release(tmp_path)


def test_release_files_must_pair_up_and_be_utf8(tmp_path):
    files = release_files()
    for file_name, content in files.items():
        (tmp_path / file_name).write_text(content, encoding="utf-8")
    (tmp_path / "STree.txt").write_text("\n".join(files["STree.txt"].splitlines()[:-1]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"SOStr.txt has 8 lines, STree.txt 7 and datasetSplit.txt 8 rows"):
        sst_dictionary.read_release(tmp_path)
    (tmp_path / "STree.txt").write_text(files["STree.txt"], encoding="utf-8")
    (tmp_path / "SOStr.txt").write_bytes(files["SOStr.txt"].encode() + b"caf\xe9\n")
    with pytest.raises(ValueError, match=r"SOStr.txt, line 9: not UTF-8"):
        sst_dictionary.read_release(tmp_path)
    (tmp_path / "SOStr.txt").unlink()
    with pytest.raises(ValueError, match=r"lacks \['SOStr.txt'\]"):
        sst_dictionary.read_release(tmp_path)
