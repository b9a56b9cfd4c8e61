/* accel.c - CPython C-API fast paths for nvtx_cffi's hottest calls (part of nvtx_cffi._speedups).
 *
 * Why: after the CFFI work (keep_gil.h, slot caches) what remains of a call's cost is CPython
 * running Python frames (an empty __enter__/__exit__ pair is ~80 ns, a 5-default function ~20 ns).
 * Only C callables avoid that. This file is compiled into the optional module nvtx_cffi._speedups
 * (c/speedups.c), not into the CFFI shim: it reaches the shim's slot and domain tables through the
 * shim's function table (nvtxcffi_shim, c/nvtx_api.h), bound by nvtx_cffi/_accel.py.
 *
 * How Python reaches it: nvtx_cffi/_accel.py imports nvtx_cffi._speedups, binds it to the shim and
 * calls install(active) once; then the setup functions below receive the Python caches and twins.
 *
 * What it holds (all opt-in from Python, which passes in its own caches and Python twins):
 *   AnnotateBase  base class of nvtx_cffi.annotate: C __enter__/__exit__ (push a slot / pop a
 *                 domain), plus a vectorcall for the annotate class itself that answers repeated
 *                 annotate(...) calls from annotate's own instance caches (a miss runs
 *                 annotate.__new__, in Python).
 *   function      a callable with functools.wraps metadata (a __dict__) whose body is C: either a
 *                 decorated function (push, call, pop even on error) or a module-level/Domain call
 *                 (push_range, mark, ...) that answers from the Python caches and otherwise calls
 *                 its Python twin (__wrapped__) with the same arguments, so first use, payloads and
 *                 every error message stay exactly those of the Python code.
 * The Python implementation stays complete: PyPy, NVTX_CFFI_PURE_PYTHON=1 and installs without
 * this module use it alone.
 *
 * Thread safety: every entry point runs with the GIL held (they are Python callables; setup.py
 * does not build this module for free-threaded CPython), and the C tables are lock-free to read.
 * State is process-wide (one interpreter; the module is single-phase).
 */
#include "speedups.h"

#include <structmember.h>

/* ---- process state, set once by the setup functions below ------------------------------------ */
static int active; /* _state.ACTIVE: a tool is attached and NVTX_DISABLE is unset */
static int installed; /* install() ran: `active` is decided for the process */

static PyTypeObject *annotate_cls;     /* nvtx_cffi.annotate (a Python subclass of AnnotateBase) */
static PyObject *annotate_by_message;  /* _annotate._by_message: message -> annotate */
static PyObject *annotate_cache;       /* _annotate._cache: (cls, 5 args, payload type) -> annotate */

static PyObject *default_color;     /* _ranges._BLUE, compared by identity as Python does */
static PyObject *blue_slots;        /* _ranges._blue_slots: message -> slot */
static PyObject *uncoloured_slots;  /* _ranges._uncoloured_slots: message -> slot */
static PyObject *slot_cache;        /* _ranges._slot_cache: (message, color, domain, category) -> slot */

static PyTypeObject *domain_cls;      /* nvtx_cffi.Domain */
static PyTypeObject *attributes_cls;  /* nvtx_cffi.EventAttributes */
static PyObject *domains;             /* _domain._domains: name -> Domain */
static Py_ssize_t domain_index_offset = -1;   /* where a Domain keeps _index (a __slots__ member) */
static Py_ssize_t attributes_fast_offset = -1; /* where EventAttributes keeps _fast */
static Py_ssize_t attributes_domain_offset = -1; /* where EventAttributes keeps _domain */
static Py_ssize_t domain_keywords_offset = -1; /* where a Domain keeps _by_keywords */
static PyObject *payload_attributes; /* _annotate._payload_attributes(template, payload) */
static PyObject *payload_check;      /* _payload.payload_fields(payload): raises/warns for bad payloads */
static PyObject *payload_emit;       /* _payload.emit(op, slot, domain_index, inline, payload): a binary payload */

/* An annotate object's payload_kind for an array sent by payload_emit at __enter__ (the value of
 * _payload.KIND_EXT; the shim's NVTXCFFI_PAYLOAD_* kinds are 0..3). */
#define PAYLOAD_ARRAY 100

static PyObject *str_emit;  /* "_emit" */
static PyObject *str_dtype; /* "dtype" */
static PyObject *op_push;   /* NVTXCFFI_OP_PUSH as an int object */

/* Parameter names (interned: keyword names from call sites are usually the same objects). */
static PyObject *range_params[5];   /* message, color, domain, category, payload */
static PyObject *pop_params[1];     /* domain */
static PyObject *end_params[1];     /* range_id */
static PyObject *domain_params[4];  /* message, color, category, payload (Domain keyword calls) */

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Bind vectorcall arguments to the positional-or-keyword parameters names[0..n); the first
 * `required` must be given. Unbound ones are NULL in out. Returns 1 when bound, 0 when the call
 * does not fit (too many, unknown, repeated or missing arguments): callers then call the Python
 * twin, which raises exactly the error Python raises. */
/* The parameter index of each keyword name, per (parameter list, kwnames tuple) seen: a call site
 * passes the same kwnames tuple (a constant of its code) every time. Direct-mapped; holds a
 * reference to each tuple, so an address is not reused while mapped. */
#define BOUND_KWNAMES 64 /* a power of two */
static struct {
    PyObject *kwnames; /* strong reference, or NULL */
    PyObject **names;
    signed char map[8];
} bound_kwnames[BOUND_KWNAMES];

static int bind(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **names, int n,
                int required, PyObject **out)
{
    if (nargs > n)
        return 0;
    for (int i = 0; i < n; i++)
        out[i] = i < nargs ? args[i] : NULL;
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        size_t at = (((uintptr_t)kwnames >> 4) ^ ((uintptr_t)names >> 3)) & (BOUND_KWNAMES - 1);
        if (bound_kwnames[at].kwnames == kwnames && bound_kwnames[at].names == names) {
            const signed char *map = bound_kwnames[at].map;
            for (Py_ssize_t k = 0; k < nkw; k++) {
                if (out[map[k]] != NULL) /* also given by position */
                    return 0;
                out[map[k]] = args[nargs + k];
            }
            goto check_required;
        }
        signed char map[8];
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            for (int i = 0; i < n && found < 0; i++)
                if (key == names[i])
                    found = i;
            for (int i = 0; i < n && found < 0; i++)
                if (PyUnicode_Compare(key, names[i]) == 0)
                    found = i;
            if (found < 0 || out[found] != NULL)
                return 0;
            out[found] = args[nargs + k];
            if (k < 8)
                map[k] = (signed char)found;
        }
        if (nkw <= 8) {
            PyObject *old = bound_kwnames[at].kwnames;
            Py_INCREF(kwnames);
            bound_kwnames[at].kwnames = kwnames;
            bound_kwnames[at].names = names;
            memcpy(bound_kwnames[at].map, map, (size_t)nkw);
            Py_XDECREF(old); /* a tuple of str: no code runs */
        }
    }
check_required:
    for (int i = 0; i < required; i++)
        if (out[i] == NULL)
            return 0;
    return 1;
}

/* dict[key] as Python's `try: d[key] except (KeyError, TypeError):` sees it: 1 found (*value
 * borrowed), 0 absent or unhashable, -1 another error (raised). */
static int lookup(PyObject *dict, PyObject *key, PyObject **value)
{
    *value = PyDict_GetItemWithError(dict, key);
    if (*value != NULL)
        return 1;
    if (!PyErr_Occurred())
        return 0;
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* ---- messages by text: an f-string message is a new str object on every call, equal to one seen
 * before. Its hash is not computed yet (CPython's siphash: ~140 instructions for a short one) and a
 * dict lookup by it costs ~150 more. A small direct-mapped table keyed by a cheap hash of the
 * characters gives the first str object seen with that text (a strong reference), so the identity
 * tables and the dicts (whose hash that object caches) answer an f-string as they answer a
 * constant. Only strs whose hash is not cached yet go through it: a constant's is, after its first
 * use. Bounded: CANON_COUNT entries of at most CANON_TEXT_MAX bytes; a colliding text replaces
 * the older one, which only costs the next such call the dict lookup again. */
#define CANON_COUNT 1024 /* a power of two */
#define CANON_TEXT_MAX 256
static struct {
    PyObject *str;    /* strong reference, or NULL */
    uint64_t hash;
    int message_slot; /* the slot of push_range(str)/mark(str), -1 not known yet */
} canon[CANON_COUNT];

static inline uint64_t text_hash(const unsigned char *p, Py_ssize_t n, int kind)
{
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ull ^ (uint64_t)kind;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8); /* one load */
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    /* the last bytes by fixed-size loads, overlapping what came before (equal texts still load
     * equal words; the length is in h): no loop, no memcpy call of a variable length */
    uint64_t tail = 0;
    if (i < n) {
        if (n >= 8) {
            memcpy(&tail, p + n - 8, 8);
        } else if (n >= 4) {
            uint32_t lo, hi;
            memcpy(&lo, p, 4);
            memcpy(&hi, p + n - 4, 4);
            tail = (uint64_t)hi << 32 | lo;
        } else {
            tail = (uint64_t)p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16;
        }
    }
    /* a multiply carries a difference only upwards: mix both ways (MurmurHash3's finaliser), so
     * texts that differ in their last character differ in the bits that pick the entry */
    h ^= tail;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static inline size_t canon_at(uint64_t text_hash_)
{
    return (size_t)(text_hash_ >> 40) & (CANON_COUNT - 1);
}

/* `message` or the str of the same text seen first: a NEW reference, so that the caller may run
 * Python code while it holds it (a dict lookup's __eq__, a GC pass at an allocation, a payload
 * check): that code may call nvtx-cffi with another text that replaces this entry, which frees the
 * str the table held. *entry: its index in the table, or -1 when it does not go through it. */
static PyObject *canonical_entry(PyObject *message, int *entry)
{
    *entry = -1;
    /* the cached hash: a public field of the str's struct (no call, no private API) */
    if (!PyUnicode_CheckExact(message) || ((PyASCIIObject *)message)->hash != -1)
        return Py_NewRef(message);
#if PY_VERSION_HEX < 0x030C0000
    /* a legacy str (PyUnicode_FromUnicode(NULL, n), until 3.12) has no kind or data yet */
    if (!PyUnicode_IS_READY(message))
        return Py_NewRef(message);
#endif
    int kind = PyUnicode_KIND(message);
    Py_ssize_t length = PyUnicode_GET_LENGTH(message), nbytes = length * kind; /* the text exists: no overflow */
    if (nbytes > CANON_TEXT_MAX)
        return Py_NewRef(message);
    const void *data = PyUnicode_DATA(message);
    uint64_t h = text_hash(data, nbytes, kind);
    size_t at = canon_at(h);
    *entry = (int)at;
    PyObject *old = canon[at].str;
    if (old == message)
        return Py_NewRef(message);
    if (old != NULL && canon[at].hash == h && PyUnicode_KIND(old) == kind && PyUnicode_GET_LENGTH(old) == length
        && memcmp(PyUnicode_DATA(old), data, (size_t)nbytes) == 0)
        return Py_NewRef(old);
    Py_INCREF(message);
    canon[at].str = message;
    canon[at].hash = h;
    canon[at].message_slot = -1;
    Py_XDECREF(old); /* a str: no code runs */
    return Py_NewRef(message);
}

static inline PyObject *canonical_message(PyObject *message) /* a new reference */
{
    int entry;
    return canonical_entry(message, &entry);
}

PyDoc_STRVAR(canon_index_doc,
"_canon_index(text)\n--\n\n"
"The entry of the table of f-string texts that `text` maps to (tests: texts that share one).");

static PyObject *canon_index(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "_canon_index() takes a str, not %.200s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    Py_ssize_t nbytes = PyUnicode_GET_LENGTH(text) * kind;
    if (nbytes > CANON_TEXT_MAX)
        return PyLong_FromLong(-1);
    uint64_t h = text_hash(PyUnicode_DATA(text), nbytes, kind);
    return PyLong_FromSize_t(canon_at(h));
}

/* A cached slot number (the caches hold small non-negative ints); -1 when not usable. */
static int as_slot(PyObject *value)
{
    if (!PyLong_CheckExact(value))
        return -1;
    long slot = PyLong_AsLong(value);
    if (slot == -1 && PyErr_Occurred())
        PyErr_Clear(); /* too big for a long */
    return slot < 0 || slot > INT32_MAX ? -1 : (int)slot;
}

/* The object in a __slots__ member of a Python-level instance (NULL when unset). */
static inline PyObject *member_at(PyObject *obj, Py_ssize_t offset)
{
    return *(PyObject **)((char *)obj + offset);
}

/* The NVTX domain index of Domain `domain`, read from its _index slot; -1 when not available. */
static int domain_index_of(PyObject *domain)
{
    if (domain_index_offset < 0 || !Py_IS_TYPE(domain, domain_cls))
        return -1;
    PyObject *index = member_at(domain, domain_index_offset);
    return index == NULL ? -1 : as_slot(index);
}

/* The index of the domain *named* `name`, if it exists already; -1 otherwise (or unhashable). */
static int domain_index_by_name(PyObject *name)
{
    PyObject *domain;
    if (domains == NULL || !PyUnicode_CheckExact(name))
        return -1;
    if (lookup(domains, name, &domain) <= 0) {
        PyErr_Clear();
        return -1;
    }
    return domain_index_of(domain);
}

/* attributes._emit(OP_PUSH): the general push (payload or inline message). 0 or -1 (raised). */
static int emit_push(PyObject *attributes)
{
    if (attributes == NULL) {
        PyErr_SetString(PyExc_TypeError, "annotate object is not initialised");
        return -1;
    }
    PyObject *result = PyObject_CallMethodObjArgs(attributes, str_emit, op_push, NULL);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

static PyObject *new_range_id(uint64_t id, int domain_index)
{
    PyObject *rid = PyLong_FromUnsignedLongLong(id);
    if (rid == NULL)
        return NULL;
    PyObject *index = PyLong_FromLong(domain_index);
    if (index == NULL) {
        Py_DECREF(rid);
        return NULL;
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(rid);
        Py_DECREF(index);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, rid);
    PyTuple_SET_ITEM(pair, 1, index);
    return pair;
}

/* A per-call payload as the shim wants it (kind NVTXCFFI_PAYLOAD_*, int64 bits, double): 1 when
 * converted; 0 when it is not an exact int or float that fits (nothing raised): the Python twin then
 * converts it or raises, with its own messages. The payload is a value: nothing is kept. */
static int payload_c_general(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue);

static inline int payload_c(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue)
{
    long long small;
    if (small_int(payload, &small)) { /* step numbers, sizes: no call */
        *kind = NVTXCFFI_PAYLOAD_INT64;
        *ivalue = (int64_t)small;
        *fvalue = 0.0;
        return 1;
    }
    if (PyFloat_CheckExact(payload)) {
        *kind = NVTXCFFI_PAYLOAD_DOUBLE;
        *ivalue = 0;
        *fvalue = PyFloat_AS_DOUBLE(payload);
        return 1;
    }
    return payload_c_general(payload, kind, ivalue, fvalue);
}

/* Ints beyond one digit: int64, else the bits of a uint64. */
static int payload_c_general(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue)
{
    if (PyLong_CheckExact(payload)) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(payload, &overflow);
        if (overflow == 0 && !(value == -1 && PyErr_Occurred())) {
            *kind = NVTXCFFI_PAYLOAD_INT64;
            *ivalue = (int64_t)value;
            *fvalue = 0.0;
            return 1;
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(payload);
            if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
                *kind = NVTXCFFI_PAYLOAD_UINT64;
                *ivalue = (int64_t)u; /* the same bits, as _payload.payload_fields sends them */
                *fvalue = 0.0;
                return 1;
            }
        }
        PyErr_Clear();
        return 0;
    }
    return 0;
}

/* ---- array payloads ----------------------------------------------------------------------------
 * Without a tool nothing is sent, but annotate still checks its payload (bad ones fail as under a
 * profiler): _payload.fields_for checks a NumPy array by its dtype and tells these tables which
 * dtypes passed (array_dtype_checked). Any exact ndarray of one of those dtypes passes the check
 * (a 0-d one too: it is sent as binary with its dtype's scalar schema, as nvtx sends it), so C
 * carries it like an int payload without calling the check (~480 -> ~70 ns). With a tool, such an
 * array goes with the call's slot to _payload.emit, which the Python
 * paths call too (emit_array), skipping their frames and the attributes object. Bounded: the
 * first CHECKED_DTYPES dtypes seen, held alive, so an address is not reused while listed; later
 * ones take the Python path each call. */
#define CHECKED_DTYPES 32
static PyTypeObject *ndarray_type; /* numpy.ndarray (strong reference), once an array was checked */
static PyObject *checked_dtypes[CHECKED_DTYPES]; /* strong references */
static int checked_dtype_count;

static int array_checked(PyObject *payload)
{
    if (Py_TYPE(payload) != ndarray_type || ndarray_type == NULL)
        return 0;
    PyObject *dtype = PyObject_GetAttr(payload, str_dtype);
    if (dtype == NULL) {
        PyErr_Clear(); /* the check reports it */
        return 0;
    }
    int listed = 0;
    for (int i = 0; i < checked_dtype_count && !listed; i++)
        listed = checked_dtypes[i] == dtype;
    Py_DECREF(dtype);
    return listed;
}

PyDoc_STRVAR(array_dtype_checked_doc,
"array_dtype_checked(ndarray, dtype)\n--\n\n"
"``dtype`` passed _payload.check_dtype: an exact ``ndarray`` of it is a valid payload, which annotate "
"carries without checking it again when no tool listens, and which annotate, mark and push_range hand "
"to _payload.emit with their slot when one does. Bounded; later dtypes (and other array types) are ignored.");

/* _payload.emit(opcode, slot, domain_index, None, array): a push or mark of prepared slot `slot`
 * with an array payload (array_sendable), as the Python paths send it. 0, or -1 with an exception. */
static int emit_array(int opcode, int slot, int domain_index, PyObject *array)
{
    PyObject *op = PyLong_FromLong(opcode), *slot_ = PyLong_FromLong(slot), *index = PyLong_FromLong(domain_index);
    PyObject *result = NULL;
    if (op != NULL && slot_ != NULL && index != NULL) {
        PyObject *args[5] = {op, slot_, index, Py_None, array};
        result = PyObject_Vectorcall(payload_emit, args, 5, NULL);
    }
    Py_XDECREF(op);
    Py_XDECREF(slot_);
    Py_XDECREF(index);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* With a tool: an array_checked payload that __enter__ may send through payload_emit, as the
 * attributes would (0-d included: its dtype's scalar schema). */
static int array_sendable(PyObject *payload)
{
    return payload_emit != NULL && array_checked(payload);
}

static PyObject *array_dtype_checked(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "array_dtype_checked(ndarray, dtype)");
        return NULL;
    }
    if (ndarray_type != NULL && ndarray_type != (PyTypeObject *)args[0])
        Py_RETURN_NONE; /* one array type (the first named): others keep calling the check */
    for (int i = 0; i < checked_dtype_count; i++)
        if (checked_dtypes[i] == args[1])
            Py_RETURN_NONE;
    if (checked_dtype_count < CHECKED_DTYPES) {
        if (ndarray_type == NULL) {
            Py_INCREF(args[0]);
            ndarray_type = (PyTypeObject *)args[0];
        }
        Py_INCREF(args[1]);
        checked_dtypes[checked_dtype_count++] = args[1];
    }
    Py_RETURN_NONE;
}

/* ---- styles: what a call site passes besides the message and the payload, by identity ---------
 * A call site passes the same colour, domain and category objects on every call (constants of its
 * code), so these are matched by identity in a small direct-mapped table instead of building and
 * hashing an argument tuple. Each entry (a "style") maps messages to what the Python caches answer
 * for them (a slot number, or a cached annotate object), so f-string messages cost one dict
 * lookup. Identity stands for equality only for immutable objects: exact str, int, float and None
 * (and Domain objects, which live as long as the process). Only answers found in the Python caches
 * enter, and the payload never does. Bounded: STYLE_COUNT entries of at most STYLE_MESSAGES
 * messages; a colliding style replaces the older one. */
enum { STYLE_SLOT = 1, STYLE_ANNOTATE = 2, STYLE_DOMAIN = 3 };
#define STYLE_COUNT 256 /* a power of two */
#define STYLE_MESSAGES 4096

typedef struct {
    int kind;          /* STYLE_*, 0 when unused */
    int domain_index;  /* STYLE_SLOT: the index of the domain named key[1], -1 unknown */
    PyObject *key[3];  /* STYLE_SLOT/ANNOTATE: colour, domain, category; STYLE_DOMAIN: Domain, colour, category */
    PyObject *by_message;  /* dict: message -> answer */
} style_t;

static style_t styles[STYLE_COUNT];

static inline int immutable_key(PyObject *o)
{
    return o == Py_None || PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o);
}

