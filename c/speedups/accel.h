/* accel.h - what the accel*.c files of nvtx_cffi._speedups share (accel.c says what they do).
 *
 * accel.c                the seam: install() and accelerate() pick each fast path's body; init
 * accel_types.c          the state shared with Python, in C types: DomainBase, EventAttributesBase,
 *                        Caches (their Python twins: nvtx_cffi/_bases.py)
 * accel_caches.c         the identity tables calls are answered from: keyword binding, f-string
 *                        texts, styles, call sites, call entries
 * accel_payloads.c       array payloads: dtypes checked once, sent through _payload.emit
 * accel_first_sight.c    a message met for the first time goes with its call (FirstSight in C)
 * accel_annotate.c       AnnotateBase: annotate objects' fields and __enter__/__exit__
 * accel_annotate_call.c  calls of the annotate class, answered from annotate's caches
 * accel_ranges.c         module-level push_range, mark, start_range, pop_range, end_range
 * accel_domain.c         Domain methods
 * accel_function.c       the C function type: decorated functions, and the fast paths' callables
 *
 * The hot paths' helpers are static inline here, so that each file inlines them as one file did;
 * what the files share besides has hidden visibility: PC-relative access and direct calls, as for
 * static symbols, and nothing exported from the module.
 */
#ifndef NVTX_CFFI_ACCEL_H
#define NVTX_CFFI_ACCEL_H

#include "speedups.h"

#include <structmember.h>

#pragma GCC visibility push(hidden)

/* ---- state set by install() and the setup functions ----------------------------------------- */
extern int active; /* _state.ACTIVE: a tool is attached and NVTX_DISABLE is unset (accel.c) */

extern PyTypeObject annotate_base_type; /* AnnotateBase (accel_annotate.c) */
extern PyTypeObject *annotate_cls;      /* nvtx_cffi.annotate, its Python subclass (accel_annotate_call.c) */
void annotate_seal(void);              /* seal annotate_cls (immutable) once install() decided */
extern PyObject *payload_attributes;    /* _annotate._payload_attributes(template, payload) (accel_annotate.c) */
extern PyObject *payload_emit;          /* _payload.emit(op, slot, domain_index, inline, payload) (accel_payloads.c) */

/* accel_first_sight.c */
extern PyObject *ranges_sight;           /* _ranges._first_sight (a FirstSight) */
extern PyObject *annotate_sight;         /* _annotate._first_sight */
extern PyObject *first_sight_attributes; /* _annotate._first_sight_attributes(annotate) */
extern PyObject *first_sight_reused;     /* _annotate._first_sight_reused(annotate) -> cached? */
extern PyObject *pop_default_function;   /* _annotate._pop_default: _close of a default-domain object */

/* The parameter names of the module-level range calls, interned (accel_ranges.c). */
extern PyObject *range_params[5]; /* message, color, domain, category, payload */

/* ---- the two object types ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *args;        /* _args: (message, color, domain, category, payload) as given */
    PyObject *attributes;  /* _attributes: the prepared EventAttributes */
    PyObject *close;       /* _close: what the pure-Python wrappers call to close the range */
    int slot;              /* _slot: the C slot when one push suffices, else -1 */
    int domain_index;      /* _domain_index */
    int shared;            /* held by annotate's cache (so alive until exit): may keep `bound` */
    PyObject *bound[2];    /* __enter__ and __exit__ bound to this object, made on first use */
    /* annotate(..., payload=value) made by the class call: the cached object of the same arguments
     * without the payload (its slot, domain and close), and the value, converted once. args and
     * attributes are made from these when Python first asks for them. */
    PyObject *template_;
    PyObject *payload;
    /* templates: the object last made for a per-call payload, handed out again (with the new value)
     * while nothing but this template holds it (see annotate_with_payload) */
    PyObject *carrier;
    int is_carrier;
    int payload_kind;      /* NVTXREC_PT_*: NONE when not made so, EXT an array for payload_emit */
    int payload_slot;
    int64_t payload_int;
    double payload_float;
    /* made at its message's first sight (annotate_first_sight): __enter__ sends args[0] inline
     * with this colour and category; attributes are made when Python first asks for them */
    int inline_message;
    uint32_t inline_argb, inline_category;
    /* _first_sight: 1 made at its message's first sight (by the class call or annotate.__new__), 2
     * entered once since; entered again, the object is reused (a variable, `with a:` in a loop): it
     * prepares itself (_annotate._first_sight_reused), 0 */
    int first_sight;
} annotate_object;

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

static inline PyObject *twin(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(((function_object *)op)->func, args, nargsf, kwnames);
}

