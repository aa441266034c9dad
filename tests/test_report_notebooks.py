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


def test_a_real_kernel_writes_nothing_in_the_home_directory(template, tmp_path):
    import os
    import subprocess
    import sys

    template.write_text(json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": "a", "metadata": {},
                                               "outputs": [], "source": "x = 6 * 7\nprint(x)"}],
                                    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                "language": "python"}},
                                    "nbformat": 4, "nbformat_minor": 5}))
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("XDG_", "JUPYTER", "IPYTHON"))}
    env.update(HOME=str(home), MPLCONFIGDIR=str(tmp_path / "matplotlib"))  # matplotlib's cache is the job's, not the kernel's
    code = (f"from focalcal.report import notebooks; "
            f"notebooks.execute({str(template)!r}, {str(tmp_path / 'out.ipynb')!r}, {{}}, {str(tmp_path)!r})")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300, capture_output=True)
    assert "42" in (tmp_path / "out.ipynb").read_text()
    assert [str(path.relative_to(home)) for path in home.rglob("*")] == [], list(home.rglob("*"))
