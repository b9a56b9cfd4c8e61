"""Progress lines on stderr for conversions that take a while.

Silent for the first ``after`` seconds (small traces print nothing) and when stderr is not a
terminal, unless forced (``--progress``). On a terminal one line is rewritten in place; otherwise a
line is printed at most every few seconds.

>>> import io
>>> out = io.StringIO()
>>> p = Progress(force=True, after=0.0, stream=out)
>>> p.update("reading", 5, 10); p.done()
>>> "reading: 5/10 (50%)" in out.getvalue()
True
"""
from __future__ import annotations

import sys
import time
from typing import IO, Optional

__all__ = ["Progress"]


class Progress:
    """Rate-limited progress reporting: ``update(stage, done, total)`` then ``done()``."""

    def __init__(self, *, force: bool = False, after: float = 1.0, stream: Optional[IO[str]] = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", lambda: False)()
        self._tty = bool(isatty)
        self._enabled = force or self._tty
        self._after = 0.0 if force else after
        self._start = time.monotonic()
        self._last = -1e9
        self._interval = 0.2 if self._tty else 2.0
        self._shown = False

    def update(self, stage: str, done: int, total: Optional[int] = None) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        final = bool(total) and done >= total and self._shown  # the last line is never rate-limited away
        if now - self._start < self._after or (now - self._last < self._interval and not final):
            return
        self._last = now
        if total:
            text = f"nvtx_cffi trace: {stage}: {done}/{total} ({100 * done // total}%)"
        else:
            text = f"nvtx_cffi trace: {stage}: {done}"
        if self._tty:
            self._stream.write("\r" + text.ljust(72))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()
        self._shown = True

    def done(self) -> None:
        """End the in-place line, if one was shown."""
        if self._shown and self._tty:
            self._stream.write("\n")
            self._stream.flush()
        self._shown = False