/* ---- each part adds its functions, types and constants to the module (0, or -1 raised) ------- */
int accel_types_init(PyObject *module);
int accel_caches_init(PyObject *module);
int accel_payloads_init(PyObject *module);
int accel_first_sight_init(PyObject *module);
int accel_annotate_init(PyObject *module);
int accel_annotate_call_init(PyObject *module);
int accel_ranges_init(PyObject *module);
int accel_domain_init(PyObject *module);
int accel_function_init(PyObject *module);

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Bind vectorcall arguments to the positional-or-keyword parameters names[0..n); the first
 * `required` must be given. Unbound ones are NULL in out. Returns 1 when bound, 0 when the call
 * does not fit (too many, unknown, repeated or missing arguments): callers then call the Python
 * twin, which raises exactly the error Python raises. */
int bind_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **names, int n, int required,
                   PyObject **out);

/* dict[key] as Python's `try: d[key] except (KeyError, TypeError):` sees it: 1 found (*value
 * borrowed), 0 absent or unhashable, -1 another error (raised). */
static inline int lookup(PyObject *dict, PyObject *key, PyObject **value)
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

/* A cached slot number (the caches hold small non-negative ints); -1 when not usable. */
static inline int as_slot(PyObject *value)
{
    long long small;
    if (LIKELY(small_int(value, &small))) /* (no call: PyLong_AsLong is ~30 instructions) */
        return small < 0 || small > INT32_MAX ? -1 : (int)small;
    if (!PyLong_CheckExact(value))
        return -1;
    long slot = PyLong_AsLong(value);
    if (slot == -1 && PyErr_Occurred())
        PyErr_Clear(); /* too big for a long */
    return slot < 0 || slot > INT32_MAX ? -1 : (int)slot;
}

/* ---- the state shared with Python (accel_types.c; the Python twins: nvtx_cffi/_bases.py) ----- */

typedef struct {
    PyObject_HEAD
    PyObject *index;       /* _index: the shim's domain index (an int) */
    PyObject *by_keywords; /* _by_keywords: (message, color, category) -> EventAttributes */
} domain_base_object;

/* EventAttributesBase's fields, in this order (accel_types.c names them _domain ... _shared). */
enum { ATTR_DOMAIN, ATTR_MESSAGE, ATTR_COLOR, ATTR_CATEGORY, ATTR_PAYLOAD, ATTR_SLOT, ATTR_FIELDS, ATTR_INLINE,
       ATTR_FAST, ATTR_SHARED, ATTR_COUNT };

typedef struct {
    PyObject_HEAD
    PyObject *field[ATTR_COUNT]; /* NULL: not set */
} attributes_base_object;

typedef struct {
    PyObject_HEAD
    PyObject *annotate_by_message; /* message -> annotate (nvtx_cffi/_annotate.py fills it) */
    PyObject *annotate;            /* (cls, message, color, domain, category, payload, payload type) -> annotate */
    PyObject *slot;                /* (message, color, domain, category) -> slot (nvtx_cffi/_ranges.py) */
    PyObject *blue_slots;          /* message -> slot of push_range/mark(message) */
    PyObject *uncoloured_slots;    /* message -> slot of start_range(message) */
    PyObject *domains;             /* name -> Domain (nvtx_cffi/_domain.py) */
} caches_object;

extern PyTypeObject domain_base_type;     /* DomainBase */
extern PyTypeObject attributes_base_type; /* EventAttributesBase */
extern caches_object *caches;             /* the one Caches instance (made at the module's init) */

/* The shim's index of the domain of DomainBase instance `domain`; -1 when it has none. */
static inline int domain_index_of_base(PyObject *domain)
{
    PyObject *index = ((domain_base_object *)domain)->index;
    return index == NULL ? -1 : as_slot(index);
}

/* A field of EventAttributesBase instance `attributes` (NULL: not set). */
static inline PyObject *attribute_field(PyObject *attributes, int which)
{
    return ((attributes_base_object *)attributes)->field[which];
}

/* The setup functions' store: a strong reference, replacing the one held. */
static inline void store(PyObject **slot, PyObject *value)
{
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
}

