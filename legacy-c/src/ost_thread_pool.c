/*
 * ost_thread_pool.c - worker pool with per-request worker binding (docs/contract.md §5, §10 #8-#15, #20, #21).
 *
 * Shape kept from the original so that its cost profile is representative:
 *   - n workers created one by one at init, each named ost_wkr_<idx>; creation waits for IDLE;
 *   - per worker: an unbounded singly-linked task queue and an unbounded FIFO of pending wake-ups,
 *     one mutex + one condvar, a state INIT/IDLE/BUSY/EXIT;
 *   - a malloc per task node, per wrapper, per task copy, per wake-up node and per request context;
 *   - request table: REQ_HASH_SIZE (1024) chained buckets, request_id % 1024, one mutex;
 *   - least-loaded worker selection that locks every worker in turn, once per submission;
 *   - matching and cancel are linear scans of the worker's queue / FIFO.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ost_thread_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "ost_log.h"

typedef struct ost_task_wrapper {
    uint64_t task_id;
    ost_pool_task_t *task; /* pool-owned copy of the caller's task record */
} ost_task_wrapper_t;

typedef struct ost_task_node {
    ost_task_wrapper_t *wrapper;
    struct ost_task_node *next;
} ost_task_node_t;

typedef struct ost_pending_node {
    uint64_t request_id;
    uint64_t user_data; /* 8-byte copy of the wake-up's user_data (or zeros) */
    struct ost_pending_node *next;
} ost_pending_node_t;

typedef struct ost_req_ctx {
    uint64_t request_id;
    uint32_t worker_idx;
    uint32_t pending_count;
    ost_task_complete_cb_t batch_cb;
    void *batch_user_data;
    struct ost_req_ctx *next;
} ost_req_ctx_t;

typedef struct ost_worker {
    struct ost_thread_pool *pool;
    uint32_t idx;
    pthread_t tid;
    bool tid_valid;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    ost_task_node_t *task_head;
    ost_task_node_t *task_tail;
    uint64_t queue_size;
    ost_pending_node_t *pending_head;
    ost_pending_node_t *pending_tail;
    uint64_t pending_req_count;
    ost_worker_state_t state;
} ost_worker_t;

typedef struct {
    urma_jfce_t *jfce;
    urma_jfc_t *jfc;
    bool event_mode;
} ost_pool_urma_info_t;

struct ost_thread_pool {
    ost_worker_t *workers;
    uint32_t worker_num;
    uint32_t workers_inited; /* workers whose mutex/cond exist */
    uint32_t pending_queue_cap; /* ignored */
    pthread_mutex_t global_mutex;
    int is_destroying; /* written under global_mutex, read under the worker mutex (§10 #15) */
    bool is_running;   /* plain flag, never reset */
    pthread_mutex_t task_id_mutex;
    uint64_t next_task_id;
    pthread_mutex_t req_mutex;
    ost_req_ctx_t *req_table[OST_REQ_HASH_SIZE];
    ost_pool_urma_info_t urma_info;
};

/* The original reads is_destroying without synchronisation; atomic loads/stores keep the same
 * (racy) protocol while staying free of undefined behaviour. */
static int ost_pool_is_destroying(const ost_thread_pool_t *pool)
{
    return __atomic_load_n(&pool->is_destroying, __ATOMIC_ACQUIRE);
}

static void ost_free_task_node(ost_task_node_t *node)
{
    if (node == NULL) {
        return;
    }
    if (node->wrapper != NULL) {
        free(node->wrapper->task);
        free(node->wrapper);
    }
    free(node);
}

/* ---------------------------------------------------------------- request contexts (req_mutex held) */

static ost_req_ctx_t *ost_req_ctx_find_locked(ost_thread_pool_t *pool, uint64_t request_id)
{
    ost_req_ctx_t *ctx = pool->req_table[request_id % OST_REQ_HASH_SIZE];
    while (ctx != NULL && ctx->request_id != request_id) {
        ctx = ctx->next;
    }
    return ctx;
}

