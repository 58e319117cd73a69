//! Faults injected by the layer, for any provider.
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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use urma_loopback_ctl::faults;
use urma_loopback_ctl::spec::{self, num, Knob};
use urma_sys as u;

use crate::lock;

/// The selector values of `urma_interpose.h`, the loopback's (one definition, the control plane's).
pub use urma_loopback_ctl::{
    CR_DROP as ACT_DROP, CR_DUP as ACT_DUP, ORDER_FIFO, ORDER_SHUFFLE, Q_RECV, Q_SEND,
};

#[derive(Default)]
struct Knobs {
    fail_post: Vec<(i32, u64, i32)>,
    fail_cr: Vec<(u64, u32)>,
    /// (nth CR polled, action).
    cr_action: Vec<(u64, i32)>,
    /// (nth send WR, action on its CR).
    send_cr_action: Vec<(u64, i32)>,
    /// (nth receive-side CR polled, action).
    recv_cr_action: Vec<(u64, i32)>,
    hold: bool,
    delay_ms: u64,
}

static KNOBS: Mutex<Knobs> = Mutex::new(Knobs {
    fail_post: Vec::new(),
    fail_cr: Vec::new(),
    cr_action: Vec::new(),
    send_cr_action: Vec::new(),
    recv_cr_action: Vec::new(),
    hold: false,
    delay_ms: 0,
});
/// Knobs set, or CRs kept by the layer: posts and polls take the slow path.
static ANY: AtomicBool = AtomicBool::new(false);

pub static SEND_SEQ: AtomicU64 = AtomicU64::new(0);
pub static RECV_SEQ: AtomicU64 = AtomicU64::new(0);
pub static CR_SEQ: AtomicU64 = AtomicU64::new(0);
pub static RECV_CR_SEQ: AtomicU64 = AtomicU64::new(0);

/// `urma_interpose_counters_t`, defined once in the control-plane crate.
pub use urma_loopback_ctl::interpose::Counters;

/// One CR kept by the layer: its JFC handle and the CR.
type Kept = (usize, u::urma_cr_t);

#[derive(Default)]
struct Crs {
    /// (local queue id, user_ctx) -> CR status to rewrite with (fail_cr, per posted WR).
    failing: HashMap<(u32, u64), VecDeque<u32>>,
    /// (local queue id, user_ctx) -> action on its CR (send_cr_action, per posted WR).
    acting: HashMap<(u32, u64), VecDeque<i32>>,
    /// Ready for the application, per JFC, in order.
    ready: HashMap<usize, VecDeque<u::urma_cr_t>>,
    held: Vec<Kept>,
    /// Due time, JFC, CR; in due order.
    delayed: VecDeque<(Instant, usize, u::urma_cr_t)>,
    /// Synthetic events returned by `urma_wait_jfc`, per JFC, not yet acked.
    synthetic: HashMap<usize, u32>,
    counters: Counters,
}

static CRS: Mutex<Option<Crs>> = Mutex::new(None);

fn crs<R>(f: impl FnOnce(&mut Crs) -> R) -> R {
    let mut g = lock(&CRS);
    let c = g.get_or_insert_with(Crs::default);
    let r = f(c);
    c.counters.crs_in_layer = kept(c);
    refresh_with(&lock(&KNOBS), c);
    r
}

fn kept(c: &Crs) -> u64 {
    (c.ready.values().map(|q| q.len()).sum::<usize>() + c.held.len() + c.delayed.len()) as u64
}

fn refresh_with(k: &Knobs, c: &Crs) {
    let any = !k.fail_post.is_empty()
        || !k.fail_cr.is_empty()
        || !k.cr_action.is_empty()
        || !k.send_cr_action.is_empty()
        || !k.recv_cr_action.is_empty()
        || k.hold
        || k.delay_ms > 0
        || !c.failing.is_empty()
        || !c.acting.is_empty()
        || c.counters.crs_in_layer > 0
        || !c.synthetic.is_empty();
    ANY.store(any, Ordering::Release);
}

fn edit(f: impl FnOnce(&mut Knobs)) {
    // Lock order: CRS, then KNOBS (as in `crs`).
    let mut g = lock(&CRS);
    let c = g.get_or_insert_with(Crs::default);
    let mut k = lock(&KNOBS);
    f(&mut k);
    refresh_with(&k, c);
}

/// Whether posts and polls must take the slow path.
pub fn any() -> bool {
    ANY.load(Ordering::Acquire)
}

/// Clears the knobs and sequence counters; held CRs become ready (FIFO), delayed ones stay due.
pub fn reset() {
    edit(|k| *k = Knobs::default());
    release(ORDER_FIFO, 0, 0);
    crs(|c| {
        c.failing.clear();
        c.acting.clear();
        let in_layer = c.counters.crs_in_layer;
        c.counters = Counters {
            crs_in_layer: in_layer,
            ..Counters::default()
        };
    });
    SEND_SEQ.store(0, Ordering::Release);
    RECV_SEQ.store(0, Ordering::Release);
    CR_SEQ.store(0, Ordering::Release);
    RECV_CR_SEQ.store(0, Ordering::Release);
}

