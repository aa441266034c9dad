"""WMT 2014 English->German with a shared sentencepiece vocabulary (Vaswani et al. 2017 §5.1).

* train: the WMT14 En-De parallel data of the standard preparation scripts (fairseq's
  examples/translation/prepare-wmt14en2de.sh, tensor2tensor's translate_ende.py):
  Europarl v7, Common Crawl and News Commentary v9 (4.5 M pairs). Pairs with an empty side,
  or with more than ``max_pieces`` pieces on a side (250, as fairseq's clean-corpus-n step),
  are dropped from train only.
* val: newstest2013 (3,000 sentences), the plain-text files of WMT's dev archive.
* test: newstest2014 (3,003 sentences, the full set), the SGML files of the same archive.

Archives are downloaded (``download=True``) to ``root/wmt14_en_de/`` and checked against the
sha256 in :data:`ARCHIVES` before anything is read; a file whose checksum is unknown is never
trusted (:func:`focalcal.data.download.fetch` refuses it). Members are read straight from
the verified archives.

The vocabulary: one sentencepiece BPE model over the English and German training text
(Vaswani: "a shared source-target vocabulary of about 37000 tokens"), ids 0-3 PAD, BOS,
EOS, UNK. It is trained once and cached beside the data as ``spm-<fingerprint>.model``, the
fingerprint hashing the archives' checksums and every training option, so changing either
trains a new one; the encoded splits are cached under the same fingerprint and ``max_pieces``.
Cached files are read only after their checksum sidecars match, each split's on its first
use (:class:`~focalcal.data.translation.ParallelCorpus`), so a job that reads the test set
alone never loads the training pairs.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from functools import partial
from pathlib import Path

import numpy as np

from focalcal.files.artefacts import verified_bytes

from .download import DatasetNotFoundError, fetch, manual_download_hint, verify_checksum
from .sources import RemoteFile
from .translation import BOS_ID, EOS_ID, PAD_ID, UNK_ID, ParallelCorpus, ParallelSplit, strip_special

FOLDER = "wmt14_en_de"
# URLs, sizes and sha256s: huggingface/datasets, datasets/wmt14/dataset_infos.json at commit
# 22d3b80586cab756b70d6c939ceace94bb356a8c ("download_checksums" of the wmt14 builder, which
# downloads these statmt.org archives). The URLs are those of fairseq's and tensor2tensor's
# WMT14 En-De preparation; the dev archive is WMT19's, which holds newstest2013 and newstest2014.
EUROPARL = RemoteFile(
    url="http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz",
    filename="training-parallel-europarl-v7.tgz",
    sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7",  # 657,632,379 bytes
)
COMMONCRAWL = RemoteFile(
    url="http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz",
    filename="training-parallel-commoncrawl.tgz",
    sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5",  # 918,311,367 bytes
)
NEWS_COMMENTARY = RemoteFile(
    url="http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz",
    filename="training-parallel-nc-v9.tgz",
    sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485",  # 80,418,416 bytes
)
DEV = RemoteFile(
    url="http://data.statmt.org/wmt19/translation-task/dev.tgz",
    filename="dev.tgz",
    sha256="7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7",  # 38,654,961 bytes
)
ARCHIVES = {"europarl": EUROPARL, "commoncrawl": COMMONCRAWL, "news_commentary": NEWS_COMMENTARY, "dev": DEV}
# (English member, German member) of each archive, as the preparation scripts above name them
TRAIN_MEMBERS = {
    "europarl": ("training/europarl-v7.de-en.en", "training/europarl-v7.de-en.de"),
    "commoncrawl": ("commoncrawl.de-en.en", "commoncrawl.de-en.de"),
    "news_commentary": ("training/news-commentary-v9.de-en.en", "training/news-commentary-v9.de-en.de"),
}
VAL_MEMBERS = ("dev/newstest2013.en", "dev/newstest2013.de")
TEST_MEMBERS = ("dev/newstest2014-deen-src.en.sgm", "dev/newstest2014-deen-ref.de.sgm")

VOCAB_SIZE = 37000  # Vaswani et al. 2017 §5.1
MAX_PIECES = 250
# sentencepiece options (ours): BPE as Vaswani's, full character coverage of the two Latin-script
# languages' text but rare characters left to UNK, a 4 M-sentence sample to bound memory
SPM_OPTIONS = {
    "model_type": "bpe",
    "character_coverage": 0.9999,
    "input_sentence_size": 4_000_000,
    "shuffle_input_sentence": True,
    "seed_sentencepiece_size": 1_000_000,
}
SPM_SEED = 0  # sentencepiece's sampling of input sentences
_SEGMENT = re.compile(r"<seg[^>]*>(.*)</seg>")


def read_sgm(text: str) -> list[str]:
    """The segments of a WMT SGML file, in order, whitespace collapsed (as sacrebleu reads them)."""
    segments = []
    for line in text.splitlines():
        match = _SEGMENT.search(line)
        if match:
            segments.append(re.sub(r"\s+", " ", match.group(1).strip()))
    return segments


def _member_text(archive: Path, member: str) -> str:
    with tarfile.open(archive) as bundle:
        try:
            handle = bundle.extractfile(member)
        except KeyError:
            handle = None
        if handle is None:
            raise DatasetNotFoundError(
                f"dataset 'wmt14_en_de': {archive} has no file {member!r}; the archive is "
                f"not the one expected (delete it and download again)"
            )
        with handle:
            return io.TextIOWrapper(handle, encoding="utf-8").read()


def _lines(text: str) -> list[str]:
    """One sentence per "\n"-terminated line (not str.splitlines, which also splits at the
    form feeds and Unicode separators that web-crawled text holds)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.strip() for line in lines]


