//! Misuse is refused, not undefined. Stale (already waited, cancelled,
//! destroyed), foreign (never returned by us) and NULL syncs and handles return the function's
//! error value; double waits, waits after cancel, calls after destroy, a callback calling back
//! into the library for its own request and more requests than capacity are all refused cleanly.
//! Every case is a row of the input table in `docs/abi.md` / `docs/reliability.md`.
mod common;
mod reliability_common;

use common::lb;
use compat_tests::loopback_ctl;
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::{live_syncs, set_next_free_generation, GEN_MASK, MAX_INFLIGHT_ENV};
use reliability_common as rc;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};
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

/// Values that were never returned by the library, including a live-looking token with the wrong
/// generation and the address of a real object.
fn foreign_syncs(real: *mut task_sync_t) -> Vec<*mut task_sync_t> {
    let obj = Box::leak(Box::new([0u64; 8]));
    let r = real as usize;
    vec![
        1 as *mut task_sync_t,
        0x1234 as *mut task_sync_t,
        usize::MAX as *mut task_sync_t,
        obj.as_mut_ptr().cast(),
        (r ^ (1 << 30)) as *mut task_sync_t, // same slot, other generation
        (r + 0x10) as *mut task_sync_t,      // neighbouring slot (free)
        (r + 1) as *mut task_sync_t,         // misaligned token
        (r ^ (1 << 60)) as *mut task_sync_t, // wrong tag
    ]
}

#[test]
fn stale_foreign_and_null_syncs_are_refused() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 4);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = rc::io(&ep, &s, &d);
    let (r, live) = rc::recv(h, &mut io, 4096, 1, Some(ok_cb));
    assert_eq!(r, 0);
    // NULL sync.
    assert_eq!(rc::wait(h, null_mut(), 0), (ERR, URMA_SUCCESS));
    // SAFETY: NULL status pointer is allowed.
    let r = unsafe { wait_and_free_sync(h, null_mut(), null_mut()) };
    assert_eq!(r, ERR);
    assert_eq!(
        rc::cancel(h, null_mut(), 12345),
        (0, null_mut()),
        "legacy: NULL *sync is fine"
    );
    // Foreign syncs: refused, nothing done, the caller's pointer untouched.
    for f in foreign_syncs(live) {
        assert_eq!(rc::wait(h, f, 0).0, ERR, "wait on foreign {f:p}");
        assert_eq!(rc::cancel(h, f, 1), (ERR, f), "cancel with foreign {f:p}");
    }
    assert_eq!(live_syncs(), 1, "the live request was not touched");
    // Stale after a wait (timeout consumes the sync).
    assert_eq!(rc::wait(h, live, 0), (1, URMA_SUCCESS));
    assert_eq!(rc::wait(h, live, 0).0, ERR, "double wait");
    // SAFETY: valid status pointer.
    assert_eq!(unsafe { wait_and_free_sync(h, live, &mut 0) }, ERR);
    assert_eq!(rc::cancel(h, live, 1), (ERR, live), "cancel after wait");
    // Stale after a cancel.
    let (r, s2) = rc::recv(h, &mut io, 4096, 2, Some(ok_cb));
    assert_eq!(r, 0);
    assert_eq!(rc::cancel(h, s2, 2), (0, null_mut()));
    assert_eq!(rc::wait(h, s2, 100).0, ERR, "wait after cancel");
    // SAFETY: valid status pointer.
    assert_eq!(unsafe { wait_and_free_sync(h, s2, &mut 0) }, ERR);
    assert_eq!(rc::cancel(h, s2, 2), (ERR, s2), "double cancel");
    // A reused slot does not revive an old token.
    let (r, s3) = rc::recv(h, &mut io, 4096, 3, Some(ok_cb));
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, s2, 0).0, ERR);
    assert_eq!(rc::wait(h, live, 0).0, ERR);
    // Consumed syncs passed along with the live request's id: refused before the id is looked at.
    assert_eq!(rc::cancel(h, s2, 3), (ERR, s2), "consumed sync, live id");
    assert_eq!(
        rc::cancel(h, live, 3),
        (ERR, live),
        "consumed sync, live id"
    );
    assert_eq!(rc::wait(h, s3, 0), (1, URMA_SUCCESS), "the new one is fine");
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

