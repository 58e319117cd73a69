//! Raw FFI bindings to openEuler UMDK URMA (`liburma.so.0`, `-lurma`).
//!
//! * Types, enumerator constants (without enum-name prefix, e.g.
//!   [`URMA_OPC_SEND_IMM`]), integer macros (status macros such as
//!   [`URMA_SUCCESS`] / [`URMA_ENOMEM`] are [`urma_status_t`] = `i32`) and the
//!   49 functions MLCacheDirect and its callers use, all under their C names.
//! * Anonymous C unions are bindgen's `__bindgen_anon_N` fields, e.g.
//!   `wr.__bindgen_anon_1.send.imm_data`, `cr.__bindgen_anon_1.imm_data`.
//! * Flag unions: use their `value` member with the masks in [`flags`].
//! * `pthread_mutex_t` / `pthread_cond_t` fields are `libc`'s types.
//! * [`provider`]: the provider interface of the URMA core (`urma_provider.h`, whose types and
//!   functions are also at the crate root) and the core-private device-registration structure
//!   pinned per core version.
//! * [`uburma`]: the two commands the core sends to the character device of a device a provider
//!   made itself (its EID list, its attributes), for what answers them in place of the kernel.
//!
//! The bindings come from the ABI-exact headers bundled in `include/`
//! (see [`bundled_include_dir`]); see README.md for how headers, bindings
//! and the link-only `liburma.so` stub are chosen.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

// Generated code (bindgen): its unsafe blocks (bitfield accessors) carry no
// `// SAFETY:` comments, so the workspace `undocumented_unsafe_blocks` lint is
// allowed for this module only.
#[allow(
    unknown_lints, // bindgen's `#[allow(unnecessary_transmutes)]` is newer than rustc 1.82
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::pedantic,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    rustdoc::broken_intra_doc_links
)]
mod bindings {
    // Committed per architecture: the handle structs that embed `pthread_mutex_t` /
    // `pthread_cond_t` (urma_context_t, urma_jf{c,s,r}_t, urma_jetty_t, urma_jetty_grp_t) have
    // other sizes and offsets on aarch64 than on x86_64; everything else is the same.
    #[cfg(all(not(urma_sys_generated_bindings), target_arch = "x86_64"))]
    include!("bindings_x86_64.rs");
    #[cfg(all(not(urma_sys_generated_bindings), target_arch = "aarch64"))]
    include!("bindings_aarch64.rs");
    #[cfg(urma_sys_generated_bindings)]
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "urma-sys: the URMA ABI is measured and the bindings are committed for x86_64 and aarch64 \
     only. For another architecture, measure its ABI facts from the real UMDK headers, add \
     tests/data/urma_abi_<arch>.json and src/bindings_<arch>.rs (urma-sys/regen-bindings.sh) \
     and check them with `cargo test -p urma-sys --test abi_layout`."
);

pub use bindings::*;

pub mod flags;
pub mod provider;
pub mod uburma;

/// Directory holding the bundled ABI-exact headers, i.e. the directory to pass
/// as `-I` so that `#include <ub/umdk/urma/urma_api.h>` finds them.
pub fn bundled_include_dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/include")
}

/// The include directory this build of urma-sys was generated against: the
/// bundled one, `URMA_INCLUDE_DIR`, or `/usr/include` with real UMDK headers.
/// Build scripts of dependents get the same value as `DEP_URMA_INCLUDE`.
pub fn include_dir() -> &'static str {
    env!("URMA_SYS_INCLUDE_DIR")
}
