//! Faults injected by the layer, for any provider.
//!
//! The engine is the control plane's fault plane (`urma_datapath::faults::FaultPlane`, the
//! loopback's too): the shared rules, the WR / CR numbering, held and delayed CRs. This module
//! adds what only the layer has, kept under the plane's lock (`Layer`): the rules by send WR
//! and by receive-side CR, the marks posted WRs leave for their CRs, the CRs ready for the
//! application and the synthetic events of event mode.
//!
//! Counting (1-based, since load or `urma_interpose_reset`): "the Nth send WR" / "the Nth recv
//! WR" count the WRs that reached a post call through the layer (a WR after one the provider
//! rejected is not counted); "the Nth CR" counts the CRs the provider returned from polls, in
//! poll order over all JFCs.
//!
//! * `fail_post`: the Nth send (or recv) WR is not forwarded; the post returns the status with
//!   `*bad_wr` at that WR (the WRs before it in the chain are posted).
//! * `fail_cr`: the Nth send WR is forwarded as a NOP with the same `user_ctx` that requests its
//!   completion (nothing is executed, as with the loopback's knob); the CR polled for it (same
//!   local queue and `user_ctx`) gets the error status and `completion_len` 0. The trace shows
//!   the WR as the application posted it.
//! * `drop_cr` / `dup_cr`: the Nth CR polled is removed from the poll's result, or handed over
//!   twice (the copy at the next poll of that JFC when the array is full). `drop_send_cr` /
//!   `dup_send_cr` do the same to the CR of the Nth send WR, `drop_recv_cr` / `dup_recv_cr` to
//!   the Nth receive-side CR polled: numberings that do not depend on how the polls of
//!   different JFCs interleave.
//! * `hold`: every CR polled is kept by the layer until `urma_interpose_release_crs` hands them
//!   over (FIFO, reversed, or a seeded shuffle; optionally after a delay) at later polls.
//! * `delay_ms`: every CR polled is handed over at the first poll of its JFC at least that long
//!   after it came from the provider.
//!
//! CRs kept by the layer are announced to event-mode applications: `urma_wait_jfc` returns a JFC
//! of the JFCE with CRs ready in the layer without waiting for the provider, and
//! `urma_ack_jfc` does not pass the acks of those synthetic events on to the provider.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use urma_datapath::faults::{self, FaultPlane, Own, Seq};
use urma_datapath::spec::num;
use urma_sys as u;

/// The selector values of `urma_interpose.h`, the loopback's (one definition, the control plane's).
pub use urma_datapath::{
    CR_DROP as ACT_DROP, CR_DUP as ACT_DUP, ORDER_FIFO, ORDER_SHUFFLE, Q_RECV, Q_SEND,
};

/// `urma_interpose_counters_t`, defined once in the control-plane crate.
pub use urma_loopback_ctl::interpose::Counters;

/// One CR kept by the layer: its JFC handle and the CR.
type Pending = (usize, u::urma_cr_t);

/// The layer's own fault state, under the fault plane's lock: its rules by send WR and by
/// receive CR, the marks they leave on posted WRs, and the CRs about to be handed over.
struct Layer {
    /// (nth send WR, action on its CR).
    send_cr_action: Vec<(u64, i32)>,
    /// (nth receive-side CR polled, action).
    recv_cr_action: Vec<(u64, i32)>,
    /// (local queue id, user_ctx) -> CR status to rewrite with (fail_cr, per posted WR).
    failing: BTreeMap<(u32, u64), VecDeque<u32>>,
    /// (local queue id, user_ctx) -> action on its CR (send_cr_action, per posted WR).
    acting: BTreeMap<(u32, u64), VecDeque<i32>>,
    /// Ready for the application, per JFC, in order.
    ready: BTreeMap<usize, VecDeque<u::urma_cr_t>>,
    /// Synthetic events returned by `urma_wait_jfc`, per JFC, not yet acked.
    synthetic: BTreeMap<usize, u32>,
    counters: Counters,
}

