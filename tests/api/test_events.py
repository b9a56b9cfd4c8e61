"""Every feature of the facade, proven by the events the recorder saw."""
from __future__ import annotations

import asyncio
import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import recorder

from conftest import ranges, run_python

BLUE = 0x0000FF


def test_recorder_is_attached():
    assert nvtx.tool_attached() and nvtx.enabled() and recorder.loaded()


def test_push_pop_event_fields():
    with recorder.capture() as got:
        nvtx.push_range("load", color="green", domain="io", category="disk", payload=7)
        nvtx.pop_range(domain="io")
    (push,) = ranges(got, "push")
    (pop,) = ranges(got, "pop")
    assert (push.message, push.color, push.domain, push.payload, push.payload_type) == (
        "load", 0x008000, "io", 7, "int64")
    assert push.category == nvtx.get_domain("io").get_category_id("disk") == 1
    assert (pop.domain, pop.tid) == ("io", push.tid)
    assert pop.time_ns >= push.time_ns


def test_category_is_named_in_its_domain():
    with recorder.capture() as got:
        category_id = nvtx.get_domain("catdomain").get_category_id("phase-a")
    (named,) = [e for e in got if e.kind == "category"]
    assert (named.domain, named.target, named.name) == ("catdomain", category_id, "phase-a")


def test_defaults_match_nvtx():
    with recorder.capture() as got:
        nvtx.push_range("p")
        nvtx.pop_range()
        nvtx.mark("m")
        with nvtx.annotate("a"):
            pass
    pushes = ranges(got, "push")
    assert [(e.message, e.color, e.domain, e.category, e.payload) for e in pushes] == [
        ("p", BLUE, None, 0, None), ("a", BLUE, None, 0, None)]
    (mark,) = ranges(got, "mark")
    assert (mark.message, mark.color) == ("m", BLUE)


@pytest.mark.parametrize(
    ("payload", "value", "payload_type"),
    [(-5, -5, "int64"), (2**63, 2**63, "uint64"), (2.5, 2.5, "double"), (True, 1, "int64")],
)
def test_payload_types(payload, value, payload_type):
    with recorder.capture() as got:
        nvtx.mark("pay", payload=payload)
        nvtx.push_range("pay", payload=payload)
        nvtx.pop_range()
    for event in ranges(got, "mark") + ranges(got, "push"):
        assert (event.payload, event.payload_type) == (value, payload_type)


def test_colour_forms():
    with recorder.capture() as got:
        for color in ("red", "salmon", "#102030", "#10203080", 0x12345678, (1.0, 0.0, 0.0)):
            nvtx.mark("c", color=color)
    assert [e.color for e in ranges(got, "mark")] == [
        0xFF0000, 0xFFFA8072, 0xFF102030, 0x80102030, 0x12345678, 0xFFFF0000]


def test_integer_category_and_registered_string():
    domain = nvtx.get_domain("regdomain")
    message = domain.get_registered_string("pre-registered")
    attributes = domain.get_event_attributes(message=message, color="cyan", category=42)
    with recorder.capture() as got:
        domain.push_range(attributes)
        domain.pop_range()
        domain.mark(attributes)
        range_id = domain.start_range(attributes)
        domain.end_range(range_id)
    push, mark, start = ranges(got, "push")[0], ranges(got, "mark")[0], ranges(got, "start")[0]
    for event in (push, mark, start):
        assert (event.message, event.color, event.category, event.domain) == (
            "pre-registered", 0x00FFFF, 42, "regdomain")
    (end,) = ranges(got, "end")
    assert end.range_id == start.range_id == range_id


def test_domain_keyword_arguments_build_and_update_attributes():
    domain = nvtx.get_domain("kwdomain")
    attributes = domain.get_event_attributes(message="first")
    with recorder.capture() as got:
        domain.push_range(message="built", color="red", payload=1.5)
        domain.pop_range()
        domain.mark(attributes, message="changed")
    (push,) = ranges(got, "push")
    assert (push.message, push.color, push.payload) == ("built", 0xFF0000, 1.5)
    (mark,) = ranges(got, "mark")
    assert mark.message == "changed" and attributes.message == "changed"


def test_start_end_across_threads():
    with recorder.capture() as got:
        rng = nvtx.start_range("request", color="orange", domain="server")
        ender = threading.Thread(target=nvtx.end_range, args=(rng,))
        ender.start()
        ender.join()
    (start,) = ranges(got, "start")
    (end,) = ranges(got, "end")
    assert (start.message, start.color, start.domain) == ("request", 0xFFA500, "server")
    assert end.range_id == start.range_id and end.tid != start.tid and end.domain == "server"


def test_end_range_accepts_bare_id_and_none():
    domain = nvtx.get_domain()
    with recorder.capture() as got:
        range_id = domain.start_range(message="bare")
        nvtx.end_range(range_id)
        nvtx.end_range(None)
    assert [e.range_id for e in ranges(got, "end")] == [range_id]


