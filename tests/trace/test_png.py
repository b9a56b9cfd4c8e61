"""``--png``: the rasterised timeline picture (nvtx_cffi/_trace/png.py), checked on its pixels and
on the collector's per-pixel arrays."""
from __future__ import annotations

import textwrap

import pytest
from support.trace_check import run_tracer

np = pytest.importorskip("numpy")
pytest.importorskip("matplotlib")
from matplotlib.image import imread  # noqa: E402

from nvtx_cffi._trace import png as png_module  # noqa: E402
from nvtx_cffi._trace.convert import convert  # noqa: E402
from nvtx_cffi._trace.model import Mark, Range, Timeline  # noqa: E402
from nvtx_cffi._trace.pairing import marks_of, ranges_of  # noqa: E402
from nvtx_cffi._trace.png import PngCollector, write_png  # noqa: E402

LEFT = png_module._LEFT_PX
WIDTH = png_module.WIDTH_PX


def push(name, start, end, color=None, tid=1, depth=0, pid=1):
    r = Range("push", name, None, None, color, None, pid, tid, start, depth=depth)
    r.end_ns = end
    return r


def timeline_of(ranges, marks=(), threads=None, end=1_000_000):
    tl = Timeline()
    tl.ranges = list(ranges)
    tl.marks = list(marks)
    tl.threads = set(threads or {(r.pid, r.tid) for r in tl.ranges} | {(m.pid, m.tid) for m in tl.marks})
    tl.start_ns, tl.end_ns = 0, end
    return tl


def picture(tmp_path, timeline, name="t.png"):
    path = tmp_path / name
    write_png(timeline, str(path))
    return imread(str(path))[:, :, :3]


def near(pixels, rgb, tol=0.03):
    return (abs(pixels - np.asarray(rgb, dtype=float))).max(axis=-1) < tol


def rows_with(image, rgb, min_count=50):
    """Image rows holding at least ``min_count`` pixels of colour ``rgb``."""
    return np.flatnonzero(near(image, rgb).sum(axis=1) >= min_count)


