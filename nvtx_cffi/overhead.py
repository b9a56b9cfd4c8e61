"""What nvtx-cffi's annotations cost *your* function: an overhead budget for a library's CI and asv.

Measure a callable as your library ships it (annotated) against the same work without annotations
(plain), in each of four modes, each in a fresh child process (NVTX picks its tool, or none, at a
process's first NVTX call):

========  ===========================================================================
none      no NVTX tool: what every user of the library pays when nobody profiles
null      the bundled null tool (``libnvtx_null_tool.so``): the cost of reaching a profiler
recorder  the bundled recorder, recording to a temporary folder (a real tool's work; some 22
          bytes an event: a few hundred MB at most for a tiny function, removed afterwards)
disabled  ``NVTX_DISABLE=1``
========  ===========================================================================

Three ways in, all measuring the same way::

    python -m nvtx_cffi overhead mypkg.mod:fn --budget 1%          # CLI: exit 1 when over budget

    import nvtx_cffi.overhead                                      # a test
    def test_annotations_are_cheap():
        nvtx_cffi.overhead.assert_overhead("mypkg.mod:fn", budget="2%", modes=["none", "null"])

    import nvtx_cffi.overhead                                      # asv: benchmarks/overhead.py
    class FnOverhead(nvtx_cffi.overhead.AsvOverhead):
        target = "mypkg.mod:fn"

How it measures (in the child): ``setup`` runs once; then the call expression (``fn()`` by
default) runs in a loop of N calls per sample, N calibrated so that a sample takes ~20 ms
(``sample_ms``), for ``fn`` bound to the annotated callable, to the plain one and for an empty
loop, the three kinds of samples taking turns (in a rotating order) ``repeat`` times so that drift
(CPU frequency, other work on the machine) falls on all three alike. The clock is the thread's
CPU time (``time.thread_time_ns``): time the thread spends descheduled on a busy CI machine is not
counted (``clock="wall"`` uses ``time.perf_counter_ns`` instead, for a callable that waits on I/O
or a device). Each kind's figure is the **minimum** over its samples: noise on a CPU clock only
ever adds time, so the minimum is the least disturbed estimate and the most repeatable one from
run to run (``noise_ns`` says how far the plain samples' median was above it). The plain and
annotated ns per call have the empty loop's cost taken off; ``overhead_ns`` is annotated minus
plain, ``percent`` is that over plain. A negative overhead is noise: the two are the same to
within it. Before the samples that count, every loop is calibrated and run once, so that PyPy's
JIT has compiled them all (it may then inline a trivial plain function to ~0 ns, which makes a
percentage meaningless: budget such functions in ns).

A budget (``--budget``, :func:`assert_overhead`) is checked as :func:`measure_within_budget` does:
a mode over it is measured again, up to three measurements in all (``attempts``), and fails only
when it is over in each, so that a shared CI machine's bad moment does not fail a cheap
annotation while a real regression still fails every time.

The plain callable is ``--plain`` / ``plain=`` when given, else the target's ``__wrapped__`` (set by
nvtx-cffi's decorator and by ``functools.wraps``): then only the decorator is measured, since
annotations inside the function's body run in both. Without a tool (modes ``none`` and
``disabled``) nvtx-cffi's decorator returns the function itself, which then is its own plain.
"""
from __future__ import annotations

import gc
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ._tools import null_tool_path, recorder_path

__all__ = [
    "MODES",
    "AsvOverhead",
    "Budget",
    "OverheadError",
    "Report",
    "Result",
    "assert_overhead",
    "main",
    "measure",
    "measure_within_budget",
]

MODES: Tuple[str, ...] = ("none", "null", "recorder", "disabled")
"""Every mode, in the order measured and shown."""

DEFAULT_REPEAT = 7
DEFAULT_SAMPLE_MS = 20.0
DEFAULT_ATTEMPTS = 3
PROG = "python -m nvtx_cffi overhead"

