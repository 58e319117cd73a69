// consumer.cpp - a C++ program of libos_transport.a (tests/static_archive.rs): os_transport.h in a
// C++ translation unit, the archive linked by the C++ driver (libstdc++ and its unwinder beside the
// archive's Rust runtime), a C++ exception thrown and caught, then consumer.c's install test
// (compiled as C with its main renamed consumer_main): 2 MiB + 1 byte over the loopback.
#include <cstdio>
#include <stdexcept>

#include "os_transport.h"

extern "C" int consumer_main(int argc, char **argv);

int main()
{
    // The header's prototypes are C linkage: the addresses are the archive's functions.
    uint32_t (*send)(void *, urma_jetty_info_t *, ost_buffer_info_t *, ost_buffer_info_t *, uint32_t, uint64_t,
                     uint64_t, task_sync_t **, urma_status_t *) = os_transport_send;
    try {
        throw std::runtime_error("a C++ exception beside the Rust archive");
    } catch (const std::runtime_error &e) {
        std::printf("consumer.cpp: caught '%s'; os_transport_send at %p\n", e.what(),
                    reinterpret_cast<void *>(send));
    }
    char name[] = "consumer", mode[] = "install";
    char *args[] = {name, mode, nullptr};
    return consumer_main(2, args);
}
