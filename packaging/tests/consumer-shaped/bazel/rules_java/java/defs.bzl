# TEST ONLY: offline stand-in of @rules_java for Debian's Bazel 4.2 (its default WORKSPACE would
# download it): the native rules.
java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_plugin = native.java_plugin
java_proto_library = native.java_proto_library
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
