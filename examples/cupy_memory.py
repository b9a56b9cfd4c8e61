"""CuPy: where does the time go — allocation or compute?

Four annotated variants of the same job: "data generation" of 100 random 1024x1024 arrays and a
"compute" of the squared differences of neighbouring arrays,

1. with memory pools disabled (every array is a fresh ``cudaMalloc``),
2. with CuPy's default memory pool,
3. with a pool allocator that reserves the memory once up front,
4. the compute fused into one kernel with ``cupy.fuse``.

    python -m nvtx_cffi trace --stats examples/cupy_memory.py
    nsys profile -t nvtx,cuda --stats=true python examples/cupy_memory.py   # CUDA calls too

Exits 0 with a message when CuPy or a CUDA GPU is missing. ``--short`` uses 10 smaller arrays.
"""
import sys

import nvtx_cffi as nvtx

SHORT = "--short" in sys.argv[1:]
COUNT, SIDE = (10, 256) if SHORT else (100, 1024)


def gpu_available():
    try:
        import cupy
    except ImportError:
        return None, "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None, "no CUDA GPU"
    except Exception as exc:  # CUDA driver/runtime missing: cupy raises its own error types
        return None, f"no usable CUDA GPU ({exc})"
    return cupy, None


def run(cp, label, compute):
    with nvtx.annotate(label, color="purple"):
        with nvtx.annotate("data generation", color="green", domain="cupy_memory"):
            rng = cp.random.default_rng(0)
            arrays = [rng.random((SIDE, SIDE), dtype=cp.float32) for _ in range(COUNT)]
        with nvtx.annotate("compute", color="red", domain="cupy_memory"):
            total = sum(float(compute(a, b).sum()) for a, b in zip(arrays, arrays[1:]))
        cp.cuda.Device().synchronize()
    return total


def main():
    cp, why = gpu_available()
    if cp is None:
        print(f"skipped: {why}")
        return 0

    def squared_difference(a, b):
        return (a - b) ** 2

    fused = cp.fuse(squared_difference)
    cp.cuda.set_allocator(None)  # 1: every allocation is a cudaMalloc
    run(cp, "no memory pool", squared_difference)
    cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)  # 2: the default pool
    run(cp, "default memory pool", squared_difference)
    pool = cp.cuda.MemoryPool()  # 3: reserve once, then reuse
    with nvtx.annotate("reserve pool", color="gray"):
        pool.malloc(2 * COUNT * SIDE * SIDE * 4)  # dropped at once: the block stays in the pool
    cp.cuda.set_allocator(pool.malloc)
    run(cp, "reserved pool", squared_difference)
    run(cp, "reserved pool + cupy.fuse", fused)  # 4: one fused kernel per pair
    cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
    print("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
