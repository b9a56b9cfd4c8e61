"""Strict parsing of environment switches (``NVTX_DISABLE=0`` must not disable)."""
from __future__ import annotations

import os

from ._warnings import warn_at_caller

__all__ = ["env_flag", "env_int"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def env_flag(name: str) -> bool:
    """True for ``1/true/yes/on``; False for unset, empty, ``0/false/no/off`` (any case).

    Any other value is a mistake worth hearing about: it warns and counts as False.
    """
    raw = os.environ.get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value not in _FALSE:
        msg = f"{name}={raw!r} is not a boolean (use 1/true/yes/on or 0/false/no/off); treating it as off"
        warn_at_caller(msg, RuntimeWarning)  # the user's `import nvtx_cffi` line
    return False


def env_int(name: str, default: int, least: int, most: int) -> int:
    """An integer in ``[least, most]``; ``default`` for unset or empty (surrounding spaces ignored).

    Any other value warns and counts as ``default``.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    text = raw.strip()
    if text.isascii() and text.isdigit() and least <= int(text) <= most:
        return int(text)
    msg = f"{name}={raw!r} is not an integer from {least} to {most}; using {default}"
    warn_at_caller(msg, RuntimeWarning)
    return default
