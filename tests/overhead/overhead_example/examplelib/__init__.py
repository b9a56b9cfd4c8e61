"""A small library annotated as a library author would annotate it (tests/overhead/test_overhead.py
measures it).

``checksum`` is what the library ships: decorated, with a ``with annotate`` range inside, in a domain
of its own, a category and a counter. ``checksum_plain`` is the same work without any annotation.
"""
import nvtx_cffi as nvtx

DOMAIN = nvtx.get_domain("examplelib")
ITEMS = DOMAIN.get_counter("items", int)
DATA = list(range(200))


def _work(data):
    total = 0
    for value in data:
        total = (total * 31 + value) & 0xFFFF
    return total


@nvtx.annotate("checksum", color="green", domain="examplelib", category="compute")
def checksum(data=DATA):
    with nvtx.annotate("inner loop", domain="examplelib", category="compute"):
        total = _work(data)
    ITEMS.sample(len(data))
    return total


def checksum_plain(data=DATA):
    return _work(data)


@nvtx.annotate("scaled")
def scaled(data, factor):
    return _work(data) * factor


def scaled_plain(data, factor):
    return _work(data) * factor


def fails():
    raise RuntimeError("always")


NOT_CALLABLE = 3


@nvtx.annotate("tiny")
def tiny():
    """Almost no work: the annotation is most of a call's time."""
    return 1


@nvtx.annotate("busy")
def busy():
    """A range around 100 marks and no work: measured against ``busy_plain``, its overhead under the
    recorder is ~100 events a call, far above any timing noise (the over-budget tests' target; a
    0 ns budget against one range could pass when a noisy sample made the plain twin slower)."""
    for _ in range(100):
        nvtx.mark("step")


def busy_plain():
    for _ in range(100):
        pass
