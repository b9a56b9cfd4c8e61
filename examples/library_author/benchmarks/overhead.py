"""asv: the library's annotation overhead per mode on its dashboard (track_overhead_ns / _percent)."""
import nvtx_cffi.overhead


class TransformOverhead(nvtx_cffi.overhead.AsvOverhead):
    target = "mylib:transform"
    setup_code = "import mylib; rows = mylib.load(100)"
    call = "fn(rows)"
    params = [["none", "null"]]
