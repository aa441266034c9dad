"""Shared by the rule scripts: make src/ importable and send output to the rule's log.

Jobs may run in a conda env (envs/*.yaml) that holds focalcal's dependencies but not
focalcal itself, so the repository's src/ goes on the path.
"""

import contextlib
import io
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "src"))


class _Tee(io.TextIOBase):
    def __init__(self, *handles):
        self.handles = handles

    def write(self, text):
        for handle in self.handles:
            handle.write(text)
        return len(text)

    def flush(self):
        for handle in self.handles:
            handle.flush()


@contextlib.contextmanager
def logged(log_path, keep_attempt=False):
    """Redirect stdout/stderr to ``log_path``; a failure's traceback lands there too.

    With ``keep_attempt`` the output also goes to this attempt's own file,
    ``<log without .log>.attempts/<UTC time>-<host>-<pid>.log``: Snakemake deletes a job's log
    before it runs the job again (a retry, or a second Snakemake on the same results/), so the
    declared log shows the last attempt and the folder keeps every one."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(log_path, "w"))]
        if keep_attempt:
            folder = os.path.splitext(log_path)[0] + ".attempts"
            os.makedirs(folder, exist_ok=True)
            name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{platform.node()}-{os.getpid()}.log"
            handles.append(stack.enter_context(open(os.path.join(folder, name), "w")))
        handle = _Tee(*handles) if keep_attempt else handles[0]
        stack.enter_context(contextlib.redirect_stdout(handle))
        stack.enter_context(contextlib.redirect_stderr(handle))
        try:
            yield
        except BaseException:
            import traceback

            traceback.print_exc(file=handle)
            raise
