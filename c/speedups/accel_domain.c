/* accel_domain.c - Domain methods in C (part of nvtx_cffi._speedups): push_range, mark and
 * start_range with prepared EventAttributes or keywords, end_range, get_event_attributes, and
 * pop_range as a C method of Domain.
 */
#include "accel.h"

static PyTypeObject *domain_cls;      /* nvtx_cffi.Domain (a subclass of DomainBase) */
static PyTypeObject *attributes_cls;  /* nvtx_cffi.EventAttributes (a subclass of EventAttributesBase) */

/* The parameter names of Domain keyword calls, interned: message, color, category, payload. */
static PyObject *domain_params[4];

/* The NVTX domain index of Domain `domain`; -1 when it is not one (or has no index). */
int domain_index_of(PyObject *domain)
{
    if (domain_cls == NULL || !Py_IS_TYPE(domain, domain_cls))
        return -1;
    return domain_index_of_base(domain);
}

/* The index of the domain *named* `name`, if it exists already; -1 otherwise (or unhashable). */
int domain_index_by_name(PyObject *name)
{
    PyObject *domain;
    if (!PyUnicode_CheckExact(name))
        return -1;
    if (lookup(caches->domains, name, &domain) <= 0) {
        PyErr_Clear();
        return -1;
    }
    return domain_index_of(domain);
}

/* -- Domain methods with pre-built EventAttributes: d.push_range(attrs) etc. -- */

/* The slot of d.METHOD(attrs) called with exactly (Domain, EventAttributes): >= 0 a slot, -1 "no
 * slot: the general call", -2 not this shape (keywords, other types, attributes of another
 * domain): the Python twin decides (and raises for another domain's attributes). */
static int domain_attrs_slot(PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (domain_cls == NULL || PyVectorcall_NARGS(nargsf) != 2
        || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || !Py_IS_TYPE(args[0], domain_cls) || !Py_IS_TYPE(args[1], attributes_cls)
        || attribute_field(args[1], ATTR_DOMAIN) != args[0])
        return -2;
    if (!active)
        return -1; /* no tool: attributes never hold a slot, and nothing is emitted */
    PyObject *fast = attribute_field(args[1], ATTR_FAST);
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
        return domain_emit(opcode, slot, NVTXREC_PT_NONE, 0, 0.0);
    int index = domain_index_of(domain);
    if (slot < 0 || index < 0)
        return NULL;
    if (emit_array(opcode, slot, index, array) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *domain_keywords(PyObject *const *args, size_t nargsf, PyObject *kwnames, int opcode)
{
    if (domain_cls == NULL || PyVectorcall_NARGS(nargsf) != 1 || kwnames == NULL
        || !Py_IS_TYPE(args[0], domain_cls))
        return NULL;
    int kind = NVTXREC_PT_NONE;
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
        PyObject *cache = ((domain_base_object *)args[0])->by_keywords, *attributes;
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
        PyObject *fast = attribute_field(attributes, ATTR_FAST);
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

PyObject *domain_push_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
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

PyObject *domain_mark_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
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

PyObject *domain_start_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
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
static PyObject *int64_kind, *double_kind, *zero_int, *zero_float, *minus_one; /* payload_fields' parts */

/* A new EventAttributes of `template_`'s preparation, given as a[0..2] (message, colour, category:
 * equal to the template's, of the same types) with payload a[3]. */
static PyObject *attributes_copy(PyObject *template_, PyObject *const *a)
{
    PyObject *payload = a[3];
    PyObject *fields;
    if (payload == Py_None) {
        fields = Py_NewRef(attribute_field(template_, ATTR_FIELDS));
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
    PyObject **field = ((attributes_base_object *)copy)->field;
    static const int shared[] = {ATTR_DOMAIN, ATTR_SLOT, ATTR_INLINE};
    for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
        field[shared[i]] = Py_NewRef(attribute_field(template_, shared[i]));
    field[ATTR_MESSAGE] = Py_NewRef(a[0]);
    field[ATTR_COLOR] = Py_NewRef(a[1]);
    field[ATTR_CATEGORY] = Py_NewRef(a[2]);
    field[ATTR_PAYLOAD] = Py_NewRef(payload);
    field[ATTR_FIELDS] = fields;
    field[ATTR_FAST] = Py_NewRef(payload == Py_None ? attribute_field(template_, ATTR_FAST) : minus_one);
    return copy;
}

/* The template of get_event_attributes(message, color, category) (the EventAttributes that
 * _by_keywords holds prepared for them) by the identity of (Domain, message, color, category): a
 * call site passes the same objects every time, and its copies then skip building, hashing and
 * comparing a key tuple (about half of a call). Direct-mapped, holding references: an address is
 * not reused while mapped, and a template that _by_keywords has since let go stays what it was
 * (its slot and fields do not change), so a copy of it is the copy the Python path makes. */
#define ATTRIBUTE_TEMPLATES 256 /* a power of two */
static struct {
    call_entry key; /* Domain, message, color, category (its slot and domain index unused) */
    PyObject *template_;
} attribute_templates[ATTRIBUTE_TEMPLATES];

static void remember_template(size_t at, PyObject *const *key, PyObject *template_)
{
    PyObject *old = attribute_templates[at].template_;
    call_entry_put(&attribute_templates[at].key, key, -1, -1);
    attribute_templates[at].template_ = Py_NewRef(template_);
    Py_XDECREF(old); /* (after the entry is whole: a template's finaliser may run code) */
}

PyObject *domain_attributes_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[4];
    if (nargs < 1 || int64_kind == NULL || domain_cls == NULL || !Py_IS_TYPE(args[0], domain_cls)
        || !bind_arguments(args + 1, nargs - 1, kwnames, domain_params, 4, 0, a))
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
    PyObject *template_key[4] = {args[0], a[0], a[1], a[2]};
    size_t at = call_entry_at(template_key, ATTRIBUTE_TEMPLATES, 0xC2B2AE3D27D4EB4Full);
    if (call_entry_is(&attribute_templates[at].key, template_key))
        return attributes_copy(attribute_templates[at].template_, a);
    PyObject *cache = ((domain_base_object *)args[0])->by_keywords, *found;
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
        if (i != ATTR_PAYLOAD && i != ATTR_SHARED && attribute_field(found, i) == NULL) {
            Py_DECREF(found);
            return twin(op, args, nargsf, kwnames);
        }
    }
    PyObject *copy = attributes_copy(found, a);
    if (copy != NULL)
        remember_template(at, template_key, found);
    Py_DECREF(found);
    return copy;
}

PyObject *domain_end_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    uint64_t id;
    if (PyVectorcall_NARGS(nargsf) == 2 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0)) {
        int index = domain_index_of(args[0]);
        if (index >= 0 && as_range_id(args[1], &id)) {
            if (!active) /* (no tool, or NVTX_DISABLE: checked, not sent; a call could load a tool) */
                Py_RETURN_NONE;
            nvtxcffi_shim.end(index, id);
            RETURN_NONE_AFTER_NVTX();
        }
    }
    return twin(op, args, nargsf, kwnames);
}