/* Whether a cache keyed by equality may answer for colour or category `o` (nvtx_cffi/_validate.py's
 * keyable, the same rule): True == 1 == 1.0, yet a bool or a float colour is an error. None, an
 * exact str, an integer-like that is not a bool, and 3- or 4-tuples of exact ints and floats only;
 * anything else takes the validating path. */
static int keyable(PyObject *o)
{
    if (o == Py_None || PyUnicode_CheckExact(o) || PyLong_CheckExact(o))
        return 1;
    if (PyTuple_CheckExact(o)) {
        if (PyTuple_GET_SIZE(o) != 3 && PyTuple_GET_SIZE(o) != 4)
            return 0; /* other lengths are errors: not worth a lookup */
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) {
            PyObject *item = PyTuple_GET_ITEM(o, i);
            if (!PyLong_CheckExact(item) && !PyFloat_CheckExact(item))
                return 0;
        }
        return 1;
    }
    /* an integer-like (a NumPy integer): equal only to the int of its value, which means the same */
    if (PyBool_Check(o) || !PyIndex_Check(o))
        return 0;
    PyObject *value = PyNumber_Index(o);
    if (value == NULL) {
        PyErr_Clear(); /* the validating path calls it again and reports it */
        return 0;
    }
    Py_DECREF(value);
    return 1;
}

/* A hash of three objects' addresses (and a kind): the entry of a table keyed by their identity. */
static inline uint64_t identity_hash(int kind, PyObject *a, PyObject *b, PyObject *c)
{
    uint64_t h = (uint64_t)kind * 0x9E3779B97F4A7C15ull;
    h = (h ^ ((uintptr_t)a >> 4)) * 0xff51afd7ed558ccdull;
    h = (h ^ ((uintptr_t)b >> 4)) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ ((uintptr_t)c >> 4)) * 0xff51afd7ed558ccdull;
    return h >> 40;
}

static inline style_t *style_at(int kind, PyObject *a, PyObject *b, PyObject *c)
{
    return &styles[identity_hash(kind, a, b, c) & (STYLE_COUNT - 1)];
}

/* The answer (borrowed) for `message` in style (kind, a, b, c), or NULL (nothing raised); *style
 * is the matching entry or NULL. */
static PyObject *style_get(int kind, PyObject *a, PyObject *b, PyObject *c, PyObject *message, style_t **style)
{
    style_t *s = style_at(kind, a, b, c);
    *style = NULL;
    if (s->kind != kind || s->key[0] != a || s->key[1] != b || s->key[2] != c)
        return NULL;
    *style = s;
    if (message != Py_None && !PyUnicode_CheckExact(message))
        return NULL;
    PyObject *found = PyDict_GetItemWithError(s->by_message, message);
    if (found == NULL)
        PyErr_Clear(); /* exact str or None: only a memory error could be raised */
    return found;
}

/* Remember `answer` for `message` in style (kind, a, b, c); failures only skip the remembering. */
static void style_put(int kind, PyObject *a, PyObject *b, PyObject *c, int domain_index, PyObject *message,
                      PyObject *answer)
{
    if ((kind != STYLE_DOMAIN && !immutable_key(a)) || !immutable_key(b) || !immutable_key(c)
        || (message != Py_None && !PyUnicode_CheckExact(message)))
        return;
    style_t *s = style_at(kind, a, b, c);
    if (s->kind != kind || s->key[0] != a || s->key[1] != b || s->key[2] != c) {
        PyObject *by_message = PyDict_New();
        if (by_message == NULL) {
            PyErr_Clear();
            return;
        }
        PyObject *old[4] = {s->key[0], s->key[1], s->key[2], s->by_message};
        Py_INCREF(a);
        Py_INCREF(b);
        Py_INCREF(c);
        s->kind = kind;
        s->domain_index = domain_index;
        s->key[0] = a;
        s->key[1] = b;
        s->key[2] = c;
        s->by_message = by_message;
        for (int i = 0; i < 4; i++) /* strs, ints, Domains and a dict of cached objects: no code runs */
            Py_XDECREF(old[i]);
    }
    /* full: start again (as the Python caches do), so that a message met later is remembered too;
     * what it drops is held by the Python caches or is an annotate object, an EventAttributes or an
     * int: no Python code runs */
    if (PyDict_GET_SIZE(s->by_message) >= STYLE_MESSAGES)
        PyDict_Clear(s->by_message);
    if (PyDict_SetItem(s->by_message, message, answer) < 0)
        PyErr_Clear();
}

/* ---- first sight: a message met for the first time goes with its call ----------------------
 * nvtx_cffi/_domain.py's FirstSight, in C: the module-level calls and annotate() send a message
 * with the call for its first NVTXCFFI_PREPARE_AT - 1 calls (the shim registers its text with NVTX
 * once, as nvtx 0.2.16 does, and keeps the handle; no C slot, nothing cached) and leave its
 * preparation to its NVTXCFFI_PREPARE_AT-th call, which takes the Python path. A stream of messages
 * that never repeat (f"request {n}"), or that come a few times each, then costs a table probe and
 * one NVTX registration and event per message, not a dozen Python frames; a preparation (~4 us of
 * Python) is paid by a message met often enough for its prepared calls to win it back.
 * What C has met is a table of text hashes in 4-way buckets, each with how often it was met in its
 * low bits (not the Python dict: 65536 strs kept alive cost a cache miss or two per probe, and
 * ~4 MB); a message C has met often enough goes down the Python path, which then counts it as met
 * that often in the FirstSight's own table (put there by C through FirstSight.met, so that the
 * Python path prepares it rather than sending it with its call once more). A bucket holds the last
 * 4 hashes that fell in it (a few messages that come round again and share a bucket are still told
 * apart), and the table as many as the Python one holds before it starts again: a message that
 * comes back after fewer than ~65536 others keeps its count, as on the Python path (after more, both
 * may have forgotten it: it is counted from 1 again, its registration kept by the shim). A hash
 * shared by two texts only changes which call prepares a message. */
#define SEEN_COUNT_BITS 6 /* the low bits of an entry: how often it was met (1..prepare_at - 1) */
#define SEEN_COUNT_MASK ((UINT64_C(1) << SEEN_COUNT_BITS) - 1)
#if NVTXCFFI_PREPARE_AT_MAX - 1 > SEEN_COUNT_MASK || NVTXCFFI_PREPARE_AT < 2 || NVTXCFFI_PREPARE_AT > NVTXCFFI_PREPARE_AT_MAX
#error "NVTXCFFI_PREPARE_AT(_MAX) must be in [2, 2**SEEN_COUNT_BITS]"
#endif
static uint64_t prepare_at = NVTXCFFI_PREPARE_AT; /* _domain.PREPARE_AT, given by setup_first_sight */
static PyObject *ranges_sight;          /* _ranges._first_sight (a FirstSight) */
static PyObject *annotate_sight;        /* _annotate._first_sight */
static PyObject *str_met;                /* "met" (FirstSight.met) */
static PyObject *inline_style_of;       /* _domain._inline_style(color, domain, category) */
static PyObject *first_sight_attributes; /* _annotate._first_sight_attributes(annotate) */
static PyObject *first_sight_reused;     /* _annotate._first_sight_reused(annotate) -> cached? */
static PyObject *pop_default_function;  /* _annotate._pop_default: _close of a default-domain object */

#define SEEN_BUCKETS 16384 /* a power of two; 4 hashes each: 512 KiB, FirstSight's bound (65536) */
#define SEEN_WAYS 4
static uint64_t seen_hashes[SEEN_BUCKETS][SEEN_WAYS]; /* text hashes met (with domain and caller), 0 none */
enum { SEEN_RANGES = 1, SEEN_ANNOTATE = 2 };

#define INLINE_STYLES 64 /* a power of two */
static struct {
    PyObject *key[3]; /* colour, domain, category (strong references; exact str, int, float or None) */
    int domain_index;
    uint32_t argb, category;
} inline_styles[INLINE_STYLES];

/* (domain index, ARGB, category id) of colour/domain/category objects as _domain._inline_style
 * gives them: 1 found, 0 not here (an argument Python must check: the caller's Python path raises
 * what it must), -1 raised (not a bad argument: a memory error, an interrupt). */
static int inline_style(PyObject *color, PyObject *domain, PyObject *category, int *index, uint32_t *argb,
                        uint32_t *category_id)
{
    if (inline_style_of == NULL || !immutable_key(color) || !immutable_key(domain) || !immutable_key(category))
        return 0;
    size_t at = (size_t)identity_hash(1, color, domain, category) & (INLINE_STYLES - 1);
    if (inline_styles[at].key[0] != color || inline_styles[at].key[1] != domain
        || inline_styles[at].key[2] != category) {
        PyObject *style = PyObject_CallFunctionObjArgs(inline_style_of, color, domain, category, NULL);
        if (style == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError)
                && !PyErr_ExceptionMatches(PyExc_OverflowError))
                return -1;
            PyErr_Clear(); /* a bad argument: the Python path checks it again and raises it */
            return 0;
        }
        int i;
        unsigned int c, g;
        int parsed = PyArg_ParseTuple(style, "iII", &i, &c, &g);
        Py_DECREF(style);
        if (!parsed)
            return -1;
        /* the call may have run code that filled this entry: replace what is there */
        PyObject *old[3] = {inline_styles[at].key[0], inline_styles[at].key[1], inline_styles[at].key[2]};
        inline_styles[at].key[0] = Py_NewRef(color);
        inline_styles[at].key[1] = Py_NewRef(domain);
        inline_styles[at].key[2] = Py_NewRef(category);
        inline_styles[at].domain_index = i;
        inline_styles[at].argb = c;
        inline_styles[at].category = g;
        for (int k = 0; k < 3; k++) /* strs, ints, floats: no code runs */
            Py_XDECREF(old[k]);
    }
    *index = inline_styles[at].domain_index;
    *argb = inline_styles[at].argb;
    *category_id = inline_styles[at].category;
    return 1;
}

/* The UTF-8 text NVTX gets for exact str `message` (alive while the str is), or NULL with nothing
 * raised when it cannot go (a NUL, a lone surrogate): the Python path raises its error. */
