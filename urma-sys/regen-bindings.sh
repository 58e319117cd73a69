#!/bin/sh
# Regenerate the committed generated files of urma-sys from the bundled headers
# and the URMA ABI JSON:
#   src/bindings.rs         bindgen (needs libclang), through tests/bindings_fresh.rs
#                           with URMA_SYS_BLESS=1 so that bindgen_config.rs is the
#                           only bindgen configuration
#   src/flags.rs            tools/gen_flags.py      (needs python3 and the JSON)
#   tests/data/abi_table.rs tools/gen_abi_table.py  (reads the JSON and src/bindings.rs)
#   abi/abi_static_check.c  tools/gen_abi_table.py
# then runs the urma-sys tests. JSON: $URMA_ABI_JSON or ../shared/spec/ beside the repo.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
URMA_SYS_BLESS=1 cargo test -p urma-sys --test bindings_fresh -- --nocapture
json=${URMA_ABI_JSON:-"$here/../../shared/spec/urma_abi_x86_64.json"}
if [ -f "$json" ]; then
    python3 "$here/tools/gen_flags.py" "$json"
    python3 "$here/tools/gen_abi_table.py" "$json"
else
    echo "regen-bindings.sh: $json not found: src/flags.rs and the ABI tables left as they are" >&2
fi
cargo test -p urma-sys