pub fn counters() -> Counters {
    crs(|c| c.counters)
}

pub fn add_fail_post(queue: i32, nth: u64, status: i32) {
    edit(|k| k.fail_post.push((queue, nth, status)));
}

pub fn add_fail_cr(nth: u64, status: u32) {
    edit(|k| k.fail_cr.push((nth, status)));
}

pub fn add_cr_action(nth: u64, action: i32) {
    edit(|k| k.cr_action.push((nth, action)));
}

pub fn add_send_cr_action(nth: u64, action: i32) {
    edit(|k| k.send_cr_action.push((nth, action)));
}

pub fn add_recv_cr_action(nth: u64, action: i32) {
    edit(|k| k.recv_cr_action.push((nth, action)));
}

pub fn set_hold(on: bool) {
    edit(|k| k.hold = on);
}

pub fn set_delay(ms: u64) {
    edit(|k| k.delay_ms = ms);
}

/// The status the WR numbered `nth` of `queue` must fail with (consumes the rule).
pub fn take_fail_post(queue: i32, nth: u64) -> Option<i32> {
    let mut out = None;
    edit(|k| out = faults::take_post(&mut k.fail_post, queue, nth));
    if out.is_some() {
        crs(|c| c.counters.posts_failed_injected += 1);
    }
    out
}

/// Whether the `nth` send WR has a `fail_cr` rule (not consumed).
pub fn fail_cr_pending(nth: u64) -> bool {
    any() && lock(&KNOBS).fail_cr.iter().any(|&(n, _)| n == nth)
}

/// Records a send WR that was posted as the `nth`: a `fail_cr` or `send_cr_action` rule for it
/// marks its CR.
pub fn posted_send(nth: u64, local_id: u32, user_ctx: u64) {
    if !any() {
        return;
    }
    let (mut st, mut act) = (None, None);
    edit(|k| {
        st = faults::take(&mut k.fail_cr, nth);
        act = faults::take(&mut k.send_cr_action, nth);
    });
    let key = (local_id, user_ctx);
    if st.is_some() || act.is_some() {
        crs(|c| {
            if let Some(st) = st {
                c.failing.entry(key).or_default().push_back(st);
            }
            if let Some(a) = act {
                c.acting.entry(key).or_default().push_back(a);
            }
        });
    }
}

pub fn count_posted(send: u64, recv: u64) {
    crs(|c| {
        c.counters.send_wrs += send;
        c.counters.recv_wrs += recv;
    });
}

/// What the layer does with one CR from the provider (the control plane's, shared with the
/// loopback).
pub use urma_loopback_ctl::faults::Fate;

/// Applies the CR faults to one CR just returned by the provider: the `fail_cr` rewrite (in
/// place) and its fate.
pub fn on_provider_cr(cr: &mut u::urma_cr_t) -> Fate {
    let nth = CR_SEQ.fetch_add(1, Ordering::AcqRel) + 1;
    // SAFETY: the CR flag union is a plain u8.
    let s_r = unsafe { cr.flag.value } & 1;
    let recv_nth = (s_r == 1).then(|| RECV_CR_SEQ.fetch_add(1, Ordering::AcqRel) + 1);
    let mut fate = Fate::Deliver;
    edit(|k| {
        let action = faults::take(&mut k.cr_action, nth)
            .or_else(|| recv_nth.and_then(|rn| faults::take(&mut k.recv_cr_action, rn)));
        fate = action.map_or(Fate::Deliver, Fate::of);
    });
    crs(|c| {
        c.counters.crs_from_provider += 1;
        if s_r == 0 {
            let key = (cr.local_id, cr.user_ctx);
            if let Some(st) = pop_mark(&mut c.failing, key) {
                cr.status = st;
                cr.completion_len = 0;
                c.counters.crs_rewritten += 1;
            }
            if let Some(a) = pop_mark(&mut c.acting, key) {
                if fate == Fate::Deliver {
                    fate = Fate::of(a);
                }
            }
        }
        match fate {
            Fate::Drop => c.counters.crs_dropped += 1,
            Fate::Dup => c.counters.crs_duplicated += 1,
            Fate::Deliver => {}
        }
    });
    fate
}

fn pop_mark<T>(m: &mut HashMap<(u32, u64), VecDeque<T>>, key: (u32, u64)) -> Option<T> {
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
    let (hold, delay) = {
        let k = lock(&KNOBS);
        (k.hold, k.delay_ms)
    };
    if hold {
        crs(|c| c.held.push((jfc, cr)));
    } else if delay > 0 {
        let due = Instant::now() + Duration::from_millis(delay);
        crs(|c| c.delayed.push_back((due, jfc, cr)));
    } else if out.len() < room {
        out.push(cr);
    } else {
        crs(|c| c.ready.entry(jfc).or_default().push_back(cr));
    }
}

