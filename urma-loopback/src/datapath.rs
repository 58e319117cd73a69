//! Work-request execution.
//!
//! A send post validates each WR in the caller's thread (handles, sizes, post-time knobs) and
//! queues it to the DMA engine ([`crate::engine`]), one batch per post call; the engine thread
//! executes it (bounds/access/token checks, copy, recv consumption) and generates its CRs, in
//! post order. A recv post that meets a parked message queues the late delivery to the engine
//! too. A completion-synchronous post (the default) runs its WRs itself instead, under its send
//! queue's runner lock ([`Engine::run_in_lane`], see `dispatch`); only asynchronous posts leave
//! them to the engine thread. No lock but that runner lock is held while payload bytes are
//! copied: the segments involved are pinned by `Arc`s taken during validation.
//!
//! What a WR of each opcode carries and does is its row of the opcode table
//! (`urma_datapath::opcode`): validation reads the row's layout and `needs_tjetty`, execution
//! matches on its class and moves data between the row's local and remote lists.
//!
//! Error model (documented in docs/loopback.md):
//! * post-time `URMA_EINVAL` (and `*bad_wr`): unknown/NULL handles in the WR (tjetty, sge.tseg of a
//!   non-empty SGE), too many SGEs, NULL SGE array with `num_sge > 0`, an opcode without a row,
//!   missing tjetty for the rows that need one (SEND/SEND_IMM/WRITE_IMM);
//! * error CRs (always generated, whatever `complete_enable` says): bounds/access/token failures,
//!   receiver not ready, target deleted, unsupported operations, injected failures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, Mutex};
use std::time::{Duration, Instant};

use urma_datapath::opcode::{self, Class, Layout};
use urma_datapath::trace_line::{self, Event};
use urma_datapath::{Q_RECV, Q_SEND};
use urma_sys as u;

pub use crate::complete::emit_cr;
use crate::complete::{check_sges, finish_send, recv_cr, recv_end, total, RecvEnd};
use crate::engine::{Batch, Engine};
use crate::faults::PLANE;
use crate::knobs;
use crate::objects::{Parked, Plan, RecvPost, RecvQ, RecvWr, Sge, SgeList};
use crate::queues::Jfc;
use crate::registry::{get_any_seg, get_tjetty_ref, AnySeg, SendQ};
use crate::stats::COUNTERS;
use crate::trace;
use crate::util::lock;

/// Reads and handle-checks an SGE list. `Err(())` means post-time EINVAL.
///
/// # Safety
/// `sg` must describe `num_sge` readable `urma_sge_t` entries (or have `num_sge == 0`).
#[allow(clippy::result_unit_err)]
pub unsafe fn read_sg(sg: &u::urma_sg_t, max_sge: u32) -> Result<SgeList, ()> {
    let n = sg.num_sge;
    if n == 0 {
        return Ok(SgeList::default());
    }
    if n > max_sge || sg.sge.is_null() {
        return Err(());
    }
    let mut out = SgeList::with_len(n as usize);
    for i in 0..n as usize {
        // SAFETY: caller guarantees sg.sge points to num_sge entries; i < num_sge.
        let e = unsafe { &*sg.sge.add(i) };
        let seg = if e.tseg.is_null() {
            None
        } else {
            Some(get_any_seg(e.tseg).ok_or(())?)
        };
        if e.len > 0 && seg.is_none() {
            return Err(());
        }
        out.push(Sge {
            addr: e.addr,
            len: e.len,
            seg,
        });
    }
    Ok(out)
}

/// An SGE list as the trace shows it: segment name and offset from its base.
fn trace_sges(v: &[Sge]) -> Vec<trace_line::Sge<'_>> {
    v.iter()
        .map(|e| {
            let seg = e.seg.as_ref().map(|s| s.seg());
            trace_line::Sge {
                seg: seg.map(|s| s.name.as_str().into()),
                off: seg.map(|s| e.addr as i128 - s.va as i128),
                len: e.len,
            }
        })
        .collect()
}

