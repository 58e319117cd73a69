//! Work requests between processes: the requester half (runs on the DMA engine: checks the local
//! side, sends the request with its payload, turns the acknowledgement into the send CR) and the
//! responder half (one `urma-lb-rx` thread per connection: checks token, access, bounds and the
//! target's recv WR, moves the payload between the socket and the registered memory, generates
//! the recv CR and acknowledges). The transport is [`crate::peer`]; docs/loopback.md,
//! "Multiple processes", describes the protocol. Both halves decide by the opcode table
//! (`urma_datapath::opcode`): which list is remote, whether a recv WR is consumed, and (the
//! owner, for an opcode read from the wire) what the class asks for.

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Mutex};
use std::time::{Duration, Instant};

use urma_datapath::opcode::{self, Class, OpInfo};
use urma_sys as u;

use crate::complete::{check_sges, finish_send, recv_cr, recv_end, total, RecvEnd};
use crate::knobs;
use crate::objects::{AnySeg, Plan, RecvWr, Seg, SegPin, SendQ, Sge, Target};
use crate::peer::{
    self, deadline, discard, read_exact, read_raw, write_hdr, write_raw, Got, Hdr, Incoming, Peer,
    Piece, ACK_CLOSING, IMPORT_OK, IMPORT_REFUSED, K_ACK, K_DATA, K_IMPORT_JETTY, K_IMPORT_SEG,
    PIECE_LEN, REFUSALS, TARGET_JETTY, TARGET_JFR, TARGET_NONE,
};
use crate::registry as reg;
use crate::stats::COUNTERS;
use crate::util::lock;

/// Most remote pieces (SGEs) one request may carry.
const MAX_PIECES: u32 = 256;
/// Longest sleep of a responder waiting for a recv WR before it re-checks its target and peer.
const RECV_SLICE: Duration = Duration::from_millis(20);

/// Joins the host (see [`peer::join`]); the uasid of this process, or `None` (in-process only).
pub fn join(want: u32) -> Option<u32> {
    let u = peer::join(want, serve)?;
    crate::trace::LOCAL_UASID.store(u, Ordering::Relaxed);
    Some(u)
}

/// Set (for good) by the first successful import from another process.
static IMPORTED: AtomicBool = AtomicBool::new(false);

fn remote_of(s: &Sge) -> Option<&Arc<Peer>> {
    s.seg.as_ref().and_then(|g| g.seg().remote.as_ref())
}

/// Whether `p` involves another process: `None` = all local (the in-process path);
/// `Some(Ok(peer))` = every remote part is owned by `peer`; `Some(Err(status))` = the WR mixes
/// processes (local and remote targets, or two remote processes), which fails.
pub fn route(p: &Plan) -> Option<Result<Arc<Peer>, u32>> {
    if !IMPORTED.load(Ordering::Acquire) {
        // Nothing of another process was ever imported: every WR is local (one load).
        return None;
    }
    let remote_sges: &[Sge] = p.op.split(&p.src[..], &p.dst[..]).1.unwrap_or(&[]);
    let mut owner: Option<&Arc<Peer>> = None;
    let mut local = false;
    for e in remote_sges.iter().filter(|e| e.len > 0) {
        match remote_of(e) {
            Some(r) => {
                if owner.is_some_and(|o| !Arc::ptr_eq(o, r)) {
                    return Some(Err(u::URMA_CR_REM_ACCESS_ABORT_ERR));
                }
                owner = Some(r);
            }
            None => local = true,
        }
    }
    if p.op.two_sided() {
        let target = p.tjetty.as_ref().map(|t| &t.target);
        match target {
            Some(Target::Remote { peer, .. }) => {
                if local || owner.is_some_and(|o| !Arc::ptr_eq(o, peer)) {
                    return Some(Err(u::URMA_CR_REM_ACCESS_ABORT_ERR));
                }
                owner = Some(peer);
            }
            _ if owner.is_some() => return Some(Err(u::URMA_CR_REM_ACCESS_ABORT_ERR)),
            _ => {}
        }
    }
    let o = owner?;
    if local {
        return Some(Err(u::URMA_CR_REM_ACCESS_ABORT_ERR));
    }
    Some(Ok(o.clone()))
}

