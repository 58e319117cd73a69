//! End-to-end tests of the Rust library (linked as an rlib, calling its C exports) over the
//! loopback liburma.so.0. Every test that inits serialises on `LOCK` (one instance per process).
mod common;

use common::lb::{self, io, wait};
use compat_tests::loopback_ctl;
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::{inflight_requests, live_syncs};
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use urma_sys::*;

static LOCK: Mutex<()> = Mutex::new(());
static CHUNKS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static CB_RET: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn on_chunk(ud: *mut c_void) -> i32 {
    // SAFETY: the library passes a pointer to an os_transport_user_data_t, valid during the call.
    let v = unsafe { *(ud as *const u64) };
    CHUNKS.lock().unwrap().push(v);
    CB_RET.load(Ordering::SeqCst)
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    CHUNKS.lock().unwrap().clear();
    CB_RET.store(0, Ordering::SeqCst);
    g
}

#[test]
fn send_recv_roundtrip_all_sizes() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 16);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    for (i, &len) in [
        1u32,
        4096,
        DEFAULT_CHUNK_SIZE,
        DEFAULT_CHUNK_SIZE + 1,
        7 * DEFAULT_CHUNK_SIZE,
    ]
    .iter()
    .enumerate()
    {
        let mut s = lb::buf(&ep, len as usize);
        for (k, b) in s.mem.iter_mut().enumerate() {
            *b = (k as u32).wrapping_mul(2654435761).wrapping_add(i as u32) as u8;
        }
        let d = lb::buf(&ep, len as usize);
        let mut io = io(&ep, &s, &d);
        CHUNKS.lock().unwrap().clear();
        let ck = 0xABCDE12345 + i as u64;
        let (rr, rs) = lb::recv(h, &mut io, len, ck, Some(on_chunk));
        assert_eq!(rr, 0);
        let (sr, ss, st) = lb::send(h, &mut io, len, 0x123456789A + i as u64, ck);
        assert_eq!((sr, st), (0, URMA_SUCCESS), "send len {len}");
        assert_eq!(
            wait(h, ss, 10_000),
            (0, URMA_SUCCESS),
            "send wait len {len}"
        );
        assert_eq!(
            wait(h, rs, 10_000),
            (0, URMA_SUCCESS),
            "recv wait len {len}"
        );
        assert!(s.mem == d.mem, "data mismatch for len {len}");
        let n = len.div_ceil(DEFAULT_CHUNK_SIZE) as u64;
        let mut got = CHUNKS.lock().unwrap().clone();
        got.sort_by_key(|v| v >> 61);
        let want: Vec<u64> = (0..n)
            .map(|k| ck | (u64::from(k == n - 1) << 60) | (k << 61))
            .collect();
        assert_eq!(got, want, "callback user data for len {len}");
    }
    assert_eq!(os_transport_destroy(h), 0);
    stop.store(true, Ordering::Release);
    let seen = pj.join().unwrap();
    assert!(seen.iter().all(|&(st, _)| st == 0));
    assert_eq!(live_syncs(), 0);
}

#[test]
fn recv_completions_out_of_order() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 16);
    let len = 5 * DEFAULT_CHUNK_SIZE;
    let s = lb::buf(&ep, len as usize);
    let d = lb::buf(&ep, len as usize);
    let mut io = io(&ep, &s, &d);
    let (rr, rs) = lb::recv(h, &mut io, len, 77, Some(on_chunk));
    assert_eq!(rr, 0);
    let (sr, ss, _) = lb::send(h, &mut io, len, 78, 77);
    assert_eq!(sr, 0);
    // Manual poller: send-side CRs go through at once, receive-side CRs are kept and fed reversed.
    let mut held: Vec<urma_cr_t> = Vec::new();
    // SAFETY: zeroed CR buffer.
    let mut crs: [urma_cr_t; 16] = unsafe { std::mem::zeroed() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while held.len() < 5 && std::time::Instant::now() < deadline {
        // SAFETY: live JFC.
        let n = unsafe { urma_poll_jfc(ep.jfc, 16, crs.as_mut_ptr()) };
        for cr in crs.iter_mut().take(n.max(0) as usize) {
            // SAFETY: reading the flag byte of a polled CR.
            if unsafe { cr.flag.value } & urma_sys::flags::CR_FLAG_S_R != 0 {
                held.push(*cr);
            } else {
                // SAFETY: a polled CR.
                unsafe { os_transport_wake_up_task(h, (cr as *mut urma_cr_t).cast()) };
            }
        }
    }
    assert_eq!(held.len(), 5);
    assert_eq!(wait(h, ss, 5000), (0, URMA_SUCCESS));
    for cr in held.iter_mut().rev() {
        assert_eq!(
            // SAFETY: `cr` is an exclusive reference to a CR copied out of poll into `held`,
            // alive for the call (the library only reads it); `h` is the live instance.
            unsafe { os_transport_wake_up_task(h, (cr as *mut urma_cr_t).cast()) },
            0
        );
    }
    assert_eq!(wait(h, rs, 5000), (0, URMA_SUCCESS));
    let ids: Vec<u64> = CHUNKS.lock().unwrap().iter().map(|v| v >> 61).collect();
    assert_eq!(
        ids,
        vec![4, 3, 2, 1, 0],
        "callbacks run in completion order"
    );
    assert!(s.mem == d.mem);
    assert_eq!(os_transport_destroy(h), 0);
}