/// A send WR validated by a post call, run by the posting thread (in its send queue's lane) or
/// by the DMA engine. The queue is the post call's: one for every WR of a chain.
struct SendWr {
    plan: Plan,
    injected: Option<u32>,
}

/// A unit of work for the DMA engine.
enum Job {
    /// A validated send WR of queue `sq`: traced (`post_send`) and executed by the engine.
    Send { sq: Arc<SendQ>, wr: SendWr },
    /// A parked message matched by a recv post: delivered late by the engine.
    Deliver { m: Box<Parked>, recv: RecvWr },
}

/// Runs a job of the DMA engine: under the runner lock of the send queue it belongs to, so it
/// never interleaves with a completion-synchronous post running WRs of that queue on its own
/// thread.
fn run_job(j: Job) {
    match j {
        Job::Send { sq, wr } => {
            let _q = lock(&sq.order.lane);
            run_send(&sq, &wr);
        }
        Job::Deliver { m, recv } => {
            let sq = Arc::clone(&m.sq);
            let _q = lock(&sq.order.lane);
            deliver_parked(*m, recv);
        }
    }
}

/// Runs a send WR of `sq`, whose runner lock (`Order::lane`) the caller holds.
fn run_send(sq: &Arc<SendQ>, wr: &SendWr) {
    trace_post(sq, &wr.plan, u::URMA_SUCCESS);
    execute(sq, &wr.plan, wr.injected);
}

static ENGINE: Engine<Job> = Engine::new("urma-lb-dma", run_job);

/// Waits until the DMA engine has executed every WR posted (and every late delivery queued)
/// before this call, with their CRs generated. Called at the entry of the exports of the
/// completion path (polls, recv posts, JFC waits, rearm, ack). A post that runs its WRs on its
/// own thread ([`Engine::run_in_lane`]) has generated its CRs before it returns, so these need
/// not wait for such posts that other threads are making at the same time.
pub fn settle() {
    if combining() {
        ENGINE.settle_running();
    } else {
        ENGINE.settle();
    }
}

/// [`settle`], then waits until every post that runs its WRs on its own thread
/// ([`Engine::run_in_lane`]) and had started doing so has finished. Called at the entry of
/// every other export but the send posts (deletes, reset, counters, trace, knobs), so that
/// nothing a post started outlives them.
pub fn quiesce() {
    settle();
    ENGINE.wait_lanes();
}

/// Whether posts and settles run the engine's queued jobs on the calling thread (flat
/// combining, [`Engine::submit_and_run`]) instead of handing them to the engine thread: with
/// completion-synchronous posts, in copy and in no-copy mode. Such a post waits for its WRs
/// anyway, so a hand-off would only add the engine's wake-up and the poster's to every post
/// and, in copy mode, keep a second CPU waiting while one copies (docs/loopback.md, "Data
/// path").
fn combining() -> bool {
    !knobs::ASYNC_POST.load(Ordering::Relaxed)
}

/// Runs or queues the WRs a post call collected, and empties `batch`. In combining mode with
/// every WR local, on the calling thread holding `sq`'s runner lock ([`Engine::run_in_lane`]):
/// posts to different queues run at the same time, as on the synchronous provider, after
/// whatever was queued on the engine before them (a late delivery, an asynchronous post made
/// before the mode changed). Asynchronous posts go to the engine thread through its FIFO and
/// return at once, unless `wait` (the WRs before a rejected one must have run when the post
/// returns).
fn dispatch(sq: &Arc<SendQ>, batch: &mut Batch<SendWr>, local: bool, wait: bool) {
    // The engine's jobs name their queue (one reference each); a lane runs against the caller's.
    let job = |wr| Job::Send {
        sq: Arc::clone(sq),
        wr,
    };
    if combining() {
        if local {
            ENGINE.run_in_lane(&sq.order.lane, batch, |wr| run_send(sq, wr));
            *batch = Batch::new();
        } else {
            // A WR for another process: through the engine's FIFO, run on this thread.
            ENGINE.submit_and_run(std::mem::take(batch).map(job));
        }
    } else {
        ENGINE.submit(std::mem::take(batch).map(job));
        if wait {
            ENGINE.settle();
        }
    }
}

