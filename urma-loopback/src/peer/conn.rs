//! The requester side: connections to peers, their writer and reader, outstanding requests
//! completed in order, peer death.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::knobs::limits;
use crate::util::lock;

use super::admission::{OTHER_PID_NS, REFUSALS};
use super::io::{
    deadline, my_uid, peer_cred, prepare, read_exact, read_hdr_or_idle, write_all, write_hdr,
    write_raw,
};
use super::member::{membership, my_uasid, Dir};
use urma_datapath::message::{Hdr, ACK_CLOSING, HDR_LEN, K_ACK, K_BYE, K_HELLO, VERSION};

/// What completes an outstanding request: called with its acknowledgement (and the socket, to
/// read a payload that follows it), or with `None` when the peer is gone. Returns false when it
/// could not read its payload (the connection is then treated as broken).
pub type Done = Box<dyn FnOnce(Option<&Hdr>, RawFd) -> bool + Send>;

pub(super) struct CState {
    /// Broken or closed: nothing more is sent on it.
    closed: bool,
    /// The owner said [`K_BYE`]: nothing more is sent on it; it closes once drained.
    retiring: bool,
    /// Outstanding requests, oldest first, with the time each was sent.
    q: VecDeque<(Instant, Done)>,
}

/// One connection to an owner.
pub(super) struct Conn {
    w: Mutex<UnixStream, { rank::CONN_WRITER }>,
    st: Mutex<CState, { rank::CONN_STATE }>,
    /// Signalled when `q` empties or the connection closes.
    drained: Condvar,
}

impl Conn {
    pub(super) fn usable(&self) -> bool {
        let st = lock(&self.st);
        !st.closed && !st.retiring
    }

    /// Waits (at most the I/O timeout) until every request sent on this connection has its
    /// acknowledgement; closes it otherwise.
    pub(super) fn drain(&self) {
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
    conn: Mutex<Option<Arc<Conn>>, { rank::PEER_CONN }>,
    /// The owning process is gone.
    dead: AtomicBool,
}

/// The process reached under each uasid. The global lock is held only to find a uasid's entry;
/// reaching a process happens under that entry's own lock, so one slow owner delays only the
/// imports from itself, and two threads importing from one process share one connection (its
/// requests keep one order).
pub(super) type PeerSlot = Arc<Mutex<Option<Arc<Peer>>, { rank::PEER_ENTRY }>>;
pub(super) static PEERS: Mutex<Option<HashMap<u32, PeerSlot>>, { rank::PEERS }> = Mutex::new(None);

pub(super) fn forget_peers() {
    // In a forked child these connections belong to the parent; dropping ours closes only our
    // copies of the descriptors.
    lock(&PEERS).take();
}

/// Connects to the owner of slot `uasid` in `dir` (bounded by the connect timeout), checks who
/// it is and opens the connection with [`K_HELLO`]. The owner's pid, or `Err` with the reason.
pub(super) fn connect(dir: &Dir, me: u32, uasid: u32) -> Result<(UnixStream, i32), String> {
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
pub(super) fn connect_once(path: &std::path::Path) -> std::io::Result<UnixStream> {
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
    pub(super) fn owner_alive(&self) -> bool {
        self.dir.slot_holder(self.uasid) == Some(self.owner)
    }

    /// The connection to send on: the current one, or a new one once the owner closed the
    /// last (after the last one's requests were acknowledged, so requests keep their order).
    pub(super) fn current(self: &Arc<Self>) -> Option<Arc<Conn>> {
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
    pub(super) fn start(self: &Arc<Self>, s: UnixStream) -> Option<Arc<Conn>> {
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
        type Slot = (Mutex<Option<Option<Hdr>>, { rank::RPC_ANSWER }>, Condvar);
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
    pub(super) fn reader(self: Arc<Self>, c: Arc<Conn>, r: UnixStream) {
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
