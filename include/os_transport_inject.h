/*
 * os_transport_inject.h - the fault-injection interface of libos_transport's inject flavour
 * (docs/inject.md). One host-wide POSIX shared-memory registry ("/os_transport_inject") holds up
 * to 32 named inject points; a tool process arms them and every inject-enabled library on the
 * host applies them the next time it passes a point.
 *
 * The ten functions are exported only by the inject flavour (built with
 * OS_TRANSPORT_WITH_INJECT=1). Without that define this header still declares the types and
 * constants, and gives static inline stand-ins that do nothing.
 */
#ifndef OS_TRANSPORT_INJECT_H
#define OS_TRANSPORT_INJECT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OS_TRANSPORT_INJECT_SHM_NAME "/os_transport_inject"
#define OS_TRANSPORT_INJECT_VERSION 0x20250413u
#define OS_TRANSPORT_INJECT_MAX_POINTS 32
#define OS_TRANSPORT_INJECT_NAME_LEN 64
#define OS_TRANSPORT_INJECT_MSG_LEN 128
#define OS_TRANSPORT_INJECT_RING_LEN 64

/* The seven points of the library. */
#define OS_TRANSPORT_INJECT_SEND_BEGIN "os_transport.send.begin"
#define OS_TRANSPORT_INJECT_RECV_BEGIN "os_transport.recv.begin"
#define OS_TRANSPORT_INJECT_TASK_GROUP_ALLOC "os_transport.task_group.alloc"
#define OS_TRANSPORT_INJECT_SEND_FIRST_CHUNK "os_transport.send.first_chunk"
#define OS_TRANSPORT_INJECT_URMA_WRITE "os_transport.urma.write"
#define OS_TRANSPORT_INJECT_URMA_RECV "os_transport.urma.recv"
#define OS_TRANSPORT_INJECT_NOTIFY_CALLBACK "os_transport.notify_callback"

typedef enum {
    OS_TRANSPORT_INJECT_ACTION_NONE = 0,
    OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR = 1,
    OS_TRANSPORT_INJECT_ACTION_SLEEP = 2,
    OS_TRANSPORT_INJECT_ACTION_PRINT = 3
} os_transport_inject_action_t;

/* 20 bytes. */
typedef struct {
    uint32_t version;    /* 0 until the creator has initialised the object */
    uint32_t seq;        /* change counter */
    int32_t lock;        /* spin lock: 0 free, 1 held */
    uint32_t count;      /* slots used, only grows */
    pid_t writer_pid;    /* last setter */
} os_transport_inject_header_t;

/* 252 bytes. */
typedef struct {
    char name[OS_TRANSPORT_INJECT_NAME_LEN];
    int32_t action_type; /* os_transport_inject_action_t */
    int32_t return_value;
    uint32_t sleep_ms;
    char message[OS_TRANSPORT_INJECT_MSG_LEN];
    int32_t enabled;
    uint32_t frequency_percent; /* 1..99: that often; 0 or >= 100: always */
    uint32_t trigger_count;     /* count mode: firings left */
    uint32_t trigger_limit;     /* count mode when non-zero */
    uint8_t padding[32];
} os_transport_inject_point_t;

/* 80 bytes. */
typedef struct {
    uint64_t timestamp_ns; /* CLOCK_MONOTONIC */
    char name[OS_TRANSPORT_INJECT_NAME_LEN];
    int32_t action_type;
    int32_t return_value;
} os_transport_inject_record_t;

/* 13272 bytes, the same on every LP64 little-endian target. */
typedef struct {
    os_transport_inject_header_t header;
    os_transport_inject_point_t points[OS_TRANSPORT_INJECT_MAX_POINTS];
    uint32_t ring_tail;
    uint8_t ring_padding[60];
    os_transport_inject_record_t ring[OS_TRANSPORT_INJECT_RING_LEN];
} os_transport_inject_registry_t;

os_transport_inject_registry_t *os_transport_inject_init(void);

#if defined(OS_TRANSPORT_WITH_INJECT) && OS_TRANSPORT_WITH_INJECT

int os_transport_inject_set_sleep(const char *name, uint32_t ms);
int os_transport_inject_set_return_error(const char *name, int error_code);
int os_transport_inject_set_print(const char *name, const char *message);
int os_transport_inject_set_frequency(const char *name, uint32_t percent_or_count);
void os_transport_inject_clear(const char *name);
void os_transport_inject_clear_all(void);
/* 1 when an error fires (its value in *out_return_value if not NULL), else 0. */
int os_transport_inject_execute(const char *name, int *out_return_value);
void os_transport_inject_cleanup(void);
uint32_t os_transport_inject_get_count(void);

/* Returns the injected value, converted to var's type, from the enclosing function. */
#define OS_TRANSPORT_INJECT_POINT(name, var)                                                              \
    do {                                                                                                  \
        int ost_inject_v_ = 0;                                                                            \
        if (os_transport_inject_execute((name), &ost_inject_v_) == 1) {                                   \
            (var) = (__typeof__(var))ost_inject_v_;                                                       \
            fprintf(stderr, "[OS_TRANSPORT_INJECT] Injected at %s:%d (%s), ret=%d\n", __FILE__, __LINE__, \
                    (name), ost_inject_v_);                                                               \
            return (var);                                                                                 \
        }                                                                                                 \
    } while (0)
#define OS_TRANSPORT_INJECT_POINT_VOID(name) ((void)os_transport_inject_execute((name), NULL))

#else

static inline int os_transport_inject_set_sleep(const char *name, uint32_t ms)
{
    (void)name;
    (void)ms;
    return 0;
}
static inline int os_transport_inject_set_return_error(const char *name, int error_code)
{
    (void)name;
    (void)error_code;
    return 0;
}
static inline int os_transport_inject_set_print(const char *name, const char *message)
{
    (void)name;
    (void)message;
    return 0;
}
static inline int os_transport_inject_set_frequency(const char *name, uint32_t percent_or_count)
{
    (void)name;
    (void)percent_or_count;
    return 0;
}
static inline void os_transport_inject_clear(const char *name)
{
    (void)name;
}
static inline void os_transport_inject_clear_all(void)
{
}
static inline int os_transport_inject_execute(const char *name, int *out_return_value)
{
    (void)name;
    (void)out_return_value;
    return 0;
}
static inline void os_transport_inject_cleanup(void)
{
}
static inline uint32_t os_transport_inject_get_count(void)
{
    return 0;
}
#define OS_TRANSPORT_INJECT_POINT(name, var) ((void)0)
#define OS_TRANSPORT_INJECT_POINT_VOID(name) ((void)0)

#endif

#ifdef __cplusplus
}
#endif

#endif /* OS_TRANSPORT_INJECT_H */
