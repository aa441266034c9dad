"""Which ``pip install 'focalcal[extra]'`` brings each optional package, and the one-line error
that says so when a module needs a package the install left out.

The core install (numpy, scipy, threadpoolctl) serves metrics, calibration and theory; every
other third-party import of the library goes through :func:`require` or names its extra here.
``tests/test_packaging.py`` checks each extra below against pyproject.toml.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

#: The import name of each optional package -> the extra of pyproject.toml that installs it.
EXTRA_OF: dict[str, str] = {
    "torch": "torch",
    "torchvision": "torch",
    "matplotlib": "plots",
    "seaborn": "plots",
    "pandas": "plots",
    "relplot": "plots",
    "sacrebleu": "translation",
    "sentencepiece": "translation",
}


def install_hint(package: str) -> str:
    """``pip install 'focalcal[<extra>]'`` for an optional package's import name."""
    return f"pip install 'focalcal[{EXTRA_OF[package]}]'"


def require(package: str, user: str) -> ModuleType:
    """Import ``package`` for ``user`` (a module or function name), or raise one line naming the extra."""
    try:
        return import_module(package)
    except ModuleNotFoundError as error:
        if error.name != package:  # the package is there, one of its own imports is not
            raise
        raise ModuleNotFoundError(f"{user} needs {package}, which this install lacks: {install_hint(package)}",
                                  name=package) from None
