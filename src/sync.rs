//! Generation-checked sync table (contract §6; stale and foreign syncs are refused, docs/reliability.md).
//!
//! A `task_sync_t *` handed to the caller is a token, never a pointer: it names a slot of a
//! process-wide, preallocated table and the slot's generation. Every use locks the slot and checks
//! the generation, so stale (already waited / cancelled / destroyed), foreign or forged values are
//! refused with ERR and can never dangle. The slot also carries all per-request state (sized for 7
//! chunks), so a request allocates nothing on the heap.

use crate::pool::WorkerShared;
use crate::sync_annotate::{Condvar, Mutex, MutexGuard};
use once_cell::sync::Lazy;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Most requests (syncs) in flight at once, process-wide. Submits beyond it return ERR with nothing posted.
pub const SYNC_CAPACITY: usize = 4096;

const TOKEN_TAG: u64 = 0x5B << 40;
const TOKEN_TAG_MASK: u64 = !((1u64 << 40) - 1);
const GEN_BITS: u32 = 20;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// Encodes (slot, generation) as the opaque value the caller holds.
pub fn token(slot: u32, gen: u32) -> usize {
    (TOKEN_TAG | (u64::from(gen & GEN_MASK) << 20) | (u64::from(slot) << 4)) as usize
}

/// Decodes a token; `None` for values that cannot be one of ours.
pub fn untoken(t: usize) -> Option<(u32, u32)> {
    let t = t as u64;
    if t & TOKEN_TAG_MASK != TOKEN_TAG || t & 0xF != 0 {
        return None;
    }
    let slot = ((t >> 4) & 0xFFFF) as u32;
    let gen = ((t >> 20) as u32) & GEN_MASK;
    if slot as usize >= SYNC_CAPACITY || gen == 0 {
        return None;
    }
    Some((slot, gen))
}

/// Send or receive request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `os_transport_send`
    Send,
    /// `os_transport_recv`
    Recv,
}

/// Everything a send task needs to post its work requests (raw URMA pointers, opaque here).
#[derive(Clone, Copy, Debug)]
pub struct SendCtx {
    /// `jetty_info->jfs` (preferred)
    pub jfs: *mut c_void,
    /// `jetty_info->jetty` (fallback)
    pub jetty: *mut c_void,
    /// `jetty_info->tjetty`
    pub tjetty: *mut c_void,
    /// `local_src->addr`
    pub src: u64,
    /// `local_src->tseg`
    pub src_tseg: *mut c_void,
    /// `remote_dst->addr`
    pub dst: u64,
    /// `remote_dst->tseg`
    pub dst_tseg: *mut c_void,
    /// total length
    pub len: u32,
    /// `enc(client_key)`
    pub enc_ck: u64,
}

impl SendCtx {
    const EMPTY: SendCtx = SendCtx {
        jfs: std::ptr::null_mut(),
        jetty: std::ptr::null_mut(),
        tjetty: std::ptr::null_mut(),
        src: 0,
        src_tseg: std::ptr::null_mut(),
        dst: 0,
        dst_tseg: std::ptr::null_mut(),
        len: 0,
        enc_ck: 0,
    };
}

// SAFETY: the pointers are application-owned URMA objects that the API contract keeps alive while
// the request is in flight; the library only passes them back to liburma.
unsafe impl Send for SendCtx {}

/// `notify_callback_t`.
pub type NotifyCb = unsafe extern "C" fn(user_data: *mut c_void) -> i32;