static void ost_req_ctx_remove_locked(ost_thread_pool_t *pool, ost_req_ctx_t *victim)
{
    ost_req_ctx_t **link = &pool->req_table[victim->request_id % OST_REQ_HASH_SIZE];
    while (*link != NULL) {
        if (*link == victim) {
            *link = victim->next;
            free(victim);
            return;
        }
        link = &(*link)->next;
    }
}

/* ---------------------------------------------------------------- worker */

static void ost_worker_discard_unmatched(ost_worker_t *w, const ost_pending_node_t *wake)
{
    ost_task_node_t *node;
    for (node = w->task_head; node != NULL; node = node->next) {
        const ost_pool_task_t *t = node->wrapper->task;
        if (t->request_id == wake->request_id) {
            if (t->has_match_user_ctx) {
                OST_LOG_WARN("No exact matched task for request_id=%llu user_ctx=0x%llx on worker %u (first queued "
                             "task expects 0x%llx)",
                             (unsigned long long)wake->request_id, (unsigned long long)wake->user_data, w->idx,
                             (unsigned long long)t->match_user_ctx);
            }
            break;
        }
    }
    OST_LOG_WARN("Wakeup received without matching queued task: request_id=%llu worker=%u",
                 (unsigned long long)wake->request_id, w->idx);
}

/* Called with w->mutex held: unlink and return the first task matching the wake-up, or NULL. */
static ost_task_node_t *ost_worker_take_match_locked(ost_worker_t *w, const ost_pending_node_t *wake)
{
    ost_task_node_t *prev = NULL;
    ost_task_node_t *node = w->task_head;

    while (node != NULL) {
        const ost_pool_task_t *t = node->wrapper->task;
        if (t->request_id == wake->request_id && (!t->has_match_user_ctx || t->match_user_ctx == wake->user_data)) {
            if (prev == NULL) {
                w->task_head = node->next;
            } else {
                prev->next = node->next;
            }
            if (w->task_tail == node) {
                w->task_tail = prev;
            }
            node->next = NULL;
            w->queue_size--;
            return node;
        }
        prev = node;
        node = node->next;
    }
    return NULL;
}

static void ost_worker_finish_task(ost_thread_pool_t *pool, uint64_t request_id)
{
    ost_task_complete_cb_t batch_cb = NULL;
    void *batch_ud = NULL;
    ost_req_ctx_t *ctx;

    pthread_mutex_lock(&pool->req_mutex);
    ctx = ost_req_ctx_find_locked(pool, request_id);
    if (ctx != NULL) {
        if (ctx->pending_count > 0) {
            ctx->pending_count--;
        }
        if (ctx->pending_count == 0) {
            batch_cb = ctx->batch_cb;
            batch_ud = ctx->batch_user_data;
            ost_req_ctx_remove_locked(pool, ctx);
        }
    }
    pthread_mutex_unlock(&pool->req_mutex);
    if (batch_cb != NULL) {
        batch_cb(0, true, batch_ud);
    }
}

