//! Re-entrancy of the application's callbacks (Rust library): a log callback and a
//! `notify_callback` may call every API function, from every place the library calls them, and
//! nothing deadlocks. Each case runs under a watchdog; the value each call returns is the one the
//! re-entrancy table of docs/abi.md states.
mod common;

use common::lb::{self, io, Io};
use compat_tests::oracle::ud;
use os_transport::abi::*;
use os_transport::ffi::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::Duration;
use urma_sys::*;

static LOCK: Mutex<()> = Mutex::new(());
/// The live instance's handle, readable from callbacks.
static HANDLE: AtomicUsize = AtomicUsize::new(0);
/// Fresh request ids for the calls made from callbacks.
static NEXT_ID: AtomicU64 = AtomicU64::new(0x7700_0000);
/// (api, value returned) of every call a callback made.
static CALLS: Mutex<Vec<(Api, i64)>> = Mutex::new(Vec::new());
/// Syncs handed out to callbacks (cancelled by the test afterwards unless destroyed).
static SYNCS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The API function a callback calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    LogReg,
    Init,
    RegJfc,
    Send,
    Recv,
    WakeUp,
    Wait,
    WaitTimeout,
    Cancel,
    Destroy,
}

const ALL: [Api; 10] = [
    Api::LogReg,
    Api::Init,
    Api::RegJfc,
    Api::Send,
    Api::Recv,
    Api::WakeUp,
    Api::Wait,
    Api::WaitTimeout,
    Api::Cancel,
    Api::Destroy,
];

/// What the log callback does: once, on the first line containing `needle`, call `api`.
struct Plan {
    needle: &'static str,
    api: Api,
    fired: bool,
}

static PLAN: Mutex<Option<Plan>> = Mutex::new(None);

/// Endpoints and buffers shared by every case (created once per process).
struct World {
    ep: lb::Ep,
    io: Mutex<Io>,
    _bufs: (lb::Buf, lb::Buf),
}

// SAFETY: the URMA handles and buffer addresses in `World` are created once and never freed; they
// are only passed to liburma and the library (which lock internally), and `io` is behind a mutex.
unsafe impl Send for World {}
// SAFETY: as above: shared access only reads handle values or goes through the mutex.
unsafe impl Sync for World {}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let ep = lb::ep();
        let s = lb::buf(&ep, 4096);
        let d = lb::buf(&ep, 4096);
        let io = Mutex::new(io(&ep, &s, &d));
        World {
            ep,
            io,
            _bufs: (s, d),
        }
    })
}

fn handle() -> *mut c_void {
    HANDLE.load(Ordering::SeqCst) as *mut c_void
}

/// A forged sync token: never one the library handed out.
fn stale_sync() -> *mut task_sync_t {
    0x5B00_0000_0010usize as *mut task_sync_t
}

/// Calls `api` with well-formed arguments and returns what it returned.
fn call(api: Api) -> i64 {
    let h = handle();
    let w = world();
    let r = match api {
        Api::LogReg => i64::from(os_transport_log_reg(-1, Some(on_log))),
        Api::Init => {
            let mut c = lb::cfg(2, 4);
            let mut h2: *mut c_void = null_mut();
            // SAFETY: live locals for the call.
            i64::from(unsafe { os_transport_init(null_mut(), &mut c, &mut h2) })
        }
        Api::RegJfc => i64::from(os_transport_reg_jfc(null_mut(), w.ep.jfc, h)),
        Api::Send => {
            let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
            let mut io = w.io.lock().unwrap();
            let (r, s, _) = lb::send(h, &mut io, 64, id, id + 0x10_0000);
            SYNCS.lock().unwrap().push(s as usize);
            i64::from(r)
        }
        Api::Recv => {
            let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
            let mut io = w.io.lock().unwrap();
            let (r, s) = lb::recv(h, &mut io, 64, id, Some(quiet_chunk));
            SYNCS.lock().unwrap().push(s as usize);
            i64::from(r)
        }
        Api::WakeUp => {
            // A completion of the application's own work: not one of the library's requests.
            let mut cr = cr(ud(0x1234_5678, false, 0), URMA_CR_SUCCESS);
            // SAFETY: a live CR for the call.
            i64::from(unsafe { os_transport_wake_up_task(h, (&mut cr as *mut urma_cr_t).cast()) })
        }
        Api::Wait => {
            let mut st = 0;
            // SAFETY: valid out-pointer; the sync is a plain value to the library.
            i64::from(unsafe { wait_and_free_sync(h, stale_sync(), &mut st) })
        }
        Api::WaitTimeout => i64::from(lb::wait(h, stale_sync(), 10).0),
        Api::Cancel => {
            let mut none: *mut task_sync_t = null_mut();
            // SAFETY: valid pointer to a NULL sync.
            i64::from(unsafe { os_transport_cancel_tasks(h, &mut none, 0x6600_0001) })
        }
        Api::Destroy => i64::from(os_transport_destroy(h)),
    };
    CALLS.lock().unwrap().push((api, r));
    r
}