#[test]
fn timeout_cancel_destroy_and_stale_handles() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 4);
    let d = lb::buf(&ep, 4096);
    let s = lb::buf(&ep, 4096);
    let mut io = io(&ep, &s, &d);
    // timeout: nobody sends
    let (r, sy) = lb::recv(h, &mut io, 4096, 5, Some(on_chunk));
    assert_eq!(r, 0);
    assert_eq!(
        wait(h, sy, 0),
        (1, URMA_SUCCESS),
        "timeout 0 is an immediate check"
    );
    assert_eq!(
        wait(h, sy, 10),
        (u32::MAX, URMA_SUCCESS),
        "the sync is released after a timeout"
    );
    // cancel with the sync
    let (r, mut sy) = lb::recv(h, &mut io, 4096, 6, Some(on_chunk));
    assert_eq!(r, 0);
    // SAFETY: valid pointer.
    assert_eq!(unsafe { os_transport_cancel_tasks(h, &mut sy, 6) }, 0);
    assert!(sy.is_null());
    // D7: duplicate in-flight id (sk == ck across send and recv)
    let (r, live) = lb::recv(h, &mut io, 4096, 9, Some(on_chunk));
    assert_eq!(r, 0);
    let (r2, s2, _) = lb::send(h, &mut io, 4096, 9, 1);
    assert_eq!((r2, s2.is_null()), (u32::MAX, true), "D7");
    // D5: destroy with a waiter blocked
    let hv = h as usize;
    let lv = live as usize;
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        // SAFETY: plain syscall wrapper.
        tx.send(unsafe { libc::gettid() }).unwrap();
        wait(hv as *mut c_void, lv as *mut task_sync_t, -1)
    });
    let tid = rx.recv().unwrap();
    assert!(
        lb::until_blocked(tid, std::time::Duration::from_secs(5)),
        "waiter blocked in the wait"
    );
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(
        waiter.join().unwrap(),
        (u32::MAX, URMA_SUCCESS),
        "D5: waiter returns ERR"
    );
    assert_eq!(live_syncs(), 0, "nothing leaked");
    // calls after destroy
    assert_eq!(os_transport_destroy(h), u32::MAX);
    assert_eq!(wait(h, live, 0).0, u32::MAX);
    assert_eq!(lb::recv(h, &mut io, 4096, 10, Some(on_chunk)).0, u32::MAX);
    // SAFETY: valid (zeroed) CR.
    let mut cr: urma_cr_t = unsafe { std::mem::zeroed() };
    assert_eq!(
        // SAFETY: `cr` is a live, zero-initialised local CR that the library may read; `h` is
        // stale (destroyed above), which the library detects without dereferencing it.
        unsafe { os_transport_wake_up_task(h, (&mut cr as *mut urma_cr_t).cast()) },
        -1
    );
}

