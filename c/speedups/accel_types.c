/* accel_types.c - the state the fast paths share with the Python code, in types C owns (part of
 * nvtx_cffi._speedups).
 *
 *   DomainBase           the fields of a Domain the fast paths read (_index, _by_keywords) and its
 *                        pop_range method; nvtx_cffi.Domain subclasses it
 *   EventAttributesBase  the fields of EventAttributes (_domain ... _shared), which the fast paths
 *                        read and copy; nvtx_cffi.EventAttributes subclasses it
 *   Caches               the caches of prepared calls that the fast paths read and their Python
 *                        twins fill: one instance, the module's `caches`
 *
 * Their Python twins (nvtx_cffi/_bases.py) are the reference implementation: PyPy, free-threaded
 * builds and NVTX_CFFI_PURE_PYTHON=1 use them, and one test fixture runs both. The fast paths read
 * these structs' fields, never a Python class's __slots__ or a module's dict: the layout the two
 * languages share is declared here and in _bases.py, nowhere else.
 */
#include "accel.h"

/* ---- DomainBase ----------------------------------------------------------------------------- */

static int domain_base_traverse(PyObject *op, visitproc visit, void *arg)
{
    domain_base_object *self = (domain_base_object *)op;
    Py_VISIT(self->index);
    Py_VISIT(self->by_keywords);
    return 0;
}

static int domain_base_clear(PyObject *op)
{
    domain_base_object *self = (domain_base_object *)op;
    Py_CLEAR(self->index);
    Py_CLEAR(self->by_keywords);
    return 0;
}

static void domain_base_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    domain_base_clear(op);
    Py_TYPE(op)->tp_free(op);
}

/* Domain.pop_range takes nothing but self, so it is an ordinary C method (CPython's own argument
 * check): the interpreter calls those without a bound object and, from 3.11, through a
 * specialised instruction. */
static PyObject *domain_base_pop(PyObject *self, PyObject *unused)
{
    (void)unused;
    int index = domain_index_of(self);
    if (index < 0) {
        PyErr_SetString(PyExc_AttributeError, "this Domain has no index (not made by get_domain)");
        return NULL;
    }
    if (!active) /* (no tool, or NVTX_DISABLE: no NVTX call, which could load a tool) */
        Py_RETURN_NONE;
    nvtxcffi_shim.pop(index);
    RETURN_NONE_AFTER_NVTX();
}