fn ranges(v: &[Sge]) -> Vec<(u64, u64)> {
    v.iter()
        .filter(|e| e.len > 0)
        .map(|e| (e.addr, u64::from(e.len)))
        .collect()
}

fn pieces_of(v: &[Sge]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in v.iter().filter(|e| e.len > 0) {
        let Some(AnySeg::Imported(i)) = e.seg.as_deref() else {
            continue;
        };
        Piece {
            token_id: i.target.token_id,
            token: i.token,
            addr: e.addr,
            len: u64::from(e.len),
        }
        .encode_into(&mut out);
    }
    out
}

/// Reads `n` bytes from `fd` into the ranges in order by `until` (or throws them away in
/// no-copy mode). Bytes beyond the ranges are read and dropped.
///
/// # Safety
/// Every range must be writable memory for the duration of the call.
unsafe fn scatter(fd: RawFd, to: &[(u64, u64)], mut n: u64, until: Instant) -> bool {
    COUNTERS.bytes_transferred.fetch_add(n, Ordering::Relaxed);
    if knobs::NOCOPY.load(Ordering::Relaxed) {
        return discard(fd, n, until);
    }
    let all = n;
    for &(a, l) in to {
        let k = l.min(n);
        if k > 0 {
            // SAFETY: the caller guarantees the range is writable; k <= its length.
            let got = unsafe { read_raw(fd, a as usize as *mut u8, k as usize, until, false) };
            if got != Got::All {
                return false;
            }
        }
        n -= k;
    }
    COUNTERS.bytes_copied.fetch_add(all - n, Ordering::Relaxed);
    n == 0 || discard(fd, n, until)
}

/// Sends a WR whose target is in another process; its send CR comes with the acknowledgement
/// (or with "peer gone": `URMA_CR_ACK_TIMEOUT_ERR`).
pub fn request(sq: &Arc<SendQ>, p: &Plan, peer: &Arc<Peer>, n: u64) {
    let (target_kind, target_id, token) = match p.tjetty.as_ref().map(|t| &t.target) {
        Some(Target::Remote { id, jfr, token, .. }) => {
            (if *jfr { TARGET_JFR } else { TARGET_JETTY }, *id, *token)
        }
        _ => (TARGET_NONE, 0, None),
    };
    // The remote list goes as descriptors; the payload travels with the request, or for a
    // READ with the acknowledgement.
    let is_read = p.op.class == Class::Read;
    let pieces = pieces_of(p.op.split(&p.src[..], &p.dst[..]).1.unwrap_or(&[]));
    let payload = if is_read { Vec::new() } else { ranges(&p.src) };
    let h = Hdr {
        kind: K_DATA,
        opcode: p.op.opcode,
        flags: p.flags,
        src_uasid: sq.uasid,
        src_id: sq.id,
        src_jetty: u32::from(sq.is_jetty),
        target_kind,
        target_id,
        token: token.unwrap_or(0),
        token_given: u32::from(token.is_some()),
        ndst: (pieces.len() / PIECE_LEN) as u32,
        imm: p.imm,
        len: n,
        ..Hdr::default()
    };
    let ticket = sq.order.ticket();
    let (sq2, p2, owner) = (sq.clone(), p.clone(), peer.uasid);
    let done: peer::Done = Box::new(move |ack, fd| {
        let (mut status, mut bytes, mut ok) = (u::URMA_CR_ACK_TIMEOUT_ERR, 0, true);
        if let Some(a) = ack.filter(|a| !believable(a, n, is_read)) {
            // The owner broke the protocol: nothing it says about this WR is used, and the
            // connection is closed (its later WRs fail as towards a vanished peer).
            REFUSALS.alert(|| {
                format!(
                    "uasid {}: an acknowledgement of status {} and {} bytes for a WR of {n} \
                     bytes; the connection is closed",
                    owner, a.status, a.len
                )
            });
            (status, ok) = (u::URMA_CR_REM_OPERATION_ERR, false);
        } else if let Some(a) = ack {
            (status, bytes) = (a.status, a.len as u32);
            if is_read && a.status == u::URMA_CR_SUCCESS {
                // SAFETY: the local destination SGEs were checked against live registered
                // segments, which the plan's Arcs pin; the application keeps the buffer until
                // this WR's CR, as with a NIC.
                ok = unsafe { scatter(fd, &ranges(&p2.dst), a.len, deadline()) };
                if !ok {
                    (status, bytes) = (u::URMA_CR_ACK_TIMEOUT_ERR, 0);
                }
            }
        }
        let sq3 = sq2.clone();
        sq2.order.complete(
            ticket,
            Box::new(move || finish_send(&sq3, &p2, status, bytes)),
        );
        ok
    });
    // SAFETY: the payload ranges are the WR's local source SGEs, checked against live
    // registered segments (pinned by the plan's Arcs) before routing.
    if let Err(done) = unsafe { peer.send(&h, &pieces, &payload, done) } {
        done(None, -1);
    }
}

