/*
 * two_rust.c - a C program with two Rust static libraries (tests/static_archive.rs):
 * libos_transport.a and second_rust.rs's archive, built by another Rust version. It first lets the
 * second one raise and catch a panic, then runs consumer.c's install test (compiled with its main
 * renamed consumer_main): 2 MiB + 1 byte sent and received through libos_transport.a over the
 * loopback. "two-rust: OK" when both worked.
 */
#include <stdio.h>

#include "os_transport.h"

int second_rust_panic_caught(void);
int consumer_main(int argc, char **argv);

int main(void)
{
    char name[] = "consumer", mode[] = "install";
    char *args[] = {name, mode, NULL};
    int caught = second_rust_panic_caught();

    printf("two-rust: panic caught in the second archive: %s\n", caught == 1 ? "yes" : "no");
    if (caught != 1 || consumer_main(2, args) != 0) {
        return 1;
    }
    printf("two-rust: OK\n");
    return 0;
}