static void *ost_worker_main(void *varg)
{
    ost_worker_t *w = (ost_worker_t *)varg;
    ost_thread_pool_t *pool = w->pool;
    char name[16];

    (void)snprintf(name, sizeof(name), "ost_wkr_%u", w->idx);
    (void)prctl(PR_SET_NAME, name, 0, 0, 0);

    pthread_mutex_lock(&w->mutex);
    w->state = OST_WORKER_IDLE;
    pthread_cond_broadcast(&w->cond);

    for (;;) {
        ost_pending_node_t *wake;
        ost_task_node_t *node;
        ost_pool_task_t *task;
        int ret;

        while (w->pending_head == NULL && !ost_pool_is_destroying(pool)) {
            pthread_cond_wait(&w->cond, &w->mutex);
        }
        if (ost_pool_is_destroying(pool)) {
            break;
        }

        wake = w->pending_head;
        w->pending_head = wake->next;
        if (w->pending_head == NULL) {
            w->pending_tail = NULL;
        }
        w->pending_req_count--;

        node = ost_worker_take_match_locked(w, wake);
        if (node == NULL) {
            ost_worker_discard_unmatched(w, wake);
            free(wake);
            continue;
        }

        w->state = OST_WORKER_BUSY;
        pthread_mutex_unlock(&w->mutex);

        task = node->wrapper->task;
        if (task->task_func != NULL) {
            if (task->prepare_func != NULL) {
                task->prepare_func(task->arg, &wake->user_data);
            }
            ret = task->task_func(task->arg);
            if (task->complete_cb != NULL) {
                task->complete_cb(node->wrapper->task_id, ret == 0, task->complete_user_data);
            }
            ost_worker_finish_task(pool, task->request_id);
            ost_free_task_node(node);
        } else {
            /* §10 #20: a NULL task_func leaks its wrapper. */
            ost_worker_finish_task(pool, task->request_id);
            free(task);
            free(node);
        }
        free(wake);

        pthread_mutex_lock(&w->mutex);
        w->state = OST_WORKER_IDLE;
    }

    w->state = OST_WORKER_EXIT;
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

static void ost_pool_free_worker_queues(ost_worker_t *w)
{
    ost_task_node_t *node = w->task_head;
    ost_pending_node_t *wake = w->pending_head;

    while (node != NULL) {
        ost_task_node_t *next = node->next;
        ost_free_task_node(node); /* never runs it, never calls a callback */
        node = next;
    }
    while (wake != NULL) {
        ost_pending_node_t *next = wake->next;
        free(wake);
        wake = next;
    }
    w->task_head = w->task_tail = NULL;
    w->pending_head = w->pending_tail = NULL;
    w->queue_size = 0;
    w->pending_req_count = 0;
}

void ost_thread_pool_destroy(ost_thread_pool_t *pool)
{
    uint32_t i;

    if (pool == NULL) {
        return;
    }
    pthread_mutex_lock(&pool->global_mutex);
    __atomic_store_n(&pool->is_destroying, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pool->global_mutex);

    for (i = 0; i < pool->workers_inited; i++) {
        ost_worker_t *w = &pool->workers[i];
        pthread_mutex_lock(&w->mutex);
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->mutex);
    }
    for (i = 0; i < pool->workers_inited; i++) {
        if (pool->workers[i].tid_valid) {
            pthread_join(pool->workers[i].tid, NULL);
            pool->workers[i].tid_valid = false;
        }
    }
    for (i = 0; i < pool->workers_inited; i++) {
        ost_worker_t *w = &pool->workers[i];
        ost_pool_free_worker_queues(w);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->mutex);
    }
    for (i = 0; i < OST_REQ_HASH_SIZE; i++) {
        ost_req_ctx_t *ctx = pool->req_table[i];
        while (ctx != NULL) {
            ost_req_ctx_t *next = ctx->next;
            free(ctx);
            ctx = next;
        }
        pool->req_table[i] = NULL;
    }
    pthread_mutex_destroy(&pool->req_mutex);
    pthread_mutex_destroy(&pool->task_id_mutex);
    pthread_mutex_destroy(&pool->global_mutex);
    free(pool->workers);
    free(pool);
}

