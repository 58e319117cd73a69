//! The traced URMA functions: object creation (names), posts, polls and event waits.
//!
//! Ordering: while the trace or a fault is on, each post and each poll holds one process-wide
//! lock across the call of the real function and the recording of its lines, so the trace is
//! the order in which the provider saw the calls (the loopback's own trace has the same order)
//! and the WR / CR numbering of the faults is exact. Off, calls go straight through (the chain
//! is still walked to count WRs).

// `call_real!` returns `()` from void functions.
#![allow(clippy::unused_unit)]

use std::ffi::c_int;
use std::ptr::null_mut;
use std::time::Instant;

use urma_sys::*;

use crate::faults::{self, Fate, Q_RECV, Q_SEND};
use crate::real::call_real;
use crate::{guard, objects, trace};
use ranked_lock::{lock, rank, Mutex};

static CALL: Mutex<(), { rank::INTERPOSE_CALL }> = Mutex::new(());

fn slow_path() -> bool {
    trace::enabled() || faults::any()
}

/// Longest WR chain the layer walks (a longer or cyclic chain is forwarded untraced).
const MAX_CHAIN: usize = 1 << 16;

// ------------------------------------------------------------------ objects

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_create_jfc(
    ctx: *mut urma_context_t,
    jfc_cfg: *mut urma_jfc_cfg_t,
) -> *mut urma_jfc_t {
    guard(null_mut(), || {
        let j = call_real!(urma_create_jfc, null_mut(), ctx, jfc_cfg);
        if !j.is_null() {
            // SAFETY: a JFC the provider just created; its cfg copy is readable.
            let jfce = unsafe { (*j).jfc_cfg.jfce } as usize;
            objects::add_jfc(j as usize, jfce);
        }
        j
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfc(jfc: *mut urma_jfc_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_delete_jfc, URMA_FAIL, jfc);
        if r == URMA_SUCCESS {
            objects::forget(jfc as usize);
            faults::forget_jfc(jfc as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_create_jfs(
    ctx: *mut urma_context_t,
    jfs_cfg: *mut urma_jfs_cfg_t,
) -> *mut urma_jfs_t {
    guard(null_mut(), || {
        let j = call_real!(urma_create_jfs, null_mut(), ctx, jfs_cfg);
        if !j.is_null() {
            // SAFETY: a JFS the provider just created.
            let id = unsafe { (*j).jfs_id.id };
            objects::add_jfs(j as usize, id);
        }
        j
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfs(jfs: *mut urma_jfs_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_delete_jfs, URMA_FAIL, jfs);
        if r == URMA_SUCCESS {
            objects::forget(jfs as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_create_jfr(
    ctx: *mut urma_context_t,
    jfr_cfg: *mut urma_jfr_cfg_t,
) -> *mut urma_jfr_t {
    guard(null_mut(), || {
        let j = call_real!(urma_create_jfr, null_mut(), ctx, jfr_cfg);
        if !j.is_null() {
            // SAFETY: a JFR the provider just created.
            let id = unsafe { (*j).jfr_id.id };
            objects::add_jfr(j as usize, id);
        }
        j
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_delete_jfr(jfr: *mut urma_jfr_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        // SAFETY: a live JFR handle (the caller's contract); read before it is deleted.
        let id = (!jfr.is_null()).then(|| unsafe { (*jfr).jfr_id.id });
        let r = call_real!(urma_delete_jfr, URMA_FAIL, jfr);
        if let (URMA_SUCCESS, Some(id)) = (r, id) {
            objects::forget_jfr(jfr as usize, id);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_create_jetty(
    ctx: *mut urma_context_t,
    jetty_cfg: *mut urma_jetty_cfg_t,
) -> *mut urma_jetty_t {
    guard(null_mut(), || {
        // SAFETY: the caller's cfg (read only when non-NULL); `shared` is the active member
        // when share_jfr is set.
        let shared = (!jetty_cfg.is_null())
            .then(|| unsafe {
                let c = &*jetty_cfg;
                (c.flag.value & urma_sys::flags::JETTY_FLAG_SHARE_JFR != 0)
                    .then_some(c.__bindgen_anon_1.shared.jfr as usize)
            })
            .flatten();
        let j = call_real!(urma_create_jetty, null_mut(), ctx, jetty_cfg);
        if !j.is_null() {
            // SAFETY: a jetty the provider just created.
            let id = unsafe { (*j).jetty_id.id };
            objects::add_jetty(j as usize, id, shared);
        }
        j
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_delete_jetty(jetty: *mut urma_jetty_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_delete_jetty, URMA_FAIL, jetty);
        if r == URMA_SUCCESS {
            objects::forget(jetty as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_import_jetty(
    ctx: *mut urma_context_t,
    rjetty: *mut urma_rjetty_t,
    token_value: *mut urma_token_t,
) -> *mut urma_target_jetty_t {
    guard(null_mut(), || {
        let t = call_real!(urma_import_jetty, null_mut(), ctx, rjetty, token_value);
        if !t.is_null() {
            objects::add_tjetty(t as usize);
        }
        t
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_unimport_jetty(tjetty: *mut urma_target_jetty_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_unimport_jetty, URMA_FAIL, tjetty);
        if r == URMA_SUCCESS {
            objects::forget(tjetty as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_import_jfr(
    ctx: *mut urma_context_t,
    rjfr: *mut urma_rjfr_t,
    token_value: *mut urma_token_t,
) -> *mut urma_target_jetty_t {
    guard(null_mut(), || {
        let t = call_real!(urma_import_jfr, null_mut(), ctx, rjfr, token_value);
        if !t.is_null() {
            objects::add_tjetty(t as usize);
        }
        t
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_unimport_jfr(target_jfr: *mut urma_target_jetty_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_unimport_jfr, URMA_FAIL, target_jfr);
        if r == URMA_SUCCESS {
            objects::forget(target_jfr as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_register_seg(
    ctx: *mut urma_context_t,
    seg_cfg: *mut urma_seg_cfg_t,
) -> *mut urma_target_seg_t {
    guard(null_mut(), || {
        let t = call_real!(urma_register_seg, null_mut(), ctx, seg_cfg);
        if !t.is_null() {
            // SAFETY: a segment the provider just registered.
            let (va, tok) = unsafe { ((*t).seg.ubva.va, (*t).seg.token_id) };
            objects::add_seg(t as usize, va, tok);
        }
        t
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_unregister_seg(target_seg: *mut urma_target_seg_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_unregister_seg, URMA_FAIL, target_seg);
        if r == URMA_SUCCESS {
            objects::forget(target_seg as usize);
        }
        r
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_import_seg(
    ctx: *mut urma_context_t,
    seg: *mut urma_seg_t,
    token_value: *mut urma_token_t,
    addr: u64,
    flag: urma_import_seg_flag_t,
) -> *mut urma_target_seg_t {
    guard(null_mut(), || {
        let t = call_real!(
            urma_import_seg,
            null_mut(),
            ctx,
            seg,
            token_value,
            addr,
            flag
        );
        if !t.is_null() {
            // SAFETY: a segment the provider just imported.
            let (va, tok) = unsafe { ((*t).seg.ubva.va, (*t).seg.token_id) };
            objects::add_iseg(t as usize, va, tok);
        }
        t
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_unimport_seg(tseg: *mut urma_target_seg_t) -> urma_status_t {
    guard(URMA_FAIL, || {
        let r = call_real!(urma_unimport_seg, URMA_FAIL, tseg);
        if r == URMA_SUCCESS {
            objects::forget(tseg as usize);
        }
        r
    })
}

// ------------------------------------------------------------------ posts

/// A WR chain type: send or recv WRs.
trait Wr {
    fn next(&self) -> *mut Self;
    fn set_next(&mut self, n: *mut Self);
    /// Turns a send WR into a NOP that requests its completion (for `fail_cr`); returns what to
    /// restore. Recv WRs: nothing.
    fn to_nop(&mut self) -> Option<(u32, u32)>;
    fn restore(&mut self, saved: (u32, u32));
}

impl Wr for urma_jfs_wr_t {
    fn next(&self) -> *mut Self {
        self.next
    }
    fn set_next(&mut self, n: *mut Self) {
        self.next = n;
    }
    fn to_nop(&mut self) -> Option<(u32, u32)> {
        // SAFETY: the flag union is a plain u32.
        let flags = unsafe { self.flag.value };
        let saved = (self.opcode, flags);
        self.opcode = URMA_OPC_NOP;
        self.flag.value = flags | urma_sys::flags::JFS_WR_FLAG_COMPLETE_ENABLE;
        Some(saved)
    }
    fn restore(&mut self, (opcode, flags): (u32, u32)) {
        self.opcode = opcode;
        self.flag.value = flags;
    }
}

impl Wr for urma_jfr_wr_t {
    fn next(&self) -> *mut Self {
        self.next
    }
    fn set_next(&mut self, n: *mut Self) {
        self.next = n;
    }
    fn to_nop(&mut self) -> Option<(u32, u32)> {
        None
    }
    fn restore(&mut self, _: (u32, u32)) {}
}

/// The chain as a list, or None when it is longer than [`MAX_CHAIN`].
///
/// # Safety
/// `wr` must be NULL or a valid chain.
unsafe fn chain<W: Wr>(mut wr: *mut W) -> Option<Vec<*mut W>> {
    let mut v = Vec::new();
    while !wr.is_null() {
        if v.len() == MAX_CHAIN {
            return None;
        }
        v.push(wr);
        // SAFETY: non-NULL element of the caller's chain.
        wr = unsafe { (*wr).next() };
    }
    Some(v)
}

/// How many WRs of `v` reached the provider: all on success, else up to the one `bad` names
/// (the first when the provider did not name one of the chain).
fn reached<W>(v: &[*mut W], r: urma_status_t, bad: *mut W) -> usize {
    if r == URMA_SUCCESS {
        v.len()
    } else {
        v.iter().position(|w| *w == bad).unwrap_or(0) + 1
    }
}

/// One post: `queue` kind, `qname`/`qid` of the queue (None: unknown to the layer),
/// `trace_wr` writes one line, `posted` notes a posted WR with its number, `fwd` calls the
/// real post.
///
/// # Safety
/// `wr` / `bad_wr`: the post call's contract.
unsafe fn post<W: Wr>(
    queue: i32,
    wr: *mut W,
    bad_wr: *mut *mut W,
    trace_wr: impl Fn(&W, i32),
    posted: impl Fn(u64, &W),
    fwd: impl Fn(*mut W, *mut *mut W) -> urma_status_t,
) -> urma_status_t {
    let seq = faults::wr_seq(queue);
    // SAFETY: the caller's chain.
    let Some(v) = (unsafe { chain(wr) }) else {
        return fwd(wr, bad_wr);
    };
    if bad_wr.is_null() || v.is_empty() {
        return fwd(wr, bad_wr);
    }
    if !slow_path() {
        let r = fwd(wr, bad_wr);
        let bad = if r == URMA_SUCCESS {
            null_mut()
        } else {
            // SAFETY: bad_wr is non-NULL (checked) and written by the provider on failure.
            unsafe { *bad_wr }
        };
        // Like the loopback, a WR the provider rejected has its number too.
        seq.add(reached(&v, r, bad) as u64, false);
        return r;
    }
    let _order = lock(&CALL);
    let base = seq.last();
    let inject = v
        .iter()
        .enumerate()
        .find_map(|(i, _)| faults::take_fail_post(queue, base + 1 + i as u64).map(|st| (i, st)));
    let cut = inject.map(|(i, _)| i).unwrap_or(v.len());
    let mut r = URMA_SUCCESS;
    let mut n = 0;
    if cut > 0 {
        let last = v[cut - 1];
        // SAFETY: last is an element of the caller's chain; its next is restored right after
        // the forward (the provider does not keep WRs beyond the call).
        let saved = unsafe { (*last).next() };
        if cut < v.len() {
            // SAFETY: as above.
            unsafe { (*last).set_next(null_mut()) };
        }
        // A send WR to complete with an error is forwarded as a NOP (nothing executed); the
        // caller's WR is restored after the call, before it is traced.
        let nops: Vec<(usize, (u32, u32))> = (0..cut)
            .filter(|i| queue == Q_SEND && faults::fail_cr_pending(base + 1 + *i as u64))
            .filter_map(|i| {
                let w = v[i];
                // SAFETY: an element of the caller's chain, restored below.
                unsafe { (*w).to_nop() }.map(|s| (i, s))
            })
            .collect();
        r = fwd(wr, bad_wr);
        for (i, s) in nops {
            let w = v[i];
            // SAFETY: as above.
            unsafe { (*w).restore(s) };
        }
        if cut < v.len() {
            // SAFETY: as above.
            unsafe { (*last).set_next(saved) };
        }
        let bad = if r == URMA_SUCCESS {
            null_mut()
        } else {
            // SAFETY: bad_wr non-NULL (checked); written by the provider on failure.
            unsafe { *bad_wr }
        };
        n = reached(&v[..cut], r, bad);
        for (i, w) in v[..n].iter().enumerate() {
            let ret = if i + 1 == n { r } else { URMA_SUCCESS };
            // SAFETY: elements of the caller's chain.
            let w = unsafe { &**w };
            if trace::enabled() {
                trace_wr(w, ret);
            }
            if ret == URMA_SUCCESS {
                posted(base + 1 + i as u64, w);
            }
        }
    }
    if let (URMA_SUCCESS, Some((i, st))) = (r, inject) {
        // SAFETY: element of the caller's chain.
        let w = unsafe { &*v[i] };
        if trace::enabled() {
            trace_wr(w, st);
        }
        // SAFETY: bad_wr non-NULL (checked).
        unsafe { *bad_wr = v[i] };
        n = i + 1;
        r = st;
    }
    seq.add(n as u64, true);
    let ok = if r == URMA_SUCCESS {
        n
    } else {
        n.saturating_sub(1)
    } as u64;
    if queue == Q_SEND {
        faults::count_posted(ok, 0);
    } else {
        faults::count_posted(0, ok);
    }
    r
}

unsafe fn post_send(
    q: usize,
    wr: *mut urma_jfs_wr_t,
    bad_wr: *mut *mut urma_jfs_wr_t,
    fwd: impl Fn(*mut urma_jfs_wr_t, *mut *mut urma_jfs_wr_t) -> urma_status_t,
) -> urma_status_t {
    let (name, id) = objects::sq(q).unwrap_or_else(|| ("unknown".into(), u32::MAX));
    // SAFETY: the caller's contract is the post's.
    unsafe {
        post(
            Q_SEND,
            wr,
            bad_wr,
            // SAFETY: w is a WR of the caller's chain.
            |w, ret| trace::post_send(&name, w, ret),
            |nth, w| faults::posted_send(nth, id, w.user_ctx),
            fwd,
        )
    }
}

unsafe fn post_recv(
    q: usize,
    wr: *mut urma_jfr_wr_t,
    bad_wr: *mut *mut urma_jfr_wr_t,
    fwd: impl Fn(*mut urma_jfr_wr_t, *mut *mut urma_jfr_wr_t) -> urma_status_t,
) -> urma_status_t {
    let name = objects::rq(q).unwrap_or_else(|| "unknown".into());
    // SAFETY: the caller's contract is the post's.
    unsafe {
        post(
            Q_RECV,
            wr,
            bad_wr,
            // SAFETY: w is a WR of the caller's chain.
            |w, ret| trace::post_recv(&name, w, ret),
            |_, _| {},
            fwd,
        )
    }
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_post_jfs_wr(
    jfs: *mut urma_jfs_t,
    wr: *mut urma_jfs_wr_t,
    bad_wr: *mut *mut urma_jfs_wr_t,
) -> urma_status_t {
    guard(URMA_FAIL, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_post_jfs_wr) else {
            crate::real::missing("urma_post_jfs_wr");
            return URMA_FAIL;
        };
        // SAFETY: the real post of the same prototype, with the caller's queue and chain.
        unsafe { post_send(jfs as usize, wr, bad_wr, |w, b| f(jfs, w, b)) }
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_post_jetty_send_wr(
    jetty: *mut urma_jetty_t,
    wr: *mut urma_jfs_wr_t,
    bad_wr: *mut *mut urma_jfs_wr_t,
) -> urma_status_t {
    guard(URMA_FAIL, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_post_jetty_send_wr) else {
            crate::real::missing("urma_post_jetty_send_wr");
            return URMA_FAIL;
        };
        // SAFETY: as in urma_post_jfs_wr.
        unsafe { post_send(jetty as usize, wr, bad_wr, |w, b| f(jetty, w, b)) }
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_post_jfr_wr(
    jfr: *mut urma_jfr_t,
    wr: *mut urma_jfr_wr_t,
    bad_wr: *mut *mut urma_jfr_wr_t,
) -> urma_status_t {
    guard(URMA_FAIL, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_post_jfr_wr) else {
            crate::real::missing("urma_post_jfr_wr");
            return URMA_FAIL;
        };
        // SAFETY: as in urma_post_jfs_wr.
        unsafe { post_recv(jfr as usize, wr, bad_wr, |w, b| f(jfr, w, b)) }
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_post_jetty_recv_wr(
    jetty: *mut urma_jetty_t,
    wr: *mut urma_jfr_wr_t,
    bad_wr: *mut *mut urma_jfr_wr_t,
) -> urma_status_t {
    guard(URMA_FAIL, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_post_jetty_recv_wr) else {
            crate::real::missing("urma_post_jetty_recv_wr");
            return URMA_FAIL;
        };
        // SAFETY: as in urma_post_jfs_wr.
        unsafe { post_recv(jetty as usize, wr, bad_wr, |w, b| f(jetty, w, b)) }
    })
}

// ------------------------------------------------------------------ completions

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_poll_jfc(
    jfc: *mut urma_jfc_t,
    cr_cnt: c_int,
    cr: *mut urma_cr_t,
) -> c_int {
    guard(-1, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_poll_jfc) else {
            crate::real::missing("urma_poll_jfc");
            return -1;
        };
        if cr_cnt <= 0 || cr.is_null() || !slow_path() {
            // SAFETY: the real poll, with the caller's arguments.
            let n = unsafe { f(jfc, cr_cnt, cr) };
            if n > 0 {
                faults::count_polled_quietly(n as u64);
            }
            return n;
        }
        let _order = lock(&CALL);
        let room = cr_cnt as usize;
        let h = jfc as usize;
        let mut out = faults::take_ready(h, room);
        if out.len() < room {
            let want = room - out.len();
            let mut buf = vec![urma_cr_t::default(); want];
            // SAFETY: buf has room for `want` CRs.
            let n = unsafe { f(jfc, want as c_int, buf.as_mut_ptr()) };
            if n < 0 && out.is_empty() {
                return n;
            }
            let name = objects::jfc(h).map(|j| j.name);
            let name = name.as_deref().unwrap_or("unknown");
            for mut c in buf.into_iter().take(n.max(0) as usize) {
                let fate = faults::on_provider_cr(&mut c);
                if trace::enabled() {
                    trace::cr(name, &c, fate);
                }
                match fate {
                    Fate::Drop => {}
                    Fate::Deliver => faults::route(h, c, &mut out, room),
                    Fate::Dup => {
                        faults::route(h, c, &mut out, room);
                        faults::route(h, c, &mut out, room);
                    }
                }
            }
        }
        // SAFETY: the caller's array has room for cr_cnt >= out.len() CRs.
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), cr, out.len()) };
        faults::count_to_app(out.len());
        if trace::enabled() {
            let name = objects::jfc(h).map(|j| j.name);
            for c in &out {
                trace::poll(name.as_deref().unwrap_or("unknown"), c);
            }
        }
        out.len() as c_int
    })
}

/// Longest slice of a provider wait while CRs of the JFCE are kept by the layer.
const WAIT_SLICE_MS: i64 = 5;

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_wait_jfc(
    jfce: *mut urma_jfce_t,
    jfc_cnt: u32,
    time_out: c_int,
    jfc: *mut *mut urma_jfc_t,
) -> c_int {
    guard(-1, || {
        let Some(f) = crate::real::real().and_then(|r| r.urma_wait_jfc) else {
            crate::real::missing("urma_wait_jfc");
            return -1;
        };
        if !faults::any() || jfc_cnt == 0 || jfc.is_null() {
            // SAFETY: the real wait, with the caller's arguments.
            return unsafe { f(jfce, jfc_cnt, time_out, jfc) };
        }
        let jfcs = objects::jfcs_of(jfce as usize);
        let start = Instant::now();
        loop {
            let (ready, later) = faults::event_ready(&jfcs);
            if let Some(j) = ready {
                // SAFETY: jfc has room for jfc_cnt >= 1 handles.
                unsafe { *jfc = j as *mut urma_jfc_t };
                return 1;
            }
            let left = if time_out < 0 {
                i64::MAX
            } else {
                time_out as i64 - start.elapsed().as_millis() as i64
            };
            if left <= 0 {
                return 0;
            }
            let slice = if later { left.min(WAIT_SLICE_MS) } else { left };
            let t = if slice == i64::MAX {
                -1
            } else {
                slice as c_int
            };
            // SAFETY: the real wait, with the caller's JFCE and array.
            let n = unsafe { f(jfce, jfc_cnt, t, jfc) };
            if n != 0 || !later {
                return n;
            }
        }
    })
}

/// # Safety
/// URMA API contract.
#[no_mangle]
pub unsafe extern "C" fn urma_ack_jfc(jfc: *mut *mut urma_jfc_t, nevents: *mut u32, jfc_cnt: u32) {
    guard((), || {
        if jfc.is_null() || nevents.is_null() || jfc_cnt == 0 || !faults::any() {
            call_real!(urma_ack_jfc, (), jfc, nevents, jfc_cnt);
            return;
        }
        let n = jfc_cnt as usize;
        // SAFETY: the caller's arrays have jfc_cnt entries each.
        let (js, evs) = unsafe {
            (
                std::slice::from_raw_parts(jfc, n).to_vec(),
                std::slice::from_raw_parts(nevents, n).to_vec(),
            )
        };
        let mut evs2 = evs.clone();
        for (i, j) in js.iter().enumerate() {
            evs2[i] -= faults::take_synthetic(*j as usize, evs[i]);
        }
        let mut js2 = js;
        call_real!(
            urma_ack_jfc,
            (),
            js2.as_mut_ptr(),
            evs2.as_mut_ptr(),
            jfc_cnt
        );
    })
}