static const char *inline_text(PyObject *message, Py_ssize_t *size)
{
    const char *text = PyUnicode_AsUTF8AndSize(message, size); /* an ASCII str's own data: no copy */
    if (text == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return (Py_ssize_t)strlen(text) == *size ? text : NULL;
}

/* After a call into NVTX: a tool may run Python in its callbacks (NVIDIA's python test tool does)
 * and leave an exception set. The call then raises it: returning a value with it set would be
 * CPython's SystemError, and the next unrelated call would find it. */
#define TOOL_RAISED() (PyErr_Occurred() != NULL)
#define RETURN_NONE_AFTER_NVTX() return TOOL_RAISED() ? NULL : Py_NewRef(Py_None)

/* sight.met(key): FirstSight remembers `key` as met. 0 or -1 raised. */
static int first_seen(PyObject *sight, PyObject *key);

/* Whether C sends UTF-8 `text` (of `size` bytes) in domain `index` with its call: 1 yes, one of its
 * first prepare_at - 1 sights (now counted), 0 met that often (and now in `sight` too, so
 * that the Python path prepares it; `key`: its key there, made on demand: message or (message,
 * domain)), -1 raised. */
static int first_sight(int caller, const char *text, Py_ssize_t size, int index, PyObject *sight, PyObject *message,
                       PyObject *domain)
{
    uint64_t h = text_hash((const unsigned char *)text, size, 1) ^ ((uint64_t)(unsigned)index << 8 | (uint64_t)caller);
    h &= ~SEEN_COUNT_MASK; /* an entry: the hash with its count (>= 1; 0: an empty entry) */
    uint64_t *bucket = seen_hashes[(h >> 40) & (SEEN_BUCKETS - 1)];
    for (int way = 0; way < SEEN_WAYS; way++) {
        if (bucket[way] == 0 || (bucket[way] & ~SEEN_COUNT_MASK) != h)
            continue;
        uint64_t count = bucket[way] & SEEN_COUNT_MASK;
        if (count < prepare_at - 1) {
            bucket[way] = h | (count + 1);
            return 1;
        }
        PyObject *key = domain == Py_None ? Py_NewRef(message) : PyTuple_Pack(2, message, domain);
        if (key == NULL)
            return -1;
        int added = first_seen(sight, key);
        Py_DECREF(key);
        return added < 0 ? -1 : 0;
    }
    memmove(bucket + 1, bucket, (SEEN_WAYS - 1) * sizeof *bucket); /* the oldest goes */
    bucket[0] = h | 1;
    return 1;
}

static int first_seen(PyObject *sight, PyObject *key)
{
    PyObject *result = PyObject_CallMethodOneArg(sight, str_met, key);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* A module-level push_range/mark/start_range whose message (an exact str, held by the caller) is
 * met for the first time: sent inline (_ranges._slow's first branch). 1 sent (*result: None or
 * start_range's (id, domain)), 0 not for this path (the Python path decides), -1 raised. */
static int range_first_sight(int opcode, PyObject *message, PyObject *color, PyObject *domain, PyObject *category,
                             int kind, int64_t ivalue, double fvalue, PyObject **result)
{
    int index;
    uint32_t argb, category_id;
    if (ranges_sight == NULL || (domain != Py_None && !PyUnicode_CheckExact(domain)))
        return 0;
    int style = inline_style(color, domain, category, &index, &argb, &category_id);
    if (style <= 0)
        return style;
    Py_ssize_t size;
    const char *text = inline_text(message, &size);
    if (text == NULL)
        return 0;
    int first = first_sight(SEEN_RANGES, text, size, index, ranges_sight, message, domain);
    if (first <= 0)
        return first;
    uint64_t id = nvtxcffi_shim.emit(opcode, index, text, argb, category_id, kind, ivalue, fvalue);
    if (TOOL_RAISED())
        return -1;
    *result = opcode == NVTXCFFI_OP_START ? new_range_id(id, index) : Py_NewRef(Py_None);
    return *result == NULL ? -1 : 1;
}

/* ==== AnnotateBase ============================================================================= */

typedef struct {
    PyObject_HEAD
    PyObject *args;        /* _args: (message, color, domain, category, payload) as given */
    PyObject *attributes;  /* _attributes: the prepared EventAttributes */
    PyObject *close;       /* _close: what the pure-Python wrappers call to close the range */
    int slot;              /* _slot: the C slot when one push suffices, else -1 */
    int domain_index;      /* _domain_index */
    int shared;            /* held by annotate's cache (so alive until exit): may keep `bound` */
    PyObject *bound[2];    /* __enter__ and __exit__ bound to this object, made on first use */
    /* annotate(..., payload=value) made here: the cached object of the same arguments without the
     * payload (its slot, domain and close), and the value, converted once. args and attributes
     * are made from these when Python first asks for them. */
    PyObject *template_;
    PyObject *payload;
    /* templates: the object last made for a per-call payload, handed out again (with the new value)
     * while nothing but this template holds it (see annotate_with_payload) */
    PyObject *carrier;
    int is_carrier;
    int payload_kind;      /* NVTXCFFI_PAYLOAD_*, NONE when not made here */
    int payload_slot;
    int64_t payload_int;
    double payload_float;
    /* made at its message's first sight (annotate_first_sight): __enter__ sends args[0] inline
     * with this colour and category; attributes are made when Python first asks for them */
    int inline_message;
    uint32_t inline_argb, inline_category;
    /* _first_sight: 1 made at its message's first sight (here or by annotate.__new__), 2 entered
     * once since; entered again, the object is reused (a variable, `with a:` in a loop): it
     * prepares itself (_annotate._first_sight_reused), 0 */
    int first_sight;
} annotate_object;

static PyObject *annotate_base_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    (void)args;
    (void)kwargs;
    annotate_object *self = (annotate_object *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->slot = -1;
        self->domain_index = 0;
    }
    return (PyObject *)self;
}

static int annotate_base_traverse(PyObject *op, visitproc visit, void *arg)
{
    annotate_object *self = (annotate_object *)op;
    Py_VISIT(self->args);
    Py_VISIT(self->attributes);
    Py_VISIT(self->close);
    Py_VISIT(self->bound[0]);
    Py_VISIT(self->bound[1]);
    Py_VISIT(self->template_);
    Py_VISIT(self->payload);
    Py_VISIT(self->carrier);
    return 0;
}

static int annotate_base_clear(PyObject *op)
{
    annotate_object *self = (annotate_object *)op;
    Py_CLEAR(self->args);
    Py_CLEAR(self->attributes);
    Py_CLEAR(self->close);
    Py_CLEAR(self->bound[0]);
    Py_CLEAR(self->bound[1]);
    Py_CLEAR(self->template_);
    Py_CLEAR(self->payload);
    Py_CLEAR(self->carrier);
    return 0;
}

static void annotate_base_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    annotate_base_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *annotate_enter(PyObject *op, PyObject *unused)
{
    (void)unused;
    annotate_object *self = (annotate_object *)op;
    if (self->first_sight == 2 && first_sight_reused != NULL) {
        PyObject *cached = PyObject_CallOneArg(first_sight_reused, op); /* sets _attributes, _slot */
        int truth = cached == NULL ? -1 : PyObject_IsTrue(cached);
        Py_XDECREF(cached);
        if (truth < 0)
            return NULL;
        self->first_sight = 0;
        if (truth)
            self->shared = 1; /* now held by annotate's cache */
    } else if (self->first_sight == 1)
        self->first_sight = 2;
    if (active) {
        if (self->payload_kind == PAYLOAD_ARRAY) { /* what its attributes' _emit would send */
            if (emit_array(NVTXCFFI_OP_PUSH, self->payload_slot, self->domain_index, self->payload) < 0)
                return NULL;
        } else if (self->payload_kind != NVTXCFFI_PAYLOAD_NONE)
            nvtxcffi_shim.emit_slot(NVTXCFFI_OP_PUSH, self->payload_slot, self->payload_kind,
                                    self->payload_int, self->payload_float);
        else if (self->slot >= 0)
            nvtxcffi_shim.push(self->slot);
        else if (self->inline_message && self->args != NULL) {
            /* checked when made (no NUL, encodable): its UTF-8 is the str's own or cached in it;
             * args is the tuple made then (setting _args clears inline_message) */
            PyObject *args = Py_NewRef(self->args); /* (held: the shim may let other threads run
                                                     * while it waits for its registration lock) */
            const char *text = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(args, 0), NULL);
            if (text != NULL)
                nvtxcffi_shim.emit(NVTXCFFI_OP_PUSH, self->domain_index, text, self->inline_argb,
                                   self->inline_category, NVTXCFFI_PAYLOAD_NONE, 0, 0.0);
            Py_DECREF(args);
            if (text == NULL)
                return NULL;
        } else if (emit_push(self->attributes) < 0)
            return NULL;
        if (TOOL_RAISED())
            return NULL;
    }
    Py_INCREF(op);
    return op;
}

/* _args and _attributes: stored by annotate.__new__; made on first access for objects made by
 * annotate_with_payload (from the template's arguments, and by _annotate._payload_attributes). */
static PyObject *annotate_get_args(PyObject *op, void *closure)
{
    (void)closure;
    annotate_object *self = (annotate_object *)op;
    if (self->args == NULL && self->template_ != NULL) {
        PyObject *given = ((annotate_object *)self->template_)->args;
        if (given != NULL && PyTuple_CheckExact(given) && PyTuple_GET_SIZE(given) == 5) {
            PyObject *args = PyTuple_New(5);
            if (args == NULL)
                return NULL;
            for (int i = 0; i < 4; i++) {
                Py_INCREF(PyTuple_GET_ITEM(given, i));
                PyTuple_SET_ITEM(args, i, PyTuple_GET_ITEM(given, i));
            }
            Py_INCREF(self->payload);
            PyTuple_SET_ITEM(args, 4, self->payload);
            self->args = args;
        }
    }
    if (self->args == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_args");
        return NULL;
    }
    Py_INCREF(self->args);
    return self->args;
}

static PyObject *annotate_get_attributes(PyObject *op, void *closure)
{
    (void)closure;
    annotate_object *self = (annotate_object *)op;
    if (self->attributes == NULL && self->template_ != NULL && payload_attributes != NULL) {
        PyObject *made = PyObject_CallFunctionObjArgs(payload_attributes, self->template_, self->payload, NULL);
        if (made == NULL)
            return NULL;
        self->attributes = made;
    }
    if (self->attributes == NULL && self->inline_message && first_sight_attributes != NULL) {
        PyObject *made = PyObject_CallOneArg(first_sight_attributes, op);
        if (made == NULL)
            return NULL;
        Py_XSETREF(self->attributes, made); /* (the call ran Python code: set once, whoever won) */
    }
    if (self->attributes == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_attributes");
        return NULL;
    }
    Py_INCREF(self->attributes);
    return self->attributes;
}

static int annotate_set_field(PyObject *op, PyObject *value, void *closure)
{
    annotate_object *self = (annotate_object *)op;
    PyObject **field = closure == NULL ? &self->args : &self->attributes;
    if (self->inline_message && (closure == NULL || value != NULL)) {
        /* its own ways from now on (fields copied from another object, _subclass_init): new
         * _args do not change what is sent (as for any object), its attributes made now do */
        if (closure == NULL && self->attributes == NULL) {
            PyObject *made = annotate_get_attributes(op, NULL);
            if (made == NULL)
                return -1;
            Py_DECREF(made); /* (kept in self->attributes) */
        }
        self->inline_message = 0;
    }
    Py_XINCREF(value);
    Py_XSETREF(*field, value);
    return 0;
}

static PyGetSetDef annotate_base_getset[] = {
    {"_args", annotate_get_args, annotate_set_field, NULL, NULL},
    {"_attributes", annotate_get_attributes, annotate_set_field, NULL, (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *annotate_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__() takes exactly 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (active)
        nvtxcffi_shim.pop(((annotate_object *)op)->domain_index);
    RETURN_NONE_AFTER_NVTX();
}

/* annotate(..., payload=value) when annotate(...) without it is the cached `template` with a slot
 * (or no tool is attached): an object carrying the template's slot, domain and close, and the
 * value; Python sees _slot -1 (the general path, through _attributes, made on demand), so its own
 * paths send the payload too.
 *
 * The object is usually not new: each template keeps the last one it made (its carrier) and hands
 * it out again, with the new value, whenever nothing but the template holds it (its reference
 * count says so: the template's reference and the one of its cached bound __enter__, itself held by
 * nothing else). Then no code can tell it from a new object, and `with annotate("x", payload=i):`
 * allocates nothing per call. Held anywhere else (a variable, `with ... as a`, a pending
 * __aenter__, a bound method), a new object is made, as Python does. */
static int carrier_free(annotate_object *carrier)
{
    PyObject *enter = carrier->bound[0];
    return carrier->bound[1] == NULL && Py_REFCNT(carrier) == 1 + (enter != NULL)
           && (enter == NULL || Py_REFCNT(enter) == 1);
}

static PyObject *annotate_with_payload(annotate_object *template_, PyObject *payload, int kind, int64_t ivalue,
                                       double fvalue)
{
    annotate_object *self = (annotate_object *)template_->carrier;
    if (self != NULL && carrier_free(self)) {
        Py_CLEAR(self->args); /* made from the old value, if ever asked for */
        Py_CLEAR(self->attributes);
        Py_INCREF(payload);
        Py_SETREF(self->payload, payload);
        Py_INCREF(self); /* the caller's reference; the template keeps its own */
    } else {
        self = (annotate_object *)annotate_cls->tp_alloc(annotate_cls, 0);
        if (self == NULL)
            return NULL;
        self->slot = -1;
        self->domain_index = template_->domain_index;
        Py_XINCREF(template_->close);
        self->close = template_->close;
        Py_INCREF(template_);
        self->template_ = (PyObject *)template_;
        Py_INCREF(payload);
        self->payload = payload;
        self->payload_slot = template_->slot;
        if (template_->carrier == NULL && template_->shared) {
            self->is_carrier = 1;
            Py_INCREF(self);
            template_->carrier = (PyObject *)self;
        }
    }
    self->payload_kind = kind;
    self->payload_int = ivalue;
    self->payload_float = fvalue;
    return (PyObject *)self;
}

static PyMethodDef annotate_base_methods[] = {
    {"__enter__", annotate_enter, METH_NOARGS, "Open the range (push); returns self."},
    {"__exit__", FUNC_CAST(annotate_exit), METH_FASTCALL, "Close the range (pop its domain)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef annotate_base_members[] = {
    {"_close", T_OBJECT_EX, offsetof(annotate_object, close), 0, NULL},
    {"_slot", T_INT, offsetof(annotate_object, slot), 0, NULL},
    {"_domain_index", T_INT, offsetof(annotate_object, domain_index), 0, NULL},
    {"_first_sight", T_INT, offsetof(annotate_object, first_sight), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject annotate_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.AnnotateBase",
    .tp_basicsize = sizeof(annotate_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "C base of nvtx_cffi.annotate: __enter__/__exit__ and the instance fields.",
    .tp_new = annotate_base_new,
    .tp_traverse = annotate_base_traverse,
    .tp_clear = annotate_base_clear,
    .tp_dealloc = annotate_base_dealloc,
    .tp_methods = annotate_base_methods,
    .tp_members = annotate_base_members,
    .tp_getset = annotate_base_getset,
};

#if PY_VERSION_HEX < 0x030E0000
/* Up to 3.13, `with obj:` (BEFORE_WITH) looks __enter__ and __exit__ up on the type and binds
 * them to obj, which for C methods allocates two bound-method objects per `with` (~20 ns of its
 * ~55). annotate objects held by annotate's cache live as long as the process, so each keeps its
 * two bound methods (made on first use; the reference cycle this makes is never garbage) and this
 * descriptor, installed in AnnotateBase's dict over the two ordinary method descriptors, hands
 * them out. Anything else (class access, objects outside the cache) goes to the ordinary
 * descriptor. From 3.14 `with` loads them unbound (LOAD_SPECIAL) and calls the method
 * descriptors without binding, so this is not installed there (measured: the same cost). */
typedef struct {
    PyObject_HEAD
    PyObject *method;  /* the ordinary method descriptor */
    int which;         /* index in annotate_object.bound */
} special_object;

static void special_dealloc(PyObject *op)
{
    Py_XDECREF(((special_object *)op)->method);
    PyObject_Free(op);
}

static PyObject *special_get(PyObject *op, PyObject *obj, PyObject *type)
{
    special_object *self = (special_object *)op;
    if (self->which == 1 && obj != NULL && Py_TYPE(obj) == annotate_cls
        && ((annotate_object *)obj)->template_ != NULL
        && ((annotate_object *)((annotate_object *)obj)->template_)->shared)
        /* a per-call payload object: its __exit__ pops the template's domain, and the template's
         * bound __exit__ does exactly that (one allocation less per `with`) */
        obj = ((annotate_object *)obj)->template_;
    if (obj != NULL && (Py_TYPE(obj) == annotate_cls || PyObject_TypeCheck(obj, &annotate_base_type))
        && (((annotate_object *)obj)->shared || ((annotate_object *)obj)->is_carrier)) {
        PyObject **bound = &((annotate_object *)obj)->bound[self->which];
        if (*bound == NULL && (*bound = Py_TYPE(self->method)->tp_descr_get(self->method, obj, type)) == NULL)
            return NULL;
        Py_INCREF(*bound);
        return *bound;
    }
    return Py_TYPE(self->method)->tp_descr_get(self->method, obj, type);
}

static PyTypeObject special_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.special_method",
    .tp_basicsize = sizeof(special_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "__enter__/__exit__ of AnnotateBase: bound once per object.",
    .tp_dealloc = special_dealloc,
    .tp_descr_get = special_get,
};

/* Replace AnnotateBase's __enter__ and __exit__ by special descriptors (after PyType_Ready). */
static int install_special_methods(void)
{
    static const char *const names[2] = {"__enter__", "__exit__"};
    for (int i = 0; i < 2; i++) {
        PyObject *method = PyDict_GetItemString(annotate_base_type.tp_dict, names[i]);
        if (method == NULL) {
            PyErr_Format(PyExc_SystemError, "AnnotateBase has no %s", names[i]);
            return -1;
        }
        special_object *special = PyObject_New(special_object, &special_type);
        if (special == NULL)
            return -1;
        Py_INCREF(method);
        special->method = method;
        special->which = i;
        int failed = PyDict_SetItemString(annotate_base_type.tp_dict, names[i], (PyObject *)special);
        Py_DECREF(special);
        if (failed)
            return -1;
    }
    PyType_Modified(&annotate_base_type);
    return 0;
}
#endif

#if PY_VERSION_HEX >= 0x030E0000
/* From 3.14 `with obj:` loads __enter__ and __exit__ unbound (LOAD_SPECIAL) and calls the method
 * descriptors with obj as self; the specialised calls (CALL_METHOD_DESCRIPTOR_NOARGS, _FAST)
 * require obj to be exactly of the descriptor's type, so AnnotateBase's own descriptors, called
 * on an annotate object (a Python subclass), leave each call to the generic path (~11 ns of a ~38
 * ns `with`). The same two methods as descriptors of `cls` itself (where its dict has none of its
 * own) take the specialised paths; anything else (AnnotateBase, other subclasses) keeps the
 * inherited ones. */
static int own_special_methods(PyTypeObject *cls)
{
    PyObject *dict = PyType_GetDict(cls);
    if (dict == NULL)
        return -1;
    for (int i = 0; i < 2; i++) {
        PyMethodDef *def = &annotate_base_methods[i];
        PyObject *mine;
        int has = PyDict_GetItemStringRef(dict, def->ml_name, &mine);
        if (has < 0) {
            Py_DECREF(dict);
            return -1;
        }
        if (has > 0) {
            Py_DECREF(mine);
            continue; /* the class defines its own */
        }
        PyObject *descr = PyDescr_NewMethod(cls, def);
        int failed = descr == NULL || PyObject_SetAttrString((PyObject *)cls, def->ml_name, descr) < 0;
        Py_XDECREF(descr);
        if (failed) {
            Py_DECREF(dict);
            return -1;
        }
    }
    Py_DECREF(dict);
    return 0;
}
#endif

/* Calls of the annotate class itself: repeated annotate(...) calls are answered from annotate's
 * caches exactly as annotate.__new__ would answer them; anything else is the ordinary class call
 * (type.__call__ -> annotate.__new__ in Python). Installed as the class's tp_vectorcall, which
 * CPython uses for calls of a class object when set. Objects found in (or just put into) the
 * cache are marked shared. */
static PyObject *call_type_normally(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames)
{
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    PyObject *kwargs = NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        kwargs = PyDict_New();
        if (kwargs == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); k++) {
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]) < 0) {
                Py_DECREF(tuple);
                Py_DECREF(kwargs);
                return NULL;
            }
        }
    }
    PyObject *result = Py_TYPE(callable)->tp_call(callable, tuple, kwargs);
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

/* The cached annotate object for annotate(message, color, domain, category) with no payload: 1
 * found (*found borrowed), 0 not cached, -1 error. Plain calls use the message-only cache, others
 * a style (then the argument-tuple cache, whose answer the style remembers). `message` is a[0] or
 * the first str of its text (held by the caller: the lookups and PyTuple_Pack may run Python). */
static int annotate_template_of(PyObject *callable, PyObject *message, PyObject *const *a, PyObject **found)
{
    if (a[1] == Py_None && a[2] == Py_None && a[3] == Py_None)
        return lookup(annotate_by_message, message, found);
    style_t *style;
    *found = style_get(STYLE_ANNOTATE, a[1], a[2], a[3], message, &style);
    if (*found != NULL)
        return 1;
    if (!keyable(a[1]) || !keyable(a[3]))
        return 0; /* the class call validates */
    PyObject *key = PyTuple_Pack(7, callable, message, a[1], a[2], a[3], Py_None, (PyObject *)Py_TYPE(Py_None));
    if (key == NULL)
        return -1;
    int hit = lookup(annotate_cache, key, found);
    Py_DECREF(key);
    if (hit > 0 && Py_TYPE(*found) == annotate_cls)
        style_put(STYLE_ANNOTATE, a[1], a[2], a[3], 0, message, *found);
    return hit;
}

static int annotate_template(PyObject *callable, PyObject *const *a, PyObject **found)
{
    PyObject *message = canonical_message(a[0]); /* equal, so the same answer; cheaper to look up */
    int hit = annotate_template_of(callable, message, a, found);
    Py_DECREF(message); /* the table or a[0] still holds it (a str: no code runs) */
    return hit;
}

/* Call sites: the raw argument vector of a module-level push_range/mark/start_range call or a
 * Domain keyword call, by identity. A call site passes the same kwnames tuple (a constant of its
 * code) and the same message, colour, domain and category objects every time; only the payload
 * changes. An entry holds every argument of the vector but the payload (strong references: exact
 * str/int/float/None, and the Domain of a Domain call, so identity stands for equality and an
 * address is not reused while mapped) and answers the call with no binding and no second table:
 * it costs a hash of three words and a compare per argument. Keyed by (call, kwnames, nargs,
 * first argument), where call is SITE_MODULE or SITE_DOMAIN plus the opcode, SITE_POP or SITE_ANNOTATE;
 * filled once the same arguments were answered by the identity tables; the payload never enters. */
#define SITE_CALLS 512 /* a power of two */
#define SITE_MODULE 1
#define SITE_POP 6      /* pop_range(domain) */
#define SITE_ANNOTATE 8 /* the annotate class; keyed by the message's first str of its text */
#define SITE_DOMAIN 11
typedef struct site_entry site_entry;
struct site_entry {
    int opcode;             /* the call (SITE_* + opcode); 0: unused */
    int nargs, n;           /* positional count, vector length (1..5) */
    int payload_at;         /* the payload's index in the vector, -1 when not passed */
    int slot, domain_index; /* domain_index >= 0 */
    PyObject *kwnames;      /* strong reference, or NULL */
    PyObject *args[5];      /* strong references; NULL at payload_at */
    PyObject *object;       /* SITE_ANNOTATE: the annotate object without the payload (strong) */
};
static site_entry site_calls[SITE_CALLS];

static inline site_entry *site_at(int opcode, PyObject *kwnames, Py_ssize_t nargs, PyObject *first)
{
    uint64_t h = ((uint64_t)opcode << 8 | (uint64_t)nargs) * 0x9E3779B97F4A7C15ull;
    h = (h ^ ((uintptr_t)kwnames >> 4)) * 0xff51afd7ed558ccdull;
    h = (h ^ ((uintptr_t)first >> 4)) * 0xc4ceb9fe1a85ec53ull;
    return &site_calls[(h >> 40) & (SITE_CALLS - 1)];
}

/* The entry answering exactly this call, whose first argument is taken as `first` (args[0] or
 * what stands for it), or NULL. */
static inline const site_entry *site_find_first(int opcode, PyObject *first, PyObject *const *args, Py_ssize_t nargs,
                                                PyObject *kwnames)
{
    Py_ssize_t n = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    if (n == 0 || n > 5)
        return NULL;
    const site_entry *e = site_at(opcode, kwnames, nargs, first);
    if (e->opcode != opcode || e->kwnames != kwnames || e->nargs != nargs || e->n != n)
        return NULL;
    if (e->args[0] != first && e->payload_at != 0)
        return NULL;
    for (Py_ssize_t i = 1; i < n; i++)
        if (e->args[i] != args[i] && i != e->payload_at)
            return NULL;
    return e;
}

/* The entry answering exactly this call, or NULL. */
static inline const site_entry *site_find(int opcode, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0) == 0
               ? NULL : site_find_first(opcode, args[0], args, nargs, kwnames);
}

/* Remember this call, answered by slot/domain_index, when every argument but the payload (and
 * the Domain of a Domain call, args[0]) is an exact str/int/float/None and the payload is not the
 * first. `payload_given`: the call passed a payload (by position 4 of a module-level call, or by
 * keyword). */
static void site_put(int opcode, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int payload_given,
                     int slot, int domain_index, PyObject *object)
{
    Py_ssize_t n = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    if (n == 0 || n > 5 || domain_index < 0)
        return;
    int payload_at = -1;
    if (payload_given) {
        if (nargs == 5 && opcode < SITE_DOMAIN)
            payload_at = 4;
        for (Py_ssize_t k = 0; payload_at < 0 && k < n - nargs; k++)
            if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, k), range_params[4]) == 0)
                payload_at = (int)(nargs + k);
        if (payload_at <= 0) /* the payload first: the key would change every call */
            return;
    }
    PyErr_Clear(); /* PyUnicode_Compare of two str raises nothing, but be sure */
    for (Py_ssize_t i = opcode >= SITE_DOMAIN ? 1 : 0; i < n; i++)
        if (i != payload_at && !immutable_key(args[i]))
            return;
    site_entry *e = site_at(opcode, kwnames, nargs, args[0]);
    PyObject *old[7] = {e->kwnames, e->args[0], e->args[1], e->args[2], e->args[3], e->args[4], e->object};
    Py_XINCREF(kwnames);
    e->kwnames = kwnames;
    Py_XINCREF(object);
    e->object = object;
    for (Py_ssize_t i = 0; i < 5; i++) {
        PyObject *arg = i < n && i != payload_at ? args[i] : NULL;
        Py_XINCREF(arg);
        e->args[i] = arg;
    }
    e->opcode = opcode;
    e->nargs = (int)nargs;
    e->n = (int)n;
    e->payload_at = payload_at;
    e->slot = slot;
    e->domain_index = domain_index;
    for (int i = 0; i < 7; i++) /* strs, ints, floats, None, a tuple of str, an annotate: no code runs */
        Py_XDECREF(old[i]);
}