impl Layer {
    fn ready_len(&self) -> usize {
        self.ready.values().map(|q| q.len()).sum()
    }

    /// Queues CRs ready for the application on their JFCs.
    fn make_ready(&mut self, crs: impl IntoIterator<Item = Pending>) {
        for (j, cr) in crs {
            self.ready.entry(j).or_default().push_back(cr);
        }
    }
}

/// Posts and polls take the slow path while the layer has rules, marks or CRs of its own (kept
/// by the plane or ready here) or synthetic events outstanding.
impl Own for Layer {
    fn busy(&self, kept: usize) -> bool {
        kept > 0
            || !self.send_cr_action.is_empty()
            || !self.recv_cr_action.is_empty()
            || !self.failing.is_empty()
            || !self.acting.is_empty()
            || self.ready_len() > 0
            || !self.synthetic.is_empty()
    }
}

/// The layer's fault plane: the shared rules, the numbering of send WRs, recv WRs and polled
/// CRs, held and delayed CRs, and the layer's own state.
static PLANE: FaultPlane<Layer, Pending> = FaultPlane::new(Layer {
    send_cr_action: Vec::new(),
    recv_cr_action: Vec::new(),
    failing: BTreeMap::new(),
    acting: BTreeMap::new(),
    ready: BTreeMap::new(),
    synthetic: BTreeMap::new(),
    counters: Counters::ZERO,
});

/// "The Nth receive-side CR polled" (`drop_recv_cr`, `dup_recv_cr`).
static RECV_CR_SEQ: Seq = Seq::new();

/// Whether posts and polls must take the slow path.
pub fn any() -> bool {
    PLANE.any()
}

/// The numbering of `queue`'s WRs (`Q_SEND` or `Q_RECV`).
pub fn wr_seq(queue: i32) -> &'static Seq {
    if queue == Q_SEND {
        &PLANE.send
    } else {
        &PLANE.recv
    }
}

/// Counts `n` CRs polled on the fast path (no fault can name them).
pub fn count_polled_quietly(n: u64) {
    PLANE.cr.add(n, false);
}

/// Clears the knobs and the numbering; held CRs become ready (FIFO), delayed ones stay due.
pub fn reset() {
    PLANE.reset();
    release(ORDER_FIFO, 0, 0);
    PLANE.edit(|s| {
        let own = &mut s.own;
        own.send_cr_action.clear();
        own.recv_cr_action.clear();
        own.failing.clear();
        own.acting.clear();
        own.counters = Counters::ZERO;
    });
    RECV_CR_SEQ.reset();
}

pub fn counters() -> Counters {
    PLANE.edit(|s| Counters {
        crs_in_layer: (s.own.ready_len() + s.kept.len()) as u64,
        ..s.own.counters
    })
}

pub fn add_fail_post(queue: i32, nth: u64, status: i32) -> i32 {
    PLANE.add_fail_post(queue, nth, status)
}

pub fn add_fail_cr(nth: u64, status: u32) -> i32 {
    PLANE.add_fail_cr(nth, status)
}

pub fn add_cr_action(nth: u64, action: i32) -> i32 {
    PLANE.add_cr_action(nth, action)
}

/// The CR of the `nth` send WR is dropped or duplicated. 0, or -1 (as `add_cr_action`).
pub fn add_send_cr_action(nth: u64, action: i32) -> i32 {
    own_cr_action(nth, action, |l| &mut l.send_cr_action)
}

/// The `nth` receive-side CR polled is dropped or duplicated. 0, or -1.
pub fn add_recv_cr_action(nth: u64, action: i32) -> i32 {
    own_cr_action(nth, action, |l| &mut l.recv_cr_action)
}

/// One of the layer's rule lists (by send WR, by receive-side CR).
type OwnRules = fn(&mut Layer) -> &mut Vec<(u64, i32)>;

fn own_cr_action(nth: u64, action: i32, rules: OwnRules) -> i32 {
    if nth == 0 || !(action == ACT_DROP || action == ACT_DUP) {
        return -1;
    }
    PLANE.edit(|s| rules(&mut s.own).push((nth, action)));
    0
}