def test_decorator_default_message_and_wraps():
    @nvtx.annotate(color="purple")
    def compute(a, b=2, *rest, scale, **options):
        """Doc."""
        return (a + b) * scale, rest, options

    with recorder.capture() as got:
        result = compute(1, scale=3, extra=True)
    assert result == (9, (), {"extra": True})
    assert compute.__name__ == "compute" and compute.__doc__ == "Doc."
    assert str(inspect.signature(compute)) == "(a, b=2, *rest, scale, **options)"
    (push,) = ranges(got, "push")
    assert (push.message, push.color) == ("compute", 0x800080)
    assert len(ranges(got, "pop")) == 1


def test_positional_only_and_keyword_only_parameters_are_forwarded():
    namespace: dict = {}
    exec("def f(a, /, b, *, c=3):\n    return a, b, c", namespace)  # 3.8+ syntax, kept out of 3.7 parsers
    decorated = nvtx.annotate("posonly")(namespace["f"])
    with recorder.capture() as got:
        assert decorated(1, b=2) == (1, 2, 3)
    with pytest.raises(TypeError):
        decorated(a=1, b=2)
    assert [e.message for e in ranges(got, "push")] == ["posonly"]


def test_decorated_init_subclass_and_class_getitem_stay_implicit_classmethods():
    """A class body makes __init_subclass__ and __class_getitem__ classmethods only when they are
    Python functions; decorated ones are, in every mode, so they get the class."""
    class Base:
        @nvtx.annotate("init_subclass", color="green")
        def __init_subclass__(cls, **options):
            super().__init_subclass__()
            cls.options = options

        @nvtx.annotate("class_getitem")
        def __class_getitem__(cls, item):
            return cls.__name__, item

    with recorder.capture() as got:
        class Sub(Base, flag=1):
            pass

        assert Sub.options == {"flag": 1}
        assert Base[int] == ("Base", int)
    assert [(e.message, e.color) for e in ranges(got, "push")] == [("init_subclass", 0x008000),
                                                                   ("class_getitem", 0x0000FF)]
    assert len(ranges(got, "pop")) == 2


def test_decorated_function_takes_what_its_code_takes_not_what_its_signature_says():
    """A wrapper taking ``**options`` that advertises a narrower ``__signature__`` (as signature-
    rewriting decorators do) still takes every keyword once decorated."""
    def flexible(a, *args, **options):
        return a, args, options

    flexible.__signature__ = inspect.Signature([inspect.Parameter("a", inspect.Parameter.POSITIONAL_ONLY)])
    decorated = nvtx.annotate("flexible")(flexible)
    with recorder.capture() as got:
        assert decorated(1, 2, z=3) == (1, (2,), {"z": 3})
    assert [e.message for e in ranges(got, "push")] == ["flexible"]
    assert str(inspect.signature(decorated)) == "(a, /)"  # what it advertises is kept


def test_range_closed_when_function_raises():
    @nvtx.annotate("fails")
    def fails():
        raise KeyError("boom")

    with recorder.capture() as got:
        with pytest.raises(KeyError):
            fails()
        with pytest.raises(ZeroDivisionError):
            with nvtx.annotate("ctx-fails"):
                1 / 0
    assert [e.message for e in ranges(got, "push")] == ["fails", "ctx-fails"]
    assert len(ranges(got, "pop")) == 2


def test_nesting_per_thread():
    def worker(name):
        with nvtx.annotate(f"outer-{name}"):
            with nvtx.annotate(f"inner-{name}"):
                pass

    with recorder.capture() as got:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    by_tid: dict = {}
    for e in got:
        if e.kind in ("push", "pop"):
            by_tid.setdefault(e.tid, []).append((e.kind, e.message))
    assert len(by_tid) == 3
    for sequence in by_tid.values():
        (kind0, outer), (kind1, inner), (kind2, _), (kind3, _) = sequence
        assert (kind0, kind1, kind2, kind3) == ("push", "push", "pop", "pop")
        assert outer.replace("outer", "inner") == inner


def test_coroutine_spans_awaits_with_start_end():
    @nvtx.annotate("fetch", color="yellow")
    async def fetch(delay):
        await asyncio.sleep(delay)
        return delay

    assert inspect.iscoroutinefunction(fetch)

    async def main():
        return await asyncio.gather(fetch(0.02), fetch(0.01))

    with recorder.capture() as got:
        assert asyncio.run(main()) == [0.02, 0.01]
    starts, ends = ranges(got, "start"), ranges(got, "end")
    assert [e.message for e in starts] == ["fetch", "fetch"] and not ranges(got, "push")
    assert sorted(e.range_id for e in ends) == sorted(e.range_id for e in starts)
    # The two coroutines overlap: both started before either ended.
    assert max(e.time_ns for e in starts) < min(e.time_ns for e in ends)


