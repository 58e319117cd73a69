/*
 * os_transport_inject.c - the registry of the inject flavour (docs/inject.md), as the original
 * library implements it: attach or create the host's shared object, its spin lock, the setters,
 * clear and execute. Compiled in every flavour; its body only when OS_TRANSPORT_WITH_INJECT is
 * non-zero (the inject flavour), so the other flavours export nothing of it.
 *
 * Behaving as the original, it has the original's limits: no size check before mapping, a lock
 * wait without bound, attach failures retried on every call (docs/inject.md lists them and what
 * the Rust library does instead).
 */
#include "os_transport_inject.h"

#include <stddef.h>

/* The layout of docs/inject.md, checked by the compiler of every target (in every flavour). */
_Static_assert(sizeof(os_transport_inject_header_t) == 20, "header");
_Static_assert(sizeof(os_transport_inject_point_t) == 252, "point");
_Static_assert(offsetof(os_transport_inject_point_t, enabled) == 204, "point.enabled");
_Static_assert(offsetof(os_transport_inject_point_t, trigger_limit) == 216, "point.trigger_limit");
_Static_assert(sizeof(os_transport_inject_record_t) == 80, "record");
_Static_assert(offsetof(os_transport_inject_registry_t, ring_tail) == 8084, "ring_tail");
_Static_assert(offsetof(os_transport_inject_registry_t, ring) == 8152, "ring");
_Static_assert(sizeof(os_transport_inject_registry_t) == 13272, "registry");

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OST_INJECT_API __attribute__((visibility("default")))
#define OST_INJECT_SAY(...)                              \
    do {                                                 \
        fprintf(stderr, "[OS_TRANSPORT_INJECT] ");      \
        fprintf(stderr, __VA_ARGS__);                    \
        fputc('\n', stderr);                             \
    } while (0)

static os_transport_inject_registry_t *g_reg;
static int g_fd = -1;
static pthread_mutex_t g_attach_mu = PTHREAD_MUTEX_INITIALIZER;

static void ost_inject_lock(os_transport_inject_registry_t *r)
{
    while (__sync_lock_test_and_set(&r->header.lock, 1) != 0) {
        while (*(volatile int32_t *)&r->header.lock != 0) {
            sched_yield();
        }
    }
    __sync_synchronize();
}

static void ost_inject_unlock(os_transport_inject_registry_t *r)
{
    __sync_synchronize();
    __sync_lock_release(&r->header.lock);
}