#[test]
fn d2_failed_callback_frees_and_d1_single_chunk() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 4);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = io(&ep, &s, &d);
    CB_RET.store(5, Ordering::SeqCst);
    let (r, rs) = lb::recv(h, &mut io, 100, 40, Some(on_chunk));
    assert_eq!(r, 0);
    let (r, ss, _) = lb::send(h, &mut io, 100, 41, 40);
    assert_eq!(r, 0, "D1: one-chunk send accepted");
    assert_eq!(wait(h, ss, 5000), (0, URMA_SUCCESS));
    assert_eq!(
        wait(h, rs, 5000),
        (u32::MAX, URMA_SUCCESS),
        "D2: failing callback -> ERR"
    );
    assert_eq!(live_syncs(), 0, "D2: sync freed");
    assert_eq!(os_transport_destroy(h), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
}

/// A send's arguments but the handle and the status out-parameter, and what is wrong with them.
type SendRow = (
    &'static str,
    *mut urma_jetty_info_t,
    *mut ost_buffer_info_t,
    *mut ost_buffer_info_t,
    u32,
    u64,
    u64,
    *mut *mut task_sync_t,
);

#[test]
fn bad_inputs() {
    let _g = serial();
    let ep = lb::ep();
    let mut c = lb::cfg(1, 4);
    let mut h: *mut c_void = 1 as *mut c_void;
    assert_eq!(
        // SAFETY: a NULL cfg is refused before any access; `h` is a live local out-pointer
        // (checked to be left untouched); a NULL urma_ctx is allowed (only stored).
        unsafe { os_transport_init(null_mut(), null_mut(), &mut h) },
        u32::MAX
    );
    assert_eq!(h as usize, 1);
    c.worker_thread_num = 0;
    // SAFETY: valid pointers.
    assert_eq!(unsafe { os_transport_init(null_mut(), &mut c, &mut h) }, 0);
    assert!(h.is_null(), "0 workers: success without a handle");
    let h = lb::init(1, 4);
    let mut h2: *mut c_void = null_mut();
    c.worker_thread_num = 1;
    assert_eq!(
        // SAFETY: `c` and `h2` are live locals for the call; a NULL urma_ctx is only stored.
        unsafe { os_transport_init(null_mut(), &mut c, &mut h2) },
        u32::MAX,
        "single instance"
    );
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = io(&ep, &s, &d);
    // SAFETY: every pointer argument is NULL, a live local/field of `io` (whose buffers and
    // loopback objects `s`, `d`, `ep` outlive the block), or a forged value (`8`, `0x1234`) that
    // the library rejects by its instance/sync tables or argument checks before any
    // dereference (that is what this test checks); `on_chunk` is a `'static` extern fn; no call
    // here starts a transfer, so nothing keeps a pointer beyond the block.
    unsafe {
        let mut sy: *mut task_sync_t = 1 as *mut task_sync_t;
        let mut st: urma_status_t = 9;
        assert_eq!(
            os_transport_send(
                null_mut(),
                &mut io.ji,
                &mut io.src,
                &mut io.dst,
                64,
                1,
                2,
                &mut sy,
                &mut st
            ),
            u32::MAX
        );
        assert!(sy.is_null() && st == 0, "out-parameters reset first");
        // A valid send (64 B, keys 1 and 2) with one argument broken per row.
        let (ji, src, dst) = (&raw mut io.ji, &raw mut io.src, &raw mut io.dst);
        let syp = &raw mut sy;
        let rows: [SendRow; 8] = [
            ("no jetty info", null_mut(), src, dst, 64, 1, 2, syp),
            ("no source", ji, null_mut(), dst, 64, 1, 2, syp),
            ("no destination", ji, src, null_mut(), 64, 1, 2, syp),
            ("no sync out-parameter", ji, src, dst, 64, 1, 2, null_mut()),
            ("length 0", ji, src, dst, 0, 1, 2, syp),
            (
                "length over 14 MiB",
                ji,
                src,
                dst,
                7 * DEFAULT_CHUNK_SIZE + 1,
                1,
                2,
                syp,
            ),
            ("server key of 41 bits", ji, src, dst, 64, 1 << 40, 2, syp),
            ("client key of 41 bits", ji, src, dst, 64, 1, 1 << 40, syp),
        ];
        for (what, ji, src, dst, len, sk, ck, sync) in rows {
            assert_eq!(
                os_transport_send(h, ji, src, dst, len, sk, ck, sync, &mut st),
                u32::MAX,
                "{what}"
            );
        }
        assert!(sy.is_null());
        assert_eq!(
            os_transport_recv(h, null_mut(), &mut io.dev, 64, 1, &mut sy, Some(on_chunk)),
            u32::MAX
        );
        assert_eq!(
            os_transport_recv(h, &mut io.host, null_mut(), 64, 1, &mut sy, Some(on_chunk)),
            u32::MAX
        );
        assert_eq!(
            os_transport_recv(
                h,
                &mut io.host,
                &mut io.dev,
                64,
                1,
                null_mut(),
                Some(on_chunk)
            ),
            u32::MAX
        );
        assert_eq!(
            os_transport_recv(h, &mut io.host, &mut io.dev, 64, 1, &mut sy, None),
            u32::MAX
        );
        assert_eq!(
            os_transport_recv(h, &mut io.host, &mut io.dev, 0, 1, &mut sy, Some(on_chunk)),
            u32::MAX
        );
        assert_eq!(
            os_transport_recv(
                h,
                &mut io.host,
                &mut io.dev,
                64,
                1 << 40,
                &mut sy,
                Some(on_chunk)
            ),
            u32::MAX
        );
        let mut nodev = ost_device_info_t {
            jfr: null_mut(),
            jetty: null_mut(),
            dst: null_mut(),
        };
        assert_eq!(
            os_transport_recv(h, &mut io.host, &mut nodev, 64, 1, &mut sy, Some(on_chunk)),
            u32::MAX
        );
        assert_eq!(os_transport_wake_up_task(h, null_mut()), -1);
        assert_eq!(os_transport_wake_up_task(null_mut(), 8 as *mut c_void), -1);
        assert_eq!(wait_and_free_sync(h, null_mut(), &mut st), u32::MAX);
        assert_eq!(
            wait_and_free_sync(h, 0x1234 as *mut task_sync_t, &mut st),
            u32::MAX,
            "forged sync"
        );
        assert_eq!(
            os_transport_cancel_tasks(null_mut(), null_mut(), 1),
            u32::MAX
        );
        assert_eq!(
            os_transport_cancel_tasks(h, null_mut(), 12345),
            0,
            "unknown id is fine"
        );
        assert_eq!(
            os_transport_reg_jfc(null_mut(), null_mut(), null_mut()),
            u32::MAX
        );
        assert_eq!(os_transport_reg_jfc(null_mut(), null_mut(), h), 0);
        assert_eq!(os_transport_log_reg(0, None), -1);
        assert_eq!(os_transport_destroy(null_mut()), u32::MAX);
    }
    assert_eq!(
        (live_syncs(), inflight_requests()),
        (0, 0),
        "no refused call registered anything"
    );
    assert_eq!(os_transport_destroy(h), 0);
}

