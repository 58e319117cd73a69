#include <cstdio>

namespace datasystem {
int Run();
}

int main()
{
    int rc = datasystem::Run();
    std::printf("datasystem_worker: %s\n", rc == 0 ? "OK" : "FAILED");
    return rc;
}
