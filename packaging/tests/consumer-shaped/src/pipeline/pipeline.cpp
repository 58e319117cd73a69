// The consumer's side of the library (re-stated): it includes the header by its prefixed name and
// calls the functions directly through one macro per call site, as its own mapping does.
#include "os-transport/os_transport.h"

#include <cstdio>

#ifndef URMA_UBAGG_H
#error "URMA_OVER_UB is defined but os_transport.h did not include <ub/umdk/urma/urma_ubagg.h>"
#endif
static_assert(URMA_UBAGG_DEV_MAX_NUM > 0, "the genuine urma_ubagg.h");

#define CALL_OS_TRANSPORT(fn, ...) (fn(__VA_ARGS__))

extern "C" int consumer_main(int argc, char **argv);

namespace pipeline {

int Run()
{
    void *handle = nullptr;
    // The library refuses an instance without a URMA context.
    uint32_t rc = CALL_OS_TRANSPORT(os_transport_init, nullptr, nullptr, &handle);
    std::printf("pipeline: os_transport_init(NULL, NULL) = %d\n", static_cast<int>(rc));
    if (rc != static_cast<uint32_t>(-1) || handle != nullptr) {
        return 1;
    }
    char name[] = "consumer", mode[] = "install";
    char *args[] = {name, mode, nullptr};
    return consumer_main(2, args);
}

}  // namespace pipeline
