/*
 * ost_thread_pool.h - worker pool with per-request worker binding (docs/contract.md §5).
 *
 * The original exported these as thread_pool_*; here they are internal (hidden) and carry the
 * ost_ prefix. Return conventions follow §1.11.
 */
#ifndef OST_THREAD_POOL_H
#define OST_THREAD_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "os_transport.h"

#define OST_REQ_HASH_SIZE 1024U
#define OST_DEFAULT_PENDING_QUEUE_CAP 1024U /* accepted and ignored (deprecated) */

typedef enum {
    OST_WORKER_INIT = 0,
    OST_WORKER_IDLE = 1,
    OST_WORKER_BUSY = 2,
    OST_WORKER_EXIT = 3,
} ost_worker_state_t;

typedef int (*ost_task_func_t)(void *arg);
/* Runs on the worker right before task_func, with the 8-byte copy carried by the wake-up. */
typedef void (*ost_task_prepare_t)(void *arg, const void *wake_user_data);
typedef void (*ost_task_complete_cb_t)(uint64_t task_id, bool success, void *user_data);

typedef struct ost_pool_task {
    uint64_t task_id; /* ignored on submission: ids come from the pool counter */
    uint64_t request_id;
    ost_task_func_t task_func;
    ost_task_prepare_t prepare_func;
    void *arg;
    ost_task_complete_cb_t complete_cb;
    void *complete_user_data;
    bool has_match_user_ctx;
    uint64_t match_user_ctx;
} ost_pool_task_t;

typedef struct ost_thread_pool ost_thread_pool_t;

/* NULL when n == 0 or on allocation / pthread_create failure. cap is ignored. */
ost_thread_pool_t *ost_thread_pool_init(uint32_t worker_num, uint32_t pending_queue_cap);
/* 0, or -1 when pool is NULL or already running. */
int ost_thread_pool_start(ost_thread_pool_t *pool);
/* Records the JFCE/JFC/event mode (never read back). */
void ost_thread_pool_set_urma_info(ost_thread_pool_t *pool, urma_jfce_t *jfce, urma_jfc_t *jfc, bool event_mode);
/* 0 when queued to the bound worker, -1 when no context exists (the wake-up is dropped). */
int ost_thread_pool_wake_up_worker_by_req_id(ost_thread_pool_t *pool, uint64_t request_id, const void *user_data);
/* Task id, or 0 on failure. */
uint64_t ost_thread_pool_submit_task(ost_thread_pool_t *pool, const ost_pool_task_t *task);
/* malloc'd array of count task ids (caller frees), or NULL. All tasks must share one request id. */
uint64_t *ost_thread_pool_submit_batch_tasks(ost_thread_pool_t *pool, const ost_pool_task_t *tasks, uint32_t count,
                                             ost_task_complete_cb_t batch_cb, void *batch_user_data);
/* Number of queued tasks removed, 0 for an unknown id, -1 when pool is NULL or not running. */
int64_t ost_thread_pool_cancel_tasks_by_req(ost_thread_pool_t *pool, uint64_t request_id);
/* Joins the workers and drops queued tasks without running them. Accepts NULL. */
void ost_thread_pool_destroy(ost_thread_pool_t *pool);

#endif /* OST_THREAD_POOL_H */
