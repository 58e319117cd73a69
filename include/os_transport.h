/*
 * os_transport.h - public C API of libos_transport.so.1 (MLCacheDirect transfer library), version 1.0.
 *
 * One header, two implementations: the Rust library (mlcachedirect, the product) and the C
 * reference in legacy-c/. Both export exactly the ten functions below, with these prototypes,
 * from a shared object whose SONAME is libos_transport.so.1.
 *
 * Model
 *   A transfer of up to 14 MiB is cut into DEFAULT_CHUNK_SIZE (2 MiB) chunks, at most
 *   OS_TRANSPORT_MAX_CHUNK_NUM (7). The sender posts URMA WRITE work requests for the chunks and a
 *   zero-length SEND_IMM per chunk whose 64-bit immediate (an os_transport_user_data_t) tells the
 *   peer "chunk k of request r has landed". The library has no poller: the application polls its
 *   JFC and hands every completion record (urma_cr_t *) to os_transport_wake_up_task(), which
 *   wakes the worker thread bound to that request.
 *
 * Threading
 *   - os_transport_init() and os_transport_destroy() must not run concurrently with any other call
 *     on the same handle. Only one instance may exist per process.
 *   - os_transport_send() / os_transport_recv() may be called from any number of threads at once.
 *     Request ids (server_key of sends, client_key of recvs) share one namespace and must be
 *     unique among requests in flight.
 *   - os_transport_wake_up_task() may be called from several poller threads.
 *   - notify_callback runs on a library worker thread, once per received chunk, with no library
 *     lock held. It must not wait on its own request.
 *
 * Ownership
 *   - Every non-NULL task_sync_t * returned through ret_sync_handle belongs to the caller, who must
 *     pass it to exactly one of wait_and_free_sync(), wait_and_free_sync_timeout() or
 *     os_transport_cancel_tasks(). After that call the pointer is dead and must not be used again.
 *   - The user_data pointer given to notify_callback is valid only for the duration of the call.
 *   - URMA objects (context, JFC, JFS, jetty, segments) are created and owned by the application;
 *     the library only posts work requests on them.
 *
 * Return codes
 *   uint32_t functions return 0 on success and (uint32_t)-1 on error; the wait functions also
 *   return 1 when the timeout expired. int functions return 0 or -1.
 */
#ifndef OS_TRANSPORT_H
#define OS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ub/umdk/urma/urma_api.h>
#ifdef URMA_OVER_UB
#include <ub/umdk/urma/urma_ubagg.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define OS_TRANSPORT_VERSION_MAJOR 1
#define OS_TRANSPORT_VERSION_MINOR 0
#define OS_TRANSPORT_VERSION_PATCH 0
#define OS_TRANSPORT_VERSION \
    ((OS_TRANSPORT_VERSION_MAJOR * 10000) + (OS_TRANSPORT_VERSION_MINOR * 100) + OS_TRANSPORT_VERSION_PATCH)

/* Size of one chunk in bytes (2 MiB). Fixed; not configurable. */
#define DEFAULT_CHUNK_SIZE (2 * 1024 * 1024)
/* Width of the request-id field inside os_transport_user_data_t. */
#define REQUEST_ID_BITS 60U
/* Request ids (server_key, client_key) accepted by the API: 0 .. 2^40 - 1. */
#define REQUEST_ID_EFFECTIVE_BITS 40U
#define CHUNK_TYPE_BITS 1
#define CHUNK_ID_BITS 3
/* Highest chunk index (6); chunk id 7 is reserved as a sentinel on SEND_IMM work requests. */
#define OS_TRANSPORT_MAX_CHUNK_ID ((1ULL << CHUNK_ID_BITS) - 2)
/* Most chunks in one request (7), so at most 7 * DEFAULT_CHUNK_SIZE = 14 MiB per transfer. */
#define OS_TRANSPORT_MAX_CHUNK_NUM ((uint32_t)(OS_TRANSPORT_MAX_CHUNK_ID + 1))

/*
 * Log sink. level = (severity & 0xFF) | ((verbosity & 0xFF) << 8) with severity
 * DEBUG = -1, INFO = 0, WARN = 1, ERROR = 2 and verbosity -1 for INFO/WARN/ERROR
 * (so INFO = 0xFF00, WARN = 0xFF01, ERROR = 0xFF02, DEBUG v1 = 0x01FF, DEBUG v2 = 0x02FF).
 * msg is "[ost:<file>:<line>] [PIPLN RH2D] <text>\n"; it is valid only during the call.
 */
typedef void (*log_callback_t)(int level, const char *msg);

/*
 * Called on a worker thread once per received chunk. user_data points to an
 * os_transport_user_data_t {request_id = client_key, chunk_type, chunk_id}, valid only during the
 * call. Return 0 to accept the chunk; any other value fails the whole request.
 */