ost_thread_pool_t *ost_thread_pool_init(uint32_t worker_num, uint32_t pending_queue_cap)
{
    ost_thread_pool_t *pool;
    uint32_t i;

    if (worker_num == 0) {
        return NULL;
    }
    pool = (ost_thread_pool_t *)calloc(1, sizeof(*pool));
    if (pool == NULL) {
        return NULL;
    }
    pool->workers = (ost_worker_t *)calloc(worker_num, sizeof(ost_worker_t));
    if (pool->workers == NULL) {
        free(pool);
        return NULL;
    }
    pool->worker_num = worker_num;
    pool->pending_queue_cap = pending_queue_cap;
    pool->next_task_id = 1;
    pthread_mutex_init(&pool->global_mutex, NULL);
    pthread_mutex_init(&pool->task_id_mutex, NULL);
    pthread_mutex_init(&pool->req_mutex, NULL);

    for (i = 0; i < worker_num; i++) {
        ost_worker_t *w = &pool->workers[i];
        w->pool = pool;
        w->idx = i;
        w->state = OST_WORKER_INIT;
        pthread_mutex_init(&w->mutex, NULL);
        pthread_cond_init(&w->cond, NULL);
        pool->workers_inited = i + 1;
        if (pthread_create(&w->tid, NULL, ost_worker_main, w) != 0) {
            OST_LOG_ERROR("thread pool: failed to create worker %u", i);
            ost_thread_pool_destroy(pool);
            return NULL;
        }
        w->tid_valid = true;
        pthread_mutex_lock(&w->mutex);
        while (w->state == OST_WORKER_INIT) {
            pthread_cond_wait(&w->cond, &w->mutex);
        }
        pthread_mutex_unlock(&w->mutex);
    }
    return pool;
}

int ost_thread_pool_start(ost_thread_pool_t *pool)
{
    if (pool == NULL || pool->is_running) {
        return -1;
    }
    pool->is_running = true;
    return 0;
}

void ost_thread_pool_set_urma_info(ost_thread_pool_t *pool, urma_jfce_t *jfce, urma_jfc_t *jfc, bool event_mode)
{
    /* Unlocked; nothing reads these fields back (§10 #16). */
    pool->urma_info.jfce = jfce;
    pool->urma_info.jfc = jfc;
    pool->urma_info.event_mode = event_mode;
}

/* ---------------------------------------------------------------- submission */

static uint64_t ost_pool_next_task_id(ost_thread_pool_t *pool)
{
    uint64_t id;
    pthread_mutex_lock(&pool->task_id_mutex);
    id = pool->next_task_id++;
    pthread_mutex_unlock(&pool->task_id_mutex);
    return id;
}

/* §5.2: index order, each worker locked while read; first idle empty worker wins, else min (load, busy). */
static uint32_t ost_pool_select_best_worker(ost_thread_pool_t *pool)
{
    uint32_t best = 0;
    uint64_t best_load = UINT64_MAX;
    int best_busy = 1;
    uint32_t i;

    for (i = 0; i < pool->worker_num; i++) {
        ost_worker_t *w = &pool->workers[i];
        uint64_t load;
        int busy;

        pthread_mutex_lock(&w->mutex);
        load = w->queue_size + w->pending_req_count;
        busy = (w->state == OST_WORKER_BUSY);
        pthread_mutex_unlock(&w->mutex);

        if (load == 0 && !busy) {
            return i;
        }
        if (load < best_load || (load == best_load && busy < best_busy)) {
            best = i;
            best_load = load;
            best_busy = busy;
        }
    }
    return best;
}

static ost_task_node_t *ost_pool_make_node(const ost_pool_task_t *task, uint64_t task_id)
{
    ost_task_node_t *node = (ost_task_node_t *)malloc(sizeof(*node));
    ost_task_wrapper_t *wrapper = (ost_task_wrapper_t *)malloc(sizeof(*wrapper));
    ost_pool_task_t *copy = (ost_pool_task_t *)malloc(sizeof(*copy));

    if (node == NULL || wrapper == NULL || copy == NULL) {
        free(node);
        free(wrapper);
        free(copy);
        return NULL;
    }
    *copy = *task;
    copy->task_id = task_id;
    wrapper->task_id = task_id;
    wrapper->task = copy;
    node->wrapper = wrapper;
    node->next = NULL;
    return node;
}

