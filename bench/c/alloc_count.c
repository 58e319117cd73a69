/*
 * alloc_count.c - LD_PRELOAD counting allocator for ostbench (make bench).
 *
 * Interposes the glibc allocation entry points and forwards them to glibc's own implementation
 * (__libc_malloc & co., exported by glibc for exactly this purpose). Every call is counted, and
 * attributed to "the library under test" when its return address lies inside the address range set
 * with ostbench_alloc_set_range() (the mapped range of libos_transport.so), otherwise to "other"
 * (the loopback provider, the benchmark itself, libc internals).
 *
 * The library under test must be dlopen'ed WITHOUT RTLD_DEEPBIND: a deep-bound object resolves
 * malloc in its own dependency scope (libc) first and would bypass this interposer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);

#define EXPORT __attribute__((visibility("default")))

static uintptr_t g_lo, g_hi;
/* [0] lib allocs, [1] lib frees, [2] lib bytes, [3] other allocs, [4] other frees, [5] other bytes */
static uint64_t g_cnt[6];

static inline int in_lib(const void *ra)
{
    uintptr_t a = (uintptr_t)ra;
    uintptr_t lo = __atomic_load_n(&g_lo, __ATOMIC_RELAXED);
    uintptr_t hi = __atomic_load_n(&g_hi, __ATOMIC_RELAXED);
    return a >= lo && a < hi;
}

static inline void count_alloc(const void *ra, size_t n)
{
    int l = in_lib(ra);
    __atomic_fetch_add(&g_cnt[l ? 0 : 3], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_cnt[l ? 2 : 5], n, __ATOMIC_RELAXED);
}

static inline void count_free(const void *ra)
{
    __atomic_fetch_add(&g_cnt[in_lib(ra) ? 1 : 4], 1, __ATOMIC_RELAXED);
}

EXPORT void ostbench_alloc_set_range(uintptr_t lo, uintptr_t hi)
{
    __atomic_store_n(&g_lo, lo, __ATOMIC_RELAXED);
    __atomic_store_n(&g_hi, hi, __ATOMIC_RELAXED);
}

EXPORT void ostbench_alloc_get(uint64_t out[6])
{
    for (int i = 0; i < 6; i++)
        out[i] = __atomic_load_n(&g_cnt[i], __ATOMIC_RELAXED);
}

EXPORT void *malloc(size_t n)
{
    count_alloc(__builtin_return_address(0), n);
    return __libc_malloc(n);
}

EXPORT void free(void *p)
{
    if (p)
        count_free(__builtin_return_address(0));
    __libc_free(p);
}

EXPORT void *calloc(size_t n, size_t m)
{
    count_alloc(__builtin_return_address(0), n * m);
    return __libc_calloc(n, m);
}

EXPORT void *realloc(void *p, size_t n)
{
    const void *ra = __builtin_return_address(0);
    if (p == NULL || n > 0)
        count_alloc(ra, n);
    if (p != NULL && n == 0)
        count_free(ra);
    return __libc_realloc(p, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    count_alloc(__builtin_return_address(0), n);
    return __libc_memalign(align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    count_alloc(__builtin_return_address(0), n);
    return __libc_memalign(align, n);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    count_alloc(__builtin_return_address(0), n);
    void *p = __libc_memalign(align, n);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

EXPORT void *valloc(size_t n)
{
    count_alloc(__builtin_return_address(0), n);
    return __libc_memalign(4096, n);
}
