/* profiler.h - what the files of nvtx_cffi.Profile's C engine share (profiler.c describes the engine).
 *
 * profiler.c          the engine: the decisions cached per code object and C function, the ranges
 *                     opened and closed, and the callbacks of both ways in (PyEval_SetProfile and
 *                     sys.monitoring)
 * profiler_threads.c  per-thread state: each thread's counters, found again by stop()
 * profiler_api.c      what Python sees: the module's prof_* functions and the ProfileFunction type
 *
 * The hot paths' helpers are static inline here, so that each file inlines them as one file did;
 * what the files share besides has hidden visibility: PC-relative access and direct calls, as for
 * static symbols, and nothing exported from the module.
 */
#ifndef NVTX_CFFI_PROFILER_H
#define NVTX_CFFI_PROFILER_H

#include "speedups.h"

#include <frameobject.h>
#include <stddef.h>
#include <stdint.h>

#define HAVE_MONITORING (PY_VERSION_HEX >= 0x030C0000)

static inline PyObject *new_ref(PyObject *obj) /* Py_NewRef is 3.10+ */
{
    Py_INCREF(obj);
    return obj;
}

/* Decisions cached per code object / C function name. */
#define SLOT_EXCLUDED (-1) /* filters reject it: no range */
#define SLOT_INLINE (-2)   /* annotated, but no C slot was left: pushed through Python */
#define SLOT_UNKNOWN (-3)  /* no decision (Python raised, or stop() ran meanwhile): no range, no cache */

/* ---- pointer-keyed open-addressing table (no deletion until clear) ----------------------------- */

typedef struct {
    const void *key; /* NULL: empty */
    int slot;
    int started;     /* codes: seen starting since enable (its returns pop); names: unused */
} entry_t;

typedef struct {
    entry_t *entries;
    size_t mask;  /* capacity - 1 (capacity a power of two), 0 when unallocated */
    size_t count;
} table_t;

/* ---- per-thread state (profiler_threads.c) ----------------------------------------------------- */

typedef struct thread_state {
    struct thread_state *next;
    uint64_t generation; /* the enable() these counters belong to */
    int depth;           /* nested annotated calls since enable */
    int open;            /* ranges pushed and not popped (depth capped at max_depth) */
    int domain;          /* domain of those ranges */
    uint32_t os_tid;
    int alive;
} thread_state_t;

/* Another thread's ranges left open at stop(). */
typedef struct {
    uint32_t os_tid;
    int open;
} left_t;

/* ---- engine state -------------------------------------------------------------------------------- */

typedef struct {
    int active;
    int mode;
    uint64_t generation; /* bumped by every start(); 0 is never live */
    int domain;
    int cfuncs;
    int limit;           /* max_depth, INT_MAX for none */
    PyObject *hooks;     /* the Python engine: c_classify, c_classify_cfunc, c_push_code, ... */
    PyObject *classify, *classify_cfunc, *push_code, *push_name;
    PyObject *token;     /* setprofile mode: profile_func's obj for threads started after enable (a token_t) */
    PyObject *disable;   /* sys.monitoring.DISABLE */
    table_t codes;       /* code object -> decision (strong references) */
    table_t names;       /* ml_name pointer -> slot */
    int overflow;        /* a code could not be cached: returns of uncached codes ask Python */
} engine_t;

/* profile_func's obj, which sys.getprofile() returns while the engine is installed on a thread. It is
 * callable as a Python profile function (frame, event, arg) that does what profile_func does: code
 * that saves sys.getprofile() and later hands it back to sys.setprofile() (debuggers, tools) keeps
 * the engine running, at the speed of a Python profile function, instead of installing an int. */
typedef struct {
    PyObject_HEAD
    uint64_t generation; /* the enable() it belongs to: stale once another one started or stop() ran */
    PyObject *restore;   /* enabling thread's token: called once, when that thread finds it stale */
} token_t;

/* An NVTX call made by a hook: a tool's callback may run Python and leave an exception set (see
 * accel.h's TOOL_RAISED). Profiling must not break the program (a hook that returns with an
 * exception set makes an unrelated call fail with SystemError): it is reported as unraisable. An
 * exception pending before the call (a hook runs during unwinding) is the program's own. */
#define NVTX_FROM_HOOK(call)                                                                        \
    do {                                                                                            \
        int clean_ = PyErr_Occurred() == NULL;                                                      \
        call;                                                                                       \
        if (clean_ && UNLIKELY(PyErr_Occurred() != NULL))                                           \
            PyErr_WriteUnraisable(NULL);                                                            \
    } while (0)

#pragma GCC visibility push(hidden)

/* ---- profiler.c */
extern engine_t E;
int profile_func(PyObject *token, PyFrameObject *frame, int what, PyObject *arg);
/* An event as a Python profile function receives it, handed to profile_func. */
void profile_named(PyObject *token, PyObject *frame, PyObject *event, PyObject *arg);
/* The callbacks _profile.py registers for `mode`: the setprofile trampoline, or the sys.monitoring
 * builtins (E.disable set too); NULL with an exception set when they cannot be made. */
PyObject *engine_callbacks(int mode);
void clear_caches(void); /* stop(): empty both tables */
void set_cache_limit(Py_ssize_t limit); /* negative: the default */

/* ---- profiler_threads.c */
extern _Thread_local thread_state_t *my_thread;
thread_state_t *thread_register(void);
/* Other threads' ranges of enable() `generation` left open (not `me`'s): a malloc'd array of *n
 * (NULL when none). */
left_t *threads_left(const thread_state_t *me, uint64_t generation, size_t *n);

#pragma GCC visibility pop

#endif