/// What `call(api)` returns from inside a callback on an application thread (the poller, or the
/// thread calling init): every call behaves as from any other application thread.
fn expected_on_app_thread(api: Api) -> i64 {
    match api {
        Api::LogReg | Api::RegJfc | Api::Send | Api::Recv | Api::Cancel | Api::Destroy => 0,
        Api::Init => i64::from(ERR), // one instance per process
        Api::WakeUp => -1,           // not a pipeline completion
        Api::Wait | Api::WaitTimeout => i64::from(ERR), // the forged sync
    }
}

/// From a library worker: as on an application thread, except that destroy is refused (it would
/// join the calling worker).
fn expected_on_worker(api: Api) -> i64 {
    match api {
        Api::Destroy => i64::from(ERR),
        other => expected_on_app_thread(other),
    }
}

unsafe extern "C" fn on_log(_level: c_int, msg: *const c_char) {
    // SAFETY: the library passes a NUL-terminated line, valid during the call.
    let line = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    let api = {
        let mut p = PLAN.lock().unwrap();
        match p.as_mut() {
            Some(plan) if !plan.fired && line.contains(plan.needle) => {
                plan.fired = true;
                plan.api
            }
            _ => return,
        }
    };
    call(api);
}

unsafe extern "C" fn quiet_chunk(_ud: *mut c_void) -> i32 {
    0
}

/// Notify callback that fails its chunk (the worker then logs a WARN).
unsafe extern "C" fn failing_chunk(_ud: *mut c_void) -> i32 {
    -1
}

/// The API a `notify_callback` calls (once).
static NOTIFY_API: Mutex<Option<Api>> = Mutex::new(None);
static NOTIFY_FIRED: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn calling_chunk(_ud: *mut c_void) -> i32 {
    if !NOTIFY_FIRED.swap(true, Ordering::SeqCst) {
        if let Some(api) = *NOTIFY_API.lock().unwrap() {
            call(api);
        }
    }
    0
}

fn cr(user_ctx: u64, status: u32) -> urma_cr_t {
    // SAFETY: urma_cr_t is plain C data; all-zero is a valid value.
    let mut c: urma_cr_t = unsafe { std::mem::zeroed() };
    c.status = status;
    c.user_ctx = user_ctx;
    c.opcode = URMA_CR_OPC_SEND;
    c
}

/// Runs `f` on its own thread. If it does not finish within 10 s the library is deadlocked (its
/// locks stay held, so no later case could run either): the whole test process exits with a
/// failure at once instead of hanging.
fn watchdog(what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: the case panicked"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!("{what}: no return within 10 s (deadlock)");
            std::process::exit(101);
        }
    }
}

fn reset(plan: Option<Plan>) {
    CALLS.lock().unwrap().clear();
    SYNCS.lock().unwrap().clear();
    *PLAN.lock().unwrap() = plan;
    NOTIFY_FIRED.store(false, Ordering::SeqCst);
    assert_eq!(os_transport_log_reg(-1, Some(on_log)), 0);
}

