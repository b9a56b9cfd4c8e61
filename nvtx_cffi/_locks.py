"""Locks that survive ``os.fork()``."""
from __future__ import annotations

import os

__all__ = ["hold_across_fork"]


def hold_across_fork(lock) -> None:
    """Take ``lock`` around ``os.fork()``.

    A lock that another thread holds when the process forks stays locked forever in the child
    (that thread does not exist there), and the child's first registration hangs. Python threads
    switch while holding these locks, so it happens; taking the lock before the fork waits for
    the holder to finish its (short) critical section instead.
    """
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=lock.acquire, after_in_parent=lock.release, after_in_child=lock.release)