/// Whether an owner's acknowledgement of a WR of `n` bytes can be true: a CR status that
/// exists, at most `n` bytes, and for a successful READ exactly `n` (the bytes that follow).
fn believable(a: &Hdr, n: u64, is_read: bool) -> bool {
    a.status <= u::URMA_CR_REM_DATA_POISON
        && a.len <= n
        && !(is_read && a.status == u::URMA_CR_SUCCESS && a.len != n)
}

// ---- responder ----

/// Acknowledges a request: the sender's CR status and the bytes that landed.
fn ack(fd: RawFd, status: u32, len: u64) -> bool {
    let h = Hdr {
        kind: K_ACK,
        status,
        len,
        ..Hdr::default()
    };
    write_hdr(fd, &h)
}

/// Acknowledges a request refused by a token check, saying that the connection closes.
fn ack_closing(fd: RawFd, status: u32) -> bool {
    let h = Hdr {
        kind: K_ACK,
        status,
        flags: ACK_CLOSING,
        ..Hdr::default()
    };
    write_hdr(fd, &h)
}

/// Serves one admitted connection ([`peer::Incoming`]) until it ends.
pub fn serve(mut c: Incoming) {
    let fd = c.fd();
    while let Some(h) = c.next_request() {
        if h.ndst > MAX_PIECES || !c.gate() {
            break;
        }
        // The whole message (descriptors and payload) must arrive by this time.
        let until = deadline();
        let mut raw = vec![0u8; h.ndst as usize * PIECE_LEN];
        if !read_exact(fd, &mut raw, until) {
            break;
        }
        let pieces: Vec<Piece> = raw.chunks(PIECE_LEN).filter_map(Piece::decode).collect();
        let m = Msg {
            fd,
            h: &h,
            pieces: &pieces,
            c: &c,
            until,
        };
        let ok = match h.kind {
            K_IMPORT_SEG => answer_import_seg(&m),
            K_IMPORT_JETTY => answer_import_queue(&m),
            K_DATA => answer_data(&m),
            _ => false,
        };
        if !ok {
            break;
        }
    }
}

/// One request as the owner reads it.
struct Msg<'a> {
    fd: RawFd,
    h: &'a Hdr,
    pieces: &'a [Piece],
    /// The connection (the requester's uasid and process, checked at its admission).
    c: &'a Incoming,
    /// When the message's body must have arrived.
    until: Instant,
}