/// A sync kept after it was consumed stays stale for good: when its slot has used its last
/// generation the slot is retired rather than starting again at generation 1, so the old token
/// can never name a later request (which it would after the generation wrapped).
#[test]
fn a_stale_sync_never_aliases_a_later_request_at_the_generation_wrap() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 4);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = rc::io(&ep, &s, &d);
    // A request with generation 1 of a slot; its sync is consumed (the wait times out).
    let slot = set_next_free_generation(1).expect("free slot");
    let (r, old) = rc::recv(h, &mut io, 4096, 0x51, Some(ok_cb));
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, old, 0), (WAIT_TIMEOUT, URMA_SUCCESS));
    // The same slot, at its last generation, serves one more request.
    assert_eq!(set_next_free_generation(GEN_MASK), Some(slot));
    let (r, last) = rc::recv(h, &mut io, 4096, 0x52, Some(ok_cb));
    assert_eq!(r, 0);
    // While the slot serves that request, the token of its earlier request does nothing.
    assert_eq!(rc::wait(h, old, 0), (ERR, URMA_SUCCESS), "old generation");
    assert_eq!(rc::cancel(h, old, 0x52), (ERR, old), "old generation");
    assert_eq!(
        rc::wait(h, last, 0),
        (WAIT_TIMEOUT, URMA_SUCCESS),
        "the request in the reused slot was not touched"
    );
    // The next request must not get generation 1 of that slot again.
    let (r, new) = rc::recv(h, &mut io, 4096, 0x53, Some(ok_cb));
    assert_eq!(r, 0);
    assert_ne!(new, old, "the consumed token was handed out again");
    assert_eq!(rc::wait(h, old, 0), (ERR, URMA_SUCCESS), "stale token");
    assert_eq!(rc::wait(h, last, 0), (ERR, URMA_SUCCESS), "stale token");
    assert_eq!(
        rc::wait(h, new, 0),
        (WAIT_TIMEOUT, URMA_SUCCESS),
        "the live request was not touched by the stale tokens"
    );
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0);
}

#[test]
fn concurrent_double_wait_is_refused_and_the_first_waiter_unaffected() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 4);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = rc::io(&ep, &s, &d);
    let (r, sy) = rc::recv(h, &mut io, 4096, 10, Some(ok_cb));
    assert_eq!(r, 0);
    let (hv, sv) = (h as usize, sy as usize);
    let (tx, rx) = std::sync::mpsc::channel();
    let first = std::thread::spawn(move || {
        // SAFETY: plain syscall wrapper.
        tx.send(unsafe { libc::gettid() }).unwrap();
        rc::wait(hv as *mut c_void, sv as *mut task_sync_t, 1000)
    });
    let tid = rx.recv().unwrap();
    assert!(
        lb::until_blocked(tid, Duration::from_secs(5)),
        "first waiter blocked in its wait"
    );
    assert_eq!(rc::wait(h, sy, 5000).0, ERR, "second timed waiter refused");
    // The untimed wait runs on a thread of its own so that a regression fails instead of hanging.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut st = 0;
        // SAFETY: valid status pointer; the sync is a plain value to the library.
        let r = unsafe { wait_and_free_sync(hv as *mut c_void, sv as *mut task_sync_t, &mut st) };
        let _ = tx.send(r);
    });
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(5)),
        Ok(ERR),
        "second untimed waiter refused"
    );
    assert_eq!(
        rc::cancel(h, sy, 10),
        (ERR, sy),
        "cancel of a sync being waited on refused, its request left alone"
    );
    assert!(
        !first.is_finished(),
        "refused at once, while the first waiter still waits"
    );
    assert_eq!(
        first.join().unwrap(),
        (1, URMA_SUCCESS),
        "first waiter times out normally"
    );
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