/// Posts a chain of send WRs (`urma_post_jfs_wr` / `urma_post_jetty_send_wr`): the valid WRs
/// before the first failing one are queued to the DMA engine in one batch.
///
/// # Safety
/// `wr` must be a valid WR chain; `bad_wr` writable.
pub unsafe fn post_send_chain(
    sq: &Arc<SendQ>,
    mut wr: *mut u::urma_jfs_wr_t,
    bad_wr: *mut *mut u::urma_jfs_wr_t,
) -> u::urma_status_t {
    expire_parked();
    let mut batch = Batch::new();
    // Every WR so far stays in this process (so they may run on this thread, see `dispatch`).
    let mut local = true;
    while !wr.is_null() {
        // SAFETY: wr is non-NULL and part of the caller's chain.
        let w = unsafe { &*wr };
        let r = post_one_send(sq, w, &mut batch, &mut local);
        if r != u::URMA_SUCCESS {
            COUNTERS.post_errors.fetch_add(1, Ordering::Relaxed);
            // SAFETY: bad_wr checked non-NULL by the caller.
            unsafe { *bad_wr = wr };
            return r;
        }
        wr = w.next;
    }
    dispatch(sq, &mut batch, local, false);
    u::URMA_SUCCESS
}

/// Validates one send WR and adds it to `batch` (`local` turns false for a WR that goes to
/// another process). A rejected WR is traced after every WR posted before it has run.
fn post_one_send(
    sq: &Arc<SendQ>,
    w: &u::urma_jfs_wr_t,
    batch: &mut Batch<SendWr>,
    local: &mut bool,
) -> u::urma_status_t {
    let seq = PLANE.next_send();
    // SAFETY: flag is a plain u32 union.
    let wflags = unsafe { w.flag.value };
    let plan = match validate(sq, w, wflags) {
        Ok(p) => p,
        Err(()) => {
            dispatch(sq, batch, *local, true);
            trace_post_raw(sq, w, wflags, u::URMA_EINVAL);
            return u::URMA_EINVAL;
        }
    };
    if let Some(st) = PLANE.take_fail_post(Q_SEND, seq) {
        dispatch(sq, batch, *local, true);
        trace_post(sq, &plan, st);
        return st;
    }
    COUNTERS.send_wrs.fetch_add(1, Ordering::Relaxed);
    let injected = PLANE.take_fail_cr(seq);
    *local &= crate::xproc::route(&plan).is_none();
    batch.push(SendWr { plan, injected });
    u::URMA_SUCCESS
}

fn validate(sq: &SendQ, w: &u::urma_jfs_wr_t, wflags: u32) -> Result<Plan, ()> {
    let op = opcode::info(w.opcode).ok_or(())?;
    let tjetty = if w.tjetty.is_null() {
        None
    } else {
        Some(get_tjetty_ref(w.tjetty).ok_or(())?)
    };
    let mut plan = Plan {
        op,
        flags: wflags,
        user_ctx: w.user_ctx,
        imm: 0,
        tjetty,
        src: SgeList::default(),
        dst: SgeList::default(),
    };
    match op.layout {
        Layout::Rw => {
            // SAFETY: rw is the active union member for this layout (the caller's contract).
            let rw = unsafe { &w.__bindgen_anon_1.rw };
            // SAFETY: the sg lists come from the caller's WR.
            plan.src = unsafe { read_sg(&rw.src, sq.max_sge)? };
            // SAFETY: as above.
            plan.dst = unsafe { read_sg(&rw.dst, sq.max_sge)? };
            plan.imm = rw.notify_data;
        }
        Layout::Send => {
            // SAFETY: send is the active union member for this layout.
            let sd = unsafe { &w.__bindgen_anon_1.send };
            // SAFETY: the sg list comes from the caller's WR.
            plan.src = unsafe { read_sg(&sd.src, sq.max_sge)? };
            plan.imm = if op.imm { sd.imm_data } else { 0 };
        }
        Layout::None => {}
    }
    if op.needs_tjetty && plan.tjetty.is_none() {
        return Err(());
    }
    Ok(plan)
}

