# The option block of docs/migration.md ("The consumer's CMake build"), as the consumer puts it at
# the top of its cmake/external_libs/mlcachedirect.cmake: with -DMLCACHEDIRECT_SYSTEM=ON the
# installed mlcachedirect stands in for the library target and the variables that the rest of
# the file defines from the downloaded C sources; the rest of the file is the way back.
option(MLCACHEDIRECT_SYSTEM "link the installed mlcachedirect (mlcachedirect-devel) instead of building the C sources" OFF)
set(MLCACHEDIRECT_LINKAGE "static" CACHE STRING
    "static: libos_transport.a (mlcachedirect-static); shared: libos_transport.so.1 (mlcachedirect); inject: the inject flavour's libos_transport.a (mlcachedirect-inject)")
if(MLCACHEDIRECT_SYSTEM)
  find_package(os-transport 1.0 REQUIRED)
  add_library(mlcachedirect_os_transport_static INTERFACE)
  if(MLCACHEDIRECT_LINKAGE STREQUAL "shared")
    target_link_libraries(mlcachedirect_os_transport_static INTERFACE os-transport::os_transport Threads::Threads)
  elseif(MLCACHEDIRECT_LINKAGE STREQUAL "inject")
    target_link_libraries(mlcachedirect_os_transport_static INTERFACE os-transport::os_transport_inject_static)
  else()
    target_link_libraries(mlcachedirect_os_transport_static INTERFACE os-transport::os_transport_static)
  endif()
  # <prefix>/lib64/cmake/os-transport -> <prefix>/include, which holds os-transport/os_transport.h
  get_filename_component(OS_TRANSPORT_INCLUDE_DIR "${os-transport_DIR}/../../../include" ABSOLUTE)
  set(MLCacheDirect_INCLUDE_DIR "${OS_TRANSPORT_INCLUDE_DIR}/os-transport")
  set(MLCacheDirect_LIBRARY mlcachedirect_os_transport_static)
  return()
endif()
