//! The owner side: accepting connections, admitting a peer (credentials, its slot, HELLO within a
//! deadline, a per-process share of the pool), and the back-off and pacing of refused token checks.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Mutex};
use std::time::{Duration, Instant};

use crate::knobs::limits;
use crate::util::{lock, RateLimit};

use super::io::{
    deadline, my_uid, peer_cred, prepare, read_exact, readable_within, set_timeouts, write_hdr,
};
use super::member::Dir;
use urma_datapath::message::{Hdr, HDR_LEN, K_ACK, K_BYE, K_HELLO, VERSION};

/// Refusals of other processes, reported at most [`RateLimit::BURST`] times per window.
pub static REFUSALS: RateLimit = RateLimit::new();
/// Connections refused because their process already holds its share, reported the same way.
pub(super) static CROWDED: RateLimit = RateLimit::new();

/// What serves one admitted connection: the connection and the requester's uasid.
pub type Serve = fn(Incoming);

/// Incoming connections being served right now.
pub(super) static SERVING: AtomicUsize = AtomicUsize::new(0);

/// Connections one requesting process may hold at an owner at once (admitted or not yet):
/// one is what a requester uses, a second may open while an idle one retires.
pub(super) const PER_PEER: usize = 4;

/// How long a new connection has to say [`K_HELLO`] (at most the I/O timeout).
pub(super) fn hello_deadline() -> Duration {
    limits().io.min(Duration::from_millis(500))
}

/// What the owner remembers of one requesting process (by pid) across its connections: the
/// connections it holds, and its token refusals (the back-off, [`Incoming::gate`]).
pub struct Requester {
    pid: i32,
    conns: AtomicUsize,
    /// Refusals so far and the time of the last one; `penalised` says whether there are any.
    refusals: Mutex<(u32, Option<Instant>), { rank::REQUESTER_REFUSALS }>,
    penalised: AtomicBool,
}

pub(super) static REQUESTERS: Mutex<Option<HashMap<i32, Arc<Requester>>>, { rank::REQUESTERS }> =
    Mutex::new(None);

/// The record of `pid`, holding one more connection, or `None` when it holds [`PER_PEER`].
pub(super) fn requester(pid: i32) -> Option<Arc<Requester>> {
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
pub(super) const FORGET: Duration = Duration::from_secs(60);
/// The back-off after a requester's first refusal; it doubles with each further one, up to
/// [`BACKOFF_MAX`].
pub(super) const BACKOFF_FIRST: Duration = Duration::from_millis(20);
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Refusals (of all requesters) within one [`STRAIN_WINDOW`] that put the owner under strain:
/// then every token check waits for a turn, [`STRAIN_SPACING`] apart, for [`STRAIN_HOLD`]
/// after the last such window.
pub(super) const STRAIN_AT: u32 = 10;
pub(super) const STRAIN_WINDOW: Duration = Duration::from_secs(1);
pub(super) const STRAIN_SPACING: Duration = Duration::from_millis(100);
pub(super) const STRAIN_HOLD: Duration = Duration::from_secs(2);
/// A check that would wait longer than this is not made: the connection is closed instead.
pub(super) const GATE_MAX_WAIT: Duration = Duration::from_secs(2);

/// The owner's refusals of all requesters: the window's count, strain, and the next turn.
pub(super) struct Strain {
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

pub(super) static STRAIN: Mutex<Strain, { rank::STRAIN }> = Mutex::new(Strain::NONE);
/// Whether [`STRAIN`] may hold a strain (the checks' fast path reads only this).
pub(super) static STRAINED: AtomicBool = AtomicBool::new(false);

impl Requester {
    pub(super) fn remembered(&self) -> bool {
        let g = lock(&self.refusals);
        g.1.is_some_and(|t| t.elapsed() < FORGET)
    }

    /// When this requester's next token check may be made (its back-off), if it must wait.
    pub(super) fn next_check(&self) -> Option<Instant> {
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
pub(super) fn forget_requesters() {
    lock(&REQUESTERS).take();
    *lock(&STRAIN) = Strain::NONE;
    STRAINED.store(false, Ordering::Release);
}

/// Sleeps until `t` (if it is in the future).
pub(super) fn sleep_until(t: Instant) {
    let d = t.saturating_duration_since(Instant::now());
    if !d.is_zero() {
        std::thread::sleep(d);
    }
}

/// Decrements [`SERVING`] and the requester's count when a connection's thread ends (or was
/// never started).
pub(super) struct Serving(Option<Arc<Requester>>);

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.fetch_sub(1, Ordering::AcqRel);
        if let Some(r) = &self.0 {
            r.conns.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Why a process in another pid namespace is refused (its pid reads as 0 here).
pub(super) const OTHER_PID_NS: &str =
    "a process in another pid namespace (its pid reads as 0 here): \
processes of the loopback meet only within one pid namespace";

pub(super) fn accept_loop(listener: UnixListener, dir: Arc<Dir>, me: u32, serve: Serve) {
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
pub(super) fn admit(s: UnixStream, dir: &Dir, me: u32, req: Arc<Requester>) -> Option<Incoming> {
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
