/* accel_annotate_call.c - calls of the annotate class (part of nvtx_cffi._speedups).
 *
 * Calls of the annotate class itself: repeated annotate(...) calls are answered from annotate's
 * caches exactly as annotate.__new__ would answer them; anything else is the ordinary class call
 * (type.__call__ -> annotate.__new__ in Python). Installed as the class's tp_vectorcall, which
 * CPython uses for calls of a class object when set. Objects found in (or just put into) the
 * cache are marked shared.
 */
#include "accel.h"

PyTypeObject *annotate_cls;           /* nvtx_cffi.annotate (a Python subclass of AnnotateBase) */
static PyObject *payload_check;       /* _payload.payload_fields(payload): raises/warns for bad payloads */

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
        return lookup(caches->annotate_by_message, message, found);
    style_t *style;
    *found = style_get(STYLE_ANNOTATE, a[1], a[2], a[3], message, &style);
    if (*found != NULL)
        return 1;
    if (!keyable(a[1]) || !keyable(a[3]))
        return 0; /* the class call validates */
    PyObject *key = PyTuple_Pack(7, callable, message, a[1], a[2], a[3], Py_None, (PyObject *)Py_TYPE(Py_None));
    if (key == NULL)
        return -1;
    int hit = lookup(caches->annotate, key, found);
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

/* annotate(message) by the message's identity: a call site passes the same str constant every
 * time, and a direct-mapped table answers before canonical_message and the _by_message dict (~130
 * instructions of ~870 for `with annotate("x"):`). Only exact strs whose hash was cached before the
 * call enter (constants), and the first str of an f-string's text (an f-string is a new object
 * every call: it finds the entry of that str through canon_peek). Both
 * references are held, so an address is not reused while mapped; _by_message only grows, so what
 * it answered stays its answer. Kept apart from the call-site table (accel_caches.c), which would
 * answer the same call: through it `with annotate("x"):` costs ~60 instructions more (callgrind: 791
 * against 731 above the loop), the margin of the >= 8x target without a tool. */
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

static PyObject *annotate_class_slow(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                     PyObject *kwnames, int site_looked, const site_entry *site);

static PyObject *annotate_class_fresh(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames);

/* The class call's hot paths, kept small (no stack frame to speak of): annotate(message) by the
 * message's address, and the call site table for calls whose first argument stands for itself (not
 * a str whose hash is not cached yet: annotate_class_fresh looks those up by their text's first
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
            if (!hash_cached(message))
                return annotate_class_fresh(callable, args, nargs, kwnames);
        } else if (nargs == 0 || hash_cached(args[0]) || !PyUnicode_CheckExact(args[0])) {
            const site_entry *site = site_find(SITE_ANNOTATE, args, nargs, kwnames);
            if (site != NULL && (site->payload_at < 0 || args[site->payload_at] == Py_None)) {
                Py_INCREF(site->object);
                return site->object;
            }
            return annotate_class_slow(callable, args, nargs, kwnames, 1, site);
        } else {
            return annotate_class_fresh(callable, args, nargs, kwnames);
        }
    }
    return annotate_class_slow(callable, args, nargs, kwnames, 0, NULL);
}

/* The class call with a first argument that may be a new str each call (an f-string's), answered
 * as its text's first str is: looking canon up only, so none of canonical_entry's reference or
 * annotate_class_slow's frame (callgrind, `with annotate(f"step {i & 7}", color="red")`: ~90
 * instructions a call less). Its own function, so that the hot paths above keep no stack frame. */
