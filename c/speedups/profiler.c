/* profiler.c - the C engine of nvtx_cffi.Profile (part of nvtx_cffi._speedups; _profile.py drives it).
 *
 * Why C: a Python-level profile callback costs ~100-250 ns per event before it does anything; a C
 * callback costs a few ns plus one hash lookup and one NVTX call.
 *
 * Two ways in, one state (public C API only: no frame-evaluation hook, no internal headers):
 *   - PyEval_SetProfile (3.11, and 3.12+ when asked for): profile_func() below, installed on the
 *     enabling thread by _speedups.prof_install_thread() and on threads started later by the
 *     `trampoline` builtin that Python hands to threading.setprofile(): at a new thread's first
 *     event it installs profile_func for that thread and handles that event.
 *   - sys.monitoring (3.12+): builtin functions (METH_FASTCALL) registered as the callbacks of
 *     PY_START/PY_RESUME/PY_THROW/PY_RETURN/PY_YIELD/PY_UNWIND and, with annotate_cfuncs,
 *     CALL/C_RETURN/C_RAISE. Excluded code gets sys.monitoring.DISABLE.
 *
 * Per code object the decision (C slot, "pushed through Python" or excluded) comes from Python once
 * (hooks.c_classify) and is cached in an open-addressing table keyed by the code's address, holding
 * a strong reference so the address cannot be reused while cached. C functions are cached by their
 * PyMethodDef's ml_name pointer (static for the life of the process in CPython extensions); their
 * message is that name, as nvtx's __name__. Both tables are bounded (_speedups.prof_set_cache_limit)
 * and emptied at stop; past the bound a miss asks Python on every call.
 *
 * Balance: each thread counts its nested annotated calls since enable (depth) and the ranges it
 * actually pushed (open, <= max_depth). A return never pops below depth 0, so frames that were
 * already running at enable() (they pushed nothing) cannot pop ranges they did not open. stop()
 * pops the calling thread's open ranges and reports other threads' counts.
 *
 * Everything runs with the GIL held (interpreter callbacks and the module's functions). Calls into
 * Python can let another thread run stop(); every such call is followed by a generation check before the caches are
 * touched again.
 */
#include "profiler.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CACHE_LIMIT (1 << 18)

engine_t E;

/* ---- pointer-keyed open-addressing tables ------------------------------------------------------ */

static size_t cache_limit = DEFAULT_CACHE_LIMIT;

static inline size_t hash_pointer(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 4; /* objects are 16-byte aligned */
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x ^ (x >> 29));
}

static inline entry_t *table_find(const table_t *t, const void *key)
{
    if (t->mask == 0)
        return NULL;
    for (size_t i = hash_pointer(key) & t->mask;; i = (i + 1) & t->mask) {
        entry_t *e = &t->entries[i];
        if (e->key == key)
            return e;
        if (e->key == NULL)
            return NULL;
    }
}

/* A new entry for `key` (absent), or NULL when the table is at its bound or out of memory. */
static entry_t *table_insert(table_t *t, const void *key)
{
    if (t->count >= cache_limit)
        return NULL;
    if ((t->count + 1) * 2 > t->mask + 1 || t->mask == 0) {
        size_t capacity = t->mask ? (t->mask + 1) * 2 : 1024;
        entry_t *fresh = calloc(capacity, sizeof(entry_t));
        if (fresh == NULL)
            return NULL;
        for (size_t i = 0; t->mask && i <= t->mask; i++) {
            if (t->entries[i].key == NULL)
                continue;
            size_t j = hash_pointer(t->entries[i].key) & (capacity - 1);
            while (fresh[j].key != NULL)
                j = (j + 1) & (capacity - 1);
            fresh[j] = t->entries[i];
        }
        free(t->entries);
        t->entries = fresh;
        t->mask = capacity - 1;
    }
    size_t i = hash_pointer(key) & t->mask;
    while (t->entries[i].key != NULL)
        i = (i + 1) & t->mask;
    t->entries[i].key = key;
    t->count++;
    return &t->entries[i];
}