static void ost_inject_sleep_ms(uint32_t ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000u;
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t ost_inject_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The version reset of an object with a foreign version. */
static void ost_inject_reset(os_transport_inject_registry_t *r)
{
    ost_inject_lock(r);
    memset(r->points, 0, sizeof(r->points));
    memset(r->ring, 0, sizeof(r->ring));
    r->ring_tail = 0;
    __atomic_store_n(&r->header.seq, 1u, __ATOMIC_RELEASE);
    __atomic_store_n(&r->header.count, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&r->header.writer_pid, getpid(), __ATOMIC_RELEASE);
    __atomic_store_n(&r->header.version, OS_TRANSPORT_INJECT_VERSION, __ATOMIC_RELEASE);
    ost_inject_unlock(r);
}

OST_INJECT_API os_transport_inject_registry_t *os_transport_inject_init(void)
{
    os_transport_inject_registry_t *r = __atomic_load_n(&g_reg, __ATOMIC_ACQUIRE);
    int created = 0;
    int fd;
    void *p;

    if (r != NULL) {
        return r;
    }
    pthread_mutex_lock(&g_attach_mu);
    r = __atomic_load_n(&g_reg, __ATOMIC_ACQUIRE);
    if (r != NULL) {
        pthread_mutex_unlock(&g_attach_mu);
        return r;
    }
    fd = shm_open(OS_TRANSPORT_INJECT_SHM_NAME, O_RDWR, 0666);
    if (fd < 0 && errno == ENOENT) {
        fd = shm_open(OS_TRANSPORT_INJECT_SHM_NAME, O_CREAT | O_EXCL | O_RDWR, 0666);
        if (fd >= 0) {
            created = 1;
        } else if (errno == EEXIST) {
            fd = shm_open(OS_TRANSPORT_INJECT_SHM_NAME, O_RDWR, 0666);
        }
    }
    if (fd < 0) {
        perror("[OS_TRANSPORT_INJECT] shm_open failed");
        pthread_mutex_unlock(&g_attach_mu);
        return NULL;
    }
    if (created && ftruncate(fd, (off_t)sizeof(os_transport_inject_registry_t)) != 0) {
        perror("[OS_TRANSPORT_INJECT] ftruncate failed");
        close(fd);
        shm_unlink(OS_TRANSPORT_INJECT_SHM_NAME);
        pthread_mutex_unlock(&g_attach_mu);
        return NULL;
    }
    p = mmap(NULL, sizeof(os_transport_inject_registry_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        perror("[OS_TRANSPORT_INJECT] mmap failed");
        close(fd);
        if (created) {
            shm_unlink(OS_TRANSPORT_INJECT_SHM_NAME);
        }
        pthread_mutex_unlock(&g_attach_mu);
        return NULL;
    }
    g_fd = fd;
    r = (os_transport_inject_registry_t *)p;
    if (created) {
        memset(r, 0, sizeof(*r));
        __atomic_store_n(&r->header.seq, 1u, __ATOMIC_RELEASE);
        __atomic_store_n(&r->header.lock, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&r->header.count, 0u, __ATOMIC_RELEASE);
        __atomic_store_n(&r->header.version, OS_TRANSPORT_INJECT_VERSION, __ATOMIC_RELEASE);
        OST_INJECT_SAY("Shared memory created by pid=%d", (int)getpid());
    } else {
        int polls = 0;
        while (__atomic_load_n(&r->header.version, __ATOMIC_ACQUIRE) == 0 && polls < 1000) {
            ost_inject_sleep_ms(1);
            polls++;
        }
        if (__atomic_load_n(&r->header.version, __ATOMIC_ACQUIRE) == 0) {
            OST_INJECT_SAY("Timeout waiting for init");
            munmap(p, sizeof(*r));
            close(fd); /* g_fd keeps the number, as the original does */
            pthread_mutex_unlock(&g_attach_mu);
            return NULL;
        }
        if (__atomic_load_n(&r->header.version, __ATOMIC_ACQUIRE) != OS_TRANSPORT_INJECT_VERSION) {
            OST_INJECT_SAY("Version mismatch, resetting");
            ost_inject_reset(r);
        } else {
            OST_INJECT_SAY("Attached (points=%u)", __atomic_load_n(&r->header.count, __ATOMIC_ACQUIRE));
        }
    }
    __atomic_store_n(&g_reg, r, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_attach_mu);
    return r;
}

/* The first used slot named name, or -1 (under the lock). */
static int ost_inject_find(os_transport_inject_registry_t *r, const char *name)
{
    uint32_t n = __atomic_load_n(&r->header.count, __ATOMIC_ACQUIRE);
    uint32_t i;

    for (i = 0; i < n && i < OS_TRANSPORT_INJECT_MAX_POINTS; i++) {
        if (strcmp(r->points[i].name, name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Find or create, under the lock; NULL when the table is full. */
static os_transport_inject_point_t *ost_inject_slot(os_transport_inject_registry_t *r, const char *name)
{
    int i = ost_inject_find(r, name);
    uint32_t n;
    os_transport_inject_point_t *pt;

    if (i >= 0) {
        return &r->points[i];
    }
    n = __atomic_load_n(&r->header.count, __ATOMIC_ACQUIRE);
    if (n >= OS_TRANSPORT_INJECT_MAX_POINTS) {
        return NULL;
    }
    pt = &r->points[n];
    __atomic_store_n(&r->header.count, n + 1, __ATOMIC_RELEASE);
    memset(pt, 0, sizeof(*pt));
    strncpy(pt->name, name, OS_TRANSPORT_INJECT_NAME_LEN - 1);
    return pt;
}

/* The three setters: arm the slot with action and its parameter. */
static int ost_inject_set(const char *name, int32_t action, int32_t value, uint32_t ms, const char *message)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    os_transport_inject_point_t *pt;

    if (r == NULL) {
        return -1;
    }
    ost_inject_lock(r);
    pt = ost_inject_slot(r, name);
    if (pt == NULL) {
        ost_inject_unlock(r);
        return -1;
    }
    pt->action_type = action;
    switch (action) {
    case OS_TRANSPORT_INJECT_ACTION_SLEEP:
        pt->sleep_ms = ms;
        break;
    case OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR:
        pt->return_value = value;
        break;
    default:
        strncpy(pt->message, message, OS_TRANSPORT_INJECT_MSG_LEN - 1);
        pt->message[OS_TRANSPORT_INJECT_MSG_LEN - 1] = '\0';
        break;
    }
    __atomic_store_n(&pt->enabled, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&r->header.writer_pid, getpid(), __ATOMIC_RELEASE);
    __atomic_add_fetch(&r->header.seq, 1u, __ATOMIC_ACQ_REL);
    ost_inject_unlock(r);
    return 0;
}

OST_INJECT_API int os_transport_inject_set_sleep(const char *name, uint32_t ms)
{
    int ret = ost_inject_set(name, OS_TRANSPORT_INJECT_ACTION_SLEEP, 0, ms, NULL);
    if (ret == 0) {
        OST_INJECT_SAY("Set: %s = sleep(%u ms)", name, ms);
    }
    return ret;
}

OST_INJECT_API int os_transport_inject_set_return_error(const char *name, int error_code)
{
    int ret = ost_inject_set(name, OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR, error_code, 0, NULL);
    if (ret == 0) {
        OST_INJECT_SAY("Set: %s = error(%d)", name, error_code);
    }
    return ret;
}

OST_INJECT_API int os_transport_inject_set_print(const char *name, const char *message)
{
    return ost_inject_set(name, OS_TRANSPORT_INJECT_ACTION_PRINT, 0, 0, message);
}

OST_INJECT_API int os_transport_inject_set_frequency(const char *name, uint32_t percent_or_count)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    int i;

    if (r == NULL) {
        return -1;
    }
    ost_inject_lock(r);
    i = ost_inject_find(r, name);
    if (i < 0) {
        ost_inject_unlock(r);
        return -1;
    }
    if (percent_or_count <= 100) {
        r->points[i].frequency_percent = percent_or_count;
        r->points[i].trigger_limit = 0;
    } else {
        __atomic_store_n(&r->points[i].trigger_count, percent_or_count - 100, __ATOMIC_RELEASE);
        r->points[i].trigger_limit = percent_or_count - 100;
        r->points[i].frequency_percent = 0;
    }
    __atomic_add_fetch(&r->header.seq, 1u, __ATOMIC_ACQ_REL);
    ost_inject_unlock(r);
    return 0;
}

OST_INJECT_API void os_transport_inject_clear(const char *name)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    int i;

    if (r == NULL) {
        return;
    }
    ost_inject_lock(r);
    i = ost_inject_find(r, name);
    if (i >= 0) {
        __atomic_store_n(&r->points[i].enabled, 0, __ATOMIC_RELEASE);
        OST_INJECT_SAY("Cleared: %s", name);
    }
    __atomic_add_fetch(&r->header.seq, 1u, __ATOMIC_ACQ_REL);
    ost_inject_unlock(r);
}

OST_INJECT_API void os_transport_inject_clear_all(void)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    uint32_t n;
    uint32_t i;

    if (r == NULL) {
        return;
    }
    ost_inject_lock(r);
    n = __atomic_load_n(&r->header.count, __ATOMIC_ACQUIRE);
    for (i = 0; i < n && i < OS_TRANSPORT_INJECT_MAX_POINTS; i++) {
        __atomic_store_n(&r->points[i].enabled, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&r->points[i].trigger_count, r->points[i].trigger_limit, __ATOMIC_RELEASE);
    }
    __atomic_add_fetch(&r->header.seq, 1u, __ATOMIC_ACQ_REL);
    ost_inject_unlock(r);
    OST_INJECT_SAY("All cleared");
}

static __thread unsigned int t_seed;
static __thread int t_seeded;

OST_INJECT_API int os_transport_inject_execute(const char *name, int *out_return_value)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    os_transport_inject_point_t *pt;
    os_transport_inject_record_t *rec;
    int32_t action;
    int32_t value;
    uint32_t ms;
    uint32_t t;
    char message[OS_TRANSPORT_INJECT_MSG_LEN];
    int i;

    if (r == NULL) {
        return 0;
    }
    ost_inject_lock(r);
    i = ost_inject_find(r, name);
    if (i < 0 || __atomic_load_n(&r->points[i].enabled, __ATOMIC_ACQUIRE) == 0) {
        ost_inject_unlock(r);
        return 0;
    }
    pt = &r->points[i];
    if (pt->trigger_limit > 0) {
        uint32_t old = __atomic_fetch_sub(&pt->trigger_count, 1u, __ATOMIC_ACQ_REL);
        if (old == 0) {
            __atomic_fetch_add(&pt->trigger_count, 1u, __ATOMIC_ACQ_REL);
            ost_inject_unlock(r);
            return 0;
        }
    } else if (pt->frequency_percent > 0 && pt->frequency_percent < 100) {
        if (!t_seeded) {
            t_seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
            t_seeded = 1;
        }
        if ((uint32_t)(rand_r(&t_seed) % 100) >= pt->frequency_percent) {
            ost_inject_unlock(r);
            return 0;
        }
    }
    action = pt->action_type;
    value = pt->return_value;
    ms = pt->sleep_ms;
    memcpy(message, pt->message, sizeof(message));
    t = r->ring_tail % OS_TRANSPORT_INJECT_RING_LEN;
    rec = &r->ring[t];
    rec->timestamp_ns = ost_inject_now_ns();
    memset(rec->name, 0, sizeof(rec->name));
    strncpy(rec->name, name, OS_TRANSPORT_INJECT_NAME_LEN - 1);
    rec->action_type = action;
    rec->return_value = value;
    __atomic_store_n(&r->ring_tail, (t + 1) % OS_TRANSPORT_INJECT_RING_LEN, __ATOMIC_RELEASE);
    ost_inject_unlock(r);

    switch (action) {
    case OS_TRANSPORT_INJECT_ACTION_SLEEP:
        OST_INJECT_SAY("Executing sleep: %s = %u ms", name, ms);
        /* usleep(ms * 1000) with the product in 32 bits, as the original */
        {
            uint32_t us = ms * 1000u;
            ost_inject_sleep_ms(us / 1000u);
        }
        return 0;
    case OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR:
        OST_INJECT_SAY("Executing error: %s = %d", name, value);
        if (out_return_value != NULL) {
            *out_return_value = value;
        }
        return 1;
    case OS_TRANSPORT_INJECT_ACTION_PRINT:
        OST_INJECT_SAY("%s: %s", name, message);
        return 0;
    default:
        return 0;
    }
}

OST_INJECT_API void os_transport_inject_cleanup(void)
{
    OST_INJECT_SAY("Cleaning up shared memory...");
    if (g_reg != NULL) {
        munmap(g_reg, sizeof(*g_reg));
        g_reg = NULL;
    }
    if (g_fd >= 0) {
        close(g_fd);
        g_fd = -1;
    }
    shm_unlink(OS_TRANSPORT_INJECT_SHM_NAME);
}

OST_INJECT_API uint32_t os_transport_inject_get_count(void)
{
    os_transport_inject_registry_t *r = os_transport_inject_init();
    return r == NULL ? 0u : __atomic_load_n(&r->header.count, __ATOMIC_ACQUIRE);
}

#endif
