//! The state of one request (the legacy task_sync + task group + chunk array + pool context), kept
//! in its sync slot, and the transitions it goes through. Fields and transitions are private to
//! the `request` module: the other modules read the state through accessors and change it through
//! the two guards of the slot lock, [`super::Locked`] (every change that can end a request, settled
//! when the guard is dropped) and [`super::SlotGuard`] (starting a task, a waiter's own flags).

use crate::abi::notify_callback_t;
use crate::pool::{WorkerId, WorkerShared};
use crate::urma::{Buffer, SendQueue, TargetJetty};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Send or receive request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `os_transport_send`
    Send,
    /// `os_transport_recv`
    Recv,
}

/// Everything a send task needs to post its work requests.
#[derive(Clone, Copy, Debug)]
pub struct SendCtx {
    /// `jetty_info->jfs`, else `->jetty` (`None`: neither, every post fails)
    pub queue: Option<SendQueue>,
    /// `jetty_info->tjetty`
    pub tjetty: Option<TargetJetty>,
    /// `local_src`
    pub src: Buffer,
    /// `remote_dst`
    pub dst: Buffer,
    /// total length
    pub len: u32,
    /// `enc(client_key)`
    pub enc_ck: u64,
}

impl SendCtx {
    const EMPTY: SendCtx = SendCtx {
        queue: None,
        tjetty: None,
        src: Buffer::NONE,
        dst: Buffer::NONE,
        len: 0,
        enc_ck: 0,
    };
}

/// What a new request does: the parameters of its tasks.
#[derive(Clone, Copy, Debug)]
pub enum Job {
    /// A send: its work requests.
    Send(SendCtx),
    /// A receive: the application's notify_callback, run once per chunk.
    Recv(notify_callback_t),
}

/// A send task that [`Req::begin_send_task`] started.
#[derive(Clone, Copy, Debug)]
pub struct SendTask {
    /// Work requests of the send.
    pub ctx: SendCtx,
    /// Request id (server key).
    pub sk: u64,
    /// Number of tasks.
    pub n: u8,
    /// Index of the task.
    pub k: u8,
}

/// Per-request state.
#[derive(Debug)]
pub struct Req {
    /// Slot holds a request.
    pub(super) live: bool,
    /// Current generation of the slot (tokens carry it).
    pub(super) gen: u32,
    /// Instance sequence number that owns the request.
    pub(super) instance: u64,
    /// Send or receive.
    pub(super) kind: Kind,
    /// Pool request id: `sk` for a send, raw `ck` for a recv.
    pub(super) rid: u64,
    /// Number of tasks (= chunks).
    pub(super) n: u8,
    /// Bound worker.
    pub(super) worker: u32,
    /// Load counters of the bound worker (kept after the slot is freed, see `register`; only read
    /// for a live request).
    pub(super) wshared: Option<Arc<WorkerShared>>,
    /// Send: index of the next task to run.
    pub(super) next_send: u8,
    /// Recv: bit i set = chunk task i still queued.
    pub(super) pending: u8,
    /// Tasks of this request executing now (a receive task on its worker, a send task on the thread
    /// that delivered its WRITE completion, D15); the slot is not freed while it is non-zero.
    pub(super) running: u8,
    /// Tasks that succeeded.
    pub(super) completed: u8,
    /// Tasks cancelled or failed.
    pub(super) canceled: u8,
    /// `request_completed`: the waiter may return.
    pub(super) done: bool,
    /// `request_canceled`
    pub(super) cancel_flag: bool,
    /// `request_timedout`
    pub(super) timedout: bool,
    /// A task, a callback or a completion failed.
    pub(super) failed: bool,
    /// `release_requested`: the caller gave the sync back (wait or cancel returned / is returning).
    pub(super) released: bool,
    /// A thread is inside `wait_and_free_sync*` on this sync.
    pub(super) waiting: bool,
    /// That thread is blocked on the slot's condvar (only then does ending the request signal it).
    pub(super) sleeping: bool,
    /// The request-table cleanup for this request was issued.
    pub(super) cleaned: bool,
    /// Receive registered but not armed yet (`request::arm`): its completions are kept in the
    /// stash meanwhile.
    pub(super) arming: bool,
    /// The request counts against the in-flight limit (from registration until it is finished).
    pub(super) counted: bool,
    /// First non-success URMA status.
    pub(super) status: i32,
    /// Send parameters.
    pub(super) send: SendCtx,
    /// Recv callback.
    pub(super) cb: notify_callback_t,
}

