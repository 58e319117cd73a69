/*
 * os_transport.c - public API, request registration and task_sync lifecycle of the os_transport 1.0
 * C reference (docs/contract.md §1, §2, §3, §4, §6, §7, defects of §10).
 *
 * This file reproduces the observable behaviour of the original library, defects included:
 * sends of <= 2 MiB rejected, CR status ignored, early wake-ups dropped, sync leaked after a task
 * failure, destroy leaving waiters blocked, jfr-only recv without prefill, re-post quirks, and
 * the first-chunk failure status not stored in the sync. Where the original would touch freed
 * memory (a handle used after destroy) this reference aborts with a message instead; see
 * legacy-c/README.md.
 *
 * Only the ten functions marked OST_API are exported (the library is built with
 * -fvisibility=hidden); the original exported its internal helpers too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "os_transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ost_log.h"
#include "ost_thread_pool.h"
#include "ost_urma.h"
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
#include "os_transport_inject.h"
#endif

#define OST_API __attribute__((visibility("default")))

#define OST_ERR ((uint32_t)-1)
#define OST_WAIT_TIMEOUT 1U
#define OST_WAIT_ERROR OST_ERR
#define OST_CHUNK_SIZE ((uint64_t)DEFAULT_CHUNK_SIZE)
#define OST_MAX_REQUEST_ID ((1ULL << REQUEST_ID_EFFECTIVE_BITS) - 1ULL)
#define OST_RQE_PREFILL_MULTIPLE_DUPLEX 4U
#define OST_CHUNK_TYPE_MIDDLE 0U
#define OST_CHUNK_TYPE_LAST 1U
#define OST_REQ_ID_FIELD_WIDTH 20U
#define OST_REQ_ID_FIELD_MASK ((1ULL << OST_REQ_ID_FIELD_WIDTH) - 1ULL)
#define OST_REQ_ID_HIGH_FIELD_SHIFT 40U

/* ------------------------------------------------------------------ types */

typedef struct ost_recv_ctx {
    pthread_spinlock_t lock;
    urma_jetty_t *jetty; /* the single "current jetty" slot (§4.1); starts NULL */
} ost_recv_ctx_t;

typedef struct ost_handle {
    urma_context_t *urma_ctx; /* stored, never validated or used */
    uint32_t worker_thread_num;
    bool urma_event_mode;
    uint32_t recv_queue_capacity;
    ost_thread_pool_t *pool;
    ost_recv_ctx_t recv_ctx;
} ost_handle_t;

/* Private argument of one worker task (send or recv). */
typedef struct ost_task_arg {
    task_sync_t *sync;
    uint32_t task_idx;
    uint32_t task_num;
    /* send */
    ost_write_info_t write_info;
    const ost_chunk_t *next_chunk; /* chunk k+1, NULL for the last task */
    os_transport_user_data_t server_ctx;
    os_transport_user_data_t client_ctx;
    /* recv */
    notify_callback_t notify_cb;
    os_transport_user_data_t user_data; /* filled by the prepare hook from the wake-up */
    uint64_t expected_imm64;
} ost_task_arg_t;

/* The "3 group buffers": the group, the task-record array and the task-argument array. */
typedef struct ost_task_group {
    ost_pool_task_t *tasks;
    ost_task_arg_t *args;
    uint32_t task_num;
} ost_task_group_t;

struct task_sync {
    pthread_mutex_t mutex;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    uint32_t total_tasks;
    uint32_t completed_tasks;
    uint32_t canceled_tasks;
    int request_completed;
    int request_canceled;
    int request_timedout;
    int release_requested;
    int freeing;
    urma_status_t urma_status; /* first non-success status of a send worker task */
    ost_task_group_t *task_group;
    ost_chunk_t *chunks;
};

/* ------------------------------------------------------------------ global state (§7) */

/* A plain int, no lock, no atomics: init races init (§10 #1). */
static int g_inited = 0;
/* The instance created by the last successful init; used only to abort on use-after-destroy. */
static void *g_live_handle = NULL;

/* Where the original would dereference a freed (or foreign) handle, abort with a clear message. */
static void ost_require_live_handle(const void *handle, const char *where)
{
    if (handle == NULL || handle != g_live_handle) {
        fprintf(stderr,
                "libos_transport (legacy C reference): %s: handle %p is not the live instance (%p). The original "
                "1.0 library dereferences freed memory here (use after os_transport_destroy); aborting instead.\n",
                where, handle, g_live_handle);
        fflush(stderr);
        abort();
    }
}