fn trace_post(sq: &SendQ, p: &Plan, ret: i32) {
    if !trace::enabled() {
        return;
    }
    let (src, dst) = (trace_sges(&p.src), trace_sges(&p.dst));
    trace::event(&Event::PostSend {
        q: &sq.name,
        opcode: p.op.opcode,
        flags: p.flags,
        user_ctx: p.user_ctx,
        target: p.tjetty.as_ref().map(|t| t.name.as_str()),
        imm: p.op.imm.then_some(p.imm),
        src: &src,
        dst: &dst,
        ret,
    });
}

/// The `post_send` line of a WR refused before it was read: its opcode, flags and user_ctx.
fn trace_post_raw(sq: &SendQ, w: &u::urma_jfs_wr_t, wflags: u32, ret: i32) {
    trace::event(&Event::PostSend {
        q: &sq.name,
        opcode: w.opcode,
        flags: wflags,
        user_ctx: w.user_ctx,
        target: None,
        imm: None,
        src: &[],
        dst: &[],
        ret,
    });
}

/// Copies `n` bytes from the `src` SGE list to the `dst` SGE list (memmove semantics per piece).
fn sg_copy(src: &[Sge], dst: &[Sge], n: u64) {
    COUNTERS.bytes_transferred.fetch_add(n, Ordering::Relaxed);
    if knobs::NOCOPY.load(Ordering::Relaxed) || n == 0 {
        return;
    }
    let (mut si, mut so, mut di, mut dof) = (0usize, 0u64, 0usize, 0u64);
    let mut left = n;
    while left > 0 && si < src.len() && di < dst.len() {
        let sa = src[si].len as u64 - so;
        let da = dst[di].len as u64 - dof;
        let k = sa.min(da).min(left);
        if k > 0 {
            // SAFETY: both ranges were bounds-checked against live registered segments
            // (check_sges), which pin the application's memory registration; ptr::copy allows
            // overlap (loopback writes may target the same buffer).
            unsafe {
                std::ptr::copy(
                    (src[si].addr + so) as usize as *const u8,
                    (dst[di].addr + dof) as usize as *mut u8,
                    k as usize,
                )
            };
        }
        so += k;
        dof += k;
        left -= k;
        if so == src[si].len as u64 {
            si += 1;
            so = 0;
        }
        if dof == dst[di].len as u64 {
            di += 1;
            dof = 0;
        }
    }
    COUNTERS.bytes_copied.fetch_add(n - left, Ordering::Relaxed);
}

fn execute(sq: &Arc<SendQ>, p: &Plan, injected: Option<u32>) {
    let (status, bytes) = match (injected, p.op.class) {
        (Some(st), _) => (st, 0),
        (None, Class::Unsupported) => (u::URMA_CR_UNSUPPORTED_OPCODE_ERR, 0),
        (None, Class::Nop) => (u::URMA_CR_SUCCESS, 0),
        (None, Class::Write | Class::WriteImm | Class::Read | Class::Send) => {
            let Some(done) = transfer(sq, p) else {
                return; // completes later: at another process, or parked for a recv WR
            };
            done
        }
    };
    if sq.order.is_idle() {
        finish_send(sq, p, status, bytes);
    } else {
        // WRs of this queue are outstanding at another process: this CR comes after theirs.
        let (sq2, p2) = (Arc::clone(sq), p.clone());
        sq.order
            .local(move || finish_send(&sq2, &p2, status, bytes));
    }
}

