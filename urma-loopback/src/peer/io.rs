//! Socket I/O with deadlines (payloads go straight between the socket and registered memory),
//! socket options, and the kernel's word on a peer (`SO_PEERCRED`).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::knobs::limits;

use urma_datapath::message::{Hdr, HDR_LEN};

/// The end of a message's time: every `send`/`recv` on a connection waits at most the I/O
/// timeout (`SO_SNDTIMEO`/`SO_RCVTIMEO`), and a transfer gives up once its deadline passed, so
/// a peer that stalls or trickles holds a transfer at most twice the I/O timeout.
pub fn deadline() -> Instant {
    Instant::now() + limits().io
}

pub(super) fn interrupted_or_timed_out(e: &std::io::Error) -> (bool, bool) {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    (
        e.kind() == Interrupted,
        matches!(e.kind(), WouldBlock | TimedOut),
    )
}

/// Writes `len` bytes at `ptr` to `fd` by `until` (never raises SIGPIPE). False when the peer is
/// gone or too slow.
///
/// # Safety
/// `ptr..ptr+len` must be readable for the duration of the call.
pub unsafe fn write_raw(fd: RawFd, mut ptr: *const u8, mut len: usize, until: Instant) -> bool {
    while len > 0 {
        // SAFETY: the caller guarantees ptr..ptr+len is readable; send reads at most len bytes.
        let r = unsafe { libc::send(fd, ptr.cast(), len, libc::MSG_NOSIGNAL) };
        if r < 0 {
            let (again, slow) = interrupted_or_timed_out(&std::io::Error::last_os_error());
            if again || (slow && Instant::now() < until) {
                continue;
            }
            return false;
        }
        let r = r as usize;
        // SAFETY: r <= len, so the pointer stays inside the caller's range.
        ptr = unsafe { ptr.add(r) };
        len -= r;
        if len > 0 && Instant::now() >= until {
            return false;
        }
    }
    true
}

/// Writes a byte slice by `until` (see [`write_raw`]).
pub fn write_all(fd: RawFd, b: &[u8], until: Instant) -> bool {
    // SAFETY: a live slice is readable for its length.
    unsafe { write_raw(fd, b.as_ptr(), b.len(), until) }
}

/// How a read ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Got {
    /// Every byte arrived.
    All,
    /// Nothing arrived within one I/O timeout (only when `idle_ok`: the peer is merely idle).
    Nothing,
    /// End-of-file, an error, or the deadline passed mid-way.
    Broken,
}

/// Reads exactly `len` bytes from `fd` into `ptr` by `until`. With `idle_ok`, a peer that sends
/// nothing at all within one I/O timeout gives [`Got::Nothing`] instead of waiting on.
///
/// # Safety
/// `ptr..ptr+len` must be writable for the duration of the call.
pub unsafe fn read_raw(
    fd: RawFd,
    mut ptr: *mut u8,
    mut len: usize,
    until: Instant,
    idle_ok: bool,
) -> Got {
    let mut any = false;
    while len > 0 {
        // SAFETY: the caller guarantees ptr..ptr+len is writable; recv writes at most len bytes.
        let r = unsafe { libc::recv(fd, ptr.cast(), len, 0) };
        if r < 0 {
            let (again, slow) = interrupted_or_timed_out(&std::io::Error::last_os_error());
            if slow && idle_ok && !any {
                return Got::Nothing;
            }
            if again || (slow && Instant::now() < until) {
                continue;
            }
            return Got::Broken;
        }
        if r == 0 {
            return Got::Broken;
        }
        any = true;
        let r = r as usize;
        // SAFETY: r <= len, so the pointer stays inside the caller's range.
        ptr = unsafe { ptr.add(r) };
        len -= r;
        if len > 0 && Instant::now() >= until {
            return Got::Broken;
        }
    }
    Got::All
}

/// Reads exactly `b.len()` bytes into `b` by `until`.
pub fn read_exact(fd: RawFd, b: &mut [u8], until: Instant) -> bool {
    // SAFETY: a live mutable slice is writable for its length.
    unsafe { read_raw(fd, b.as_mut_ptr(), b.len(), until, false) == Got::All }
}

/// Reads and throws away `n` bytes by `until`.
pub fn discard(fd: RawFd, mut n: u64, until: Instant) -> bool {
    let mut buf = [0u8; 8192];
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        if !read_exact(fd, &mut buf[..k], until) {
            return false;
        }
        n -= k as u64;
    }
    true
}

/// Reads one header: `Ok(None)` when the peer sent nothing within one I/O timeout.
pub(super) fn read_hdr_or_idle(fd: RawFd) -> Result<Option<Hdr>, ()> {
    let mut b = [0u8; HDR_LEN];
    // SAFETY: a live local array is writable for its length.
    match unsafe { read_raw(fd, b.as_mut_ptr(), HDR_LEN, deadline(), true) } {
        Got::All => Ok(Some(Hdr::decode(&b))),
        Got::Nothing => Ok(None),
        Got::Broken => Err(()),
    }
}

/// Writes one header (bounded by the I/O timeout).
pub fn write_hdr(fd: RawFd, h: &Hdr) -> bool {
    write_all(fd, &h.encode(), deadline())
}

/// Socket buffer size asked for on every connection (the kernel caps it at `wmem_max` /
/// `rmem_max`): fewer, larger copies for multi-megabyte payloads.
pub(super) const SOCK_BUF: libc::c_int = 4 << 20;

pub(super) fn set_opt<T>(fd: RawFd, opt: libc::c_int, v: &T) {
    // SAFETY: setsockopt reads size_of::<T>() bytes from a live reference.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
}

/// Prepares a connected socket: large buffers (best effort) and the I/O timeout on every
/// `send` and `recv`.
pub(super) fn prepare(fd: RawFd) {
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        set_opt(fd, opt, &SOCK_BUF);
    }
    set_timeouts(fd, limits().io);
}

/// Bounds every `send` and `recv` on `fd` by `io`.
pub(super) fn set_timeouts(fd: RawFd, io: Duration) {
    let tv = libc::timeval {
        tv_sec: io.as_secs() as libc::time_t,
        tv_usec: io.subsec_micros() as libc::suseconds_t,
    };
    for opt in [libc::SO_SNDTIMEO, libc::SO_RCVTIMEO] {
        set_opt(fd, opt, &tv);
    }
}

/// Whether the other end of `fd` has closed (or reset) the connection, without blocking.
pub fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, timeout 0.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// Waits up to `t` for `fd` to become readable (or hung up). False when `t` passed first.
pub(super) fn readable_within(fd: RawFd, t: Duration) -> bool {
    let end = Instant::now() + t;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, ms.max(i32::from(!left.is_zero()))) };
        if r > 0 {
            return true;
        }
        if r == 0 && Instant::now() >= end {
            return false;
        }
    }
}

/// The credentials of the process at the other end of a Unix socket, from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cred {
    pub pid: i32,
    pub uid: u32,
}

pub fn peer_cred(fd: RawFd) -> Option<Cred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut n = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most n bytes into a live ucred and updates n.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut n,
        )
    };
    (r == 0 && n as usize == std::mem::size_of::<libc::ucred>()).then_some(Cred {
        pid: c.pid,
        uid: c.uid,
    })
}

pub(super) fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}