/* annotate(message) by the message's identity: a call site passes the same str constant every
 * time, and a direct-mapped table answers before canonical_message and the _by_message dict (~130
 * instructions of ~870 for `with annotate("x"):`). Only exact strs whose hash was cached before the
 * call enter (constants; an f-string is a new object every call and goes by its text). Both
 * references are held, so an address is not reused while mapped; _by_message only grows, so what
 * it answered stays its answer. Kept apart from the call-site table below, which would answer the
 * same call: through it `with annotate("x"):` costs ~60 instructions more (callgrind: 791 against
 * 731 above the loop), the margin of the >= 8x target without a tool. */
#define ANNOTATE_HOT 64 /* a power of two */
static struct {
    PyObject *message;  /* strong reference, or NULL */
    PyObject *annotate; /* strong reference: what _by_message answered for it */
} annotate_hot[ANNOTATE_HOT];

static inline size_t annotate_hot_at(PyObject *message)
{
    uint64_t h = ((uintptr_t)message >> 4) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 40) & (ANNOTATE_HOT - 1);
}

/* A str whose hash is cached: used before (a constant of some code, after its first use). */
static inline int hash_cached(PyObject *s)
{
    return PyUnicode_CheckExact(s) && ((PyASCIIObject *)s)->hash != -1;
}

static PyObject *annotate_class_call(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames, PyObject *first, int message_stable,
                                     int site_looked, const site_entry *site);

/* annotate(message, color, category) (no domain, no payload) whose message, an exact str, is met
 * for the first time (annotate.__new__'s first branch, in C): an object that sends the message
 * inline at each entry, neither prepared nor cached; its _attributes are made when asked for.
 * The message's second annotate() takes the Python path, which prepares and caches.
 * 1 made (*made), 0 not for this path, -1 raised. */
static int annotate_first_sight(PyObject *message, PyObject *color, PyObject *category, PyObject **made)
{
    int index;
    uint32_t argb, category_id;
    if (annotate_sight == NULL || pop_default_function == NULL || !PyUnicode_CheckExact(message))
        return 0;
    int style = inline_style(color, Py_None, category, &index, &argb, &category_id);
    if (style <= 0)
        return style;
    Py_ssize_t size;
    const char *text = index == 0 ? inline_text(message, &size) : NULL;
    if (text == NULL)
        return 0;
    int first = first_sight(SEEN_ANNOTATE, text, size, 0, annotate_sight, message, Py_None);
    if (first <= 0)
        return first;
    annotate_object *self = (annotate_object *)annotate_cls->tp_alloc(annotate_cls, 0);
    if (self == NULL)
        return -1;
    self->slot = -1;
    self->domain_index = 0;
    self->close = Py_NewRef(pop_default_function);
    self->inline_message = 1;
    self->first_sight = 1;
    self->inline_argb = argb;
    self->inline_category = category_id;
    self->args = PyTuple_Pack(5, message, color, Py_None, category, Py_None);
    if (self->args == NULL) {
        Py_DECREF(self);
        return -1;
    }
    *made = (PyObject *)self;
    return 1;
}

static PyObject *annotate_class_slow(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames, int site_looked, const site_entry *site);

/* The class call's hot paths, kept small (no stack frame to speak of): annotate(message) by the
 * message's address, and the call site table for calls whose first argument stands for itself (not
 * a str whose hash is not cached yet: annotate_class_slow looks those up by their text's first
 * str). Everything else, and a site whose payload is not None, goes on in annotate_class_slow,
 * with what the table answered. */
static PyObject *annotate_class_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                           PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (callable == (PyObject *)annotate_cls) {
        if (nargs == 1 && kwnames == NULL) {
            PyObject *message = args[0];
            size_t at = annotate_hot_at(message);
            if (annotate_hot[at].message == message) {
                PyObject *found = annotate_hot[at].annotate; /* marked shared when it entered */
                Py_INCREF(found);
                return found;
            }
        } else if (nargs == 0 || hash_cached(args[0]) || !PyUnicode_CheckExact(args[0])) {
            const site_entry *site = site_find(SITE_ANNOTATE, args, nargs, kwnames);
            if (site != NULL && (site->payload_at < 0 || args[site->payload_at] == Py_None)) {
                Py_INCREF(site->object);
                return site->object;
            }
            return annotate_class_slow(callable, args, nargs, kwnames, 1, site);
        }
    }
    return annotate_class_slow(callable, args, nargs, kwnames, 0, NULL);
}

/* annotate_class_vectorcall past its hot paths; site_looked: the call site table was asked (with
 * args[0] as the key's first word) and answered `site` (NULL: no entry). */
