"""Execute a report notebook with papermill and convert it to one self-contained HTML page.

The kernel is this interpreter (``sys.executable``), whatever ``python`` on PATH is: a
kernel spec pointing at it is written to a temporary Jupyter data directory that is put
first on ``JUPYTER_PATH`` for the run. (The ``python3`` spec that ipykernel installs runs
plain ``python``, which on a machine where the venv is not activated is another Python
without focalcal.) Images are embedded in the HTML as ``data:`` URIs, so a page needs no
file beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from focalcal.files.artefacts import atomic_write_text, read_text, written_in_place

KERNEL_NAME = "focalcal-report"
# A kernel that dies before its first reply has run no cell: starting it again is safe. Kernels
# started side by side (report pages of one run, tests on two workers) can race for the same
# ZMQ ports (jupyter_client picks free ports, releases them, then the kernel binds them).
KERNEL_START_ATTEMPTS = 3
_KERNEL_START_FAILURES = ("Kernel died before replying to kernel_info", "Kernel didn't respond")


@contextlib.contextmanager
def this_python_kernel():
    """A Jupyter kernel spec named :data:`KERNEL_NAME` that runs ``sys.executable``.

    The kernel and papermill write nothing outside the temporary directory: IPython keeps no
    history and its profile lives there (``IPYTHONDIR``), and so do the connection files
    (``JUPYTER_RUNTIME_DIR``), which otherwise land in the home directory."""
    with tempfile.TemporaryDirectory(prefix="focalcal-kernel-") as data_dir:
        spec_dir = Path(data_dir) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                         "--HistoryManager.enabled=False"],
                "display_name": f"focalcal ({sys.executable})", "language": "python"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        settings = {"JUPYTER_PATH": data_dir + (os.pathsep + os.environ["JUPYTER_PATH"]
                                                if os.environ.get("JUPYTER_PATH") else ""),
                    "JUPYTER_RUNTIME_DIR": str(Path(data_dir) / "runtime"),
                    "IPYTHONDIR": str(Path(data_dir) / "ipython")}  # the kernel inherits these
        saved = {key: os.environ.get(key) for key in settings}
        os.environ.update(settings)
        try:
            yield KERNEL_NAME
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def execute(template, executed, parameters: dict, cwd, timeout: int = 600) -> Path:
    """Run ``template`` with papermill (``parameters`` injected after its parameters cell)."""
    import papermill

    template, executed = Path(template), Path(executed)
    if not template.is_file():
        raise ValueError(f"no notebook {str(template)!r}")
    executed.parent.mkdir(parents=True, exist_ok=True)
    env = {"MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with this_python_kernel() as kernel, written_in_place(executed):
            for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
                try:
                    papermill.execute_notebook(str(template), str(executed), parameters=parameters,
                                               kernel_name=kernel, cwd=str(cwd), progress_bar=False,
                                               execution_timeout=timeout)
                    break
                except RuntimeError as error:
                    if attempt == KERNEL_START_ATTEMPTS or not str(error).startswith(_KERNEL_START_FAILURES):
                        raise
                    print(f"{template.name}: the kernel did not start ({error}); starting it again "
                          f"(attempt {attempt + 1} of {KERNEL_START_ATTEMPTS})", file=sys.stderr)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return executed


def to_html(executed, html, title: str | None = None) -> Path:
    """Convert an executed notebook to HTML with images embedded and code cells hidden."""
    import nbformat
    from nbconvert import HTMLExporter

    executed, html = Path(executed), Path(html)
    notebook = nbformat.reads(read_text(executed), as_version=4)
    if title:
        notebook.metadata["title"] = title
    exporter = HTMLExporter(embed_images=True, exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(notebook)
    atomic_write_text(body, html)
    return html


def render(template, executed, html, parameters: dict, cwd, title: str | None = None) -> Path:
    """Execute then convert: the report rule's one call."""
    return to_html(execute(template, executed, parameters, cwd), html, title)
