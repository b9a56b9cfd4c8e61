"""The state shared with the C accelerator (nvtx_cffi/_bases.py): its C types
(c/speedups/accel_types.c) and their Python twins, run through one fixture, held to the same
behaviour; and the stub (nvtx_cffi/_speedups.pyi) held to the C module."""
from __future__ import annotations

import ast
import gc
import os
import pickle
import types
import weakref

import pytest

import nvtx_cffi as nvtx
from nvtx_cffi import _accel, _annotate, _bases, _domain, _ranges, recorder


@pytest.fixture(params=["c", "python"])
def bases(request):
    """The three types of the seam, as C implements them or as their Python twins do."""
    if request.param == "python":
        return types.SimpleNamespace(name="python", DomainBase=_bases.PyDomainBase,
                                     EventAttributesBase=_bases.PyEventAttributesBase, Caches=_bases.PyCaches,
                                     caches=_bases.PyCaches())
    speedups = _accel.speedups
    if speedups is None:
        pytest.skip(f"the accelerator is not in use here: {_accel.why_not}")
    return types.SimpleNamespace(name="c", DomainBase=speedups.DomainBase,
                                 EventAttributesBase=speedups.EventAttributesBase, Caches=speedups.Caches,
                                 caches=speedups.caches)


def fields_of(cls) -> set:
    """The per-instance fields a class declares (member descriptors: C members and __slots__ alike)."""
    return {name for name, value in vars(cls).items() if isinstance(value, types.MemberDescriptorType)}


@pytest.mark.parametrize("which, names", [("DomainBase", _bases.DOMAIN_FIELDS),
                                          ("EventAttributesBase", _bases.ATTRIBUTE_FIELDS)])
def test_fields_are_declared_once_and_behave_as_slots(bases, which, names):
    cls = getattr(bases, which)
    assert fields_of(cls) == set(names)

    class Sub(cls):  # as Domain and EventAttributes subclass them, with fields of their own
        __slots__ = ("extra", "__weakref__")

    obj = Sub()
    for name in names:
        with pytest.raises(AttributeError, match=name):  # (PyPy words it as the bare name)
            getattr(obj, name)
        assert getattr(obj, name, "unset") == "unset"
    values = {name: object() for name in names}
    for name, value in values.items():
        setattr(obj, name, value)
    obj.extra = 5
    assert {name: getattr(obj, name) for name in names} == values and obj.extra == 5
    delattr(obj, names[0])
    with pytest.raises(AttributeError, match=names[0]):
        delattr(obj, names[0])
    assert getattr(obj, names[0], "unset") == "unset" and getattr(obj, names[1]) is values[names[1]]


@pytest.mark.parametrize("which", ["DomainBase", "EventAttributesBase"])
def test_a_reference_cycle_through_the_fields_is_collected(bases, which):
    cls = getattr(bases, which)

    class Sub(cls):
        __slots__ = ("__weakref__",)

    obj = Sub()
    field = _bases.DOMAIN_FIELDS[1] if which == "DomainBase" else "_domain"
    setattr(obj, field, [obj])  # obj -> list -> obj
    alive = weakref.ref(obj)
    del obj
    gc.collect()
    assert alive() is None


def test_caches_are_six_dicts_that_cannot_be_rebound(bases):
    caches = bases.caches
    assert isinstance(caches, bases.Caches)
    dicts = [getattr(caches, name) for name in _bases.CACHE_NAMES]
    assert all(type(d) is dict for d in dicts) and len({id(d) for d in dicts}) == len(dicts)
    assert all(getattr(caches, name) is d for name, d in zip(_bases.CACHE_NAMES, dicts))  # the same dict each time
    for name in _bases.CACHE_NAMES:
        with pytest.raises(AttributeError):
            setattr(caches, name, {})
    assert {name for name in dir(bases.Caches) if not name.startswith("_")} >= set(_bases.CACHE_NAMES)


def test_the_package_runs_on_the_bases_in_use():
    d = nvtx.get_domain("bases")
    assert isinstance(d, _bases.DomainBase) and isinstance(d.get_event_attributes("m"), _bases.EventAttributesBase)
    caches = _bases.caches
    assert _domain._domains is caches.domains and caches.domains["bases"] is d
    assert (_ranges._slot_cache, _ranges._blue_slots, _ranges._uncoloured_slots) == (
        caches.slot, caches.blue_slots, caches.uncoloured_slots)
    assert _ranges._slot_cache is caches.slot and _annotate._cache is caches.annotate
    assert _annotate._by_message is caches.annotate_by_message
    expected = "c" if _accel.speedups is not None else "python"
    assert (type(caches).__module__ == "nvtx_cffi._speedups") == (expected == "c")


def test_event_attributes_pickle_as_what_made_them():
    with recorder.capture() as got:
        d = nvtx.get_domain("pickled attributes")
        attributes = d.get_event_attributes("again", color="red", category="io", payload=7)
        again = pickle.loads(pickle.dumps(attributes))
        d.mark(again)
    assert again is not attributes and again.domain is d
    assert (again.message, again.color, again.category, again.payload) == ("again", "red", "io", 7)
    (mark,) = [e for e in got if e.kind == "mark"]
    assert (mark.message, mark.color, mark.domain, mark.payload) == ("again", 0xFF0000, "pickled attributes", 7)
    assert mark.category == d.get_category_id("io")


def stub_names(tree: ast.Module):
    """{class name: its declared names} and the module-level names of a .pyi."""
    classes, module = {}, set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = {n.target.id if isinstance(n, ast.AnnAssign) else n.name for n in node.body
                                  if isinstance(n, (ast.AnnAssign, ast.FunctionDef))}
            module.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            module.add(node.target.id)
        elif isinstance(node, ast.FunctionDef):
            module.add(node.name)
    return classes, module


def test_the_stub_declares_what_the_c_module_has():
    speedups = _accel.speedups
    if speedups is None:
        pytest.skip(f"the accelerator is not in use here: {_accel.why_not}")
    with open(os.path.join(os.path.dirname(_accel.__file__), "_speedups.pyi")) as f:
        classes, module = stub_names(ast.parse(f.read()))
    # (`active` is set by install(), at NVTX's first call: the tests' first event made it)
    assert module == {name for name in dir(speedups) if not name.startswith("__")} | {"active"}
    for name, declared in classes.items():
        cls = getattr(speedups, name)
        has = {n for n in vars(cls) if not n.startswith("__") or n in ("__enter__", "__exit__", "__call__")}
        if name == "function":
            has |= {"__wrapped__"}  # (an instance attribute: functools.wraps metadata)
        assert declared == has, name
