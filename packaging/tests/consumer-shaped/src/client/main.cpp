// The programs of the probe: datasystem_worker (built with VIA_DATASYSTEM) runs the pipeline
// through libdatasystem.so; pipeline_direct links the pipeline library itself.
#include <cstdio>

#ifdef VIA_DATASYSTEM
namespace datasystem {
int Run();
}
#define PROBE_NAME "datasystem_worker"
#define PROBE_RUN datasystem::Run
#else
namespace pipeline {
int Run();
}
#define PROBE_NAME "pipeline_direct"
#define PROBE_RUN pipeline::Run
#endif

int main()
{
    int rc = PROBE_RUN();
    std::printf("%s: %s\n", PROBE_NAME, rc == 0 ? "OK" : "FAILED");
    return rc;
}