/// Ends a case: releases what the callbacks left and destroys the instance unless a callback did.
fn finish(h: *mut c_void) {
    for s in SYNCS.lock().unwrap().drain(..) {
        let mut s = s as *mut task_sync_t;
        // SAFETY: valid pointer to a (possibly already released) sync value.
        let _ = unsafe { os_transport_cancel_tasks(h, &mut s, 0) };
    }
    let _ = os_transport_destroy(h);
    *PLAN.lock().unwrap() = None;
}

fn calls() -> Vec<(Api, i64)> {
    CALLS.lock().unwrap().clone()
}

fn init_instance() -> *mut c_void {
    let h = lb::init(2, 4);
    HANDLE.store(h as usize, Ordering::SeqCst);
    h
}

/// A log line delivered during `os_transport_init` (the instance lock is held while it logs).
#[test]
fn log_callback_during_init_may_call_every_api() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    for api in ALL {
        reset(Some(Plan {
            needle: "workers started",
            api,
            fired: false,
        }));
        // The callback needs the handle before init returns it: init writes it to HANDLE's
        // out-pointer first, and the line is delivered when init returns.
        watchdog(&format!("init, log callback calls {api:?}"), move || {
            let mut c = lb::cfg(2, 4);
            let out = HANDLE.as_ptr() as *mut *mut c_void;
            // SAFETY: HANDLE is a pointer-sized atomic used as the out-pointer; nothing else
            // touches it during init.
            assert_eq!(unsafe { os_transport_init(null_mut(), &mut c, out) }, 0);
        });
        assert_eq!(calls(), vec![(api, expected_on_app_thread(api))], "{api:?}");
        finish(handle());
    }
}

/// Lines logged by `os_transport_wake_up_task` while it holds request locks: an error completion
/// (ERROR) and a WRITE completion that does not match the pipeline (WARN).
#[test]
fn log_callback_during_wake_up_may_call_every_api() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    for (needle, status, chunk) in [
        ("request failed", 1u32, 0u32),
        ("does not match the WRITE", URMA_CR_SUCCESS, 1u32),
    ] {
        for api in ALL {
            reset(None);
            let h = init_instance();
            let sk = NEXT_ID.fetch_add(1, Ordering::SeqCst);
            let (r, sync, _) = lb::send(h, &mut world().io.lock().unwrap(), 3 << 20, sk, sk + 1);
            assert_eq!(r, 0);
            SYNCS.lock().unwrap().push(sync as usize);
            *PLAN.lock().unwrap() = Some(Plan {
                needle,
                api,
                fired: false,
            });
            let user_ctx = ud(sk, false, chunk);
            watchdog(
                &format!("wake_up ({needle}), log callback calls {api:?}"),
                move || {
                    let mut c = cr(user_ctx, status);
                    // SAFETY: a live CR for the call; the handle is a plain value.
                    unsafe {
                        os_transport_wake_up_task(handle(), (&mut c as *mut urma_cr_t).cast())
                    };
                },
            );
            assert_eq!(
                calls(),
                vec![(api, expected_on_app_thread(api))],
                "{needle}: {api:?}"
            );
            finish(h);
        }
    }
}

/// Transfers one 64-byte chunk with `cb` as the receiver's notify_callback; returns the recv's
/// wait result (the poller feeds every completion to the library meanwhile).
fn transfer(h: *mut c_void, cb: notify_callback_t) -> u32 {
    let w = world();
    let (stop, pj) = lb::poller(h as usize, w.ep.jfc as usize);
    let id = NEXT_ID.fetch_add(1, Ordering::SeqCst);
    let ck = id + 0x20_0000;
    let mut io = w.io.lock().unwrap();
    let (rr, rs) = lb::recv(h, &mut io, 64, ck, cb);
    assert_eq!(rr, 0);
    let (sr, ss, _) = lb::send(h, &mut io, 64, id, ck);
    drop(io);
    assert_eq!(sr, 0);
    let (rw, _) = lb::wait(h, rs, 5000);
    let _ = lb::wait(h, ss, 5000);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    rw
}