static Py_NO_INLINE PyObject *annotate_class_fresh(PyObject *callable, PyObject *const *args, Py_ssize_t nargs,
                                                   PyObject *kwnames)
{
    PyObject *first = canon_peek(args[0]);
    if (first != NULL && nargs == 1 && kwnames == NULL) {
        size_t at = annotate_hot_at(first);
        if (annotate_hot[at].message == first) {
            Py_INCREF(annotate_hot[at].annotate);
            return annotate_hot[at].annotate;
        }
    } else if (first != NULL) {
        const site_entry *site = site_find_first(SITE_ANNOTATE, first, args, nargs, kwnames);
        if (site != NULL && (site->payload_at < 0 || args[site->payload_at] == Py_None)) {
            Py_INCREF(site->object);
            return site->object;
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
        /* the hot table's key: a constant, or the first str of an f-string's text (whose next
         * equal f-string finds it through canon_peek) */
        PyObject *hot = hash_cached(message) ? Py_NewRef(message) : NULL;
        PyObject *same = canonical_message(message);
        if (hot == NULL && same != message)
            hot = Py_NewRef(same);
        int hit = lookup(caches->annotate_by_message, same, &found); /* may run a key's __eq__: `same` is held */
        Py_DECREF(same);                                     /* held by the table or the caller */
        if (hit == 0) {
            int first = annotate_first_sight(message, Py_None, Py_None, &found);
            if (first != 0) {
                Py_XDECREF(hot);
                return first > 0 ? found : NULL;
            }
        }
        if (hit > 0 && Py_TYPE(found) == annotate_cls) {
            ((annotate_object *)found)->shared = 1;
            Py_INCREF(found);
            if (hot != NULL) {
                size_t at = annotate_hot_at(hot);
                PyObject *old_message = annotate_hot[at].message, *old_annotate = annotate_hot[at].annotate;
                Py_INCREF(found);
                annotate_hot[at].message = hot; /* (the reference taken above) */
                annotate_hot[at].annotate = found;
                Py_XDECREF(old_message); /* a str, and an annotate also held by _cache: no code runs */
                Py_XDECREF(old_annotate);
            }
            return found;
        }
        Py_XDECREF(hot); /* a str: no code runs */
        if (hit < 0)
            return NULL;
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
                return annotate_with_payload(template_, payload, NVTXREC_PT_NONE, 0, 0.0);
            if (active && template_->slot >= 0 && array_sendable(payload)) /* __enter__ sends it */
                return annotate_with_payload(template_, payload, NVTXREC_PT_EXT, 0, 0.0);
            /* other payloads: the general path below */
        }
    }
    if (callable == (PyObject *)annotate_cls && bind_arguments(args, nargs, kwnames, range_params, 5, 0, a)) {
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
        int kind = NVTXREC_PT_NONE;
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
                return annotate_with_payload(template_, a[4], NVTXREC_PT_NONE, 0, 0.0);
            }
            if (array_later && template_->slot >= 0) {
                if (keyable) /* a hit checks the array and the slot again */
                    site_put(SITE_ANNOTATE, key, nargs, kwnames, 1, 0, 0, found);
                return annotate_with_payload(template_, a[4], NVTXREC_PT_EXT, 0, 0.0);
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

PyDoc_STRVAR(setup_annotate_doc,
"setup_annotate(cls[, payload_attributes[, payload_check[, payload_emit]]])\n--\n\n"
"Answer calls of annotate class ``cls`` (a subclass of AnnotateBase) from caches.annotate_by_message "
"and caches.annotate; "
"``payload_attributes(template, payload)`` makes the attributes of objects carrying a per-call payload; "
"``payload_check(payload)`` checks a payload C does not convert (raises or warns) when no tool listens; "
"``payload_emit(op, slot, domain_index, inline, payload)`` sends an array payload.");

static PyObject *setup_annotate(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 1 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "setup_annotate(cls[, payload_attributes[, payload_check[, payload_emit]]])");
        return NULL;
    }
    if (!PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &annotate_base_type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a subclass of AnnotateBase");
        return NULL;
    }
    if (nargs >= 2)
        store(&payload_attributes, args[1]);
    if (nargs >= 3)
        store(&payload_check, args[2]);
    if (nargs == 4)
        store(&payload_emit, args[3]);
    store((PyObject **)&annotate_cls, args[0]);
#if PY_VERSION_HEX >= 0x030E0000
    if (own_special_methods(annotate_cls) < 0) /* (before tp_vectorcall: setting attributes may clear it) */
        return NULL;
#endif
    annotate_cls->tp_vectorcall = annotate_class_vectorcall;
    Py_RETURN_NONE;
}

/* Once install() decided (_dispatch.bind has bound annotate's methods for good), the class is sealed
 * like a built-in type: Py_TPFLAGS_IMMUTABLETYPE. CPython specialises a call of a class straight
 * to its tp_vectorcall (CALL_BUILTIN_CLASS) only for immutable types; a mutable one takes the
 * generic call, with its thread-state lookup and result check (callgrind, `with annotate("x"):`
 * without a tool: 62 instructions of 757 on 3.12, about 20 on 3.14). Setting an attribute of
 * annotate itself then raises TypeError, as for int or str; its subclasses stay mutable. */
void annotate_seal(void)
{
    if (annotate_cls != NULL)
        annotate_cls->tp_flags |= Py_TPFLAGS_IMMUTABLETYPE;
}

PyDoc_STRVAR(set_annotate_attribute_doc,
"set_annotate_attribute(name, value)\n--\n\n"
"setattr(annotate, name, value) for nvtx_cffi's own late changes of the class (its __init__, once a "
"subclass has one), sealed or not.");

static PyObject *set_annotate_attribute(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_annotate_attribute(name: str, value)");
        return NULL;
    }
    if (annotate_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_annotate_attribute: setup_annotate() was not called");
        return NULL;
    }
    /* (the GIL is held throughout: a type's setattr with a str name runs no Python code) */
    unsigned long sealed = annotate_cls->tp_flags & Py_TPFLAGS_IMMUTABLETYPE;
    annotate_cls->tp_flags &= ~Py_TPFLAGS_IMMUTABLETYPE;
    int failed = PyObject_SetAttr((PyObject *)annotate_cls, args[0], args[1]);
    annotate_cls->tp_flags |= sealed;
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef annotate_call_functions[] = {
    {"setup_annotate", FUNC_CAST(setup_annotate), METH_FASTCALL, setup_annotate_doc},
    {"set_annotate_attribute", FUNC_CAST(set_annotate_attribute), METH_FASTCALL, set_annotate_attribute_doc},
    {NULL, NULL, 0, NULL},
};

int accel_annotate_call_init(PyObject *module)
{
    return PyModule_AddFunctions(module, annotate_call_functions);
}
