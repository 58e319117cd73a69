/*
 * dlopen.c - install test of the runtime package (`make rpm-test`): loads libos_transport by
 * each name given on the command line, as programs that dlopen() it do (yuanrong-datasystem's
 * loader used "libos_transport.so"), resolves the ten exported functions and prints the file
 * the dynamic loader mapped, one line per name:  <name> <path of the loaded object>
 *
 * Exit status 0 = every name loaded and exports all ten functions.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>

static const char *const SYMBOLS[] = {
    "os_transport_init",       "os_transport_destroy",        "os_transport_reg_jfc",
    "os_transport_send",       "os_transport_recv",           "os_transport_wake_up_task",
    "os_transport_cancel_tasks", "wait_and_free_sync",        "wait_and_free_sync_timeout",
    "os_transport_log_reg",
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen NAME...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) {
            fprintf(stderr, "dlopen: FAIL %s: %s\n", argv[i], dlerror());
            return 1;
        }
        for (size_t s = 0; s < sizeof(SYMBOLS) / sizeof(SYMBOLS[0]); s++) {
            if (dlsym(h, SYMBOLS[s]) == NULL) {
                fprintf(stderr, "dlopen: FAIL %s: no symbol %s\n", argv[i], SYMBOLS[s]);
                return 1;
            }
        }
        struct link_map *map = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || map == NULL) {
            fprintf(stderr, "dlopen: FAIL %s: dlinfo: %s\n", argv[i], dlerror());
            return 1;
        }
        printf("%s %s\n", argv[i], map->l_name);
        dlclose(h);
    }
    return 0;
}