static Py_NO_INLINE PyObject *annotate_class_slow(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                                  PyObject *kwnames, int site_looked, const site_entry *site)
{
    PyObject *found;
    if (nargs == 1 && kwnames == NULL && callable == (PyObject *)annotate_cls) {
        /* annotate(message): the commonest call, not in the hot table */
        PyObject *message = args[0];
        size_t at = annotate_hot_at(message);
        int constant = hash_cached(message);
        PyObject *same = canonical_message(message);
        int hit = lookup(annotate_by_message, same, &found); /* may run a key's __eq__: `same` is held */
        Py_DECREF(same);                                     /* held by the table or the caller */
        if (hit < 0)
            return NULL;
        if (hit == 0) {
            int first = annotate_first_sight(message, Py_None, Py_None, &found);
            if (first != 0)
                return first > 0 ? found : NULL;
        }
        if (hit > 0 && Py_TYPE(found) == annotate_cls) {
            ((annotate_object *)found)->shared = 1;
            Py_INCREF(found);
            if (constant) {
                PyObject *old_message = annotate_hot[at].message, *old_annotate = annotate_hot[at].annotate;
                Py_INCREF(message);
                Py_INCREF(found);
                annotate_hot[at].message = message;
                annotate_hot[at].annotate = found;
                Py_XDECREF(old_message); /* a str, and an annotate also held by _cache: no code runs */
                Py_XDECREF(old_annotate);
            }
            return found;
        }
    }
    /* the call site table, keyed by the arguments as given with a positional message replaced by
     * the first str of its text (an f-string message is a new str each call): held until the end,
     * since Python code runs below (payload checks, the class call, GC at allocations) */
    PyObject *first = NULL;
    int message_stable = 1; /* key[0] is not a new str each call (nor one longer than canon takes) */
    if (callable == (PyObject *)annotate_cls && nargs >= 1 && !hash_cached(args[0]) && PyUnicode_CheckExact(args[0])) {
        int entry;
        first = canonical_entry(args[0], &entry);
        message_stable = entry >= 0;
    }
    PyObject *result = annotate_class_call(callable, args, nargs, kwnames, first, message_stable,
                                           site_looked && first == NULL, site);
    Py_XDECREF(first);
    return result;
}

/* annotate_class_vectorcall past its hot path; `first`: NULL, or a positional message's first str of
 * its text (a reference the caller holds). */
static PyObject *annotate_class_call(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames, PyObject *first, int message_stable,
                                     int site_looked, const site_entry *site)
{
    PyObject *a[5], *found;
    Py_ssize_t n = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *key[5] = {NULL, NULL, NULL, NULL, NULL};
    if (callable == (PyObject *)annotate_cls && n >= 1 && n <= 5) {
        /* looked up from args as given (no copy: GCC 16, Debian sid's, makes a copy of n <= 5 words a
         * byte loop whose word reload then waits on the byte stores, ~6 ns a call); the key
         * (first for args[0]) is made below, for site_put */
        if (!site_looked)
            site = site_find_first(SITE_ANNOTATE, first != NULL ? first : args[0], args, nargs, kwnames);
        if (site != NULL) {
            annotate_object *template_ = (annotate_object *)site->object;
            PyObject *payload = site->payload_at >= 0 ? args[site->payload_at] : Py_None;
            if (payload == Py_None) {
                Py_INCREF(template_);
                return (PyObject *)template_;
            }
            int kind;
            int64_t ivalue;
            double fvalue;
            if ((template_->slot >= 0 || !active) && payload_c(payload, &kind, &ivalue, &fvalue))
                return annotate_with_payload(template_, payload, kind, ivalue, fvalue);
            if (!active && array_checked(payload)) /* nothing is sent: as checked_later below */
                return annotate_with_payload(template_, payload, NVTXCFFI_PAYLOAD_NONE, 0, 0.0);
            if (active && template_->slot >= 0 && array_sendable(payload)) /* __enter__ sends it */
                return annotate_with_payload(template_, payload, PAYLOAD_ARRAY, 0, 0.0);
            /* other payloads: the general path below */
        }
    }
    if (callable == (PyObject *)annotate_cls && bind(args, nargs, kwnames, range_params, 5, 0, a)) {
        if (n >= 1 && n <= 5) {
            for (Py_ssize_t i = 0; i < n; i++)
                key[i] = args[i];
            if (first != NULL)
                key[0] = first;
        }
        /* an entry of the call site table only for a message that comes again as the same
         * object: a positional one by its text's first str, a keyword one if a constant */
        int keyable = n >= 1 && n <= 5
                      && (nargs >= 1 ? message_stable
                                     : a[0] == NULL || !PyUnicode_CheckExact(a[0]) || hash_cached(a[0]));
        int payload_given = a[4] != NULL;
        for (int i = 0; i < 5; i++)
            if (a[i] == NULL)
                a[i] = Py_None;
        int kind = NVTXCFFI_PAYLOAD_NONE;
        int64_t ivalue = 0;
        double fvalue = 0.0;
        int checked_later = 0; /* no tool, a payload other than an int or a float (an array...) */
        int array_later = 0;   /* a tool, an array of a checked dtype: sent by __enter__ */
        if (a[4] != Py_None && !payload_c(a[4], &kind, &ivalue, &fvalue)) {
            if (active && array_sendable(a[4]))
                array_later = 1;
            else if (active || payload_check == NULL)
                return call_type_normally(callable, args, nargs, kwnames); /* Python converts or raises */
            else
                checked_later = 1;
        }
        int hit = annotate_template(callable, a, &found);
        if (hit < 0)
            return NULL;
        if (hit > 0 && Py_TYPE(found) == annotate_cls) {
            annotate_object *template_ = (annotate_object *)found;
            template_->shared = 1;
            if (a[4] == Py_None) {
                if (keyable)
                    site_put(SITE_ANNOTATE, key, nargs, kwnames, payload_given, 0, 0, found);
                Py_INCREF(found);
                return found;
            }
            if (checked_later) {
                /* Nothing is sent without a tool: the payload is checked (errors and warnings as
                 * the Python path gives them) and carried as a value, like an int's. */
                if (!array_checked(a[4])) {
                    PyObject *fields = PyObject_CallOneArg(payload_check, a[4]);
                    if (fields == NULL)
                        return NULL;
                    Py_DECREF(fields);
                }
                if (keyable)
                    site_put(SITE_ANNOTATE, key, nargs, kwnames, 1, 0, 0, found);
                return annotate_with_payload(template_, a[4], NVTXCFFI_PAYLOAD_NONE, 0, 0.0);
            }
            if (array_later && template_->slot >= 0) {
                if (keyable) /* a hit checks the array and the slot again */
                    site_put(SITE_ANNOTATE, key, nargs, kwnames, 1, 0, 0, found);
                return annotate_with_payload(template_, a[4], PAYLOAD_ARRAY, 0, 0.0);
            }
            if (!array_later && (template_->slot >= 0 || !active)) {
                if (keyable) /* a hit checks slot and active again */
                    site_put(SITE_ANNOTATE, key, nargs, kwnames, 1, 0, 0, found);
                return annotate_with_payload(template_, a[4], kind, ivalue, fvalue);
            }
            /* an inline message with a payload: the Python path */
        }
        if (hit == 0 && a[2] == Py_None && a[4] == Py_None) {
            int first = annotate_first_sight(a[0], a[1], a[3], &found);
            if (first != 0)
                return first > 0 ? found : NULL;
        }
        PyObject *made = call_type_normally(callable, args, nargs, kwnames);
        if (made != NULL && a[4] == Py_None && Py_IS_TYPE(made, annotate_cls)) {
            /* __new__ cached it unless the cache was full (or an argument unhashable) */
            hit = annotate_template(callable, a, &found);
            if (hit < 0) {
                Py_DECREF(made);
                return NULL;
            }
            ((annotate_object *)made)->shared = hit > 0 && found == made;
        }
        return made;
    }
    return call_type_normally(callable, args, nargs, kwnames);
}

/* ==== function: a C callable standing for a Python function =================================== */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;        /* decorated: the user's function; otherwise the Python twin */
    PyObject *attributes;  /* decorated, slot < 0: EventAttributes whose _emit opens the range */
    int slot;              /* decorated: the C slot pushed before each call, or -1 */
    int domain_index;      /* decorated: the domain popped after each call */
    int guard_recursion;   /* decorated: func is not a Python function, so nothing else bounds the C
                            * stack if it calls back (a Python function's own frame entry does) */
    PyObject *dict;        /* functools.wraps metadata: __name__, __doc__, __wrapped__, ... */
    PyObject *weakreflist;
} function_object;

static PyTypeObject function_type;

static inline PyObject *twin(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(((function_object *)op)->func, args, nargsf, kwnames);
}

/* -- decorated functions: push, call, pop (also when the call raises) -- */
static PyObject *decorated_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    function_object *self = (function_object *)op;
    int guard = self->guard_recursion;
    if (guard && Py_EnterRecursiveCall(" while calling an annotated function"))
        return NULL;
    if (self->slot >= 0)
        nvtxcffi_shim.push(self->slot);
    else if (emit_push(self->attributes) < 0) {
        if (guard)
            Py_LeaveRecursiveCall();
        return NULL;
    }
    if (TOOL_RAISED()) { /* the range was opened: close it */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        nvtxcffi_shim.pop(self->domain_index);
        PyErr_Restore(type, value, traceback);
        if (guard)
            Py_LeaveRecursiveCall();
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    nvtxcffi_shim.pop(self->domain_index);
    if (result != NULL && TOOL_RAISED())
        Py_CLEAR(result);
    if (guard)
        Py_LeaveRecursiveCall();
    return result;
}

/* -- module-level calls (a tool is attached) -- */

/* The slot (and domain index, -1 unknown) of a module-level call by the identity of its (message,
 * color, domain, category) as bound: a call site passes the same objects every time (constants of
 * its code), so a direct-mapped table answers before the dicts. Only exact str/int/float/None
 * enter (identity stands for equality only for those); references are held, so an address is not
 * reused while mapped; a slot never changes. The payload never enters. */
typedef struct {
    PyObject *key[4]; /* strong references, or NULL */
    int slot;
    int domain_index;
} call_entry;

/* The entry of 4 objects (by address) in a direct-mapped table of `size` (a power of two). */
static inline size_t call_entry_at(PyObject *const *key, size_t size, uint64_t seed)
{
    uint64_t h = seed;
    for (int i = 0; i < 4; i++)
        h = (h ^ ((uintptr_t)key[i] >> 4)) * 0xff51afd7ed558ccdull;
    return (size_t)(h >> 40) & (size - 1);
}

static inline int call_entry_is(const call_entry *e, PyObject *const *key)
{
    return e->key[0] == key[0] && e->key[1] == key[1] && e->key[2] == key[2] && e->key[3] == key[3];
}

/* Map `key` (references taken) to (slot, domain_index) in entry e, replacing what it held. */
static void call_entry_put(call_entry *e, PyObject *const *key, int slot, int domain_index)
{
    PyObject *old[4];
    for (int i = 0; i < 4; i++) {
        old[i] = e->key[i];
        Py_INCREF(key[i]);
        e->key[i] = key[i];
    }
    e->slot = slot;
    e->domain_index = domain_index;
    for (int i = 0; i < 4; i++) /* Domains, strs, ints, floats, None: no code runs */
        Py_XDECREF(old[i]);
}

#define RANGE_CALLS 512 /* a power of two */
static call_entry range_calls[RANGE_CALLS];

/* Send push/mark/start_range with a slot, and the payload if any: start_range's id, else 0. The
 * one dispatch of every accelerated call that has its slot (module-level, Domain, annotate). */
static inline uint64_t send_slot(int opcode, int slot, int kind, int64_t ivalue, double fvalue)
{
    if (kind != NVTXCFFI_PAYLOAD_NONE)
        return nvtxcffi_shim.emit_slot(opcode, slot, kind, ivalue, fvalue);
    switch (opcode) {
    case NVTXCFFI_OP_PUSH:
        nvtxcffi_shim.push(slot);
        return 0;
    case NVTXCFFI_OP_MARK:
        nvtxcffi_shim.mark(slot);
        return 0;
    default:
        return nvtxcffi_shim.start(slot);
    }
}

/* Send a module-level call with its slot: push/mark return None, start_range the range id (with
 * its domain index). */
static PyObject *range_emit(int opcode, int slot, int index, int kind, int64_t ivalue, double fvalue)
{
    uint64_t id = send_slot(opcode, slot, kind, ivalue, fvalue);
    if (TOOL_RAISED())
        return NULL;
    if (opcode == NVTXCFFI_OP_START)
        return new_range_id(id, index);
    Py_RETURN_NONE;
}

/* push_range / mark / start_range: the Python hot path of _ranges.py, in C. The slot comes from
 * the message-only caches (default colour, no domain or category), a style, or the argument-tuple
 * cache; a payload is converted here and sent with the slot (it is never part of a key). */
static PyObject *range_call_general(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                                    int opcode);

static inline PyObject *range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames, int opcode)
{
    const site_entry *site = site_find(SITE_MODULE + opcode, args, PyVectorcall_NARGS(nargsf), kwnames);
    if (site == NULL)
        return range_call_general(op, args, nargsf, kwnames, opcode);
    int kind = NVTXCFFI_PAYLOAD_NONE;
    int64_t ivalue = 0;
    double fvalue = 0.0;
    PyObject *payload = site->payload_at >= 0 ? args[site->payload_at] : Py_None;
    if (payload != Py_None && !payload_c(payload, &kind, &ivalue, &fvalue)) {
        if (opcode != NVTXCFFI_OP_START && array_sendable(payload)) {
            if (emit_array(opcode, site->slot, site->domain_index, payload) < 0)
                return NULL;
            Py_RETURN_NONE;
        }
        return twin(op, args, nargsf, kwnames); /* other payload types, out of range: Python */
    }
    return range_emit(opcode, site->slot, site->domain_index, kind, ivalue, fvalue);
}

static PyObject *range_call_bound(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                                  int opcode, PyObject *const *a, PyObject *message);

/* A call the site table does not know yet (its own function: the hit path above stays small). */
static PyObject *range_call_general(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                                    int opcode)
{
    PyObject *a[5];
    if (slot_cache == NULL || !bind(args, PyVectorcall_NARGS(nargsf), kwnames, range_params, 5, 0, a))
        return twin(op, args, nargsf, kwnames);
    /* an f-string message by the first str of its text, held: the lookups below may run Python */
    PyObject *message = a[0] ? canonical_message(a[0]) : Py_NewRef(Py_None);
    PyObject *result = range_call_bound(op, args, nargsf, kwnames, opcode, a, message);
    Py_DECREF(message);
    return result;
}

