/* accel_annotate.c - AnnotateBase, the C base class of nvtx_cffi.annotate (part of nvtx_cffi._speedups):
 * the instance fields (accel.h: annotate_object) and __enter__/__exit__ (push a slot / pop a
 * domain). Calls of the annotate class itself are accel_annotate_call.c's.
 */
#include "accel.h"

PyObject *payload_attributes; /* set by setup_annotate */
static PyObject *str_emit;    /* "_emit" */
static PyObject *op_push;     /* NVTXCFFI_OP_PUSH as an int object */

/* attributes._emit(OP_PUSH): the general push (payload or inline message). 0 or -1 (raised). */
int emit_push(PyObject *attributes)
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
        if (self->payload_kind == NVTXREC_PT_EXT) { /* an array: what its attributes' _emit would send */
            if (emit_array(NVTXCFFI_OP_PUSH, self->payload_slot, self->domain_index, self->payload) < 0)
                return NULL;
        } else if (self->payload_kind != NVTXREC_PT_NONE)
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
                                   self->inline_category, NVTXREC_PT_NONE, 0, 0.0);
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
    if (active) {
        nvtxcffi_shim.pop(((annotate_object *)op)->domain_index);
        if (TOOL_RAISED())
            return NULL;
    } /* (no tool: nothing ran that could have raised; the check is a TLS call on shared libpythons) */
    Py_RETURN_NONE;
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

PyTypeObject annotate_base_type = {
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
    if (obj != NULL && Py_TYPE(obj) == annotate_cls) {
        annotate_object *annotation = (annotate_object *)obj;
        /* the commonest: an object that already keeps its bound method (which is always that
         * object's binding, whatever the checks below would answer now) */
        if (annotation->bound[self->which] != NULL)
            return Py_NewRef(annotation->bound[self->which]);
        if (self->which == 1 && annotation->template_ != NULL
            && ((annotate_object *)annotation->template_)->shared)
            /* a per-call payload object: its __exit__ pops the template's domain, and the template's
             * bound __exit__ does exactly that (one allocation less per `with`) */
            obj = annotation->template_;
    }
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
int own_special_methods(PyTypeObject *cls)
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

int accel_annotate_init(PyObject *module)
{
    if ((str_emit == NULL && (str_emit = PyUnicode_InternFromString("_emit")) == NULL)
        || (op_push == NULL && (op_push = PyLong_FromLong(NVTXCFFI_OP_PUSH)) == NULL))
        return -1;
    if (PyType_Ready(&annotate_base_type) < 0)
        return -1;
#if PY_VERSION_HEX < 0x030E0000
    if (PyType_Ready(&special_type) < 0 || install_special_methods() < 0)
        return -1;
#endif
    Py_INCREF(&annotate_base_type);
    if (PyModule_AddObject(module, "AnnotateBase", (PyObject *)&annotate_base_type) < 0) {
        Py_DECREF(&annotate_base_type);
        return -1;
    }
    return 0;
}
