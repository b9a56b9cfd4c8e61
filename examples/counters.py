"""Counters and array payloads: traced with ``python -m nvtx_cffi trace --stats examples/counters.py``,
Perfetto shows a counter track per counter (``loss``, ``queue depth``, ``memory.allocated`` ...)."""
import math
import time

import numpy as np

import nvtx_cffi as nvtx

domain = nvtx.get_domain("training")
loss = domain.get_counter("loss", float, semantics=nvtx.CounterSemantics(min=0.0))
queue = domain.get_counter("queue depth", int, semantics=nvtx.CounterSemantics(unit="items", min=0))
memory = domain.get_counter("memory", nvtx.numpy_dtype([
    ("allocated", np.int64), ("reserved", np.int64)]))

for step in range(50):
    with nvtx.annotate("step", color="green", domain="training", payload=step):
        loss.sample(math.exp(-step / 10) + 0.05 * (1 + math.sin(step)))
        queue.sample(step % 7)
        memory.sample((1024 * step, 2048 * (step // 10 + 1)))
        time.sleep(0.002)
    nvtx.mark("gradients", domain="training", payload=np.random.default_rng(step).normal(size=4))

# Samples taken earlier, submitted together with their timestamps:
timestamps = [domain.get_timestamp() for _ in range(5)]
queue.batch_submit([1, 2, 3, 2, 1], timestamps)
