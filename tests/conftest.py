"""Shared test set-up.

pytest-xdist runs two workers on this 2-core machine; each torch process would otherwise
start one thread per core and the workers would thrash each other (observed: 20 s → 260 s).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)


import pytest  # noqa: E402


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt of focalcal.data to reach a non-file URL fails the test (downloads are
    tested against file:// archives the tests build in the real formats)."""
    from focalcal.data import download

    real_open = download._open_url

    def guarded(url):
        if not url.startswith("file:"):
            raise AssertionError(f"tests must not reach the network ({url})")
        return real_open(url)

    monkeypatch.setattr(download, "_open_url", guarded)
