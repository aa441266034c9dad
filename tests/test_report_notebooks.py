"""Report notebooks: a kernel that dies before its first reply is started again; any other
failure, and a kernel that keeps dying, is raised."""

from __future__ import annotations

import json

import papermill
import pytest

from focalcal.report import notebooks


@pytest.fixture
def template(tmp_path):
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def fake_papermill(monkeypatch, failures: list[str]):
    """papermill.execute_notebook that raises ``failures`` in turn, then writes the notebook."""
    calls = []

    def execute_notebook(template, executed, **options):
        calls.append(options["kernel_name"])
        if len(calls) <= len(failures):
            raise RuntimeError(failures[len(calls) - 1])
        with open(executed, "w") as handle:
            handle.write("{}")

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    return calls


def test_a_kernel_that_died_at_start_is_started_again(monkeypatch, template, tmp_path, capsys):
    calls = fake_papermill(monkeypatch, ["Kernel died before replying to kernel_info"])
    executed = notebooks.execute(template, tmp_path / "out.ipynb", {}, tmp_path)
    assert calls == [notebooks.KERNEL_NAME] * 2 and executed.read_text() == "{}"
    assert "page.ipynb: the kernel did not start" in capsys.readouterr().err


def test_other_failures_and_a_kernel_that_keeps_dying_are_raised(monkeypatch, template, tmp_path):
    calls = fake_papermill(monkeypatch, ["cell 3 raised ZeroDivisionError"])
    with pytest.raises(RuntimeError, match="cell 3"):
        notebooks.execute(template, tmp_path / "out.ipynb", {}, tmp_path)
    assert len(calls) == 1
    calls = fake_papermill(monkeypatch, ["Kernel died before replying to kernel_info"] * notebooks.KERNEL_START_ATTEMPTS)
    with pytest.raises(RuntimeError, match="Kernel died"):
        notebooks.execute(template, tmp_path / "out2.ipynb", {}, tmp_path)
    assert len(calls) == notebooks.KERNEL_START_ATTEMPTS