/// Runs a WR that moves data (the source is always `src`, the destination `dst` or, two-sided,
/// the target's recv WR): checks the local list, then the remote one with the access its opcode
/// needs and the lengths, then routes it to another process or moves the data here. The send
/// CR's status and length, or `None` when the CR comes later (the WR went to another process,
/// or waits parked for a recv WR).
fn transfer(sq: &Arc<SendQ>, p: &Plan) -> Option<(u32, u32)> {
    let n = total(&p.src);
    let (local, remote) = p.op.split(&p.src, &p.dst);
    let status = if !check_sges(local, false, 0) {
        u::URMA_CR_LOC_ACCESS_ERR
    } else if remote.is_some_and(|r| !check_sges(r, true, p.op.remote_access)) {
        u::URMA_CR_REM_ACCESS_ABORT_ERR
    } else if remote.is_some() && n > total(&p.dst) {
        u::URMA_CR_LOC_LEN_ERR
    } else if let Some(r) = crate::xproc::route(p) {
        // A target in another process: its owner completes the WR.
        match r {
            Ok(peer) => {
                crate::xproc::request(sq, p, &peer, n);
                return None;
            }
            Err(st) => st,
        }
    } else if p.op.two_sided() {
        return two_sided(sq, p, n).map(|st| (st, n as u32));
    } else {
        sg_copy(&p.src, &p.dst, n);
        return Some((u::URMA_CR_SUCCESS, n as u32));
    };
    Some((status, 0))
}

/// Moves the payload of a two-sided WR into `recv` (SEND/SEND_IMM) or into `rw.dst`
/// (WRITE_IMM) and returns the receive status.
fn move_data(p: &Plan, recv: &RecvWr, n: u64) -> u32 {
    if p.op.class == Class::WriteImm {
        sg_copy(&p.src, &p.dst, n);
        u::URMA_CR_SUCCESS
    } else if !check_sges(&recv.sges, false, 0) {
        u::URMA_CR_LOC_ACCESS_ERR
    } else if n > total(&recv.sges) {
        u::URMA_CR_LOC_LEN_ERR
    } else {
        sg_copy(&p.src, &recv.sges, n);
        u::URMA_CR_SUCCESS
    }
}

/// Messages currently parked on any receive queue (fast path of [`expire_parked`]).
static PARKED_TOTAL: AtomicU64 = AtomicU64::new(0);
/// Receive queues that (may) hold parked messages. Lock order: `PARKED_QS` → `RecvQ::q`;
/// nobody takes `PARKED_QS` while holding a `RecvQ::q`.
static PARKED_QS: Mutex<Vec<Arc<RecvQ>>, { rank::PARKED_QUEUES }> = Mutex::new(Vec::new());

/// Whether messages are parked anywhere (used to bound blocking waits).
pub fn any_parked() -> bool {
    PARKED_TOTAL.load(Ordering::Acquire) > 0
}

/// The parking as a waiting JFCE needs it ([`crate::queues::Jfce::wait`]).
pub const RNR_HOOKS: crate::queues::RnrHooks = crate::queues::RnrHooks {
    expire: expire_parked,
    active: || any_parked() || knobs::rnr_timeout_ms() > 0,
};

/// Fails every parked message whose deadline has passed: the sender gets its
/// `URMA_CR_RNR_RETRY_CNT_EXC_ERR` CR now (no recv CR). Called at the start of every post and
/// poll and from `urma_wait_jfc`, so no timer thread is needed.
pub fn expire_parked() {
    if !any_parked() {
        return;
    }
    let now = Instant::now();
    let mut expired = Vec::new();
    {
        let mut qs = lock(&PARKED_QS);
        qs.retain(|rq| {
            let mut st = lock(&rq.q);
            let before = st.parked.len();
            let (due, keep): (Vec<Parked>, Vec<Parked>) =
                st.parked.drain(..).partition(|m| m.deadline <= now);
            st.parked = keep.into();
            PARKED_TOTAL.fetch_sub((before - st.parked.len()) as u64, Ordering::AcqRel);
            expired.extend(due);
            !st.parked.is_empty()
        });
    }
    for m in expired {
        COUNTERS.rnr_errors.fetch_add(1, Ordering::Relaxed);
        COUNTERS.rnr_expired.fetch_add(1, Ordering::Relaxed);
        finish_send(&m.sq, &m.plan, u::URMA_CR_RNR_RETRY_CNT_EXC_ERR, 0);
    }
}

