"""Rows of a batch's columns grouped by equal values: what the writers format or insert as blocks.

>>> group_rows([[5, 7, 5, 7, 5]], [0, 1, 2, 3, 4], numpy=False)
[[0, 2, 4], [1, 3]]
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ["group_rows"]


def group_rows(cols: List[Any], rows: Any, numpy: bool, max_groups: Optional[int] = None) -> Optional[List[Any]]:
    """``rows`` grouped by equal values in ``cols``: groups in order of first row, rows in order.
    None when there are more than ``max_groups`` groups (not split: a row per name costs no split)."""
    if not len(rows):
        return []
    if numpy:
        import numpy as np

        keys = [np.asarray(c)[rows] for c in cols]
        order = np.lexsort(tuple(reversed(keys)))  # stable: rows stay in order within a group
        change = np.zeros(len(order), dtype=bool)
        change[0] = True
        for k in keys:
            ks = k[order]
            change[1:] |= ks[1:] != ks[:-1]
        cuts = np.flatnonzero(change)[1:]
        if max_groups is not None and len(cuts) + 1 > max_groups:
            return None
        parts = np.split(rows[order], cuts)
        parts.sort(key=lambda g: int(g[0]))
        return parts
    groups: Dict[tuple, list] = {}
    for i in rows:
        key = tuple(c[i] for c in cols)
        group = groups.get(key)
        if group is None:
            group = groups[key] = []
        group.append(i)
    if max_groups is not None and len(groups) > max_groups:
        return None
    return list(groups.values())
