/* accel_caches.c - the identity tables the fast paths answer calls from (part of nvtx_cffi._speedups).
 *
 * A call site passes the same objects every time (constants of its code): keyword names tuples,
 * messages, colours, domains, categories. These tables answer by those objects' addresses, before
 * any dict: keyword binding per kwnames tuple, the first str of an f-string's text, styles
 * (colour, domain, category) with their messages, raw argument vectors (call sites), and the
 * entries of the callers' (message, colour, domain, category) tables.
 */
#include "accel.h"

/* The parameter index of each keyword name, per (parameter list, kwnames tuple) seen: a call site
 * passes the same kwnames tuple (a constant of its code) every time. Direct-mapped; holds a
 * reference to each tuple, so an address is not reused while mapped. */
#define BOUND_KWNAMES 64 /* a power of two */
static struct {
    PyObject *kwnames; /* strong reference, or NULL */
    PyObject **names;
    signed char map[8];
} bound_kwnames[BOUND_KWNAMES];

int bind_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **names, int n, int required,
                   PyObject **out)
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

/* ---- messages by text: an f-string message is a new str object on every call, equal to one seen
 * before. Its hash is not computed yet (CPython's siphash: ~140 instructions for a short one) and a
 * dict lookup by it costs ~150 more. A small direct-mapped table keyed by a cheap hash of the
 * characters gives the first str object seen with that text (a strong reference), so the identity
 * tables and the dicts (whose hash that object caches) answer an f-string as they answer a
 * constant. Only strs whose hash is not cached yet go through it: a constant's is, after its first
 * use. Bounded: CANON_COUNT entries of at most CANON_TEXT_MAX bytes; a colliding text replaces
 * the older one, which only costs the next such call the dict lookup again. */
canon_entry canon[CANON_COUNT];

/* `message` or the str of the same text seen first: a NEW reference, so that the caller may run
 * Python code while it holds it (a dict lookup's __eq__, a GC pass at an allocation, a payload
 * check): that code may call nvtx-cffi with another text that replaces this entry, which frees the
 * str the table held. *entry: its index in the table, or -1 when it does not go through it. */
PyObject *canonical_entry(PyObject *message, int *entry)
{
    canon_text t;
    *entry = -1;
    if (!canon_text_of(message, &t))
        return Py_NewRef(message);
    size_t at = canon_at(t.hash);
    *entry = (int)at;
    PyObject *same = canon_match(&t);
    if (same != NULL)
        return Py_NewRef(same);
    PyObject *old = canon[at].str;
    Py_INCREF(message);
    canon[at].str = message;
    canon[at].hash = t.hash;
    canon[at].message_slot = -1;
    Py_XDECREF(old); /* a str: no code runs */
    return Py_NewRef(message);
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

/* ---- styles: what a call site passes besides the message and the payload, by identity ---------
 * A call site passes the same colour, domain and category objects on every call (constants of its
 * code), so these are matched by identity in a small direct-mapped table instead of building and
 * hashing an argument tuple. Each entry (a "style") maps messages to what the Python caches answer
 * for them (a slot number, or a cached annotate object), so f-string messages cost one dict
 * lookup. Identity stands for equality only for immutable objects: exact str, int, float and None
 * (and Domain objects, which live as long as the process). Only answers found in the Python caches
 * enter, and the payload never does. Bounded: STYLE_COUNT entries of at most STYLE_MESSAGES
 * messages; a colliding style replaces the older one. */
#define STYLE_COUNT 256 /* a power of two */
#define STYLE_MESSAGES 4096

static style_t styles[STYLE_COUNT];

/* Whether a cache keyed by equality may answer for colour or category `o` (nvtx_cffi/_validate.py's
 * keyable, the same rule): True == 1 == 1.0, yet a bool or a float colour is an error. None, an
 * exact str, an integer-like that is not a bool, and 3- or 4-tuples of exact ints and floats only;
 * anything else takes the validating path. */
int keyable(PyObject *o)
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

static inline style_t *style_at(int kind, PyObject *a, PyObject *b, PyObject *c)
{
    return &styles[identity_hash(kind, a, b, c) & (STYLE_COUNT - 1)];
}

/* The answer (borrowed) for `message` in style (kind, a, b, c), or NULL (nothing raised); *style
 * is the matching entry or NULL. */
PyObject *style_get(int kind, PyObject *a, PyObject *b, PyObject *c, PyObject *message, style_t **style)
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
void style_put(int kind, PyObject *a, PyObject *b, PyObject *c, int domain_index, PyObject *message,
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

/* The call site table (accel.h: what an entry holds; site_find answers a call from it). */
site_entry site_calls[SITE_CALLS];

/* Remember this call, answered by slot/domain_index, when every argument but the payload (and
 * the Domain of a Domain call, args[0]) is an exact str/int/float/None and the payload is not the
 * first. `payload_given`: the call passed a payload (by position 4 of a module-level call, or by
 * keyword). */
void site_put(int opcode, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int payload_given,
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
    e->call = site_call(opcode, nargs);
    e->n = (int)n;
    e->payload_at = payload_at;
    e->slot = slot;
    e->domain_index = domain_index;
    for (int i = 0; i < 7; i++) /* strs, ints, floats, None, a tuple of str, an annotate: no code runs */
        Py_XDECREF(old[i]);
}

/* Map `key` (references taken) to (slot, domain_index) in entry e, replacing what it held. */
void call_entry_put(call_entry *e, PyObject *const *key, int slot, int domain_index)
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

static PyMethodDef caches_functions[] = {
    {"_canon_index", canon_index, METH_O, canon_index_doc},
    {NULL, NULL, 0, NULL},
};

int accel_caches_init(PyObject *module)
{
    return PyModule_AddFunctions(module, caches_functions);
}
