/*
 * replay_main.c - plain driver for cr_fuzz.c without libFuzzer: replays every input file given on
 * the command line (files or directories, one level), then destroys the instance. Used to run the
 * fuzz scenarios under valgrind memcheck / helgrind / DRD (make reliability-valgrind) and to
 * reproduce a crash artifact with any compiler.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int cr_fuzz_teardown(void);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 1;
}

int main(int argc, char **argv)
{
    LLVMFuzzerInitialize(&argc, &argv);
    int runs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            continue;
        if (!S_ISDIR(st.st_mode)) {
            runs += replay_file(argv[i]);
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            runs += replay_file(p);
        }
        if (d)
            closedir(d);
    }
    int bad = cr_fuzz_teardown();
    printf("replayed %d inputs, teardown %s\n", runs, bad ? "FAILED" : "ok");
    return bad;
}