def test_async_with_uses_start_end():
    async def task(name):
        async with nvtx.annotate(name):
            await asyncio.sleep(0.01)

    async def main():
        await asyncio.gather(task("t1"), task("t2"))

    with recorder.capture() as got:
        asyncio.run(main())
    starts = {e.range_id: e.message for e in ranges(got, "start")}
    assert sorted(starts.values()) == ["t1", "t2"]
    assert sorted(e.range_id for e in ranges(got, "end")) == sorted(starts)


def _ended_by(got):
    """{message of each started range: message of the range each matching end closed}, asserting
    that every end closes a range that is open (same domain and id) and each range ends once."""
    open_ranges, closed = {}, []
    for e in got:
        if e.kind == "start":
            open_ranges[e.domain, e.range_id] = e.message
        elif e.kind == "end":
            assert (e.domain, e.range_id) in open_ranges, f"end of a range that is not open: {e}"
            closed.append(open_ranges.pop((e.domain, e.range_id)))
    assert not open_ranges, f"ranges left open: {open_ranges}"
    return closed


def test_async_with_in_async_generator_ends_its_own_range():
    """An async generator runs in its consumer's context; its ``async with``
    must not end the consumer's range (was: end M id=2, end G id=1)."""
    async def agen():
        async with nvtx.annotate("in_gen", domain="G"):
            yield 1
            yield 2

    async def main():
        g = agen()
        async with nvtx.annotate("outer", domain="M"):
            assert await g.__anext__() == 1
        assert [x async for x in g] == [2]

    with recorder.capture() as got:
        asyncio.run(main())
    starts = {(e.domain, e.range_id): e.message for e in ranges(got, "start")}
    assert sorted(starts.values()) == ["in_gen", "outer"]
    ends = [(e.domain, starts.get((e.domain, e.range_id))) for e in ranges(got, "end")]
    assert ends == [("M", "outer"), ("G", "in_gen")]


def test_async_with_exited_in_another_task_ends_the_range_it_started():
    """An AsyncExitStack entered in one task and closed in another (inside that task's own
    ``async with``): the exit ends the range of its own entry, not the closing task's range, and
    that range is not ended twice."""
    import contextlib

    async def main():
        stack = contextlib.AsyncExitStack()

        async def opener():
            await stack.enter_async_context(nvtx.annotate("A", domain="X"))
            await stack.enter_async_context(nvtx.annotate("B", domain="X"))

        async def closer():
            async with nvtx.annotate("T2", domain="X"):
                await stack.aclose()  # ends B, then A
                nvtx.mark("T2 still open", domain="X")
            async with nvtx.annotate("A", domain="X"):  # the object A's entry used, entered again
                pass

        await asyncio.create_task(opener())
        await asyncio.create_task(closer())

    with recorder.capture() as got:
        asyncio.run(main())
    names = {e.range_id: e.message for e in ranges(got, "start")}
    order = [(e.kind, e.message if e.kind != "end" else names[e.range_id]) for e in got
             if e.kind in ("start", "end", "mark")]
    assert order == [("start", "A"), ("start", "B"), ("start", "T2"), ("end", "B"), ("end", "A"),
                     ("mark", "T2 still open"), ("end", "T2"), ("start", "A"), ("end", "A")]


def test_async_entries_never_exited_are_not_kept_without_bound(monkeypatch):
    """An AsyncExitStack never closed keeps its range open, as any range never ended; the entries
    an exit from another task could still end are the newest MAX_ASYNC_OPEN."""
    import contextlib

    from nvtx_cffi import _annotate

    monkeypatch.setattr(_annotate, "MAX_ASYNC_OPEN", 8)
    before = len(_annotate._async_open)

    async def main():
        stacks = [contextlib.AsyncExitStack() for _ in range(20)]
        for stack in stacks:
            await stack.enter_async_context(nvtx.annotate("never closed", domain="X"))
        return stacks

    with recorder.capture() as got:
        stacks = asyncio.run(main())
    assert len([e for e in got if e.kind == "start"]) == 20 and not [e for e in got if e.kind == "end"]
    assert len(_annotate._async_open) <= max(before, 8) and stacks


def test_shared_annotate_object_in_interleaved_async_generators_and_tasks():
    """One cached annotate object entered by several async generators, consumed in an interleaved
    order by two tasks, one generator finished by a task other than the one that started it, and an
    AsyncExitStack inside a generator: every end closes the range its own entry started."""
    import contextlib

    shared = nvtx.annotate("shared", domain="S")

    async def agen(tag):
        async with shared:
            async with nvtx.annotate(f"gen {tag}", domain="S"):
                yield tag
                await asyncio.sleep(0)
                yield tag

    async def with_stack():
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(nvtx.annotate("stacked", domain="S"))
            yield "s"

    async def consumer(gens, hand_over):
        async with shared:
            for g in gens:
                await g.__anext__()
            async with nvtx.annotate("consumer inner", domain="S"):
                await asyncio.sleep(0)
        return hand_over

    async def main():
        a, b, c, s = agen("a"), agen("b"), agen("c"), with_stack()
        await s.__anext__()
        left = await asyncio.gather(consumer([a, b], c), consumer([c], a))
        await asyncio.sleep(0)
        async with nvtx.annotate("main", domain="S"):
            for g, tag in zip((*left, b), "cab"):  # c and a finish in another task than they started in
                assert [x async for x in g] == [tag]
            async for _ in s:
                pass

    with recorder.capture() as got:
        asyncio.run(main())
    closed = _ended_by(got)
    assert sorted(closed) == sorted(["shared"] * 5 + ["gen a", "gen b", "gen c", "stacked", "main"]
                                    + ["consumer inner"] * 2)


