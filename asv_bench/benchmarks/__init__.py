"""asv benchmarks for nvtx-cffi (see ``asv_bench/README`` section "Overhead" in the top-level README)."""