# Variables of NVTX and of the bundled tools that a child must not inherit: each mode sets its own.
_NVTX_VARIABLES = ("NVTX_INJECTION64_PATH", "NVTX_INJECTION32_PATH", "NVTX_DISABLE", "NVTX_CFFI_RECORD_DIR",
                   "NVTX_CFFI_RECORD_MAX_BYTES")
#: The bundled tool library of each mode that attaches one.
_TOOL_PATHS = {"null": null_tool_path, "recorder": recorder_path}


class OverheadError(ValueError):
    """The measurement could not be made: a bad target, an import error in it, a failing setup or
    call, a tool that did not attach. The message is one line, fit for ``error: ...``."""


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Budget:
    """An overhead budget: at most ``value`` ns per call (``unit="ns"``) or ``value`` percent of
    the plain callable's time (``unit="%"``).

    >>> Budget.parse("1%"), Budget.parse("50ns"), Budget.parse("0.5us")
    (Budget(value=1.0, unit='%'), Budget(value=50.0, unit='ns'), Budget(value=500.0, unit='ns'))
    >>> Budget.parse("2%").exceeded_by(Result("null", 100.0, 103.0, 3.0, 3.0))
    True
    """

    value: float
    unit: str  # "ns" or "%"

    _UNITS = {"%": ("%", 1.0), "ns": ("ns", 1.0), "us": ("ns", 1e3), "\u00b5s": ("ns", 1e3), "ms": ("ns", 1e6)}

    @classmethod
    def parse(cls, text: Union[str, "Budget"]) -> "Budget":
        """``"1%"``, ``"50ns"``, ``"0.5us"``, ``"1ms"``; ValueError for anything else."""
        if isinstance(text, Budget):
            return text
        spec = str(text).strip().lower()
        for suffix, (unit, scale) in cls._UNITS.items():
            if spec.endswith(suffix):
                try:
                    value = float(spec[: -len(suffix)]) * scale
                except ValueError:
                    break
                if math.isfinite(value) and value >= 0:
                    return cls(value, unit)
                break
        msg = f"budget must be a percentage or a time per call (1%, 50ns, 0.5us), got {str(text)!r}"
        raise ValueError(msg)

    def exceeded_by(self, result: "Result") -> bool:
        """Is ``result`` over this budget? (A percentage with no plain time to take it of is.)"""
        if self.unit == "%":
            return result.percent is None or result.percent > self.value
        return result.overhead_ns > self.value

    def __str__(self) -> str:
        return f"{self.value:g}{'%' if self.unit == '%' else 'ns'}"


