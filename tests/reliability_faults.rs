//! Single, deterministic faults and their regressions: duplicated and stale send-side
//! completions, dropped completions, a slow or stuck callback.
mod common;
mod reliability_common;

use common::lb;
use compat_tests::loopback_ctl;
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::live_syncs;
use reliability_common as rc;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use urma_sys::*;

static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

unsafe extern "C" fn ok_cb(_ud: *mut c_void) -> i32 {
    0
}

/// Polls up to `want` CRs from `jfc` within 5 s.
fn poll_n(jfc: *mut urma_jfc_t, want: usize) -> Vec<urma_cr_t> {
    let mut out = Vec::new();
    // SAFETY: zeroed CRs are a valid out-buffer.
    let mut crs: [urma_cr_t; 16] = unsafe { std::mem::zeroed() };
    let deadline = Instant::now() + Duration::from_secs(5);
    while out.len() < want && Instant::now() < deadline {
        // SAFETY: live JFC, room for 16 CRs.
        let n = unsafe { urma_poll_jfc(jfc, 16.min((want - out.len()) as i32), crs.as_mut_ptr()) };
        out.extend_from_slice(&crs[..n.max(0) as usize]);
        if n <= 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    out
}

fn s_r(cr: &urma_cr_t) -> bool {
    // SAFETY: every bit pattern of the flag byte is a valid u8.
    let v = unsafe { cr.flag.value };
    v & urma_sys::flags::CR_FLAG_S_R != 0
}

/// A duplicated (or replayed) WRITE completion must not run the next send task early: that task
/// posts the SEND_IMM telling the peer a chunk has landed before its WRITE completed.
#[test]
fn duplicated_write_completion_does_not_advance_the_send_pipeline() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 16);
    let len = 3 * DEFAULT_CHUNK_SIZE;
    let mut s = lb::buf(&ep, len as usize);
    let d = lb::buf(&ep, len as usize);
    rc::fill(&mut s.mem, 77, len as usize);
    let mut io = rc::io(&ep, &s, &d);
    let (rr, rs) = rc::recv(h, &mut io, len, 901, Some(ok_cb));
    assert_eq!(rr, 0);
    let base = loopback_ctl::counters().send_wrs;
    let (sr, ss, _) = rc::send(h, &mut io, len, 900, 901);
    assert_eq!(sr, 0);
    // CR of WRITE chunk 0 (send side), fed twice.
    let mut w0 = poll_n(ep.jfc, 1);
    assert_eq!(w0.len(), 1);
    assert!(!s_r(&w0[0]));
    assert_eq!(rc::wake(h, &mut w0[0]), 0);
    let mut dup = w0[0];
    assert_eq!(rc::wake(h, &mut dup), -1, "D16: the duplicate is discarded");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        loopback_ctl::counters().send_wrs - base,
        3,
        "WRITE 0, then only task 0 (SEND_IMM 0 + WRITE 1): the duplicate must not run task 1"
    );
    // Now the normal flow: feed everything that arrives.
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    assert_eq!(rc::wait(h, ss, 5000), (0, URMA_SUCCESS));
    assert_eq!(rc::wait(h, rs, 5000), (0, URMA_SUCCESS));
    assert!(rc::check(&d.mem, 77, len as usize));
    assert_eq!(loopback_ctl::counters().send_wrs - base, 6);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

static STUCK: AtomicBool = AtomicBool::new(false);
static STUCK_IN: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn stuck_cb(_ud: *mut c_void) -> i32 {
    STUCK_IN.fetch_add(1, Ordering::SeqCst);
    while STUCK.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    0
}

