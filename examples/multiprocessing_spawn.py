"""Two processes started with ``multiprocessing``'s ``spawn`` context, each timed step by step.

Each child builds a random square matrix (4096x4096 and 1024x1024) inside a "mock generate data"
range and takes its mean inside a "mean" range; the parent holds a "main" range. The trace shows
both children as their own processes, so you can see which one is slow:

    python -m nvtx_cffi trace --stats examples/multiprocessing_spawn.py

numpy is used when installed; otherwise pure Python with matrices 16 times smaller per side.
``--short`` uses small matrices (tests); ``--start-method fork|forkserver|spawn`` picks another context.
"""
import argparse
import multiprocessing as mp
import random

import nvtx_cffi as nvtx

try:
    import numpy as np
except ImportError:  # pure Python fallback, smaller
    np = None


def work(n):
    """Build an n x n random matrix and return its mean, one range per step."""
    if np is None:
        n = max(n // 16, 1)
    with nvtx.annotate("mock generate data", color="green"):
        if np is not None:
            data = np.random.default_rng(n).random((n, n))
        else:
            rng = random.Random(n)
            data = [[rng.random() for _ in range(n)] for _ in range(n)]
    with nvtx.annotate("mean", color="orange"):
        if np is not None:
            mean = float(data.mean())
        else:
            mean = sum(map(sum, data)) / (n * n)
    print(f"n={n}: mean {mean:.4f}", flush=True)
    return mean


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="small matrices (256 and 64)")
    parser.add_argument("--start-method", default="spawn", choices=["spawn", "fork", "forkserver"])
    args = parser.parse_args(argv)
    sizes = (256, 64) if args.short else (4096, 1024)
    ctx = mp.get_context(args.start_method)
    with nvtx.annotate("main", color="blue"):
        procs = [ctx.Process(target=work, args=(n,)) for n in sizes]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    return max(p.exitcode for p in procs)


if __name__ == "__main__":
    raise SystemExit(main())