/* range_call_general with the arguments bound; `message`: a[0], or the first str of its text. */
static PyObject *range_call_bound(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames,
                                  int opcode, PyObject *const *a, PyObject *message)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int kind = NVTXCFFI_PAYLOAD_NONE;
    int64_t ivalue = 0;
    double fvalue = 0.0;
    PyObject *default_ = opcode == NVTXCFFI_OP_START ? Py_None : default_color;
    PyObject *color = a[1] ? a[1] : default_;
    PyObject *domain = a[2] ? a[2] : Py_None, *category = a[3] ? a[3] : Py_None;
    PyObject *array = NULL; /* push/mark: an array payload sent by emit_array */
    if (a[4] != NULL && a[4] != Py_None && !payload_c(a[4], &kind, &ivalue, &fvalue)) {
        if (opcode == NVTXCFFI_OP_START || !array_sendable(a[4]))
            return twin(op, args, nargsf, kwnames); /* other payload types, out of range: Python */
        array = a[4];
    }
    PyObject *found = NULL;
    int hit = 0, index = -1, slot;
    PyObject *call_key[4] = {message, color, domain, category};
    call_entry *entry = &range_calls[call_entry_at(call_key, RANGE_CALLS, 0xC2B2AE3D27D4EB4Full)];
    if (call_entry_is(entry, call_key)) {
        slot = entry->slot;
        index = entry->domain_index;
        /* the same objects a second time: a call site's constants (not an f-string message: that
         * is a new object each call, answered through the first of its text) */
        if (message == (a[0] ? a[0] : Py_None))
            site_put(SITE_MODULE + opcode, args, nargs, kwnames, a[4] != NULL, slot, index, NULL);
        goto emit;
    }
    if (color == default_ && domain == Py_None && category == Py_None) {
        hit = lookup(opcode == NVTXCFFI_OP_START ? uncoloured_slots : blue_slots, message, &found);
        index = 0;
    } else {
        style_t *style;
        found = style_get(STYLE_SLOT, color, domain, category, message, &style);
        if (found != NULL) {
            hit = 1;
            index = style->domain_index;
        }
    }
    /* (the default style is answered by its own cache alone, as _ranges._cached_slot answers it) */
    if (hit == 0 && !(color == default_ && domain == Py_None && category == Py_None) && keyable(color)
        && keyable(category)) { /* else the twin validates */
        PyObject *key = PyTuple_Pack(4, message, color, domain, category);
        if (key == NULL)
            return NULL;
        hit = lookup(slot_cache, key, &found);
        Py_DECREF(key);
        if (hit > 0 && as_slot(found) >= 0) {
            index = domain == Py_None ? 0 : domain_index_by_name(domain);
            style_put(STYLE_SLOT, color, domain, category, index, message, found);
        }
    }
    if (hit < 0)
        return NULL;
    slot = hit ? as_slot(found) : -1;
    if (slot < 0) {
        if (array == NULL && PyUnicode_CheckExact(message)) {
            PyObject *sent;
            int first = range_first_sight(opcode, message, color, domain, category, kind, ivalue, fvalue, &sent);
            if (first != 0)
                return first > 0 ? sent : NULL;
        }
        return twin(op, args, nargsf, kwnames); /* first use of these arguments: prepare, cache */
    }
    if ((message == Py_None || PyUnicode_CheckExact(message)) && immutable_key(color) && immutable_key(domain)
        && immutable_key(category))
        call_entry_put(entry, call_key, slot, index);
emit:
    if (opcode == NVTXCFFI_OP_START || array != NULL) { /* a range id names its domain; so do schemas */
        if (index < 0)
            index = domain == Py_None ? 0 : domain_index_by_name(domain);
        if (index < 0)
            return twin(op, args, nargsf, kwnames);
    }
    if (array != NULL) {
        if (emit_array(opcode, slot, index, array) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return range_emit(opcode, slot, index, kind, ivalue, fvalue);
}

/* push_range(message) / mark(message), the commonest calls: one positional str already in the
 * default-colour cache is its slot; -1 sends the call down range_call's general path.
 * A call site passes the same str object every time (a constant of its code): a small
 * direct-mapped table by the object's address answers before the dict (whose lookup costs about
 * as much as the rest of the call). It holds a reference to each str it maps, so an address is
 * never reused by another object while mapped; a str's slot never changes (slots are never freed). */
#define MESSAGE_SLOTS 256 /* a power of two */
static struct {
    PyObject *message; /* strong reference, or NULL */
    int slot;
} message_slots[MESSAGE_SLOTS];

/* The default-colour slot of `message` (an exact str the caller holds; `entry` its canon entry or -1),
 * remembered by the message's address; -1 when not cached. */
static int message_slot_of(PyObject *message, int entry)
{
    size_t at = ((uintptr_t)message >> 4) & (MESSAGE_SLOTS - 1);
    if (message_slots[at].message == message)
        return message_slots[at].slot;
    PyObject *found = PyDict_GetItemWithError(blue_slots, message);
    if (found == NULL) {
        PyErr_Clear();
        return -1;
    }
    int slot = as_slot(found);
    if (slot >= 0) {
        if (entry >= 0 && canon[entry].str == message)
            canon[entry].message_slot = slot; /* its next equal f-string: no second table */
        PyObject *old = message_slots[at].message;
        Py_INCREF(message);
        message_slots[at].message = message;
        message_slots[at].slot = slot;
        Py_XDECREF(old); /* a str: no code runs */
    }
    return slot;
}

static inline int message_only_slot(PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL || blue_slots == NULL)
        return -1;
    PyObject *message = args[0];
    size_t at = ((uintptr_t)message >> 4) & (MESSAGE_SLOTS - 1);
    if (message_slots[at].message == message)
        return message_slots[at].slot;
    if (!PyUnicode_CheckExact(message))
        return -1;
    int entry;
    /* an f-string: the first str of its text, held (a str subclass key's __eq__ may run Python) */
    PyObject *same = canonical_entry(message, &entry);
    int slot = same == message ? -1 : canon[entry].message_slot;
    if (slot < 0)
        slot = message_slot_of(same, entry);
    Py_DECREF(same); /* held by the table or the caller (a str: no code runs) */
    return slot;
}

static PyObject *push_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    int slot = message_only_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.push(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_PUSH);
}

static PyObject *mark_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    int slot = message_only_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.mark(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_MARK);
}

static PyObject *start_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_START);
}

static PyObject *pop_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) == 0 && kwnames == NULL) { /* pop_range(): the commonest call */
        nvtxcffi_shim.pop_default();
        RETURN_NONE_AFTER_NVTX();
    }
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    const site_entry *site = site_find(SITE_POP, args, nargs, kwnames); /* pop_range("d"), (domain="d") */
    if (site != NULL) {
        nvtxcffi_shim.pop(site->domain_index);
        RETURN_NONE_AFTER_NVTX();
    }
    PyObject *a[1];
    if (!bind(args, nargs, kwnames, pop_params, 1, 0, a))
        return twin(op, args, nargsf, kwnames);
    if (a[0] == NULL || a[0] == Py_None) {
        nvtxcffi_shim.pop_default();
        RETURN_NONE_AFTER_NVTX();
    }
    int index = domain_index_by_name(a[0]);
    if (index < 0)
        return twin(op, args, nargsf, kwnames); /* a new domain, or a bad name: Python creates/raises */
    site_put(SITE_POP, args, nargs, kwnames, 0, 0, index, NULL); /* a name maps to one Domain for good */
    nvtxcffi_shim.pop(index);
    RETURN_NONE_AFTER_NVTX();
}

/* An exact int that fits a uint64_t, into *out; 0 when not (nothing raised). */
static int as_range_id(PyObject *value, uint64_t *out)
{
    if (!PyLong_CheckExact(value))
        return 0;
    unsigned long long id = PyLong_AsUnsignedLongLong(value);
    if (id == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)id;
    return 1;
}

static PyObject *end_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *a[1];
    uint64_t id;
    if (!bind(args, PyVectorcall_NARGS(nargsf), kwnames, end_params, 1, 1, a))
        return twin(op, args, nargsf, kwnames);
    PyObject *range_id = a[0];
    if (PyTuple_CheckExact(range_id) && PyTuple_GET_SIZE(range_id) == 2) {
        PyObject *index = PyTuple_GET_ITEM(range_id, 1);
        int overflow = 0;
        long domain = PyLong_CheckExact(index) ? PyLong_AsLongAndOverflow(index, &overflow) : -1;
        if (PyLong_CheckExact(index) && !overflow && domain >= INT32_MIN && domain <= INT32_MAX
            && as_range_id(PyTuple_GET_ITEM(range_id, 0), &id)) {
            nvtxcffi_shim.end((int)domain, id); /* an index the shim does not know is ignored there */
            RETURN_NONE_AFTER_NVTX();
        }
        PyErr_Clear();
    } else if (range_id == Py_None) {
        Py_RETURN_NONE;
    } else if (as_range_id(range_id, &id)) {
        nvtxcffi_shim.end_default(id);
        RETURN_NONE_AFTER_NVTX();
    }
    return twin(op, args, nargsf, kwnames); /* anything else: Python's checks and messages */
}

/* -- module-level calls (no tool, or NVTX_DISABLE): check the arguments' shape, do nothing -- */
/* Call shapes (keyword names tuple, positional count) that bind() accepted for the 5 range
 * parameters. A call site passes the same keyword-names tuple (a constant of its code) every time,
 * so a no-op call checks its shape with one pointer comparison. Bounded; a collision replaces. */
#define KNOWN_SHAPES 64
static PyObject *known_kwnames[KNOWN_SHAPES];
static Py_ssize_t known_nargs[KNOWN_SHAPES];

static int range_shape_ok(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (kwnames == NULL)
        return nargs <= 5;
    size_t at = ((uintptr_t)kwnames >> 4) & (KNOWN_SHAPES - 1);
    if (known_kwnames[at] == kwnames && known_nargs[at] == nargs)
        return 1;
    PyObject *a[5];
    if (!bind(args, nargs, kwnames, range_params, 5, 0, a))
        return 0;
    Py_INCREF(kwnames);
    Py_XSETREF(known_kwnames[at], kwnames); /* a tuple of str: no code runs */
    known_nargs[at] = nargs;
    return 1;
}

static PyObject *noop5_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!range_shape_ok(args, PyVectorcall_NARGS(nargsf), kwnames))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

static PyObject *noop_pop_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *a[1];
    if (!bind(args, PyVectorcall_NARGS(nargsf), kwnames, pop_params, 1, 0, a))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

static PyObject *noop_end_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *a[1];
    if (!bind(args, PyVectorcall_NARGS(nargsf), kwnames, end_params, 1, 1, a))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

/* -- Domain methods with pre-built EventAttributes: d.push_range(attrs) etc. -- */

/* The slot of d.METHOD(attrs) called with exactly (Domain, EventAttributes): >= 0 a slot, -1 "no
 * slot: the general call", -2 not this shape (keywords, other types, attributes of another
 * domain): the Python twin decides (and raises for another domain's attributes). */
static int domain_attrs_slot(PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (attributes_fast_offset < 0 || PyVectorcall_NARGS(nargsf) != 2
        || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || !Py_IS_TYPE(args[0], domain_cls) || !Py_IS_TYPE(args[1], attributes_cls)
        || member_at(args[1], attributes_domain_offset) != args[0])
        return -2;
    if (!active)
        return -1; /* no tool: attributes never hold a slot, and nothing is emitted */
    PyObject *fast = member_at(args[1], attributes_fast_offset);
    if (fast == NULL || !PyLong_CheckExact(fast))
        return -2;
    int slot = as_slot(fast);
    return slot >= 0 ? slot : -1;
}

/* d.push_range(message=..., color=..., category=..., payload=...) with no attributes: the slot of
 * the attributes Domain._by_keywords_event prepared for (message, color, category), through a
 * style; the payload is sent with it. NULL with nothing raised: not this shape or not prepared yet
 * (the Python twin decides). */
/* What the keyword names of a Domain call bind to (message, color, category, payload: 0..3),
 * remembered for the last kwnames tuple seen: a call site passes the same tuple (a constant of
 * its code) every time. */
static PyObject *domain_kwnames_seen; /* strong reference */
static signed char domain_kwnames_map[4];

static int domain_bind_keywords(PyObject *const *args, PyObject *kwnames, PyObject **k)
{
    Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    if (kwnames == domain_kwnames_seen) {
        for (Py_ssize_t j = 0; j < nkw; j++)
            k[domain_kwnames_map[j]] = args[1 + j];
        return 1;
    }
    if (nkw > 4)
        return 0;
    signed char map[4];
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, j);
        int found = -1;
        for (int i = 0; i < 4 && found < 0; i++)
            if (name == domain_params[i])
                found = i;
        for (int i = 0; i < 4 && found < 0; i++)
            if (PyUnicode_Compare(name, domain_params[i]) == 0)
                found = i;
        if (found < 0 || k[found] != NULL) {
            PyErr_Clear();
            return 0;
        }
        k[found] = args[1 + j];
        map[j] = (signed char)found;
    }
    PyObject *old = domain_kwnames_seen;
    Py_INCREF(kwnames);
    domain_kwnames_seen = kwnames;
    memcpy(domain_kwnames_map, map, sizeof map);
    Py_XDECREF(old); /* a tuple of str: no code runs */
    return 1;
}

/* The answer of a Domain keyword call by the identity of (Domain, message, color, category): a
 * direct-mapped table before the style and its dict (the same answers; references held, so an
 * address is not reused while mapped). */
#define DOMAIN_CALLS 256 /* a power of two */
static call_entry domain_calls[DOMAIN_CALLS];

/* Send a Domain keyword call with its slot (and payload): None, or start_range's range id. */
static PyObject *domain_emit(int opcode, int slot, int kind, int64_t ivalue, double fvalue)
{
    uint64_t id = 0;
    if (active) { /* otherwise checked and prepared; nothing reaches NVTX */
        if (slot < 0)
            return NULL;
        id = send_slot(opcode, slot, kind, ivalue, fvalue);
        if (TOOL_RAISED())
            return NULL;
    }
    if (opcode == NVTXCFFI_OP_START)
        return PyLong_FromUnsignedLongLong(id);
    Py_RETURN_NONE;
}

/* A Domain keyword call's payload C does not convert: an array C may take (with a tool, sent by
 * domain_emit_array; without one, checked: nothing is sent), else NULL (the twin converts or raises). */
static PyObject *domain_array(int opcode, PyObject *payload)
{
    if (active ? opcode != NVTXCFFI_OP_START && array_sendable(payload) : array_checked(payload))
        return payload;
    return NULL;
}

/* domain_emit for an array payload (domain_array): None or start_range's 0 without a tool; with
 * one, _payload.emit with the slot (NULL: the twin, for a slot C does not know). */
