#!/bin/sh
# Regenerate urma-sys/src/bindings.rs from the bundled headers (needs libclang).
# Writes through the freshness test so that exactly one bindgen configuration
# (bindgen_config.rs) exists. Also refreshes src/flags.rs if the ABI JSON is at
# hand (needs python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
URMA_SYS_BLESS=1 cargo test -p urma-sys --test bindings_fresh -- --nocapture
json=${URMA_ABI_JSON:-"$here/../../shared/spec/urma_abi_x86_64.json"}
if [ -f "$json" ] && command -v python3 >/dev/null 2>&1; then
    python3 "$here/tools/gen_flags.py" "$json"
fi
cargo test -p urma-sys --test bindings_fresh
