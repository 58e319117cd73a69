//! The cross-process transport: host membership (a slot and its uasid), one Unix-domain stream
//! socket per process, and connections between processes of the same user.
//!
//! * **Membership**: `$URMA_LOOPBACK_DIR` (default `/dev/shm/urma-loopback-<uid>`) is opened
//!   once, without following a link, and checked through its descriptor (a directory of this
//!   user, mode 0700 or narrower); every later name in it (`<n>.slot`, `<n>.sock`) is reached
//!   through that descriptor, so re-pointing the path afterwards changes nothing. A process owns
//!   slot `n` while it holds a POSIX write lock (`F_SETLK`) on `<n>.slot`. The kernel drops the
//!   lock when the process dies, however it dies, and a forked child does not inherit it, so a
//!   stale slot is simply taken over. `n` is the process's uasid; its socket is `<n>.sock`. A
//!   process that cannot join never talks to another process.
//! * **Admission**: both ends read the other's credentials from the kernel (`SO_PEERCRED`) before
//!   anything else crosses: another user's process is refused. The requester checks that the
//!   socket's owner is the process that holds slot `n`; its first message ([`K_HELLO`]) names its
//!   own uasid, which the owner checks the same way, so the sender named in a CR comes from the
//!   connection, never from a request. A pid that reads as 0 (a process of another pid
//!   namespace) proves nothing and is refused at both ends.
//! * **Connections**: a requester connects to an owner at its first import from it. It writes
//!   requests (header, descriptors, payload); the owner's thread for that connection
//!   (`urma-lb-rx`, see [`crate::xproc`]) answers each with one acknowledgement, in order. The
//!   requester's reader thread (`urma-lb-ack`) pops the oldest outstanding request's completion
//!   for every acknowledgement. An owner closes a connection idle for the idle timeout with
//!   [`K_BYE`]: the requester sends nothing more on it and opens a new one for its next request,
//!   after the old one's acknowledgements have arrived (so requests keep their order).
//! * **Limits** ([`crate::knobs::limits`]): connecting, every message body and every
//!   acknowledgement are bounded by time; an owner serves a bounded number of connections, at
//!   most [`PER_PEER`] of one process, which must say HELLO within a short deadline.
//! * **Refusals** ([`Incoming::gate`], [`Incoming::refused`]): a requesting process whose token
//!   checks were refused waits, before each later check, for a back-off that grows with its
//!   refusals, and an owner refusing many checks paces all of them.
//!   No lock is held across socket I/O but the connection's own writer lock.
//! * **Peer death**: the kernel closes a dead process's sockets, so the reader sees end-of-file
//!   (or a reset) at once and completes every outstanding request with "peer gone"; later
//!   requests to that process complete the same way without being sent.
//!
//! This module knows nothing of WRs or objects: a request's completion is a closure.

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::knobs::limits;
use crate::util::{lock, log_alert, RateLimit};

pub use urma_loopback_ctl::wire::{
    Hdr, Piece, ACK_CLOSING, HDR_LEN, IMPORT_OK, IMPORT_REFUSED, K_ACK, K_BYE, K_DATA, K_HELLO,
    K_IMPORT_JETTY, K_IMPORT_SEG, PIECE_LEN, TARGET_JETTY, TARGET_JFR, TARGET_NONE, VERSION,
};

/// Highest slot number (uasid) handed out.
const MAX_SLOT: u32 = 4096;

/// Refusals of other processes, reported at most [`RateLimit::BURST`] times per window.
pub static REFUSALS: RateLimit = RateLimit::new();
/// Connections refused because their process already holds its share, reported the same way.
static CROWDED: RateLimit = RateLimit::new();

// ---- raw socket I/O (payloads go straight between the socket and registered memory) ----

/// The end of a message's time: every `send`/`recv` on a connection waits at most the I/O
/// timeout (`SO_SNDTIMEO`/`SO_RCVTIMEO`), and a transfer gives up once its deadline passed, so
/// a peer that stalls or trickles holds a transfer at most twice the I/O timeout.
pub fn deadline() -> Instant {
    Instant::now() + limits().io
}