def test_generator_range_spans_iteration():
    @nvtx.annotate("numbers")
    def numbers(n):
        for i in range(n):
            yield i

    assert inspect.isgeneratorfunction(numbers)
    with recorder.capture() as got:
        gen = numbers(3)
        nvtx.mark("between")
        assert list(gen) == [0, 1, 2]
        early = numbers(5)
        next(early)
        early.close()
    starts, ends = ranges(got, "start"), ranges(got, "end")
    assert [e.message for e in starts] == ["numbers", "numbers"]
    assert [e.range_id for e in ends] == [e.range_id for e in starts]
    # The range starts at the first next(), not at creation.
    assert ranges(got, "mark")[0].time_ns < starts[0].time_ns


def test_async_generator_range_and_send():
    @nvtx.annotate("agen")
    async def agen():
        total = 0
        while total < 3:
            received = yield total
            total += received or 1

    assert inspect.isasyncgenfunction(agen)

    async def main():
        gen = agen()
        first = await gen.__anext__()
        second = await gen.asend(2)
        rest = [x async for x in gen]
        return first, second, rest

    with recorder.capture() as got:
        assert asyncio.run(main()) == (0, 2, [])
    (start,) = ranges(got, "start")
    (end,) = ranges(got, "end")
    assert start.message == "agen" and end.range_id == start.range_id


def test_annotate_objects_are_immutable_and_shared():
    first = nvtx.annotate("same", color="red")  # a message's first sight: sent inline, not cached
    a = nvtx.annotate("same", color="red")
    assert a is not first and a is nvtx.annotate("same", color="red")
    assert nvtx.annotate("same", payload=1) is not nvtx.annotate("same", payload=1.0)
    with pytest.raises(AttributeError):
        a.message = "other"


def test_annotate_and_wrapper_pickle_round_trip():
    a = nvtx.annotate("pickled", color="red", domain="pd", category="cat", payload=3)
    b = pickle.loads(pickle.dumps(a))
    assert (b.message, b.color, b.domain.name, b.category, b.payload) == ("pickled", "red", "pd", "cat", 3)
    assert pickle.loads(pickle.dumps(decorated_at_module_level)) is decorated_at_module_level


@nvtx.annotate("module-level", color="blue")
def decorated_at_module_level(x):
    return x * 2


def test_pickled_annotate_in_spawn_child(tmp_path):
    (tmp_path / "work.py").write_text(textwrap.dedent("""
        import nvtx_cffi as nvtx

        @nvtx.annotate("double", color="green")
        def double(x):
            return 2 * x

        def use(annotation):
            with annotation:
                return "ok"
    """))
    (tmp_path / "main.py").write_text(textwrap.dedent("""
        import multiprocessing as mp, os
        import nvtx_cffi as nvtx
        import work

        if __name__ == "__main__":
            print(os.getpid())
            with mp.get_context("spawn").Pool(1) as pool:
                assert pool.map(work.double, [21]) == [42]
                sent = nvtx.annotate("sent", color="red", category="c", payload=2)
                assert pool.apply(work.use, (sent,)) == "ok"
    """))
    record_dir = tmp_path / "rec"
    record_dir.mkdir()
    env = dict(os.environ, **recorder.environment(record_dir), PYTHONPATH=str(tmp_path))
    proc = subprocess.run([sys.executable, str(tmp_path / "main.py")], check=True, env=env,
                          timeout=120, capture_output=True, text=True)
    parent = int(proc.stdout.split()[0])
    recording = recorder.read(record_dir)
    by_message = {e.message: e for e in recording.events if e.kind == "push"}
    double, sent = by_message["double"], by_message["sent"]
    assert double.color == 0x008000
    assert (sent.color, sent.payload, sent.payload_type, sent.category) == (0xFF0000, 2, "int64", 1)
    assert sent.pid == double.pid != parent
    assert recording.processes[sent.pid].ppid == parent


def test_long_messages_are_sent_inline_not_interned():
    long_message = "x" * 5000
    before = nvtx._native.lib.nvtxcffi_string_count()
    with recorder.capture() as got:
        nvtx.push_range(long_message, color="red")
        nvtx.pop_range()
    assert nvtx._native.lib.nvtxcffi_string_count() == before
    (push,) = ranges(got, "push")
    assert (push.message, push.color) == (long_message, 0xFF0000)


