#include <cstdio>

namespace pipeline {
int Run();
}

int main()
{
    int rc = pipeline::Run();
    std::printf("pipeline_direct: %s\n", rc == 0 ? "OK" : "FAILED");
    return rc;
}