static urma_jetty_t *ost_recv_ctx_peek(const ost_handle_t *h)
{
    /* Unlocked read of the slot (§10 #6), made atomic to stay defined. */
    return __atomic_load_n(&h->recv_ctx.jetty, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ user data (§2) */

static uint64_t ost_ud_make(uint64_t request_id, uint32_t chunk_type, uint32_t chunk_id)
{
    os_transport_user_data_t ud;
    ud.user_ctx = 0;
    ud.bs.request_id = request_id;
    ud.bs.chunk_type = chunk_type;
    ud.bs.chunk_id = chunk_id;
    return ud.user_ctx;
}

static uint64_t ost_encode_request_id(uint64_t x)
{
    return (x & OST_REQ_ID_FIELD_MASK) | (((x >> OST_REQ_ID_FIELD_WIDTH) & OST_REQ_ID_FIELD_MASK)
                                          << OST_REQ_ID_HIGH_FIELD_SHIFT);
}

static uint64_t ost_decode_request_id(uint64_t y)
{
    return (y & OST_REQ_ID_FIELD_MASK) | (((y >> OST_REQ_ID_HIGH_FIELD_SHIFT) & OST_REQ_ID_FIELD_MASK)
                                          << OST_REQ_ID_FIELD_WIDTH);
}

/* ------------------------------------------------------------------ chunks (§3.1) */

/* Returns the chunk count, or (uint32_t)-1 when more than 7 chunks are needed or on allocation failure. */
static uint32_t ost_split_chunks(uint64_t src, uint64_t dst, uint32_t len, ost_chunk_t **out)
{
    uint64_t n = ((uint64_t)len + OST_CHUNK_SIZE - 1) / OST_CHUNK_SIZE;
    ost_chunk_t *chunks;
    uint32_t i;

    *out = NULL;
    if (n > OS_TRANSPORT_MAX_CHUNK_NUM) {
        OST_LOG_ERROR("len %u needs %llu chunks, more than the maximum %u", len, (unsigned long long)n,
                      (unsigned)OS_TRANSPORT_MAX_CHUNK_NUM);
        return OST_ERR;
    }
    chunks = (ost_chunk_t *)calloc((size_t)n, sizeof(ost_chunk_t));
    if (chunks == NULL) {
        OST_LOG_ERROR("chunk array allocation failed");
        return OST_ERR;
    }
    for (i = 0; i < (uint32_t)n; i++) {
        uint64_t off = (uint64_t)i * OST_CHUNK_SIZE;
        uint64_t rest = (uint64_t)len - off;
        chunks[i].src = src + off;
        chunks[i].dst = dst + off;
        chunks[i].len = (uint32_t)(rest < OST_CHUNK_SIZE ? rest : OST_CHUNK_SIZE);
        chunks[i].chunk_id = i;
    }
    *out = chunks;
    return (uint32_t)n;
}

/* ------------------------------------------------------------------ task_sync (§6) */

static task_sync_t *ost_sync_create(uint32_t total_tasks)
{
    task_sync_t *sync = (task_sync_t *)calloc(1, sizeof(*sync));
    pthread_condattr_t attr;
    int attr_ok;

    if (sync == NULL) {
        OST_LOG_ERROR("task_sync allocation failed");
        return NULL;
    }
    if (pthread_mutex_init(&sync->mutex, NULL) != 0) {
        OST_LOG_ERROR("task_sync mutex init failed");
        free(sync);
        return NULL;
    }
    attr_ok = (pthread_condattr_init(&attr) == 0);
    if (!attr_ok) {
        OST_LOG_WARN("pthread_condattr_init failed, using default condvar attributes");
        pthread_cond_init(&sync->cond, NULL);
    } else {
        if (pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0) {
            OST_LOG_ERROR("pthread_condattr_setclock(CLOCK_MONOTONIC) failed");
            pthread_condattr_destroy(&attr);
            pthread_mutex_destroy(&sync->mutex);
            free(sync);
            return NULL;
        }
        pthread_cond_init(&sync->cond, &attr);
        pthread_condattr_destroy(&attr);
    }
    sync->total_tasks = total_tasks;
    sync->urma_status = URMA_SUCCESS;
    return sync;
}

static void ost_task_group_free(ost_task_group_t *group)
{
    if (group == NULL) {
        return;
    }
    free(group->tasks);
    free(group->args);
    free(group);
}

static ost_task_group_t *ost_task_group_alloc(uint32_t n)
{
    ost_task_group_t *group;
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        /* The original returns the injected value as its status: v != 0 fails the registration,
         * v == 0 reports a group it never made and the caller dereferences NULL. */
        int v = 0;
        if (os_transport_inject_execute(OS_TRANSPORT_INJECT_TASK_GROUP_ALLOC, &v) == 1) {
            fprintf(stderr, "[OS_TRANSPORT_INJECT] Injected at %s:%d (%s), ret=%d\n", __FILE__, __LINE__,
                    OS_TRANSPORT_INJECT_TASK_GROUP_ALLOC, v);
            if (v == 0) {
                OST_LOG_ERROR("injected 0 at task_group.alloc: no group (the original crashes here)");
                abort();
            }
            return NULL;
        }
    }
#endif
    group = (ost_task_group_t *)calloc(1, sizeof(*group));
    if (group == NULL) {
        return NULL;
    }
    group->tasks = (ost_pool_task_t *)calloc(n, sizeof(ost_pool_task_t));
    group->args = (ost_task_arg_t *)calloc(n, sizeof(ost_task_arg_t));
    if (group->tasks == NULL || group->args == NULL) {
        ost_task_group_free(group);
        return NULL;
    }
    group->task_num = n;
    return group;
}

static void ost_sync_destroy(task_sync_t *sync)
{
    pthread_cond_destroy(&sync->cond);
    pthread_mutex_destroy(&sync->mutex);
    ost_task_group_free(sync->task_group);
    free(sync->chunks);
    free(sync);
}

/* Called with sync->mutex held. True (and freeing set) when the caller must free the sync now (§6.4). */
static int ost_sync_claim_free_locked(task_sync_t *sync)
{
    if (sync->release_requested && sync->request_completed && !sync->freeing &&
        (sync->total_tasks == 0 || sync->completed_tasks + sync->canceled_tasks >= sync->total_tasks)) {
        sync->freeing = 1;
        return 1;
    }
    return 0;
}

/* mark_task_group_completed: one task succeeded. */
static void ost_sync_task_succeeded(task_sync_t *sync, uint64_t request_id, uint32_t task_idx)
{
    int do_free;
    uint32_t completed;
    uint32_t total;

    pthread_mutex_lock(&sync->mutex);
    sync->completed_tasks++;
    completed = sync->completed_tasks;
    total = sync->total_tasks;
    if (sync->completed_tasks + sync->canceled_tasks >= sync->total_tasks) {
        sync->request_completed = 1;
    }
    pthread_cond_broadcast(&sync->cond);
    do_free = ost_sync_claim_free_locked(sync);
    pthread_mutex_unlock(&sync->mutex);
    /* Logged outside the sync mutex, from copies: the sync may be released right after unlock. */
    OST_LOG_DEBUG(2, "request_id=%llu task %u completed (%u/%u)", (unsigned long long)request_id, task_idx,
                  completed, total);
    if (do_free) {
        ost_sync_destroy(sync);
    }
}

/* A failed task: never counted, so the sync can never be freed afterwards (§10 #3). */
static void ost_sync_task_failed(task_sync_t *sync, urma_status_t status, int record_status)
{
    pthread_mutex_lock(&sync->mutex);
    if (record_status && status != URMA_SUCCESS && sync->urma_status == URMA_SUCCESS) {
        sync->urma_status = status;
    }
    sync->request_canceled = 1;
    sync->request_completed = 1;
    pthread_cond_broadcast(&sync->cond);
    pthread_mutex_unlock(&sync->mutex);
}

/* First-chunk post failure or recv prefill failure: completed at once, nothing else (§1.4 step 9, §1.5 step 9). */
static void ost_sync_mark_completed_only(task_sync_t *sync)
{
    pthread_mutex_lock(&sync->mutex);
    sync->request_completed = 1;
    pthread_cond_broadcast(&sync->cond);
    pthread_mutex_unlock(&sync->mutex);
}

/* Cancel accounting helper: add removed tasks as cancelled (clamped), optionally request release. */
static void ost_sync_account_canceled(task_sync_t *sync, int64_t removed, int timedout, int release)
{
    uint32_t outstanding;
    uint32_t add;
    int do_free;

    pthread_mutex_lock(&sync->mutex);
    outstanding = 0;
    if (sync->completed_tasks + sync->canceled_tasks < sync->total_tasks) {
        outstanding = sync->total_tasks - sync->completed_tasks - sync->canceled_tasks;
    }
    add = 0;
    if (removed > 0) {
        add = (uint64_t)removed < outstanding ? (uint32_t)removed : outstanding;
    }
    sync->canceled_tasks += add;
    sync->request_canceled = 1;
    if (timedout) {
        sync->request_timedout = 1;
    }
    if (sync->completed_tasks + sync->canceled_tasks >= sync->total_tasks) {
        sync->request_completed = 1;
        pthread_cond_broadcast(&sync->cond);
    }
    if (release) {
        sync->release_requested = 1;
    }
    do_free = ost_sync_claim_free_locked(sync);
    pthread_mutex_unlock(&sync->mutex);
    if (do_free) {
        ost_sync_destroy(sync);
    }
}

/* ------------------------------------------------------------------ worker tasks */

/* Send task k: SEND_IMM notifying chunk k, then WRITE of chunk k+1 if any (§3.2, §3.4). */
static int ost_send_task_func(void *varg)
{
    ost_task_arg_t *arg = (ost_task_arg_t *)varg;
    task_sync_t *sync = arg->sync;
    os_transport_user_data_t notify_ctx = arg->server_ctx;
    uint64_t request_id = arg->server_ctx.bs.request_id;
    uint32_t task_idx = arg->task_idx;
    urma_status_t st;

    notify_ctx.bs.chunk_id = OS_TRANSPORT_MAX_CHUNK_NUM; /* sentinel 7 */
    st = ost_urma_write_notify(&arg->write_info, notify_ctx.user_ctx, arg->client_ctx.user_ctx);
    if (st != URMA_SUCCESS) {
        OST_LOG_ERROR("send_imm post failed: request_id=%llu chunk %u status %d", (unsigned long long)request_id,
                      task_idx, st);
    } else if (arg->next_chunk != NULL) {
        st = ost_urma_write_chunk(&arg->write_info, arg->next_chunk, arg->server_ctx.user_ctx);
        if (st != URMA_SUCCESS) {
            OST_LOG_ERROR("write post failed: request_id=%llu chunk %u status %d", (unsigned long long)request_id,
                          task_idx + 1, st);
        }
    }
    if (st != URMA_SUCCESS) {
        ost_sync_task_failed(sync, st, 1);
        return (int)st;
    }
    ost_sync_task_succeeded(sync, request_id, task_idx);
    return 0;
}

/* Prepare hook: copy the wake-up's user_data into the task argument (§4.2). */
static void ost_recv_task_prepare(void *varg, const void *wake_user_data)
{
    ost_task_arg_t *arg = (ost_task_arg_t *)varg;

    memcpy(&arg->user_data.user_ctx, wake_user_data, sizeof(uint64_t));
    if (arg->expected_imm64 != 0 && arg->user_data.user_ctx != arg->expected_imm64) {
        OST_LOG_ERROR("recv task %u: user_data 0x%llx differs from expected 0x%llx", arg->task_idx,
                      (unsigned long long)arg->user_data.user_ctx, (unsigned long long)arg->expected_imm64);
    }
}

/* Recv task i: run notify_callback with the task's private user_data copy (§4.4). */
static int ost_recv_task_func(void *varg)
{
    ost_task_arg_t *arg = (ost_task_arg_t *)varg;
    task_sync_t *sync = arg->sync;
    uint64_t request_id = arg->user_data.bs.request_id;
    uint32_t task_idx = arg->task_idx;
    int ret;

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    if (os_transport_inject_execute(OS_TRANSPORT_INJECT_NOTIFY_CALLBACK, &ret) != 1) {
        ret = arg->notify_cb(&arg->user_data);
    }
#else
    ret = arg->notify_cb(&arg->user_data);
#endif
    if (ret != 0) {
        OST_LOG_WARN("notify_callback returned %d: request_id=%llu chunk %u", ret, (unsigned long long)request_id,
                     task_idx);
        OST_LOG_WARN("recv request_id=%llu marked failed", (unsigned long long)request_id);
        ost_sync_task_failed(sync, URMA_SUCCESS, 0);
        return ret;
    }
    if (task_idx + 1 == arg->task_num) {
        /* last chunk: nothing to do (the original's CUDA event code is commented out) */
    }
    ost_sync_task_succeeded(sync, request_id, task_idx);
    return 0;
}

/* ------------------------------------------------------------------ registration */

static task_sync_t *ost_register_send_tasks(ost_handle_t *h, const urma_jetty_info_t *jetty_info,
                                            const ost_buffer_info_t *local_src, const ost_buffer_info_t *remote_dst,
                                            ost_chunk_t *chunks, uint32_t chunk_num, uint64_t server_key,
                                            uint64_t encoded_client_key)
{
    ost_write_info_t wi;
    task_sync_t *sync;
    ost_task_group_t *group;
    uint64_t *ids;
    uint32_t k;

    if (chunk_num < 2) {
        OST_LOG_ERROR("chunk_num must be >= 2, got %u (len <= %u is not supported)", chunk_num,
                      (unsigned)DEFAULT_CHUNK_SIZE);
        return NULL;
    }
    sync = ost_sync_create(chunk_num);
    if (sync == NULL) {
        return NULL;
    }
    group = ost_task_group_alloc(chunk_num);
    if (group == NULL) {
        OST_LOG_ERROR("task group allocation failed");
        ost_sync_destroy(sync);
        return NULL;
    }

    memset(&wi, 0, sizeof(wi));
    wi.jfs = jetty_info->jfs;
    wi.jetty = jetty_info->jetty;
    wi.tjetty = jetty_info->tjetty;
    wi.src_tseg = local_src->tseg;
    wi.dst_tseg = remote_dst->tseg;
    wi.flag.value = 0;

    for (k = 0; k < chunk_num; k++) {
        ost_task_arg_t *arg = &group->args[k];
        ost_pool_task_t *task = &group->tasks[k];

        if (k >= OS_TRANSPORT_MAX_CHUNK_ID) {
            /* §3.3 / §10 #18: fires at 6 and claims a truncation that does not happen. */
            OST_LOG_WARN("chunk_id %u exceeds max chunk id %u, truncated", k, (unsigned)OS_TRANSPORT_MAX_CHUNK_ID);
        }
        arg->sync = sync;
        arg->task_idx = k;
        arg->task_num = chunk_num;
        arg->write_info = wi;
        arg->next_chunk = (k + 1 < chunk_num) ? &chunks[k + 1] : NULL;
        arg->server_ctx.user_ctx = ost_ud_make(server_key, (k + 1 >= chunk_num - 1) ? 1U : 0U, k + 1);
        arg->client_ctx.user_ctx =
            ost_ud_make(encoded_client_key, (k == chunk_num - 1) ? OST_CHUNK_TYPE_LAST : OST_CHUNK_TYPE_MIDDLE, k);

        task->request_id = server_key;
        task->task_func = ost_send_task_func;
        task->prepare_func = NULL;
        task->arg = arg;
        task->has_match_user_ctx = false;
        task->match_user_ctx = 0;
    }
    sync->task_group = group;
    sync->chunks = chunks;

    ids = ost_thread_pool_submit_batch_tasks(h->pool, group->tasks, chunk_num, NULL, NULL);
    if (ids == NULL) {
        OST_LOG_ERROR("submit of %u send tasks failed: request_id=%llu", chunk_num, (unsigned long long)server_key);
        sync->chunks = NULL; /* the caller frees the chunk array */
        ost_sync_destroy(sync);
        return NULL;
    }
    free(ids);
    OST_LOG_DEBUG(1, "send request registered: request_id=%llu chunks=%u", (unsigned long long)server_key, chunk_num);
    return sync;
}

static task_sync_t *ost_register_recv_tasks(ost_handle_t *h, ost_chunk_t *chunks, uint32_t chunk_num,
                                            uint64_t client_key, notify_callback_t notify_cb)
{
    task_sync_t *sync;
    ost_task_group_t *group;
    uint64_t *ids;
    uint32_t i;

    sync = ost_sync_create(chunk_num);
    if (sync == NULL) {
        return NULL;
    }
    group = ost_task_group_alloc(chunk_num);
    if (group == NULL) {
        OST_LOG_ERROR("task group allocation failed");
        ost_sync_destroy(sync);
        return NULL;
    }
    for (i = 0; i < chunk_num; i++) {
        ost_task_arg_t *arg = &group->args[i];
        ost_pool_task_t *task = &group->tasks[i];
        uint64_t expected = client_key | ((uint64_t)(i == chunk_num - 1) << 60) | ((uint64_t)i << 61);

        arg->sync = sync;
        arg->task_idx = i;
        arg->task_num = chunk_num;
        arg->notify_cb = notify_cb;
        arg->user_data.user_ctx = 0;
        arg->expected_imm64 = expected;

        task->request_id = client_key; /* raw: matching happens after decoding */
        task->task_func = ost_recv_task_func;
        task->prepare_func = ost_recv_task_prepare;
        task->arg = arg;
        task->has_match_user_ctx = true;
        task->match_user_ctx = expected;
    }
    sync->task_group = group;
    sync->chunks = chunks;

    ids = ost_thread_pool_submit_batch_tasks(h->pool, group->tasks, chunk_num, NULL, NULL);
    if (ids == NULL) {
        OST_LOG_ERROR("submit of %u recv tasks failed: request_id=%llu", chunk_num, (unsigned long long)client_key);
        sync->chunks = NULL;
        ost_sync_destroy(sync);
        return NULL;
    }
    free(ids);
    OST_LOG_DEBUG(1, "recv request registered: request_id=%llu chunks=%u", (unsigned long long)client_key, chunk_num);
    return sync;
}

/* Recv-queue prefill, once per jetty change (§4.1). Returns the final post status. */
static urma_status_t ost_recv_prefill(ost_handle_t *h, const ost_device_info_t *dev, const ost_buffer_info_t *host,
                                      uint64_t client_key)
{
    urma_status_t st = URMA_SUCCESS;
    uint32_t count;
    uint32_t posted = 0;

    if (ost_recv_ctx_peek(h) == dev->jetty) {
        return URMA_SUCCESS; /* includes the jfr-only case: NULL equals the initial NULL slot */
    }
    pthread_spin_lock(&h->recv_ctx.lock);
    if (h->recv_ctx.jetty != dev->jetty) {
        count = h->recv_queue_capacity * OST_RQE_PREFILL_MULTIPLE_DUPLEX; /* uint32 wrap, no bound */
        for (posted = 0; posted < count; posted++) {
            st = ost_urma_recv_with_notify(dev->jetty, dev->jfr, host->tseg, client_key);
            if (st != URMA_SUCCESS) {
                break;
            }
        }
        if (st == URMA_SUCCESS || st == URMA_ENOMEM) {
            __atomic_store_n(&h->recv_ctx.jetty, dev->jetty, __ATOMIC_RELEASE);
        }
    }
    pthread_spin_unlock(&h->recv_ctx.lock);
    if (st == URMA_SUCCESS || st == URMA_ENOMEM) {
        OST_LOG_DEBUG(1, "recv queue prefilled with %u WRs (status %d)", posted, st);
    }
    return st;
}

/* ------------------------------------------------------------------ public API */

OST_API int os_transport_log_reg(int level, log_callback_t cb)
{
    return ost_log_register_callback(level, cb);
}

/* Shared by os_transport_reg_jfc() and init; a direct call, so init never goes through the PLT. */
static uint32_t ost_reg_jfc(urma_jfce_t *jfce, urma_jfc_t *jfc, void *handle)
{
    ost_handle_t *h = (ost_handle_t *)handle;

    if (!g_inited) {
        OST_LOG_ERROR("os_transport_reg_jfc: not initialised");
        return OST_ERR;
    }
    if (h == NULL) {
        OST_LOG_ERROR("os_transport_reg_jfc: handle is NULL");
        return OST_ERR;
    }
    ost_require_live_handle(h, "os_transport_reg_jfc");
    ost_thread_pool_set_urma_info(h->pool, jfce, jfc, h->urma_event_mode);
    OST_LOG_INFO("os_transport_reg_jfc: jfce=%p jfc=%p event_mode=%d", (void *)jfce, (void *)jfc,
                 (int)h->urma_event_mode);
    return 0;
}

OST_API uint32_t os_transport_reg_jfc(urma_jfce_t *jfce, urma_jfc_t *jfc, void *handle)
{
    return ost_reg_jfc(jfce, jfc, handle);
}

OST_API uint32_t os_transport_init(urma_context_t *urma_ctx, os_transport_cfg_t *ost_cfg, void **handle)
{
    ost_handle_t *h;

    OST_LOG_INFO("os_transport_init: version %d", OS_TRANSPORT_VERSION);
    if (ost_cfg == NULL || handle == NULL) {
        OST_LOG_ERROR("os_transport_init: cfg or handle is NULL");
        return OST_ERR;
    }
    *handle = NULL;
    if (g_inited) {
        OST_LOG_ERROR("os_transport_init: already initialised");
        return OST_ERR;
    }
    h = (ost_handle_t *)calloc(1, sizeof(*h));
    if (h == NULL) {
        OST_LOG_ERROR("os_transport_init: handle allocation failed");
        return OST_ERR;
    }
    h->urma_ctx = urma_ctx;
    h->worker_thread_num = ost_cfg->worker_thread_num;
    h->urma_event_mode = ost_cfg->urma_event_mode;
    h->recv_queue_capacity = ost_cfg->recv_queue_capacity;
    h->recv_ctx.jetty = NULL;
    pthread_spin_init(&h->recv_ctx.lock, PTHREAD_PROCESS_PRIVATE);

    g_inited = 1; /* before the pool exists (§10 #1) */
    g_live_handle = h;

    h->pool = ost_thread_pool_init(h->worker_thread_num, 0);
    if (h->pool == NULL) {
        g_inited = 0;
        g_live_handle = NULL;
        pthread_spin_destroy(&h->recv_ctx.lock);
        if (ost_cfg->worker_thread_num == 0) {
            OST_LOG_WARN("os_transport_init: worker_thread_num is 0, no thread pool; returning success without a "
                         "handle");
            free(h);
            return 0;
        }
        OST_LOG_ERROR("os_transport_init: thread pool creation failed");
        free(h);
        return OST_ERR;
    }
    if (ost_reg_jfc(ost_cfg->jfce, ost_cfg->jfc, h) != 0) {
        /* Cannot happen (g_inited is 1); the original skips the pool destroy here and leaks it. */
        g_inited = 0;
        g_live_handle = NULL;
        pthread_spin_destroy(&h->recv_ctx.lock);
        free(h);
        return OST_ERR;
    }
    if (ost_thread_pool_start(h->pool) != 0) {
        OST_LOG_ERROR("os_transport_init: thread pool start failed");
        ost_thread_pool_destroy(h->pool);
        g_inited = 0;
        g_live_handle = NULL;
        pthread_spin_destroy(&h->recv_ctx.lock);
        free(h);
        return OST_ERR;
    }
    *handle = h;
    return 0;
}

OST_API uint32_t os_transport_send(void *handle,
                                   urma_jetty_info_t *jetty_info,
                                   ost_buffer_info_t *local_src,
                                   ost_buffer_info_t *remote_dst,
                                   uint32_t len,
                                   uint64_t server_key,
                                   uint64_t client_key,
                                   task_sync_t **ret_sync_handle,
                                   urma_status_t *urma_status)
{
    ost_handle_t *h = (ost_handle_t *)handle;
    ost_chunk_t *chunks = NULL;
    uint32_t chunk_num;
    task_sync_t *sync;
    ost_write_info_t wi;
    urma_status_t st;

    if (ret_sync_handle != NULL) {
        *ret_sync_handle = NULL;
    }
    if (urma_status != NULL) {
        *urma_status = URMA_SUCCESS;
    }
    if (h == NULL || jetty_info == NULL || local_src == NULL || remote_dst == NULL || ret_sync_handle == NULL ||
        len == 0) {
        OST_LOG_ERROR("os_transport_send: invalid parameter (len=%u)", len);
        return OST_ERR;
    }
    if (!g_inited) {
        OST_LOG_ERROR("os_transport_send: not initialised");
        return OST_ERR;
    }
    if (server_key > OST_MAX_REQUEST_ID || client_key > OST_MAX_REQUEST_ID) {
        OST_LOG_ERROR("os_transport_send: server_key 0x%llx or client_key 0x%llx exceeds %u bits",
                      (unsigned long long)server_key, (unsigned long long)client_key, REQUEST_ID_EFFECTIVE_BITS);
        return OST_ERR;
    }
    ost_require_live_handle(h, "os_transport_send");
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        uint32_t injected = 0;
        OS_TRANSPORT_INJECT_POINT(OS_TRANSPORT_INJECT_SEND_BEGIN, injected);
    }
#endif

    chunk_num = ost_split_chunks(local_src->addr, remote_dst->addr, len, &chunks);
    if (chunk_num == OST_ERR) {
        return OST_ERR;
    }
    sync = ost_register_send_tasks(h, jetty_info, local_src, remote_dst, chunks, chunk_num, server_key,
                                   ost_encode_request_id(client_key));
    if (sync == NULL) {
        free(chunks);
        return OST_ERR;
    }
    *ret_sync_handle = sync;

    /* Chunk 0 is posted on the caller thread; the rest is driven by its completion. */
    memset(&wi, 0, sizeof(wi));
    wi.jfs = jetty_info->jfs;
    wi.jetty = jetty_info->jetty;
    wi.tjetty = jetty_info->tjetty;
    wi.src_tseg = local_src->tseg;
    wi.dst_tseg = remote_dst->tseg;
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        int v = 0;
        if (os_transport_inject_execute(OS_TRANSPORT_INJECT_SEND_FIRST_CHUNK, &v) == 1) {
            st = (urma_status_t)v;
        } else {
            st = ost_urma_write_chunk(&wi, &chunks[0], ost_ud_make(server_key, OST_CHUNK_TYPE_MIDDLE, 0));
        }
    }
