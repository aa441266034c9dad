"""A workflow job's output, sent to the log file its rule declares.

Torch-free, so the training job can open its log before it pins the CPU numerics and imports
torch.
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import time
import traceback


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


def attempt_log_path(log_path: str) -> str:
    """This attempt's own log: ``<log without .log>.attempts/<UTC time>-<host>-<pid>.log``."""
    folder = os.path.splitext(log_path)[0] + ".attempts"
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{platform.node()}-{os.getpid()}.log"
    return os.path.join(folder, name)


@contextlib.contextmanager
def logged(log_path, keep_attempt=False):
    """Redirect stdout/stderr to ``log_path``; a failure's traceback lands there too.

    With ``keep_attempt`` the output also goes to :func:`attempt_log_path`: Snakemake deletes
    a job's log before it runs the job again (a retry, or a second Snakemake on the same
    results/), so the declared log shows the last attempt and the folder keeps every one."""
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(log_path, "w"))]
        if keep_attempt:
            attempt = attempt_log_path(log_path)
            os.makedirs(os.path.dirname(attempt), exist_ok=True)
            handles.append(stack.enter_context(open(attempt, "w")))
        handle = _Tee(*handles) if keep_attempt else handles[0]
        stack.enter_context(contextlib.redirect_stdout(handle))
        stack.enter_context(contextlib.redirect_stderr(handle))
        try:
            yield
        except BaseException:
            traceback.print_exc(file=handle)
            raise
