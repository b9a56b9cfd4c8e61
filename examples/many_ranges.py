"""How much does tracing cost? N push/pop ranges (default 1e6), timed inside the program.

    python examples/many_ranges.py                                   # untraced (no NVTX tool)
    python -m nvtx_cffi trace --stats examples/many_ranges.py        # recorded, then converted

Prints the loop time and time per range; the tracer prints the summary after conversion.
"""
import sys
import time

import nvtx_cffi as nvtx


def main(n):
    push, pop = nvtx.push_range, nvtx.pop_range
    t0 = time.perf_counter()
    for _ in range(n):
        push("r", color="green")
        pop()
    elapsed = time.perf_counter() - t0
    print(f"{n} ranges in {elapsed:.3f} s ({elapsed / n * 1e9:.0f} ns per push+pop; "
          f"tool attached: {nvtx.tool_attached()})", flush=True)


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 1_000_000)