/* out[i] = names[i] interned, where still NULL: 0, or -1 raised. */
static inline int intern_all(PyObject **out, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (out[i] == NULL && (out[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return 0;
}

/* ---- messages by text (accel_caches.c: the first str object seen of an f-string's text) ------- */
#define CANON_COUNT 1024 /* a power of two */
#define CANON_TEXT_MAX 256
typedef struct {
    PyObject *str;    /* strong reference, or NULL */
    uint64_t hash;
    int message_slot; /* the slot of push_range(str)/mark(str), -1 not known yet */
} canon_entry;
extern canon_entry canon[CANON_COUNT];

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

/* The text of a str that goes through canon, and its text_hash. */
typedef struct {
    const void *data;
    Py_ssize_t length;
    int kind;
    uint64_t hash;
} canon_text;

/* Whether `message` goes through canon: an exact str whose hash is not cached yet (a new object
 * each call, as an f-string's is; a constant's hash is cached after its first use), of at most
 * CANON_TEXT_MAX bytes; *t its text. The cached hash is a public field of the str's struct. */
static inline int canon_text_of(PyObject *message, canon_text *t)
{
    if (!PyUnicode_CheckExact(message) || ((PyASCIIObject *)message)->hash != -1)
        return 0;
#if PY_VERSION_HEX < 0x030C0000
    /* a legacy str (PyUnicode_FromUnicode(NULL, n), until 3.12) has no kind or data yet */
    if (!PyUnicode_IS_READY(message))
        return 0;
#endif
    t->kind = PyUnicode_KIND(message);
    t->length = PyUnicode_GET_LENGTH(message);
    Py_ssize_t nbytes = t->length * t->kind; /* the text exists: no overflow */
    if (nbytes > CANON_TEXT_MAX)
        return 0;
    t->data = PyUnicode_DATA(message);
    t->hash = text_hash(t->data, nbytes, t->kind);
    return 1;
}

/* Whether n bytes at a and b are equal: up to 16 by two overlapping loads each (no call; f-string
 * messages are mostly that short), longer ones by memcmp. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, size_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + n - 8, 8);
        memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4 && n < 8) {
        uint32_t a0, a1, b0, b1;
        memcpy(&a0, a, 4);
        memcpy(&b0, b, 4);
        memcpy(&a1, a + n - 4, 4);
        memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return memcmp(a, b, n) == 0;
}

/* The str canon holds for text t (borrowed: no code may run while it is used), or NULL. */
static inline PyObject *canon_match(const canon_text *t)
{
    const canon_entry *e = &canon[canon_at(t->hash)];
    PyObject *s = e->str;
    if (s == NULL || e->hash != t->hash || PyUnicode_KIND(s) != t->kind || PyUnicode_GET_LENGTH(s) != t->length)
        return NULL;
    return same_bytes(PyUnicode_DATA(s), t->data, (size_t)(t->length * t->kind)) ? s : NULL;
}

/* The str canon holds for the text of `message` (borrowed), or NULL: not there, or `message` does
 * not go through canon. Looks only: canonical_entry enters a text. */
static inline PyObject *canon_peek(PyObject *message)
{
    canon_text t;
    return canon_text_of(message, &t) ? canon_match(&t) : NULL;
}

/* `message` or the str of the same text seen first, a new reference; *entry: its index in canon,
 * or -1 when it does not go through the table. */
PyObject *canonical_entry(PyObject *message, int *entry);

static inline PyObject *canonical_message(PyObject *message) /* a new reference */
{
    int entry;
    return canonical_entry(message, &entry);
}

/* A str whose hash is cached: used before (a constant of some code, after its first use). */
static inline int hash_cached(PyObject *s)
{
    return PyUnicode_CheckExact(s) && ((PyASCIIObject *)s)->hash != -1;
}

/* ---- payloads --------------------------------------------------------------------------------- */

/* A per-call payload as the shim wants it (kind NVTXREC_PT_*, int64 bits, double): 1 when
 * converted; 0 when it is not an exact int or float that fits (nothing raised): the Python twin then
 * converts it or raises, with its own messages. The payload is a value: nothing is kept. */
static inline int payload_c_general(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue);

static inline int payload_c(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue)
{
    long long small;
    if (small_int(payload, &small)) { /* step numbers, sizes: no call */
        *kind = NVTXREC_PT_INT64;
        *ivalue = (int64_t)small;
        *fvalue = 0.0;
        return 1;
    }
    if (PyFloat_CheckExact(payload)) {
        *kind = NVTXREC_PT_DOUBLE;
        *ivalue = 0;
        *fvalue = PyFloat_AS_DOUBLE(payload);
        return 1;
    }
    return payload_c_general(payload, kind, ivalue, fvalue);
}

/* Ints beyond one digit: int64, else the bits of a uint64. */
static inline int payload_c_general(PyObject *payload, int *kind, int64_t *ivalue, double *fvalue)
{
    if (PyLong_CheckExact(payload)) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(payload, &overflow);
        if (overflow == 0 && !(value == -1 && PyErr_Occurred())) {
            *kind = NVTXREC_PT_INT64;
            *ivalue = (int64_t)value;
            *fvalue = 0.0;
            return 1;
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(payload);
            if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
                *kind = NVTXREC_PT_UINT64;
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

/* Array payloads (accel_payloads.c): an exact ndarray of a dtype _payload.fields_for checked, and
 * _payload.emit of one with a prepared slot (0, or -1 raised). */
int array_checked(PyObject *payload);
int emit_array(int opcode, int slot, int domain_index, PyObject *array);

/* With a tool: an array_checked payload that __enter__ may send through payload_emit, as the
 * attributes would (0-d included: its dtype's scalar schema). */
static inline int array_sendable(PyObject *payload)
{
    return payload_emit != NULL && array_checked(payload);
}

/* attributes._emit(OP_PUSH): the general push (payload or inline message). 0 or -1 (raised)
 * (accel_annotate.c). */
int emit_push(PyObject *attributes);

/* Send push/mark/start_range with a slot, and the payload if any: start_range's id, else 0. The
 * one dispatch of every accelerated call that has its slot (module-level, Domain, annotate). */
static inline uint64_t send_slot(int opcode, int slot, int kind, int64_t ivalue, double fvalue)
{
    if (kind != NVTXREC_PT_NONE)
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

/* An exact int that fits a uint64_t, into *out; 0 when not (nothing raised). */
static inline int as_range_id(PyObject *value, uint64_t *out)
{
    long long small;
    if (LIKELY(small_int(value, &small))) { /* (a tool's ids count from 1 or so; see as_slot) */
        if (small < 0)
            return 0;
        *out = (uint64_t)small;
        return 1;
    }
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

/* An exact int that fits an int (a domain index as start_range pairs it with the id), into *out; 0
 * when not (nothing raised). An index the shim does not know is the shim's to ignore. */
static inline int as_domain_index(PyObject *value, int *out)
{
    long long index;
    if (!small_int(value, &index)) {
        int overflow = 0;
        if (!PyLong_CheckExact(value))
            return 0;
        index = PyLong_AsLongLongAndOverflow(value, &overflow); /* (an exact int: only overflow fails) */
        if (overflow)
            return 0;
    }
    if (index < INT32_MIN || index > INT32_MAX)
        return 0;
    *out = (int)index;
    return 1;
}

/* ---- styles (accel_caches.c: what a call site passes besides the message and the payload) ---- */
enum { STYLE_SLOT = 1, STYLE_ANNOTATE = 2, STYLE_DOMAIN = 3 };

typedef struct {
    int kind;          /* STYLE_*, 0 when unused */
    int domain_index;  /* STYLE_SLOT: the index of the domain named key[1], -1 unknown */
    PyObject *key[3];  /* STYLE_SLOT/ANNOTATE: colour, domain, category; STYLE_DOMAIN: Domain, colour, category */
    PyObject *by_message;  /* dict: message -> answer */
} style_t;

static inline int immutable_key(PyObject *o)
{
    return o == Py_None || PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o);
}

/* Whether a cache keyed by equality may answer for colour or category `o` (accel_caches.c). */
int keyable(PyObject *o);

/* A hash of three objects' addresses (and a kind): the entry of a table keyed by their identity. */
static inline uint64_t identity_hash(int kind, PyObject *a, PyObject *b, PyObject *c)
{
    uint64_t h = (uint64_t)kind * 0x9E3779B97F4A7C15ull;
    h = (h ^ ((uintptr_t)a >> 4)) * 0xff51afd7ed558ccdull;
    h = (h ^ ((uintptr_t)b >> 4)) * 0xc4ceb9fe1a85ec53ull;
    h = (h ^ ((uintptr_t)c >> 4)) * 0xff51afd7ed558ccdull;
    return h >> 40;
}

/* The answer (borrowed) for `message` in style (kind, a, b, c), or NULL (nothing raised); *style
 * is the matching entry or NULL. Remember `answer` for `message` in style (kind, a, b, c). */
PyObject *style_get(int kind, PyObject *a, PyObject *b, PyObject *c, PyObject *message, style_t **style);
void style_put(int kind, PyObject *a, PyObject *b, PyObject *c, int domain_index, PyObject *message, PyObject *answer);

/* ---- call sites (accel_caches.c) -------------------------------------------------------------- */
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
    uint64_t call;          /* site_call(the call (SITE_* + opcode), positional count); 0: unused */
    int n;                  /* vector length (1..5) */
    int payload_at;         /* the payload's index in the vector, -1 when not passed */
    int slot, domain_index; /* domain_index >= 0 */
    PyObject *kwnames;      /* strong reference, or NULL */
    PyObject *args[5];      /* strong references; NULL at payload_at */
    PyObject *object;       /* SITE_ANNOTATE: the annotate object without the payload (strong) */
};
extern site_entry site_calls[SITE_CALLS];

/* A call (SITE_* + opcode) with nargs positionals, as one word: one compare. */
static inline uint64_t site_call(int opcode, Py_ssize_t nargs)
{
    return (uint64_t)opcode << 32 | (uint64_t)nargs;
}

/* One multiply: the entry is checked word by word, so a weaker spread costs hits, never answers
 * (kwnames is shifted apart from first so that the two addresses do not cancel). */
static inline site_entry *site_at(int opcode, PyObject *kwnames, Py_ssize_t nargs, PyObject *first)
{
    uint64_t h = ((uintptr_t)first >> 4) ^ ((uint64_t)(uintptr_t)kwnames << 9) ^ site_call(opcode, nargs);
    return &site_calls[((h * 0x9E3779B97F4A7C15ull) >> 40) & (SITE_CALLS - 1)];
}

/* The entry answering exactly this call, whose first argument (the call has one, positional or
 * keyword) is taken as `first` (args[0] or what stands for it), or NULL. */
static inline const site_entry *site_find_first(int opcode, PyObject *first, PyObject *const *args, Py_ssize_t nargs,
                                                PyObject *kwnames)
{
    const site_entry *e = site_at(opcode, kwnames, nargs, first);
    /* the same call and kwnames tuple (held by the entry): the same vector length, e->n */
    if (e->call != site_call(opcode, nargs) || e->kwnames != kwnames)
        return NULL;
    if (e->args[0] != first && e->payload_at != 0)
        return NULL;
    for (int i = 1; i < e->n; i++)
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

/* Remember this call, answered by slot/domain_index (accel_caches.c says when). */
void site_put(int opcode, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int payload_given, int slot,
              int domain_index, PyObject *object);

/* ---- call entries (the tables are accel_ranges.c's and accel_domain.c's) ---------------------- */

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
void call_entry_put(call_entry *e, PyObject *const *key, int slot, int domain_index);

/* ---- first sight (accel_first_sight.c) ------------------------------------------------------- */
enum { SEEN_RANGES = 1, SEEN_ANNOTATE = 2 };

/* (domain index, ARGB, category id) of colour/domain/category objects as _domain._inline_style
 * gives them: 1 found, 0 not here (the caller's Python path checks them), -1 raised. */
int inline_style(PyObject *color, PyObject *domain, PyObject *category, int *index, uint32_t *argb,
                 uint32_t *category_id);
/* Whether C sends UTF-8 `text` in domain `index` with its call: 1 yes, 0 met often enough (now
 * prepared by the Python path), -1 raised. */
int first_sight(int caller, const char *text, Py_ssize_t size, int index, PyObject *sight, PyObject *message,
                PyObject *domain);

/* The UTF-8 text NVTX gets for exact str `message` (alive while the str is), or NULL with nothing
 * raised when it cannot go (a NUL, a lone surrogate): the Python path raises its error. */
static inline const char *inline_text(PyObject *message, Py_ssize_t *size)
{
    const char *text = PyUnicode_AsUTF8AndSize(message, size); /* an ASCII str's own data: no copy */
    if (text == NULL) {
        PyErr_Clear();
        return NULL;
    }
    return (Py_ssize_t)strlen(text) == *size ? text : NULL;
}

/* ---- across the parts ------------------------------------------------------------------------- */
int domain_index_by_name(PyObject *name);                    /* accel_domain.c */
int domain_index_of(PyObject *domain);                       /* accel_domain.c: -1 not a Domain */
PyObject *function_new(vectorcallfunc call, PyObject *func); /* accel_function.c */
#if PY_VERSION_HEX >= 0x030E0000
int own_special_methods(PyTypeObject *cls); /* accel_annotate.c */
#endif

/* The fast paths' bodies that accel.c's install() picks: with a tool, and without one. */
#define FAST_PATH(name) PyObject *name(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
FAST_PATH(push_range_call);
FAST_PATH(mark_call);
FAST_PATH(start_range_call);
FAST_PATH(pop_range_call);
FAST_PATH(end_range_call);
FAST_PATH(noop5_call);
FAST_PATH(noop_pop_call);
FAST_PATH(noop_end_call);
FAST_PATH(domain_push_call);
FAST_PATH(domain_mark_call);
FAST_PATH(domain_start_call);
FAST_PATH(domain_end_call);
FAST_PATH(domain_attributes_call);

#pragma GCC visibility pop

#endif
