//! Divergence D15: the send pipeline step (SEND_IMM k, then WRITE k+1) runs on the thread that
//! delivers WRITE k's completion (`os_transport_wake_up_task`), not on the bound worker. Pinned by
//! the observable consequence: a send completes while its only worker is blocked in a slow
//! `notify_callback` (legacy: the send tasks queue behind the callback).
mod common;

use common::lb;
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::live_syncs;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use urma_sys::*;

static IN_CB: AtomicBool = AtomicBool::new(false);
static RELEASE: AtomicBool = AtomicBool::new(false);

unsafe extern "C" fn slow_cb(_ud: *mut c_void) -> i32 {
    IN_CB.store(true, Ordering::SeqCst);
    while !RELEASE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    0
}

fn wait(h: *mut c_void, s: *mut task_sync_t, ms: i64) -> (u32, i32) {
    let mut st: urma_status_t = -7;
    // SAFETY: valid out-pointer.
    let r = unsafe { wait_and_free_sync_timeout(h, s, ms, &mut st) };
    (r, st)
}

#[test]
fn d15_send_progresses_while_the_worker_runs_a_slow_callback() {
    let ep = lb::ep();
    let h = lb::init(1, 4);
    let (stop, pj) = lb::poller(h as usize, ep.jfc as usize);
    let len = 3 * DEFAULT_CHUNK_SIZE;
    let s = lb::buf(&ep, len as usize);
    let d = lb::buf(&ep, len as usize);
    let mut ji = urma_jetty_info_t {
        jfs: ep.jfs,
        jetty: null_mut(),
        tjetty: ep.tjetty,
        jetty_mode: JETTY_MODE_DUPLEX,
    };
    let mut src = ost_buffer_info_t {
        addr: s.mem.as_ptr() as u64,
        tseg: s.tseg,
    };
    let mut dst = ost_buffer_info_t {
        addr: d.mem.as_ptr() as u64,
        tseg: d.imported,
    };
    let mut host = ost_buffer_info_t {
        addr: d.mem.as_ptr() as u64,
        tseg: d.tseg,
    };
    let mut dev = ost_device_info_t {
        jfr: ep.jfr,
        jetty: ep.jetty,
        dst: d.mem.as_ptr() as *mut c_void,
    };
    let send = |ji: &mut urma_jetty_info_t,
                src: &mut ost_buffer_info_t,
                dst: &mut ost_buffer_info_t,
                len: u32,
                sk: u64,
                ck: u64| {
        let mut sync: *mut task_sync_t = null_mut();
        let mut st: urma_status_t = -7;
        // SAFETY: valid pointers for the call.
        let r = unsafe { os_transport_send(h, ji, src, dst, len, sk, ck, &mut sync, &mut st) };
        assert_eq!((r, st), (0, URMA_SUCCESS));
        sync
    };
    // Request A: a one-chunk transfer whose callback blocks the only worker.
    let mut rs_a: *mut task_sync_t = null_mut();
    // SAFETY: valid pointers for the call.
    let r = unsafe {
        os_transport_recv(
            h,
            &mut host,
            &mut dev,
            4096,
            0x15A,
            &mut rs_a,
            Some(slow_cb),
        )
    };
    assert_eq!(r, 0);
    let ss_a = send(&mut ji, &mut src, &mut dst, 4096, 0x15B, 0x15A);
    assert!(lb::until(Duration::from_secs(5), || IN_CB.load(Ordering::SeqCst)));
    // Request B: a three-chunk send; every step after WRITE 0 needs a wake-up.
    let ss_b = send(&mut ji, &mut src, &mut dst, len, 0x15C, 0x15D);
    assert_eq!(
        wait(h, ss_b, 5000),
        (0, URMA_SUCCESS),
        "D15: the send pipeline does not wait for the worker"
    );
    assert!(!RELEASE.load(Ordering::SeqCst) && IN_CB.load(Ordering::SeqCst));
    RELEASE.store(true, Ordering::SeqCst);
    assert_eq!(wait(h, ss_a, 5000), (0, URMA_SUCCESS));
    assert_eq!(wait(h, rs_a, 5000), (0, URMA_SUCCESS));
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0);
    stop.store(true, Ordering::Release);
    pj.join().unwrap();
}