def test_a_range_over_the_first_half_colours_the_first_half_of_its_row(tmp_path):
    # alpha 0, as nvtx's named colours are recorded: drawn opaque
    image = picture(tmp_path, timeline_of([push("first half", 0, 500_000, color=0x00FF0000)]))
    rows = rows_with(image, (1, 0, 0))
    assert len(rows) >= 10  # a lane is 15 pixels high
    band = image[rows]
    left = band[:, LEFT + 2:LEFT + WIDTH // 2 - 2]
    right = band[:, LEFT + WIDTH // 2 + 2:LEFT + WIDTH - 2]
    assert near(left, (1, 0, 0)).mean() > 0.9  # (the rest: the written name)
    assert near(right, (1, 1, 1)).mean() > 0.95  # background (a dotted grid line crosses it)
    assert not near(right, (1, 0, 0)).any()


def test_two_threads_are_two_rows_and_nesting_depths_lanes_below_their_parent(tmp_path):
    ranges = [push("a", 0, 1_000_000, color=0xFF00FF00, tid=1),
              push("a.inner", 0, 1_000_000, color=0xFF0000FF, tid=1, depth=1),
              push("b", 0, 1_000_000, color=0xFFFF00FF, tid=2)]
    image = picture(tmp_path, timeline_of(ranges))
    green, blue, magenta = (rows_with(image, c, WIDTH // 2) for c in ((0, 1, 0), (0, 0, 1), (1, 0, 1)))
    assert len(green) and len(blue) and len(magenta)
    assert green.max() < blue.min() < blue.max() < magenta.min()  # thread 1: depth 0, depth 1; then thread 2
    between = image[blue.max() + 1:magenta.min(), LEFT + 10]
    assert near(between, (0.82, 0.82, 0.82)).any()  # the separator between the threads' rows


def test_the_name_covering_most_of_a_column_is_drawn_there():
    c = PngCollector(0, 1000, width=10)  # 100 ns per column
    c.range(push("short", 0, 30))  # column 0: 30%
    c.range(push("long", 30, 100))  # column 0: 70%
    c.range(push("long", 100, 130))  # column 1: one range of "long": 30%
    for t in range(130, 190, 10):  # column 1: six ranges of "many": 60% in all
        c.range(push("many", t, t + 10))
    c.flush()
    names = [c.names[k][0] if k >= 0 else None for k in c.shown(0).tolist()]
    assert names[:3] == ["long", "many", None]
    assert c.cover[0, 0] == pytest.approx(1.0) and c.cover[0, 1] == pytest.approx(0.9)


def test_the_name_kept_across_batches_adds_up_and_a_later_name_covering_more_takes_the_column():
    c = PngCollector(0, 1000, width=10)
    c.range(push("a", 0, 40))
    c.flush()
    c.range(push("b", 40, 90))  # 50% > a's 40%
    c.flush()
    assert c.names[c.shown(0)[0]][0] == "b"
    c.range(push("a", 200, 240))
    c.flush()
    c.range(push("a", 240, 260))  # a again: 40% + 20%
    c.range(push("b", 260, 310))  # b: 40%, less than a's 60%
    c.flush()
    assert c.names[c.shown(0)[2]][0] == "a"


def test_legend_lists_names_by_total_time_then_count(tmp_path):
    ranges = [push("many short", i * 10, i * 10 + 5, color=0xFF00FF00) for i in range(30)]
    ranges += [push("one long", 1000, 101_000, color=0xFF0000FF), push("one long", 200_000, 200_100, color=0xFF0000FF)]
    ranges += [push("uncoloured", 300_000, 300_150)]
    c = PngCollector(0, 1_000_000)
    for r in ranges:
        c.range(r)
    c.flush()
    legend = c.legend()
    assert [(name, count, total) for name, _color, count, total in legend] == [
        ("one long", 2, 100_100), ("many short", 30, 150), ("uncoloured", 1, 150)]
    assert legend[0][1] == "#0000ff"
    assert legend[2][1] == f"#{png_module.rgb_of(None, 'uncoloured'):06x}"  # a palette colour by its name
    image = picture(tmp_path, timeline_of(ranges))
    blue = near(image, (0, 0, 1))
    lane = rows_with(image, (0, 0, 1), 5)[0]  # the long range's lane, at the top
    assert blue[lane + 20:].sum() > 20  # its legend swatch, under the timeline


def test_wide_ranges_get_their_name_written_narrow_ones_do_not(tmp_path):
    ranges = [push("wide", 0, 500_000, color=0xFFFF0000), push("narrow", 500_000, 505_000, color=0xFF0000FF)]
    c = PngCollector(0, 1_000_000)
    for r in ranges:
        c.range(r)
    image = picture(tmp_path, timeline_of(ranges))
    rows = rows_with(image, (1, 0, 0))
    red_bar = image[rows, LEFT + 1:LEFT + WIDTH // 2 - 1]
    text = ~near(red_bar, (1, 0, 0), 0.15)
    assert text[:, :60].sum() > 20  # "wide" in white on red at the bar's left end
    assert not text[:, 80:].any()  # nothing else: one label per range
    blue_cols = np.flatnonzero(near(image[rows], (0, 0, 1)).any(axis=0))
    assert 0 < len(blue_cols) < 12 and near(image[rows][:, blue_cols], (0, 0, 1), 0.2).all()  # no text on it


def test_marks_are_ticks_in_a_strip_above_their_thread(tmp_path):
    ranges = [push("r", 0, 1_000_000, color=0xFF00FF00)]
    marks = [Mark("m", None, None, 0xFFFF0000, None, 1, 1, t) for t in (250_000, 750_000)]
    image = picture(tmp_path, timeline_of(ranges, marks))
    red = near(image, (1, 0, 0))
    cols = np.flatnonzero(red.any(axis=0))
    assert len(cols) and set(np.round((cols - LEFT) / WIDTH * 4).tolist()) == {1, 3}
    assert np.flatnonzero(red.any(axis=1)).max() < rows_with(image, (0, 1, 0), WIDTH // 2).min()


def test_the_collector_arrays_do_not_grow_with_the_ranges():
    c = PngCollector(0, 20_000_000)
    t = 0

    def feed(n):
        nonlocal t
        for i in range(n):
            c.range(push(f"name {i % 20}", t, t + 40, tid=1 + i % 3, depth=i // 3 % 3))
            t += 50

    feed(2000)
    c.flush()
    size = c.array_bytes()
    shape = c.cover.shape
    feed(200_000)
    c.flush()
    assert c.ranges == 202_000
    assert c.array_bytes() == size and c.cover.shape == shape == (16, WIDTH)  # 9 lanes, room for 16
    assert len(c.lanes) == 9 and len(c.names) == 20 and not c._pending


def test_many_distinct_names_are_bounded_too():
    c = PngCollector(0, 1_000_000, width=100)
    for i in range(png_module.MAX_NAMES + 500):
        c.range(push(f"call {i}", i * 10, i * 10 + 5, color=0xFF112233))
    c.flush()
    assert len(c.names) == png_module.MAX_NAMES + 1  # the rest: "(other names)" in their colour
    assert c.names[-1] == ("(other names)", 0x112233)
    assert int(c.count[len(c.names) - 1]) == 500


SCRIPT = """
    import threading
    import nvtx_cffi as nvtx

    def work(color):
        for i in range(300):
            with nvtx.annotate("outer", color=color):
                with nvtx.annotate(f"inner {i % 7}", color="red"):
                    nvtx.mark("tick", color="black")
                    sum(range(200))
        rid = nvtx.start_range("async", color="orange")
        nvtx.end_range(rid)

    threads = [threading.Thread(target=work, args=(c,)) for c in ("blue", "green")]
    for t in threads: t.start()
    for t in threads: t.join()
"""


def test_batches_with_and_without_numpy_and_ranges_one_by_one_draw_the_same(tmp_path):
    script = tmp_path / "p.py"
    script.write_text(textwrap.dedent(SCRIPT))
    traced = run_tracer(str(tmp_path), [str(script)], "--record-dir", str(tmp_path / "raw"))
    assert traced.returncode == 0, traced.stderr

    class OneByOne(PngCollector):  # the paired batches handed on as Range and Mark objects
        def batch(self, pb):
            for r in ranges_of(pb):
                self.range(r)
            for m in marks_of(pb):
                self.mark(m)

    pictures = []
    for numpy, wrap in ((True, False), (False, False), (True, True)):
        collector = OneByOne() if wrap else PngCollector()
        convert(str(tmp_path / "raw"), str(tmp_path / "t.json"), numpy=numpy, picture=collector)
        collector.flush()
        pictures.append(collector)
    first = pictures[0]
    assert first.ranges == 2 * 600 + 2 and first.marks == 600 and len(first.async_pids) == 1
    assert len(first.lanes) == 5  # two threads at depths 0 and 1, the process's start/end row

    def drawn(c):  # lane -> (coverage, names shown), by what they are rather than by when they came
        return {lane: (c.cover[i], [c.names[k][0] if k >= 0 else None for k in c.shown(i).tolist()])
                for lane, i in c.lanes.items()}

    def counts(c):
        return {name: int(c.count[i]) for i, name in enumerate(c.names)}

    expected = drawn(first)
    for other in pictures[1:]:
        assert other.ranges == first.ranges and other.marks == first.marks and counts(other) == counts(first)
        got = drawn(other)
        assert got.keys() == expected.keys()
        for lane, (cover, names) in expected.items():
            np.testing.assert_allclose(got[lane][0], cover, rtol=1e-9, atol=1e-9)
            assert np.mean([a == b for a, b in zip(got[lane][1], names)]) > 0.99  # ties may fall either way
        for row, i in first.mark_rows.items():
            j = other.mark_rows[row]
            assert (other.mark_hit[j] == first.mark_hit[i]).all()