#else
    st = ost_urma_write_chunk(&wi, &chunks[0], ost_ud_make(server_key, OST_CHUNK_TYPE_MIDDLE, 0));
#endif
    if (st != URMA_SUCCESS) {
        OST_LOG_ERROR("os_transport_send: first chunk post failed: request_id=%llu status %d",
                      (unsigned long long)server_key, st);
        if (urma_status != NULL) {
            *urma_status = st;
        }
        ost_sync_mark_completed_only(sync); /* status deliberately not stored in the sync (§10 #17) */
        return OST_ERR;
    }
    return 0;
}

OST_API uint32_t os_transport_recv(void *handle,
                                   ost_buffer_info_t *host_src,
                                   ost_device_info_t *device_dst,
                                   uint32_t len,
                                   uint64_t client_key,
                                   task_sync_t **ret_sync_handle,
                                   notify_callback_t notify_callback)
{
    ost_handle_t *h = (ost_handle_t *)handle;
    ost_chunk_t *chunks = NULL;
    uint32_t chunk_num;
    task_sync_t *sync;
    urma_status_t st;

    if (ret_sync_handle != NULL) {
        *ret_sync_handle = NULL;
    }
    if (h == NULL || host_src == NULL || device_dst == NULL || ret_sync_handle == NULL || notify_callback == NULL ||
        len == 0) {
        OST_LOG_ERROR("os_transport_recv: invalid parameter (len=%u)", len);
        return OST_ERR;
    }
    if (device_dst->jetty == NULL && device_dst->jfr == NULL) {
        OST_LOG_ERROR("os_transport_recv: device_dst has neither jetty nor jfr");
        return OST_ERR;
    }
    if (!g_inited) {
        OST_LOG_ERROR("os_transport_recv: not initialised");
        return OST_ERR;
    }
    if (client_key > OST_MAX_REQUEST_ID) {
        OST_LOG_ERROR("os_transport_recv: client_key 0x%llx exceeds %u bits", (unsigned long long)client_key,
                      REQUEST_ID_EFFECTIVE_BITS);
        return OST_ERR;
    }
    ost_require_live_handle(h, "os_transport_recv");
#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT
    {
        uint32_t injected = 0;
        OS_TRANSPORT_INJECT_POINT(OS_TRANSPORT_INJECT_RECV_BEGIN, injected);
    }
#endif

    chunk_num = ost_split_chunks(host_src->addr, (uint64_t)(uintptr_t)device_dst->dst, len, &chunks);
    if (chunk_num == OST_ERR) {
        return OST_ERR;
    }
    sync = ost_register_recv_tasks(h, chunks, chunk_num, client_key, notify_callback);
    if (sync == NULL) {
        free(chunks);
        return OST_ERR;
    }
    st = ost_recv_prefill(h, device_dst, host_src, client_key);
    if (st != URMA_SUCCESS && st != URMA_ENOMEM) {
        /* §10 #4: the sync is not returned and its tasks stay queued (leak + stale context). */
        OST_LOG_ERROR("os_transport_recv: recv queue prefill failed: request_id=%llu status %d",
                      (unsigned long long)client_key, st);
        ost_sync_mark_completed_only(sync);
        return OST_ERR;
    }
    *ret_sync_handle = sync;
    return 0;
}

