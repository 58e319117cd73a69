//! Fault-injection and timing knobs (set through `urma_loopback_*` or `URMA_LOOPBACK_KNOBS`).
//!
//! Counting: "the Nth send WR" counts every send WR that reaches a post call (1-based, since
//! process start or `urma_loopback_reset`), "the Nth recv WR" likewise for recv posts, and "the
//! Nth CR" counts every CR generated (send and recv side, before drop/dup).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::ctl::COUNTERS;
use crate::queues::Jfc;
use crate::registry::Line;
use crate::util::lock;

pub const Q_SEND: i32 = 1;
pub const Q_RECV: i32 = 2;
pub const ACT_DROP: i32 = 1;
pub const ACT_DUP: i32 = 2;
pub const ORDER_FIFO: i32 = 0;
pub const ORDER_REVERSE: i32 = 1;
pub const ORDER_SHUFFLE: i32 = 2;

/// Default bound for `urma_delete_jfc` waiting on unacked events.
pub const DEFAULT_DELETE_TIMEOUT_MS: u64 = 2000;

#[derive(Default)]
pub struct Knobs {
    /// (queue, nth, status): the Nth WR of that queue kind is rejected by the post call.
    pub fail_post: Vec<(i32, u64, i32)>,
    /// (nth, cr status): the Nth send WR completes with this error status (nothing executed).
    pub fail_cr: Vec<(u64, u32)>,
    /// (nth, action): the Nth CR generated is dropped or duplicated.
    pub cr_action: Vec<(u64, i32)>,
    pub hold: bool,
    pub delay_ms: u64,
}

pub static KNOBS: Mutex<Knobs> = Mutex::new(Knobs {
    fail_post: Vec::new(),
    fail_cr: Vec::new(),
    cr_action: Vec::new(),
    hold: false,
    delay_ms: 0,
});
/// Fast path: false when no rule/hold/delay is set.
pub static ANY: AtomicBool = AtomicBool::new(false);
pub static NOCOPY: AtomicBool = AtomicBool::new(false);
pub static DELETE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_DELETE_TIMEOUT_MS);

// Each sequence counter on its own lines: they are bumped by every post / CR, from several threads.
pub static SEND_SEQ: Line<AtomicU64> = Line(AtomicU64::new(0));
pub static RECV_SEQ: Line<AtomicU64> = Line(AtomicU64::new(0));
pub static CR_SEQ: Line<AtomicU64> = Line(AtomicU64::new(0));

fn refresh(k: &Knobs) {
    let any = !k.fail_post.is_empty()
        || !k.fail_cr.is_empty()
        || !k.cr_action.is_empty()
        || k.hold
        || k.delay_ms > 0;
    ANY.store(any, Ordering::Release);
}

/// Edits the knobs.
pub fn edit(f: impl FnOnce(&mut Knobs)) {
    let mut k = lock(&KNOBS);
    f(&mut k);
    refresh(&k);
}

/// Clears every knob and sequence counter (held CRs are released in FIFO order first).
pub fn reset() {
    edit(|k| *k = Knobs::default());
    release_held(ORDER_FIFO, 0, 0);
    NOCOPY.store(false, Ordering::Release);
    DELETE_TIMEOUT_MS.store(DEFAULT_DELETE_TIMEOUT_MS, Ordering::Release);
    crate::datapath::RNR_TIMEOUT_MS
        .store(crate::datapath::DEFAULT_RNR_TIMEOUT_MS, Ordering::Release);
    SEND_SEQ.store(0, Ordering::Release);
    RECV_SEQ.store(0, Ordering::Release);
    CR_SEQ.store(0, Ordering::Release);
}

/// Status the Nth post of `queue` must fail with, if any (consumes the rule).
pub fn take_fail_post(queue: i32, nth: u64) -> Option<i32> {
    if !ANY.load(Ordering::Acquire) {
        return None;
    }
    let mut out = None;
    edit(|k| {
        if let Some(i) = k
            .fail_post
            .iter()
            .position(|&(q, n, _)| q == queue && n == nth)
        {
            out = Some(k.fail_post.remove(i).2);
        }
    });
    out
}

/// CR status the Nth send WR must complete with, if any (consumes the rule).
pub fn take_fail_cr(nth: u64) -> Option<u32> {
    if !ANY.load(Ordering::Acquire) {
        return None;
    }
    let mut out = None;
    edit(|k| {
        if let Some(i) = k.fail_cr.iter().position(|&(n, _)| n == nth) {
            out = Some(k.fail_cr.remove(i).1);
        }
    });
    out
}

/// What happens to one generated CR.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    Dup,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Deliver => "deliver",
            Fate::Drop => "drop",
            Fate::Dup => "dup",
        }
    }
}

/// Decides the fate of the Nth CR (consumes the rule).
pub fn cr_fate(nth: u64) -> Fate {
    if !ANY.load(Ordering::Acquire) {
        return Fate::Deliver;
    }
    let mut out = Fate::Deliver;
    edit(|k| {
        if let Some(i) = k.cr_action.iter().position(|&(n, _)| n == nth) {
            out = match k.cr_action.remove(i).1 {
                ACT_DROP => Fate::Drop,
                ACT_DUP => Fate::Dup,
                _ => Fate::Deliver,
            };
        }
    });
    out
}

type Pending = (Arc<Jfc>, urma_sys::urma_cr_t, bool);

static HELD: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