def test_unicode_messages_round_trip():
    with recorder.capture() as got:
        nvtx.mark("données ✓ 数据")
    assert ranges(got, "mark")[0].message == "données ✓ 数据"


def test_pop_without_push_is_harmless():
    with recorder.capture() as got:
        nvtx.pop_range(domain="never-pushed")
        nvtx.mark("after")
    assert [e.kind for e in got if e.kind in ("pop", "mark")] == ["pop", "mark"]


def test_interning_is_bounded(tmp_path):
    code = """
        import nvtx_cffi as nvtx
        from nvtx_cffi import recorder
        from nvtx_cffi._native import lib
        n = lib.NVTXCFFI_MAX_STRINGS + 1000
        for i in range(n):  # messages that never repeat are sent inline: nothing registered
            nvtx.mark(f"once {i}")
        assert lib.nvtxcffi_string_count() == 0, lib.nvtxcffi_string_count()
        for i in range(n):  # a message's second call registers it, up to the table's bound
            nvtx.mark(f"message {i}")
            nvtx.mark(f"message {i}")
        assert lib.nvtxcffi_string_count() == lib.NVTXCFFI_MAX_STRINGS, lib.nvtxcffi_string_count()
        assert lib.nvtxcffi_slot_count() <= lib.NVTXCFFI_MAX_SLOTS
        recorder.flush()
        print(n)
    """
    record_dir = tmp_path / "rec"
    record_dir.mkdir()
    out = run_python(code, recorder.environment(record_dir)).stdout
    n = int(out.split()[-1])
    marks = [e for e in recorder.read(record_dir).events if e.kind == "mark"]
    assert len(marks) == 3 * n
    assert [e.message for e in marks[n - 2:n + 2]] == [f"once {n - 2}", f"once {n - 1}", "message 0", "message 0"]
    assert [e.message for e in marks[-3:]] == [f"message {n - 2}", f"message {n - 1}", f"message {n - 1}"]


CACHES_STAY_USEFUL = r"""
import json, nvtx_cffi as nvtx
from nvtx_cffi import _annotate, _domain, _ranges, recorder
from nvtx_cffi._native import lib
_ranges.MAX_CACHED_CALLS = _annotate.MAX_CACHED_ANNOTATIONS = _domain.MAX_KEYWORD_ATTRIBUTES = 50
d = nvtx.get_domain("caches")
strings = lib.nvtxcffi_string_count()
with recorder.capture() as got:
    for i in range(300):  # messages that never repeat, three spellings of each call
        nvtx.mark(f"mark {i}", color="red", category=i % 3)
        nvtx.end_range(nvtx.start_range(f"start {i}"))
        d.mark(message=f"domain {i}", color="green", payload=i)
    unique = lib.nvtxcffi_string_count() - strings
    for i in range(120):  # spellings that repeat, more than each cache holds
        for _ in range(2):
            nvtx.mark(f"again {i}")
            d.mark(message=f"again {i}")
            with nvtx.annotate(f"again {i}", color="blue"):
                pass
    # a spelling met after the caches filled is cached all the same (it was left out for good)
    for _ in range(2):
        nvtx.mark("late", color="yellow")
        d.push_range(message="late", color="yellow")
        d.pop_range()
    nvtx.annotate("late", color="yellow")  # (first sight: sent inline, not cached)
    late = nvtx.annotate("late", color="yellow")
print(json.dumps({
    "unique": unique,
    "cached": [("late", "yellow", None, None) in _ranges._slot_cache,
               ("late", "yellow", None) in d._by_keywords,
               nvtx.annotate("late", color="yellow") is late],
    "sizes": [len(_ranges._slot_cache) <= 50, len(d._by_keywords) <= 50, len(_annotate._cache) <= 50],
    "marks": [(e.message, e.color, e.category, e.payload) for e in got if e.kind == "mark"][:6],
    "count": sum(e.kind == "mark" for e in got),
}))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_unrepeated_messages_are_sent_inline_and_full_caches_start_again(pure):
    # A message a call meets for the first time is sent inline (nothing registered, nothing cached):
    # f"request {n}" cost a string registration, a C slot and a cache entry per call, 2-5x nvtx's
    # per-call cost. A cache that is full starts again: it kept its entries and left out every
    # spelling met later, which then cost a full preparation at each call for the rest of the process.
    out = json.loads(run_python(CACHES_STAY_USEFUL, {"NVTX_CFFI_PURE_PYTHON": pure}).stdout.strip().splitlines()[-1])
    assert out["unique"] == 0  # (category names 0-2 are numbers: nothing registered for them either)
    assert out["cached"] == [True, True, True]
    assert out["sizes"] == [True, True, True]
    assert out["marks"] == [["mark 0", 0xFF0000, 0, None], ["domain 0", 0x008000, 0, 0],
                            ["mark 1", 0xFF0000, 1, None], ["domain 1", 0x008000, 0, 1],
                            ["mark 2", 0xFF0000, 2, None], ["domain 2", 0x008000, 0, 2]]
    assert out["count"] == 300 * 2 + 120 * 2 * 2 + 2


FIRST_SIGHT = r"""
import asyncio, json, nvtx_cffi as nvtx
from nvtx_cffi import _accel, recorder
from nvtx_cffi._native import lib
out = {"accelerated": _accel.accel is not None}
strings, slots = lib.nvtxcffi_string_count(), lib.nvtxcffi_slot_count()
with recorder.capture() as got:
    for i in range(3):  # messages that never repeat, in the spellings users write
        with nvtx.annotate(f"once {i}"):
            pass
        with nvtx.annotate(f"red {i}", color="red", category=7):
            pass
        with nvtx.annotate(message=f"kw {i}", color=0x102030):
            pass
        nvtx.mark(f"mark {i}", color="green", category=3, payload=i)
        nvtx.end_range(nvtx.start_range(f"start {i}", domain="fs"))
    out["registered"] = [lib.nvtxcffi_string_count() - strings, lib.nvtxcffi_slot_count() - slots]
    first, second = nvtx.annotate(f"twice {0}"), nvtx.annotate(f"twice {0}")
    out["objects"] = [first is not second, second is nvtx.annotate("twice 0"), first.attributes.message,
                      first.message, first._slot, second._slot >= 0]
    with first:  # an object made at first sight, entered again: inline each time
        pass
    with first:
        pass
    strings = lib.nvtxcffi_string_count()

    @nvtx.annotate(f"decorated {1}", color="blue")  # a decorated function takes the prepared object
    def f(x):
        return x + 1

    @nvtx.annotate(color="red")
    def g():
        pass

    out["calls"] = [f(1), f(2), g()]
    out["decorators registered"] = lib.nvtxcffi_string_count() - strings

    async def main():
        async with nvtx.annotate(f"async {5}", color="yellow"):
            await asyncio.sleep(0)

    asyncio.run(main())
