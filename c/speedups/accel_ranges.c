/* accel_ranges.c - the module-level push_range, mark, start_range, pop_range and end_range in C (part
 * of nvtx_cffi._speedups): with a tool, answered from _ranges.py's caches and the identity tables
 * (accel_caches.c) and sent with their slot; without one, the arguments' shape checked.
 */
#include "accel.h"

static PyObject *default_color; /* _ranges._BLUE, compared by identity as Python does; NULL until setup_ranges */

/* Parameter names (interned: keyword names from call sites are usually the same objects). */
PyObject *range_params[5];      /* message, color, domain, category, payload */
static PyObject *pop_params[1]; /* domain */
static PyObject *end_params[1]; /* range_id */

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

/* -- module-level calls (a tool is attached) -- */

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

#define RANGE_CALLS 512 /* a power of two */
static call_entry range_calls[RANGE_CALLS];

/* Send a module-level call with its slot: push/mark return None, start_range the range id (with
 * its domain index). */
static inline PyObject *range_emit(int opcode, int slot, int index, int kind, int64_t ivalue, double fvalue)
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
    int kind = NVTXREC_PT_NONE;
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
    if (default_color == NULL || !bind_arguments(args, PyVectorcall_NARGS(nargsf), kwnames, range_params, 5, 0, a))
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
    int kind = NVTXREC_PT_NONE;
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
        hit = lookup(opcode == NVTXCFFI_OP_START ? caches->uncoloured_slots : caches->blue_slots, message, &found);
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
        hit = lookup(caches->slot, key, &found);
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
    PyObject *found = PyDict_GetItemWithError(caches->blue_slots, message);
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
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL || default_color == NULL)
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

PyObject *push_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    int slot = message_only_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.push(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_PUSH);
}

PyObject *mark_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    int slot = message_only_slot(args, nargsf, kwnames);
    if (slot >= 0) {
        nvtxcffi_shim.mark(slot);
        RETURN_NONE_AFTER_NVTX();
    }
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_MARK);
}

PyObject *start_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return range_call(op, args, nargsf, kwnames, NVTXCFFI_OP_START);
}

PyObject *pop_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
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
    if (!bind_arguments(args, nargs, kwnames, pop_params, 1, 0, a))
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

/* end_range(range_id) by position, the commonest call, is bound as it comes (bind_arguments: ~50
 * instructions of a no-op end_range's ~80, callgrind). */
static inline int end_range_bound(PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **range_id)
{
    if (PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) {
        *range_id = args[0];
        return 1;
    }
    return bind_arguments(args, PyVectorcall_NARGS(nargsf), kwnames, end_params, 1, 1, range_id);
}

PyObject *end_range_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *range_id;
    uint64_t id;
    if (!end_range_bound(args, nargsf, kwnames, &range_id))
        return twin(op, args, nargsf, kwnames);
    if (PyTuple_CheckExact(range_id) && PyTuple_GET_SIZE(range_id) == 2) {
        int domain;
        if (as_domain_index(PyTuple_GET_ITEM(range_id, 1), &domain)
            && as_range_id(PyTuple_GET_ITEM(range_id, 0), &id)) {
            nvtxcffi_shim.end(domain, id); /* an index the shim does not know is ignored there */
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
    if (!bind_arguments(args, nargs, kwnames, range_params, 5, 0, a))
        return 0;
    Py_INCREF(kwnames);
    Py_XSETREF(known_kwnames[at], kwnames); /* a tuple of str: no code runs */
    known_nargs[at] = nargs;
    return 1;
}

PyObject *noop5_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (!range_shape_ok(args, PyVectorcall_NARGS(nargsf), kwnames))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

PyObject *noop_pop_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *a[1];
    if (PyVectorcall_NARGS(nargsf) == 0 && kwnames == NULL) /* pop_range(): the commonest call */
        Py_RETURN_NONE;
    if (!bind_arguments(args, PyVectorcall_NARGS(nargsf), kwnames, pop_params, 1, 0, a))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

PyObject *noop_end_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *range_id;
    if (!end_range_bound(args, nargsf, kwnames, &range_id))
        return twin(op, args, nargsf, kwnames);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(setup_ranges_doc,
"setup_ranges(default_color)\n--\n\n"
"Let the module-level functions answer from caches.slot, .blue_slots and .uncoloured_slots; "
"``default_color``: push_range's and mark's default colour (compared by identity).");

static PyObject *setup_ranges(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "setup_ranges(default_color)");
        return NULL;
    }
    store(&default_color, args[0]);
    Py_RETURN_NONE;
}

static PyMethodDef ranges_functions[] = {
    {"setup_ranges", FUNC_CAST(setup_ranges), METH_FASTCALL, setup_ranges_doc},
    {NULL, NULL, 0, NULL},
};

int accel_ranges_init(PyObject *module)
{
    static const char *const range_names[5] = {"message", "color", "domain", "category", "payload"};
    static const char *const pop_names[1] = {"domain"};
    static const char *const end_names[1] = {"range_id"};
    if (intern_all(range_params, range_names, 5) < 0 || intern_all(pop_params, pop_names, 1) < 0
        || intern_all(end_params, end_names, 1) < 0)
        return -1;
    return PyModule_AddFunctions(module, ranges_functions);
}