OST_API int os_transport_wake_up_task(void *handle, void *cr_t)
{
    ost_handle_t *h = (ost_handle_t *)handle;
    const urma_cr_t *cr = (const urma_cr_t *)cr_t;
    os_transport_user_data_t ud;
    uint64_t request_id;

    if (h == NULL || cr == NULL) {
        OST_LOG_ERROR("os_transport_wake_up_task: handle or cr is NULL");
        return -1;
    }
    /* cr->status is never read (§10 #7). */
    if (cr->flag.bs.s_r) {
        urma_status_t st;
        if (cr->opcode != URMA_CR_OPC_SEND_WITH_IMM) {
            OST_LOG_ERROR("os_transport_wake_up_task: Unknown opcode %u on receive completion", (unsigned)cr->opcode);
            return -1;
        }
        ud.user_ctx = cr->imm_data;
        ud.bs.request_id = ost_decode_request_id(ud.bs.request_id);
        ost_require_live_handle(h, "os_transport_wake_up_task");
        /* Re-post one recv WR on the recorded jetty, whatever queue the CR came from (§10 #6). */
        st = ost_urma_recv_with_notify(ost_recv_ctx_peek(h), NULL, NULL, 0);
        if (st != URMA_SUCCESS) {
            OST_LOG_ERROR("os_transport_wake_up_task: recv WR re-post failed, status %d", st);
        }
    } else {
        ud.user_ctx = cr->user_ctx;
        if (ud.bs.chunk_id >= OS_TRANSPORT_MAX_CHUNK_NUM) {
            OST_LOG_DEBUG(1, "ignore send_imm completion: request_id=%llu", (unsigned long long)ud.bs.request_id);
            return 0;
        }
        ost_require_live_handle(h, "os_transport_wake_up_task");
    }
    request_id = ud.bs.request_id;
    if (h->pool == NULL) {
        return -1;
    }
    if (ost_thread_pool_wake_up_worker_by_req_id(h->pool, request_id, &ud) != 0) {
        OST_LOG_DEBUG(2, "wake-up failed: request_id=%llu user_data=0x%llx", (unsigned long long)request_id,
                      (unsigned long long)ud.user_ctx);
        return -1;
    }
    return 0;
}

