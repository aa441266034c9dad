"""Shared by the rule scripts: make src/ importable and send output to the rule's log.

Jobs may run in a conda env (envs/*.yaml) that holds focalcal's dependencies but not
focalcal itself, so the repository's src/ goes on the path.
"""

import contextlib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))


@contextlib.contextmanager
def logged(log_path):
    """Redirect stdout/stderr to ``log_path``; a failure's traceback lands there too."""
    with open(log_path, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
        try:
            yield
        except BaseException:
            import traceback

            traceback.print_exc(file=handle)
            raise
