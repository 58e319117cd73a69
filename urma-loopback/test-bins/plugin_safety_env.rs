//! What `tests/plugin_safety.rs` tells its role program (`plugin_safety_role.rs`): both include
//! this file by path, so the two agree on every name.

/// The URMA library the role loads (the core, or the standalone loopback).
pub const LIB: &str = "PS_LIB";
/// The core's `liburma_common.so.0`, loaded first (the core needs it; no loader path in a
/// setuid process).
pub const COMMON: &str = "PS_COMMON";
/// Set: the role calls `urma_uninit` before it ends.
pub const UNINIT: &str = "PS_UNINIT";
/// The device the plugin makes when enabled.
pub const DEVICE: &str = "loopback0";
