/*
 * strip_deepbind.c - LD_PRELOAD helper for running the ASan build of the legacy library inside a
 * test binary that dlopens it with RTLD_DEEPBIND (compat-tests does). The sanitizer runtime
 * refuses RTLD_DEEPBIND (google/sanitizers#611), so this shim removes the flag and forwards to
 * the next dlopen (the ASan interceptor). Preload it *before* libasan and set
 * ASAN_OPTIONS=verify_asan_link_order=0; see legacy-c/README.md. Test tool only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef void *(*ost_dlopen_fn)(const char *, int);

void *dlopen(const char *file, int mode)
{
    static ost_dlopen_fn next = NULL;
    if (next == NULL) {
        next = (ost_dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
        if (next == NULL) {
            return NULL;
        }
    }
    return next(file, mode & ~RTLD_DEEPBIND);
}