#[test]
fn d3_error_completion_fails_the_send() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 4);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 3 * DEFAULT_CHUNK_SIZE as usize);
    let d = lb::buf(&ep, 3 * DEFAULT_CHUNK_SIZE as usize);
    let mut io = io(&ep, &s, &d);
    loopback_ctl::reset();
    loopback_ctl::fail_completion(1, 9); // the first send WR (WRITE chunk 0) completes with ACK_TIMEOUT_ERR
    let (r, ss, _) = lb::send(h, &mut io, 3 * DEFAULT_CHUNK_SIZE, 300, 301);
    assert_eq!(r, 0);
    assert_eq!(
        wait(h, ss, 5000),
        (u32::MAX, URMA_FAIL),
        "D3: failed completion fails the request"
    );
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
}

/// Sends 4096 bytes from `sk` to `ck` with no receive for `ck` registered, and waits until its
/// three completions (WRITE, SEND_IMM on both sides) went through wake_up_task (`handled`, counted
/// by the poller): the receive-side one was kept for a later recv (D4).
fn send_ahead(
    h: *mut c_void,
    io: &mut lb::Io,
    sk: u64,
    ck: u64,
    handled: &std::sync::atomic::AtomicUsize,
) {
    let base = handled.load(Ordering::Acquire);
    let (r, ss, _) = lb::send(h, io, 4096, sk, ck);
    assert_eq!(r, 0);
    assert_eq!(wait(h, ss, 5000).0, 0);
    assert!(lb::until(std::time::Duration::from_secs(5), || {
        handled.load(Ordering::Acquire) >= base + 3
    }));
}