@dataclass(frozen=True)
class Result:
    """One mode's figures, in ns per call of the call expression (the empty loop's cost taken off).

    >>> r = Result("null", plain_ns=200.0, annotated_ns=230.0, overhead_ns=30.0, percent=15.0)
    >>> print(r.to_json())
    {"mode": "null", "plain_ns": 200.0, "annotated_ns": 230.0, "overhead_ns": 30.0, "percent": 15.0, ...}
    """

    mode: str
    plain_ns: float
    annotated_ns: float
    overhead_ns: float
    """``annotated_ns - plain_ns``: negative means equal within the noise."""
    percent: Optional[float]
    """``overhead_ns`` as a percentage of ``plain_ns``; ``None`` when the plain time is not above 0."""
    noise_ns: float = 0.0
    """Median minus minimum of the plain samples, per call: how much the figures move."""
    calls: int = 0
    """Calls per sample (calibrated)."""
    samples: int = 0
    """Samples of each kind (annotated, plain, empty loop)."""
    enabled: bool = False
    """``nvtx_cffi.enabled()`` in the child, after the measurement."""
    tool_attached: bool = False
    """``nvtx_cffi.tool_attached()`` in the child: a tool was loaded."""
    events_per_call: Optional[int] = None
    """Recorder mode: the events one annotated call recorded (checked before measuring)."""
    plain_source: str = ""
    """Where the plain callable came from: ``--plain``, ``__wrapped__``, or ``itself`` (without
    a tool nvtx-cffi's decorator returns the function itself)."""

    def to_dict(self) -> Dict[str, Any]:
        """The fields as a dict (JSON types)."""
        return asdict(self)

    def to_json(self) -> str:
        """The fields as one JSON object."""
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class Report:
    """The results of every mode measured, with the budget they were held to (if any)."""

    target: str
    plain: Optional[str]
    call: str
    clock: str
    results: Tuple[Result, ...]
    budget: Optional[Budget] = None
    implementation: str = field(default_factory=lambda: f"{sys.implementation.name} {sys.version.split()[0]}")
    measurements: int = 1
    """How many times the modes over budget were measured (:func:`measure_within_budget`)."""

    def __getitem__(self, mode: str) -> Result:
        for result in self.results:
            if result.mode == mode:
                return result
        raise KeyError(mode)

    @property
    def over_budget(self) -> List[Result]:
        """The results over the budget (none without one)."""
        if self.budget is None:
            return []
        return [r for r in self.results if self.budget.exceeded_by(r)]

    @property
    def ok(self) -> bool:
        """No mode is over budget."""
        return not self.over_budget

    def table(self) -> str:
        """A table of the figures, one line per mode, with the budget verdict when there is one."""
        if self.plain is not None:
            plain = self.plain
        elif any(r.plain_source == "itself" for r in self.results):
            plain = "__wrapped__; without a tool, the target itself"
        else:
            plain = "__wrapped__"
        samples = max((r.samples for r in self.results), default=0)
        clock = "thread CPU time" if self.clock == "thread" else "wall time"
        lines = [f"{self.target}: {self.call} annotated vs plain ({plain}); {self.implementation}; "
                 f"{clock}, min of {samples} samples"
                 + ("" if self.measurements == 1 else f"; a mode over budget measured {self.measurements} times")]
        head = f"{'mode':<9} {'plain ns/call':>14} {'annotated ns/call':>18} {'overhead ns':>12} {'% of plain':>11} " \
               f"{'noise ns':>9} {'calls/sample':>13}"
        if self.budget is not None:
            head += f"  {'budget ' + str(self.budget):<12}"
        lines.append(head + "  nvtx")
        over = {id(r) for r in self.over_budget}
        for r in self.results:
            percent = "n/a" if r.percent is None else f"{r.percent:.2f}%"
            line = f"{r.mode:<9} {r.plain_ns:>14.1f} {r.annotated_ns:>18.1f} {r.overhead_ns:>12.1f} {percent:>11} " \
                   f"{r.noise_ns:>9.1f} {r.calls:>13}"
            if self.budget is not None:
                line += f"  {'OVER' if id(r) in over else 'ok':<12}"
            lines.append(f"{line}  {_state_text(r)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> Dict[str, Any]:
        """Everything as a dict (JSON types); ``ok`` is the budget verdict."""
        return {"target": self.target, "plain": self.plain, "call": self.call, "clock": self.clock,
                "implementation": self.implementation, "budget": None if self.budget is None else str(self.budget),
                "ok": self.ok, "measurements": self.measurements, "results": [r.to_dict() for r in self.results]}

    def to_json(self, indent: Optional[int] = 2) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict(), indent=indent)


def _state_text(result: Result) -> str:
    """What NVTX did in the child: ``off`` (no tool, or disabled), ``tool``, ``tool, N events/call``."""
    if not result.enabled:
        return "disabled" if result.tool_attached or result.mode == "disabled" else "no tool"
    if result.events_per_call is not None:
        return f"tool, {result.events_per_call} events/call"
    return "tool" if result.tool_attached else "enabled"


# --------------------------------------------------------------------------- the parent side


