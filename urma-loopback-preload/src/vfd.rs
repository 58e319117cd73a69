//! The virtual device descriptors: which open descriptor stands for which device's
//! `/dev/uburma/<dev>`.
//!
//! A fixed table behind a lock (no allocation), with a count of its entries read without the
//! lock, so that `close` and `ioctl` of a process with no virtual descriptor (all of them but a
//! few calls of the core) cost one atomic load.

use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use urma_sys::URMA_MAX_DEV_NAME;

/// The directory of the character devices.
pub const DEV_DIR: &[u8] = b"/dev/uburma/";

/// A device name with its NUL, as the core sends it.
pub type Name = [u8; URMA_MAX_DEV_NAME as usize];

/// How many descriptors can be virtual at once (the core opens one at a time, briefly).
const SLOTS: usize = 32;

#[derive(Clone, Copy)]
struct Slot {
    fd: c_int,
    name: Name,
}

const FREE: Slot = Slot {
    fd: -1,
    name: [0; URMA_MAX_DEV_NAME as usize],
};

static TABLE: Mutex<[Slot; SLOTS]> = Mutex::new([FREE; SLOTS]);
static USED: AtomicUsize = AtomicUsize::new(0);

fn table() -> std::sync::MutexGuard<'static, [Slot; SLOTS]> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The device name in `path` when it is `/dev/uburma/<name>` with a name of 1 to 63 bytes and
/// no `/` (the path the core opens for a device).
pub fn device_in_path(path: &CStr) -> Option<&CStr> {
    let bytes = path.to_bytes_with_nul();
    let rest = bytes.strip_prefix(DEV_DIR)?;
    let name = CStr::from_bytes_with_nul(rest).ok()?;
    let len = name.to_bytes().len();
    (len > 0 && len < URMA_MAX_DEV_NAME as usize && !name.to_bytes().contains(&b'/'))
        .then_some(name)
}

/// Marks `fd` as the device `name`; false when the table is full.
pub fn add(fd: c_int, name: &CStr) -> bool {
    let mut t = table();
    // A descriptor number the process reused without our close seeing the old one.
    let slot = t.iter().position(|s| s.fd == fd);
    let Some(i) = slot.or_else(|| t.iter().position(|s| s.fd < 0)) else {
        return false;
    };
    if slot.is_none() {
        USED.fetch_add(1, Ordering::SeqCst);
    }
    let mut n = FREE.name;
    let b = name.to_bytes();
    n[..b.len()].copy_from_slice(b);
    t[i] = Slot { fd, name: n };
    true
}

/// Forgets `fd`; whether it was virtual.
pub fn remove(fd: c_int) -> bool {
    if USED.load(Ordering::SeqCst) == 0 {
        return false;
    }
    let mut t = table();
    match t.iter().position(|s| s.fd == fd) {
        Some(i) => {
            t[i] = FREE;
            USED.fetch_sub(1, Ordering::SeqCst);
            true
        }
        None => false,
    }
}

/// The device `fd` stands for, if it is virtual.
pub fn device_of(fd: c_int) -> Option<Name> {
    if fd < 0 || USED.load(Ordering::SeqCst) == 0 {
        return None;
    }
    table().iter().find(|s| s.fd == fd).map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_device_path_names_a_device() {
        assert_eq!(device_in_path(c"/dev/uburma/loopback0"), Some(c"loopback0"));
        assert_eq!(device_in_path(c"/dev/uburma/"), None);
        assert_eq!(device_in_path(c"/dev/uburma/a/b"), None);
        assert_eq!(device_in_path(c"/dev/uburmax/a"), None);
        assert_eq!(device_in_path(c"/etc/passwd"), None);
        let long = std::ffi::CString::new(format!("/dev/uburma/{}", "x".repeat(64))).unwrap();
        assert_eq!(device_in_path(&long), None);
        let max = std::ffi::CString::new(format!("/dev/uburma/{}", "x".repeat(63))).unwrap();
        assert!(device_in_path(&max).is_some());
    }

    #[test]
    fn descriptors_are_marked_found_and_forgotten() {
        // Descriptor numbers no test process has open (the table is the process's).
        assert_eq!(device_of(100_001), None);
        assert!(add(100_001, c"loopback0"));
        assert!(add(100_002, c"loopback1"));
        let n = device_of(100_001).expect("marked");
        assert_eq!(CStr::from_bytes_until_nul(&n).unwrap(), c"loopback0");
        // Marking a number again replaces its device.
        assert!(add(100_001, c"loopback2"));
        let n = device_of(100_001).expect("marked");
        assert_eq!(CStr::from_bytes_until_nul(&n).unwrap(), c"loopback2");
        assert!(remove(100_001));
        assert!(!remove(100_001));
        assert_eq!(device_of(100_001), None);
        assert!(device_of(100_002).is_some());
        let mut added = vec![];
        for fd in 200_000..200_000 + SLOTS as c_int {
            if !add(fd, c"x") {
                break;
            }
            added.push(fd);
        }
        assert_eq!(added.len(), SLOTS - 1, "the table holds SLOTS descriptors");
        assert!(!add(300_000, c"x"));
        for fd in added {
            assert!(remove(fd));
        }
        assert!(remove(100_002));
        assert_eq!(USED.load(Ordering::SeqCst), 0);
    }
}