def _pair(archive: Path, members: tuple[str, str], sgm: bool = False) -> tuple[list[str], list[str]]:
    english, german = (_member_text(archive, member) for member in members)
    english, german = (read_sgm(english), read_sgm(german)) if sgm else (_lines(english), _lines(german))
    if len(english) != len(german):
        raise ValueError(f"{archive}: {members[0]} has {len(english)} lines but {members[1]} has {len(german)}")
    return english, german


def _archives(folder: Path, download: bool) -> dict[str, Path]:
    """Every archive, downloaded if allowed, each verified against its sha256."""
    paths = {name: folder / remote.filename for name, remote in ARCHIVES.items()}
    missing = [(ARCHIVES[name], path) for name, path in paths.items() if not path.exists()]
    if missing and not download:
        raise DatasetNotFoundError(
            "dataset 'wmt14_en_de' not found. Load with download=True, or save these files by hand:\n"
            + manual_download_hint(missing)
        )
    for name, path in paths.items():
        remote = ARCHIVES[name]
        if remote.checksum is None:
            raise ValueError(f"no checksum is known for {remote.url}; an unverified download is not used")
        if path.exists():
            verify_checksum(path, *remote.checksum)
        else:
            fetch(remote, path, dataset="wmt14_en_de")
    return paths