#[test]
fn every_call_after_destroy_and_with_foreign_handles_is_refused() {
    let _g = serial();
    let ep = lb::ep();
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = rc::io(&ep, &s, &d);
    let old = lb::init(1, 4);
    let (r, sy) = rc::recv(old, &mut io, 4096, 20, Some(ok_cb));
    assert_eq!(r, 0);
    assert_eq!(os_transport_destroy(old), 0);
    let h = lb::init(1, 4); // a new instance: the old handle must not alias it
    assert_ne!(h, old);
    let obj = Box::leak(Box::new([0u64; 8]));
    let bad: [*mut c_void; 5] = [
        old,
        null_mut(),
        obj.as_mut_ptr().cast(),
        1 as *mut c_void,
        (h as usize + 0x10) as *mut c_void,
    ];
    let before = loopback_ctl::counters();
    for b in bad {
        assert_eq!(rc::send(b, &mut io, 64, 21, 22).0, ERR, "send with {b:p}");
        assert_eq!(
            rc::recv(b, &mut io, 64, 23, Some(ok_cb)).0,
            ERR,
            "recv with {b:p}"
        );
        // SAFETY: zeroed CR is valid.
        let mut cr: urma_cr_t = unsafe { std::mem::zeroed() };
        assert_eq!(rc::wake(b, &mut cr), -1, "wake with {b:p}");
        assert_eq!(rc::wait(b, sy, 0).0, ERR, "wait with {b:p}");
        assert_eq!(rc::cancel(b, sy, 20).0, ERR, "cancel with {b:p}");
        assert_eq!(os_transport_reg_jfc(null_mut(), null_mut(), b), ERR);
        assert_eq!(os_transport_destroy(b), ERR, "destroy with {b:p}");
    }
    let after = loopback_ctl::counters();
    assert_eq!(after.send_wrs, before.send_wrs, "nothing posted");
    assert_eq!(after.recv_wrs, before.recv_wrs, "nothing posted");
    // A sync of the old instance is stale for the new one too, also next to a live request of the
    // same id, which it leaves alone.
    let (r, sy_new) = rc::recv(h, &mut io, 4096, 20, Some(ok_cb));
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, sy, 0).0, ERR);
    assert_eq!(rc::cancel(h, sy, 20), (ERR, sy));
    assert_eq!(rc::wait(h, sy_new, 0), (WAIT_TIMEOUT, URMA_SUCCESS));
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(os_transport_destroy(h), ERR, "second destroy");
}

/// Handles are validated against a per-thread cached instance (`instance::get`): a thread that
/// used an instance must still see its destroy, and the next instance, at once.
#[test]
fn a_thread_that_used_an_instance_sees_its_destroy_and_the_next_instance() {
    let _g = serial();
    let (to_thread, requests) = std::sync::mpsc::channel::<usize>();
    let (answer, answers) = std::sync::mpsc::channel::<u32>();
    let t = std::thread::spawn(move || {
        for h in requests {
            answer
                .send(os_transport_reg_jfc(
                    null_mut(),
                    null_mut(),
                    h as *mut c_void,
                ))
                .unwrap();
        }
    });
    let ask = |h: *mut c_void| {
        to_thread.send(h as usize).unwrap();
        answers.recv_timeout(Duration::from_secs(10)).unwrap()
    };
    let h1 = lb::init(1, 4);
    assert_eq!(ask(h1), 0, "the thread caches instance 1");
    assert_eq!(ask(h1), 0);
    assert_eq!(os_transport_destroy(h1), 0);
    assert_eq!(ask(h1), ERR, "destroyed on another thread");
    let h2 = lb::init(1, 4);
    assert_ne!(h2, h1);
    assert_eq!(ask(h1), ERR, "old handle after a re-init");
    assert_eq!(ask(h2), 0, "new instance seen at once");
    assert_eq!(os_transport_destroy(h2), 0);
    assert_eq!(ask(h2), ERR);
    drop(to_thread);
    t.join().unwrap();
}

