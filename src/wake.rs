//! Completion dispatch: `os_transport_wake_up_task` (§1.6, §4.3) and the worker side that runs
//! the matching task (§5.4), with D3 (failed completions fail their request) and D4 (early
//! receive completions are kept).

use crate::inject::{fault, Point};
use crate::instance::Instance;
use crate::log::{debug, error, warning};
use crate::pool::{EnqueueError, WorkerCtx};
use crate::recv::{expected_key, repost};
use crate::request::index::Early;
use crate::request::{end_task, table, Kind, ReqTable, ReqTables, Slot, SlotGuard};
use crate::send;
use crate::user_data::{dec, key_valid, UserData, SENTINEL_CHUNK_ID};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use urma_sys::flags::CR_FLAG_S_R;
use urma_sys::{
    urma_cr_t, URMA_CR_OPC_SEND_WITH_IMM, URMA_CR_SUCCESS, URMA_CR_WR_FLUSH_ERR_DONE,
    URMA_CR_WR_SUSPEND_DONE, URMA_FAIL, URMA_SUCCESS,
};

/// `os_transport_wake_up_task` with a validated instance. Inlined into the export, with the common
/// path of `deliver` and `dispatch`: one function per completion, the rare paths out of line.
#[inline(always)]
pub fn wake_up(inst: &Instance, cr: &urma_cr_t) -> i32 {
    let s_r = cr.flag.value_u8() & CR_FLAG_S_R != 0;
    let status = cr.status;
    if status == URMA_CR_WR_SUSPEND_DONE || status == URMA_CR_WR_FLUSH_ERR_DONE {
        // Made up by the provider, user_ctx is invalid (divergence D3): nothing to wake.
        debug!(
            2,
            "ignoring provider-generated completion, status {}", status
        );
        return -1;
    }
    if s_r {
        if cr.opcode != URMA_CR_OPC_SEND_WITH_IMM {
            error!("Unknown opcode {} on a receive completion", cr.opcode);
            return -1;
        }
        // SAFETY: imm_data is the valid member of the union for SEND_WITH_IMM completions.
        let imm = unsafe { cr.__bindgen_anon_1.imm_data };
        let mut ud = UserData::from_raw(imm);
        ud.rid = dec(ud.rid);
        repost(inst);
        if status != URMA_CR_SUCCESS {
            return fail_request(inst, ud.rid, Kind::Recv, status);
        }
        deliver(inst, ud.rid, ud.raw(), true)
    } else {
        let ud = UserData::from_raw(cr.user_ctx);
        if !key_valid(ud.rid) {
            // Every WR the library posts carries a request id of at most 40 bits: this is the
            // completion of the application's own work, whatever its chunk bits say.
            debug!(
                2,
                "completion {:#018x} is not a pipeline completion", cr.user_ctx
            );
            return -1;
        }
        if status != URMA_CR_SUCCESS {
            let r = fail_request(inst, ud.rid, Kind::Send, status);
            return if ud.chunk_id >= SENTINEL_CHUNK_ID {
                0
            } else {
                r
            };
        }
        if ud.chunk_id >= SENTINEL_CHUNK_ID {
            debug!(1, "ignore send_imm completion of request {:#x}", ud.rid);
            return 0;
        }
        deliver(inst, ud.rid, cr.user_ctx, false)
    }
}

trait FlagValue {
    fn value_u8(&self) -> u8;
}

impl FlagValue for urma_sys::urma_cr_flag_t {
    fn value_u8(&self) -> u8 {
        // SAFETY: every bit pattern of the 1-byte union is a valid u8.
        unsafe { self.value }
    }
}

/// Slot `s` locked, with its bound worker, if it holds generation `g` of the live, still-accepting
/// request `rid` of `inst`. Always inlined into `deliver` (once per completion).
#[inline(always)]
fn accepting(inst: &Instance, rid: u64, (s, g): (u32, u32)) -> Option<Found> {
    let tab = table();
    if s as usize >= tab.len() {
        return None;
    }
    let slot = tab.slot(s);
    let r = slot.guard();
    let w = r.accepting(g, rid, inst.seq)?;
    Some(Found { s, g, w, slot, r })
}

/// A live, accepting request found for a completion, its slot still locked (so that a send step
/// runs under the same lock that found it).
struct Found {
    s: u32,
    g: u32,
    w: u32,
    slot: &'static Slot,
    r: SlotGuard<'static>,
}

