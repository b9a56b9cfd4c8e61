/* accel_first_sight.c - a message met for the first time goes with its call (part of
 * nvtx_cffi._speedups).
 *
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
 * shared by two texts only changes which call prepares a message.
 */
#include "accel.h"

#define SEEN_COUNT_BITS 6 /* the low bits of an entry: how often it was met (1..prepare_at - 1) */
#define SEEN_COUNT_MASK ((UINT64_C(1) << SEEN_COUNT_BITS) - 1)
#if NVTXCFFI_PREPARE_AT_MAX - 1 > SEEN_COUNT_MASK || NVTXCFFI_PREPARE_AT < 2 || NVTXCFFI_PREPARE_AT > NVTXCFFI_PREPARE_AT_MAX
#error "NVTXCFFI_PREPARE_AT(_MAX) must be in [2, 2**SEEN_COUNT_BITS]"
#endif
static uint64_t prepare_at = NVTXCFFI_PREPARE_AT; /* _domain.PREPARE_AT, given by setup_first_sight */
static PyObject *str_met;         /* "met" (FirstSight.met) */
static PyObject *inline_style_of; /* _domain._inline_style(color, domain, category) */
/* and, read by the callers (accel.h): */
PyObject *ranges_sight;
PyObject *annotate_sight;
PyObject *first_sight_attributes;
PyObject *first_sight_reused;
PyObject *pop_default_function;

#define SEEN_BUCKETS 16384 /* a power of two; 4 hashes each: 512 KiB, FirstSight's bound (65536) */
#define SEEN_WAYS 4
static uint64_t seen_hashes[SEEN_BUCKETS][SEEN_WAYS]; /* text hashes met (with domain and caller), 0 none */

#define INLINE_STYLES 64 /* a power of two */
static struct {
    PyObject *key[3]; /* colour, domain, category (strong references; exact str, int, float or None) */
    int domain_index;
    uint32_t argb, category;
} inline_styles[INLINE_STYLES];

/* (domain index, ARGB, category id) of colour/domain/category objects as _domain._inline_style
 * gives them: 1 found, 0 not here (an argument Python must check: the caller's Python path raises
 * what it must), -1 raised (not a bad argument: a memory error, an interrupt). */
int inline_style(PyObject *color, PyObject *domain, PyObject *category, int *index, uint32_t *argb,
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

/* sight.met(key): FirstSight remembers `key` as met. 0 or -1 raised. */
static int first_seen(PyObject *sight, PyObject *key);

/* Whether C sends UTF-8 `text` (of `size` bytes) in domain `index` with its call: 1 yes, one of its
 * first prepare_at - 1 sights (now counted), 0 met that often (and now in `sight` too, so
 * that the Python path prepares it; `key`: its key there, made on demand: message or (message,
 * domain)), -1 raised. */
int first_sight(int caller, const char *text, Py_ssize_t size, int index, PyObject *sight, PyObject *message,
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

static PyMethodDef first_sight_functions[] = {
    {"setup_first_sight", FUNC_CAST(setup_first_sight), METH_FASTCALL, setup_first_sight_doc},
    {NULL, NULL, 0, NULL},
};

int accel_first_sight_init(PyObject *module)
{
    return PyModule_AddFunctions(module, first_sight_functions);
}