#[test]
fn requests_beyond_capacity_get_a_clear_error_and_nothing_is_queued() {
    let _g = serial();
    let ep = lb::ep();
    // The in-flight limit (unfinished requests) comes from the environment at init.
    const LIMIT: usize = 4096;
    std::env::set_var(MAX_INFLIGHT_ENV, LIMIT.to_string());
    let h = lb::init(2, 4);
    std::env::remove_var(MAX_INFLIGHT_ENV);
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = rc::io(&ep, &s, &d);
    let mut syncs = Vec::with_capacity(LIMIT);
    for i in 0..LIMIT as u64 {
        let (r, sy) = rc::recv(h, &mut io, 64, 1000 + i, Some(ok_cb));
        assert_eq!(r, 0, "recv {i}");
        syncs.push(sy);
    }
    assert_eq!(live_syncs(), LIMIT);
    let before = loopback_ctl::counters();
    let (r, sy) = rc::recv(h, &mut io, 64, 99_999, Some(ok_cb));
    assert_eq!((r, sy), (ERR, null_mut()), "recv beyond capacity");
    let (r, sy, st) = rc::send(h, &mut io, 64, 99_998, 99_997);
    assert_eq!(
        (r, sy, st),
        (ERR, null_mut(), URMA_SUCCESS),
        "send beyond capacity"
    );
    let after = loopback_ctl::counters();
    assert_eq!(after.send_wrs, before.send_wrs, "nothing posted");
    assert_eq!(after.recv_wrs, before.recv_wrs, "nothing posted");
    assert_eq!(live_syncs(), LIMIT, "nothing registered");
    // Freeing one makes room again.
    assert_eq!(
        rc::cancel(h, syncs.pop().unwrap(), 1000 + LIMIT as u64 - 1).0,
        0
    );
    let (r, extra) = rc::recv(h, &mut io, 64, 99_999, Some(ok_cb));
    assert_eq!(r, 0);
    syncs.push(extra);
    for (i, sy) in syncs.into_iter().enumerate() {
        assert_eq!(rc::wait(h, sy, 0).0, 1, "sync {i}");
    }
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

// ---- a callback that calls back into the library for its own request ----

static CB_H: AtomicUsize = AtomicUsize::new(0);
static CB_SYNC: AtomicUsize = AtomicUsize::new(0);
static CB_WAIT: AtomicU32 = AtomicU32::new(7);
static CB_WAIT_T: AtomicU32 = AtomicU32::new(7);
static CB_DESTROY: AtomicU32 = AtomicU32::new(7);
static CB_CANCEL: AtomicU32 = AtomicU32::new(7);
static CB_CALLS: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn reentrant_cb(_ud: *mut c_void) -> i32 {
    CB_CALLS.fetch_add(1, Ordering::SeqCst);
    let h = CB_H.load(Ordering::SeqCst) as *mut c_void;
    let sy = CB_SYNC.load(Ordering::SeqCst) as *mut task_sync_t;
    let mut st = 0;
    // SAFETY: plain C-ABI calls with valid out-pointers.
    unsafe {
        CB_WAIT.store(wait_and_free_sync(h, sy, &mut st), Ordering::SeqCst);
        CB_WAIT_T.store(
            wait_and_free_sync_timeout(h, sy, -1, &mut st),
            Ordering::SeqCst,
        );
    }
    CB_DESTROY.store(os_transport_destroy(h), Ordering::SeqCst);
    0
}

unsafe extern "C" fn cancelling_cb(_ud: *mut c_void) -> i32 {
    let h = CB_H.load(Ordering::SeqCst) as *mut c_void;
    let mut sy = CB_SYNC.load(Ordering::SeqCst) as *mut task_sync_t;
    // SAFETY: valid pointer to a local.
    CB_CANCEL.store(
        unsafe { os_transport_cancel_tasks(h, &mut sy, 41) },
        Ordering::SeqCst,
    );
    0
}

#[test]
fn callback_reentering_for_its_own_request_gets_errors_not_deadlocks() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 4);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let mut s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    rc::fill(&mut s.mem, 5, 4096);
    let mut io = rc::io(&ep, &s, &d);
    CB_H.store(h as usize, Ordering::SeqCst);
    // 1. wait / destroy from inside the callback: ERR at once, sync left with the caller.
    let (r, rs) = rc::recv(h, &mut io, 4096, 40, Some(reentrant_cb));
    assert_eq!(r, 0);
    CB_SYNC.store(rs as usize, Ordering::SeqCst);
    let (r, ss, _) = rc::send(h, &mut io, 4096, 39, 40);
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, ss, 5000), (0, URMA_SUCCESS));
    assert_eq!(
        rc::wait(h, rs, 5000),
        (0, URMA_SUCCESS),
        "no deadlock, request completes"
    );
    assert_eq!(CB_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(
        CB_WAIT.load(Ordering::SeqCst),
        ERR,
        "wait on own request from its worker"
    );
    assert_eq!(
        CB_WAIT_T.load(Ordering::SeqCst),
        ERR,
        "timed wait on own request from its worker"
    );
    assert_eq!(
        CB_DESTROY.load(Ordering::SeqCst),
        ERR,
        "destroy from a worker"
    );
    assert!(rc::check(&d.mem, 5, 4096));
    // 2. cancel of its own request (with its sync) from inside the callback: done, sync consumed.
    let (r, rs) = rc::recv(h, &mut io, 4096, 41, Some(cancelling_cb));
    assert_eq!(r, 0);
    CB_SYNC.store(rs as usize, Ordering::SeqCst);
    let (r, ss, _) = rc::send(h, &mut io, 4096, 42, 41);
    assert_eq!(r, 0);
    assert_eq!(rc::wait(h, ss, 5000), (0, URMA_SUCCESS));
    let t = Instant::now();
    while CB_CANCEL.load(Ordering::SeqCst) == 7 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(CB_CANCEL.load(Ordering::SeqCst), 0);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(rc::wait(h, rs, 0).0, ERR, "the callback consumed the sync");
    assert_eq!(live_syncs(), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    assert_eq!(os_transport_destroy(h), 0);
}
