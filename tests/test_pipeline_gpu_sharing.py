"""CUDA MPS for runs sharing a GPU (focalcal.pipeline.gpu_sharing), with a stand-in
`nvidia-cuda-mps-control` on PATH that records how it was called."""

import os
import re
import stat
from pathlib import Path

import pytest

from focalcal.pipeline import gpu_sharing, load_config_file, validate_config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"

FAKE = """#!/bin/sh
# records its arguments, its standard input (the control commands) and the pipe folder it was given
echo "args:$*|stdin:$(if [ -z "$*" ]; then cat; fi)|pipe:$CUDA_MPS_PIPE_DIRECTORY" >> "{record}"
if [ -n "$FAKE_MPS_REFUSE" ]; then echo "$FAKE_MPS_REFUSE" >&2; exit 1; fi
exit 0
"""


@pytest.fixture
def fake_control(tmp_path, monkeypatch):
    """A fake nvidia-cuda-mps-control alone on PATH; returns the file of its calls."""
    bin_dir, record = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    script = bin_dir / gpu_sharing.CONTROL
    script.write_text(FAKE.format(record=record))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.delenv(gpu_sharing.PIPE_VARIABLE, raising=False)
    monkeypatch.delenv(gpu_sharing.LOG_VARIABLE, raising=False)
    monkeypatch.setattr(gpu_sharing.tempfile, "tempdir", None)  # TMPDIR is read anew
    monkeypatch.setattr(gpu_sharing, "_started", None)
    return record


def calls(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


def test_started_once_and_stopped_afterwards(fake_control, tmp_path):
    lines = []
    first = gpu_sharing.start_for_workflow(True, log=lines.append)
    assert gpu_sharing.start_for_workflow(True, log=lines.append) is first  # a second onstart starts nothing
    pipe = str(tmp_path / "tmp" / f"focalcal-mps-{os.getuid()}" / "pipe")
    assert calls(fake_control) == [f"args:-d|stdin:|pipe:{pipe}"]
    assert os.environ[gpu_sharing.PIPE_VARIABLE] == pipe  # the jobs started from here find the daemon
    assert Path(pipe).is_dir() and Path(os.environ[gpu_sharing.LOG_VARIABLE]).is_dir()
    gpu_sharing.stop_for_workflow(log=lines.append)
    gpu_sharing.stop_for_workflow(log=lines.append)  # onerror after onsuccess: stopped once
    assert calls(fake_control) == [f"args:-d|stdin:|pipe:{pipe}", f"args:|stdin:quit|pipe:{pipe}"]
    assert gpu_sharing.PIPE_VARIABLE not in os.environ
    assert lines == [f"CUDA MPS started: pipe {pipe}, log {pipe[:-4]}log", "CUDA MPS stopped"]


def test_the_users_own_folders_are_kept(fake_control, tmp_path, monkeypatch):
    monkeypatch.setenv(gpu_sharing.PIPE_VARIABLE, str(tmp_path / "p"))
    monkeypatch.setenv(gpu_sharing.LOG_VARIABLE, str(tmp_path / "l"))
    daemon = gpu_sharing.start_mps(log=lambda line: None)
    daemon.stop(log=lambda line: None)
    assert calls(fake_control) == [f"args:-d|stdin:|pipe:{tmp_path / 'p'}", f"args:|stdin:quit|pipe:{tmp_path / 'p'}"]
    assert os.environ[gpu_sharing.PIPE_VARIABLE] == str(tmp_path / "p")  # the user's setting, restored


def test_nothing_is_started_when_the_option_is_off(fake_control):
    assert gpu_sharing.start_for_workflow(False, log=pytest.fail) is None
    gpu_sharing.stop_for_workflow(log=pytest.fail)
    assert calls(fake_control) == []


def test_absent_refused_or_remote_says_why_in_one_line(fake_control, monkeypatch, tmp_path):
    lines = []
    monkeypatch.setenv("FAKE_MPS_REFUSE", "An instance of this daemon is already running")
    assert gpu_sharing.start_for_workflow(True, log=lines.append) is None
    gpu_sharing.stop_for_workflow(log=lines.append)
    assert calls(fake_control) == [calls(fake_control)[0]] and calls(fake_control)[0].startswith("args:-d|")
    assert lines == [(f"CUDA MPS not started: `{gpu_sharing.CONTROL} -d` exited 1 (An instance of this daemon is "
                      "already running); it needs the rights to the GPU and no other MPS daemon on it; the runs share "
                      "the GPU by time slices")]
    assert gpu_sharing.PIPE_VARIABLE not in os.environ

    lines.clear()
    assert gpu_sharing.start_for_workflow(True, local=False, log=lines.append) is None
    assert len(lines) == 1 and "the jobs run on other machines" in lines[0] and len(calls(fake_control)) == 1

    lines.clear()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gpu_sharing.start_for_workflow(True, log=lines.append) is None
    assert lines == [(f"CUDA MPS not started: {gpu_sharing.CONTROL} is not on PATH (it comes with the NVIDIA "
                      "driver); the runs share the GPU by time slices")]


def test_the_workflow_option_and_its_hooks():
    config = validate_config(load_config_file(ROOT / "config" / "config.yaml"), SCHEMA)
    assert config["training"]["cuda_mps"] is False  # off unless asked for
    snakefile = (ROOT / "workflow" / "Snakefile").read_text()
    hooks = {hook: body for hook, body in re.findall(r"^(on\w+):\n((?:[ \t]+.*\n|\n)+)", snakefile, re.MULTILINE)}
    assert set(hooks) == {"onstart", "onsuccess", "onerror"}
    assert 'gpu_sharing.start_for_workflow(\n        config["training"]["cuda_mps"], local=workflow.local_exec' in hooks["onstart"]
    for hook in ("onsuccess", "onerror"):
        assert "gpu_sharing.stop_for_workflow()" in hooks[hook], hook
    assert "stop_for_workflow" not in hooks["onstart"]
