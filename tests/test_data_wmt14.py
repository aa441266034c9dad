"""WMT14 En-De from small archives built here in WMT's on-disk formats (tgz of plain-text
training files, the dev archive with newstest2013 as text and newstest2014 as SGML)."""

import io
import tarfile

import numpy as np
import pytest

from focalcal.data import wmt14
from focalcal.data.download import ChecksumError, DatasetNotFoundError, sha256sum
from focalcal.data.sources import RemoteFile
from focalcal.data.translation import SPECIAL_PIECES

pytestmark = pytest.mark.usefixtures("no_network")  # tests/conftest.py

ENGLISH_WORDS = ["the", "house", "is", "small", "green", "a", "tree", "grows", "in", "garden", "we", "see", "it"]
GERMAN_WORDS = ["das", "Haus", "ist", "klein", "grün", "ein", "Baum", "wächst", "im", "Garten", "wir", "sehen", "es"]


def sentences(n, seed):
    rng = np.random.default_rng(seed)
    english, german = [], []
    for _ in range(n):
        words = rng.integers(len(ENGLISH_WORDS), size=rng.integers(3, 9))
        english.append(" ".join(ENGLISH_WORDS[w] for w in words) + " .")
        german.append(" ".join(GERMAN_WORDS[w] for w in words) + " .")
    return english, german


def sgm(kind, segments, language):
    head = (
        '<srcset setid="newstest2014" srclang="any">'
        if kind == "src"
        else f'<refset setid="newstest2014" srclang="any" trglang="{language}">'
    )
    lines = [head, '<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">', "<p>"]
    lines += [f'<seg id="{i + 1}"> {text}  </seg>' for i, text in enumerate(segments)]
    lines += ["</p>", "</doc>", "</srcset>" if kind == "src" else "</refset>"]
    return "\n".join(lines) + "\n"


def write_tgz(path, members):
    with tarfile.open(path, "w:gz") as bundle:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            bundle.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """The four archives under tmp_path/mirror, served as file:// URLs with their sha256s."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    texts = {}
    archives = {}
    for seed, (name, (english_member, german_member)) in enumerate(wmt14.TRAIN_MEMBERS.items()):
        english, german = sentences(150, seed)
        if name == "commoncrawl":
            english[3] = "a green\x0c tree ."  # a form feed inside a line: one sentence, not two
            german[7] = ""  # an empty side: dropped from train
        texts[name] = (english, german)
        members = {
            english_member: "\n".join(english) + "\n",
            german_member: "\n".join(german) + "\n",
            "training/europarl-v7.fr-en.fr": "une ligne\n",
        }
        archives[name] = write_tgz(folder / wmt14.ARCHIVES[name].filename, members)
    val, test = sentences(20, 10), sentences(15, 11)
    texts["val"], texts["test"] = val, test
    archives["dev"] = write_tgz(
        folder / "dev.tgz",
        {
            "dev/newstest2013.en": "\n".join(val[0]) + "\n",
            "dev/newstest2013.de": "\n".join(val[1]) + "\n",
            "dev/newstest2014-deen-src.en.sgm": sgm("src", test[0], "en"),
            "dev/newstest2014-deen-ref.de.sgm": sgm("ref", test[1], "de"),
            "dev/newstest2014-deen-src.de.sgm": sgm("src", test[1], "de"),
        },
    )
    remote = {
        name: RemoteFile(path.as_uri(), wmt14.ARCHIVES[name].filename, sha256=sha256sum(path))
        for name, path in archives.items()
    }
    monkeypatch.setattr(wmt14, "ARCHIVES", remote)
    return texts


def test_without_the_archives_the_loader_says_what_to_download(tmp_path, mirror):
    with pytest.raises(DatasetNotFoundError, match=r"(?s)download=True.*training-parallel-commoncrawl.tgz.*sha256"):
        wmt14.wmt14_en_de(tmp_path / "data", vocab_size=60)


def test_the_corpus_from_archives_in_the_real_format(tmp_path, mirror):
    corpus = wmt14.wmt14_en_de(tmp_path / "data", vocab_size=60, download=True)
    assert corpus.pieces[:4] == SPECIAL_PIECES
    assert len(corpus.train) == 3 * 150 - 1  # the pair with an empty German side is dropped
    assert corpus.val.references == tuple(mirror["val"][1])
    assert corpus.test.references == tuple(mirror["test"][1])  # SGML segments, whitespace collapsed
    assert "a green tree ." in corpus.detokenise(corpus.train.source[150 + 3]).replace("\x0c", "")
    for split in (corpus.val, corpus.test):
        for target, reference in zip(split.target, split.references):
            assert target.dtype == np.int64 and target.min() > 3
            assert corpus.detokenise(np.concatenate([[1], target, [2, 0]])) == reference
    english = [corpus.detokenise(s) for s in corpus.test.source]
    assert english == mirror["test"][0]


def test_the_vocabulary_is_trained_once_and_keyed_by_its_inputs(tmp_path, mirror, monkeypatch):
    root = tmp_path / "data"
    trained = []
    real_training = wmt14.train_vocabulary
    monkeypatch.setattr(wmt14, "train_vocabulary", lambda *args: trained.append(args[2]) or real_training(*args))
    first = wmt14.wmt14_en_de(root, vocab_size=60, download=True)
    again = wmt14.wmt14_en_de(root, vocab_size=60)
    assert trained == [60]
    assert again.pieces == first.pieces and again.test.references == first.test.references
    assert all(np.array_equal(a, b) for a, b in zip(again.train.target, first.train.target))
    shorter = wmt14.wmt14_en_de(root, vocab_size=60, max_pieces=12)  # re-encoded with the same vocabulary
    assert trained == [60] and shorter.pieces == first.pieces and len(shorter.train) < len(first.train)
    wmt14.wmt14_en_de(root, vocab_size=70)
    assert trained == [60, 70]
    assert len(list((root / wmt14.FOLDER).glob("spm-*.model"))) == 2
    before = wmt14.fingerprint(60)
    archives = dict(wmt14.ARCHIVES)
    archives["dev"] = RemoteFile(archives["dev"].url, "dev.tgz", sha256="0" * 64)
    monkeypatch.setattr(wmt14, "ARCHIVES", archives)
    assert wmt14.fingerprint(60) != before


def test_a_corrupt_archive_is_refused_by_name(tmp_path, mirror):
    folder = tmp_path / "data" / wmt14.FOLDER
    folder.mkdir(parents=True)
    (folder / "dev.tgz").write_bytes(b"not the archive")
    with pytest.raises(ChecksumError, match="dev.tgz"):
        wmt14.wmt14_en_de(tmp_path / "data", vocab_size=60, download=True)
    assert not list(folder.glob("spm-*.model"))


def test_an_unknown_checksum_is_never_trusted(tmp_path, mirror, monkeypatch):
    archives = dict(wmt14.ARCHIVES)
    archives["dev"] = RemoteFile(archives["dev"].url, "dev.tgz")
    monkeypatch.setattr(wmt14, "ARCHIVES", archives)
    with pytest.raises(ValueError, match="no checksum is known for file:.*dev.tgz"):
        wmt14.wmt14_en_de(tmp_path / "data", vocab_size=60, download=True)


def test_read_sgm_takes_the_segments_in_order():
    text = sgm("ref", ["Erster  Satz .", "Zweiter\tSatz"], "de")
    assert wmt14.read_sgm(text) == ["Erster Satz .", "Zweiter Satz"]
