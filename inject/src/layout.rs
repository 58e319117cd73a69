//! The registry's binary layout, byte for byte as the original library lays it out
//! (docs/inject.md, "Registry"): one 13 272-byte object, the same on x86_64 and aarch64 (LP64,
//! little-endian, natural alignment). The fields other processes change concurrently without the
//! lock (the header words, `enabled`, `trigger_count`, `ring_tail`) are atomics; the rest is
//! written under the registry's spin lock.

use std::mem::{align_of, offset_of, size_of};
use std::sync::atomic::{AtomicI32, AtomicU32};

/// The object's name (`shm_open`).
pub const SHM_NAME: &str = "/os_transport_inject";
/// The layout version in `Header::version` (0 = not initialised yet).
pub const VERSION: u32 = 0x2025_0413;
/// Slots of the table.
pub const MAX_POINTS: usize = 32;
/// Bytes of a point name, NUL included.
pub const NAME_LEN: usize = 64;
/// Bytes of a print message, NUL included.
pub const MESSAGE_LEN: usize = 128;
/// Records of the ring.
pub const RING_LEN: usize = 64;

/// `action_type` values.
pub const ACTION_NONE: i32 = 0;
/// Return an error value from the point.
pub const ACTION_RETURN_ERROR: i32 = 1;
/// Sleep, then continue.
pub const ACTION_SLEEP: i32 = 2;
/// Print a message, then continue.
pub const ACTION_PRINT: i32 = 3;

/// The registry header (20 bytes).
#[repr(C)]
pub struct Header {
    /// [`VERSION`] once initialised.
    pub version: AtomicU32,
    /// Change counter.
    pub seq: AtomicU32,
    /// The spin-lock word: 0 free, 1 held.
    pub lock: AtomicI32,
    /// Slots used; only grows.
    pub count: AtomicU32,
    /// Pid of the last setter.
    pub writer_pid: AtomicI32,
}

/// One inject point's slot (252 bytes).
#[repr(C)]
pub struct Point {
    /// NUL-terminated name.
    pub name: [u8; NAME_LEN],
    /// One of the `ACTION_*` values.
    pub action_type: i32,
    /// The value an error returns.
    pub return_value: i32,
    /// The sleep in milliseconds.
    pub sleep_ms: u32,
    /// NUL-terminated print message.
    pub message: [u8; MESSAGE_LEN],
    /// 0 or 1.
    pub enabled: AtomicI32,
    /// Percent mode: 1..99 fires that often, 0 or >= 100 always.
    pub frequency_percent: u32,
    /// Count mode: firings left.
    pub trigger_count: AtomicU32,
    /// Count mode when non-zero: the budget last set.
    pub trigger_limit: u32,
    /// Unused, zero.
    pub padding: [u8; 32],
}

/// One firing in the ring (80 bytes).
#[repr(C)]
pub struct Record {
    /// CLOCK_MONOTONIC in nanoseconds; 0 = never written.
    pub timestamp_ns: u64,
    /// NUL-padded point name.
    pub name: [u8; NAME_LEN],
    /// The action that fired.
    pub action_type: i32,
    /// The slot's return value at the time.
    pub return_value: i32,
}

/// The whole shared object (13 272 bytes).
#[repr(C)]
pub struct Registry {
    /// Version, counters, lock.
    pub header: Header,
    /// The slots, filled in order.
    pub points: [Point; MAX_POINTS],
    /// Next ring record to write (0..63).
    pub ring_tail: AtomicU32,
    /// Unused.
    pub ring_padding: [u8; 60],
    /// The last 64 firings of every point.
    pub ring: [Record; RING_LEN],
}

/// The object's size, also the length of the mapping.
pub const REGISTRY_SIZE: usize = size_of::<Registry>();

// The layout of docs/inject.md, checked by the compiler for every target this crate is built for.
const _: () = {
    assert!(size_of::<Header>() == 20 && align_of::<Header>() == 4);
    assert!(offset_of!(Header, seq) == 4);
    assert!(offset_of!(Header, lock) == 8);
    assert!(offset_of!(Header, count) == 12);
    assert!(offset_of!(Header, writer_pid) == 16);
    assert!(size_of::<Point>() == 252 && align_of::<Point>() == 4);
    assert!(offset_of!(Point, action_type) == 64);
    assert!(offset_of!(Point, return_value) == 68);
    assert!(offset_of!(Point, sleep_ms) == 72);
    assert!(offset_of!(Point, message) == 76);
    assert!(offset_of!(Point, enabled) == 204);
    assert!(offset_of!(Point, frequency_percent) == 208);
    assert!(offset_of!(Point, trigger_count) == 212);
    assert!(offset_of!(Point, trigger_limit) == 216);
    assert!(offset_of!(Point, padding) == 220);
    assert!(size_of::<Record>() == 80 && align_of::<Record>() == 8);
    assert!(offset_of!(Record, name) == 8);
    assert!(offset_of!(Record, action_type) == 72);
    assert!(offset_of!(Record, return_value) == 76);
    assert!(size_of::<Registry>() == 13272 && align_of::<Registry>() == 8);
    assert!(offset_of!(Registry, points) == 20);
    assert!(offset_of!(Registry, ring_tail) == 8084);
    assert!(offset_of!(Registry, ring_padding) == 8088);
    assert!(offset_of!(Registry, ring) == 8152);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The same numbers at run time, so that the test binary of each architecture (x86_64 here,
    /// aarch64 under `make test-aarch64-quick`) reports them.
    #[test]
    fn layout_matches_the_spec_numbers() {
        assert_eq!(REGISTRY_SIZE, 13272);
        let point = |i: usize| offset_of!(Registry, points) + i * size_of::<Point>();
        let record = |j: usize| offset_of!(Registry, ring) + j * size_of::<Record>();
        assert_eq!(point(31), 20 + 252 * 31);
        assert_eq!(point(32), offset_of!(Registry, ring_tail));
        assert_eq!(record(0), 8152);
        assert_eq!(record(RING_LEN), 13272);
        assert_eq!(offset_of!(Registry, header) + offset_of!(Header, lock), 8);
    }
}