static void table_clear(table_t *t, int owns_keys)
{
    entry_t *entries = t->entries;
    size_t capacity = t->mask ? t->mask + 1 : 0;
    t->entries = NULL;
    t->mask = t->count = 0;
    /* Detached first: a code's deallocation cannot reach a half-cleared table. */
    for (size_t i = 0; owns_keys && i < capacity; i++) {
        if (entries[i].key != NULL)
            Py_DECREF((PyObject *)entries[i].key);
    }
    free(entries);
}

void clear_caches(void)
{
    table_clear(&E.codes, 1);
    table_clear(&E.names, 0);
    E.overflow = 0;
}

void set_cache_limit(Py_ssize_t limit) { cache_limit = limit >= 0 ? (size_t)limit : DEFAULT_CACHE_LIMIT; }

/* ---- the calling thread's counters (profiler_threads.c) ----------------------------------------- */

static inline thread_state_t *current_thread(void)
{
    thread_state_t *t = my_thread;
    if (UNLIKELY(t == NULL)) {
        t = my_thread = thread_register();
        if (t == NULL)
            return NULL;
    }
    if (UNLIKELY(t->generation != E.generation)) {
        t->generation = E.generation;
        t->depth = t->open = 0;
        t->domain = E.domain;
    }
    return t;
}

/* The engine's Python side can run while an exception is pending (a generator resumed by throw()
 * starts with it set). It is set aside around the call and put back afterwards. */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *traceback;
#endif
} pending_t;

static inline void pending_save(pending_t *p)
{
#if PY_VERSION_HEX >= 0x030C0000
    p->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&p->type, &p->value, &p->traceback);
#endif
}

static inline void pending_restore(pending_t *p)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (p->exc != NULL)
        PyErr_SetRaisedException(p->exc);
#else
    if (p->type != NULL)
        PyErr_Restore(p->type, p->value, p->traceback);
#endif
}

/* Python's answer for `obj` (a code object or a name): a slot, SLOT_EXCLUDED or SLOT_INLINE;
 * SLOT_UNKNOWN when it raised (reported as unraisable: profiling must not break the program) or
 * when stop() ran meanwhile (the caller must then not touch the caches). */
static int ask_python(PyObject *function, PyObject *obj)
{
    uint64_t generation = E.generation;
    long slot = SLOT_UNKNOWN;
    pending_t pending;
    pending_save(&pending);
    PyObject *result = PyObject_CallOneArg(function, obj);
    if (result != NULL) {
        slot = PyLong_AsLong(result);
        Py_DECREF(result);
    }
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(function);
        slot = SLOT_UNKNOWN;
    }
    pending_restore(&pending);
    if (!E.active || E.generation != generation || slot < SLOT_INLINE || slot > INT_MAX)
        return SLOT_UNKNOWN;
    return (int)slot;
}

/* The decision for `code`; marks it started when `start` (its returns will pop). *started tells
 * whether it had started before (always 1 for codes past the cache bound: Python decides). */
static int code_slot(PyObject *code, int start, int *started)
{
    entry_t *e = table_find(&E.codes, code);
    if (LIKELY(e != NULL)) {
        *started = e->started;
        e->started |= start;
        return e->slot;
    }
    int slot = ask_python(E.classify, code);
    *started = 0;
    if (slot == SLOT_UNKNOWN)
        return slot;
    e = table_insert(&E.codes, code);
    if (e == NULL) {
        E.overflow = 1;
        *started = 1;
    } else {
        Py_INCREF(code);
        e->slot = slot;
        e->started = start;
    }
    return slot;
}

/* Does a return of `code` close a range? (It started since enable and is annotated.) */
static inline int code_pops(PyObject *code, int *excluded)
{
    entry_t *e = table_find(&E.codes, code);
    *excluded = 0;
    if (LIKELY(e != NULL)) {
        *excluded = e->slot == SLOT_EXCLUDED;
        return e->started && e->slot != SLOT_EXCLUDED;
    }
    if (!E.overflow)
        return 0; /* never seen starting: it was running before enable() */
    int slot = ask_python(E.classify, code);
    return slot >= 0 || slot == SLOT_INLINE;
}

/* C functions are annotated when the code calling them is accepted. */
static inline int caller_ok(PyObject *code)
{
    int started;
    int slot = code_slot(code, 0, &started);
    return slot >= 0 || slot == SLOT_INLINE;
}