#[test]
fn d4_early_completion_is_kept_and_d6_jfr_only_prefills() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 2);
    let (stop, pj, handled) = lb::poller_counted(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = io(&ep, &s, &d);
    // D6: jfr-only recv prefills capacity x 4 recv WRs on the JFR.
    io.dev.jetty = null_mut();
    io.ji.tjetty = ep.tjfr;
    let before = loopback_ctl::counters().recv_wrs;
    let (r, rs) = lb::recv(h, &mut io, 4096, 500, Some(on_chunk));
    assert_eq!(r, 0);
    assert_eq!(
        loopback_ctl::counters().recv_wrs - before,
        8,
        "D6: 2 x 4 recv WRs posted on the JFR"
    );
    let (r, ss, _) = lb::send(h, &mut io, 4096, 501, 500);
    assert_eq!(r, 0);
    assert_eq!(wait(h, ss, 5000).0, 0);
    assert_eq!(wait(h, rs, 5000).0, 0);
    // D4: the sender runs first; its notification reaches wake_up_task before the recv exists.
    send_ahead(h, &mut io, 503, 502, &handled);
    let (r, rs) = lb::recv(h, &mut io, 4096, 502, Some(on_chunk));
    assert_eq!(r, 0);
    assert_eq!(
        wait(h, rs, 5000),
        (0, URMA_SUCCESS),
        "D4: early completion delivered"
    );
    assert_eq!(os_transport_destroy(h), 0);
    stop.store(true, Ordering::Release);
    let seen = pj.join().unwrap();
    assert!(
        seen.iter().all(|&(_, r)| r == 0),
        "every CR was accepted: {seen:?}"
    );
}

#[test]
fn d8_first_chunk_failure_status_reported_by_wait_and_d11_cancel_by_id() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 2);
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = io(&ep, &s, &d);
    io.ji.jfs = null_mut(); // no queue: the first post fails with URMA_FAIL
    let (r, ss, st) = lb::send(h, &mut io, 64, 600, 601);
    assert_eq!((r, st), (u32::MAX, URMA_FAIL));
    assert!(!ss.is_null(), "the sync is handed back");
    assert_eq!(
        wait(h, ss, 1000),
        (u32::MAX, URMA_FAIL),
        "D8: wait reports the first-chunk status"
    );
    // D11: cancel by id without the sync completes that sync as cancelled.
    let (r, rs) = lb::recv(h, &mut io, 64, 602, Some(on_chunk));
    assert_eq!(r, 0);
    // SAFETY: NULL sync pointer is allowed.
    assert_eq!(unsafe { os_transport_cancel_tasks(h, null_mut(), 602) }, 0);
    assert_eq!(
        wait(h, rs, -1),
        (u32::MAX, URMA_SUCCESS),
        "D11: no hang, ERR at once"
    );
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

#[test]
fn d9_prefill_failure_releases_the_request() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 2);
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = io(&ep, &s, &d);
    // The 3rd recv WR is rejected.
    loopback_ctl::reset();
    loopback_ctl::fail_post(loopback_ctl::Queue::Recv, 3, URMA_EINVAL);
    let (r, rs) = lb::recv(h, &mut io, 64, 700, Some(on_chunk));
    assert_eq!(
        (r, rs),
        (u32::MAX, null_mut()),
        "prefill failure: ERR, no sync"
    );
    assert_eq!(
        loopback_ctl::counters().recv_wrs,
        2,
        "two prefill WRs went in before the failure"
    );
    assert_eq!(live_syncs(), 0, "D9: the request was released");
    // The id is free again and the prefill is retried (the jetty was not recorded).
    let (r, rs) = lb::recv(h, &mut io, 64, 700, Some(on_chunk));
    assert_eq!(r, 0);
    assert_eq!(loopback_ctl::counters().recv_wrs, 2 + 8);
    assert_eq!(live_syncs(), 1);
    assert_eq!(wait(h, rs, 0), (1, URMA_SUCCESS));
    assert_eq!(live_syncs(), 0);
    assert_eq!(os_transport_destroy(h), 0);
}