typedef int (*notify_callback_t)(void *user_data);

/* The 64-bit value carried in work-request user_ctx and SEND_IMM immediate data. */
typedef union {
    struct {
        uint64_t request_id : REQUEST_ID_BITS; /* bits 0..59 */
        uint64_t chunk_type : CHUNK_TYPE_BITS; /* bit 60: 1 = last chunk of the request */
        uint64_t chunk_id : CHUNK_ID_BITS;     /* bits 61..63: chunk index 0..6 (7 = sentinel) */
    } bs;
    uint64_t user_ctx;
} os_transport_user_data_t;

/* A registered buffer: base address and the URMA segment that covers it. */
typedef struct {
    uint64_t addr;
    urma_target_seg_t *tseg;
} ost_buffer_info_t;

/* Receive side queues and destination. jetty is preferred; jfr is the fallback. */
typedef struct {
    urma_jfr_t *jfr;
    urma_jetty_t *jetty;
    void *dst;
} ost_device_info_t;

typedef enum jetty_mode { JETTY_MODE_SIMPLEX = 0, JETTY_MODE_DUPLEX } jetty_mode_t;

/* Send side queues: jfs is preferred for posting, jetty is the fallback; tjetty is the target. */
typedef struct urma_jetty_info {
    urma_jfs_t *jfs;
    urma_jetty_t *jetty;
    urma_target_jetty_t *tjetty;
    jetty_mode_t jetty_mode; /* informational; not read by the library */
} urma_jetty_info_t;

/* Library configuration (64 bytes). */
typedef struct os_transport_cfg {
    bool urma_event_mode;         /* informational; stored, not used */
    uint8_t reserved1[3];
    uint32_t worker_thread_num;   /* number of worker threads */
    urma_jfce_t *jfce;            /* informational; stored, not used */
    urma_jfc_t *jfc;              /* informational; stored, not used */
    uint32_t recv_queue_capacity; /* recv WRs pre-posted per jetty = 4 x this */
    uint32_t reserved2[9];
} os_transport_cfg_t;

/* Opaque per-request completion handle. */
typedef struct task_sync task_sync_t;

/* Register a log callback; messages below level are dropped. Returns 0, or -1 when cb is NULL. */
int os_transport_log_reg(int level, log_callback_t cb);

/* Create the process-wide instance and its worker threads. Returns 0 and sets *handle. */
uint32_t os_transport_init(urma_context_t *urma_ctx, os_transport_cfg_t *ost_cfg, void **handle);

/* Record the application's JFCE/JFC (stored for information only). */
uint32_t os_transport_reg_jfc(urma_jfce_t *jfce, urma_jfc_t *jfc, void *handle);

/*
 * Start sending len bytes from local_src to remote_dst. server_key identifies the request locally;
 * client_key is the receiver's request id. On success *ret_sync_handle receives the request's sync.
 * If the first WRITE cannot be posted the call returns (uint32_t)-1 with *urma_status set and may
 * still hand back a sync, which the caller must wait on or cancel.
 */
uint32_t os_transport_send(void *handle,
                           urma_jetty_info_t *jetty_info,
                           ost_buffer_info_t *local_src,
                           ost_buffer_info_t *remote_dst,
                           uint32_t len,
                           uint64_t server_key,
                           uint64_t client_key,
                           task_sync_t **ret_sync_handle,
                           urma_status_t *urma_status);

/* Register the receive of len bytes for request client_key; notify_callback runs once per chunk. */
uint32_t os_transport_recv(void *handle,
                           ost_buffer_info_t *host_src,
                           ost_device_info_t *device_dst,
                           uint32_t len,
                           uint64_t client_key,
                           task_sync_t **ret_sync_handle,
                           notify_callback_t notify_callback);

/* Hand one polled completion record (urma_cr_t *) to the library. Returns 0, or -1 if not used. */
int os_transport_wake_up_task(void *handle, void *cr_t);

/* Wait for the request to finish and release its sync. Returns 0, or (uint32_t)-1 on failure. */
uint32_t wait_and_free_sync(void *handle, task_sync_t *sync_handle, urma_status_t *urma_status);

/* As wait_and_free_sync(), but gives up after timeout_ms (< 0: forever) and returns 1 then. */
uint32_t wait_and_free_sync_timeout(void *handle,
                                    task_sync_t *sync_handle,
                                    int64_t timeout_ms,
                                    urma_status_t *urma_status);

/* Cancel the queued tasks of request_id; if *sync_handle is set, take it over and release it. */
uint32_t os_transport_cancel_tasks(void *handle, task_sync_t **sync_handle, uint64_t request_id);

/* Stop the workers and release the instance. */
uint32_t os_transport_destroy(void *handle);

#ifdef __cplusplus
}
#endif

#endif /* OS_TRANSPORT_H */