errors = {}
for name, call in [("annotate NUL", lambda: nvtx.annotate(f"nul\x00{1}")),
                   ("mark NUL", lambda: nvtx.mark(f"nul\x00{2}")),
                   ("annotate surrogate", lambda: nvtx.annotate(f"sur\ud800{3}")),
                   ("push surrogate", lambda: nvtx.push_range(f"sur\ud800{4}")),
                   ("annotate colour", lambda: nvtx.annotate(f"bad {5}", color="no such colour")),
                   ("mark category", lambda: nvtx.mark(f"bad {6}", category=-1))]:
    for _ in range(2):  # at the message's first sight and at its second
        try:
            call()
        except (TypeError, ValueError) as exc:
            errors.setdefault(name, []).append(f"{type(exc).__name__}: {exc}")
out["errors"] = errors
out["events"] = [(e.kind, e.message, e.color, e.category, e.payload, e.domain) for e in got
                 if e.kind in ("push", "mark", "start")]
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_annotate_and_module_calls_send_a_new_message_inline_and_prepare_it_at_its_second_call(pure):
    # A message met for the first time goes with its call (registered in NVTX, as nvtx 0.2.16 does, but
    # no string-table entry, no slot, no cached object):
    # `with annotate(f"request {n}")` cost 3.5 us without a tool (nvtx: 0.5), 5 us with one.
    out = json.loads(run_python(FIRST_SIGHT, {"NVTX_CFFI_PURE_PYTHON": pure}).stdout.strip().splitlines()[-1])
    assert out["accelerated"] is (pure == "0" and sys.implementation.name == "cpython")
    assert out["registered"] == [0, 0]
    assert out["objects"] == [True, True, "twice 0", "twice 0", -1, True]
    assert out["calls"] == [2, 3, None]
    assert out["decorators registered"] == 2  # "decorated 1" and "g": prepared once, pushed by slot
    red, green, blue, yellow = 0xFF0000, 0x008000, 0x0000FF, 0xFFFF00
    events = [tuple(e) for e in out["events"]]
    for i in range(3):
        assert ("push", f"once {i}", blue, 0, None, None) in events
        assert ("push", f"red {i}", red, 7, None, None) in events
        assert ("push", f"kw {i}", 0x102030, 0, None, None) in events
        assert ("mark", f"mark {i}", green, 3, i, None) in events
        assert ("start", f"start {i}", blue, 0, None, "fs") in events
    assert events.count(("push", "twice 0", blue, 0, None, None)) == 2
    assert [e for e in events if e[1] in ("decorated 1", "g")] == [
        ("push", "decorated 1", blue, 0, None, None), ("push", "decorated 1", blue, 0, None, None),
        ("push", "g", red, 0, None, None)]
    assert ("start", "async 5", yellow, 0, None, None) in events
    nul = ["ValueError: message must not contain NUL characters"] * 2
    assert out["errors"]["annotate NUL"] == out["errors"]["mark NUL"] == nul
    for name in ("annotate surrogate", "push surrogate"):
        assert len(out["errors"][name]) == 2 and all("message" in e and "surrogate" in e for e in out["errors"][name])
    assert len(out["errors"]["annotate colour"]) == 2
    assert all("no such colour" in e for e in out["errors"]["annotate colour"])
    assert len(out["errors"]["mark category"]) == 2 and all("category" in e for e in out["errors"]["mark category"])


