//! Helpers shared by the `tests/reliability_*.rs` suites: a seeded generator, request
//! wrappers over the C exports, a log-line counter and the loopback control functions.
#![allow(dead_code)]

pub use crate::common::lb::{io, recv, send, wait};
use os_transport::abi::*;
use os_transport::ffi::*;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use urma_sys::*;

pub use compat_tests::harness::random::{Draw, Rng};

/// The suites' generator for `seed`: the harness's SplitMix64, with the seed mixed once more (so
/// that the suites' small seeds 0, 1, 2, ... start far apart).
pub fn rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x9E37_79B9_7F4A_7C15)
}

/// Seed from `name` in the environment (decimal or 0x-hex), else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| {
            let v = v.trim();
            match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => v.parse().ok(),
            }
        })
        .unwrap_or(default)
}

/// Number of ERROR / WARN lines the library logged since the last [`log_counts`] reset.
pub static LOG_ERRORS: AtomicU64 = AtomicU64::new(0);
pub static LOG_WARNS: AtomicU64 = AtomicU64::new(0);

unsafe extern "C" fn count_log(level: i32, _msg: *const c_char) {
    match level & 0xFF {
        2 => LOG_ERRORS.fetch_add(1, Ordering::Relaxed),
        1 => LOG_WARNS.fetch_add(1, Ordering::Relaxed),
        _ => 0,
    };
}

/// Routes library logging to a counter (WARN and ERROR only; the rest is dropped cheaply).
pub fn quiet_logs() {
    assert_eq!(os_transport_log_reg(1, Some(count_log)), 0);
}

/// `os_transport_cancel_tasks` with a sync: (return, sync after the call).
pub fn cancel(h: *mut c_void, s: *mut task_sync_t, id: u64) -> (u32, *mut task_sync_t) {
    let mut s = s;
    // SAFETY: valid pointer to a local.
    let r = unsafe { os_transport_cancel_tasks(h, &mut s, id) };
    (r, s)
}

/// `os_transport_wake_up_task` on a CR.
pub fn wake(h: *mut c_void, cr: &mut urma_cr_t) -> i32 {
    // SAFETY: a valid CR the library only reads.
    unsafe { os_transport_wake_up_task(h, (cr as *mut urma_cr_t).cast()) }
}

/// Largest transfer (7 chunks).
pub const MAX_LEN: usize = 7 * DEFAULT_CHUNK_SIZE as usize;
const PATTERN_SHIFTS: usize = 1 << 20;

/// A fixed pseudo-random byte stream of `MAX_LEN + 1 MiB`; the payload of request `id` is the
/// window starting at `id`-dependent offset, so fill and check are `memcpy` / `memcmp`.
fn pattern_base() -> &'static [u8] {
    static P: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mut r = rng(0x0057_4E5D);
        let mut v = Vec::with_capacity(MAX_LEN + PATTERN_SHIFTS);
        while v.len() < MAX_LEN + PATTERN_SHIFTS {
            v.extend_from_slice(&r.next_u64().to_le_bytes());
        }
        v
    })
}

/// The payload of request `id` (`len` ≤ `MAX_LEN`).
pub fn payload(id: u64, len: usize) -> &'static [u8] {
    // 4099 is odd, so ids that differ by less than 2^20 get different windows.
    let off = (id.wrapping_mul(4099) % PATTERN_SHIFTS as u64) as usize;
    &pattern_base()[off..off + len]
}

/// Writes the payload of `id` into `buf[..len]`.
pub fn fill(buf: &mut [u8], id: u64, len: usize) {
    buf[..len].copy_from_slice(payload(id, len));
}

/// `true` if `buf[..len]` holds the payload of `id`.
pub fn check(buf: &[u8], id: u64, len: usize) -> bool {
    buf[..len] == *payload(id, len)
}

// ---- loopback control: `compat_tests::loopback_ctl` (the `urma-loopback-ctl` binding) ----

/// Lets test threads share loopback objects (raw URMA pointers) the test keeps alive.
pub struct Shared<T>(pub T);
// SAFETY: the wrapped URMA objects are thread-safe in the loopback and outlive the threads (scoped).
unsafe impl<T> Sync for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Send for Shared<T> {}
