/*
 * vgreq.c - callgrind client requests for ostbench: zero the counters when the measured window
 * starts and dump them when it ends. Without valgrind these are a few no-op instructions.
 */
#ifdef OSTBENCH_HAVE_VALGRIND
#include <valgrind/callgrind.h>
#include <valgrind/valgrind.h>
#endif

void ostbench_cg_zero(void)
{
#ifdef OSTBENCH_HAVE_VALGRIND
    CALLGRIND_ZERO_STATS;
#endif
}

void ostbench_cg_dump(const char *reason)
{
#ifdef OSTBENCH_HAVE_VALGRIND
    CALLGRIND_DUMP_STATS_AT(reason);
#else
    (void)reason;
#endif
}

/* 1 when running under valgrind with client requests compiled in, else 0. */
int ostbench_on_valgrind(void)
{
#ifdef OSTBENCH_HAVE_VALGRIND
    return RUNNING_ON_VALGRIND ? 1 : 0;
#else
    return 0;
#endif
}
