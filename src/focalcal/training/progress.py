"""Progress reporting: a tqdm bar on a terminal, plain periodic log lines otherwise (cluster logs)."""

from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


class Progress:
    def __init__(self, total_batches: int, description: str, enabled: bool | None = None, every_s: float = 30.0):
        self.interactive = sys.stderr.isatty() if enabled is None else enabled
        self.total = total_batches
        self.description = description
        self.every_s = every_s
        self._bar = tqdm(total=total_batches, desc=description, leave=False) if self.interactive else None
        self._done = 0
        self._last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif time.monotonic() - self._last >= self.every_s:
            self._last = time.monotonic()
            print(f"{self.description}: batch {self._done}/{self.total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
