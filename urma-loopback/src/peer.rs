//! The cross-process transport: host membership (a slot and its uasid), one Unix-domain stream
//! socket per process, and one connection per (requester, responder) pair of processes.
//!
//! * **Membership**: `$URMA_LOOPBACK_DIR` (default `/dev/shm/urma-loopback-<uid>`, mode 0700,
//!   owned by the user) holds `<n>.slot` files; a process owns slot `n` while it holds a POSIX
//!   write lock (`F_SETLK`) on that file. The kernel drops the lock when the process dies, however
//!   it dies, and a forked child does not inherit it, so a stale slot is simply taken over. `n`
//!   is the process's uasid; its socket is `<n>.sock`.
//! * **Connections**: a requester connects to the responder's socket at its first import from
//!   it. It writes requests (header, descriptors, payload); the responder's thread for that
//!   connection (`urma-lb-rx`, see [`crate::xproc`]) answers each with one acknowledgement, in
//!   order. The requester's reader thread (`urma-lb-ack`) pops the oldest outstanding request's
//!   completion for every acknowledgement.
//! * **Peer death**: the kernel closes a dead process's sockets, so the reader sees end-of-file
//!   (or a reset) at once and completes every outstanding request with "peer gone"; later
//!   requests to that peer complete the same way without being sent.
//!
//! This module knows nothing of WRs or objects: a request's completion is a closure.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::util::{lock, log_err, wlock};

/// Request kinds.
pub const K_IMPORT_SEG: u32 = 1;
pub const K_IMPORT_JETTY: u32 = 2;
pub const K_DATA: u32 = 3;
pub const K_ACK: u32 = 4;

/// Highest slot number (uasid) handed out.
const MAX_SLOT: u32 = 4096;
/// Longest wait of an import for the owner's answer.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// The fixed message header (little-endian on the wire, [`HDR_LEN`] bytes).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Hdr {
    pub kind: u32,
    /// Acknowledgement: CR status (data) or 0 / nonzero (imports).
    pub status: u32,
    pub opcode: u32,
    pub flags: u32,
    pub src_uasid: u32,
    pub src_id: u32,
    pub src_jetty: u32,
    /// 0 none, 1 jetty, 2 JFR.
    pub target_kind: u32,
    pub target_id: u32,
    pub token: u32,
    pub token_given: u32,
    /// Number of [`Piece`]s following the header.
    pub ndst: u32,
    pub imm: u64,
    /// Payload bytes following the pieces (a READ request: bytes asked for).
    pub len: u64,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

pub const HDR_LEN: usize = 12 * 4 + 5 * 8;

