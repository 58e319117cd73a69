//! Statistics counters of the provider (bottom floor: depends on nothing in the crate; the
//! striped counter type is the control plane's, `urma_datapath::stripe`).
//!
//! `urma_loopback_get_counters` ([`crate::ctl`]) copies them, with the registry's live-object
//! gauges, into the control plane's `Counters` (`urma-loopback-ctl`).

use std::sync::atomic::Ordering;

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
    pub peer_refusals: Counter,
    pub peer_refused_objects: Counter,
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
    peer_refusals: Counter::new(),
    peer_refused_objects: Counter::new(),
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
        &c.peer_refusals,
        &c.peer_refused_objects,
    ] {
        a.store(0, Ordering::Relaxed);
    }
}

/// The striped counter (the control plane's: the fault plane's sequence counters use it too).
pub use urma_datapath::stripe::Counter;
