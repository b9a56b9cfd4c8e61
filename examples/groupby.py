"""groupby: one ``agg(["count", "mean", "sum"])`` against three separate aggregations.

    python -m nvtx_cffi trace --stats examples/groupby.py

Runs on pandas (CPU) and, when installed with a GPU, on cuDF; each in its own domain
("pandas", "cudf"), so the summary shows one line per library and variant. One pass over the
groups beats three. Exits 0 with a message when pandas is missing. ``--short``: fewer rows.
"""
import sys

import nvtx_cffi as nvtx

ROWS = 20_000 if "--short" in sys.argv[1:] else 5_000_000


def compare(lib, numpy, name):
    with nvtx.annotate("make data", color="gray", domain=name):
        rows = numpy.arange(ROWS)
        df = lib.DataFrame({"key": rows % 1000, "value": (rows % 97).astype("float64")})
    with nvtx.annotate("agg count+mean+sum", color="green", domain=name):
        one = df.groupby("key")["value"].agg(["count", "mean", "sum"])
    with nvtx.annotate("three separate aggs", color="red", domain=name):
        three = (df.groupby("key")["value"].count(), df.groupby("key")["value"].mean(),
                 df.groupby("key")["value"].sum())
    assert len(one) == len(three[0])
    print(f"{name}: {len(one)} groups")


def main():
    try:
        import numpy
        import pandas
    except ImportError:
        print("skipped: pandas is not installed")
        return 0
    compare(pandas, numpy, "pandas")
    try:
        import cudf
    except ImportError:  # cuDF is optional: pandas alone still tells the story
        print("cudf not installed: pandas only")
    else:
        compare(cudf, numpy, "cudf")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