/// Delivers a CR to its JFC, honouring hold and delay.
pub fn deliver(jfc: &Arc<Jfc>, cr: urma_sys::urma_cr_t, solicited: bool) {
    if ANY.load(Ordering::Acquire) {
        let (hold, delay) = {
            let k = lock(&KNOBS);
            (k.hold, k.delay_ms)
        };
        if hold {
            lock(&HELD).push((jfc.clone(), cr, solicited));
            COUNTERS.crs_held.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if delay > 0 {
            delay_push(
                Instant::now() + Duration::from_millis(delay),
                vec![(jfc.clone(), cr, solicited)],
            );
            return;
        }
    }
    jfc.push(cr, solicited);
}

/// Number of CRs currently held or waiting for a delay.
pub fn in_flight() -> u64 {
    let held = lock(&HELD).len() as u64;
    let delayed = delayer()
        .0
        .lock()
        .map(|q| q.iter().map(|(_, v)| v.len() as u64).sum())
        .unwrap_or(0);
    held + delayed
}

/// Releases every held CR in `order`, after `delay_ms` (0 = now, in the calling thread).
/// Returns how many were released.
pub fn release_held(order: i32, seed: u64, delay_ms: u32) -> u64 {
    let mut v: Vec<Pending> = std::mem::take(&mut *lock(&HELD));
    let n = v.len() as u64;
    COUNTERS.crs_held.fetch_sub(n, Ordering::Relaxed);
    match order {
        ORDER_REVERSE => v.reverse(),
        ORDER_SHUFFLE => shuffle(&mut v, seed),
        _ => {}
    }
    if delay_ms == 0 {
        for (j, cr, s) in v {
            j.push(cr, s);
        }
    } else {
        delay_push(Instant::now() + Duration::from_millis(delay_ms as u64), v);
    }
    n
}

fn shuffle<T>(v: &mut [T], seed: u64) {
    // Deterministic Fisher-Yates with a splitmix64 generator.
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

type DelayQ = (Mutex<VecDeque<(Instant, Vec<Pending>)>>, Condvar);

fn delayer() -> &'static DelayQ {
    static D: OnceLock<DelayQ> = OnceLock::new();
    static STARTED: OnceLock<()> = OnceLock::new();
    let d = D.get_or_init(|| (Mutex::new(VecDeque::new()), Condvar::new()));
    STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name("urma-lb-delay".into())
            .spawn(delay_thread)
            .expect("spawn delay thread");
    });
    d
}

fn delay_push(at: Instant, v: Vec<Pending>) {
    let d = delayer();
    let mut q = lock(&d.0);
    // Keep the queue sorted by due time (stable for equal times).
    let pos = q.iter().position(|(t, _)| *t > at).unwrap_or(q.len());
    q.insert(pos, (at, v));
    d.1.notify_all();
}

fn delay_thread() {
    let d = delayer();
    let mut q = lock(&d.0);
    loop {
        let now = Instant::now();
        match q.front() {
            None => {
                q = d.1.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            Some((t, _)) if *t <= now => {
                let (_, v) = q.pop_front().expect("front exists");
                drop(q);
                for (j, cr, s) in v {
                    j.push(cr, s);
                }
                q = lock(&d.0);
            }
            Some((t, _)) => {
                let wait = *t - now;
                q = match d.1.wait_timeout(q, wait) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
        }
    }
}

/// Applies a knob spec: comma-separated `key=value` items.
///
/// Keys: `fail_post=N:STATUS`, `fail_recv_post=N:STATUS`, `fail_cr=N:CR_STATUS`, `drop_cr=N`,
/// `dup_cr=N`, `hold=0|1`, `delay_ms=N`, `nocopy=0|1`, `delete_timeout_ms=N`, `rnr_timeout_ms=N`.
/// Returns the number of items applied, or Err(item) for the first item that does not parse.
pub fn apply_spec(spec: &str) -> Result<usize, String> {
    let mut n = 0;
    for item in spec
        .split([',', ';'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (k, v) = item.split_once('=').ok_or_else(|| item.to_string())?;
        let bad = || item.to_string();
        let num = |s: &str| -> Result<u64, String> { parse_num(s).ok_or_else(bad) };
        let pair = |s: &str| -> Result<(u64, u64), String> {
            let (a, b) = s.split_once(':').ok_or_else(bad)?;
            Ok((num(a)?, num(b)?))
        };
        match k.trim() {
            "fail_post" => {
                let (a, b) = pair(v)?;
                edit(|kn| kn.fail_post.push((Q_SEND, a, b as i32)));
            }
            "fail_recv_post" => {
                let (a, b) = pair(v)?;
                edit(|kn| kn.fail_post.push((Q_RECV, a, b as i32)));
            }
            "fail_cr" => {
                let (a, b) = pair(v)?;
                edit(|kn| kn.fail_cr.push((a, b as u32)));
            }
            "drop_cr" => {
                let a = num(v)?;
                edit(|kn| kn.cr_action.push((a, ACT_DROP)));
            }
            "dup_cr" => {
                let a = num(v)?;
                edit(|kn| kn.cr_action.push((a, ACT_DUP)));
            }
            "hold" => {
                let a = num(v)? != 0;
                edit(|kn| kn.hold = a);
            }
            "delay_ms" => {
                let a = num(v)?;
                edit(|kn| kn.delay_ms = a);
            }
            "nocopy" => NOCOPY.store(num(v)? != 0, Ordering::Release),
            "delete_timeout_ms" => DELETE_TIMEOUT_MS.store(num(v)?, Ordering::Release),
            "rnr_timeout_ms" => crate::datapath::RNR_TIMEOUT_MS.store(num(v)?, Ordering::Release),
            _ => return Err(item.to_string()),
        }
        n += 1;
    }
    Ok(n)
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}
