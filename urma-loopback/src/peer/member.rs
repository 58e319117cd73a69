//! Host membership: the registry directory opened once and checked through its descriptor, slots
//! held by a POSIX lock, this process's slot and uasid.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Mutex};

use crate::util::lock;

use super::io::my_uid;

/// Highest slot number (uasid) handed out.
pub(super) const MAX_SLOT: u32 = 4096;

/// The registry directory's path: `$URMA_LOOPBACK_DIR`, or `/dev/shm/urma-loopback-<uid>`.
pub fn dir_path() -> PathBuf {
    match crate::util::env_os("URMA_LOOPBACK_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(format!("/dev/shm/urma-loopback-{}", my_uid())),
    }
}

/// The registry directory, opened once: every name in it is reached through this descriptor.
pub struct Dir {
    fd: OwnedFd,
    /// The path it was opened by (for messages only).
    pub(super) shown: PathBuf,
}

pub(super) fn errno_text() -> String {
    std::io::Error::last_os_error().to_string()
}

impl Dir {
    /// Creates (mode 0700) and opens the directory at `path` without following a link in its
    /// last component, then checks through the descriptor that it is a directory of this user
    /// that no other user may enter.
    pub fn open(path: PathBuf) -> Result<Dir, String> {
        let shown = path.display().to_string();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{shown}: {e}"))?;
        }
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{shown}: a NUL byte in the path"))?;
        // SAFETY: a valid C string; mkdir does not keep it.
        if unsafe { libc::mkdir(c.as_ptr(), 0o700) } != 0
            && std::io::Error::last_os_error().kind() != std::io::ErrorKind::AlreadyExists
        {
            return Err(format!("{shown}: {}", errno_text()));
        }
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the descriptor returned is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            return Err(format!(
                "{shown}: {} (a link, or not a directory?)",
                errno_text()
            ));
        }
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(fd.as_raw_fd()).ok_or_else(|| format!("{shown}: {}", errno_text()))?;
        let uid = my_uid();
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR || st.st_uid != uid || st.st_mode & 0o077 != 0
        {
            return Err(format!(
                "{shown} is owned by uid {} with mode {:o}, not a private directory of uid {uid}",
                st.st_uid,
                st.st_mode & 0o7777
            ));
        }
        Ok(Dir { fd, shown: path })
    }

    /// A path that reaches `name` inside this directory, whatever happens to the directory's
    /// own path (`/proc/self/fd/<fd>/<name>`), for the calls that take only a path (bind,
    /// connect).
    pub(super) fn via_fd(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    /// Opens `name` in this directory (never through a link).
    pub(super) fn open_at(&self, name: &str, flags: libc::c_int) -> Option<std::fs::File> {
        let c = CString::new(name).ok()?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid directory descriptor and C string; the descriptor is owned below.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o600) };
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        (fd >= 0).then(|| unsafe { std::fs::File::from_raw_fd(fd) })
    }

    /// Removes `name` from this directory (if it is there).
    pub(super) fn unlink(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: a valid directory descriptor and C string.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Tries to own slot `n`: its file (a regular file of this user) locked by us.
    pub(super) fn claim(&self, n: u32) -> Option<std::fs::File> {
        let f = self.open_at(&format!("{n}.slot"), libc::O_RDWR | libc::O_CREAT)?;
        let st = fstat(f.as_raw_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != my_uid() {
            return None;
        }
        let mut fl = whole_file_lock();
        // SAFETY: F_SETLK with a valid flock on an open descriptor; non-blocking.
        let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &mut fl) };
        (r == 0).then_some(f)
    }

    /// The process that owns slot `n` (holds the lock on `<n>.slot`), if any.
    pub fn slot_holder(&self, n: u32) -> Option<i32> {
        let f = self.open_at(&format!("{n}.slot"), libc::O_RDONLY)?;
        let mut fl = whole_file_lock();
        // SAFETY: F_GETLK with a valid flock on an open descriptor; it only reports.
        let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLK, &mut fl) };
        (r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid)
    }
}

pub(super) fn fstat(fd: RawFd) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat into a live local.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

pub(super) fn whole_file_lock() -> libc::flock {
    // SAFETY: an all-zero flock is a valid value; the fields set below describe the whole file.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl
}

/// This process's membership.
pub(super) struct Me {
    pub(super) pid: u32,
    pub(super) uasid: u32,
    pub(super) dir: Arc<Dir>,
    /// The slot file; its POSIX lock is the proof that we are alive.
    pub(super) _slot: std::fs::File,
}

pub(super) static ME: Mutex<Option<Me>, { rank::MEMBERSHIP }> = Mutex::new(None);
/// Our uasid while joined (0 = not joined, or joined by the parent before a fork).
pub(super) static MY_UASID: AtomicU32 = AtomicU32::new(0);
pub(super) static MY_PID: AtomicU32 = AtomicU32::new(0);

/// The uasid this process is reachable under, if it joined the host.
pub fn my_uasid() -> Option<u32> {
    let u = MY_UASID.load(Ordering::Acquire);
    (u != 0 && MY_PID.load(Ordering::Acquire) == std::process::id()).then_some(u)
}

/// This process's uasid and directory, while it is joined.
pub(super) fn membership() -> Option<(u32, Arc<Dir>)> {
    let me = lock(&ME);
    me.as_ref()
        .filter(|m| m.pid == std::process::id())
        .map(|m| (m.uasid, m.dir.clone()))
}
