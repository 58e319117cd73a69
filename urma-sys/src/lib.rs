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
//!
//! The bindings come from the ABI-exact headers bundled in `include/`
//! (see [`bundled_include_dir`]); see README.md for how headers, bindings
//! and the link-only `liburma.so` stub are chosen.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

// Generated code (bindgen): its unsafe blocks (bitfield accessors) carry no
// `// SAFETY:` comments, so the workspace `undocumented_unsafe_blocks` lint is
// allowed for this module only.
#[allow(
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    clippy::pedantic,
    missing_docs,
    unsafe_op_in_unsafe_fn,
    rustdoc::broken_intra_doc_links
)]
mod bindings {
    #[cfg(not(urma_sys_generated_bindings))]
    include!("bindings.rs");
    #[cfg(urma_sys_generated_bindings)]
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

pub use bindings::*;

pub mod flags;

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
