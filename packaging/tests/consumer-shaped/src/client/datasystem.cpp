namespace pipeline {
int Run();
}

namespace datasystem {
int Run()
{
    return pipeline::Run();
}
}  // namespace datasystem
