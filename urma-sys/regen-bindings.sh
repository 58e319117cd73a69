#!/bin/sh
# Regenerate the committed generated files of urma-sys from the bundled headers
# and the URMA ABI JSON:
#   src/bindings_<arch>.rs  bindgen (needs libclang), through tests/bindings_fresh.rs
#                           with URMA_SYS_BLESS=1 so that bindgen_config.rs is the
#                           only bindgen configuration
#   src/flags.rs            tools/gen_flags.py      (needs python3 and the JSON)
#   tests/data/abi_table.rs tools/gen_abi_table.py  (reads the JSONs and src/bindings_x86_64.rs)
#   abi/abi_static_check.c  tools/gen_abi_table.py
#   abi/provider_static_check.c  tests/provider_abi.rs with URMA_SYS_BLESS=1, from
#                           tests/data/urma_provider_abi_{x86_64,aarch64}.json (with UMDK_SRC set
#                           to a UMDK source tree, the JSONs are first remeasured from its headers)
# then runs the urma-sys tests. The ABI facts are tests/data/urma_abi_{x86_64,aarch64}.json;
# the aarch64 bindings need the aarch64 C library headers (Debian: libc6-dev-arm64-cross).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
URMA_SYS_BLESS=1 cargo test -p urma-sys --test bindings_fresh -- --nocapture
python3 "$here/tools/gen_flags.py"
python3 "$here/tools/gen_abi_table.py"
# One thread: the remeasured JSONs are written before the static check is made from them.
URMA_SYS_BLESS=1 cargo test -p urma-sys --test provider_abi -- --test-threads=1
cargo test -p urma-sys