/* Appends a prepared chain to worker idx, then inserts or updates the request context (§5.3). */
static void ost_pool_bind_chain(ost_thread_pool_t *pool, uint32_t idx, ost_task_node_t *head, ost_task_node_t *tail,
                                uint32_t count, uint64_t request_id, ost_task_complete_cb_t batch_cb,
                                void *batch_user_data)
{
    ost_worker_t *w = &pool->workers[idx];
    ost_req_ctx_t *ctx;

    pthread_mutex_lock(&w->mutex);
    if (w->task_tail == NULL) {
        w->task_head = head;
    } else {
        w->task_tail->next = head;
    }
    w->task_tail = tail;
    w->queue_size += count;
    pthread_mutex_unlock(&w->mutex);

    /* Tasks are visible before their context exists (§10 #8). */
    pthread_mutex_lock(&pool->req_mutex);
    ctx = ost_req_ctx_find_locked(pool, request_id);
    if (ctx != NULL) {
        /* §10 #10: keeps the old worker_idx even if these tasks went elsewhere. */
        ctx->pending_count += count;
    } else {
        ctx = (ost_req_ctx_t *)malloc(sizeof(*ctx));
        if (ctx != NULL) {
            ctx->request_id = request_id;
            ctx->worker_idx = idx;
            ctx->pending_count = count;
            ctx->batch_cb = batch_cb;
            ctx->batch_user_data = batch_user_data;
            ctx->next = pool->req_table[request_id % OST_REQ_HASH_SIZE];
            pool->req_table[request_id % OST_REQ_HASH_SIZE] = ctx;
        } else {
            /* §10 #21: reported as success; the tasks are orphaned. */
            OST_LOG_ERROR("thread pool: request context allocation failed for request_id=%llu",
                          (unsigned long long)request_id);
        }
    }
    pthread_mutex_unlock(&pool->req_mutex);
}

uint64_t ost_thread_pool_submit_task(ost_thread_pool_t *pool, const ost_pool_task_t *task)
{
    ost_task_node_t *node;
    uint64_t task_id;

    if (pool == NULL || task == NULL || !pool->is_running) {
        return 0;
    }
    task_id = ost_pool_next_task_id(pool);
    node = ost_pool_make_node(task, task_id);
    if (node == NULL) {
        return 0;
    }
    ost_pool_bind_chain(pool, ost_pool_select_best_worker(pool), node, node, 1, task->request_id, NULL, NULL);
    return task_id;
}

uint64_t *ost_thread_pool_submit_batch_tasks(ost_thread_pool_t *pool, const ost_pool_task_t *tasks, uint32_t count,
                                             ost_task_complete_cb_t batch_cb, void *batch_user_data)
{
    ost_task_node_t *head = NULL;
    ost_task_node_t *tail = NULL;
    uint64_t *ids;
    uint32_t i;

    if (pool == NULL || tasks == NULL || count == 0 || !pool->is_running) {
        return NULL;
    }
    for (i = 1; i < count; i++) {
        if (tasks[i].request_id != tasks[0].request_id) {
            OST_LOG_ERROR("thread pool: batch mixes request ids %llu and %llu", (unsigned long long)tasks[0].request_id,
                          (unsigned long long)tasks[i].request_id);
            return NULL;
        }
    }
    ids = (uint64_t *)malloc((size_t)count * sizeof(uint64_t));
    if (ids == NULL) {
        return NULL;
    }
    for (i = 0; i < count; i++) {
        ost_task_node_t *node;
        ids[i] = ost_pool_next_task_id(pool);
        node = ost_pool_make_node(&tasks[i], ids[i]);
        if (node == NULL) {
            while (head != NULL) {
                ost_task_node_t *next = head->next;
                ost_free_task_node(head);
                head = next;
            }
            free(ids);
            return NULL;
        }
        if (tail == NULL) {
            head = node;
        } else {
            tail->next = node;
        }
        tail = node;
    }
    ost_pool_bind_chain(pool, ost_pool_select_best_worker(pool), head, tail, count, tasks[0].request_id, batch_cb,
                        batch_user_data);
    return ids;
}

/* ---------------------------------------------------------------- wake-up and cancel */