fn interrupted_or_timed_out(e: &std::io::Error) -> (bool, bool) {
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
fn read_hdr_or_idle(fd: RawFd) -> Result<Option<Hdr>, ()> {
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
const SOCK_BUF: libc::c_int = 4 << 20;

fn set_opt<T>(fd: RawFd, opt: libc::c_int, v: &T) {
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
fn prepare(fd: RawFd) {
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        set_opt(fd, opt, &SOCK_BUF);
    }
    set_timeouts(fd, limits().io);
}

/// Bounds every `send` and `recv` on `fd` by `io`.
fn set_timeouts(fd: RawFd, io: Duration) {
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
fn readable_within(fd: RawFd, t: Duration) -> bool {
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

fn my_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

// ---- host membership ----

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
    shown: PathBuf,
}

fn errno_text() -> String {
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
    fn via_fd(&self, name: &str) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.fd.as_raw_fd()))
    }

    /// Opens `name` in this directory (never through a link).
    fn open_at(&self, name: &str, flags: libc::c_int) -> Option<std::fs::File> {
        let c = CString::new(name).ok()?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid directory descriptor and C string; the descriptor is owned below.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, 0o600) };
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        (fd >= 0).then(|| unsafe { std::fs::File::from_raw_fd(fd) })
    }

    /// Removes `name` from this directory (if it is there).
    fn unlink(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: a valid directory descriptor and C string.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Tries to own slot `n`: its file (a regular file of this user) locked by us.
    fn claim(&self, n: u32) -> Option<std::fs::File> {
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

fn fstat(fd: RawFd) -> Option<libc::stat> {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat into a live local.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

fn whole_file_lock() -> libc::flock {
    // SAFETY: an all-zero flock is a valid value; the fields set below describe the whole file.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl
}

/// This process's membership.
struct Me {
    pid: u32,
    uasid: u32,
    dir: Arc<Dir>,
    /// The slot file; its POSIX lock is the proof that we are alive.
    _slot: std::fs::File,
}

static ME: Mutex<Option<Me>> = Mutex::new(None);
/// Our uasid while joined (0 = not joined, or joined by the parent before a fork).
static MY_UASID: AtomicU32 = AtomicU32::new(0);
static MY_PID: AtomicU32 = AtomicU32::new(0);

/// The uasid this process is reachable under, if it joined the host.
pub fn my_uasid() -> Option<u32> {
    let u = MY_UASID.load(Ordering::Acquire);
    (u != 0 && MY_PID.load(Ordering::Acquire) == std::process::id()).then_some(u)
}

/// This process's uasid and directory, while it is joined.
fn membership() -> Option<(u32, Arc<Dir>)> {
    let me = lock(&ME);
    me.as_ref()
        .filter(|m| m.pid == std::process::id())
        .map(|m| (m.uasid, m.dir.clone()))
}

/// What serves one admitted connection: the connection and the requester's uasid.
pub type Serve = fn(Incoming);

/// Incoming connections being served right now.
static SERVING: AtomicUsize = AtomicUsize::new(0);

/// Joins the host (at most once per process; again in a forked child): claims a slot, binds the
/// socket and starts the thread that accepts connections, each admitted one served by `serve` on
/// a thread of its own. `want` != 0 asks for that uasid. Returns the uasid, or `None` when the
/// process stays in-process only (the directory is unusable, no free slot, the wanted uasid is
/// taken); that is reported through [`log_alert`].
pub fn join(want: u32, serve: Serve) -> Option<u32> {
    let mut me = lock(&ME);
    let pid = std::process::id();
    if let Some(m) = me.as_ref() {
        if m.pid == pid {
            return Some(m.uasid);
        }
    }
    // A forked child: the parent's slot, socket and connections are the parent's, and so are
    // the requesters it served (their connection counts and back-off).
    forget_peers();
    forget_requesters();
    let refuse = |why: String| {
        log_alert(&format!(
            "multi-process mode off, this process reaches no other: {why}"
        ));
        None
    };
    let dir = match Dir::open(dir_path()) {
        Ok(d) => Arc::new(d),
        Err(e) => return refuse(e),
    };
    let claimed = if want != 0 {
        dir.claim(want).map(|f| (want, f))
    } else {
        (1..=MAX_SLOT).find_map(|n| dir.claim(n).map(|f| (n, f)))
    };
    let Some((uasid, slot)) = claimed else {
        return refuse(if want != 0 {
            format!("uasid {want} is taken in {}", dir.shown.display())
        } else {
            format!("no free slot in {}", dir.shown.display())
        });
    };
    let name = format!("{uasid}.sock");
    dir.unlink(&name);
    let listener = match UnixListener::bind(dir.via_fd(&name)) {
        Ok(l) => l,
        Err(e) => return refuse(format!("socket {}/{name}: {e}", dir.shown.display())),
    };
    let d2 = dir.clone();
    let spawned = std::thread::Builder::new()
        .name("urma-lb-accept".into())
        .spawn(move || accept_loop(listener, d2, uasid, serve));
    if let Err(e) = spawned {
        return refuse(format!("no thread to accept connections: {e}"));
    }
    *me = Some(Me {
        pid,
        uasid,
        dir,
        _slot: slot,
    });
    MY_PID.store(pid, Ordering::Release);
    MY_UASID.store(uasid, Ordering::Release);
    Some(uasid)
}

/// Connections one requesting process may hold at an owner at once (admitted or not yet):
/// one is what a requester uses, a second may open while an idle one retires.
const PER_PEER: usize = 4;

/// How long a new connection has to say [`K_HELLO`] (at most the I/O timeout).
fn hello_deadline() -> Duration {
    limits().io.min(Duration::from_millis(500))
}

/// What the owner remembers of one requesting process (by pid) across its connections: the
/// connections it holds, and its token refusals (the back-off, [`Incoming::gate`]).
pub struct Requester {
    pid: i32,
    conns: AtomicUsize,
    /// Refusals so far and the time of the last one; `penalised` says whether there are any.
    refusals: Mutex<(u32, Option<Instant>)>,
    penalised: AtomicBool,
}

static REQUESTERS: Mutex<Option<HashMap<i32, Arc<Requester>>>> = Mutex::new(None);

/// The record of `pid`, holding one more connection, or `None` when it holds [`PER_PEER`].
fn requester(pid: i32) -> Option<Arc<Requester>> {
    let mut g = lock(&REQUESTERS);
    let m = g.get_or_insert_with(HashMap::new);
    if m.len() >= 1024 {
        // Forget processes with no connection and no refusal in the back-off's memory.
        m.retain(|_, r| r.conns.load(Ordering::Acquire) > 0 || r.remembered());
    }
    let r = m
        .entry(pid)
        .or_insert_with(|| {
            Arc::new(Requester {
                pid,
                conns: AtomicUsize::new(0),
                refusals: Mutex::new((0, None)),
                penalised: AtomicBool::new(false),
            })
        })
        .clone();
    if r.conns.fetch_add(1, Ordering::AcqRel) >= PER_PEER {
        r.conns.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    Some(r)
}

/// Token refusals a requesting process had are forgotten after this long without one.
const FORGET: Duration = Duration::from_secs(60);
/// The back-off after a requester's first refusal; it doubles with each further one, up to
/// [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Refusals (of all requesters) within one [`STRAIN_WINDOW`] that put the owner under strain:
/// then every token check waits for a turn, [`STRAIN_SPACING`] apart, for [`STRAIN_HOLD`]
/// after the last such window.
const STRAIN_AT: u32 = 10;
const STRAIN_WINDOW: Duration = Duration::from_secs(1);
const STRAIN_SPACING: Duration = Duration::from_millis(100);
const STRAIN_HOLD: Duration = Duration::from_secs(2);
/// A check that would wait longer than this is not made: the connection is closed instead.
const GATE_MAX_WAIT: Duration = Duration::from_secs(2);

/// The owner's refusals of all requesters: the window's count, strain, and the next turn.
struct Strain {
    window: Option<(Instant, u32)>,
    until: Option<Instant>,
    next_turn: Option<Instant>,
}

impl Strain {
    const NONE: Strain = Strain {
        window: None,
        until: None,
        next_turn: None,
    };
}

static STRAIN: Mutex<Strain> = Mutex::new(Strain::NONE);
/// Whether [`STRAIN`] may hold a strain (the checks' fast path reads only this).
static STRAINED: AtomicBool = AtomicBool::new(false);

impl Requester {
    fn remembered(&self) -> bool {
        let g = lock(&self.refusals);
        g.1.is_some_and(|t| t.elapsed() < FORGET)
    }

    /// When this requester's next token check may be made (its back-off), if it must wait.
    fn next_check(&self) -> Option<Instant> {
        if !self.penalised.load(Ordering::Acquire) {
            return None;
        }
        let mut g = lock(&self.refusals);
        let (k, last) = *g;
        let last = last?;
        if last.elapsed() >= FORGET {
            *g = (0, None);
            self.penalised.store(false, Ordering::Release);
            return None;
        }
        let shift = k.saturating_sub(1).min(16);
        Some(last + (BACKOFF_FIRST * (1u32 << shift)).min(BACKOFF_MAX))
    }
}

/// Forgets the requesting processes and the strain (in a forked child, where they are the
/// parent's: none of the connections they count is served here).
fn forget_requesters() {
    lock(&REQUESTERS).take();
    *lock(&STRAIN) = Strain::NONE;
    STRAINED.store(false, Ordering::Release);
}

/// Sleeps until `t` (if it is in the future).
fn sleep_until(t: Instant) {
    let d = t.saturating_duration_since(Instant::now());
    if !d.is_zero() {
        std::thread::sleep(d);
    }
}

/// Decrements [`SERVING`] and the requester's count when a connection's thread ends (or was
/// never started).
struct Serving(Option<Arc<Requester>>);

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.fetch_sub(1, Ordering::AcqRel);
        if let Some(r) = &self.0 {
            r.conns.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Why a process in another pid namespace is refused (its pid reads as 0 here).
const OTHER_PID_NS: &str = "a process in another pid namespace (its pid reads as 0 here): \
processes of the loopback meet only within one pid namespace";

fn accept_loop(listener: UnixListener, dir: Arc<Dir>, me: u32, serve: Serve) {
    for s in listener.incoming() {
        let Ok(s) = s else {
            // Out of descriptors or memory: try again a little later, never spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        // Who it is, before it takes anything: another user, a process we cannot see, or
        // one that already holds its share is closed at once.
        let refuse = |why: String| {
            REFUSALS.alert(|| format!("uasid {me}: a connection refused: {why}"));
        };
        let cred = match peer_cred(s.as_raw_fd()) {
            None => {
                refuse("no peer credentials".into());
                continue;
            }
            Some(c) if c.uid != my_uid() => {
                refuse(format!("pid {} runs as uid {}", c.pid, c.uid));
                continue;
            }
            Some(c) if c.pid <= 0 => {
                refuse(OTHER_PID_NS.into());
                continue;
            }
            Some(c) => c,
        };
        let Some(req) = requester(cred.pid) else {
            // Reported apart from the other refusals, which it would otherwise crowd out.
            CROWDED.alert(|| {
                format!(
                    "uasid {me}: a connection refused: pid {} already holds {PER_PEER}",
                    cred.pid
                )
            });
            continue;
        };
        let max = limits().max_conns;
        if SERVING.fetch_add(1, Ordering::AcqRel) >= max {
            drop(Serving(Some(req)));
            drop(s);
            REFUSALS.alert(|| {
                format!("uasid {me}: a connection refused, {max} already served (URMA_LOOPBACK_MAX_CONNS)")
            });
            continue;
        }
        let slot = Serving(Some(req.clone()));
        let d = dir.clone();
        let _ = std::thread::Builder::new()
            .name("urma-lb-rx".into())
            .spawn(move || {
                let _slot = slot;
                if let Some(c) = admit(s, &d, me, req) {
                    serve(c);
                }
            });
    }
}

/// The owner's side of the opening: the requester runs as this user, is visible in our pid
/// namespace, and holds the slot it names, and it says so within the HELLO deadline. The
/// refusal is logged; the connection is then closed.
fn admit(s: UnixStream, dir: &Dir, me: u32, req: Arc<Requester>) -> Option<Incoming> {
    let fd = s.as_raw_fd();
    let pid = req.pid;
    let refuse = |why: String| {
        REFUSALS.alert(|| format!("uasid {me}: a connection refused: {why}"));
        None
    };
    let hello = hello_deadline();
    set_timeouts(fd, hello);
    let mut b = [0u8; HDR_LEN];
    if !read_exact(fd, &mut b, Instant::now() + hello) {
        return refuse(format!("pid {pid} sent no opening within {hello:?}"));
    }
    prepare(fd);
    let h = Hdr::decode(&b);
    if h.kind != K_HELLO || h.a != VERSION {
        return refuse(format!(
            "pid {pid} opened with kind {} version {}",
            h.kind, h.a
        ));
    }
    let holder = (h.src_uasid != 0)
        .then(|| dir.slot_holder(h.src_uasid))
        .flatten();
    if holder != Some(pid) {
        let held_by = match holder {
            Some(p) if p <= 0 => format!(", held by {OTHER_PID_NS}"),
            _ => String::new(),
        };
        return refuse(format!(
            "pid {pid} named uasid {}, which it does not hold{held_by}",
            h.src_uasid
        ));
    }
    let ok = Hdr {
        kind: K_ACK,
        status: 0,
        a: VERSION,
        ..Hdr::default()
    };
    write_hdr(fd, &ok).then_some(Incoming {
        s,
        from: h.src_uasid,
        req,
        bye: false,
    })
}

/// An admitted connection, on the owner's side.
pub struct Incoming {
    s: UnixStream,
    /// The requester's uasid, checked at admission.
    pub from: u32,
    /// The requesting process (its connections and refusals).
    req: Arc<Requester>,
    /// [`K_BYE`] sent: the requester is closing.
    bye: bool,
}

impl Incoming {
    pub fn fd(&self) -> RawFd {
        self.s.as_raw_fd()
    }

    /// The requesting process's pid.
    pub fn pid(&self) -> i32 {
        self.req.pid
    }

    /// Waits until the next token check of this connection may be made: after the requesting
    /// process's back-off (which grows with its refusals), and, while the owner is under
    /// strain (many refusals of any requester), for a turn among all checks. Applied before
    /// the check, to every check, so that how long an answer takes tells nothing of the
    /// token. False when the wait would be too long: the connection is then closed unchecked.
    /// Costs two atomic loads while nobody was refused.
    pub fn gate(&self) -> bool {
        if let Some(t) = self.req.next_check() {
            if t.saturating_duration_since(Instant::now()) > GATE_MAX_WAIT {
                return false;
            }
            sleep_until(t);
        }
        if !STRAINED.load(Ordering::Acquire) {
            return true;
        }
        let turn = {
            let mut g = lock(&STRAIN);
            let now = Instant::now();
            if g.until.is_none_or(|u| now >= u) {
                g.until = None;
                STRAINED.store(false, Ordering::Release);
                return true;
            }
            let turn = g.next_turn.map_or(now, |t| t.max(now));
            if turn - now > GATE_MAX_WAIT {
                return false;
            }
            g.next_turn = Some(turn + STRAIN_SPACING);
            turn
        };
        sleep_until(turn);
        true
    }

    /// Records a refused token check of this connection's requester (its back-off grows; the
    /// owner may come under strain). The caller answers and closes the connection.
    pub fn refused(&self) {
        let now = Instant::now();
        {
            let mut g = lock(&self.req.refusals);
            if g.1.is_some_and(|t| now.duration_since(t) >= FORGET) {
                g.0 = 0;
            }
            *g = (g.0.saturating_add(1), Some(now));
            self.req.penalised.store(true, Ordering::Release);
        }
        let mut g = lock(&STRAIN);
        let (start, n) = match g.window {
            Some((start, n)) if now.duration_since(start) < STRAIN_WINDOW => (start, n + 1),
            _ => (now, 1),
        };
        g.window = Some((start, n));
        if n >= STRAIN_AT {
            g.until = Some(now + STRAIN_HOLD);
            STRAINED.store(true, Ordering::Release);
        }
    }

    /// The next request's header. `None` when the connection ends: the requester closed it, it
    /// broke, or it stayed idle (then [`K_BYE`] was sent, and what the requester had already
    /// sent is still served).
    pub fn next_request(&mut self) -> Option<Hdr> {
        let fd = self.fd();
        loop {
            let idle = if self.bye { limits().io } else { limits().idle };
            if !readable_within(fd, idle) {
                if self.bye {
                    return None;
                }
                let bye = Hdr {
                    kind: K_BYE,
                    ..Hdr::default()
                };
                if !write_hdr(fd, &bye) {
                    return None;
                }
                self.bye = true;
                continue;
            }
            let mut b = [0u8; HDR_LEN];
            return read_exact(fd, &mut b, deadline()).then(|| Hdr::decode(&b));
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let _ = self.s.shutdown(std::net::Shutdown::Both);
    }
}

// ---- requester side: connections to peers ----

/// What completes an outstanding request: called with its acknowledgement (and the socket, to
/// read a payload that follows it), or with `None` when the peer is gone. Returns false when it
/// could not read its payload (the connection is then treated as broken).
pub type Done = Box<dyn FnOnce(Option<&Hdr>, RawFd) -> bool + Send>;

struct CState {
    /// Broken or closed: nothing more is sent on it.
    closed: bool,
    /// The owner said [`K_BYE`]: nothing more is sent on it; it closes once drained.
    retiring: bool,
    /// Outstanding requests, oldest first, with the time each was sent.
    q: VecDeque<(Instant, Done)>,
}

/// One connection to an owner.
struct Conn {
    w: Mutex<UnixStream>,
    st: Mutex<CState>,
    /// Signalled when `q` empties or the connection closes.
    drained: Condvar,
}

impl Conn {
    fn usable(&self) -> bool {
        let st = lock(&self.st);
        !st.closed && !st.retiring
    }

    /// Waits (at most the I/O timeout) until every request sent on this connection has its
    /// acknowledgement; closes it otherwise.
    fn drain(&self) {
        let end = deadline();
        let mut st = lock(&self.st);
        while !st.q.is_empty() && !st.closed {
            let now = Instant::now();
            if now >= end {
                drop(st);
                let _ = lock(&self.w).shutdown(std::net::Shutdown::Both);
                return;
            }
            st = self
                .drained
                .wait_timeout(st, end - now)
                .map(|x| x.0)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// Another process of this host (a uasid and the process that held it when first reached).
pub struct Peer {
    pub uasid: u32,
    /// The owning process's pid: a later holder of the same uasid is another process.
    owner: i32,
    /// The process that opened the connection: a forked child never writes into its parent's
    /// connections (it has no reader for them).
    opener: u32,
    dir: Arc<Dir>,
    /// The current connection (replaced after the owner closed an idle one).
    conn: Mutex<Option<Arc<Conn>>>,
    /// The owning process is gone.
    dead: AtomicBool,
}

/// The process reached under each uasid. The global lock is held only to find a uasid's entry;
/// reaching a process happens under that entry's own lock, so one slow owner delays only the
/// imports from itself, and two threads importing from one process share one connection (its
/// requests keep one order).
type PeerSlot = Arc<Mutex<Option<Arc<Peer>>>>;
static PEERS: Mutex<Option<HashMap<u32, PeerSlot>>> = Mutex::new(None);

fn forget_peers() {
    // In a forked child these connections belong to the parent; dropping ours closes only our
    // copies of the descriptors.
    lock(&PEERS).take();
}

/// Connects to the owner of slot `uasid` in `dir` (bounded by the connect timeout), checks who
/// it is and opens the connection with [`K_HELLO`]. The owner's pid, or `Err` with the reason.
fn connect(dir: &Dir, me: u32, uasid: u32) -> Result<(UnixStream, i32), String> {
    let path = dir.via_fd(&format!("{uasid}.sock"));
    let end = Instant::now() + limits().connect;
    let s = loop {
        match connect_once(&path) {
            Ok(s) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < end => {
                // The owner's backlog is full: it is slow to accept.
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(format!("connect: {e}")),
        }
    };
    let fd = s.as_raw_fd();
    prepare(fd);
    let cred = peer_cred(fd).ok_or("no peer credentials")?;
    if cred.uid != my_uid() {
        return Err(format!("the socket belongs to uid {}", cred.uid));
    }
    if cred.pid <= 0 {
        return Err(format!("the socket belongs to {OTHER_PID_NS}"));
    }
    match dir.slot_holder(uasid) {
        Some(p) if p == cred.pid => {}
        Some(p) if p <= 0 => return Err(format!("the slot is held by {OTHER_PID_NS}")),
        _ => {
            return Err(format!(
                "the socket belongs to pid {}, which does not hold the slot",
                cred.pid
            ))
        }
    }
    let hello = Hdr {
        kind: K_HELLO,
        src_uasid: me,
        a: VERSION,
        ..Hdr::default()
    };
    if !write_hdr(fd, &hello) {
        return Err("the opening was not taken".into());
    }
    let mut b = [0u8; HDR_LEN];
    if !read_exact(fd, &mut b, deadline()) {
        return Err("the owner refused the opening".into());
    }
    let a = Hdr::decode(&b);
    if a.kind != K_ACK || a.status != 0 || a.a != VERSION {
        return Err("the owner refused the opening".into());
    }
    Ok((s, cred.pid))
}

/// One non-blocking `connect` (a full backlog gives `WouldBlock` at once); the socket is made
/// blocking again once connected.
fn connect_once(path: &std::path::Path) -> std::io::Result<UnixStream> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: plain socket creation; the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, flags, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let s = unsafe { UnixStream::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in below.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let p = path.as_os_str().as_bytes();
    if p.len() >= a.sun_path.len() {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    for (d, &b) in a.sun_path.iter_mut().zip(p) {
        *d = b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + p.len() + 1;
    // SAFETY: a valid socket and a sockaddr_un whose first len bytes are initialised.
    let r = unsafe {
        libc::connect(
            fd,
            (&a as *const libc::sockaddr_un).cast(),
            len as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    s.set_nonblocking(false)?;
    Ok(s)
}

impl Peer {
    /// Whether the owning process is known gone.
    pub fn dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Whether the owning process still holds its slot.
    fn owner_alive(&self) -> bool {
        self.dir.slot_holder(self.uasid) == Some(self.owner)
    }

    /// The connection to send on: the current one, or a new one once the owner closed the
    /// last (after the last one's requests were acknowledged, so requests keep their order).
    fn current(self: &Arc<Self>) -> Option<Arc<Conn>> {
        let mut cur = lock(&self.conn);
        if let Some(c) = cur.as_ref() {
            if c.usable() {
                return Some(c.clone());
            }
            c.drain();
        }
        *cur = None;
        if self.dead() {
            return None;
        }
        let me = my_uasid()?;
        match connect(&self.dir, me, self.uasid) {
            Ok((s, pid)) if pid == self.owner => {
                let c = self.start(s)?;
                *cur = Some(c.clone());
                Some(c)
            }
            Ok(_) => {
                // Another process holds the uasid now.
                self.dead.store(true, Ordering::Release);
                None
            }
            Err(why) => {
                if !self.owner_alive() {
                    self.dead.store(true, Ordering::Release);
                } else {
                    REFUSALS.alert(|| format!("uasid {}: {why}", self.uasid));
                }
                None
            }
        }
    }

    /// Starts the reader of a fresh connection.
    fn start(self: &Arc<Self>, s: UnixStream) -> Option<Arc<Conn>> {
        let r = s.try_clone().ok()?;
        let c = Arc::new(Conn {
            w: Mutex::new(s),
            st: Mutex::new(CState {
                closed: false,
                retiring: false,
                q: VecDeque::new(),
            }),
            drained: Condvar::new(),
        });
        let (p, c2) = (self.clone(), c.clone());
        std::thread::Builder::new()
            .name("urma-lb-ack".into())
            .spawn(move || p.reader(c2, r))
            .ok()?;
        Some(c)
    }

    /// Sends a request: header, `extra` bytes, then the memory ranges of `payload` in order.
    /// `done` runs when its acknowledgement arrives or the peer is gone. When the peer cannot
    /// be reached, `done` is handed back unsent.
    ///
    /// # Safety
    /// Every `(addr, len)` of `payload` must be readable memory for the duration of the call.
    pub unsafe fn send(
        self: &Arc<Self>,
        h: &Hdr,
        extra: &[u8],
        payload: &[(u64, u64)],
        done: Done,
    ) -> Result<(), Done> {
        if self.opener != std::process::id() {
            return Err(done);
        }
        let mut done = Some(done);
        // A connection the owner retires between `current` and our write is left for the
        // next one (at most a few times: each retirement needs an idle timeout).
        for _ in 0..4 {
            let Some(c) = self.current() else { break };
            let w = lock(&c.w);
            {
                let mut st = lock(&c.st);
                if st.closed || st.retiring {
                    continue;
                }
                if let Some(d) = done.take() {
                    st.q.push_back((Instant::now(), d));
                }
            }
            let fd = w.as_raw_fd();
            let until = deadline();
            let mut ok = write_all(fd, &h.encode(), until) && write_all(fd, extra, until);
            for &(a, n) in payload {
                // SAFETY: the caller guarantees the range is readable.
                ok = ok && unsafe { write_raw(fd, a as usize as *const u8, n as usize, until) };
            }
            if !ok {
                // The reader sees the shutdown and fails everything outstanding, ours included.
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
            return Ok(());
        }
        Err(done.expect("not handed over"))
    }

    /// A control request (import): waits at most the I/O timeout for the acknowledgement.
    pub fn rpc(self: &Arc<Self>, h: &Hdr) -> Option<Hdr> {
        type Slot = (Mutex<Option<Option<Hdr>>>, Condvar);
        let slot: Arc<Slot> = Arc::new((Mutex::new(None), Condvar::new()));
        let s2 = slot.clone();
        let done: Done = Box::new(move |a, _fd| {
            *lock(&s2.0) = Some(a.copied());
            s2.1.notify_all();
            true
        });
        // SAFETY: no payload ranges.
        if unsafe { self.send(h, &[], &[], done) }.is_err() {
            return None;
        }
        let end = deadline();
        let mut g = lock(&slot.0);
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            let now = Instant::now();
            if now >= end {
                return None;
            }
            g = slot
                .1
                .wait_timeout(g, end - now)
                .map(|x| x.0)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Reads the acknowledgements of connection `c` until it ends, then fails what is left.
    fn reader(self: Arc<Self>, c: Arc<Conn>, r: UnixStream) {
        let fd = r.as_raw_fd();
        loop {
            let h = match read_hdr_or_idle(fd) {
                Err(()) => break,
                Ok(Some(h)) => h,
                Ok(None) => {
                    // Nothing for one I/O timeout: fine while nothing is outstanding (or the
                    // owner is still within its time for the oldest request).
                    let st = lock(&c.st);
                    let late =
                        st.q.front()
                            .is_some_and(|(t, _)| t.elapsed() >= limits().io);
                    if late {
                        break;
                    }
                    continue;
                }
            };
            if h.kind == K_BYE {
                // Nothing more is sent here; our side closes once the rest is acknowledged.
                let w = lock(&c.w);
                lock(&c.st).retiring = true;
                let _ = w.shutdown(std::net::Shutdown::Write);
                continue;
            }
            // A refusal: the owner closes after it, so nothing more is sent here, decided
            // before its request completes (a request made after that completion must not
            // go out on this connection).
            let closing = h.kind == K_ACK && h.flags & ACK_CLOSING != 0;
            let d = {
                let mut st = lock(&c.st);
                st.closed |= closing;
                let d = st.q.pop_front();
                if st.q.is_empty() {
                    c.drained.notify_all();
                }
                d
            };
            let Some((_, d)) = d else { break };
            if h.kind != K_ACK || !d(Some(&h), fd) || closing {
                break;
            }
        }
        let _ = r.shutdown(std::net::Shutdown::Both);
        let q = {
            let mut st = lock(&c.st);
            st.closed = true;
            c.drained.notify_all();
            std::mem::take(&mut st.q)
        };
        if !q.is_empty() && !self.owner_alive() {
            self.dead.store(true, Ordering::Release);
        }
        for (_, d) in q {
            d(None, -1);
        }
    }
}

/// The process with `uasid` (reached on first use; a dead one is replaced by the slot's new
/// holder). `None` when this process is not joined, or no live process of this user has that
/// uasid.
pub fn peer(uasid: u32) -> Option<Arc<Peer>> {
    let (me, dir) = membership()?;
    let slot = lock(&PEERS)
        .get_or_insert_with(HashMap::new)
        .entry(uasid)
        .or_default()
        .clone();
    let mut known = lock(&slot);
    if let Some(p) = known.as_ref() {
        // A process that died a moment ago may not have been noticed by the reader yet, and
        // its slot (uasid) may already belong to a new process: ask the slot.
        if !p.dead() && p.opener == std::process::id() && p.owner_alive() {
            return Some(p.clone());
        }
    }
    let (s, owner) = match connect(&dir, me, uasid) {
        Ok(x) => x,
        Err(why) => {
            if dir.slot_holder(uasid).is_some() {
                REFUSALS.alert(|| format!("uasid {uasid}: {why}"));
            }
            return None;
        }
    };
    let p = Arc::new(Peer {
        uasid,
        owner,
        opener: std::process::id(),
        dir,
        conn: Mutex::new(None),
        dead: AtomicBool::new(false),
    });
    let c = p.start(s)?;
    *lock(&p.conn) = Some(c);
    *known = Some(p.clone());
    Some(p)
}