/// Drops every parked message without any CR (`urma_loopback_reset`).
pub fn clear_parked() {
    let mut qs = lock(&PARKED_QS);
    for rq in qs.drain(..) {
        let n = std::mem::take(&mut lock(&rq.q).parked).len();
        PARKED_TOTAL.fetch_sub(n as u64, Ordering::AcqRel);
    }
}

fn register_parked(rq: &Arc<RecvQ>) {
    let mut qs = lock(&PARKED_QS);
    if !qs.iter().any(|q| Arc::ptr_eq(q, rq)) {
        qs.push(rq.clone());
    }
}

/// Delivers a parked message with the recv WR that was just posted for it: recv CR, then the
/// sender's CR, exactly as an immediate delivery would have produced them.
fn deliver_parked(m: Parked, recv: RecvWr) {
    COUNTERS.rnr_delivered_late.fetch_add(1, Ordering::Relaxed);
    let t = m.plan.tjetty.as_ref().expect("validated");
    let Some(end) = recv_end(&t.target) else {
        return finish_send(&m.sq, &m.plan, u::URMA_CR_ACK_TIMEOUT_ERR, 0);
    };
    let st = complete_recv(&m.sq, &m.plan, &end, recv, m.n);
    finish_send(&m.sq, &m.plan, st, m.n as u32);
}

/// Consumes one recv WR at the target (or parks the message when none is posted and the RNR
/// timeout is not 0), moves the data, emits the recv CR and returns the sender-side status.
/// `None` = parked (the sender's CR comes later).
fn two_sided(sq: &Arc<SendQ>, p: &Plan, n: u64) -> Option<u32> {
    let t = p.tjetty.as_ref().expect("validated");
    let Some(end) = recv_end(&t.target).filter(|e| e.alive) else {
        return Some(u::URMA_CR_ACK_TIMEOUT_ERR);
    };
    let recv = {
        let mut st = lock(&end.rq.q);
        // Per-queue order: while messages are parked, newcomers queue behind them.
        let w = if st.parked.is_empty() {
            st.wrs.pop_front()
        } else {
            None
        };
        match w {
            Some(w) => w,
            None => {
                let to = knobs::rnr_timeout_ms();
                if to == 0 {
                    drop(st);
                    COUNTERS.rnr_errors.fetch_add(1, Ordering::Relaxed);
                    return Some(u::URMA_CR_RNR_RETRY_CNT_EXC_ERR);
                }
                st.parked.push_back(Parked {
                    sq: sq.clone(),
                    plan: p.clone(),
                    n,
                    deadline: Instant::now() + Duration::from_millis(to),
                });
                PARKED_TOTAL.fetch_add(1, Ordering::AcqRel);
                drop(st);
                COUNTERS.rnr_parked.fetch_add(1, Ordering::Relaxed);
                register_parked(end.rq);
                return None;
            }
        }
    };
    Some(complete_recv(sq, p, &end, recv, n))
}

/// Moves the data into `recv`, emits the recv CR, returns the sender-side status.
fn complete_recv(sq: &SendQ, p: &Plan, end: &RecvEnd<'_>, recv: RecvWr, n: u64) -> u32 {
    let rstatus = move_data(p, &recv, n);
    let from = u::urma_jetty_id_t {
        eid: sq.eid,
        uasid: sq.uasid,
        id: sq.id,
    };
    recv_cr(end, &recv, rstatus, n, p.op, p.imm, p.flags, from);
    if rstatus == u::URMA_CR_SUCCESS {
        u::URMA_CR_SUCCESS
    } else {
        u::URMA_CR_REM_OPERATION_ERR
    }
}