static PyObject *domain_emit_array(int opcode, int slot, PyObject *domain, PyObject *array)
{
    if (!active)
        return domain_emit(opcode, slot, NVTXCFFI_PAYLOAD_NONE, 0, 0.0);
    int index = domain_index_of(domain);
    if (slot < 0 || index < 0)
        return NULL;
    if (emit_array(opcode, slot, index, array) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *domain_keywords(PyObject *const *args, size_t nargsf, PyObject *kwnames, int opcode)
{
    if (domain_keywords_offset < 0 || PyVectorcall_NARGS(nargsf) != 1 || kwnames == NULL
        || !Py_IS_TYPE(args[0], domain_cls))
        return NULL;
    int kind = NVTXCFFI_PAYLOAD_NONE;
    int64_t ivalue = 0;
    double fvalue = 0.0;
    const site_entry *site = site_find(SITE_DOMAIN + opcode, args, 1, kwnames);
    if (site != NULL) {
        PyObject *payload = site->payload_at >= 0 ? args[site->payload_at] : Py_None;
        if (payload != Py_None && !payload_c(payload, &kind, &ivalue, &fvalue)) {
            if (domain_array(opcode, payload) == NULL)
                return NULL; /* the Python twin converts or raises */
            return domain_emit_array(opcode, site->slot, args[0], payload);
        }
        return domain_emit(opcode, site->slot, kind, ivalue, fvalue);
    }
    PyObject *k[4] = {NULL, NULL, NULL, NULL};
    if (!domain_bind_keywords(args, kwnames, k))
        return NULL;
    int payload_given = k[3] != NULL;
    for (int i = 0; i < 4; i++)
        if (k[i] == NULL)
            k[i] = Py_None;
    PyObject *array = NULL; /* an array payload (domain_array) */
    if (k[3] != Py_None && !payload_c(k[3], &kind, &ivalue, &fvalue) && (array = domain_array(opcode, k[3])) == NULL)
        return NULL;
    PyObject *call_key[4] = {args[0], k[0], k[1], k[2]};
    call_entry *entry = &domain_calls[call_entry_at(call_key, DOMAIN_CALLS, 0x9E3779B97F4A7C15ull)];
    int slot;
    style_t *style;
    PyObject *answer;
    if (call_entry_is(entry, call_key)) {
        slot = entry->slot;
        /* the same objects a second time: a call site's constants */
        if (slot >= 0 || !active)
            site_put(SITE_DOMAIN + opcode, args, 1, kwnames, payload_given, slot, 0, NULL);
    } else if ((answer = style_get(STYLE_DOMAIN, args[0], k[1], k[2], k[0], &style)) != NULL) {
        slot = as_slot(answer);
        if (style != NULL)
            call_entry_put(entry, call_key, slot, -1);
    } else {
        PyObject *cache = member_at(args[0], domain_keywords_offset), *attributes;
        if (cache == NULL || !PyDict_CheckExact(cache) || !keyable(k[1]) || !keyable(k[2]))
            return NULL; /* the twin validates */
        PyObject *key = PyTuple_Pack(3, k[0], k[1], k[2]);
        if (key == NULL) {
            PyErr_Clear();
            return NULL;
        }
        int hit = lookup(cache, key, &attributes);
        Py_DECREF(key);
        if (hit <= 0 || !Py_IS_TYPE(attributes, attributes_cls)) {
            PyErr_Clear();
            return NULL;
        }
        PyObject *fast = member_at(attributes, attributes_fast_offset);
        slot = fast == NULL ? -1 : as_slot(fast);
        if (active && slot < 0)
            return NULL; /* an inline message: the general call */
        PyObject *remembered = PyLong_FromLong(active ? slot : -1);
        if (remembered == NULL) {
            PyErr_Clear();
            return NULL;
        }
        style_put(STYLE_DOMAIN, args[0], k[1], k[2], 0, k[0], remembered);
        Py_DECREF(remembered);
    }
    if (array != NULL)
        return domain_emit_array(opcode, slot, args[0], array);
    return domain_emit(opcode, slot, kind, ivalue, fvalue);
}

static PyObject *domain_push_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (kwnames != NULL) {
        PyObject *done = domain_keywords(args, nargsf, kwnames, NVTXCFFI_OP_PUSH);
        if (done != NULL || PyErr_Occurred())
            return done;
    }
    int slot = domain_attrs_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.push(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    if (slot == -1 && !active)
        Py_RETURN_NONE;
    return twin(op, args, nargsf, kwnames);
}

static PyObject *domain_mark_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (kwnames != NULL) {
        PyObject *done = domain_keywords(args, nargsf, kwnames, NVTXCFFI_OP_MARK);
        if (done != NULL || PyErr_Occurred())
            return done;
    }
    int slot = domain_attrs_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.mark(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    if (slot == -1 && !active)
        Py_RETURN_NONE;
    return twin(op, args, nargsf, kwnames);
}

static PyObject *domain_start_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (kwnames != NULL) {
        PyObject *done = domain_keywords(args, nargsf, kwnames, NVTXCFFI_OP_START);
        if (done != NULL || PyErr_Occurred())
            return done;
    }
    int slot = domain_attrs_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        uint64_t id = nvtxcffi_shim.start(slot);
        return TOOL_RAISED() ? NULL : PyLong_FromUnsignedLongLong(id);
    }
    if (slot == -1 && !active)
        return PyLong_FromLong(0);
    return twin(op, args, nargsf, kwnames);
}

/* d.get_event_attributes(message, color, category, payload): a new EventAttributes copied from
 * the attributes the domain keeps prepared for (message, color, category) in _by_keywords (what
 * Domain.get_event_attributes does in Python, without its frames), with this payload: None, an
 * int64 or a float. Anything else, and a spelling not prepared yet, goes to the twin. */
enum { ATTR_DOMAIN, ATTR_MESSAGE, ATTR_COLOR, ATTR_CATEGORY, ATTR_PAYLOAD, ATTR_SLOT, ATTR_FIELDS, ATTR_INLINE,
       ATTR_FAST, ATTR_COUNT };
static const char *const attribute_names[ATTR_COUNT] = {"_domain", "_message", "_color", "_category", "_payload",
                                                        "_slot", "_fields", "_inline", "_fast"};
static Py_ssize_t attribute_offsets[ATTR_COUNT]; /* all set, or attribute_offsets[0] == 0 */
static PyObject *int64_kind, *double_kind, *zero_int, *zero_float, *minus_one; /* payload_fields' parts */

/* A new EventAttributes of `template_`'s preparation, given as a[0..2] (message, colour, category:
 * equal to the template's, of the same types) with payload a[3]. */
static PyObject *attributes_copy(PyObject *template_, PyObject *const *a)
{
    PyObject *payload = a[3];
    PyObject *fields;
    if (payload == Py_None) {
        fields = Py_NewRef(member_at(template_, attribute_offsets[ATTR_FIELDS]));
    } else if (PyFloat_CheckExact(payload)) {
        fields = PyTuple_Pack(3, double_kind, zero_int, payload);
    } else {
        fields = PyTuple_Pack(3, int64_kind, payload, zero_float); /* (checked: an int64) */
    }
    if (fields == NULL)
        return NULL;
    PyObject *copy = attributes_cls->tp_alloc(attributes_cls, 0);
    if (copy == NULL) {
        Py_DECREF(fields);
        return NULL;
    }
    static const int shared[] = {ATTR_DOMAIN, ATTR_SLOT, ATTR_INLINE};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++) {
        Py_ssize_t at = attribute_offsets[shared[i]];
        *(PyObject **)((char *)copy + at) = Py_NewRef(member_at(template_, at));
    }
    static const int given[] = {ATTR_MESSAGE, ATTR_COLOR, ATTR_CATEGORY};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        *(PyObject **)((char *)copy + attribute_offsets[given[i]]) = Py_NewRef(a[i]);
    *(PyObject **)((char *)copy + attribute_offsets[ATTR_PAYLOAD]) = Py_NewRef(payload);
    *(PyObject **)((char *)copy + attribute_offsets[ATTR_FIELDS]) = fields;
    *(PyObject **)((char *)copy + attribute_offsets[ATTR_FAST]) =
        Py_NewRef(payload == Py_None ? member_at(template_, attribute_offsets[ATTR_FAST]) : minus_one);
    return copy;
}

static PyObject *domain_attributes_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[4];
    if (nargs < 1 || attribute_offsets[0] == 0 || domain_keywords_offset < 0 || !Py_IS_TYPE(args[0], domain_cls)
        || !bind(args + 1, nargs - 1, kwnames, domain_params, 4, 0, a))
        return twin(op, args, nargsf, kwnames);
    for (int i = 0; i < 4; i++)
        if (a[i] == NULL)
            a[i] = Py_None;
    PyObject *payload = a[3];
    if (payload != Py_None && !PyFloat_CheckExact(payload)) {
        int overflow = 0;
        if (!PyLong_CheckExact(payload))
            return twin(op, args, nargsf, kwnames);
        (void)PyLong_AsLongLongAndOverflow(payload, &overflow); /* an exact int: raises nothing */
        if (overflow)
            return twin(op, args, nargsf, kwnames);
    }
    /* exact str, int or None only (Domain._PLAIN_KEYS): their equal values mean the same */
    for (int i = 0; i < 3; i++)
        if (a[i] != Py_None && !PyUnicode_CheckExact(a[i]) && !PyLong_CheckExact(a[i]))
            return twin(op, args, nargsf, kwnames);
    PyObject *cache = member_at(args[0], domain_keywords_offset), *found;
    if (cache == NULL || !PyDict_CheckExact(cache))
        return twin(op, args, nargsf, kwnames);
    PyObject *key = PyTuple_Pack(3, a[0], a[1], a[2]);
    if (key == NULL)
        return NULL;
    int hit = lookup(cache, key, &found);
    Py_DECREF(key);
    if (hit < 0)
        return NULL;
    if (hit == 0 || !Py_IS_TYPE(found, attributes_cls))
        return twin(op, args, nargsf, kwnames); /* first use: prepared and kept by the twin */
    Py_INCREF(found); /* (a message's __eq__ may have run code: held while copied) */
    for (int i = 0; i < ATTR_COUNT; i++) {
        if (i != ATTR_PAYLOAD && member_at(found, attribute_offsets[i]) == NULL) {
            Py_DECREF(found);
            return twin(op, args, nargsf, kwnames);
        }
    }
    PyObject *copy = attributes_copy(found, a);
    Py_DECREF(found);
    return copy;
}

static PyObject *domain_end_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    uint64_t id;
    if (PyVectorcall_NARGS(nargsf) == 2 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        int index = domain_index_of(args[0]);
        if (index >= 0 && as_range_id(args[1], &id)) {
            nvtxcffi_shim.end(index, id);
            RETURN_NONE_AFTER_NVTX();
        }
    }
    return twin(op, args, nargsf, kwnames);
}

/* -- the type -- */

static int function_traverse(PyObject *op, visitproc visit, void *arg)
{
    function_object *self = (function_object *)op;
    Py_VISIT(self->func);
    Py_VISIT(self->attributes);
    Py_VISIT(self->dict);
    return 0;
}

static int function_clear(PyObject *op)
{
    function_object *self = (function_object *)op;
    Py_CLEAR(self->func);
    Py_CLEAR(self->attributes);
    Py_CLEAR(self->dict);
    return 0;
}

static void function_dealloc(PyObject *op)
{
    function_object *self = (function_object *)op;
    PyObject_GC_UnTrack(op);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs(op);
    function_clear(op);
    PyObject_GC_Del(op);
}

/* Bind like a Python function: a bound method on an instance, the function itself on a class. */
static PyObject *function_descr_get(PyObject *op, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(op);
        return op;
    }
    return PyMethod_New(op, obj);
}

static PyObject *function_repr(PyObject *op)
{
    PyObject *name = PyObject_GetAttrString(op, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromFormat("<nvtx_cffi function at %p>", op);
    }
    PyObject *repr = PyUnicode_FromFormat("<nvtx_cffi function %S at %p>", name, op);
    Py_DECREF(name);
    return repr;
}

/* Pickled by reference, like a function: its module and qualified name (pickle checks that the
 * name leads back to this very object). */
static PyObject *function_reduce(PyObject *op, PyObject *unused)
{
    (void)unused;
    return PyObject_GetAttrString(op, "__qualname__");
}

static PyMethodDef function_methods[] = {
    {"__reduce__", function_reduce, METH_NOARGS, "Pickled by qualified name, like a function."},
    {NULL, NULL, 0, NULL},
};

#if PY_VERSION_HEX >= 0x030E0000
/* 3.14+ (PEP 649/749): functools.wraps copies __annotate__, not __annotations__, and a function's
 * __annotations__ is computed from __annotate__ on first access. Both live in the instance dict
 * and behave as a Python function's do, so typing.get_type_hints, inspect.signature(eval_str=True)
 * and annotationlib see the decorated function's annotations. (Before 3.14 functools.wraps copies
 * __annotations__ into the dict, which plain attribute lookup finds.) */

static PyObject *key_annotations, *key_annotate; /* interned "__annotations__", "__annotate__" */

/* The instance dict (made on first use) as a borrowed reference; NULL with an exception. */
static PyObject *function_dict(PyObject *op)
{
    function_object *self = (function_object *)op;
    if ((key_annotations == NULL && (key_annotations = PyUnicode_InternFromString("__annotations__")) == NULL)
        || (key_annotate == NULL && (key_annotate = PyUnicode_InternFromString("__annotate__")) == NULL))
        return NULL;
    if (self->dict == NULL)
        self->dict = PyDict_New();
    return self->dict;
}

static PyObject *function_get_annotations(PyObject *op, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op), *found = NULL, *annotate = NULL;
    if (dict == NULL)
        return NULL;
    int present = PyDict_GetItemRef(dict, key_annotations, &found);
    if (present != 0)
        return present < 0 ? NULL : found;
    if (PyDict_GetItemRef(dict, key_annotate, &annotate) < 0)
        return NULL;
    if (annotate != NULL && annotate != Py_None) {
        PyObject *format = PyLong_FromLong(1); /* annotationlib.Format.VALUE */
        found = format == NULL ? NULL : PyObject_CallOneArg(annotate, format);
        Py_XDECREF(format);
        if (found != NULL && !PyDict_Check(found)) {
            PyErr_Format(PyExc_TypeError, "__annotate__ returned non-dict of type '%.100s'",
                         Py_TYPE(found)->tp_name);
            Py_CLEAR(found);
        }
    } else {
        found = PyDict_New();
    }
    Py_XDECREF(annotate);
    if (found == NULL)
        return NULL;
    if (PyDict_SetItem(dict, key_annotations, found) < 0) { /* computed once, as for functions */
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

static int function_set_annotations(PyObject *op, PyObject *value, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op);
    if (dict == NULL)
        return -1;
    if (value != NULL && !PyDict_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotations__ must be set to a dict object");
        return -1;
    }
    if (value == NULL ? PyDict_Pop(dict, key_annotations, NULL) < 0 : PyDict_SetItem(dict, key_annotations, value) < 0)
        return -1;
    return PyDict_SetItem(dict, key_annotate, Py_None); /* set directly: no __annotate__ any more */
}

static PyObject *function_get_annotate(PyObject *op, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op), *found = NULL;
    if (dict == NULL)
        return NULL;
    int present = PyDict_GetItemRef(dict, key_annotate, &found);
    if (present < 0)
        return NULL;
    return present ? found : Py_NewRef(Py_None);
}

static int function_set_annotate(PyObject *op, PyObject *value, void *closure)
{
    (void)closure;
    PyObject *dict = function_dict(op);
    if (dict == NULL)
        return -1;
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ cannot be deleted");
        return -1;
    }
    if (value != Py_None && !PyCallable_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "__annotate__ must be callable or None");
        return -1;
    }
    if (PyDict_SetItem(dict, key_annotate, value) < 0)
        return -1;
    /* a new __annotate__ drops the annotations computed from the old one, as for functions */
    return value == Py_None ? 0 : PyDict_Pop(dict, key_annotations, NULL) < 0 ? -1 : 0;
}
#endif

static PyGetSetDef function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
#if PY_VERSION_HEX >= 0x030E0000
    {"__annotations__", function_get_annotations, function_set_annotations, NULL, NULL},
    {"__annotate__", function_get_annotate, function_set_annotate, NULL, NULL},
#endif
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject function_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "nvtx_cffi._speedups.function",
    .tp_basicsize = sizeof(function_object),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
              | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A Python function's C fast path (its Python implementation is __wrapped__).",
    .tp_vectorcall_offset = offsetof(function_object, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = function_descr_get,
    .tp_dictoffset = offsetof(function_object, dict),
    .tp_weaklistoffset = offsetof(function_object, weakreflist),
    .tp_traverse = function_traverse,
    .tp_clear = function_clear,
    .tp_dealloc = function_dealloc,
    .tp_repr = function_repr,
    .tp_methods = function_methods,
    .tp_getset = function_getset,
};

static PyObject *function_new(vectorcallfunc call, PyObject *func)
{
    function_object *self = PyObject_GC_New(function_object, &function_type);
    if (self == NULL)
        return NULL;
    self->vectorcall = call;
    Py_INCREF(func);
    self->func = func;
    self->attributes = NULL;
    self->slot = -1;
    self->domain_index = 0;
    self->guard_recursion = 1;
    self->dict = NULL;
    self->weakreflist = NULL;
    PyObject_GC_Track((PyObject *)self);
    return (PyObject *)self;
}

/* ==== module functions: setup, called once from Python ========================================= */