pub fn set_hold(on: bool) {
    PLANE.set_hold(on)
}

pub fn set_delay(ms: u64) {
    PLANE.set_delay(ms)
}

/// The status the WR numbered `nth` of `queue` must fail with (consumes the rule).
pub fn take_fail_post(queue: i32, nth: u64) -> Option<i32> {
    let out = PLANE.take_fail_post(queue, nth);
    if out.is_some() {
        PLANE.edit(|s| s.own.counters.posts_failed_injected += 1);
    }
    out
}

/// Whether the `nth` send WR has a `fail_cr` rule (not consumed).
pub fn fail_cr_pending(nth: u64) -> bool {
    PLANE.fail_cr_pending(nth)
}

/// Records a send WR that was posted as the `nth`: a `fail_cr` or `send_cr_action` rule for it
/// marks its CR.
pub fn posted_send(nth: u64, local_id: u32, user_ctx: u64) {
    if !any() {
        return;
    }
    PLANE.edit(|s| {
        let st = faults::take(&mut s.rules.fail_cr, nth);
        let act = faults::take(&mut s.own.send_cr_action, nth);
        let key = (local_id, user_ctx);
        if let Some(st) = st {
            s.own.failing.entry(key).or_default().push_back(st);
        }
        if let Some(a) = act {
            s.own.acting.entry(key).or_default().push_back(a);
        }
    });
}

pub fn count_posted(send: u64, recv: u64) {
    PLANE.edit(|s| {
        s.own.counters.send_wrs += send;
        s.own.counters.recv_wrs += recv;
    });
}

/// What the layer does with one CR from the provider (the control plane's, shared with the
/// loopback).
pub use urma_datapath::faults::Fate;

/// Applies the CR faults to one CR just returned by the provider: the `fail_cr` rewrite (in
/// place) and its fate.
pub fn on_provider_cr(cr: &mut u::urma_cr_t) -> Fate {
    let nth = PLANE.cr.next(true);
    // SAFETY: the CR flag union is a plain u8.
    let s_r = unsafe { cr.flag.value } & 1;
    let recv_nth = (s_r == 1).then(|| RECV_CR_SEQ.next(true));
    PLANE.edit(|s| {
        let action = faults::take(&mut s.rules.cr_action, nth)
            .or_else(|| recv_nth.and_then(|rn| faults::take(&mut s.own.recv_cr_action, rn)));
        let mut fate = action.map_or(Fate::Deliver, Fate::of);
        let own = &mut s.own;
        own.counters.crs_from_provider += 1;
        if s_r == 0 {
            let key = (cr.local_id, cr.user_ctx);
            if let Some(st) = pop_mark(&mut own.failing, key) {
                cr.status = st;
                cr.completion_len = 0;
                own.counters.crs_rewritten += 1;
            }
            if let Some(a) = pop_mark(&mut own.acting, key) {
                if fate == Fate::Deliver {
                    fate = Fate::of(a);
                }
            }
        }
        match fate {
            Fate::Drop => own.counters.crs_dropped += 1,
            Fate::Dup => own.counters.crs_duplicated += 1,
            Fate::Deliver => {}
        }
        fate
    })
}

fn pop_mark<T>(m: &mut BTreeMap<(u32, u64), VecDeque<T>>, key: (u32, u64)) -> Option<T> {
    let q = m.get_mut(&key)?;
    let v = q.pop_front();
    if q.is_empty() {
        m.remove(&key);
    }
    v
}

/// Routes one CR (after its fate) of `jfc`: kept (hold / delay) or handed over now (`out`, or
/// the JFC's ready queue once `out` holds `room` CRs).
pub fn route(jfc: usize, cr: u::urma_cr_t, out: &mut Vec<u::urma_cr_t>, room: usize) {
    if PLANE.keep(|| (jfc, cr)).is_some() {
        return;
    }
    if out.len() < room {
        out.push(cr);
    } else {
        PLANE.edit(|s| s.own.make_ready([(jfc, cr)]));
    }
}