static inline int is_cfunc(PyObject *func)
{
    return Py_IS_TYPE(func, &PyCFunction_Type) || Py_IS_TYPE(func, &PyMethodDescr_Type);
}

static inline const char *cfunc_name(PyObject *func)
{
    const PyMethodDef *def = Py_IS_TYPE(func, &PyCFunction_Type)
                                 ? ((PyCFunctionObject *)func)->m_ml
                                 : ((PyMethodDescrObject *)func)->d_method;
    return def->ml_name;
}

static void push_through_python(PyObject *function, PyObject *obj)
{
    if (function == NULL)
        return; /* stopped */
    pending_t pending;
    pending_save(&pending);
    PyObject *result = PyObject_CallOneArg(function, obj);
    if (result == NULL)
        PyErr_WriteUnraisable(function);
    Py_XDECREF(result);
    pending_restore(&pending);
}

/* Open a range for an accepted call (slot >= 0 or SLOT_INLINE). */
static void enter_code(thread_state_t *t, int slot, PyObject *code)
{
    if (++t->depth > E.limit)
        return;
    t->open++;
    if (LIKELY(slot >= 0))
        NVTX_FROM_HOOK(nvtxcffi_shim.push(slot));
    else
        push_through_python(E.push_code, code);
}

/* Open a range for a C function called from accepted code, named after its ml_name. A name that
 * Python could not classify (it raised) still opens a range, pushed through Python, so that the
 * matching C_RETURN finds one to close. */
static void enter_cfunc(thread_state_t *t, PyObject *func)
{
    const char *name = cfunc_name(func);
    int slot;
    entry_t *e = table_find(&E.names, name);
    if (LIKELY(e != NULL)) {
        slot = e->slot;
    } else {
        PyObject *text = PyUnicode_FromString(name);
        if (text == NULL) {
            PyErr_WriteUnraisable(func);
            slot = SLOT_INLINE;
        } else {
            slot = ask_python(E.classify_cfunc, text);
            Py_DECREF(text);
        }
        if (!E.active)
            return; /* stop() ran while Python decided */
        if (slot < 0)
            slot = SLOT_INLINE;
        else if ((e = table_insert(&E.names, name)) != NULL)
            e->slot = slot;
    }
    if (++t->depth > E.limit)
        return;
    t->open++;
    if (LIKELY(slot >= 0)) {
        NVTX_FROM_HOOK(nvtxcffi_shim.push(slot));
    } else {
        PyObject *text = PyUnicode_FromString(name);
        if (text == NULL)
            PyErr_WriteUnraisable(func);
        else
            push_through_python(E.push_name, text);
        Py_XDECREF(text);
    }
}

static inline void leave(thread_state_t *t)
{
    if (t->depth <= 0)
        return; /* its call began before enable(): it opened nothing */
    if (t->depth-- <= E.limit) {
        t->open--;
        NVTX_FROM_HOOK(nvtxcffi_shim.pop(t->domain));
    }
}

/* ---- PyEval_SetProfile engine ------------------------------------------------------------------- */

static const char *const event_names[] = {"call", "exception", "line", "return",
                                          "c_call", "c_exception", "c_return"};
static const int event_whats[] = {PyTrace_CALL, PyTrace_EXCEPTION, PyTrace_LINE, PyTrace_RETURN,
                                  PyTrace_C_CALL, PyTrace_C_EXCEPTION, PyTrace_C_RETURN};

void profile_named(PyObject *token, PyObject *frame, PyObject *event, PyObject *arg)
{
    if (!PyFrame_Check(frame) || !PyUnicode_Check(event))
        return;
    for (size_t i = 0; i < sizeof event_names / sizeof event_names[0]; i++) {
        if (PyUnicode_CompareWithASCIIString(event, event_names[i]) == 0) {
            profile_func(token, (PyFrameObject *)frame, event_whats[i], arg);
            return;
        }
    }
}

/* A thread whose profile_func belongs to an enable() that stop() ended: close what it opened and
 * remove the function from this thread; the enabling thread's token then gives that thread back its
 * previous profiler (disable() ran on another thread, which must not touch this one's). */