static int check_dict(PyObject *obj, const char *what)
{
    if (!PyDict_CheckExact(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a dict", what);
        return -1;
    }
    return 0;
}

static void store(PyObject **slot, PyObject *value)
{
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
}

PyDoc_STRVAR(setup_annotate_doc,
"setup_annotate(cls, by_message, cache[, payload_attributes[, payload_check[, payload_emit]]])\n--\n\n"
"Answer calls of annotate class ``cls`` (a subclass of AnnotateBase) from its two caches; "
"``payload_attributes(template, payload)`` makes the attributes of objects carrying a per-call payload; "
"``payload_check(payload)`` checks a payload C does not convert (raises or warns) when no tool listens; "
"``payload_emit(op, slot, domain_index, inline, payload)`` sends an array payload.");

static PyObject *setup_annotate(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 3 || nargs > 6) {
        PyErr_SetString(PyExc_TypeError,
                        "setup_annotate(cls, by_message, cache[, payload_attributes[, payload_check[, payload_emit]]])");
        return NULL;
    }
    if (!PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &annotate_base_type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a subclass of AnnotateBase");
        return NULL;
    }
    if (check_dict(args[1], "by_message") < 0 || check_dict(args[2], "cache") < 0)
        return NULL;
    store(&annotate_by_message, args[1]);
    store(&annotate_cache, args[2]);
    if (nargs >= 4)
        store(&payload_attributes, args[3]);
    if (nargs >= 5)
        store(&payload_check, args[4]);
    if (nargs == 6)
        store(&payload_emit, args[5]);
    store((PyObject **)&annotate_cls, args[0]);
#if PY_VERSION_HEX >= 0x030E0000
    if (own_special_methods(annotate_cls) < 0) /* (before tp_vectorcall: setting attributes may clear it) */
        return NULL;
#endif
    annotate_cls->tp_vectorcall = annotate_class_vectorcall;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(setup_ranges_doc,
"setup_ranges(default_color, blue_slots, uncoloured_slots, slot_cache)\n--\n\n"
"The caches of _ranges.py that the module-level functions answer from.");

static PyObject *setup_ranges(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "setup_ranges(default_color, blue_slots, uncoloured_slots, slot_cache)");
        return NULL;
    }
    if (check_dict(args[1], "blue_slots") < 0 || check_dict(args[2], "uncoloured_slots") < 0
        || check_dict(args[3], "slot_cache") < 0)
        return NULL;
    store(&default_color, args[0]);
    store(&blue_slots, args[1]);
    store(&uncoloured_slots, args[2]);
    store(&slot_cache, args[3]);
    Py_RETURN_NONE;
}

/* The offset of __slots__ member `name` of Python class `cls` (an object slot). */
static Py_ssize_t slot_offset(PyTypeObject *cls, const char *name)
{
    PyObject *descr = PyDict_GetItemString(cls->tp_dict, name);
    if (descr == NULL || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", cls->tp_name, name);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    if (member->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", cls->tp_name, name);
        return -1;
    }
    return member->offset;
}

PyDoc_STRVAR(setup_domain_doc,
"setup_domain(Domain, EventAttributes, domains)\n--\n\n"
"Read Domain._index, EventAttributes._fast and ._domain from their slots; ``domains`` maps names to Domains.");

static PyObject *setup_domain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "setup_domain(Domain, EventAttributes, domains)");
        return NULL;
    }
    if (check_dict(args[2], "domains") < 0)
        return NULL;
    Py_ssize_t index_offset = slot_offset((PyTypeObject *)args[0], "_index");
    Py_ssize_t fast_offset = index_offset < 0 ? -1 : slot_offset((PyTypeObject *)args[1], "_fast");
    Py_ssize_t attr_domain_offset = fast_offset < 0 ? -1 : slot_offset((PyTypeObject *)args[1], "_domain");
    if (attr_domain_offset < 0)
        return NULL;
    store((PyObject **)&domain_cls, args[0]);
    store((PyObject **)&attributes_cls, args[1]);
    store(&domains, args[2]);
    /* optional: without it, Domain keyword calls always go to Python */
    PyObject *keywords = PyDict_GetItemString(((PyTypeObject *)args[0])->tp_dict, "_by_keywords");
    domain_keywords_offset = keywords == NULL ? -1 : slot_offset((PyTypeObject *)args[0], "_by_keywords");
    if (domain_keywords_offset < 0)
        PyErr_Clear();
    domain_index_offset = index_offset;
    attributes_fast_offset = fast_offset;
    attributes_domain_offset = attr_domain_offset;
    /* optional: without them, get_event_attributes is the Python twin */
    Py_ssize_t offsets[ATTR_COUNT];
    for (int i = 0; i < ATTR_COUNT; i++) {
        offsets[i] = slot_offset((PyTypeObject *)args[1], attribute_names[i]);
        if (offsets[i] < 0) {
            PyErr_Clear();
            return Py_NewRef(Py_None);
        }
    }
    if (int64_kind == NULL) {
        int64_kind = PyLong_FromLong(NVTXCFFI_PAYLOAD_INT64);
        double_kind = PyLong_FromLong(NVTXCFFI_PAYLOAD_DOUBLE);
        zero_int = PyLong_FromLong(0);
        zero_float = PyFloat_FromDouble(0.0);
        minus_one = PyLong_FromLong(-1);
        if (int64_kind == NULL || double_kind == NULL || zero_int == NULL || zero_float == NULL || minus_one == NULL)
            return NULL;
    }
    memcpy(attribute_offsets, offsets, sizeof offsets);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(setup_first_sight_doc,
"setup_first_sight(FirstSight, ranges_sight, annotate_sight, inline_style, first_sight_attributes, pop_default, "
"first_sight_reused, prepare_at)\n--\n\n"
"Send a message inline for its first ``prepare_at - 1`` calls: ``ranges_sight`` and ``annotate_sight`` are the FirstSight "
"objects of the module-level calls and of annotate(); ``inline_style(color, domain, category)`` gives "
"(domain index, ARGB, category id); ``first_sight_attributes(annotate)`` makes such an object's "
"attributes; ``pop_default`` is the _close of a default-domain object; ``first_sight_reused(annotate)`` "
"prepares such an object entered a second time (True: it is now the cached object).");

static PyObject *setup_first_sight(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    long prepare = nargs == 8 && PyLong_Check(args[7]) ? PyLong_AsLong(args[7]) : -1;
    if (prepare == -1 && PyErr_Occurred())
        return NULL;
    if (nargs != 8 || prepare < 2 || prepare > NVTXCFFI_PREPARE_AT_MAX || !PyCallable_Check(args[6]) || !PyType_Check(args[0]) || !PyObject_TypeCheck(args[1], (PyTypeObject *)args[0])
        || !PyObject_TypeCheck(args[2], (PyTypeObject *)args[0]) || !PyCallable_Check(args[3])
        || !PyCallable_Check(args[4]) || !PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "setup_first_sight(FirstSight, ranges_sight, annotate_sight, inline_style, "
                                         "first_sight_attributes, pop_default, first_sight_reused, prepare_at)");
        return NULL;
    }
    if (str_met == NULL && (str_met = PyUnicode_InternFromString("met")) == NULL)
        return NULL;
    store(&ranges_sight, args[1]);
    store(&annotate_sight, args[2]);
    store(&inline_style_of, args[3]);
    store(&first_sight_attributes, args[4]);
    store(&pop_default_function, args[5]);
    store(&first_sight_reused, args[6]);
    prepare_at = (uint64_t)prepare;
    Py_RETURN_NONE;
}

/* Domain.pop_range takes nothing but self, so it is an ordinary C method (a method descriptor of
 * Domain, with CPython's own argument check): the interpreter calls those without a bound object
 * and, from 3.11, through a specialised instruction. */
PyDoc_STRVAR(domain_pop_doc,
"pop_range($self, /)\n--\n\n"
"Close this thread's innermost range of this domain (nothing pushed: the tool ignores it).");

static PyObject *domain_pop(PyObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *index = member_at(self, domain_index_offset);
    int value = index == NULL ? -1 : as_slot(index);
    if (value < 0) {
        PyErr_SetString(PyExc_AttributeError, "this Domain has no index (not made by get_domain)");
        return NULL;
    }
    nvtxcffi_shim.pop(value);
    RETURN_NONE_AFTER_NVTX();
}

static PyMethodDef domain_pop_def = {"pop_range", domain_pop, METH_NOARGS, domain_pop_doc};

PyDoc_STRVAR(domain_pop_method_doc,
"domain_pop_method()\n--\n\n"
"Domain.pop_range as a C method of Domain (after setup_domain).");

static PyObject *domain_pop_method(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (domain_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup_domain() first");
        return NULL;
    }
    return PyDescr_NewMethod(domain_cls, &domain_pop_def);
}

PyDoc_STRVAR(decorated_doc,
"decorated(func, slot, domain_index, attributes)\n--\n\n"
"``func`` wrapped so that each call is one range: push ``slot`` (or, when it is -1, "
"``attributes._emit(OP_PUSH)``), call, pop ``domain_index``. Copy the metadata with "
"functools.update_wrapper.");

static PyObject *decorated(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4 || !PyCallable_Check(args[0]) || !PyLong_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decorated(func, slot: int, domain_index: int, attributes)");
        return NULL;
    }
    long slot = PyLong_AsLong(args[1]), index = PyLong_AsLong(args[2]);
    if ((slot == -1 || index == -1) && PyErr_Occurred())
        return NULL;
    if (slot < -1 || slot > INT32_MAX || index < 0 || index > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "slot or domain_index out of range");
        return NULL;
    }
    function_object *self = (function_object *)function_new(decorated_call, args[0]);
    if (self == NULL)
        return NULL;
    self->slot = (int)slot;
    self->domain_index = (int)index;
    self->guard_recursion = !PyFunction_Check(args[0]);
    Py_INCREF(args[3]);
    self->attributes = args[3];
    return (PyObject *)self;
}

static const struct {
    const char *name;
    vectorcallfunc with_tool, without_tool;
} KINDS[] = {
    {"push_range", push_range_call, noop5_call},
    {"mark", mark_call, noop5_call},
    {"start_range", start_range_call, noop5_call},
    {"pop_range", pop_range_call, noop_pop_call},
    {"end_range", end_range_call, noop_end_call},
    {"Domain.push_range", domain_push_call, domain_push_call},
    {"Domain.mark", domain_mark_call, domain_mark_call},
    {"Domain.start_range", domain_start_call, domain_start_call},
    {"Domain.end_range", domain_end_call, domain_end_call},
    {"Domain.get_event_attributes", domain_attributes_call, domain_attributes_call},
};

/* Fast paths made before install() decided: they call their twin (which decides NVTX's state on
 * its first call, nvtx_cffi/_state.py) until install() gives each its with/without-tool body.
 * Filled at import (one per KINDS entry and import of the Python modules): bounded. */
#define MAX_PENDING 64
static struct {
    function_object *function; /* strong reference: module-level functions live for the process */
    size_t kind;
} pending[MAX_PENDING];
static int pending_count;

static PyObject *undecided_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return twin(op, args, nargsf, kwnames);
}

PyDoc_STRVAR(accelerate_doc,
"accelerate(kind, twin)\n--\n\n"
"The C fast path of the Python function ``twin`` (``kind``: its qualified name, e.g. "
"'push_range' or 'Domain.mark'); calls it for everything the fast path does not answer, and for "
"every call until install() decided. Copy the metadata with functools.update_wrapper.");

static PyObject *accelerate(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "accelerate(kind: str, twin: callable)");
        return NULL;
    }
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(args[0], KINDS[i].name) != 0)
            continue;
        if (installed)
            return function_new(active ? KINDS[i].with_tool : KINDS[i].without_tool, args[1]);
        if (pending_count >= MAX_PENDING) {
            PyErr_SetString(PyExc_RuntimeError, "accelerate(): too many fast paths before install()");
            return NULL;
        }
        PyObject *function = function_new(undecided_call, args[1]);
        if (function == NULL)
            return NULL;
        Py_INCREF(function);
        pending[pending_count].function = (function_object *)function;
        pending[pending_count].kind = i;
        pending_count++;
        return function;
    }
    PyErr_Format(PyExc_ValueError, "no fast path for %R", args[0]);
    return NULL;
}

PyDoc_STRVAR(install_doc,
"install(active)\n--\n\n"
"Decide, once per process, whether the fast paths call NVTX (``active``: a tool is attached and "
"NVTX_DISABLE is unset) or are the do-nothing versions; fast paths made before it (which called "
"their twins) get their bodies now. Needs bind() first.");

static PyObject *install(PyObject *module, PyObject *arg)
{
    int is_active = PyObject_IsTrue(arg);
    if (is_active < 0)
        return NULL;
    if (!NVTXCFFI_SHIM_BOUND()) {
        PyErr_SetString(PyExc_RuntimeError, "nvtx_cffi._speedups: bind() the shim first");
        return NULL;
    }
    if (installed && (!is_active) != (!active)) {
        PyErr_SetString(PyExc_RuntimeError, "nvtx_cffi._speedups: install() decided otherwise already");
        return NULL;
    }
    active = is_active;
    installed = 1;
    for (int i = 0; i < pending_count; i++) {
        size_t kind = pending[i].kind;
        pending[i].function->vectorcall = active ? KINDS[kind].with_tool : KINDS[kind].without_tool;
        Py_CLEAR(pending[i].function);
    }
    pending_count = 0;
    if (PyModule_AddIntConstant(module, "active", is_active) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef accel_functions[] = {
    {"install", install, METH_O, install_doc},
    {"setup_annotate", FUNC_CAST(setup_annotate), METH_FASTCALL, setup_annotate_doc},
    {"array_dtype_checked", FUNC_CAST(array_dtype_checked), METH_FASTCALL, array_dtype_checked_doc},
    {"_canon_index", canon_index, METH_O, canon_index_doc},
    {"setup_ranges", FUNC_CAST(setup_ranges), METH_FASTCALL, setup_ranges_doc},
    {"setup_domain", FUNC_CAST(setup_domain), METH_FASTCALL, setup_domain_doc},
    {"setup_first_sight", FUNC_CAST(setup_first_sight), METH_FASTCALL, setup_first_sight_doc},
    {"decorated", FUNC_CAST(decorated), METH_FASTCALL, decorated_doc},
    {"domain_pop_method", domain_pop_method, METH_NOARGS, domain_pop_method_doc},
    {"accelerate", FUNC_CAST(accelerate), METH_FASTCALL, accelerate_doc},
    {NULL, NULL, 0, NULL},
};

static int intern_all(PyObject **out, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (out[i] == NULL && (out[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

int nvtxcffi_accel_init(PyObject *module)
{
    static const char *const range_names[5] = {"message", "color", "domain", "category", "payload"};
    static const char *const pop_names[1] = {"domain"};
    static const char *const end_names[1] = {"range_id"};
    static const char *const domain_names[4] = {"message", "color", "category", "payload"};
    if (intern_all(range_params, range_names, 5) < 0 || intern_all(pop_params, pop_names, 1) < 0
        || intern_all(end_params, end_names, 1) < 0 || intern_all(domain_params, domain_names, 4) < 0)
        return -1;
    if ((str_emit == NULL && (str_emit = PyUnicode_InternFromString("_emit")) == NULL)
        || (str_dtype == NULL && (str_dtype = PyUnicode_InternFromString("dtype")) == NULL)
        || (op_push == NULL && (op_push = PyLong_FromLong(NVTXCFFI_OP_PUSH)) == NULL))
        return -1;
    if (PyType_Ready(&annotate_base_type) < 0 || PyType_Ready(&function_type) < 0)
        return -1;
#if PY_VERSION_HEX < 0x030E0000
    if (PyType_Ready(&special_type) < 0 || install_special_methods() < 0)
        return -1;
#endif
    if (PyModule_AddFunctions(module, accel_functions) < 0)
        return -1;
    Py_INCREF(&annotate_base_type);
    if (PyModule_AddObject(module, "AnnotateBase", (PyObject *)&annotate_base_type) < 0) {
        Py_DECREF(&annotate_base_type);
        return -1;
    }
    Py_INCREF(&function_type);
    if (PyModule_AddObject(module, "function", (PyObject *)&function_type) < 0) {
        Py_DECREF(&function_type);
        return -1;
    }
    return 0;
}
