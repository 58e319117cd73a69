//! Statistics counters of the provider (bottom floor: depends on nothing in the crate but the
//! stripe index of [`crate::util`]).
//!
//! `urma_loopback_get_counters` ([`crate::ctl`]) copies them, with the registry's live-object
//! gauges, into the control plane's `Counters` (`urma-loopback-ctl`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::util::{stripe, STRIPES};

/// Global counters (all since process start or the last reset).
pub struct Counters {
    pub send_wrs: Counter,
    pub recv_wrs: Counter,
    pub post_errors: Counter,
    pub crs_generated: Counter,
    pub crs_polled: Counter,
    pub crs_dropped: Counter,
    pub crs_duplicated: Counter,
    pub crs_held: Counter,
    pub crs_overflow: Counter,
    pub crs_error: Counter,
    pub rnr_errors: Counter,
    pub bytes_copied: Counter,
    pub bytes_transferred: Counter,
    pub events_reported: Counter,
    pub events_acked: Counter,
    pub rnr_parked: Counter,
    pub rnr_delivered_late: Counter,
    pub rnr_expired: Counter,
}

pub static COUNTERS: Counters = Counters {
    send_wrs: Counter::new(),
    recv_wrs: Counter::new(),
    post_errors: Counter::new(),
    crs_generated: Counter::new(),
    crs_polled: Counter::new(),
    crs_dropped: Counter::new(),
    crs_duplicated: Counter::new(),
    crs_held: Counter::new(),
    crs_overflow: Counter::new(),
    crs_error: Counter::new(),
    rnr_errors: Counter::new(),
    bytes_copied: Counter::new(),
    bytes_transferred: Counter::new(),
    events_reported: Counter::new(),
    events_acked: Counter::new(),
    rnr_parked: Counter::new(),
    rnr_delivered_late: Counter::new(),
    rnr_expired: Counter::new(),
};

pub fn reset() {
    let c = &COUNTERS;
    for a in [
        &c.send_wrs,
        &c.recv_wrs,
        &c.post_errors,
        &c.crs_generated,
        &c.crs_polled,
        &c.crs_dropped,
        &c.crs_duplicated,
        &c.crs_overflow,
        &c.crs_error,
        &c.rnr_errors,
        &c.bytes_copied,
        &c.bytes_transferred,
        &c.events_reported,
        &c.events_acked,
        &c.rnr_parked,
        &c.rnr_delivered_late,
        &c.rnr_expired,
    ] {
        a.store(0, Ordering::Relaxed);
    }
}

/// One stripe on cache lines of its own.
#[repr(align(128))]
struct Stripe(AtomicU64);

/// A statistics counter striped over cache lines by thread: every post, CR and poll bumps a few
/// counters, and one shared word per counter bounced between the posting threads and the poller.
/// Reads sum the stripes (wrapping, so a gauge such as `crs_held` that one thread raises and
/// another lowers still reads right); like the plain atomics before, a read concurrent with
/// updates may miss some of them.
pub struct Counter([Stripe; STRIPES]);

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

impl Counter {
    pub const fn new() -> Counter {
        Counter([const { Stripe(AtomicU64::new(0)) }; STRIPES])
    }

    fn mine(&self) -> &AtomicU64 {
        &self.0[stripe()].0
    }

    pub fn fetch_add(&self, v: u64, o: Ordering) {
        self.mine().fetch_add(v, o);
    }

    pub fn fetch_sub(&self, v: u64, o: Ordering) {
        self.mine().fetch_sub(v, o);
    }

    pub fn load(&self, o: Ordering) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(o)))
    }

    pub fn store(&self, v: u64, o: Ordering) {
        for (i, s) in self.0.iter().enumerate() {
            s.0.store(if i == 0 { v } else { 0 }, o);
        }
    }
}

#[cfg(test)]
mod counter_tests {
    use super::Counter;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn striped_counter_sums_every_thread_and_resets() {
        let c = Counter::new();
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.fetch_add(1, Relaxed);
                    }
                });
            }
        });
        assert_eq!(c.load(Relaxed), 12_000);
        c.store(0, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
        c.store(5, Relaxed);
        assert_eq!(c.load(Relaxed), 5);
    }

    #[test]
    fn a_gauge_raised_and_lowered_on_different_threads_reads_right() {
        let c = Counter::new();
        std::thread::scope(|s| {
            s.spawn(|| c.fetch_add(7, Relaxed));
        });
        std::thread::scope(|s| {
            s.spawn(|| {
                // Likely another stripe: that stripe wraps below zero, the sum does not.
                std::thread::spawn(|| ()).join().unwrap();
                c.fetch_sub(3, Relaxed)
            });
        });
        c.fetch_sub(4, Relaxed);
        assert_eq!(c.load(Relaxed), 0);
    }
}
