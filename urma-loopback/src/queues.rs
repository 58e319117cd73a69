//! Completion queues (JFC), event channels (JFCE, eventfd based) and receive queues.
//!
//! Locking: `Jfc::q` (the CR queue) and `Jfc::ev` (event bookkeeping) are separate mutexes, never
//! held together; `Jfce::pending` is taken after `Jfc::ev` is released. `RecvQ::q` is a leaf.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::cobj::{CBox, Ctx};
use crate::stats::COUNTERS;
use crate::util::lock;

/// Event bookkeeping of a JFC (event mode).
#[derive(Default)]
pub struct EvState {
    /// One event will fire on the next CR (set by `urma_rearm_jfc`).
    pub armed: bool,
    pub solicited_only: bool,
    /// Events handed out by `urma_wait_jfc` for this JFC.
    pub reported: u64,
    /// Events acknowledged with `urma_ack_jfc`.
    pub acked: u64,
}

/// Jetty For Completion.
pub struct Jfc {
    pub c: CBox<urma_sys::urma_jfc_t>,
    pub name: String,
    pub id: u32,
    pub depth: u32,
    pub non_blocking: bool,
    pub jfce: Option<Arc<Jfce>>,
    pub q: Mutex<VecDeque<urma_sys::urma_cr_t>, { rank::JFC_CRS }>,
    /// `q.len()`, stored under the `q` lock: an empty poll (a busy poller makes many) returns
    /// without taking the lock that every CR push takes.
    pub queued: AtomicUsize,
    /// `ev.armed`, stored under the `ev` lock: a push fires no event and takes no `ev` lock while
    /// nothing is armed (poll mode). See [`Jfc::rearm`] for why no event is missed.
    pub armed_hint: AtomicBool,
    /// CRs pushed while the queue already held `depth` entries (kept, never lost).
    pub overflow: AtomicU64,
    pub ev: Mutex<EvState, { rank::JFC_EVENTS }>,
    pub ev_cv: Condvar,
    /// JFS/JFR/jetties bound to this JFC and alive.
    pub users: AtomicU64,
    pub alive: AtomicBool,
    pub ctx: Arc<Ctx>,
}

impl Jfc {
    /// Appends a CR (visible to `urma_poll_jfc` at once) and fires an armed event.
    ///
    /// A full JFC never drops a CR: the queue grows past `depth`, `overflow` and the global
    /// `crs_overflow` counter are incremented, and the first overflow of a JFC queues an
    /// `URMA_EVENT_JFC_ERR` async event on its context.
    pub fn push(self: &Arc<Self>, cr: urma_sys::urma_cr_t, solicited: bool) {
        let over = {
            let mut q = lock(&self.q);
            q.push_back(cr);
            self.queued.store(q.len(), Ordering::Release);
            q.len() > self.depth as usize
        };
        if over {
            let prev = self.overflow.fetch_add(1, Ordering::Relaxed);
            COUNTERS.crs_overflow.fetch_add(1, Ordering::Relaxed);
            if prev == 0 {
                crate::events::queue(self.ctx.c.key(), urma_sys::URMA_EVENT_JFC_ERR, self.c.key());
            }
        }
        self.maybe_fire(solicited);
    }

    /// Fires one event if armed (and the solicited filter allows it).
    pub fn maybe_fire(self: &Arc<Self>, solicited: bool) {
        let Some(jfce) = &self.jfce else { return };
        if !self.armed_hint.load(Ordering::SeqCst) {
            return;
        }
        let fire = {
            let mut ev = lock(&self.ev);
            if ev.armed && (!ev.solicited_only || solicited) {
                ev.armed = false;
                self.armed_hint.store(false, Ordering::SeqCst);
                true
            } else {
                false
            }
        };
        if fire {
            jfce.notify(self.clone());
        }
    }

    /// Pops up to `n` CRs.
    ///
    /// Writes the CRs straight to `out` (no intermediate buffer) and returns how many.
    ///
    /// # Safety
    /// `out` must have room for `n` CRs.
    pub unsafe fn pop_into(&self, n: usize, out: *mut urma_sys::urma_cr_t) -> usize {
        if self.queued.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut q = lock(&self.q);
        let k = n.min(q.len());
        for (i, cr) in q.drain(..k).enumerate() {
            // SAFETY: i < k <= n and the caller guarantees room for n CRs.
            unsafe { out.add(i).write(cr) };
        }
        self.queued.store(q.len(), Ordering::Release);
        k
    }

    /// Arms one event (`urma_rearm_jfc`). If CRs are already queued the event fires at once, so
    /// a wait after rearm never misses CRs that arrived between poll and rearm.
    ///
    /// A push reads `armed_hint` after its `q` critical section; here it is set before the `q`
    /// check. If the push's `q` section came first, the check below sees its CR and fires; if the
    /// check came first, the hint was stored before it and the push (ordered after it by the `q`
    /// lock) sees the hint and fires.
    pub fn rearm(self: &Arc<Self>, solicited_only: bool) {
        {
            let mut ev = lock(&self.ev);
            ev.armed = true;
            ev.solicited_only = solicited_only;
            self.armed_hint.store(true, Ordering::SeqCst);
        }
        let nonempty = !lock(&self.q).is_empty();
        if nonempty {
            self.maybe_fire(true);
        }
    }