/// A WARN logged on a library worker (a notify_callback failed its chunk).
#[test]
fn log_callback_on_a_worker_may_call_every_api() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    for api in ALL {
        reset(None);
        let h = init_instance();
        *PLAN.lock().unwrap() = Some(Plan {
            needle: "notify_callback returned",
            api,
            fired: false,
        });
        watchdog(
            &format!("worker WARN, log callback calls {api:?}"),
            move || {
                assert_eq!(transfer(handle(), Some(failing_chunk)), ERR);
            },
        );
        assert!(
            lb::until(Duration::from_secs(5), || !calls().is_empty()),
            "{api:?}: the WARN was not delivered"
        );
        assert_eq!(calls(), vec![(api, expected_on_worker(api))], "{api:?}");
        finish(h);
    }
}

/// A notify_callback (on a library worker, no library lock held) may call every API function.
#[test]
fn notify_callback_may_call_every_api() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    for api in ALL {
        reset(None);
        *NOTIFY_API.lock().unwrap() = Some(api);
        let h = init_instance();
        watchdog(&format!("notify_callback calls {api:?}"), move || {
            assert_eq!(transfer(handle(), Some(calling_chunk)), 0);
        });
        assert_eq!(calls(), vec![(api, expected_on_worker(api))], "{api:?}");
        *NOTIFY_API.lock().unwrap() = None;
        finish(h);
    }
}

/// The sync a blocking notify_callback waits on, how it waits, and what its wait returned (with
/// how long after destroy started).
static BLOCK_ON: AtomicUsize = AtomicUsize::new(0);
static BLOCK_TIMED: AtomicBool = AtomicBool::new(false);
static BLOCK_SEEN: Mutex<Option<(u32, std::time::Instant)>> = Mutex::new(None);
/// Set to let `stuck_chunk` return.
static RELEASE: AtomicBool = AtomicBool::new(false);
/// Set by a blocking callback when it starts.
static STUCK_ENTERED: AtomicBool = AtomicBool::new(false);

/// Blocks in a wait on another worker's request (BLOCK_ON), untimed or with a 60 s timeout.
unsafe extern "C" fn blocking_chunk(_ud: *mut c_void) -> i32 {
    STUCK_ENTERED.store(true, Ordering::SeqCst);
    let h = handle();
    let s = BLOCK_ON.load(Ordering::SeqCst) as *mut task_sync_t;
    let mut st = 0;
    let r = if BLOCK_TIMED.load(Ordering::SeqCst) {
        // SAFETY: valid out-pointer; the sync is a plain value to the library.
        unsafe { wait_and_free_sync_timeout(h, s, 60_000, &mut st) }
    } else {
        // SAFETY: as above.
        unsafe { wait_and_free_sync(h, s, &mut st) }
    };
    *BLOCK_SEEN.lock().unwrap() = Some((r, std::time::Instant::now()));
    0
}

/// Blocks outside the library until the test sets RELEASE.
unsafe extern "C" fn stuck_chunk(_ud: *mut c_void) -> i32 {
    STUCK_ENTERED.store(true, Ordering::SeqCst);
    while !RELEASE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }
    0
}

/// Starts a transfer to a receive whose notify_callback is `cb` (bound to worker 0) and a second
/// receive (bound to worker 1) that never gets data; returns once `cb` runs.
fn callback_running(h: *mut c_void, cb: notify_callback_t, entered: impl Fn() -> bool) -> usize {
    let w = world();
    let mut io = w.io.lock().unwrap();
    let id = NEXT_ID.fetch_add(2, Ordering::SeqCst);
    let (r, _a) = lb::recv(h, &mut io, 64, id, cb);
    assert_eq!(r, 0);
    let (r, b) = lb::recv(h, &mut io, 64, id + 1, Some(quiet_chunk));
    assert_eq!(r, 0);
    BLOCK_ON.store(b as usize, Ordering::SeqCst);
    let (r, _s, _) = lb::send(h, &mut io, 64, id + 0x30_0000, id);
    assert_eq!(r, 0);
    drop(io);
    assert!(
        lb::until(Duration::from_secs(5), entered),
        "the callback did not start"
    );
    b as usize
}