/// Per-request state (the legacy task_sync + task group + chunk array + pool context).
#[derive(Debug)]
pub struct Req {
    /// Slot holds a request.
    pub live: bool,
    /// Current generation of the slot (tokens carry it).
    pub gen: u32,
    /// Instance sequence number that owns the request.
    pub instance: u64,
    /// Send or receive.
    pub kind: Kind,
    /// Pool request id: `sk` for a send, raw `ck` for a recv.
    pub rid: u64,
    /// Number of tasks (= chunks).
    pub n: u8,
    /// Bound worker.
    pub worker: u32,
    /// Load counters of the bound worker (kept after the slot is freed, see `register`; only read
    /// for a live request).
    pub wshared: Option<Arc<WorkerShared>>,
    /// Send: index of the next task to run.
    pub next_send: u8,
    /// Recv: bit i set = chunk task i still queued.
    pub pending: u8,
    /// Tasks of this request executing now (a receive task on its worker, a send task on the thread
    /// that delivered its WRITE completion, D15); the slot is not freed while it is non-zero.
    pub running: u8,
    /// Tasks that succeeded.
    pub completed: u8,
    /// Tasks cancelled or failed.
    pub canceled: u8,
    /// `request_completed`: the waiter may return.
    pub done: bool,
    /// `request_canceled`
    pub cancel_flag: bool,
    /// `request_timedout`
    pub timedout: bool,
    /// A task, a callback or a completion failed.
    pub failed: bool,
    /// `release_requested`: the caller gave the sync back (wait or cancel returned / is returning).
    pub released: bool,
    /// A thread is inside `wait_and_free_sync*` on this sync.
    pub waiting: bool,
    /// That thread is blocked on the slot's condvar (only then does ending the request signal it).
    pub sleeping: bool,
    /// The request-table cleanup for this request was issued.
    pub cleaned: bool,
    /// First non-success URMA status.
    pub status: i32,
    /// Send parameters.
    pub send: SendCtx,
    /// Recv callback.
    pub cb: Option<NotifyCb>,
}

impl Req {
    const fn empty() -> Req {
        Req {
            live: false,
            gen: 1,
            instance: 0,
            kind: Kind::Send,
            rid: 0,
            n: 0,
            worker: 0,
            wshared: None,
            next_send: 0,
            pending: 0,
            running: 0,
            completed: 0,
            canceled: 0,
            done: false,
            cancel_flag: false,
            timedout: false,
            failed: false,
            released: false,
            waiting: false,
            sleeping: false,
            cleaned: false,
            status: 0,
            send: SendCtx::EMPTY,
            cb: None,
        }
    }

    /// Tasks neither run, running, nor cancelled.
    pub fn queued(&self) -> u8 {
        match self.kind {
            Kind::Send => self.n - self.next_send,
            Kind::Recv => self.pending.count_ones() as u8,
        }
    }

    /// Cancels every queued task; returns how many were removed.
    pub fn cancel_queued(&mut self) -> u8 {
        let q = self.queued();
        self.canceled += q;
        self.next_send = self.n;
        self.pending = 0;
        if let Some(w) = &self.wshared {
            w.tasks.fetch_sub(u32::from(q), Ordering::Relaxed);
        }
        q
    }

    /// Every task is completed or cancelled (the running one, if any, is not yet accounted).
    pub fn accounted(&self) -> bool {
        self.completed + self.canceled >= self.n
    }

    /// Nothing will ever touch the request again: all accounted and nothing running.
    pub fn terminal(&self) -> bool {
        self.accounted() && self.running == 0
    }

    /// Records the first non-success status.
    pub fn record_status(&mut self, st: i32) {
        if self.status == 0 {
            self.status = st;
        }
    }

    /// Marks the request failed: cancels what is queued and lets the waiter return.
    pub fn fail(&mut self) {
        self.failed = true;
        self.cancel_flag = true;
        self.cancel_queued();
        self.done = true;
    }

    /// Inner wait result when `done`: success criterion of §6.3.
    pub fn succeeded(&self) -> bool {
        self.completed == self.n && !self.cancel_flag && !self.timedout && !self.failed
    }
}

/// One table entry.
pub struct Slot {
    m: Mutex<Req>,
    /// Signalled whenever `done` may have changed.
    pub cv: Condvar,
    /// Recv: the `os_transport_user_data_t` copy handed to notify_callback for chunk i.
    pub ud: [AtomicU64; 7],
    /// `done` as last settled, readable without the lock by a waiter that waits briefly before
    /// sleeping (a hint only: the waiter decides under the lock).
    pub done_hint: AtomicBool,
}

