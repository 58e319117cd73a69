# TEST ONLY: offline stand-in of @rules_cc for Debian's Bazel 4.2 (its default WORKSPACE would
# download rules_cc; Debian's packaged rules_cc needs a newer Bazel): the native rules.
cc_binary = native.cc_binary
cc_import = native.cc_import
cc_library = native.cc_library
cc_test = native.cc_test
cc_toolchain = native.cc_toolchain
cc_toolchain_suite = native.cc_toolchain_suite
objc_library = native.objc_library
fdo_profile = native.fdo_profile
fdo_prefetch_hints = native.fdo_prefetch_hints
cc_proto_library = native.cc_proto_library