static uint32_t ost_wait_and_free(void *handle, task_sync_t *sync, int64_t timeout_ms, urma_status_t *urma_status)
{
    ost_handle_t *h = (ost_handle_t *)handle;
    uint32_t inner;
    uint64_t request_id;
    urma_status_t st;
    int timedout = 0;
    int wait_failed = 0;
    int do_free;

    if (urma_status != NULL) {
        *urma_status = URMA_SUCCESS;
    }
    if (h == NULL || sync == NULL) {
        OST_LOG_ERROR("wait_and_free_sync: handle or sync is NULL");
        return OST_ERR;
    }
    if (sync->task_group == NULL || sync->task_group->tasks == NULL || sync->task_group->task_num == 0) {
        OST_LOG_ERROR("wait_and_free_sync: sync has no tasks");
        pthread_mutex_lock(&sync->mutex);
        sync->release_requested = 1;
        do_free = ost_sync_claim_free_locked(sync);
        pthread_mutex_unlock(&sync->mutex);
        if (do_free) {
            ost_sync_destroy(sync);
        }
        return OST_ERR;
    }
    request_id = sync->task_group->tasks[0].request_id;
    OST_LOG_DEBUG(1, "wait start: request_id=%llu timeout_ms=%lld", (unsigned long long)request_id,
                  (long long)timeout_ms);

    pthread_mutex_lock(&sync->mutex);
    if (timeout_ms < 0) {
        while (!sync->request_completed) {
            if (pthread_cond_wait(&sync->cond, &sync->mutex) != 0) {
                wait_failed = 1;
                break;
            }
        }
    } else {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)(timeout_ms / 1000);
        deadline.tv_nsec += (long)((timeout_ms % 1000) * 1000000L);
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec += 1;
            deadline.tv_nsec -= 1000000000L;
        }
        while (!sync->request_completed) {
            int rc = pthread_cond_timedwait(&sync->cond, &sync->mutex, &deadline);
            if (rc == ETIMEDOUT) {
                timedout = 1;
                sync->request_timedout = 1;
                break;
            }
            if (rc != 0) {
                wait_failed = 1;
                break;
            }
        }
    }
    if (wait_failed) {
        inner = OST_WAIT_ERROR;
    } else if (timedout) {
        inner = OST_WAIT_TIMEOUT;
    } else if (sync->completed_tasks == sync->total_tasks && !sync->request_canceled && !sync->request_timedout) {
        inner = 0;
    } else {
        inner = OST_WAIT_ERROR;
    }
    pthread_mutex_unlock(&sync->mutex);

    if (inner != 0) {
        int64_t removed;
        ost_require_live_handle(h, "wait_and_free_sync(_timeout) cancel path");
        removed = ost_thread_pool_cancel_tasks_by_req(h->pool, request_id);
        OST_LOG_DEBUG(1, "wait %s: request_id=%llu, cancelled %lld queued tasks",
                      inner == OST_WAIT_TIMEOUT ? "timed out" : "failed", (unsigned long long)request_id,
                      (long long)removed);
        ost_sync_account_canceled(sync, removed, inner == OST_WAIT_TIMEOUT, 0);
    }

    /* Release handshake: free now if everything is accounted for, else the last running task frees. */
    pthread_mutex_lock(&sync->mutex);
    sync->release_requested = 1;
    st = sync->urma_status;
    do_free = ost_sync_claim_free_locked(sync);
    pthread_mutex_unlock(&sync->mutex);
    if (do_free) {
        ost_sync_destroy(sync);
    }

    if (urma_status != NULL) {
        *urma_status = st;
    }
    if (st != URMA_SUCCESS) {
        OST_LOG_ERROR("wait: request_id=%llu failed with URMA status %d", (unsigned long long)request_id, st);
        return OST_ERR;
    }
    if (inner == 0) {
        OST_LOG_DEBUG(1, "wait success: request_id=%llu", (unsigned long long)request_id);
    } else if (inner == OST_WAIT_TIMEOUT) {
        OST_LOG_WARN("wait timed out after %lld ms: request_id=%llu", (long long)timeout_ms,
                     (unsigned long long)request_id);
    } else {
        OST_LOG_ERROR("wait: request_id=%llu failed or was cancelled", (unsigned long long)request_id);
    }
    return inner;
}

