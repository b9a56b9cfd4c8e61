/* An NVTX tool whose string registration takes 300 ms, then its own lock, which its fork handlers
 * hold across fork() as the recorder's do (tests/hardening/test_fork.py): a fork in another thread
 * meanwhile must take nvtx-cffi's registry lock (held by the registering thread) before this one,
 * or the two threads wait for each other for good. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#define EXPORT __attribute__((visibility("default")))
#define FN(f) ((NvtxFunctionPointer)(f))

static pthread_mutex_t tool_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t handles; /* under tool_lock */

static void lock_tool(void) { pthread_mutex_lock(&tool_lock); }
static void unlock_tool(void) { pthread_mutex_unlock(&tool_lock); }

static nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const char *text)
{
    (void)domain;
    (void)text;
    struct timespec wait = {0, 300 * 1000 * 1000};
    nanosleep(&wait, NULL);
    pthread_mutex_lock(&tool_lock);
    nvtxStringHandle_t handle = (nvtxStringHandle_t)++handles;
    pthread_mutex_unlock(&tool_lock);
    return handle;
}

static void mark(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attributes)
{
    (void)domain;
    (void)attributes;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    pthread_atfork(lock_tool, unlock_tool, unlock_tool);
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;
    if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || !table)
        return 0;
    if (NVTX_CBID_CORE2_DomainMarkEx <= size && table[NVTX_CBID_CORE2_DomainMarkEx])
        *table[NVTX_CBID_CORE2_DomainMarkEx] = FN(mark);
    if (NVTX_CBID_CORE2_DomainRegisterStringA <= size && table[NVTX_CBID_CORE2_DomainRegisterStringA])
        *table[NVTX_CBID_CORE2_DomainRegisterStringA] = FN(register_string);
    return 1;
}