FIRST_SIGHT_NO_TOOL = r"""
import json, nvtx_cffi as nvtx
from nvtx_cffi import _accel
assert not nvtx.enabled()
out = []
for i in range(2):
    a = nvtx.annotate(f"new {i}", color="red", category=2)
    with a:
        pass
    out.append([a.message, a.color, a.category, a.attributes.message, a.attributes.color])
held = nvtx.annotate(f"reused {1}")
for _ in range(2):  # entered a second time: prepared (nothing to register) and cached
    with held:
        pass
out.append(nvtx.annotate("reused 1") is held or _accel.accel is None)
for call in (lambda: nvtx.annotate(f"nul\x00{1}"), lambda: nvtx.annotate(f"bad {1}", color="no such colour")):
    try:
        call()
    except (TypeError, ValueError) as exc:
        out.append(str(exc))
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_without_a_tool_a_new_message_still_makes_a_checked_object(pure):
    proc = run_python(FIRST_SIGHT_NO_TOOL, {"NVTX_CFFI_PURE_PYTHON": pure}, remove=("NVTX_INJECTION64_PATH",))
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out[:2] == [["new 0", "red", 2, "new 0", "red"], ["new 1", "red", 2, "new 1", "red"]]
    # (with the accelerator, a reused object is cached, so that `with` keeps its bound methods; the
    # Python path's __enter__ without a tool does nothing at all)
    assert out[2] is True
    assert out[3] == "message must not contain NUL characters"
    assert "no such colour" in out[4]


def test_attributes_made_at_each_call_are_copies_that_change_alone():
    # get_event_attributes copies the attributes the domain keeps prepared for its keyword calls
    # (it prepared them again at each call: 23x nvtx's cost without a tool): each object is still
    # its own, and changing one changes neither the others nor the keyword calls.
    d = nvtx.get_domain("copies")
    red, green = 0xFF0000, 0x008000
    with recorder.capture() as got:
        d.mark(message="k", color="red")  # the keyword calls' prepared attributes
        a = d.get_event_attributes(message="k", color="red", payload=1)
        b = d.get_event_attributes("k", "red")
        assert a is not b and (a.payload, b.payload, a.message, b.color) == (1, None, "k", "red")
        d.set_event_attributes(b, message="changed", color="green")
        d.mark(b)
        d.mark(a)
        d.mark(message="k", color="red")
        c = d.get_event_attributes("k", "red")
        d.mark(c)
        c.payload = 2.5
        d.mark(c)
        d.mark(d.get_event_attributes("k", "red"))
    marks = [(e.message, e.color, e.payload) for e in got if e.kind == "mark" and e.domain == "copies"]
    assert marks == [("k", red, None), ("changed", green, None), ("k", red, 1), ("k", red, None),
                     ("k", red, None), ("k", red, 2.5), ("k", red, None)]
    with pytest.warns(Warning, match="Unsupported payload type"):  # (as nvtx: a warning)
        assert d.get_event_attributes("k", "red", payload=object()).payload is not None
    with pytest.raises(ValueError, match="no such colour"):
        d.get_event_attributes(f"k {1}", color="no such colour")


def test_keyword_calls_meeting_a_message_first_send_no_payload_when_given_none():
    # A Domain keyword call without a payload, its message met for the first time, sent its
    # "not given" marker as the payload: an NvtxWarning ("Unsupported payload type: object") at
    # every new message, with or without a tool.
    d = nvtx.get_domain("first-keyword")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with recorder.capture() as got:
            d.mark(message=f"new {1}", color="red")
            d.push_range(message=f"new {2}")
            d.pop_range()
            d.end_range(d.start_range(message=f"new {3}", category=4))
    events = [(e.kind, e.message, e.payload, e.category) for e in got
              if e.domain == "first-keyword" and e.kind != "string"]  # (each message registered first)
    assert events == [("mark", "new 1", None, 0), ("push", "new 2", None, 0), ("pop", None, None, 0),
                      ("start", "new 3", None, 4), ("end", None, None, 0)]


REUSED_FIRST_SIGHT = r"""
import json, nvtx_cffi as nvtx
from nvtx_cffi import _accel, _annotate, recorder
from nvtx_cffi._native import lib
class Plain(nvtx.annotate):
    pass
