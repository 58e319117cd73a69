//! The virtual device descriptors: which open descriptor stands for which device's
//! `/dev/uburma/<dev>`.
//!
//! A fixed table behind a lock (no allocation), with a count of its entries read without the
//! lock, so that `close` and `ioctl` of a process with no virtual descriptor (all of them but a
//! few calls of the core) cost one atomic load.
//!
//! Each entry keeps the identity of the file it opened (`st_dev`, `st_ino`). A number can be
//! reused without the helper's `close` seeing it (`dup2`/`dup3` onto it, `close_range`, a raw
//! `SYS_close`): a descriptor whose file is no longer that one is not virtual, its entry is
//! dropped and its calls go to the C library.

use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use ranked_lock::{rank, Mutex, MutexGuard};

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
    /// `(st_dev, st_ino)` of the file `fd` was opened on.
    file: (u64, u64),
}

const FREE: Slot = Slot {
    fd: -1,
    name: [0; URMA_MAX_DEV_NAME as usize],
    file: (0, 0),
};

/// The identity of the file open on `fd` (`None` if it is not open).
fn file_of(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat into a live local.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

static TABLE: Mutex<[Slot; SLOTS], { rank::PRELOAD_TABLE }> = Mutex::new([FREE; SLOTS]);
static USED: AtomicUsize = AtomicUsize::new(0);

fn table() -> MutexGuard<'static, [Slot; SLOTS], { rank::PRELOAD_TABLE }> {
    ranked_lock::lock(&TABLE)
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

/// Marks `fd` (open now) as the device `name`; false when the table is full or `fd` is not open.
pub fn add(fd: c_int, name: &CStr) -> bool {
    let Some(file) = file_of(fd) else {
        return false;
    };
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
    t[i] = Slot { fd, name: n, file };
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

/// The device `fd` stands for, if it is virtual: in the table and still open on the file it was
/// opened on. An entry whose descriptor now holds another file (or none) is dropped.
pub fn device_of(fd: c_int) -> Option<Name> {
    if fd < 0 || USED.load(Ordering::SeqCst) == 0 {
        return None;
    }
    let mut t = table();
    let i = t.iter().position(|s| s.fd == fd)?;
    if file_of(fd) == Some(t[i].file) {
        return Some(t[i].name);
    }
    t[i] = FREE;
    USED.fetch_sub(1, Ordering::SeqCst);
    None
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

    /// A descriptor on /dev/null, as the helper opens one; closed on drop.
    fn dev_null() -> std::fs::File {
        std::fs::File::open("/dev/null").expect("/dev/null")
    }

    #[test]
    fn descriptors_are_marked_found_and_forgotten() {
        use std::os::fd::AsRawFd;
        // One test at a time uses the process's table.
        let _one = ranked_lock::lock(&ONE);
        let (a, b) = (dev_null(), dev_null());
        let (fa, fb) = (a.as_raw_fd(), b.as_raw_fd());
        assert_eq!(device_of(fa), None);
        assert!(!add(100_001, c"loopback0"), "a number that is not open");
        assert!(add(fa, c"loopback0"));
        assert!(add(fb, c"loopback1"));
        let n = device_of(fa).expect("marked");
        assert_eq!(CStr::from_bytes_until_nul(&n).unwrap(), c"loopback0");
        // Marking a number again replaces its device.
        assert!(add(fa, c"loopback2"));
        let n = device_of(fa).expect("marked");
        assert_eq!(CStr::from_bytes_until_nul(&n).unwrap(), c"loopback2");
        assert!(remove(fa));
        assert!(!remove(fa));
        assert_eq!(device_of(fa), None);
        assert!(device_of(fb).is_some());
        let files: Vec<std::fs::File> = (0..SLOTS).map(|_| dev_null()).collect();
        let mut added = vec![];
        for f in &files {
            if !add(f.as_raw_fd(), c"x") {
                break;
            }
            added.push(f.as_raw_fd());
        }
        assert_eq!(added.len(), SLOTS - 1, "the table holds SLOTS descriptors");
        let one_more = dev_null();
        assert!(!add(one_more.as_raw_fd(), c"x"));
        for fd in added {
            assert!(remove(fd));
        }
        assert!(remove(fb));
        assert_eq!(USED.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_number_reused_for_another_file_is_not_virtual_and_is_forgotten() {
        use std::os::fd::AsRawFd;
        let _one = ranked_lock::lock(&ONE);
        let v = dev_null();
        let fd = v.as_raw_fd();
        assert!(add(fd, c"loopback0"));
        let mut p = [0 as c_int; 2];
        // SAFETY: pipe writes two descriptors into the array.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        // SAFETY: dup2 of a live descriptor onto one this test owns (`v`, closed by drop).
        assert_eq!(unsafe { libc::dup2(p[0], fd) }, fd);
        assert_eq!(device_of(fd), None, "a pipe on the virtual number");
        assert_eq!(USED.load(Ordering::SeqCst), 0, "the stale entry is dropped");
        // Another /dev/null descriptor dup'd onto it is the same file: still virtual (harmless:
        // /dev/null answers no ioctl).
        assert!(add(fd, c"loopback0"));
        // SAFETY: as above.
        unsafe { libc::close(fd) };
        assert_eq!(device_of(fd), None, "a closed number");
        assert_eq!(USED.load(Ordering::SeqCst), 0);
        // SAFETY: the pipe's descriptors, closed once.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
        std::mem::forget(v);
    }

    static ONE: Mutex<(), { rank::TEST_SERIAL }> = Mutex::new(());
}