/// Destroy while a notify_callback waits (untimed, then with a long timeout) on another worker's
/// request: the wait returns ERR as soon as destroy cancels that request, and destroy returns.
#[test]
fn destroy_wakes_a_callback_blocked_in_a_wait_and_returns() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    for timed in [false, true] {
        reset(None);
        *BLOCK_SEEN.lock().unwrap() = None;
        BLOCK_TIMED.store(timed, Ordering::SeqCst);
        let h = init_instance();
        let (stop, pj) = lb::poller(h as usize, world().ep.jfc as usize);
        STUCK_ENTERED.store(false, Ordering::SeqCst);
        callback_running(h, Some(blocking_chunk), || {
            STUCK_ENTERED.load(Ordering::SeqCst)
        });
        // Let the callback get from its first line into the wait.
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            BLOCK_SEEN.lock().unwrap().is_none(),
            "the callback is blocked"
        );
        let t0 = std::time::Instant::now();
        watchdog(
            &format!("destroy with a callback blocked in a wait (timed: {timed})"),
            move || {
                assert_eq!(os_transport_destroy(handle()), 0);
            },
        );
        let took = t0.elapsed();
        let (r, at) = BLOCK_SEEN
            .lock()
            .unwrap()
            .expect("the callback's wait returned");
        assert_eq!(
            r, ERR,
            "timed: {timed}: the blocked wait returns ERR (cancelled by destroy)"
        );
        assert!(
            at.duration_since(t0) < Duration::from_secs(2),
            "timed: {timed}: the wait returned {:?} after destroy started",
            at.duration_since(t0)
        );
        assert!(
            took < Duration::from_secs(2),
            "timed: {timed}: destroy took {took:?}"
        );
        stop.store(true, Ordering::Release);
        pj.join().unwrap();
        assert_eq!(
            os_transport::testing::live_syncs(),
            0,
            "everything released"
        );
    }
}

/// A notify_callback that does not return (blocked outside the library): destroy gives up on its
/// worker after the documented bound, says so at ERROR, and returns; the worker exits on its own
/// once the callback returns.
#[test]
fn destroy_returns_within_the_bound_when_a_callback_never_returns() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    world();
    reset(None);
    RELEASE.store(false, Ordering::SeqCst);
    STUCK_ENTERED.store(false, Ordering::SeqCst);
    let bound = Duration::from_millis(300);
    os_transport::testing::set_destroy_join_bound(bound);
    static ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    unsafe extern "C" fn errors(level: c_int, msg: *const c_char) {
        if level & 0xFF == 2 {
            // SAFETY: NUL-terminated line, valid during the call.
            let s = unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned();
            ERRORS.lock().unwrap().push(s);
        }
    }
    assert_eq!(os_transport_log_reg(2, Some(errors)), 0);
    let h = init_instance();
    let (stop, pj) = lb::poller(h as usize, world().ep.jfc as usize);
    callback_running(h, Some(stuck_chunk), || {
        STUCK_ENTERED.load(Ordering::SeqCst)
    });
    let t0 = std::time::Instant::now();
    watchdog("destroy with a callback that never returns", move || {
        assert_eq!(os_transport_destroy(handle()), 0);
    });
    let took = t0.elapsed();
    assert!(
        took >= bound,
        "destroy waited {took:?}, less than the bound"
    );
    assert!(
        took < bound + Duration::from_secs(2),
        "destroy took {took:?}"
    );
    let errs = ERRORS.lock().unwrap().clone();
    assert!(
        errs.iter().any(|l| l.contains("still running a callback")),
        "destroy reports the stuck worker: {errs:?}"
    );
    // The callback returns later: its worker exits without touching the destroyed instance, and
    // a new instance works.
    RELEASE.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    os_transport::testing::set_destroy_join_bound(os_transport::testing::DESTROY_JOIN_BOUND);
    let h = init_instance();
    assert_eq!(transfer(h, Some(quiet_chunk)), 0, "a new instance works");
    finish(h);
}