impl Msg<'_> {
    /// Drops the payload and acknowledges `status` with nothing written.
    fn refuse(&self, status: u32) -> bool {
        discard(self.fd, self.h.len, self.until) && ack(self.fd, status, 0)
    }

    /// A token check failed (or named no such object: the same answer): counted, logged once
    /// per object, the requester's back-off grows, and after `answer` (what every refusal of
    /// that kind gets) the connection closes, its payload unread.
    fn token_refused(&self, what: &str, object: Object, answer: impl FnOnce() -> bool) -> bool {
        COUNTERS.peer_refusals.fetch_add(1, Ordering::Relaxed);
        self.c.refused();
        if first_refusal(object) {
            COUNTERS
                .peer_refused_objects
                .fetch_add(1, Ordering::Relaxed);
            let (from, pid) = (self.c.from, self.c.pid());
            let (kind, id) = object;
            REFUSALS.alert(|| {
                format!(
                    "uasid {from} (pid {pid}): {what} of {kind} {id} refused (no such object, \
                     or a wrong token); later refusals of it are counted (peer_refusals), not \
                     logged"
                )
            });
        }
        let _ = answer();
        false
    }

    /// [`Msg::token_refused`] for a work request: `URMA_CR_REM_ACCESS_ABORT_ERR`.
    fn access_refused(&self, what: &str, object: Object) -> bool {
        self.token_refused(what, object, || {
            ack_closing(self.fd, u::URMA_CR_REM_ACCESS_ABORT_ERR)
        })
    }
}

/// What a refusal names: the kind of object and its id (a segment by token id).
type Object = (&'static str, u32);

/// Objects refused so far (at most [`REFUSED_OBJECTS_MAX`]; beyond it refusals are counted
/// only).
static REFUSED_OBJECTS: Mutex<Option<HashSet<Object>>, { rank::REFUSED_OBJECTS }> =
    Mutex::new(None);
const REFUSED_OBJECTS_MAX: usize = 4096;

/// Whether `object` is refused for the first time (and so is logged).
fn first_refusal(object: Object) -> bool {
    let mut g = lock(&REFUSED_OBJECTS);
    let set = g.get_or_insert_with(HashSet::new);
    set.len() < REFUSED_OBJECTS_MAX && set.insert(object)
}

fn token_ok(policy_checked: bool, expected: u32, h: &Hdr) -> bool {
    !policy_checked || (h.token_given != 0 && h.token == expected)
}

fn target_object(h: &Hdr) -> Object {
    let kind = if h.target_kind == TARGET_JFR {
        "JFR"
    } else {
        "jetty"
    };
    (kind, h.target_id)
}

fn find_seg(token_id: u32, addr: u64, len: u64) -> Option<Arc<Seg>> {
    reg::with_reg(|r| {
        r.segs_by_token_id.get(&token_id).and_then(|v| {
            v.iter()
                .find(|s| {
                    addr >= s.va
                        && u128::from(addr) + u128::from(len)
                            <= u128::from(s.va) + u128::from(s.len)
                })
                .cloned()
        })
    })
}

/// An import's answer: [`IMPORT_OK`] with the object's attributes, or [`IMPORT_REFUSED`], which
/// does not tell an unknown object from a wrong token (and closes the connection).
fn answer_import(m: &Msg<'_>, what: &str, object: Object, found: Option<(u64, u64, u64)>) -> bool {
    match found {
        Some((a, b, c)) => write_hdr(
            m.fd,
            &Hdr {
                kind: K_ACK,
                status: IMPORT_OK,
                a,
                b,
                c,
                ..Hdr::default()
            },
        ),
        None => m.token_refused(what, object, || ack_closing(m.fd, IMPORT_REFUSED)),
    }
}

fn answer_import_seg(m: &Msg<'_>) -> bool {
    let h = m.h;
    // As the in-process import: a live segment with that token id, that VA, and not shorter.
    let found = reg::with_reg(|r| {
        r.segs_by_token_id
            .get(&(h.a as u32))
            .and_then(|v| v.iter().find(|s| s.va == h.b && h.c <= s.len).cloned())
    })
    .filter(|s| token_ok(s.token_policy != u::URMA_TOKEN_NONE, s.token, h))
    .map(|s| (u64::from(s.access), u64::from(s.token_policy), s.len));
    answer_import(m, "an import", ("segment of token id", h.a as u32), found)
}

fn local_target(kind: u32, id: u32) -> Option<Target> {
    reg::with_reg(|r| match kind {
        TARGET_JETTY => r.jetty_by_id.get(&id).cloned().map(Target::Jetty),
        TARGET_JFR => r.jfr_by_id.get(&id).cloned().map(Target::Jfr),
        _ => None,
    })
}

/// The local jetty or JFR a request names, when its token is right.
fn checked_target(h: &Hdr) -> Option<Target> {
    local_target(h.target_kind, h.target_id).filter(|t| match t {
        Target::Jetty(j) => token_ok(j.token_checked, j.token, h),
        Target::Jfr(j) => token_ok(j.token_checked, j.token, h),
        Target::Remote { .. } => false,
    })
}

fn answer_import_queue(m: &Msg<'_>) -> bool {
    let found = checked_target(m.h).map(|_| (0, 0, 0));
    answer_import(m, "an import", target_object(m.h), found)
}

/// Address ranges in registered memory, and the pins that keep their segments registered.
type Pinned = (Vec<(u64, u64)>, Vec<SegPin>);

/// The registered memory a request's pieces name, checked as the in-process provider checks an
/// imported segment (alive, token, access, not LOCAL_ONLY, in bounds) and pinned: the segments
/// cannot be unregistered until the pins are dropped. `Err` names the segment (by token id) of
/// the first piece refused.
fn pin_pieces(pieces: &[Piece], access: u32) -> Result<Pinned, Object> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut pins = Vec::with_capacity(pieces.len());
    for pc in pieces {
        let pin = find_seg(pc.token_id, pc.addr, pc.len)
            .filter(|s| {
                (s.token_policy == u::URMA_TOKEN_NONE || pc.token == s.token)
                    && s.access & u::URMA_ACCESS_LOCAL_ONLY == 0
                    && s.access & access != 0
            })
            .and_then(|s| s.pin());
        let Some(pin) = pin else {
            return Err(("segment of token id", pc.token_id));
        };
        pins.push(pin);
        out.push((pc.addr, pc.len));
    }
    Ok((out, pins))
}

