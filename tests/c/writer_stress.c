/* writer_stress.c - drives nvtx-cffi's NVTXW backend from C (tests/recorder/test_writer.py builds
 * it with the backend's sources, optionally under a sanitizer): four threads write a stream each, two
 * more share one stream (the backend serializes writes per stream), with messages, registered strings,
 * counters, a batch, an oversized message (cut) and a refused timestamp; one stream is left open for
 * SessionEnd to close. Usage: writer_stress DIR N; prints "done". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtxw3/nvtxw3.h>
#include <nvtxw3/nvtxw3_counter_helpers.h>
#include <nvtxw3/nvtxw3_event_helpers.h>

nvtxwResultCode_t nvtxwGetInterface(nvtxwInterfaceVersion_t version, const void **out);

#define CHECK(call)                                                         \
    do {                                                                    \
        if ((call) != NVTXW_RESULT_SUCCESS) {                               \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call); \
            exit(1);                                                        \
        }                                                                   \
    } while (0)

static const nvtxwInterface_t *I;
static nvtxwSessionHandle_t S;
static nvtxDomainHandle_t D[5];
static nvtxwStreamHandle_t shared;
static nvtxwEventHelperSchemaIds_t shared_ids;
static int N;

static nvtxwStreamHandle_t open_stream(nvtxDomainHandle_t d, const char *name) {
    nvtxwStreamAttributes_t sa;
    memset(&sa, 0, sizeof sa);
    sa.structSize = sizeof sa;
    sa.name = name;
    sa.domain = d;
    nvtxwStreamHandle_t st;
    CHECK(I->StreamOpen(S, &sa, &st));
    return st;
}

static void *own_stream(void *arg) {
    int k = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "own%d", k);
    nvtxwStreamHandle_t st = open_stream(D[k], name);
    nvtxwEventHelperSchemaIds_t ids;
    CHECK(nvtxwEventSchemasRegister(I, D[k], NVTXW_EVENT_HELPER_SCHEMA_ALL, &ids));
    nvtxwEventWriter_t w;
    nvtxwEventWriterInit(&w, I, st, &ids);
    uint64_t counter;
    CHECK(nvtxwCounterInt64Register(I, D[k], "count", NULL, &counter));
    char msg[32];
    for (int i = 0; i < N; ++i) {
        snprintf(msg, sizeof msg, "m%d", i % 500);
        nvtxwEventAttributesUtf8_t u = {0xFF0000FFu, (uint32_t)(i % 3), 0, msg};
        CHECK(nvtxwRangePushPopWriteUtf8(&w, 1000 + i * 10, 1005 + i * 10, u));
        CHECK(nvtxwCounterInt64Write(I, st, 1000 + i * 10, counter, i));
        if (i % 1000 == 0) {
            nvtxStringHandle_t h;
            CHECK(I->StringRegister(D[k], msg, &h));
            nvtxwEventAttributes_t a = {0, 0, h};
            CHECK(nvtxwMarkWrite(&w, 1000 + i * 10, a));
        }
    }
    char *big = calloc(70000, 1);
    if (!big) exit(3);
    memset(big, 'x', 70000 - 1);
    nvtxwEventAttributesUtf8_t u = {0, 0, 0, big};
    CHECK(nvtxwMarkWriteUtf8(&w, 5, u));
    if (nvtxwMarkWriteUtf8(&w, -5, u) != NVTXW_RESULT_INVALID_ARGUMENT) exit(2);
    free(big);
    int64_t ts[3] = {1, 2, 3}, values[3] = {4, 5, 6};
    nvtxCounterBatch_t b;
    memset(&b, 0, sizeof b);
    b.counterId = counter;
    b.counters = values;
    b.countersSize = sizeof values;
    b.timestamps = ts;
    b.timestampsSize = sizeof ts;
    CHECK(I->CounterBatchWrite(st, &b));
    if (k != 3) CHECK(I->StreamClose(st)); /* own3 stays open: SessionEnd closes it */
    return NULL;
}

static void *on_shared(void *arg) {
    (void)arg;
    nvtxwEventWriter_t w;
    nvtxwEventWriterInit(&w, I, shared, &shared_ids);
    for (int i = 0; i < N; ++i) {
        nvtxwEventAttributesUtf8_t u = {0, 0, 0, "shared"};
        CHECK(nvtxwMarkWriteUtf8(&w, 1000 + i, u));
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    N = atoi(argv[2]);
    CHECK(nvtxwGetInterface(2, (const void **)&I));
    char config[4200];
    snprintf(config, sizeof config, "# comment\n other = 1 \n dir = %s \n", argv[1]);
    nvtxwSessionAttributes_t a = {sizeof a, "stress", config};
    CHECK(I->SessionBegin(&a, &S));
    for (int k = 0; k < 5; ++k) {
        nvtxwDomainAttributes_t da = {sizeof da, k ? "dom" : NULL};
        CHECK(I->DomainRegister(S, &da, &D[k]));
        CHECK(I->CategoryRegister(D[k], 1, "cat"));
    }
    shared = open_stream(D[4], "shared");
    CHECK(nvtxwEventSchemasRegister(I, D[4], NVTXW_EVENT_HELPER_SCHEMA_ALL, &shared_ids));
    pthread_t t[6];
    for (int k = 0; k < 4; ++k) pthread_create(&t[k], NULL, own_stream, (void *)(intptr_t)k);
    for (int k = 4; k < 6; ++k) pthread_create(&t[k], NULL, on_shared, NULL);
    for (int k = 0; k < 6; ++k) pthread_join(t[k], NULL);
    CHECK(I->StreamClose(shared));
    CHECK(I->SessionEnd(S));
    puts("done");
    return 0;
}