def _check_target(spec: str, what: str) -> None:
    module, sep, attr = spec.partition(":")
    if not sep or not module.strip() or not attr.strip() or any(not p.isidentifier() for p in attr.split(".")) \
            or any(not p.isidentifier() for p in module.split(".")):
        msg = f"{what} must be module:function (as mypkg.mod:fn), got {spec!r}"
        raise OverheadError(msg)


def _check_code(code: str, mode: str, what: str) -> None:
    try:
        compile(code, f"<{what}>", mode)
    except SyntaxError as exc:
        kind = "an expression" if mode == "eval" else "Python statements"
        msg = f"{what} is not {kind}: {exc.msg} ({code!r})"
        raise OverheadError(msg) from None


def _environment(mode: str, record_dir: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _NVTX_VARIABLES}
    if mode == "null":
        env["NVTX_INJECTION64_PATH"] = _TOOL_PATHS["null"]()
    elif mode == "recorder":
        env["NVTX_INJECTION64_PATH"] = _TOOL_PATHS["recorder"]()
        env["NVTX_CFFI_RECORD_DIR"] = record_dir
    elif mode == "disabled":
        env["NVTX_DISABLE"] = "1"
    return env


_CHILD = "import sys; from nvtx_cffi.overhead import _child_main; sys.exit(_child_main(sys.argv[1]))"


