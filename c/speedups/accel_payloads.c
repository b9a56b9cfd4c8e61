/* accel_payloads.c - array payloads in the fast paths (part of nvtx_cffi._speedups). */
#include "accel.h"

PyObject *payload_emit;     /* set by setup_annotate */
static PyObject *str_dtype; /* "dtype" */

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

int array_checked(PyObject *payload)
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
int emit_array(int opcode, int slot, int domain_index, PyObject *array)
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

static PyMethodDef payloads_functions[] = {
    {"array_dtype_checked", FUNC_CAST(array_dtype_checked), METH_FASTCALL, array_dtype_checked_doc},
    {NULL, NULL, 0, NULL},
};

int accel_payloads_init(PyObject *module)
{
    if (str_dtype == NULL && (str_dtype = PyUnicode_InternFromString("dtype")) == NULL)
        return -1;
    return PyModule_AddFunctions(module, payloads_functions);
}
