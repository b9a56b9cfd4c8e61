"""The tracer behind ``python -m nvtx_cffi trace``: see NVTX ranges without Nsight.

- :mod:`.runner` runs the program as a child process with the recorder in its environment,
- :mod:`.convert` converts the recording, in one direction: the source (:mod:`.columns`), the
  decode step (:mod:`.counters`), the pairing into ranges and marks (:mod:`.pairing`,
  :mod:`.model`), then the writers (:mod:`.writers`: the protocol and the registry by name),
- writers: :mod:`.chrome` (Chrome Trace Event JSON: Perfetto, chrome://tracing), :mod:`.pftrace`
  (Perfetto protobuf), :mod:`.sqlite` (Nsight's schema), :mod:`.png` (``--png``, matplotlib),
  :mod:`.stats` (the ``--stats`` summary),
- :mod:`.cli` ties them together.
"""
from __future__ import annotations

__all__: list = []
