/*
 * inject.c - a C program linked with the inject flavour's libos_transport.a (tests/static_archive.rs;
 * `make rpm-test` step 10 links the installed archive): it arms inject points through the
 * archive's own os_transport_inject_* functions and runs consumer.c's install test (compiled with
 * its main renamed consumer_main: 2 MiB + 1 byte over the loopback), each run in a child process
 * (the install test keeps its counters in statics):
 *
 *   1. os_transport.send.begin armed with a 300 ms sleep: the transfer succeeds and takes at
 *      least 300 ms;
 *   2. os_transport.send.begin armed with error 77: os_transport_send fails, the child exits 1;
 *   3. the point cleared: the transfer succeeds.
 *
 * After each armed run the registry's ring (os_transport_inject_init() maps it) must hold a firing
 * of the point with that action and value, written by the child. "inject: OK" when all held.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "os_transport.h"
#include "os_transport_inject.h"

#define POINT OS_TRANSPORT_INJECT_SEND_BEGIN
#define SLEEP_MS 300u
#define ERROR_CODE 77

int consumer_main(int argc, char **argv);

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* consumer.c's install test in a child process: its exit status; *ms: how long it took. */
static int transfer(double *ms)
{
    char name[] = "consumer", mode[] = "install";
    char *args[] = {name, mode, NULL};
    double start = now_ms();
    int status = 0;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        perror("inject: fork");
        return -1;
    }
    if (pid == 0) {
        int rc = consumer_main(2, args);
        fflush(NULL);
        _exit(rc);
    }
    if (waitpid(pid, &status, 0) != pid) {
        perror("inject: waitpid");
        return -1;
    }
    *ms = now_ms() - start;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The firings of POINT with `action` (and `value`, for an error) in the ring since the tail
 * `since` (the index of the next record, modulo the ring's length). */
static int fired(const os_transport_inject_registry_t *reg, uint32_t since, int action, int value)
{
    uint32_t tail = __atomic_load_n(&reg->ring_tail, __ATOMIC_ACQUIRE), i;
    int n = 0;

    for (i = since; i != tail; i = (i + 1) % OS_TRANSPORT_INJECT_RING_LEN) {
        const os_transport_inject_record_t *r = &reg->ring[i % OS_TRANSPORT_INJECT_RING_LEN];
        if (strcmp(r->name, POINT) == 0 && r->action_type == action &&
            (action != OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR || r->return_value == value)) {
            n++;
        }
    }
    return n;
}

int main(void)
{
    os_transport_inject_registry_t *reg = os_transport_inject_init();
    uint32_t tail;
    double ms = 0;
    int rc, n;

    if (reg == NULL) {
        fprintf(stderr, "inject: FAIL: os_transport_inject_init gave no registry\n");
        return 1;
    }
    os_transport_inject_clear_all();

    tail = __atomic_load_n(&reg->ring_tail, __ATOMIC_ACQUIRE);
    if (os_transport_inject_set_sleep(POINT, SLEEP_MS) != 0) {
        fprintf(stderr, "inject: FAIL: os_transport_inject_set_sleep\n");
        return 1;
    }
    rc = transfer(&ms);
    n = fired(reg, tail, OS_TRANSPORT_INJECT_ACTION_SLEEP, 0);
    printf("inject: %s sleep %u ms: transfer exit %d in %.0f ms, %d firing(s)\n", POINT, SLEEP_MS, rc, ms, n);
    if (rc != 0 || ms < SLEEP_MS || n < 1) {
        fprintf(stderr, "inject: FAIL: the sleep did not delay a successful transfer\n");
        return 1;
    }

    tail = __atomic_load_n(&reg->ring_tail, __ATOMIC_ACQUIRE);
    if (os_transport_inject_set_return_error(POINT, ERROR_CODE) != 0) {
        fprintf(stderr, "inject: FAIL: os_transport_inject_set_return_error\n");
        return 1;
    }
    rc = transfer(&ms);
    n = fired(reg, tail, OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR, ERROR_CODE);
    printf("inject: %s error %d: transfer exit %d, %d firing(s)\n", POINT, ERROR_CODE, rc, n);
    if (rc != 1 || n != 1) {
        fprintf(stderr, "inject: FAIL: the error did not fail the send once\n");
        return 1;
    }

    os_transport_inject_clear(POINT);
    tail = __atomic_load_n(&reg->ring_tail, __ATOMIC_ACQUIRE);
    rc = transfer(&ms);
    n = fired(reg, tail, OS_TRANSPORT_INJECT_ACTION_RETURN_ERROR, ERROR_CODE) +
        fired(reg, tail, OS_TRANSPORT_INJECT_ACTION_SLEEP, 0);
    printf("inject: %s cleared: transfer exit %d, %d firing(s)\n", POINT, rc, n);
    if (rc != 0 || n != 0) {
        fprintf(stderr, "inject: FAIL: the cleared point still acted\n");
        return 1;
    }
    printf("inject: OK\n");
    return 0;
}