static void profile_stale(token_t *token)
{
    thread_state_t *t = my_thread;
    if (t != NULL && t->generation == token->generation) {
        for (; t->open > 0; t->open--)
            NVTX_FROM_HOOK(nvtxcffi_shim.pop(t->domain));
        t->depth = 0;
    }
    PyEval_SetProfile(NULL, NULL);
    PyObject *restore = token->restore;
    if (restore != NULL) {
        token->restore = NULL; /* once */
        pending_t pending;
        pending_save(&pending);
        PyObject *result = PyObject_CallNoArgs(restore);
        if (result == NULL)
            PyErr_WriteUnraisable(restore);
        Py_XDECREF(result);
        pending_restore(&pending);
        Py_DECREF(restore);
    }
}

int profile_func(PyObject *token, PyFrameObject *frame, int what, PyObject *arg)
{
    if (UNLIKELY(((token_t *)token)->generation != E.generation || !E.active)) {
        profile_stale((token_t *)token);
        return 0;
    }
    thread_state_t *t = current_thread();
    if (UNLIKELY(t == NULL))
        return 0;
    PyCodeObject *code = PyFrame_GetCode(frame);
    Py_DECREF(code); /* the running frame keeps it alive */
    switch (what) {
    case PyTrace_CALL: {
        int started;
        int slot = code_slot((PyObject *)code, 1, &started);
        if (slot >= 0 || slot == SLOT_INLINE)
            enter_code(t, slot, (PyObject *)code);
        break;
    }
    case PyTrace_RETURN: {
        int excluded;
        if (code_pops((PyObject *)code, &excluded))
            leave(t);
        break;
    }
    case PyTrace_C_CALL:
        if (E.cfuncs && is_cfunc(arg) && caller_ok((PyObject *)code))
            enter_cfunc(t, arg);
        break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        if (E.cfuncs && is_cfunc(arg) && caller_ok((PyObject *)code))
            leave(t);
        break;
    default:
        break;
    }
    return 0;
}

/* threading.setprofile(trampoline): a new thread's first event installs profile_func there. */
static PyObject *trampoline(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "nvtx_cffi profile trampoline takes (frame, event, arg)");
        return NULL;
    }
    if (!E.active || E.token == NULL) {
        PyEval_SetProfile(NULL, NULL);
        Py_RETURN_NONE;
    }
    PyEval_SetProfile(profile_func, E.token);
    profile_named(E.token, args[0], args[1], args[2]);
    Py_RETURN_NONE;
}

static PyMethodDef trampoline_def = {"_nvtx_cffi_profile_trampoline", (PyCFunction)(void (*)(void))trampoline,
                                     METH_FASTCALL, "Installs nvtx_cffi's C profile function in a new thread."};

/* ---- sys.monitoring engine ---------------------------------------------------------------------- */

#if HAVE_MONITORING
#define NEED_ARGS(n)                                                                   \
    if (UNLIKELY(nargs < (n))) {                                                       \
        PyErr_SetString(PyExc_TypeError, "nvtx_cffi monitoring callback: too few arguments"); \
        return NULL;                                                                   \
    }

static PyObject *on_start(int can_disable, PyObject *code)
{
    thread_state_t *t;
    if (UNLIKELY(!E.active) || (t = current_thread()) == NULL)
        Py_RETURN_NONE;
    int started;
    int slot = code_slot(code, 1, &started);
    if (slot >= 0 || slot == SLOT_INLINE)
        enter_code(t, slot, code);
    else if (slot == SLOT_EXCLUDED && can_disable)
        return new_ref(E.disable); /* excluded code runs unmonitored from now on */
    Py_RETURN_NONE;
}

static PyObject *on_return(int can_disable, PyObject *code)
{
    thread_state_t *t;
    if (UNLIKELY(!E.active) || (t = current_thread()) == NULL)
        Py_RETURN_NONE;
    int excluded;
    if (code_pops(code, &excluded))
        leave(t);
    else if (excluded && can_disable)
        return new_ref(E.disable);
    Py_RETURN_NONE;
}

/* PY_START, PY_RESUME (code, offset) */
static PyObject *mon_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    NEED_ARGS(1);
    return on_start(1, args[0]);
}

