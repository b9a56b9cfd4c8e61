"""A small library annotated for good, as docs/library-authors.md describes it.

Everything NVTX of the library lives in one domain ("mylib"), so a profile shows its ranges on a
row of their own and other libraries' names never collide with its own. Categories split its work
into kinds (io, compute), and one counter shows how many rows it handled.
"""
from ._nvtx import nvtx

__all__ = ["load", "transform", "pipeline"]

DOMAIN = "mylib"
_rows = nvtx.get_domain(DOMAIN).get_counter("rows", int) if hasattr(nvtx, "get_domain") else None


@nvtx.annotate("mylib.load", color="blue", domain=DOMAIN, category="io")
def load(n):
    """Make ``n`` rows of data (stands for reading a file)."""
    return [(i, i * i % 97) for i in range(n)]


@nvtx.annotate("mylib.transform", color="green", domain=DOMAIN, category="compute")
def transform(rows, scale=2):
    """Scale every row's value; one range per call, whatever the arguments."""
    out = []
    for key, value in rows:
        out.append((key, value * scale))
    if _rows is not None:
        _rows.sample(len(out))
    return out


def pipeline(n, rounds=3):
    """Load, then transform a few rounds, each round a range of its own."""
    rows = load(n)
    for r in range(rounds):
        with nvtx.annotate(f"round {r}", domain=DOMAIN, category="compute"):
            rows = transform(rows)
    return sum(value for _, value in rows)