def fingerprint(vocab_size: int) -> str:
    """sha256 (first 16 hex digits) of the archives' checksums and the vocabulary's options."""
    import sentencepiece

    record = {
        "archives": {name: remote.checksum for name, remote in sorted(ARCHIVES.items())},
        "vocab_size": vocab_size,
        "options": SPM_OPTIONS,
        "seed": SPM_SEED,
        "sentencepiece": sentencepiece.__version__,
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def train_vocabulary(sentences: list[str], model_path: Path, vocab_size: int) -> None:
    """Train the shared BPE model on ``sentences`` (English and German) and write it to ``model_path``."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.set_random_generator_seed(SPM_SEED)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        vocab_size=vocab_size,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        hard_vocab_limit=False,
        minloglevel=2,
        **SPM_OPTIONS,
    )
    from focalcal.files.artefacts import atomic_write

    atomic_write(model_path, lambda handle: handle.write(model.getvalue()))


_ENCODE_CHUNK = 100_000  # sentences encoded at a time: python lists of ids are large


def _encode(processor, english: list[str], german: list[str], max_pieces: int | None) -> ParallelSplit:
    """Ids of each pair; with ``max_pieces`` (train), pairs with an empty or over-long side are dropped."""
    sources, targets, references = [], [], []
    for start in range(0, len(english), _ENCODE_CHUNK):
        chunk_en, chunk_de = english[start : start + _ENCODE_CHUNK], german[start : start + _ENCODE_CHUNK]
        for s, t, reference in zip(processor.encode(chunk_en), processor.encode(chunk_de), chunk_de):
            if max_pieces is not None and not (0 < len(s) <= max_pieces and 0 < len(t) <= max_pieces):
                continue
            sources.append(np.asarray(s, dtype=np.int64))
            targets.append(np.asarray(t, dtype=np.int64))
            references.append(reference)
    return ParallelSplit(tuple(sources), tuple(targets), tuple(references))


def _save_split(path: Path, split: ParallelSplit) -> None:
    from focalcal.files.artefacts import atomic_savez

    def flat(arrays):
        lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        return np.concatenate(arrays) if arrays else np.zeros(0, np.int64), lengths

    source, source_lengths = flat(split.source)
    target, target_lengths = flat(split.target)
    atomic_savez(
        path,
        source=source,
        source_lengths=source_lengths,
        target=target,
        target_lengths=target_lengths,
        references=np.array(split.references, dtype=str),
    )


def _load_split(path: Path) -> ParallelSplit:
    from focalcal.files.artefacts import load_npz

    arrays = load_npz(path)

    def unflat(flat, lengths):
        if lengths.sum() != flat.size or (lengths < 0).any():
            raise ValueError(f"{path}: lengths do not add up to the stored ids")
        return tuple(np.split(flat.astype(np.int64), np.cumsum(lengths)[:-1]))

    return ParallelSplit(
        unflat(arrays["source"], arrays["source_lengths"]),
        unflat(arrays["target"], arrays["target_lengths"]),
        tuple(str(r) for r in arrays["references"]),
    )


def wmt14_en_de(
    root, vocab_size: int = VOCAB_SIZE, download: bool = False, max_pieces: int = MAX_PIECES
) -> ParallelCorpus:
    """The corpus of the module docstring; the vocabulary and encoded splits are cached under ``root/wmt14_en_de``."""
    import sentencepiece

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
        raise ValueError(f"vocab_size must be an integer >= 8, got {vocab_size!r}")
    if isinstance(max_pieces, bool) or not isinstance(max_pieces, int) or max_pieces < 1:
        raise ValueError(f"max_pieces must be a positive integer, got {max_pieces!r}")
    folder = Path(root) / FOLDER
    key = fingerprint(vocab_size)
    model_path = folder / f"spm-{key}.model"
    split_paths = {name: folder / f"encoded-{key}-max{max_pieces}-{name}.npz" for name in ("train", "val", "test")}
    if not (model_path.exists() and all(p.exists() for p in split_paths.values())):
        archives = _archives(folder, download)
        train_pairs = [_pair(archives[name], members) for name, members in TRAIN_MEMBERS.items()]
        english = [s for pair in train_pairs for s in pair[0]]
        german = [s for pair in train_pairs for s in pair[1]]
        if not model_path.exists():
            train_vocabulary(english + german, model_path, vocab_size)
        processor = sentencepiece.SentencePieceProcessor(model_proto=verified_bytes(model_path))
        val = _pair(archives["dev"], VAL_MEMBERS)
        test = _pair(archives["dev"], TEST_MEMBERS, sgm=True)
        splits = {
            "train": _encode(processor, english, german, max_pieces),
            "val": _encode(processor, *val, None),
            "test": _encode(processor, *test, None),
        }
        for name, split in splits.items():
            _save_split(split_paths[name], split)
    processor = sentencepiece.SentencePieceProcessor(model_proto=verified_bytes(model_path))
    pieces = tuple(processor.id_to_piece(i) for i in range(processor.get_piece_size()))

    def detokenise(ids) -> str:
        return processor.decode(strip_special(ids))

    # each split is read on its first use (ParallelCorpus): a decode reads the test split only
    return ParallelCorpus(
        "wmt14_en_de", pieces, *(partial(_load_split, split_paths[n]) for n in ("train", "val", "test")), detokenise
    )
