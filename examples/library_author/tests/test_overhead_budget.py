"""The library's own CI gate: its annotations stay under budget, with and without a profiler."""
import nvtx_cffi.overhead


def test_transform_annotation_costs_under_25_percent():
    # mylib.transform as shipped against its undecorated self (__wrapped__), on 100 rows
    nvtx_cffi.overhead.assert_overhead(
        "mylib:transform", budget="25%", modes=["none", "null"],
        setup="import mylib; rows = mylib.load(100)", call="fn(rows)")