fn promote_due(c: &mut Crs, now: Instant) {
    while c.delayed.front().is_some_and(|(t, _, _)| *t <= now) {
        let (_, j, cr) = c.delayed.pop_front().expect("front exists");
        c.ready.entry(j).or_default().push_back(cr);
    }
}

/// Takes at most `room` CRs ready for `jfc` (due delayed ones included).
pub fn take_ready(jfc: usize, room: usize) -> Vec<u::urma_cr_t> {
    crs(|c| {
        promote_due(c, Instant::now());
        let Some(q) = c.ready.get_mut(&jfc) else {
            return Vec::new();
        };
        let n = room.min(q.len());
        let v: Vec<_> = q.drain(..n).collect();
        if q.is_empty() {
            c.ready.remove(&jfc);
        }
        v
    })
}

pub fn count_to_app(n: usize) {
    if n > 0 {
        crs(|c| c.counters.crs_to_app += n as u64);
    }
}

/// Releases the held CRs in `order` (after `delay_ms`). Returns how many.
pub fn release(order: i32, seed: u64, delay_ms: u32) -> u64 {
    crs(|c| {
        let mut v = std::mem::take(&mut c.held);
        faults::order(&mut v, order, seed);
        let n = v.len() as u64;
        let due = Instant::now() + Duration::from_millis(delay_ms as u64);
        for (j, cr) in v {
            if delay_ms == 0 {
                c.ready.entry(j).or_default().push_back(cr);
            } else {
                // Due times only grow, so the queue stays in due order.
                let pos = c
                    .delayed
                    .iter()
                    .position(|(t, _, _)| *t > due)
                    .unwrap_or(c.delayed.len());
                c.delayed.insert(pos, (due, j, cr));
            }
        }
        n
    })
}

/// Forgets everything kept for a deleted JFC.
pub fn forget_jfc(jfc: usize) {
    crs(|c| {
        c.ready.remove(&jfc);
        c.held.retain(|(j, _)| *j != jfc);
        c.delayed.retain(|(_, j, _)| *j != jfc);
        c.synthetic.remove(&jfc);
    });
}

/// For `urma_wait_jfc`: a JFC among `jfcs` with CRs ready now (a synthetic event is counted
/// for it), and whether CRs of those JFCs are kept for later (held or delayed).
pub fn event_ready(jfcs: &[usize]) -> (Option<usize>, bool) {
    crs(|c| {
        promote_due(c, Instant::now());
        let ready = jfcs.iter().copied().find(|j| c.ready.contains_key(j));
        if let Some(j) = ready {
            *c.synthetic.entry(j).or_default() += 1;
            c.counters.synthetic_events += 1;
        }
        let later = c
            .held
            .iter()
            .map(|(j, _)| j)
            .chain(c.delayed.iter().map(|(_, j, _)| j))
            .any(|j| jfcs.contains(j));
        (ready, later)
    })
}

/// For `urma_ack_jfc`: how many of `n` acked events of `jfc` were synthetic (those are not
/// passed on to the provider).
pub fn take_synthetic(jfc: usize, n: u32) -> u32 {
    crs(|c| {
        let Some(s) = c.synthetic.get_mut(&jfc) else {
            return 0;
        };
        let k = (*s).min(n);
        *s -= k;
        if *s == 0 {
            c.synthetic.remove(&jfc);
        }
        k
    })
}

/// Applies a knob spec (syntax, value rules and the fault keys: `urma_loopback_ctl::spec`,
/// shared with the loopback). Keys: `fail_post=N:ST`, `fail_recv_post=N:ST` (ST an `int`,
/// negative allowed), `fail_cr=N:CR_ST`, `drop_cr=N`, `dup_cr=N`, `drop_send_cr=N`,
/// `dup_send_cr=N`, `drop_recv_cr=N`, `dup_recv_cr=N`, `hold=0|1`, `delay_ms=N`.
/// Returns the number of items applied, or the first item that does not parse (items before it
/// are applied).
pub fn apply_spec(spec: &str) -> Result<usize, String> {
    spec::apply(spec, |knob| {
        match knob {
            Knob::FailPost { queue, nth, status } => add_fail_post(queue, nth, status),
            Knob::FailCr { nth, status } => add_fail_cr(nth, status),
            Knob::CrAction { nth, action } => add_cr_action(nth, action),
            Knob::Hold(on) => set_hold(on),
            Knob::DelayMs(ms) => set_delay(ms),
            Knob::Other(k, v) => match k {
                "drop_send_cr" => add_send_cr_action(num(v)?, ACT_DROP),
                "dup_send_cr" => add_send_cr_action(num(v)?, ACT_DUP),
                "drop_recv_cr" => add_recv_cr_action(num(v)?, ACT_DROP),
                "dup_recv_cr" => add_recv_cr_action(num(v)?, ACT_DUP),
                _ => return None,
            },
        }
        Some(())
    })
}