/// Posts a chain of recv WRs to `rq` (`urma_post_jfr_wr` / `urma_post_jetty_recv_wr`).
///
/// # Safety
/// `wr` must be a valid WR chain; `bad_wr` writable.
pub unsafe fn post_recv_chain(
    rq: &RecvQ,
    mut wr: *mut u::urma_jfr_wr_t,
    bad_wr: *mut *mut u::urma_jfr_wr_t,
) -> u::urma_status_t {
    expire_parked();
    while !wr.is_null() {
        // SAFETY: wr is non-NULL and part of the caller's chain.
        let w = unsafe { &*wr };
        let r = post_one_recv(rq, w);
        if r != u::URMA_SUCCESS {
            COUNTERS.post_errors.fetch_add(1, Ordering::Relaxed);
            // SAFETY: bad_wr checked non-NULL by the caller.
            unsafe { *bad_wr = wr };
            return r;
        }
        wr = w.next;
    }
    u::URMA_SUCCESS
}

fn post_one_recv(rq: &RecvQ, w: &u::urma_jfr_wr_t) -> u::urma_status_t {
    let seq = PLANE.next_recv();
    // SAFETY: the sg list comes from the caller's WR.
    let sges = match unsafe { read_sg(&w.src, rq.max_sge) } {
        Ok(v) => v,
        Err(()) => {
            trace_recv(rq, w.user_ctx, &[], u::URMA_EINVAL);
            return u::URMA_EINVAL;
        }
    };
    // Recv buffers must be local (registered) segments.
    if sges
        .iter()
        .any(|e| matches!(e.seg.as_deref(), Some(AnySeg::Imported(_))))
    {
        trace_recv(rq, w.user_ctx, &sges, u::URMA_EINVAL);
        return u::URMA_EINVAL;
    }
    if let Some(st) = PLANE.take_fail_post(Q_RECV, seq) {
        trace_recv(rq, w.user_ctx, &sges, st);
        return st;
    }
    let sges_for_trace = if trace::enabled() {
        Some(sges.clone())
    } else {
        None
    };
    // Every segment is a local one here (imported ones were refused above).
    let rw = RecvWr {
        user_ctx: w.user_ctx,
        sges,
    };
    let (ret, matched) = match rq.post(rw) {
        RecvPost::Posted => (u::URMA_SUCCESS, None),
        RecvPost::Matched(m, rw) => (u::URMA_SUCCESS, Some((m, rw))),
        RecvPost::Full => (u::URMA_ENOMEM, None),
    };
    if ret == u::URMA_SUCCESS {
        COUNTERS.recv_wrs.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(s) = sges_for_trace {
        trace_recv(rq, w.user_ctx, &s, ret);
    }
    if let Some((m, rw)) = matched {
        PARKED_TOTAL.fetch_sub(1, Ordering::AcqRel);
        let mut b = Batch::new();
        b.push(Job::Deliver { m, recv: rw });
        ENGINE.submit(b);
    }
    ret
}

fn trace_recv(rq: &RecvQ, user_ctx: u64, sges: &[Sge], ret: i32) {
    if !trace::enabled() {
        return;
    }
    trace::event(&Event::PostRecv {
        q: &rq.name,
        user_ctx,
        sge: &trace_sges(sges),
        ret,
    });
}

/// `urma_poll_jfc` body: pops up to `n` CRs into `out`, counting and tracing them.
///
/// # Safety
/// `out` must have room for `n` CRs.
pub unsafe fn poll(jfc: &Jfc, n: usize, out: *mut u::urma_cr_t) -> i32 {
    expire_parked();
    // SAFETY: the caller guarantees room for n CRs.
    let k = unsafe { jfc.pop_into(n, out) };
    if k == 0 {
        return 0;
    }
    COUNTERS.crs_polled.fetch_add(k as u64, Ordering::Relaxed);
    if trace::enabled() {
        // SAFETY: pop_into wrote k initialised CRs to out.
        let v = unsafe { std::slice::from_raw_parts(out, k) };
        for cr in v {
            trace::event(&Event::Poll {
                jfc: &jfc.name,
                cr,
                names: &trace::Queues,
            });
        }
    }
    k as i32
}