OST_API uint32_t wait_and_free_sync(void *handle, task_sync_t *sync_handle, urma_status_t *urma_status)
{
    return ost_wait_and_free(handle, sync_handle, -1, urma_status);
}

OST_API uint32_t wait_and_free_sync_timeout(void *handle, task_sync_t *sync_handle, int64_t timeout_ms,
                                            urma_status_t *urma_status)
{
    return ost_wait_and_free(handle, sync_handle, timeout_ms, urma_status);
}

OST_API uint32_t os_transport_cancel_tasks(void *handle, task_sync_t **sync_handle, uint64_t request_id)
{
    ost_handle_t *h = (ost_handle_t *)handle;
    int64_t removed;

    if (h == NULL) {
        OST_LOG_ERROR("os_transport_cancel_tasks: handle is NULL");
        return OST_ERR;
    }
    if (!g_inited) {
        OST_LOG_ERROR("os_transport_cancel_tasks: not initialised");
        return OST_ERR;
    }
    ost_require_live_handle(h, "os_transport_cancel_tasks");
    removed = ost_thread_pool_cancel_tasks_by_req(h->pool, request_id);
    if (removed < 0) {
        OST_LOG_ERROR("os_transport_cancel_tasks: pool unavailable, request_id=%llu", (unsigned long long)request_id);
        return OST_ERR;
    }
    OST_LOG_DEBUG(1, "cancel request_id=%llu: removed %lld queued tasks", (unsigned long long)request_id,
                  (long long)removed);
    if (sync_handle != NULL && *sync_handle != NULL) {
        task_sync_t *sync = *sync_handle;
        *sync_handle = NULL;
        ost_sync_account_canceled(sync, removed, 0, 1);
    }
    return 0;
}

OST_API uint32_t os_transport_destroy(void *handle)
{
    ost_handle_t *h = (ost_handle_t *)handle;

    OST_LOG_INFO("os_transport_destroy: handle=%p", handle);
    if (h == NULL) {
        OST_LOG_ERROR("os_transport_destroy: handle is NULL");
        return OST_ERR;
    }
    if (!g_inited) {
        OST_LOG_ERROR("os_transport_destroy: not initialised");
        return OST_ERR;
    }
    ost_require_live_handle(h, "os_transport_destroy");
    /* Queued tasks are dropped without completing their syncs (§10 #14). */
    ost_thread_pool_destroy(h->pool);
    h->pool = NULL;
    pthread_spin_destroy(&h->recv_ctx.lock);
    g_inited = 0;
    g_live_handle = NULL;
    free(h);
    return 0;
}
