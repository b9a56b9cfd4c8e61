"""Quickstart: a decorated function (purple) with a range (red) around each loop iteration.

    python -m nvtx_cffi trace --stats examples/quickstart.py          # see it without Nsight
    nsys profile -t nvtx,osrt --stats=true python examples/quickstart.py

``--short`` sleeps milliseconds instead of seconds (the tests use it).
"""
import sys
import time

import nvtx_cffi as nvtx

SCALE = 0.01 if "--short" in sys.argv[1:] else 1.0


@nvtx.annotate("f()", color="purple")
def f():
    for i in range(4):
        with nvtx.annotate("loop", color="red"):
            time.sleep(i * SCALE)


if __name__ == "__main__":
    f()
