"""Progress lines on stderr for conversions that take a while.

Each line starts with the command's own prefix (``python -m nvtx_cffi trace: ...``, ``python -m
nvtx_cffi convert: ...``, as its other lines), then what is done of how much in units (``12.3 MB
of 250.0 MB``, or ``1.2 M of 3.0 M events``), the rate since the start (``45.6 MB/s``) and the time
left at that rate (``~3 s left``). Silent for the first ``after`` seconds (small traces print
nothing) and when stderr is not a terminal, unless forced (``--progress``). On a terminal one line
is rewritten in place every 0.2 s; otherwise a line is printed at most every 2 s, and the last one
(100%) always.

>>> import io
>>> out, now = io.StringIO(), [0.0]
>>> p = Progress("python -m nvtx_cffi convert", force=True, stream=out, clock=lambda: now[0])
>>> now[0] = 2.0; p.update("converting", 12_300_000, 250_000_000)
>>> now[0] = 4.5; p.update("converting", 250_000_000, 250_000_000); p.done()
>>> print(out.getvalue(), end="")
python -m nvtx_cffi convert: converting: 12.3 MB of 250.0 MB (4%), 6.2 MB/s, ~39 s left
python -m nvtx_cffi convert: converting: 250.0 MB of 250.0 MB (100%), 55.6 MB/s, done in 4.5 s
"""
from __future__ import annotations

import sys
import time
from typing import IO, Callable, Optional

__all__ = ["Progress", "format_amount", "format_duration"]

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_amount(n: float, unit: str) -> str:
    """``n`` of ``unit`` (``"bytes"`` or ``"events"``) as people read it.

    >>> format_amount(12_345_678, "bytes"), format_amount(950, "bytes"), format_amount(2.5e9, "bytes")
    ('12.3 MB', '950 B', '2.5 GB')
    >>> format_amount(1_234_567, "events"), format_amount(999, "events")
    ('1.2 M events', '999 events')
    """
    number, prefix = f"{n:.0f}", ""
    for scale, si in _SI:
        if abs(n) >= scale:
            number, prefix = f"{n / scale:.1f}", si
            break
    if unit == "bytes":
        return f"{number} {prefix}B"
    return " ".join(part for part in (number, prefix, unit) if part)


def format_duration(seconds: float) -> str:
    """``3 s``, ``4 min``, ``1.5 h``: rounded for a line that changes every fraction of a second.

    >>> format_duration(2.6), format_duration(125), format_duration(5400)
    ('3 s', '2 min', '1.5 h')
    """
    if seconds < 90:
        return f"{max(0, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Rate-limited progress reporting: ``update(stage, done, total)`` then ``done()``.

    ``prefix`` begins every line (the command's name); ``unit`` is what ``done`` and ``total``
    count: ``"bytes"`` (the recording read, what the conversion reports) or ``"events"``.
    ``clock`` (seconds, default :func:`time.monotonic`) and ``stream`` (default stderr) are for tests.
    """

    def __init__(self, prefix: str = "python -m nvtx_cffi trace", *, force: bool = False, after: float = 1.0,
                 stream: Optional[IO[str]] = None, unit: str = "bytes",
                 clock: Optional[Callable[[], float]] = None) -> None:
        self._prefix = prefix
        self._unit = unit
        self._stream = stream if stream is not None else sys.stderr
        isatty = getattr(self._stream, "isatty", lambda: False)()
        self._tty = bool(isatty)
        self._enabled = force or self._tty
        self._after = 0.0 if force else after
        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._last = -1e9
        self._interval = 0.2 if self._tty else 2.0
        self._shown = False
        self._width = 0

    def text(self, stage: str, done: int, total: Optional[int], elapsed: float) -> str:
        """The line for ``done`` of ``total`` after ``elapsed`` seconds (without the prefix)."""
        amount = format_amount(done, self._unit)
        if total:
            if self._unit == "bytes":
                amount += f" of {format_amount(total, self._unit)}"
            else:  # "1.2 M of 3.0 M events"
                amount = f"{format_amount(done, '')} of {format_amount(total, self._unit)}"
            amount += f" ({100 * done // total}%)"
        if elapsed <= 0 or done <= 0:
            return f"{stage}: {amount}"
        rate = done / elapsed
        shown_rate = format_amount(rate, self._unit) + "/s"
        if total and done >= total:
            return f"{stage}: {amount}, {shown_rate}, done in {elapsed:.1f} s"
        left = f", ~{format_duration((total - done) / rate)} left" if total else ""
        return f"{stage}: {amount}, {shown_rate}{left}"

    def update(self, stage: str, done: int, total: Optional[int] = None) -> None:
        if not self._enabled:
            return
        now = self._clock()
        final = bool(total) and done >= total and self._shown  # the last line is never rate-limited away
        if now - self._start < self._after or (now - self._last < self._interval and not final):
            return
        self._last = now
        text = f"{self._prefix}: {self.text(stage, done, total, now - self._start)}"
        if self._tty:  # rewritten in place: pad over what a longer previous line left
            self._stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
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
        self._width = 0
