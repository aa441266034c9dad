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


@pytest.fixture(params=["fused", "eager"])
def loss_kernels(request, monkeypatch):
    """Run a loss test twice: through the fused CPU kernels and through the eager PyTorch
    reference path (``FOCALCAL_FUSED_KERNELS=0``); loss test modules opt in with
    ``pytestmark = pytest.mark.usefixtures("loss_kernels")``."""
    from focalcal.losses import _fused

    monkeypatch.setenv(_fused.ENV_SWITCH, "1" if request.param == "fused" else "0")
    if request.param == "fused":
        assert _fused.kernels() is not None, "the fused CPU loss kernels failed to build (see the warning)"
    return request.param


@pytest.fixture
def workflow_checkout(tmp_path):
    """A copy of the checkout's tracked workflow files (source, rules, configs, notebooks), for
    tests that add a module to the package and run Snakemake on it without touching the tree."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    checkout = tmp_path / "checkout"
    listed = subprocess.run(["git", "ls-files", "src", "workflow", "profiles", "notebooks", "config"],
                            cwd=root, capture_output=True, text=True, check=True).stdout.split()
    for name in listed:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, checkout / name)
    return checkout