PyDoc_STRVAR(setup_domain_doc,
"setup_domain(Domain, EventAttributes)\n--\n\n"
"The classes the Domain fast paths serve: subclasses of DomainBase and EventAttributesBase.");

static PyObject *setup_domain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_Check(args[1])
        || !PyType_IsSubtype((PyTypeObject *)args[0], &domain_base_type)
        || !PyType_IsSubtype((PyTypeObject *)args[1], &attributes_base_type)) {
        PyErr_SetString(PyExc_TypeError, "setup_domain(Domain, EventAttributes): subclasses of DomainBase and "
                                         "EventAttributesBase");
        return NULL;
    }
    if (int64_kind == NULL) {
        int64_kind = PyLong_FromLong(NVTXREC_PT_INT64);
        double_kind = PyLong_FromLong(NVTXREC_PT_DOUBLE);
        zero_int = PyLong_FromLong(0);
        zero_float = PyFloat_FromDouble(0.0);
        minus_one = PyLong_FromLong(-1);
        if (int64_kind == NULL || double_kind == NULL || zero_int == NULL || zero_float == NULL || minus_one == NULL)
            return NULL;
    }
    store((PyObject **)&domain_cls, args[0]);
    store((PyObject **)&attributes_cls, args[1]);
    Py_RETURN_NONE;
}

static PyMethodDef domain_functions[] = {
    {"setup_domain", FUNC_CAST(setup_domain), METH_FASTCALL, setup_domain_doc},
    {NULL, NULL, 0, NULL},
};

int accel_domain_init(PyObject *module)
{
    static const char *const domain_names[4] = {"message", "color", "category", "payload"};
    if (intern_all(domain_params, domain_names, 4) < 0)
        return -1;
    return PyModule_AddFunctions(module, domain_functions);
}