    /// Adds acknowledged events (`urma_ack_jfc`).
    pub fn ack(&self, n: u32) {
        let mut ev = lock(&self.ev);
        ev.acked += n as u64;
        // SAFETY: self.c is our live allocation of urma_jfc_t; the field is plain u32, written
        // under the ev mutex like every other write we do to it.
        unsafe {
            let p = self.c.ptr();
            (*p).comp_events_acked = (*p).comp_events_acked.wrapping_add(n);
        }
        COUNTERS.events_acked.fetch_add(n as u64, Ordering::Relaxed);
        self.ev_cv.notify_all();
    }

    /// Waits (bounded) until every reported event has been acked. Returns false on timeout.
    pub fn wait_acked(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut ev = lock(&self.ev);
        while ev.acked < ev.reported {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            ev = match self.ev_cv.wait_timeout(ev, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        true
    }

    /// Whether events are unacknowledged.
    pub fn unacked(&self) -> bool {
        let ev = lock(&self.ev);
        ev.acked < ev.reported
    }
}

/// Longest single sleep of `urma_wait_jfc` while RNR parking is enabled.
const RNR_WAIT_SLICE_MS: i32 = 20;

/// The receiver-not-ready parking (in [`crate::datapath`], above the queues) as seen by a
/// waiting [`Jfce`]: parked messages expire on posts, polls and waits.
pub struct RnrHooks {
    /// Fails the parked messages whose RNR timeout has passed.
    pub expire: fn(),
    /// Whether messages are (or may get) parked: the wait then wakes up periodically.
    pub active: fn() -> bool,
}

/// Completion event channel, backed by an eventfd.
///
/// Invariant (kept under `pending`'s lock): the eventfd counter is non-zero exactly when
/// `pending` is non-empty, so `poll(2)` on the fd (also exposed as `urma_jfce_t.fd`) wakes
/// exactly when `urma_wait_jfc` has something to return.
pub struct Jfce {
    pub c: CBox<urma_sys::urma_jfce_t>,
    pub name: String,
    pub efd: i32,
    pub pending: Mutex<VecDeque<Arc<Jfc>>, { rank::JFCE_PENDING }>,
    pub users: AtomicU64,
    pub ctx: Arc<Ctx>,
}

impl Drop for Jfce {
    fn drop(&mut self) {
        // SAFETY: efd is our eventfd, closed once here.
        unsafe { libc::close(self.efd) };
    }
}

impl Jfce {
    /// Creates the eventfd. None if the system refuses.
    pub fn new_fd() -> Option<i32> {
        // SAFETY: plain syscall wrapper.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        (fd >= 0).then_some(fd)
    }

    fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a local u64 to our eventfd.
        unsafe { libc::write(self.efd, &one as *const u64 as *const libc::c_void, 8) };
    }

    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a local u64 from our non-blocking eventfd.
        unsafe { libc::read(self.efd, &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    /// Queues one completion event for `jfc`.
    pub fn notify(&self, jfc: Arc<Jfc>) {
        let mut p = lock(&self.pending);
        p.push_back(jfc);
        self.signal();
    }

    /// Forgets pending (not yet reported) events of a JFC being deleted.
    pub fn purge(&self, jfc_key: usize) {
        let mut p = lock(&self.pending);
        p.retain(|j| j.c.key() != jfc_key);
        if p.is_empty() {
            self.drain();
        }
    }

    /// `urma_wait_jfc`: up to `cnt` JFC handles; timeout 0 = no wait, < 0 = forever, N = N ms.
    /// `rnr` runs the receiver-not-ready expiry, which lives above the queues.
    pub fn wait(&self, cnt: usize, timeout_ms: i32, rnr: &RnrHooks) -> Vec<Arc<Jfc>> {
        let deadline =
            (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64));
        loop {
            // Parked (receiver-not-ready) messages expire on posts, polls and here.
            (rnr.expire)();
            {
                let mut p = lock(&self.pending);
                if !p.is_empty() {
                    let n = cnt.min(p.len());
                    let out: Vec<Arc<Jfc>> = p.drain(..n).collect();
                    if p.is_empty() {
                        self.drain();
                    }
                    drop(p);
                    for j in &out {
                        lock(&j.ev).reported += 1;
                    }
                    COUNTERS
                        .events_reported
                        .fetch_add(out.len() as u64, Ordering::Relaxed);
                    return out;
                }
            }
            let wait_ms: i32 = match deadline {
                None if timeout_ms == 0 => return Vec::new(),
                None => -1,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Vec::new();
                    }
                    let ms = (d - now).as_millis().max(1);
                    ms.min(i32::MAX as u128) as i32
                }
            };
            // While messages are parked (or may be parked by another thread), wake up
            // periodically so their RNR expiry reaches an armed JFC without a timer thread.
            let wait_ms = match wait_ms {
                w if !(rnr.active)() => w,
                w if w < 0 => RNR_WAIT_SLICE_MS,
                w => w.min(RNR_WAIT_SLICE_MS),
            };
            let mut pfd = libc::pollfd {
                fd: self.efd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: pfd is a valid pollfd for one descriptor.
            let r = unsafe { libc::poll(&mut pfd, 1, wait_ms) };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Vec::new();
                }
            }
        }
    }
}