/* PY_THROW (code, offset, exc): cannot be disabled */
static PyObject *mon_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    NEED_ARGS(1);
    return on_start(0, args[0]);
}

/* PY_RETURN, PY_YIELD (code, offset, value) */
static PyObject *mon_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    NEED_ARGS(1);
    return on_return(1, args[0]);
}

/* PY_UNWIND (code, offset, exc): cannot be disabled */
static PyObject *mon_unwind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    NEED_ARGS(1);
    return on_return(0, args[0]);
}

/* CALL (code, offset, callable, arg0) */
static PyObject *mon_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    thread_state_t *t;
    (void)self;
    NEED_ARGS(3);
    if (UNLIKELY(!E.active) || (t = current_thread()) == NULL)
        Py_RETURN_NONE;
    int started;
    int slot = code_slot(args[0], 0, &started);
    if (slot == SLOT_EXCLUDED)
        return new_ref(E.disable); /* no C calls watched at this call site from now on */
    if ((slot >= 0 || slot == SLOT_INLINE) && is_cfunc(args[2]))
        enter_cfunc(t, args[2]);
    Py_RETURN_NONE;
}

/* C_RETURN, C_RAISE (code, offset, callable, arg0): cannot be disabled */
static PyObject *mon_c_return(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    thread_state_t *t;
    (void)self;
    NEED_ARGS(3);
    if (UNLIKELY(!E.active) || !is_cfunc(args[2]) || (t = current_thread()) == NULL)
        Py_RETURN_NONE;
    if (caller_ok(args[0]))
        leave(t);
    Py_RETURN_NONE;
}

#define MON_DEF(name, function) {name, (PyCFunction)(void (*)(void))function, METH_FASTCALL, NULL}
/* In the order _profile.py registers them. */
static PyMethodDef monitoring_defs[] = {
    MON_DEF("nvtx_cffi_py_start", mon_start),     /* PY_START */
    MON_DEF("nvtx_cffi_py_resume", mon_start),    /* PY_RESUME */
    MON_DEF("nvtx_cffi_py_throw", mon_throw),     /* PY_THROW */
    MON_DEF("nvtx_cffi_py_return", mon_return),   /* PY_RETURN */
    MON_DEF("nvtx_cffi_py_yield", mon_return),    /* PY_YIELD */
    MON_DEF("nvtx_cffi_py_unwind", mon_unwind),   /* PY_UNWIND */
    MON_DEF("nvtx_cffi_call", mon_call),          /* CALL */
    MON_DEF("nvtx_cffi_c_return", mon_c_return),  /* C_RETURN */
    MON_DEF("nvtx_cffi_c_raise", mon_c_return),   /* C_RAISE */
};

static PyObject *monitoring_callbacks(void)
{
    PyObject *monitoring = PyImport_ImportModule("sys");
    if (monitoring != NULL) {
        PyObject *sys_module = monitoring;
        monitoring = PyObject_GetAttrString(sys_module, "monitoring");
        Py_DECREF(sys_module);
    }
    if (monitoring == NULL)
        return NULL;
    E.disable = PyObject_GetAttrString(monitoring, "DISABLE");
    Py_DECREF(monitoring);
    if (E.disable == NULL)
        return NULL;
    size_t n = sizeof monitoring_defs / sizeof monitoring_defs[0];
    PyObject *callbacks = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; callbacks != NULL && i < n; i++) {
        PyObject *function = PyCFunction_New(&monitoring_defs[i], NULL);
        if (function == NULL)
            Py_CLEAR(callbacks);
        else
            PyTuple_SET_ITEM(callbacks, (Py_ssize_t)i, function);
    }
    return callbacks;
}
#endif

PyObject *engine_callbacks(int mode)
{
#if HAVE_MONITORING
    if (mode == NVTXCFFI_PROF_MONITORING)
        return monitoring_callbacks();
#else
    (void)mode; /* start_engine() accepts no other mode here */
#endif
    PyObject *function = PyCFunction_New(&trampoline_def, NULL);
    if (function == NULL)
        return NULL;
    PyObject *callbacks = PyTuple_Pack(1, function);
    Py_DECREF(function);
    return callbacks;
}