impl Req {
    /// A slot that never held a request.
    pub(super) const fn empty() -> Req {
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
            arming: false,
            counted: false,
            status: 0,
            send: SendCtx::EMPTY,
            cb: None,
        }
    }

    /// Fresh state for a new request (keeps the slot's generation).
    pub(super) fn reset(&mut self) {
        let gen = self.gen;
        *self = Req::empty();
        self.gen = gen;
    }

    /// Makes the (reset) slot hold request `rid` of `instance`, bound to `worker`.
    pub(super) fn start(&mut self, instance: u64, rid: u64, n: u8, worker: u32, job: Job) {
        self.live = true;
        self.counted = true;
        self.instance = instance;
        self.rid = rid;
        self.n = n;
        self.worker = worker;
        match job {
            Job::Send(ctx) => {
                self.kind = Kind::Send;
                self.send = ctx;
            }
            Job::Recv(cb) => {
                self.kind = Kind::Recv;
                self.pending = ((1u16 << n) - 1) as u8;
                self.cb = cb;
                self.arming = true;
            }
        }
    }

    // ---- reads ----

    /// The slot holds generation `gen` of a request.
    #[inline]
    pub fn is(&self, gen: u32) -> bool {
        self.live && self.gen == gen
    }

    /// Request id.
    #[inline]
    pub fn rid(&self) -> u64 {
        self.rid
    }

    /// Send or receive.
    #[inline]
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Sequence number of the owning instance.
    #[inline]
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// The waiter may return.
    #[inline]
    pub fn done(&self) -> bool {
        self.done
    }

    /// First non-success URMA status (0 if none).
    #[inline]
    pub fn status(&self) -> i32 {
        self.status
    }

    /// Generation `gen` of a live request of `instance` that still accepts completions (not done,
    /// armed); its bound worker then.
    #[inline(always)]
    pub fn accepting(&self, gen: u32, rid: u64, instance: u64) -> Option<u32> {
        (self.live
            && self.gen == gen
            && self.rid == rid
            && self.instance == instance
            && !self.done
            && !self.arming)
            .then_some(self.worker)
    }

    /// The sync of generation `gen` may still be waited for or cancelled by the caller.
    #[inline]
    pub fn usable(&self, gen: u32, instance: u64) -> bool {
        self.is(gen) && self.instance == instance && !self.released && !self.waiting
    }

    /// The request is bound to worker `w` (a wait on it from `w` would deadlock).
    pub fn bound_to(&self, w: WorkerId) -> bool {
        w.instance == self.instance && w.index == self.worker
    }

    /// Tasks neither run, running, nor cancelled.
    pub fn queued(&self) -> u8 {
        match self.kind {
            Kind::Send => self.n - self.next_send,
            Kind::Recv => self.pending.count_ones() as u8,
        }
    }

    /// Every task is completed or cancelled (the running one, if any, is not yet accounted).
    pub fn accounted(&self) -> bool {
        self.completed + self.canceled >= self.n
    }

    /// Nothing will ever touch the request again: all accounted and nothing running.
    pub fn terminal(&self) -> bool {
        self.accounted() && self.running == 0
    }

    /// Inner wait result when `done`: success criterion of §6.3.
    pub fn succeeded(&self) -> bool {
        self.completed == self.n && !self.cancel_flag && !self.timedout && !self.failed
    }

    /// Ending the running task could end the request (it is the last one running and the last
    /// one to account).
    #[inline]
    pub fn may_end(&self) -> bool {
        self.running <= 1 && self.completed + 1 + self.canceled >= self.n
    }

    /// Send: the index of the next task, if one is left.
    #[inline]
    pub fn next_send(&self) -> Option<u8> {
        (self.next_send < self.n).then_some(self.next_send)
    }

    /// Number of tasks.
    #[inline]
    pub fn tasks(&self) -> u8 {
        self.n
    }

    /// Recv: chunk task `i` is still queued.
    #[inline]
    pub fn chunk_queued(&self, i: u8) -> bool {
        i < self.n && self.pending & (1 << i) != 0
    }

    // ---- transitions ----

    /// Records the first non-success status.
    pub(super) fn record_status(&mut self, st: i32) {
        if self.status == 0 {
            self.status = st;
        }
    }

    /// Cancels every queued task; returns how many were removed.
    fn cancel_queued(&mut self) -> u8 {
        let q = self.queued();
        self.canceled += q;
        self.next_send = self.n;
        self.pending = 0;
        match &self.wshared {
            Some(w) if self.kind == Kind::Recv => {
                w.tasks.fetch_sub(u32::from(q), Ordering::Relaxed);
            }
            _ => {}
        }
        q
    }

    /// Cancels what is queued (cancel, or a wait that ended without success); returns how many
    /// tasks were removed.
    pub(super) fn cancel(&mut self) -> u8 {
        let removed = self.cancel_queued();
        self.cancel_flag = true;
        removed
    }

    /// As [`Req::cancel`], for a wait that timed out.
    pub(super) fn time_out(&mut self) -> u8 {
        let removed = self.cancel();
        self.timedout = true;
        removed
    }

    /// Marks the request failed: cancels what is queued and lets the waiter return.
    pub(super) fn fail(&mut self) {
        self.failed = true;
        self.cancel_flag = true;
        self.cancel_queued();
        self.done = true;
    }

    /// The caller gave the sync back (its wait returns, or it was cancelled): the slot is freed
    /// once the request is terminal.
    pub(super) fn release(&mut self) {
        self.waiting = false;
        self.released = true;
    }

    /// A thread starts waiting on the sync (it stays allocated while it does).
    pub(super) fn begin_wait(&mut self) {
        self.waiting = true;
    }

    /// The waiter blocks on (`true`) or left (`false`) the slot's condvar.
    #[inline]
    pub(super) fn set_sleeping(&mut self, sleeping: bool) {
        self.sleeping = sleeping;
    }

    /// Send: starts the next task (see [`Req::next_send`]) on the calling thread.
    pub(super) fn begin_send_task(&mut self) -> SendTask {
        let k = self.next_send;
        self.next_send += 1;
        self.running += 1;
        SendTask {
            ctx: self.send,
            sk: self.rid,
            n: self.n,
            k,
        }
    }

    /// Recv: starts chunk task `i` (see [`Req::chunk_queued`]); returns the callback to run.
    pub(super) fn begin_recv_task(&mut self, i: u8) -> notify_callback_t {
        self.pending &= !(1 << i);
        self.running += 1;
        self.cb
    }

    /// Accounts the end of a running task: success, or failure with `status` recorded (when
    /// non-zero) and the rest of the request failed.
    pub(super) fn end_task(&mut self, failed: Option<i32>) {
        self.running = self.running.saturating_sub(1);
        match failed {
            None => self.completed += 1,
            Some(st) => {
                if st != 0 {
                    self.record_status(st);
                }
                self.canceled += 1;
                self.fail();
            }
        }
    }

    /// Destroy: completes the request as cancelled, whatever runs (its tasks are abandoned).
    pub(super) fn sweep_on_destroy(&mut self) {
        self.cancel();
        self.running = 0;
        self.done = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
