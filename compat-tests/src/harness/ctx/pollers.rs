//! The application-style pollers of a scenario run and the delivery of the CRs they hold.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use urma_sys as u;

use crate::fixture::{CrExt, PollMode, Poller, SendPtr};
use crate::harness::backend;
use crate::oracle::{dec, UserData};

use super::types::{cr_key, cr_line, Delivery, Order, Side};
use super::workers::wait_workers_idle;
use super::ScenarioRun;

/// Longest wait of the send poller for the receive side to catch up (Pass mode).
const PACE_MAX: Duration = Duration::from_millis(100);

impl ScenarioRun {
    /// Starts the CR pollers (send side: pass-through; receive side: per `delivery`).
    pub fn start_pollers(&mut self, delivery: Delivery) {
        let mode = if self.setup.event_mode {
            PollMode::Event
        } else {
            PollMode::Poll
        };
        // Pass mode: the receiving application keeps up with the sender. The loopback has no
        // RNR retry (a SEND_IMM finding no recv WR completes with RNR_RETRY_CNT_EXC_ERR), and
        // each receive-side CR re-posts its recv WR inside wake_up_task (§4.1, §4.3), so
        // whether a fast sender overruns the cap x 4 prefilled WRs would depend on how the two
        // poller threads are scheduled (recv-capacity-1 FAILed on a loaded machine). Before
        // handing over a send-side CR, the send poller waits until the receive poller has
        // handed over the receive-side CR of every SEND_IMM whose successful local CR it saw
        // (the loopback emits the receive-side CR first). A receive-side CR that never comes
        // (dropped by a knob) is written off after a bounded wait.
        let pace = self.pace && matches!(delivery, Delivery::Pass);
        let recv_done = Arc::new(AtomicU64::new(0));
        let mut imm_ok: u64 = 0;
        let mut written_off: u64 = 0;
        for side in [Side::Send, Side::Recv] {
            let lib = self.lib(side);
            let wake = lib.os_transport_wake_up_task;
            let h = SendPtr(self.handle(side));
            let rec = self.rec.clone();
            let tag = self.side_tag(side);
            let cq = match side {
                Side::Send => self.pair.sender.cq,
                Side::Recv => self.pair.receiver.cq,
            };
            let done = recv_done.clone();
            let p = Poller::start(&cq, mode, move |cr| {
                if pace && side == Side::Send {
                    let target = imm_ok.saturating_sub(written_off);
                    let end = Instant::now() + PACE_MAX;
                    while done.load(Ordering::Acquire) < target {
                        if Instant::now() >= end {
                            written_off += target - done.load(Ordering::Acquire).min(target);
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    if UserData::decode(cr.user_ctx).chunk_id == 7
                        && cr.status == u::URMA_CR_SUCCESS
                    {
                        imm_ok += 1;
                    }
                }
                let h = &h;
                // SAFETY: the handle is live while the pollers run (they stop before destroy);
                // cr is a CR just polled.
                let r = unsafe { wake(h.0, (cr as *mut u::urma_cr_t).cast()) };
                rec.push(json!({"k": "wake", "key": cr_key(cr), "line": format!("{tag}wake {} -> {r}", cr_line(cr))}));
                if side == Side::Recv {
                    done.fetch_add(1, Ordering::Release);
                }
            });
            if side == Side::Recv && matches!(delivery, Delivery::Held(_)) {
                p.set_hold(true);
            }
            match side {
                Side::Send => self.send_poller = Some(p),
                Side::Recv => self.recv_poller = Some(p),
            }
        }
    }

    /// Stops both pollers (final drain included).
    pub fn stop_pollers(&mut self) {
        if let Some(p) = self.send_poller.take() {
            p.stop();
        }
        if let Some(p) = self.recv_poller.take() {
            // Held CRs never delivered are recorded as such.
            let left = p.take_held();
            p.stop();
            for cr in left {
                self.rec.push(json!({"k": "wake", "key": cr_key(&cr), "line": format!("undelivered {}", cr_line(&cr))}));
            }
        }
    }

    /// Holds (true) or stops holding send-side CRs in the send poller.
    pub fn set_send_hold(&self, on: bool) {
        if let Some(p) = self.send_poller.as_ref() {
            p.set_hold(on);
        }
    }

    /// Takes the held send-side CRs (poll order).
    pub fn take_send_held(&self) -> Vec<u::urma_cr_t> {
        self.send_poller
            .as_ref()
            .map(|p| p.take_held())
            .unwrap_or_default()
    }

    /// Send-side CRs seen so far.
    pub fn send_seen(&self) -> u64 {
        self.send_poller.as_ref().map(|p| p.seen()).unwrap_or(0)
    }

    /// Waits until the loopback's posted send-WR count did not change for `quiet` (at most
    /// 5 s); returns it.
    pub fn settle_send_wrs(&self, quiet: Duration) -> u64 {
        let end = Instant::now() + Duration::from_secs(5);
        let mut last = backend::get().send_wrs();
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let now = backend::get().send_wrs();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet || Instant::now() >= end {
                return now;
            }
        }
    }

    /// Receive-side CRs seen (held or handed over) so far.
    pub fn recv_seen(&self) -> u64 {
        self.recv_poller.as_ref().map(|p| p.seen()).unwrap_or(0)
    }

    /// Waits until `n` receive-side CRs were seen and nothing new arrived for 25 ms (a
    /// duplicated CR may follow), or until neither side saw a new CR for `quiet` (at most `max`
    /// in all). Returns the count of receive-side CRs. The quiet period counts from the last
    /// CR of either side: while the sender's CRs still come, its transfer is moving and its
    /// receive-side CRs are on their way, however slowly a loaded machine runs it.
    pub fn settle_recv(&self, n: u64, quiet: Duration, max: Duration) -> u64 {
        let end = Instant::now() + max;
        let progress = || (self.recv_seen(), self.send_seen());
        let mut last = progress();
        let mut since = Instant::now();
        loop {
            let p = progress();
            let now = p.0;
            if p != last {
                last = p;
                since = Instant::now();
            }
            let idle = since.elapsed();
            if (now >= n && idle >= Duration::from_millis(25))
                || idle >= quiet
                || Instant::now() >= end
            {
                return now;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Takes the held receive-side CRs, in a canonical order: arrival order across requests
    /// depends on worker scheduling, so they are sorted by (request id, chunk id); the order
    /// within one request (chunk order) is kept.
    pub fn take_held(&self) -> Vec<u::urma_cr_t> {
        let mut v = self
            .recv_poller
            .as_ref()
            .map(|p| p.take_held())
            .unwrap_or_default();
        v.sort_by_key(|cr| {
            let imm = cr.imm();
            (dec(imm & ((1 << 60) - 1)), imm >> 61)
        });
        v
    }

    /// Hands `cr` to `os_transport_wake_up_task` of `side` on the scenario thread; when it
    /// returns 0 on a receive-side CR, waits (up to `notify_wait`) for the notify it causes.
    pub fn deliver(&mut self, side: Side, mut cr: u::urma_cr_t, notify_wait: Duration) -> i32 {
        let before = self.rec.notify_count();
        let h = self.handle(side);
        // SAFETY: h is live or NULL (the library checks); cr is a valid CR.
        let r = unsafe {
            (self.lib(side).os_transport_wake_up_task)(h, (&mut cr as *mut u::urma_cr_t).cast())
        };
        self.rec.push(json!({"k": "wake", "key": cr_key(&cr), "line": format!("{}wake {} -> {r}", self.side_tag(side), cr_line(&cr))}));
        if r == 0 && cr.is_recv() && self.rec.wait_notifies(before + 1, notify_wait) {
            // The notify counter moves inside the callback; the worker then still does the
            // task's accounting (and, for the last chunk, ends the request). A CR delivered in
            // that window (a duplicate of the last chunk's CR) would find the request still
            // registered or already gone depending on scheduling: on both libraries that is
            // 0 with a discard WARN versus -1 (legacy) or kept (Rust, D4). Wait until the
            // workers are idle again so the next delivery always sees the ended request.
            wait_workers_idle(Duration::from_millis(200));
        }
        r
    }

    /// Delivers the held CRs in `order` (one at a time, waiting for each notify).
    pub fn deliver_held(&mut self, order: Order) -> usize {
        let mut v = self.take_held();
        order.apply(&mut v);
        let n = v.len();
        for cr in v {
            self.deliver(Side::Recv, cr, Duration::from_millis(500));
        }
        n
    }
}