int ost_thread_pool_wake_up_worker_by_req_id(ost_thread_pool_t *pool, uint64_t request_id, const void *user_data)
{
    ost_req_ctx_t *ctx;
    ost_pending_node_t *wake;
    ost_worker_t *w;
    uint32_t idx;

    if (pool == NULL) {
        return -1;
    }
    pthread_mutex_lock(&pool->req_mutex);
    ctx = ost_req_ctx_find_locked(pool, request_id);
    if (ctx == NULL) {
        pthread_mutex_unlock(&pool->req_mutex);
        OST_LOG_DEBUG(2, "no context for request_id=%llu, wake-up dropped", (unsigned long long)request_id);
        return -1;
    }
    idx = ctx->worker_idx;
    pthread_mutex_unlock(&pool->req_mutex);

    wake = (ost_pending_node_t *)malloc(sizeof(*wake));
    if (wake == NULL) {
        return -1;
    }
    wake->request_id = request_id;
    wake->user_data = 0;
    if (user_data != NULL) {
        memcpy(&wake->user_data, user_data, sizeof(wake->user_data));
    }
    wake->next = NULL;

    w = &pool->workers[idx];
    pthread_mutex_lock(&w->mutex);
    if (w->pending_tail == NULL) {
        w->pending_head = wake;
    } else {
        w->pending_tail->next = wake;
    }
    w->pending_tail = wake;
    w->pending_req_count++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
    return 0;
}

int64_t ost_thread_pool_cancel_tasks_by_req(ost_thread_pool_t *pool, uint64_t request_id)
{
    ost_req_ctx_t *ctx;
    ost_worker_t *w;
    ost_task_node_t *prev = NULL;
    ost_task_node_t *node;
    ost_pending_node_t *pprev = NULL;
    ost_pending_node_t *wake;
    int64_t removed = 0;
    uint64_t removed_wakeups = 0;
    uint32_t idx;

    if (pool == NULL || !pool->is_running) {
        return -1;
    }
    pthread_mutex_lock(&pool->req_mutex);
    ctx = ost_req_ctx_find_locked(pool, request_id);
    if (ctx == NULL) {
        pthread_mutex_unlock(&pool->req_mutex);
        return 0;
    }
    idx = ctx->worker_idx;
    pthread_mutex_unlock(&pool->req_mutex);

    w = &pool->workers[idx];
    pthread_mutex_lock(&w->mutex);
    node = w->task_head;
    while (node != NULL) {
        ost_task_node_t *next = node->next;
        if (node->wrapper->task->request_id == request_id) {
            if (prev == NULL) {
                w->task_head = next;
            } else {
                prev->next = next;
            }
            if (w->task_tail == node) {
                w->task_tail = prev;
            }
            w->queue_size--;
            ost_free_task_node(node); /* frees the pool's copies, never the user's argument */
            removed++;
        } else {
            prev = node;
        }
        node = next;
    }
    wake = w->pending_head;
    while (wake != NULL) {
        ost_pending_node_t *next = wake->next;
        if (wake->request_id == request_id) {
            if (pprev == NULL) {
                w->pending_head = next;
            } else {
                pprev->next = next;
            }
            if (w->pending_tail == wake) {
                w->pending_tail = pprev;
            }
            w->pending_req_count--;
            free(wake);
            removed_wakeups++;
        } else {
            pprev = wake;
        }
        wake = next;
    }
    pthread_mutex_unlock(&w->mutex);

    if (removed_wakeups > 0) {
        OST_LOG_DEBUG(2, "removed %llu pending wake-ups of request_id=%llu", (unsigned long long)removed_wakeups,
                      (unsigned long long)request_id);
    }

    pthread_mutex_lock(&pool->req_mutex);
    ctx = ost_req_ctx_find_locked(pool, request_id);
    if (ctx != NULL) {
        if ((uint64_t)removed >= ctx->pending_count) {
            ost_req_ctx_remove_locked(pool, ctx);
        } else {
            ctx->pending_count -= (uint32_t)removed;
        }
    }
    pthread_mutex_unlock(&pool->req_mutex);
    return removed;
}