/// Moves the delayed CRs due now to their JFCs' ready queues.
fn promote_due(s: &mut faults::State<Layer, Pending>) {
    let due = s.kept.take_due(Instant::now());
    s.own.make_ready(due);
}

/// Takes at most `room` CRs ready for `jfc` (due delayed ones included).
pub fn take_ready(jfc: usize, room: usize) -> Vec<u::urma_cr_t> {
    PLANE.edit(|s| {
        promote_due(s);
        let ready = &mut s.own.ready;
        let Some(q) = ready.get_mut(&jfc) else {
            return Vec::new();
        };
        let n = room.min(q.len());
        let v: Vec<_> = q.drain(..n).collect();
        if q.is_empty() {
            ready.remove(&jfc);
        }
        v
    })
}

pub fn count_to_app(n: usize) {
    if n > 0 {
        PLANE.edit(|s| s.own.counters.crs_to_app += n as u64);
    }
}

/// Releases the held CRs in `order` (after `delay_ms`: at the first poll of their JFC once due;
/// else ready now). Returns how many.
pub fn release(order: i32, seed: u64, delay_ms: u32) -> u64 {
    PLANE.release(order, seed, delay_ms, Layer::make_ready).0
}

/// Forgets everything kept for a deleted JFC.
pub fn forget_jfc(jfc: usize) {
    PLANE.edit(|s| {
        s.own.ready.remove(&jfc);
        s.kept.retain(|(j, _)| *j != jfc);
        s.own.synthetic.remove(&jfc);
    });
}

/// For `urma_wait_jfc`: a JFC among `jfcs` with CRs ready now (a synthetic event is counted
/// for it), and whether CRs of those JFCs are kept for later (held or delayed).
pub fn event_ready(jfcs: &[usize]) -> (Option<usize>, bool) {
    PLANE.edit(|s| {
        promote_due(s);
        let own = &mut s.own;
        let ready = jfcs.iter().copied().find(|j| own.ready.contains_key(j));
        if let Some(j) = ready {
            *own.synthetic.entry(j).or_default() += 1;
            own.counters.synthetic_events += 1;
        }
        let later = s.kept.iter().any(|(j, _)| jfcs.contains(j));
        (ready, later)
    })
}

/// For `urma_ack_jfc`: how many of `n` acked events of `jfc` were synthetic (those are not
/// passed on to the provider).
pub fn take_synthetic(jfc: usize, n: u32) -> u32 {
    PLANE.edit(|s| {
        let synthetic = &mut s.own.synthetic;
        let Some(c) = synthetic.get_mut(&jfc) else {
            return 0;
        };
        let k = (*c).min(n);
        *c -= k;
        if *c == 0 {
            synthetic.remove(&jfc);
        }
        k
    })
}

/// Applies a knob spec (syntax, value rules and the fault keys: `urma_datapath::spec`,
/// shared with the loopback). Keys: `fail_post=N:ST`, `fail_recv_post=N:ST` (ST an `int`,
/// negative allowed), `fail_cr=N:CR_ST`, `drop_cr=N`, `dup_cr=N`, `drop_send_cr=N`,
/// `dup_send_cr=N`, `drop_recv_cr=N`, `dup_recv_cr=N`, `hold=0|1`, `delay_ms=N`.
/// Returns the number of items applied, or the first item that does not parse (items before it
/// are applied).
pub fn apply_spec(spec: &str) -> Result<usize, String> {
    PLANE.apply_spec(spec, |k, v| {
        let (rules, action): (OwnRules, _) = match k {
            "drop_send_cr" => (|l| &mut l.send_cr_action, ACT_DROP),
            "dup_send_cr" => (|l| &mut l.send_cr_action, ACT_DUP),
            "drop_recv_cr" => (|l| &mut l.recv_cr_action, ACT_DROP),
            "dup_recv_cr" => (|l| &mut l.recv_cr_action, ACT_DUP),
            _ => return None,
        };
        let nth = num(v)?;
        PLANE.edit(|s| rules(&mut s.own).push((nth, action)));
        Some(())
    })
}