impl Slot {
    /// Locks the request state (poisoning is ignored: state stays consistent across panics of user code).
    pub fn lock(&self) -> MutexGuard<'_, Req> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The process-wide table.
pub struct SyncTable {
    slots: Box<[Slot]>,
    /// Free slot indices (a stack: the slot freed last, still in cache, is reused first). Slots in
    /// use = capacity − length, so no separate counter is written per request.
    free: Mutex<Vec<u32>>,
}

static TABLE: Lazy<SyncTable> = Lazy::new(|| {
    let slots: Vec<Slot> = (0..SYNC_CAPACITY)
        .map(|_| Slot {
            m: Mutex::new(Req::empty()),
            cv: Condvar::new(),
            ud: Default::default(),
            done_hint: AtomicBool::new(false),
        })
        .collect();
    let free: Vec<u32> = (0..SYNC_CAPACITY as u32).rev().collect();
    let t = SyncTable {
        slots: slots.into_boxed_slice(),
        free: Mutex::new(free),
    };
    // Helgrind: the initialising thread's writes happen-before every `table()` caller (once_cell
    // orders them with an atomic flag Helgrind cannot see). No-op without the feature.
    crate::hb::before(std::ptr::addr_of!(TABLE) as usize);
    t
});

/// The table.
pub fn table() -> &'static SyncTable {
    let t = &*TABLE;
    crate::hb::after(std::ptr::addr_of!(TABLE) as usize);
    t
}

impl SyncTable {
    /// Slot `i`.
    pub fn slot(&self, i: u32) -> &Slot {
        &self.slots[i as usize]
    }

    /// All slots.
    pub fn slots(&self) -> impl Iterator<Item = (u32, &Slot)> {
        self.slots.iter().enumerate().map(|(i, s)| (i as u32, s))
    }

    /// Takes a free slot (its state is reset by the caller under the slot lock), or `None` when full.
    pub fn alloc(&self) -> Option<u32> {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Returns a slot that was allocated but never made live.
    pub fn unalloc(&self, idx: u32) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(idx);
    }

    /// Frees a live slot: bumps its generation (every outstanding token goes stale) and recycles it.
    pub fn free(&self, idx: u32, r: &mut Req) {
        debug_assert!(r.live);
        r.live = false;
        r.cb = None;
        r.gen = if r.gen >= GEN_MASK { 1 } else { r.gen + 1 };
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(idx);
    }

    /// Number of slots in use (test hook for leak checks).
    pub fn live(&self) -> usize {
        self.slots.len() - self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Fresh state for a new request in slot `r` (keeps the slot's generation).
pub fn reset(r: &mut Req) {
    let gen = r.gen;
    *r = Req::empty();
    r.gen = gen;
}

/// Number of live syncs in this process. Test-only hook (not a C export).
#[doc(hidden)]
pub fn live_syncs() -> usize {
    table().live()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_roundtrip_and_reject_garbage() {
        let t = token(5, 7);
        assert_eq!(untoken(t), Some((5, 7)));
        assert_eq!(
            untoken(token(SYNC_CAPACITY as u32 - 1, GEN_MASK)),
            Some((SYNC_CAPACITY as u32 - 1, GEN_MASK))
        );
        assert_eq!(untoken(0), None);
        assert_eq!(untoken(t + 1), None);
        assert_eq!(untoken(0x7fff_1234_5670), None);
        assert_eq!(untoken(token(5, 0)), None);
    }

    #[test]
    fn free_bumps_generation() {
        let tab = table();
        let i = tab.alloc().unwrap();
        let s = tab.slot(i);
        let mut r = s.lock();
        let g = r.gen;
        reset(&mut r);
        r.live = true;
        tab.free(i, &mut r);
        assert_ne!(r.gen, g);
        assert!(!r.live);
    }

    #[test]
    fn accounting() {
        let mut r = Req::empty();
        r.kind = Kind::Recv;
        r.n = 3;
        r.pending = 0b111;
        assert_eq!(r.queued(), 3);
        r.pending = 0b101;
        r.running = 1;
        assert_eq!(r.cancel_queued(), 2);
        assert!(!r.accounted());
        r.running = 0;
        r.completed = 1;
        assert!(r.terminal());
        assert!(!r.succeeded());
    }
}