/// The request under `rid` has ended but its table entry is not cleaned up yet: its receive
/// completions are dropped like those of a tombstoned id. Workers, `fail_request` and cancel settle
/// and clean up under the table lock, so only a waiter that ended a request without success
/// (timeout, failure, cancellation) leaves such a window (between its `settle`, which may free the
/// slot, and its cleanup).
fn ended_pending_cleanup(t: &ReqTable, rid: u64) -> bool {
    let Some((s, g)) = t.get(rid) else {
        return false;
    };
    let r = table().slot(s).guard();
    !r.is(g) || (r.done() && !r.succeeded())
}

/// Hands a completion of the live request found (locked) on: a send step runs here (D15), a
/// receive chunk is queued to the worker (with the slot unlocked).
#[inline(always)]
fn dispatch(inst: &Instance, rid: u64, found: Found, ud: u64, recv_side: bool) -> i32 {
    let Found { s, g, w, slot, r } = found;
    if !recv_side {
        // D15: the send pipeline step (SEND_IMM k, WRITE k+1: URMA posts only, no user code)
        // runs here, on the delivering thread, instead of on the bound worker. A completion it
        // does not take (another kind of request, or not the WRITE the next step waits for:
        // the application's own work, a duplicate) did nothing: -1.
        return if send_step_locked(&inst.reqs, inst.seq, s, g, slot, r, ud) {
            0
        } else {
            -1
        };
    }
    drop(r);
    match inst.pool.enqueue(w as usize, s, g, ud) {
        Ok(()) => 0,
        Err(EnqueueError::Full) => {
            error!(
                "request {:#x}: worker {} queue full, completion dropped",
                rid, w
            );
            -1
        }
        Err(EnqueueError::Gone) => -1,
    }
}

/// Routes one successful completion of request `rid`. First through the lock-free hint; when there
/// is none or it names something else (another id, an ended request), through the locked table,
/// which also decides between dropping and keeping (D4) a completion.
#[inline(always)]
fn deliver(inst: &Instance, rid: u64, ud: u64, recv_side: bool) -> i32 {
    if let Some(found) = inst.reqs.hint(rid).and_then(|h| accepting(inst, rid, h)) {
        return dispatch(inst, rid, found, ud, recv_side);
    }
    deliver_locked(inst, rid, ud, recv_side)
}

/// [`deliver`] when the hint did not lead to the request: through the locked table.
#[cold]
#[inline(never)]
fn deliver_locked(inst: &Instance, rid: u64, ud: u64, recv_side: bool) -> i32 {
    let mut t = inst.reqs(rid);
    match t.get(rid).and_then(|e| accepting(inst, rid, e)) {
        Some(found) if !recv_side => {
            drop(t);
            dispatch(inst, rid, found, ud, false)
        }
        Some(found) => dispatch(inst, rid, found, ud, true),
        None if recv_side && !t.closing => {
            if t.is_tombstoned(rid) || ended_pending_cleanup(&t, rid) {
                debug!(
                    2,
                    "no context for request_id {:#x} (ended), completion dropped", rid
                );
                -1
            } else {
                if let Some(old) = t.stash(Early { rid, ud }) {
                    warning!(
                        "early-completion stash full: oldest kept completion (request_id {:#x}) dropped",
                        old.rid
                    );
                }
                debug!(
                    2,
                    "no context for request_id {:#x} yet, completion kept", rid
                );
                0
            }
        }
        None => {
            debug!(2, "no context for request_id {:#x}", rid);
            -1
        }
    }
}

/// D3: a completion with a non-success status fails its request, if `rid` names a live request
/// of `kind` (send-side completions belong to sends, receive-side ones to receives); -1 otherwise.
#[cold]
fn fail_request(inst: &Instance, rid: u64, kind: Kind, status: u32) -> i32 {
    let t = inst.reqs(rid);
    let Some((s, g)) = t.get(rid) else {
        debug!(
            2,
            "error completion (status {}) for unknown request {:#x}", status, rid
        );
        return -1;
    };
    let Some(mut r) = t.into_locked(s, g) else {
        return -1;
    };
    if r.done() || r.kind() != kind {
        return -1;
    }
    error!(
        "request {:#x}: completion with status {}, request failed",
        rid, status
    );
    r.record_status(URMA_FAIL);
    r.fail();
    0
}