/// Item 5: a stuck callback blocks only its own worker. Requests on the other worker complete,
/// a timed wait on the stuck request returns 1, and once the callback returns everything is freed.
#[test]
fn stuck_callback_blocks_only_its_worker() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 16);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    // A 7-chunk receive whose callback gets stuck on its first chunk. Its worker keeps the other 6
    // chunk tasks queued, so the least-loaded binding (contract §5.2: smallest (load, busy)) sends
    // every later request of at most 2 chunks to the other worker.
    let big = 7 * DEFAULT_CHUNK_SIZE;
    let sa = lb::buf(&ep, big as usize);
    let da = lb::buf(&ep, big as usize);
    let mut ioa = rc::io(&ep, &sa, &da);
    STUCK.store(true, Ordering::SeqCst);
    let (r, stuck) = rc::recv(h, &mut ioa, big, 500, Some(stuck_cb));
    assert_eq!(r, 0);
    let (r, ss, _) = rc::send(h, &mut ioa, big, 501, 500);
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, ss, 5000), (0, URMA_SUCCESS));
    let t = Instant::now();
    while STUCK_IN.load(Ordering::SeqCst) == 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        STUCK_IN.load(Ordering::SeqCst),
        1,
        "the callback is running (and stuck)"
    );
    // Other requests, multi-chunk, keep completing on the other worker.
    for i in 0..20u64 {
        let len = DEFAULT_CHUNK_SIZE + 1 + (i as u32) * 1000;
        let mut sb = lb::buf(&ep, len as usize);
        let db = lb::buf(&ep, len as usize);
        rc::fill(&mut sb.mem, 600 + i, len as usize);
        let mut io2 = rc::io(&ep, &sb, &db);
        let (r, rs) = rc::recv(h, &mut io2, len, 700 + i, Some(ok_cb));
        assert_eq!(r, 0);
        let (r, ss, _) = rc::send(h, &mut io2, len, 600 + i, 700 + i);
        assert_eq!(r, 0);
        assert_eq!(
            rc::wait(h, ss, 5000),
            (0, URMA_SUCCESS),
            "send {i} while a callback is stuck"
        );
        assert_eq!(
            rc::wait(h, rs, 5000),
            (0, URMA_SUCCESS),
            "recv {i} while a callback is stuck"
        );
        assert!(rc::check(&db.mem, 600 + i, len as usize));
    }
    // A timed wait on the stuck request returns 1 in time.
    let t = Instant::now();
    assert_eq!(rc::wait(h, stuck, 200), (1, URMA_SUCCESS));
    let el = t.elapsed();
    assert!(
        el >= Duration::from_millis(200) && el < Duration::from_millis(1500),
        "{el:?}"
    );
    assert_eq!(live_syncs(), 1, "the running task still holds its slot");
    assert_eq!(
        STUCK_IN.load(Ordering::SeqCst),
        1,
        "the stuck worker ran nothing else"
    );
    STUCK.store(false, Ordering::SeqCst);
    let t = Instant::now();
    while live_syncs() != 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(live_syncs(), 0, "freed once the callback returned");
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    assert_eq!(os_transport_destroy(h), 0);
}

/// A dropped completion: the waiter's timeout returns 1, the sync is freed, nothing lingers, and
/// the late duplicate of another request's completion is harmless.
#[test]
fn dropped_completion_times_out_cleanly() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 16);
    loopback_ctl::reset();
    // CR #1 = the WRITE completion of the send below.
    loopback_ctl::cr_action(1, loopback_ctl::CrAction::Drop);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = rc::io(&ep, &s, &d);
    let (r, rs) = rc::recv(h, &mut io, 4096, 800, Some(ok_cb));
    assert_eq!(r, 0);
    let (r, ss, _) = rc::send(h, &mut io, 4096, 801, 800);
    assert_eq!(r, 0);
    assert_eq!(
        rc::wait(h, ss, 100),
        (1, URMA_SUCCESS),
        "send never progresses"
    );
    assert_eq!(
        rc::wait(h, rs, 100),
        (1, URMA_SUCCESS),
        "recv never notified"
    );
    assert_eq!(loopback_ctl::counters().crs_dropped, 1);
    assert_eq!(live_syncs(), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    loopback_ctl::reset();
    assert_eq!(os_transport_destroy(h), 0);
}