/// [`pin_pieces`] of a request whose payload must fit its pieces.
fn pin_fitting(pieces: &[Piece], n: u64, access: u32) -> Result<Pinned, Object> {
    if !fits(pieces, n) {
        let first = pieces.first().map_or(0, |p| p.token_id);
        return Err(("segment of token id", first));
    }
    pin_pieces(pieces, access)
}

/// Pins for the owner's own SGEs (a recv WR's), or `None` when one of their segments died.
fn pin_sges(v: &[Sge]) -> Option<Vec<SegPin>> {
    v.iter()
        .filter(|e| e.len > 0)
        .map(|e| e.seg.as_ref().and_then(|g| g.seg().pin()))
        .collect()
}

/// Waits (receiver-not-ready retry, up to this process's RNR timeout) for a recv WR on the
/// target. `Err(status)` for the sender: target deleted or no recv WR in time; `Err(0)`: the
/// requester is gone.
fn wait_recv(end: &RecvEnd<'_>, t: &Target, fd: RawFd) -> Result<RecvWr, u32> {
    let alive = || match t {
        Target::Jetty(j) => j.alive.load(Ordering::Acquire),
        Target::Jfr(r) => r.alive.load(Ordering::Acquire),
        Target::Remote { .. } => false,
    };
    let to = knobs::rnr_timeout_ms();
    let deadline = Instant::now() + Duration::from_millis(to);
    let rq = end.rq;
    let mut st = lock(&rq.q);
    let mut waited = false;
    loop {
        if !alive() {
            return Err(u::URMA_CR_ACK_TIMEOUT_ERR);
        }
        // A message that had to wait is dropped once its requester is gone (nobody to
        // acknowledge), before it can take a recv WR.
        if waited && peer::hung_up(fd) {
            return Err(0);
        }
        if st.parked.is_empty() {
            if let Some(w) = st.wrs.pop_front() {
                if waited {
                    COUNTERS.rnr_delivered_late.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(w);
            }
        }
        let now = Instant::now();
        if now >= deadline {
            COUNTERS.rnr_errors.fetch_add(1, Ordering::Relaxed);
            if waited {
                COUNTERS.rnr_expired.fetch_add(1, Ordering::Relaxed);
            }
            return Err(u::URMA_CR_RNR_RETRY_CNT_EXC_ERR);
        }
        if !waited {
            // Counted as the in-process parking is: the message waits for a recv WR.
            waited = true;
            COUNTERS.rnr_parked.fetch_add(1, Ordering::Relaxed);
        }
        rq.waiters.fetch_add(1, Ordering::AcqRel);
        st = rq
            .posted
            .wait_timeout(st, (deadline - now).min(RECV_SLICE))
            .map(|x| x.0)
            .unwrap_or_else(|e| e.into_inner().0);
        rq.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Whether the pieces can hold the whole payload: the owner writes exactly what it
/// acknowledges, so a request whose payload is longer than its pieces is refused.
fn fits(pieces: &[Piece], n: u64) -> bool {
    pieces.iter().map(|p| u128::from(p.len)).sum::<u128>() >= u128::from(n)
}

fn answer_data(m: &Msg<'_>) -> bool {
    let (fd, h, n) = (m.fd, m.h, m.h.len);
    let Some(op) = opcode::info(h.opcode) else {
        return m.refuse(u::URMA_CR_UNSUPPORTED_OPCODE_ERR);
    };
    match op.class {
        Class::Write => {
            let (dst, _pins) = match pin_fitting(m.pieces, n, op.remote_access) {
                Ok(p) => p,
                Err(object) => return m.access_refused("a WRITE", object),
            };
            // SAFETY: the ranges lie in live registered segments of this process, which
            // cannot be unregistered while pinned.
            let landed = unsafe { scatter(fd, &dst, n, m.until) };
            landed && ack(fd, u::URMA_CR_SUCCESS, n)
        }
        Class::Read => {
            let (src, _pins) = match pin_fitting(m.pieces, n, op.remote_access) {
                Ok(p) => p,
                Err(object) => return m.access_refused("a READ", object),
            };
            if !ack(fd, u::URMA_CR_SUCCESS, n) {
                return false;
            }
            let mut left = n;
            for (a, l) in src {
                let k = l.min(left);
                // SAFETY: the range lies in a live registered segment (pinned).
                if k > 0 && !unsafe { write_raw(fd, a as usize as *const u8, k as usize, m.until) }
                {
                    return false;
                }
                left -= k;
            }
            true
        }
        Class::WriteImm | Class::Send => two_sided(m, op),
        Class::Nop | Class::Unsupported => m.refuse(u::URMA_CR_UNSUPPORTED_OPCODE_ERR),
    }
}

fn two_sided(m: &Msg<'_>, op: &OpInfo) -> bool {
    let (fd, h, n) = (m.fd, m.h, m.h.len);
    let write_imm = op.class == Class::WriteImm;
    if write_imm {
        if let Err(object) = pin_fitting(m.pieces, n, op.remote_access) {
            return m.access_refused("a WRITE_IMM", object);
        }
    }
    if local_target(h.target_kind, h.target_id).is_none() {
        return m.refuse(u::URMA_CR_ACK_TIMEOUT_ERR);
    }
    let Some(t) = checked_target(h) else {
        return m.access_refused("a message", target_object(h));
    };
    let Some(end) = recv_end(&t) else {
        return m.refuse(u::URMA_CR_ACK_TIMEOUT_ERR);
    };
    let recv = match wait_recv(&end, &t, fd) {
        Ok(w) => w,
        Err(0) => return false,
        Err(st) => return m.refuse(st),
    };
    let from = u::urma_jetty_id_t {
        eid: crate::cobj::loopback_eid(),
        uasid: m.c.from,
        id: h.src_id,
    };
    let dst = if write_imm {
        pin_pieces(m.pieces, op.remote_access).map_err(|_| u::URMA_CR_REM_ACCESS_ABORT_ERR)
    } else if !check_sges(&recv.sges, false, 0) {
        Err(u::URMA_CR_LOC_ACCESS_ERR)
    } else if n > total(&recv.sges) {
        Err(u::URMA_CR_LOC_LEN_ERR)
    } else {
        pin_sges(&recv.sges)
            .map(|pins| (ranges(&recv.sges), pins))
            .ok_or(u::URMA_CR_LOC_ACCESS_ERR)
    };
    let (dst, pins) = match dst {
        Ok(d) => d,
        Err(u::URMA_CR_REM_ACCESS_ABORT_ERR) => {
            // The segment died while we waited: the recv WR stays posted.
            lock(&end.rq.q).wrs.push_front(recv);
            return m.refuse(u::URMA_CR_REM_ACCESS_ABORT_ERR);
        }
        Err(rst) => {
            recv_cr(&end, &recv, rst, n, op, h.imm, h.flags, from);
            return m.refuse(u::URMA_CR_REM_OPERATION_ERR);
        }
    };
    // SAFETY: the ranges lie in live registered segments of this process (pinned).
    if !unsafe { scatter(fd, &dst, n, m.until) } {
        // The requester died or stalled mid-message: nothing was delivered, the recv WR stays
        // posted.
        lock(&end.rq.q).wrs.push_front(recv);
        return false;
    }
    drop(pins);
    recv_cr(&end, &recv, u::URMA_CR_SUCCESS, n, op, h.imm, h.flags, from);
    ack(fd, u::URMA_CR_SUCCESS, n)
}

// ---- imports (the importing process's side) ----

/// What the owner said about a segment imported from it.
pub struct RemoteSeg {
    pub peer: Arc<Peer>,
    pub access: u32,
    pub token_policy: u32,
    pub len: u64,
}

/// Sends an import request (`h` with the token presented) to process `uasid`: its connection
/// and the owner's answer when the owner said yes.
fn ask(uasid: u32, h: Hdr, token: Option<u32>) -> Option<(Arc<Peer>, Hdr)> {
    let p = peer::peer(uasid)?;
    let a = p.rpc(&Hdr {
        token: token.unwrap_or(0),
        token_given: u32::from(token.is_some()),
        ..h
    })?;
    if a.status != IMPORT_OK {
        return None;
    }
    IMPORTED.store(true, Ordering::Release);
    Some((p, a))
}

/// Asks process `uasid` for its segment (`token_id`, `va`, at least `len` bytes), presenting
/// `token`. `None`: no such process or segment, or a wrong token.
pub fn import_seg(
    uasid: u32,
    token_id: u32,
    va: u64,
    len: u64,
    token: Option<u32>,
) -> Option<RemoteSeg> {
    let h = Hdr {
        kind: K_IMPORT_SEG,
        a: u64::from(token_id),
        b: va,
        c: len,
        ..Hdr::default()
    };
    let (peer, a) = ask(uasid, h, token)?;
    Some(RemoteSeg {
        peer,
        access: a.a as u32,
        token_policy: a.b as u32,
        len: a.c,
    })
}

/// Asks process `uasid` for its jetty (`jfr` false) or JFR `id`, presenting `token`.
pub fn import_queue(uasid: u32, id: u32, jfr: bool, token: Option<u32>) -> Option<Target> {
    let h = Hdr {
        kind: K_IMPORT_JETTY,
        target_kind: if jfr { TARGET_JFR } else { TARGET_JETTY },
        target_id: id,
        ..Hdr::default()
    };
    let (peer, _) = ask(uasid, h, token)?;
    Some(Target::Remote {
        peer,
        id,
        jfr,
        token,
    })
}