static PyMethodDef domain_base_methods[] = {
    {"pop_range", domain_base_pop, METH_NOARGS,
     "pop_range($self, /)\n--\n\nClose this thread's innermost range of this domain (nothing pushed: the tool "
     "ignores it)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef domain_base_members[] = {
    {"_index", T_OBJECT_EX, offsetof(domain_base_object, index), 0, "The shim's index of this NVTX domain."},
    {"_by_keywords", T_OBJECT_EX, offsetof(domain_base_object, by_keywords), 0,
     "(message, color, category) -> the EventAttributes prepared for those keywords."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject domain_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.DomainBase",
    .tp_basicsize = sizeof(domain_base_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "C base of nvtx_cffi.Domain: the fields the fast paths read, and pop_range.",
    .tp_new = PyType_GenericNew,
    .tp_traverse = domain_base_traverse,
    .tp_clear = domain_base_clear,
    .tp_dealloc = domain_base_dealloc,
    .tp_methods = domain_base_methods,
    .tp_members = domain_base_members,
};

/* ---- EventAttributesBase -------------------------------------------------------------------- */

static int attributes_base_traverse(PyObject *op, visitproc visit, void *arg)
{
    for (int i = 0; i < ATTR_COUNT; i++)
        Py_VISIT(((attributes_base_object *)op)->field[i]);
    return 0;
}

static int attributes_base_clear(PyObject *op)
{
    for (int i = 0; i < ATTR_COUNT; i++)
        Py_CLEAR(((attributes_base_object *)op)->field[i]);
    return 0;
}

static void attributes_base_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    attributes_base_clear(op);
    Py_TYPE(op)->tp_free(op);
}

#define ATTRIBUTE_MEMBER(name, at, doc) \
    {name, T_OBJECT_EX, offsetof(attributes_base_object, field) + (at) * sizeof(PyObject *), 0, doc}

static PyMemberDef attributes_base_members[] = {
    ATTRIBUTE_MEMBER("_domain", ATTR_DOMAIN, "The Domain."),
    ATTRIBUTE_MEMBER("_message", ATTR_MESSAGE, "The message as given."),
    ATTRIBUTE_MEMBER("_color", ATTR_COLOR, "The colour as given."),
    ATTRIBUTE_MEMBER("_category", ATTR_CATEGORY, "The category as given."),
    ATTRIBUTE_MEMBER("_payload", ATTR_PAYLOAD, "The payload as given."),
    ATTRIBUTE_MEMBER("_slot", ATTR_SLOT, "The shim's slot of (message, colour, category), or -1."),
    ATTRIBUTE_MEMBER("_fields", ATTR_FIELDS, "The payload's (kind, int value, float value)."),
    ATTRIBUTE_MEMBER("_inline", ATTR_INLINE, "(text, ARGB, category id) of a message sent with its call, or None."),
    ATTRIBUTE_MEMBER("_fast", ATTR_FAST, "The slot when one C call with no payload suffices, else -1."),
    ATTRIBUTE_MEMBER("_shared", ATTR_SHARED, "Set on an annotate object's attributes (they cannot change)."),
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject attributes_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.EventAttributesBase",
    .tp_basicsize = sizeof(attributes_base_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "C base of nvtx_cffi.EventAttributes: its fields, which the fast paths read and copy.",
    .tp_new = PyType_GenericNew,
    .tp_traverse = attributes_base_traverse,
    .tp_clear = attributes_base_clear,
    .tp_dealloc = attributes_base_dealloc,
    .tp_members = attributes_base_members,
};

/* ---- Caches: one instance, for the process -------------------------------------------------- */

#define CACHE_MEMBER(name, field, doc) {name, T_OBJECT, offsetof(caches_object, field), READONLY, doc}

static PyMemberDef caches_members[] = {
    CACHE_MEMBER("annotate_by_message", annotate_by_message, "message -> annotate object of that message alone."),
    CACHE_MEMBER("annotate", annotate, "(cls, message, color, domain, category, payload, payload type) -> annotate."),
    CACHE_MEMBER("slot", slot, "(message, color, domain, category) -> slot of a module-level call."),
    CACHE_MEMBER("blue_slots", blue_slots, "message -> slot of push_range/mark(message) (default colour)."),
    CACHE_MEMBER("uncoloured_slots", uncoloured_slots, "message -> slot of start_range(message) (no colour)."),
    CACHE_MEMBER("domains", domains, "name -> Domain (None: the default domain)."),
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject caches_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.Caches",
    .tp_basicsize = sizeof(caches_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "The caches of prepared calls, read by the fast paths and filled by their Python twins "
              "(bounded by them: nvtx_cffi._domain.make_room). One instance: nvtx_cffi._speedups.caches.",
    .tp_members = caches_members,
};

caches_object *caches; /* the one instance: lives as long as the process */

/* ---- the C methods of these bases (and CounterBase's), as methods of their Python subclasses -- */

PyDoc_STRVAR(method_for_doc,
"method_for(cls, name)\n--\n\n"
"The C method ``name`` that ``cls`` inherits from a C base (DomainBase.pop_range, CounterBase.sample, ...), as a "
"method descriptor of ``cls`` itself, to set on it.");

/* CPython 3.11+'s specialised calls of a C method (CALL_NO_KW_METHOD_DESCRIPTOR_NOARGS and kin)
 * require `self` to be exactly of the descriptor's type: on the class users get (Domain,
 * Int64Counter, ...), `d.pop_range()` takes that path, where the descriptor inherited from the C
 * base leaves the call unspecialised (~15 ns more a call). */
static PyObject *method_for(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "method_for(cls, name)");
        return NULL;
    }
    PyObject *found = PyObject_GetAttr(args[0], args[1]);
    if (found == NULL)
        return NULL;
    PyTypeObject *owner = Py_IS_TYPE(found, &PyMethodDescr_Type) ? PyDescr_TYPE(found) : NULL;
    if (owner == NULL || (owner->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_Format(PyExc_TypeError, "method_for: %R of %R is not a C method of a C base", args[1], args[0]);
        Py_DECREF(found);
        return NULL;
    }
    PyObject *method = PyDescr_NewMethod((PyTypeObject *)args[0], ((PyMethodDescrObject *)found)->d_method);
    Py_DECREF(found);
    return method;
}

static PyMethodDef types_functions[] = {
    {"method_for", FUNC_CAST(method_for), METH_FASTCALL, method_for_doc},
    {NULL, NULL, 0, NULL},
};

int accel_types_init(PyObject *module)
{
    if (PyType_Ready(&domain_base_type) < 0 || PyType_Ready(&attributes_base_type) < 0
        || PyType_Ready(&caches_type) < 0)
        return -1;
    if (caches == NULL) {
        caches_object *made = PyObject_New(caches_object, &caches_type);
        if (made == NULL)
            return -1;
        PyObject **dicts[] = {&made->annotate_by_message, &made->annotate, &made->slot, &made->blue_slots,
                              &made->uncoloured_slots, &made->domains};
        for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++)
            *dicts[i] = NULL;
        for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
            if ((*dicts[i] = PyDict_New()) == NULL) {
                for (size_t j = 0; j < i; j++)
                    Py_DECREF(*dicts[j]);
                PyObject_Free(made);
                return -1;
            }
        }
        caches = made;
    }
    if (PyModule_AddObjectRef(module, "DomainBase", (PyObject *)&domain_base_type) < 0
        || PyModule_AddObjectRef(module, "EventAttributesBase", (PyObject *)&attributes_base_type) < 0
        || PyModule_AddObjectRef(module, "Caches", (PyObject *)&caches_type) < 0
        || PyModule_AddObjectRef(module, "caches", (PyObject *)caches) < 0)
        return -1;
    return PyModule_AddFunctions(module, types_functions);
}