/// D4 with D9: a completion kept for a receive that is not registered yet survives a receive of
/// that key whose prefill fails; the retry gets it.
#[test]
fn d4_kept_completion_survives_a_failed_prefill_and_reaches_the_retry() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(1, 2);
    let (stop, pj, handled) = lb::poller_counted(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = io(&ep, &s, &d);
    // A first transfer records the jetty as the receive queue and fills its JFR with recv WRs.
    let (r, rs) = lb::recv(h, &mut io, 4096, 800, Some(on_chunk));
    assert_eq!(r, 0);
    let (r, ss, _) = lb::send(h, &mut io, 4096, 801, 800);
    assert_eq!(r, 0);
    assert_eq!(wait(h, ss, 5000).0, 0);
    assert_eq!(wait(h, rs, 5000).0, 0);
    // The sender of key 802 runs ahead: its notification is kept (no receive for 802 yet).
    send_ahead(h, &mut io, 803, 802, &handled);
    // The receive for 802 targets the JFR alone: a new receive queue, so it prefills, and the
    // first recv WR of that prefill is rejected.
    io.dev.jetty = null_mut();
    // The next recv WR is rejected.
    loopback_ctl::reset();
    loopback_ctl::fail_post(loopback_ctl::Queue::Recv, 1, URMA_EINVAL);
    let (r, rs) = lb::recv(h, &mut io, 4096, 802, Some(on_chunk));
    assert_eq!((r, rs), (u32::MAX, null_mut()), "prefill failure: ERR");
    // The retry prefills and gets the kept completion at once.
    let (r, rs) = lb::recv(h, &mut io, 4096, 802, Some(on_chunk));
    assert_eq!(r, 0);
    assert_eq!(
        wait(h, rs, 5000),
        (0, URMA_SUCCESS),
        "D4: the kept completion reached the retry"
    );
    assert_eq!(os_transport_destroy(h), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
}

/// (handle, own sync) for `self_waiting_cb`, and what it saw: (wait result, status, destroy
/// result, wait duration).
static SELF_WAIT: Mutex<(usize, usize)> = Mutex::new((0, 0));
static SELF_SEEN: Mutex<Vec<(u32, i32, u32, std::time::Duration)>> = Mutex::new(Vec::new());

unsafe extern "C" fn self_waiting_cb(_ud: *mut c_void) -> i32 {
    let (h, sy) = *SELF_WAIT.lock().unwrap();
    let t0 = std::time::Instant::now();
    let mut st: urma_status_t = -7;
    // SAFETY: the live handle and this request's own sync; valid out-pointer.
    let r = unsafe {
        wait_and_free_sync_timeout(h as *mut c_void, sy as *mut task_sync_t, 5000, &mut st)
    };
    let took = t0.elapsed();
    let d = os_transport_destroy(h as *mut c_void);
    SELF_SEEN.lock().unwrap().push((r, st, d, took));
    0
}

#[test]
fn d10_callback_waiting_on_its_own_request_gets_err() {
    let _g = serial();
    SELF_SEEN.lock().unwrap().clear();
    let ep = lb::ep();
    let h = lb::init(2, 2);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let s = lb::buf(&ep, 4096);
    let d = lb::buf(&ep, 4096);
    let mut io = io(&ep, &s, &d);
    let mut rs: *mut task_sync_t = null_mut();
    // SAFETY: live endpoints and valid out-pointer.
    let r = unsafe {
        os_transport_recv(
            h,
            &mut io.host,
            &mut io.dev,
            4096,
            800,
            &mut rs,
            Some(self_waiting_cb),
        )
    };
    assert_eq!(r, 0);
    *SELF_WAIT.lock().unwrap() = (h as usize, rs as usize);
    let (r, ss, _) = lb::send(h, &mut io, 4096, 801, 800);
    assert_eq!(r, 0);
    assert_eq!(wait(h, ss, 5000), (0, URMA_SUCCESS));
    assert_eq!(
        wait(h, rs, 5000),
        (0, URMA_SUCCESS),
        "D10: the sync stayed with its owner"
    );
    let seen = SELF_SEEN.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let (r, st, dr, took) = seen[0];
    assert_eq!(
        (r, st, dr),
        (u32::MAX, URMA_SUCCESS, u32::MAX),
        "wait and destroy from the callback: ERR"
    );
    assert!(
        took < std::time::Duration::from_secs(1),
        "no deadlock: {took:?}"
    );
    assert_eq!(live_syncs(), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    assert_eq!(os_transport_destroy(h), 0);
}

#[test]
fn d12_request_limit_posts_nothing_and_recovers() {
    let _g = serial();
    let ep = lb::ep();
    let cap = 64u64;
    std::env::set_var(os_transport::testing::MAX_INFLIGHT_ENV, cap.to_string());
    let h = lb::init(2, 2);
    std::env::remove_var(os_transport::testing::MAX_INFLIGHT_ENV);
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = io(&ep, &s, &d);
    // A get whose receive sync is never collected: once finished it does not count against the
    // limit, and its sync stays valid until destroy releases it.
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let (r, kept) = lb::recv(h, &mut io, 64, 0x0FFF, Some(on_chunk));
    assert_eq!(r, 0);
    let (r, ss, _) = lb::send(h, &mut io, 64, 0x0FFE, 0x0FFF);
    assert_eq!(r, 0);
    assert_eq!(wait(h, ss, 5000), (0, URMA_SUCCESS));
    assert!(
        lb::until(std::time::Duration::from_secs(5), || inflight_requests()
            == 0),
        "the get finished"
    );
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
    let mut syncs = Vec::new();
    for i in 0..cap {
        let (r, sy) = lb::recv(h, &mut io, 64, 0x1000 + i, Some(on_chunk));
        assert_eq!(r, 0, "recv {i}");
        syncs.push((0x1000 + i, sy));
    }
    assert_eq!(live_syncs(), cap as usize + 1);
    assert_eq!(inflight_requests(), cap as usize);
    let before = loopback_ctl::counters();
    let (r, sy) = lb::recv(h, &mut io, 64, 0x9999, Some(on_chunk));
    assert_eq!((r, sy), (u32::MAX, null_mut()), "D12: limit reached");
    let (r, ss, st) = lb::send(h, &mut io, 64, 0x9998, 0x9997);
    assert_eq!((r, ss, st), (u32::MAX, null_mut(), URMA_SUCCESS));
    let after = loopback_ctl::counters();
    assert_eq!(
        (after.recv_wrs, after.send_wrs),
        (before.recv_wrs, before.send_wrs),
        "nothing posted"
    );
    assert_eq!(live_syncs(), cap as usize + 1, "nothing registered");
    // One request ends: one new request fits.
    let (id, mut sy) = syncs.pop().unwrap();
    // SAFETY: valid pointer to a sync of this instance.
    assert_eq!(unsafe { os_transport_cancel_tasks(h, &mut sy, id) }, 0);
    let (r, sy) = lb::recv(h, &mut io, 64, 0x9999, Some(on_chunk));
    assert_eq!(r, 0);
    syncs.push((0x9999, sy));
    for (id, mut sy) in syncs {
        // SAFETY: as above.
        assert_eq!(unsafe { os_transport_cancel_tasks(h, &mut sy, id) }, 0);
    }
    assert_eq!(live_syncs(), 1, "the uncollected sync is kept");
    assert_eq!(inflight_requests(), 0);
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0, "destroy released the uncollected sync");
    assert_eq!(wait(h, kept, 0).0, u32::MAX);
}

/// More syncs than one table segment holds are served (the table grows), and destroy releases
/// every one of them.
#[test]
fn sync_table_grows_past_a_segment() {
    let _g = serial();
    let ep = lb::ep();
    let h = lb::init(2, 2);
    let s = lb::buf(&ep, 64);
    let d = lb::buf(&ep, 64);
    let mut io = io(&ep, &s, &d);
    let n = 4096 * 2 + 100;
    let mut syncs = Vec::new();
    for i in 0..n {
        let (r, sy) = lb::recv(h, &mut io, 64, 0x10_0000 + i, Some(on_chunk));
        assert_eq!(r, 0, "recv {i}");
        syncs.push((0x10_0000 + i, sy));
    }
    assert_eq!(live_syncs(), n as usize);
    // Half are cancelled (tokens in the newest segment too), the rest are released by destroy.
    for (id, mut sy) in syncs.into_iter().step_by(2) {
        // SAFETY: valid pointer to a sync of this instance.
        assert_eq!(unsafe { os_transport_cancel_tasks(h, &mut sy, id) }, 0);
    }
    assert_eq!(live_syncs(), n as usize / 2);
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0);
    assert_eq!(inflight_requests(), 0);
}
