//! Held and delayed CRs: what the `hold`, `delay_ms` and release knobs ([`crate::knobs`]) do to
//! a generated CR before it enters its JFC.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::knobs::{ANY, KNOBS};
use crate::queues::Jfc;
use crate::stats::COUNTERS;
use crate::util::lock;

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
    urma_loopback_ctl::faults::order(&mut v, order, seed);
    if delay_ms == 0 {
        for (j, cr, s) in v {
            j.push(cr, s);
        }
    } else {
        delay_push(Instant::now() + Duration::from_millis(delay_ms as u64), v);
    }
    n
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