def _run_child(mode: str, spec: Dict[str, Any], timeout: Optional[float]) -> Result:
    folder = tempfile.mkdtemp(prefix="nvtx-cffi-overhead-")
    try:
        out = os.path.join(folder, "result.json")
        child_spec = dict(spec, mode=mode, out=out)
        path = os.path.join(folder, "spec.json")
        with open(path, "w") as f:
            json.dump(child_spec, f)
        record_dir = os.path.join(folder, "records")
        try:
            proc = subprocess.run([sys.executable, "-c", _CHILD, path], env=_environment(mode, record_dir),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            msg = f"mode {mode}: the measurement took more than {timeout:g} s"
            raise OverheadError(msg) from None
        try:
            with open(out) as f:
                answer = json.load(f)
        except (OSError, ValueError):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            msg = f"mode {mode}: the measuring process exited with status {proc.returncode}: {tail[0]}"
            raise OverheadError(msg) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if "error" in answer:
        raise OverheadError(answer["error"])
    result = Result(**answer)
    if mode in ("null", "recorder") and not result.tool_attached:
        msg = f"mode {mode}: the {mode} tool did not attach ({_TOOL_PATHS[mode]()})"
        raise OverheadError(msg)
    if mode == "recorder" and not result.events_per_call:
        msg = f"mode recorder: a call of {spec['target']} recorded no event: is it annotated?"
        raise OverheadError(msg)
    return result


def measure(target: str, *, plain: Optional[str] = None, setup: Optional[str] = None, call: Optional[str] = None,
            modes: Iterable[str] = MODES, budget: Union[str, Budget, None] = None, repeat: int = DEFAULT_REPEAT,
            sample_ms: float = DEFAULT_SAMPLE_MS, clock: str = "thread", timeout: Optional[float] = 600.0) -> Report:
    """Measure ``target`` (``"mypkg.mod:fn"``) annotated vs plain in each of ``modes``.

    ``plain``: the unannotated twin (``"mypkg.mod:fn_plain"``); default ``target.__wrapped__``.
    ``setup``: statements run once in the child; their names are available to ``call``, an
    expression calling ``fn`` (default ``"fn()"``), e.g. ``setup="import numpy as np; a = np.ones(9)"``,
    ``call="fn(a, 3)"``. ``repeat`` samples of each kind, ~``sample_ms`` each; ``clock`` is
    ``"thread"`` (CPU time of the measuring thread) or ``"wall"``. ``budget`` (``"1%"``, ``"50ns"``)
    is only recorded in the report (see :attr:`Report.ok`); :func:`assert_overhead` enforces it.
    Raises :class:`OverheadError` when a mode cannot be measured::

        report = measure("mypkg.mod:fn", modes=["none", "null"], budget="1%")
        print(report.table())
        report["null"].overhead_ns
    """
    _check_target(target, "target")
    if plain is not None:
        _check_target(plain, "--plain")
    if setup is not None:
        _check_code(setup, "exec", "--setup")
    call = "fn()" if call is None else call
    _check_code(call, "eval", "--call")
    modes = list(modes)
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        msg = f"modes must be some of {','.join(MODES)}, got {','.join(modes) or 'none at all'}"
        raise OverheadError(msg)
    if clock not in ("thread", "wall"):
        msg = f"clock must be thread or wall, got {clock!r}"
        raise OverheadError(msg)
    if int(repeat) < 1 or not float(sample_ms) > 0:
        msg = "repeat must be at least 1 and sample_ms above 0"
        raise OverheadError(msg)
    try:
        budget = None if budget is None else Budget.parse(budget)
    except ValueError as exc:
        raise OverheadError(str(exc)) from None
    spec = {"target": target, "plain": plain, "setup": setup or "", "call": call, "repeat": int(repeat),
            "sample_ns": int(float(sample_ms) * 1e6), "clock": clock, "sys_path": list(sys.path)}
    results = tuple(_run_child(mode, spec, timeout) for mode in sorted(set(modes), key=MODES.index))
    return Report(target, plain, call, clock, results, budget)


def measure_within_budget(target: str, budget: Union[str, Budget], *, attempts: int = DEFAULT_ATTEMPTS,
                          **options: Any) -> Report:
    """Measure as :func:`measure` does, then measure the modes over ``budget`` again, up to
    ``attempts`` measurements in all: a mode is over budget only when it is over in every one.

    A shared CI machine sometimes runs slow for most of a measurement (another tenant, a frequency
    drop), and a slowdown that misses the one fast plain sample but none of the annotated ones makes
    a cheap annotation look expensive; it rarely does so twice in a row, while a real regression is
    over budget every time. The report holds, for each mode, its first measurement under budget, or
    its last one when none was (its table says how many were made)."""
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        msg = f"attempts must be an int of at least 1, got {attempts!r}"
        raise OverheadError(msg)
    report = measure(target, budget=budget, **options)
    made = 1
    while made < attempts and not report.ok:
        over = [r.mode for r in report.over_budget]
        again = measure(target, budget=report.budget, **dict(options, modes=over))
        made += 1
        fresh = {r.mode: r for r in again.results}
        report = replace(report, results=tuple(fresh.get(r.mode, r) for r in report.results), measurements=made)
    return report


def _in_each(report: Report) -> str:
    """The verdict's note of how many measurements a mode was over budget in (none for one)."""
    return "" if report.measurements == 1 else f" (in each of {report.measurements} measurements)"


def assert_overhead(target: str, budget: Union[str, Budget] = "1%", *, attempts: int = DEFAULT_ATTEMPTS,
                    **options: Any) -> Report:
    """Measure as :func:`measure_within_budget` does (a mode over budget is measured again, up to
    ``attempts`` measurements) and raise ``AssertionError`` (with the table) when a mode is over
    ``budget`` in every one; return the report otherwise. For a library's own test suite::

        import nvtx_cffi.overhead

        def test_fn_annotations_cost_under_2_percent():
            nvtx_cffi.overhead.assert_overhead(
                "mypkg.mod:fn", budget="2%", modes=["none", "null"],
                setup="import numpy as np; a = np.ones(1000)", call="fn(a)")

    A target that cannot be measured raises :class:`OverheadError` (a ``ValueError``) instead.
    """
    report = measure_within_budget(target, budget, attempts=attempts, **options)
    if not report.ok:
        modes = ", ".join(r.mode for r in report.over_budget)
        msg = f"annotation overhead over budget {report.budget} in {modes}{_in_each(report)}:\n{report.table()}"
        raise AssertionError(msg)
    return report


# --------------------------------------------------------------------------- asv


class AsvOverhead:
    """Base class for an asv benchmark of a library's own annotation overhead.

    In the library's ``benchmarks/`` (import the module, not the class, so that asv does not
    collect the base class itself; it would be skipped)::

        import nvtx_cffi.overhead

        class SolveOverhead(nvtx_cffi.overhead.AsvOverhead):
            target = "mypkg.linalg:solve"
            setup_code = "import numpy as np; a = np.eye(8); b = np.ones(8)"
            call = "fn(a, b)"

    gives ``track_overhead_ns`` (ns per call above the plain callable), ``track_overhead_percent``
    (% of the plain callable's time) and ``track_plain_ns`` for each mode (``params``). The figures
    come from :func:`measure` (many calls per sample, minimum of samples, each mode in a child
    process) run once per class by ``setup_cache``, not from asv's timer. Class attributes:
    ``target``, ``plain``, ``setup_code``, ``call``, ``repeat``, ``sample_ms``, ``clock``; set
    ``params = [["none", "null"]]`` for fewer modes.
    """

    target: str = ""
    plain: Optional[str] = None
    setup_code: Optional[str] = None
    call: Optional[str] = None
    repeat: int = DEFAULT_REPEAT
    sample_ms: float = DEFAULT_SAMPLE_MS
    clock: str = "thread"
    params: List[List[str]] = [list(MODES)]
    param_names: List[str] = ["mode"]
    timeout: float = 600.0

    def setup_cache(self) -> Dict[str, Dict[str, Any]]:
        """Measure every mode of ``params`` once (asv pickles the answer for each benchmark)."""
        if not self.target:
            raise NotImplementedError("AsvOverhead is a base class: subclass it and set target")
        report = measure(self.target, plain=self.plain, setup=self.setup_code, call=self.call,
                         modes=self.params[0], repeat=self.repeat, sample_ms=self.sample_ms, clock=self.clock,
                         timeout=self.timeout)
        return {r.mode: r.to_dict() for r in report.results}

    def track_overhead_ns(self, results: Dict[str, Dict[str, Any]], mode: str) -> float:
        """ns per call above the plain callable."""
        return float(results[mode]["overhead_ns"])

    track_overhead_ns.unit = "ns"  # type: ignore[attr-defined]

    def track_overhead_percent(self, results: Dict[str, Dict[str, Any]], mode: str) -> float:
        """The overhead as a percentage of the plain callable's time (NaN when that is not above 0)."""
        percent = results[mode]["percent"]
        return float("nan") if percent is None else float(percent)

    track_overhead_percent.unit = "%"  # type: ignore[attr-defined]

    def track_plain_ns(self, results: Dict[str, Dict[str, Any]], mode: str) -> float:
        """ns per call of the plain callable (the workload the percentage is of)."""
        return float(results[mode]["plain_ns"])

    track_plain_ns.unit = "ns"  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- the child side


def _resolve(spec: str, what: str) -> Any:
    import importlib

    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - anything the user's import raises is reported
        msg = f"cannot import {module_name!r} ({what} {spec}): {type(exc).__name__}: {exc}"
        raise OverheadError(_one_line(msg)) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            msg = f"{what} {spec}: {module_name} has no attribute {attr!r}"
            raise OverheadError(msg) from None
    if not callable(obj):
        msg = f"{what} {spec} is not callable ({type(obj).__name__})"
        raise OverheadError(msg)
    return obj


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _loop(call: str, namespace: Dict[str, Any], fn: Optional[Callable[..., Any]]) -> Callable[[int], None]:
    """``loop(n)``: ``n`` times the call expression, ``fn`` a local (``fn=None``: an empty loop)."""
    body = "pass" if fn is None else f"(\n{call}\n        )"
    source = f"def _nvtx_overhead_loop(_n, fn=_fn, _repeat=_repeat):\n    for _ in _repeat(None, _n):\n        {body}\n"
    scope = dict(namespace, _fn=fn, _repeat=itertools.repeat)
    exec(compile(source, "<nvtx_cffi.overhead loop>", "exec"), scope)
    loop: Callable[[int], None] = scope["_nvtx_overhead_loop"]
    return loop


def _timed(loop: Callable[[int], None], n: int, clock: Callable[[], int]) -> int:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = clock()
        loop(n)
        return clock() - start
    finally:
        if gc_was_enabled:
            gc.enable()


def _calibrate(loop: Callable[[int], None], sample_ns: int, clock: Callable[[], int]) -> int:
    """Calls per sample so that a sample of ``loop`` takes about ``sample_ns``."""
    n = 1
    while True:
        elapsed = _timed(loop, n, clock)
        if elapsed >= sample_ns // 5 or n >= 1 << 40:
            break
        n *= 10 if elapsed * 10 < sample_ns // 5 else 2
    return max(1, round(n * sample_ns / max(elapsed, 1)))


def _measure_child(spec: Dict[str, Any]) -> Dict[str, Any]:
    mode = spec["mode"]
    target = _resolve(spec["target"], "target")
    import nvtx_cffi

    if spec["plain"] is not None:
        plain, plain_source = _resolve(spec["plain"], "--plain"), "--plain"
    elif getattr(target, "__wrapped__", None) is not None:
        plain, plain_source = target.__wrapped__, "__wrapped__"
    elif not nvtx_cffi.enabled():
        plain, plain_source = target, "itself"  # nvtx-cffi's decorator without a tool: the function itself
    else:
        msg = (f"target {spec['target']} has no __wrapped__ (is it decorated with nvtx_cffi.annotate "
               "or a functools.wraps decorator?): name its unannotated twin with --plain")
        raise OverheadError(msg)
    namespace: Dict[str, Any] = {"__name__": "__nvtx_overhead__", "fn": target}
    try:
        exec(compile(spec["setup"], "<--setup>", "exec"), namespace)
    except Exception as exc:  # noqa: BLE001
        msg = f"--setup raised {type(exc).__name__}: {exc}"
        raise OverheadError(_one_line(msg)) from None
    loops = {"annotated": _loop(spec["call"], namespace, target), "plain": _loop(spec["call"], namespace, plain),
             "empty": _loop(spec["call"], namespace, None)}
    for kind in ("annotated", "plain"):
        try:
            loops[kind](3)  # the first annotated call initialises NVTX (loads the tool)
        except Exception as exc:  # noqa: BLE001
            msg = f"the call {spec['call']} ({kind}) raised {type(exc).__name__}: {exc}"
            raise OverheadError(_one_line(msg)) from None
    events_per_call = None
    if mode == "recorder":
        from . import recorder

        with recorder.capture() as events:
            loops["annotated"](1)
        events_per_call = len(events)
    clock = time.thread_time_ns if spec["clock"] == "thread" else time.perf_counter_ns
    # Warm-up: a first calibration and one discarded sample of each kind, so that a JIT (PyPy) has
    # compiled every loop before the calibration that counts: samples of interpreted and compiled
    # loops never mix (on CPython this only costs a few samples' time).
    n = _calibrate(loops["annotated"], spec["sample_ns"], clock)
    for loop in loops.values():
        _timed(loop, n, clock)
    n = _calibrate(loops["annotated"], spec["sample_ns"], clock)
    samples: Dict[str, List[int]] = {kind: [] for kind in loops}
    kinds = list(loops)
    gc.collect()
    for i in range(spec["repeat"]):
        for j in range(len(kinds)):
            kind = kinds[(i + j) % len(kinds)]
            samples[kind].append(_timed(loops[kind], n, clock))
    empty = min(samples["empty"])
    plain_ns = (min(samples["plain"]) - empty) / n
    annotated_ns = (min(samples["annotated"]) - empty) / n
    overhead_ns = annotated_ns - plain_ns
    ordered = sorted(samples["plain"])
    median = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    return {"mode": mode, "plain_ns": plain_ns, "annotated_ns": annotated_ns, "overhead_ns": overhead_ns,
            "percent": overhead_ns / plain_ns * 100 if plain_ns > 0 else None,
            "noise_ns": (median - ordered[0]) / n, "calls": n, "samples": spec["repeat"],
            "enabled": nvtx_cffi.enabled(), "tool_attached": nvtx_cffi.tool_attached(),
            "events_per_call": events_per_call, "plain_source": plain_source}


def _child_main(spec_path: str) -> int:
    """Entry point of a measuring child: read the spec, measure, write the answer (exit 2 on error)."""
    with open(spec_path) as f:
        spec = json.load(f)
    sys.path[:0] = [p for p in spec["sys_path"] if p not in sys.path]
    status = 0
    try:
        answer = _measure_child(spec)
    except OverheadError as exc:
        answer, status = {"error": str(exc)}, 2
    with open(spec["out"], "w") as f:
        json.dump(answer, f)
    return status


# --------------------------------------------------------------------------- the CLI


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m nvtx_cffi overhead``: print the table (or ``--json``); exit 1 when a mode is
    over ``--budget``, 2 for a usage error (one line ``error: ...``)."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> "Any":  # one line, as the other usage errors
            self.exit(2, f"error: {message} (see {PROG} --help)\n")

    parser = _Parser(prog=PROG, description="Measure the cost of a function's NVTX annotations, annotated vs "
                     "plain, with no tool, the null tool, the recorder and NVTX_DISABLE=1 (each in a process of "
                     "its own). Exit status 1 when a mode is over --budget.")
    parser.add_argument("target", help="the annotated function, module:function (mypkg.mod:fn)")
    parser.add_argument("--plain", metavar="MOD:FN", help="its unannotated twin (default: target.__wrapped__)")
    parser.add_argument("--setup", metavar="CODE", help="statements run once; their names are available to --call")
    parser.add_argument("--call", metavar="EXPR", help="the expression measured, calling fn (default: fn())")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated (default {','.join(MODES)})")
    parser.add_argument("--budget", metavar="LIMIT", help="the most overhead allowed in every mode: 1%% (of the "
                        "plain time) or 50ns (per call)")
    parser.add_argument("--attempts", type=int, default=DEFAULT_ATTEMPTS, metavar="N",
                        help=f"measure a mode over --budget again, up to N measurements in all; it is over only "
                        f"when over in each (default {DEFAULT_ATTEMPTS})")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of the table")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, metavar="N",
                        help=f"samples of each kind (default {DEFAULT_REPEAT}; the minimum is kept)")
    parser.add_argument("--sample-ms", type=float, default=DEFAULT_SAMPLE_MS, metavar="MS",
                        help=f"about how long a sample runs (default {DEFAULT_SAMPLE_MS:g})")
    parser.add_argument("--clock", choices=("thread", "wall"), default="thread",
                        help="thread CPU time (default) or wall time (for a function that waits)")
    args = parser.parse_args(argv)
    try:
        options = dict(plain=args.plain, setup=args.setup, call=args.call,
                       modes=[m.strip() for m in args.modes.split(",") if m.strip()],
                       repeat=args.repeat, sample_ms=args.sample_ms, clock=args.clock)
        if args.budget is None:
            report = measure(args.target, **options)
        else:
            report = measure_within_budget(args.target, args.budget, attempts=args.attempts, **options)
    except OverheadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.to_json() if args.json else report.table())
    if not report.ok:
        if not args.json:
            print(f"over budget {report.budget}{_in_each(report)}: {', '.join(r.mode for r in report.over_budget)}")
        return 1
    return 0