/// One step of the send pipeline: if `ud` is the completion of the WRITE that the next task of the
/// send in `idx` waits for, runs that task (SEND_IMM k, then WRITE k+1) on the calling thread and
/// accounts it. Called by `os_transport_wake_up_task` for send completions (D15). Returns
/// whether the completion was taken (the task ran).
fn send_step(reqs: &ReqTables, instance: u64, idx: u32, gen: u32, ud: u64) -> bool {
    let slot = table().slot(idx);
    send_step_locked(reqs, instance, idx, gen, slot, slot.guard(), ud)
}

/// [`send_step`] with slot `idx` (`slot`) already locked (`r`).
#[inline(always)]
fn send_step_locked(
    reqs: &ReqTables,
    instance: u64,
    idx: u32,
    gen: u32,
    slot: &'static Slot,
    mut r: SlotGuard<'static>,
    ud: u64,
) -> bool {
    if !r.is(gen) || r.instance() != instance || r.kind() != Kind::Send {
        debug!(2, "wake-up for a finished request dropped");
        return false;
    }
    let Some(k) = r.next_send() else {
        warning!(
            "Wakeup received without matching queued task (request {:#x})",
            r.rid()
        );
        return false;
    };
    // Task k is triggered by the completion of WRITE chunk k only (§3.2). A duplicated,
    // replayed or forged completion naming another chunk must not run task k early: its
    // SEND_IMM would tell the peer that chunk k landed before its WRITE completed.
    let write_k = UserData::new(r.rid(), u8::from(k + 1 == r.tasks()), k).raw();
    if ud != write_k {
        warning!(
            "request {:#x}: completion {:#018x} does not match the WRITE of chunk {}, discarded",
            r.rid(),
            ud,
            k
        );
        return false;
    }
    let task = r.begin_send_task();
    drop(r);
    let st = send::run_task(&task.ctx, task.sk, task.n, task.k);
    if st == URMA_SUCCESS {
        debug!(2, "request {:#x}: task {} completed", task.sk, task.k);
    }
    end_task(reqs, idx, slot, gen, (st != URMA_SUCCESS).then_some(st));
    true
}

/// Worker handler for one wake-up.
pub fn on_wake(ctx: &WorkerCtx, reqs: &ReqTables, idx: u32, gen: u32, ud: u64) {
    // Log lines of this task reach the application's log callback only once no lock is held: before
    // the notify_callback runs, and when the task ends.
    let held = crate::log::hold();
    let slot = table().slot(idx);
    let mut r = slot.guard();
    if !r.is(gen) || r.instance() != ctx.id.instance {
        debug!(2, "wake-up for a finished request dropped");
        return;
    }
    match r.kind() {
        Kind::Send => {
            drop(r);
            let _ = send_step(reqs, ctx.id.instance, idx, gen, ud);
        }
        Kind::Recv => {
            let i = UserData::from_raw(ud).chunk_id;
            let (ck, n) = (r.rid(), r.tasks());
            if !r.chunk_queued(i) || ud != expected_key(ck, n, i) {
                warning!("No exact matched task for request_id {:#x}, user data {:#018x}: wake-up discarded", ck, ud);
                return;
            }
            let cb = r.begin_recv_task(i);
            drop(r);
            ctx.shared.tasks.fetch_sub(1, Ordering::Relaxed);
            ctx.shared.busy.store(true, Ordering::Relaxed);
            slot.ud.store(ud, Ordering::Relaxed);
            let arg: *mut c_void = slot.ud.as_ptr().cast();
            drop(held);
            let ret = match (fault(Point::NotifyCallback), cb) {
                // An injected error stands for the callback's result (an injected 0 fails too).
                (Some(v), _) => {
                    if v == 0 {
                        -1
                    } else {
                        v
                    }
                }
                // SAFETY: cb is the application's notify_callback; arg points to this slot's 8-byte
                // copy, which stays valid and unchanged at least until the callback returns (the
                // slot cannot be freed while `running` is set, and only this worker, one task at a
                // time, runs the request's receive tasks and writes the copy).
                (None, Some(f)) => unsafe { f(arg) },
                (None, None) => -1,
            };
            ctx.shared.busy.store(false, Ordering::Relaxed);
            let _held = crate::log::hold();
            if ret == 0 {
                debug!(2, "request {:#x}: chunk {} completed", ck, i);
            } else {
                warning!(
                    "request {:#x}: notify_callback returned {} for chunk {}",
                    ck,
                    ret,
                    i
                );
            }
            end_task(reqs, idx, slot, gen, (ret != 0).then_some(0));
        }
    }
}
