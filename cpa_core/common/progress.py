"""A text progress bar for the command line (the dashboard renders the same callback with st.progress)."""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

Progress = Callable[[int, int, str], None]  # (done, total, step description)


class ProgressBar:
    """Callable ``(done, total, step)`` drawing a bar on a stream; prints counts only, never content."""

    def __init__(self, stream: TextIO | None = None, width: int = 30, min_interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.width, self.min_interval = width, min_interval
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last, self._step = 0.0, None

    def __call__(self, done: int, total: int, step: str) -> None:
        now = time.monotonic()
        finished = done >= total
        if step != self._step:
            self._step, self._last = step, 0.0
        if not finished and now - self._last < (self.min_interval if self.tty else 5.0):
            return
        self._last = now
        filled = int(self.width * done / max(total, 1))
        line = f"{step:<32} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        if self.tty:
            self.stream.write("\r" + line + ("\n" if finished else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
