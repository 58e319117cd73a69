//! The provider interface of the URMA core (`urma_provider.h`): what a provider plugin
//! (`liburma-<name>.so` in the core's `urma/` plugin directory) hands to `liburma.so.0` and gets
//! from it.
//!
//! * [`urma_provider_ops_t`] (registered with [`urma_register_provider_ops`] from the plugin's
//!   ELF constructor, unregistered with [`urma_unregister_provider_ops`] from its destructor),
//!   with [`urma_provider_attr_t`] and [`urma_match_entry_t`];
//! * [`urma_ops_t`], the per-context table of 99 operations `urma_context_t.ops` points to;
//! * [`urma_register_sysfs_dev`] and [`URMA_SYSFS_DEV_FLAG_DRIVER_CREATED`] for a device the
//!   provider makes itself, and in [`sysfs_dev`] the layout of the structure it takes (private to
//!   the core, hence pinned per core version) with a builder and a check of what the core wrote.
//!
//! The types are the bindgen bindings of the bundled `urma_provider.h` (also reachable from the
//! crate root); [`OPS_NONE`] and [`PROVIDER_OPS_NONE`] are all-NULL tables for
//! `static OPS: urma_ops_t = urma_ops_t { name: .., create_jfc: Some(..), ..OPS_NONE };`.
//! `docs/umdk-core.md` of the repository describes what the core does around each call.

use std::mem::{align_of, offset_of, size_of};

pub use crate::{
    urma_advise_async_cb_func, urma_match_entry, urma_match_entry_t, urma_ops, urma_ops_t,
    urma_provider_attr, urma_provider_attr_t, urma_provider_ops, urma_provider_ops_t,
    urma_register_provider_ops, urma_register_sysfs_dev, urma_sysfs_dev, urma_tp_attr_mask,
    urma_tp_attr_mask_t, urma_unregister_provider_ops, URMA_SYSFS_DEV_FLAG_DRIVER_CREATED,
};

pub mod sysfs_dev;

/// The per-context ops table with every slot NULL and no name (the core fails a call whose slot
/// is NULL with `URMA_EINVAL`).
// SAFETY: urma_ops_t holds a pointer and `Option`s of function pointers: all-zero bytes are a
// null pointer and `None` everywhere.
pub const OPS_NONE: urma_ops_t = unsafe { std::mem::zeroed() };

/// The provider table with every slot NULL, no name, no match table and zero attributes.
// SAFETY: as for OPS_NONE: pointers, `Option`s of function pointers and two 32-bit integers
// (the transport type is a C enum bound as an integer), for which all-zero bytes are valid.
pub const PROVIDER_OPS_NONE: urma_provider_ops_t = unsafe { std::mem::zeroed() };

// SAFETY: an ops table is read-only data the core and the applications read from any thread:
// its name and slots are pointers to static strings and functions. A shared reference only
// reads the pointer values; writing through them needs `unsafe` code of its own.
unsafe impl Sync for urma_ops {}

// SAFETY: as for urma_ops; `match_table` points to a static, read-only array.
unsafe impl Sync for urma_provider_ops {}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!(
    "urma-sys: the URMA provider interface is measured for x86_64 and aarch64 only. For another \
     architecture, measure it from the genuine UMDK headers (UMDK_SRC=<tree> URMA_SYS_BLESS=1 \
     cargo test -p urma-sys --test provider_abi writes tests/data/urma_provider_abi_<arch>.json) \
     and add its numbers to urma-sys/src/provider.rs and provider/sysfs_dev.rs."
);

// Sizes and offsets measured on the genuine UMDK headers, the same on both architectures (the
// tables hold only pointers and 32-bit integers): tests/data/urma_provider_abi_x86_64.json and
// urma_provider_abi_aarch64.json. `cargo test -p urma-sys --test provider_abi` checks every field.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const _: () = {
    assert!(size_of::<urma_ops_t>() == 800);
    assert!(align_of::<urma_ops_t>() == 8);
    assert!(offset_of!(urma_ops_t, create_jfc) == 8);
    assert!(offset_of!(urma_ops_t, create_jfce) == 480);
    assert!(offset_of!(urma_ops_t, post_jfs_wr) == 640);
    assert!(offset_of!(urma_ops_t, poll_jfc) == 672);
    assert!(offset_of!(urma_ops_t, get_dmac) == 792);
    assert!(size_of::<urma_provider_ops_t>() == 72);
    assert!(align_of::<urma_provider_ops_t>() == 8);
    assert!(offset_of!(urma_provider_ops_t, match_table) == 16);
    assert!(offset_of!(urma_provider_ops_t, init) == 24);
    assert!(offset_of!(urma_provider_ops_t, create_context) == 48);
    assert!(offset_of!(urma_provider_ops_t, get_uasid) == 64);
    assert!(size_of::<urma_provider_attr_t>() == 8);
    assert!(size_of::<urma_match_entry_t>() == 4);
    assert!(size_of::<urma_tp_attr_mask_t>() == 4);
    assert!(URMA_SYSFS_DEV_FLAG_DRIVER_CREATED == 1);
};