impl Hdr {
    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut o = [0u8; HDR_LEN];
        let w32 = [
            self.kind,
            self.status,
            self.opcode,
            self.flags,
            self.src_uasid,
            self.src_id,
            self.src_jetty,
            self.target_kind,
            self.target_id,
            self.token,
            self.token_given,
            self.ndst,
        ];
        for (i, v) in w32.iter().enumerate() {
            o[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        let w64 = [self.imm, self.len, self.a, self.b, self.c];
        for (i, v) in w64.iter().enumerate() {
            let at = 48 + i * 8;
            o[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        o
    }

    pub fn decode(b: &[u8; HDR_LEN]) -> Hdr {
        let r32 =
            |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        let r64 = |i: usize| {
            let at = 48 + i * 8;
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(x)
        };
        Hdr {
            kind: r32(0),
            status: r32(1),
            opcode: r32(2),
            flags: r32(3),
            src_uasid: r32(4),
            src_id: r32(5),
            src_jetty: r32(6),
            target_kind: r32(7),
            target_id: r32(8),
            token: r32(9),
            token_given: r32(10),
            ndst: r32(11),
            imm: r64(0),
            len: r64(1),
            a: r64(2),
            b: r64(3),
            c: r64(4),
        }
    }
}

/// A remote address range of a request: the responder's segment (by token id) and the token the
/// requester imported it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub token_id: u32,
    pub token: u32,
    pub addr: u64,
    pub len: u64,
}

pub const PIECE_LEN: usize = 24;

impl Piece {
    pub fn encode_into(&self, o: &mut Vec<u8>) {
        o.extend_from_slice(&self.token_id.to_le_bytes());
        o.extend_from_slice(&self.token.to_le_bytes());
        o.extend_from_slice(&self.addr.to_le_bytes());
        o.extend_from_slice(&self.len.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Piece {
        let mut x4 = [0u8; 4];
        let mut x8 = [0u8; 8];
        x4.copy_from_slice(&b[0..4]);
        let token_id = u32::from_le_bytes(x4);
        x4.copy_from_slice(&b[4..8]);
        let token = u32::from_le_bytes(x4);
        x8.copy_from_slice(&b[8..16]);
        let addr = u64::from_le_bytes(x8);
        x8.copy_from_slice(&b[16..24]);
        let len = u64::from_le_bytes(x8);
        Piece {
            token_id,
            token,
            addr,
            len,
        }
    }
}

// ---- raw socket I/O (payloads go straight between the socket and registered memory) ----

/// Writes `len` bytes at `ptr` to `fd` (never raises SIGPIPE). False when the peer is gone.
///
/// # Safety
/// `ptr..ptr+len` must be readable for the duration of the call.
pub unsafe fn write_raw(fd: RawFd, mut ptr: *const u8, mut len: usize) -> bool {
    while len > 0 {
        // SAFETY: the caller guarantees ptr..ptr+len is readable; send reads at most len bytes.
        let r = unsafe { libc::send(fd, ptr.cast(), len, libc::MSG_NOSIGNAL) };
        if r < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        let r = r as usize;
        // SAFETY: r <= len, so the pointer stays inside the caller's range.
        ptr = unsafe { ptr.add(r) };
        len -= r;
    }
    true
}

/// Writes a byte slice (see [`write_raw`]).
pub fn write_all(fd: RawFd, b: &[u8]) -> bool {
    // SAFETY: a live slice is readable for its length.
    unsafe { write_raw(fd, b.as_ptr(), b.len()) }
}

/// Reads exactly `len` bytes from `fd` into `ptr`. False on end-of-file or error.
///
/// # Safety
/// `ptr..ptr+len` must be writable for the duration of the call.
pub unsafe fn read_raw(fd: RawFd, mut ptr: *mut u8, mut len: usize) -> bool {
    while len > 0 {
        // SAFETY: the caller guarantees ptr..ptr+len is writable; recv writes at most len bytes.
        let r = unsafe { libc::recv(fd, ptr.cast(), len, 0) };
        if r < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        if r == 0 {
            return false;
        }
        let r = r as usize;
        // SAFETY: r <= len, so the pointer stays inside the caller's range.
        ptr = unsafe { ptr.add(r) };
        len -= r;
    }
    true
}

/// Reads exactly `b.len()` bytes into `b`.
pub fn read_exact(fd: RawFd, b: &mut [u8]) -> bool {
    // SAFETY: a live mutable slice is writable for its length.
    unsafe { read_raw(fd, b.as_mut_ptr(), b.len()) }
}

/// Reads and throws away `n` bytes.
pub fn discard(fd: RawFd, mut n: u64) -> bool {
    let mut buf = [0u8; 8192];
    while n > 0 {
        let k = n.min(buf.len() as u64) as usize;
        if !read_exact(fd, &mut buf[..k]) {
            return false;
        }
        n -= k as u64;
    }
    true
}

/// Reads one header.
pub fn read_hdr(fd: RawFd) -> Option<Hdr> {
    let mut b = [0u8; HDR_LEN];
    read_exact(fd, &mut b).then(|| Hdr::decode(&b))
}

/// Socket buffer size asked for on every connection (the kernel caps it at `wmem_max` /
/// `rmem_max`): fewer, larger copies for multi-megabyte payloads.
const SOCK_BUF: libc::c_int = 4 << 20;

/// Asks for [`SOCK_BUF`]-sized send and receive buffers (best effort).
pub fn size_buffers(fd: RawFd) {
    for opt in [libc::SO_SNDBUF, libc::SO_RCVBUF] {
        // SAFETY: setsockopt reads one c_int from a live local.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&SOCK_BUF as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
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

// ---- host membership ----

/// The registry directory of this user.
pub fn dir() -> PathBuf {
    match std::env::var_os("URMA_LOOPBACK_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        // SAFETY: getuid cannot fail.
        _ => PathBuf::from(format!("/dev/shm/urma-loopback-{}", unsafe {
            libc::getuid()
        })),
    }
}

/// This process's membership.
struct Me {
    pid: u32,
    uasid: u32,
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

fn open_dir() -> Option<PathBuf> {
    let d = dir();
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
    {
        log_err(&format!("multi-process registry {}: {e}", d.display()));
        return None;
    }
    let md = std::fs::metadata(&d).ok()?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if md.uid() != uid || md.mode() & 0o077 != 0 {
        log_err(&format!(
            "multi-process registry {}: not a private directory of this user",
            d.display()
        ));
        return None;
    }
    Some(d)
}

/// Tries to own slot `n`: its file locked by us.
fn claim(d: &std::path::Path, n: u32) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(d.join(format!("{n}.slot")))
        .ok()?;
    // SAFETY: an all-zero flock is a valid value; the fields set below describe the whole file.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as _;
    fl.l_whence = libc::SEEK_SET as _;
    // SAFETY: F_SETLK with a valid flock on an open descriptor; non-blocking.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) };
    (r == 0).then_some(f)
}

/// Joins the host (at most once per process; again in a forked child): claims a slot, binds the
/// socket and starts the thread that accepts connections, each served by `serve` on a thread of
/// its own. `want` != 0 asks for that uasid. Returns the uasid, or `None` when the process stays
/// in-process only (the directory is unusable, no free slot, the wanted uasid is taken).
pub fn join(want: u32, serve: fn(UnixStream)) -> Option<u32> {
    let mut me = lock(&ME);
    let pid = std::process::id();
    if let Some(m) = me.as_ref() {
        if m.pid == pid {
            return Some(m.uasid);
        }
    }
    // A forked child: the parent's slot, socket and connections are the parent's.
    forget_peers();
    let d = open_dir()?;
    let (uasid, slot) = if want != 0 {
        (want, claim(&d, want)?)
    } else {
        (1..=MAX_SLOT).find_map(|n| claim(&d, n).map(|f| (n, f)))?
    };
    let sock = d.join(format!("{uasid}.sock"));
    let _ = std::fs::remove_file(&sock);
    let listener = match UnixListener::bind(&sock) {
        Ok(l) => l,
        Err(e) => {
            log_err(&format!("multi-process socket {}: {e}", sock.display()));
            return None;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("urma-lb-accept".into())
        .spawn(move || {
            for s in listener.incoming() {
                let Ok(s) = s else {
                    // Out of descriptors or memory: try again a little later, never spin.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                size_buffers(s.as_raw_fd());
                let _ = std::thread::Builder::new()
                    .name("urma-lb-rx".into())
                    .spawn(move || serve(s));
            }
        });
    if spawned.is_err() {
        return None;
    }
    *me = Some(Me {
        pid,
        uasid,
        _slot: slot,
    });
    MY_PID.store(pid, Ordering::Release);
    MY_UASID.store(uasid, Ordering::Release);
    Some(uasid)
}

// ---- responder writes into registered memory while the application may unregister it ----

/// Read-held by a responder thread while it writes into (or reads from) registered segments;
/// write-taken by `urma_unregister_seg` after it marked the segment dead, so that memory is
/// never touched after the unregister returned.
pub static MEM_IO: RwLock<()> = RwLock::new(());

/// Waits until no responder thread is inside a segment (called after a segment died).
pub fn quiesce() {
    if my_uasid().is_some() {
        drop(wlock(&MEM_IO));
    }
}

// ---- requester side: connections to peers ----

/// What completes an outstanding request: called with its acknowledgement (and the socket, to
/// read a payload that follows it), or with `None` when the peer is gone. Returns false when it
/// could not read its payload (the connection is then treated as broken).
pub type Done = Box<dyn FnOnce(Option<&Hdr>, RawFd) -> bool + Send>;

struct PState {
    dead: bool,
    q: VecDeque<Done>,
}

/// A connection to a responder process.
pub struct Peer {
    pub uasid: u32,
    /// The process that opened the connection: a forked child never writes into its parent's
    /// connections (it has no reader for them).
    pid: u32,
    w: Mutex<UnixStream>,
    st: Mutex<PState>,
}

static PEERS: Mutex<Option<HashMap<u32, Arc<Peer>>>> = Mutex::new(None);

fn forget_peers() {
    // In a forked child these connections belong to the parent; dropping ours closes only our
    // copies of the descriptors.
    lock(&PEERS).take();
}

impl Peer {
    /// Whether the connection is known broken (peer dead).
    pub fn dead(&self) -> bool {
        lock(&self.st).dead
    }

    /// Sends a request: header, `extra` bytes, then the memory ranges of `payload` in order.
    /// `done` runs when its acknowledgement arrives or the peer is gone. When the peer is
    /// already known gone, `done` is handed back unsent.
    ///
    /// # Safety
    /// Every `(addr, len)` of `payload` must be readable memory for the duration of the call.
    pub unsafe fn send(
        &self,
        h: &Hdr,
        extra: &[u8],
        payload: &[(u64, u64)],
        done: Done,
    ) -> Result<(), Done> {
        if self.pid != std::process::id() {
            return Err(done);
        }
        let w = lock(&self.w);
        {
            let mut st = lock(&self.st);
            if st.dead {
                return Err(done);
            }
            st.q.push_back(done);
        }
        let fd = w.as_raw_fd();
        let mut ok = write_all(fd, &h.encode()) && write_all(fd, extra);
        for &(a, n) in payload {
            // SAFETY: the caller guarantees the range is readable.
            ok = ok && unsafe { write_raw(fd, a as usize as *const u8, n as usize) };
        }
        if !ok {
            // The reader sees the shutdown and fails everything outstanding, ours included.
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
        Ok(())
    }

    /// A control request (import): waits at most [`RPC_TIMEOUT`] for the acknowledgement.
    pub fn rpc(&self, h: &Hdr) -> Option<Hdr> {
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
        let end = Instant::now() + RPC_TIMEOUT;
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

    fn fail_all(&self) {
        let q = {
            let mut st = lock(&self.st);
            st.dead = true;
            std::mem::take(&mut st.q)
        };
        for d in q {
            d(None, -1);
        }
    }

    fn reader(self: Arc<Self>, r: UnixStream) {
        let fd = r.as_raw_fd();
        while let Some(h) = read_hdr(fd) {
            let d = lock(&self.st).q.pop_front();
            let Some(d) = d else { break };
            if h.kind != K_ACK || !d(Some(&h), fd) {
                break;
            }
        }
        let _ = r.shutdown(std::net::Shutdown::Both);
        self.fail_all();
    }
}

/// The connection to the process with `uasid` (opened on first use; a broken one is replaced).
/// `None` when no live process has that uasid.
pub fn peer(uasid: u32) -> Option<Arc<Peer>> {
    let mut g = lock(&PEERS);
    let m = g.get_or_insert_with(HashMap::new);
    if let Some(p) = m.get(&uasid) {
        // A process that died a moment ago may not have been noticed by the reader yet, and
        // its slot (uasid) may already belong to a new process: ask the socket.
        let closed = hung_up(lock(&p.w).as_raw_fd());
        if !p.dead() && !closed && p.pid == std::process::id() {
            return Some(p.clone());
        }
    }
    let s = UnixStream::connect(dir().join(format!("{uasid}.sock"))).ok()?;
    size_buffers(s.as_raw_fd());
    let r = s.try_clone().ok()?;
    let p = Arc::new(Peer {
        uasid,
        pid: std::process::id(),
        w: Mutex::new(s),
        st: Mutex::new(PState {
            dead: false,
            q: VecDeque::new(),
        }),
    });
    let p2 = p.clone();
    std::thread::Builder::new()
        .name("urma-lb-ack".into())
        .spawn(move || p2.reader(r))
        .ok()?;
    m.insert(uasid, p.clone());
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_piece_round_trip() {
        let h = Hdr {
            kind: K_DATA,
            status: 9,
            opcode: 3,
            flags: 0x20,
            src_uasid: 7,
            src_id: 11,
            src_jetty: 1,
            target_kind: 2,
            target_id: 5,
            token: 0xdead_beef,
            token_given: 1,
            ndst: 2,
            imm: u64::MAX - 1,
            len: 1 << 40,
            a: 1,
            b: 2,
            c: 3,
        };
        assert_eq!(Hdr::decode(&h.encode()), h);
        let p = Piece {
            token_id: 4,
            token: 0x1234_5678,
            addr: 0x7fff_0000_1000,
            len: 4096,
        };
        let mut v = Vec::new();
        p.encode_into(&mut v);
        assert_eq!(v.len(), PIECE_LEN);
        assert_eq!(Piece::decode(&v), p);
    }
}