with recorder.capture() as got:
    held = [nvtx.annotate("held"), nvtx.annotate("held d", domain="reuse"), Plain("held p", color="red")]
    strings = lib.nvtxcffi_string_count()
    slots = [a._slot for a in held]
    for a in held:
        for _ in range(3):
            with a:
                pass
    after = [a._slot >= 0 for a in held]
    registered = lib.nvtxcffi_string_count() - strings
    cached = [nvtx.annotate("held") is held[0], nvtx.annotate("held d", domain="reuse") is held[1],
              Plain("held p", color="red") is held[2]]
    # another object cached for the same arguments meanwhile: the reused one takes its place
    other = nvtx.annotate("held o")
    with nvtx.annotate("held o"):
        pass
    for _ in range(2):
        with other:
            pass
    cached.append(nvtx.annotate("held o") is other)
print(json.dumps({"slots": slots, "after": after, "registered": registered, "cached": cached,
                  "pushes": [(e.message, e.domain) for e in got if e.kind == "push"]}))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_an_object_made_at_first_sight_and_reused_prepares_itself(pure):
    # `a = annotate("x")` held and entered in a loop: made at the message's first sight (inline,
    # not cached), it sent its message inline at every entry (4x the cost of a prepared push).
    # At its second entry it prepares itself and becomes the cached object of its arguments.
    out = json.loads(run_python(REUSED_FIRST_SIGHT, {"NVTX_CFFI_PURE_PYTHON": pure}).stdout.strip().splitlines()[-1])
    assert out["slots"] == [-1, -1, -1]
    assert out["after"] == [True, True, True]
    assert out["registered"] == 3
    assert out["cached"] == [True, True, True, True]
    assert [tuple(p) for p in out["pushes"]] == ([("held", None)] * 3 + [("held d", "reuse")] * 3
                                                 + [("held p", None)] * 3 + [("held o", None)] * 3)


FIRST_SIGHT_EDGES = r"""
import json, nvtx_cffi as nvtx
from nvtx_cffi import _ranges, recorder
out = {}
with recorder.capture() as got:
    # an object made at first sight whose _args are set keeps sending its message
    a = nvtx.annotate(f"fresh {1}")
    a._args = a._args
    with a:
        pass
    out["attributes"] = a.attributes.message
    # a message that comes back behind a stream of unique ones is still prepared at its second call
    n = 0
    hot = []
    for rep in range(3):
        nvtx.mark("hot")
        hot.append("hot" in _ranges._blue_slots)
        for i in range(20000):
            nvtx.mark(f"req {n}")
            n += 1
    out["hot"] = hot
out["events"] = [(e.kind, e.message) for e in got if e.kind == "push"]
print(json.dumps(out))
"""


@pytest.mark.parametrize("pure", ["0", "1"])
def test_first_sight_objects_whose_fields_are_set_and_messages_behind_a_stream(pure):
    # (hostile review of the first-sight paths) Setting _args of an object the C path made at
    # its first sight left it with no attributes (TypeError at __enter__); a message met again
    # after 20,000 unique ones was never prepared by the C path (its table held 16,384 texts).
    out = json.loads(run_python(FIRST_SIGHT_EDGES, {"NVTX_CFFI_PURE_PYTHON": pure}).stdout.strip().splitlines()[-1])
    assert out["attributes"] == "fresh 1"
    assert out["events"] == [["push", "fresh 1"]]
    assert out["hot"] == [False, True, True]


def test_attributes_made_at_each_call_keep_the_arguments_given_and_check_them():
    # (hostile review) get_event_attributes answered by an equal key from the keyword calls'
    # prepared attributes: an earlier call's objects came back (a str enum's text, a NumPy
    # integer's colour), and an argument merely equal to a key skipped its checks.
    import enum

    np = pytest.importorskip("numpy")

    class Phase(str, enum.Enum):
        LOAD = "load"

    class Odd:  # an integer-like colour meaning green, equal to (and hashing like) red
        def __index__(self):
            return 0x00FF00

        def __hash__(self):
            return hash(0xFF0000)

        def __eq__(self, other):
            return True

    class LikeK:  # not a message, hashing like "k" and equal to anything
        def __hash__(self):
            return hash("k")

        def __eq__(self, other):
            return True

    d = nvtx.get_domain("equal-keys")
    first = d.get_event_attributes(Phase.LOAD, color=np.int64(0xFF0000))
    second = d.get_event_attributes("load", color=0xFF0000)
    assert (type(first.message), type(first.color)) == (Phase, np.int64)
    assert (type(second.message), type(second.color)) == (str, int)
    with recorder.capture() as got:
        d.mark(d.get_event_attributes("load", color=Odd()))
    assert [e.color for e in got if e.kind == "mark" and e.domain == "equal-keys"] == [0x00FF00]
    d.get_event_attributes("k")
    with pytest.raises(TypeError, match="message must be"):
        d.get_event_attributes(LikeK())
