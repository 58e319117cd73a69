//! Minimal loopback endpoints for the root end-to-end tests: one context, one JFC polled by a
//! poller thread that feeds every CR to `os_transport_wake_up_task`, a sender JFS, a receiver
//! jetty (sharing a JFR), and registered source/destination buffers.
#![allow(dead_code)]

use os_transport::abi::*;
use os_transport::ffi::*;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use testkit::{import_seg, register_seg, EndpointCfg, EndpointPair, Loopback, RecvKind, SendKind};
use urma_sys::*;

/// One loopback endpoint set on the testkit fixture ([`testkit::EndpointPair`]): a sender JFS
/// and a receiver jetty sharing a JFR, all completing to one JFC, with the jetty and the JFR
/// imported. The objects are never deleted (the library under test may still use them when a
/// test ends).
pub struct Ep {
    pub ctx: *mut urma_context_t,
    pub jfc: *mut urma_jfc_t,
    pub jfs: *mut urma_jfs_t,
    pub jfr: *mut urma_jfr_t,
    pub jetty: *mut urma_jetty_t,
    pub tjetty: *mut urma_target_jetty_t,
    pub tjfr: *mut urma_target_jetty_t,
}
// SAFETY: the fields are loopback URMA handles created once in `ep()` and never freed; they are
// only passed to liburma / os_transport, which validate and lock every handle internally.
unsafe impl Send for Ep {}
// SAFETY: `&Ep` only exposes the handle values; concurrent liburma calls on them are
// synchronised inside the loopback (registry RwLock, per-queue mutexes).
unsafe impl Sync for Ep {}

pub struct Buf {
    pub mem: Vec<u8>,
    pub tseg: *mut urma_target_seg_t,
    pub imported: *mut urma_target_seg_t,
}

pub fn ep() -> Ep {
    let lb = Loopback::get();
    let cfg = EndpointCfg {
        send: SendKind::Jfs,
        recv: RecvKind::JettySharedJfr,
        jfc_depth: 4096,
        sq_depth: 1024,
        rq_depth: 1024,
        event_mode: false,
        shared_cq: true,
        import_jfr: true,
    };
    let pair: &'static EndpointPair = Box::leak(Box::new(EndpointPair::new(lb, &cfg)));
    Ep {
        ctx: lb.ctx,
        jfc: pair.receiver.cq.jfc,
        jfs: pair.sender.jfs,
        jfr: pair.receiver.jfr,
        jetty: pair.receiver.jetty,
        tjetty: pair.sender.tjetty,
        tjfr: pair.sender.tjfr,
    }
}

/// A registered buffer of `len` bytes (at least one), with read/write access and no token, and
/// its import. Like the [`Ep`] objects, the segments stay registered.
pub fn buf(_ep: &Ep, len: usize) -> Buf {
    let lb = Loopback::get();
    let mut mem = vec![0u8; len.max(1)];
    let access = URMA_ACCESS_READ | URMA_ACCESS_WRITE;
    // SAFETY: `mem` is returned in the Buf; its heap buffer does not move with the Vec.
    let tseg = unsafe { register_seg(lb, mem.as_mut_ptr(), mem.len(), None, access) };
    // SAFETY: tseg was just registered on the fixture context.
    let imported = unsafe { import_seg(lb, tseg, None, 0) };
    Buf {
        mem,
        tseg,
        imported,
    }
}

/// Join handle of a poller: every CR's (status, wake_up_task result).
pub type PollerJoin = std::thread::JoinHandle<Vec<(u32, i32)>>;

/// Poller: feeds every CR of `jfc` to wake_up_task until stopped. Returns (stop flag, join).
pub fn poller(handle: usize, jfc: usize) -> (Arc<AtomicBool>, PollerJoin) {
    let (stop, j, _) = poller_counted(handle, jfc);
    (stop, j)
}

/// [`poller`] that also counts the CRs it has handed to wake_up_task (counted after the call).
pub fn poller_counted(
    handle: usize,
    jfc: usize,
) -> (Arc<AtomicBool>, PollerJoin, Arc<AtomicUsize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let j = std::thread::spawn(move || {
        let mut seen = Vec::new();
        // SAFETY: zeroed CR array is a valid out-buffer.
        let mut crs: [urma_cr_t; 16] = unsafe { std::mem::zeroed() };
        while !s.load(Ordering::Acquire) {
            // SAFETY: live JFC, valid buffer of 16 CRs.
            let n = unsafe { urma_poll_jfc(jfc as *mut urma_jfc_t, 16, crs.as_mut_ptr()) };
            if n <= 0 {
                std::thread::sleep(std::time::Duration::from_micros(200));
                continue;
            }
            for cr in &mut crs[..n as usize] {
                // SAFETY: a CR we just polled.
                let r = unsafe {
                    os_transport_wake_up_task(handle as *mut c_void, (cr as *mut urma_cr_t).cast())
                };
                seen.push((cr.status, r));
                d.fetch_add(1, Ordering::AcqRel);
            }
        }
        seen
    });
    (stop, j, done)
}

/// Awaits `f()` for at most `t`.
pub fn until(t: std::time::Duration, f: impl Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + t;
    while !f() {
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    true
}

/// Awaits thread `tid` of this process being blocked (state `S`, e.g. in a condvar wait).
pub fn until_blocked(tid: i32, t: std::time::Duration) -> bool {
    let path = format!("/proc/self/task/{tid}/stat");
    until(t, || {
        std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('S')))
            .unwrap_or(false)
    })
}

pub fn cfg(workers: u32, cap: u32) -> os_transport_cfg_t {
    os_transport_cfg_t {
        urma_event_mode: false,
        reserved1: [0; 3],
        worker_thread_num: workers,
        jfce: std::ptr::null_mut(),
        jfc: std::ptr::null_mut(),
        recv_queue_capacity: cap,
        reserved2: [0; 9],
    }
}

pub fn init(workers: u32, cap: u32) -> *mut c_void {
    // Every earlier test of this process took the library's locks in rank order (checked in
    // builds with debug assertions; an export's panic boundary would turn an inversion's panic
    // into an error return, which a test expecting an error would not notice).
    assert_eq!(
        os_transport::testing::lock_order_violations(),
        0,
        "lock order violated (the panic message is above)"
    );
    let mut c = cfg(workers, cap);
    let mut h: *mut c_void = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: `c` and `h` are live locals for the call; the library copies the cfg and only
        // stores the urma_ctx argument, which may be NULL (contract §1.2).
        unsafe { os_transport_init(std::ptr::null_mut(), &mut c, &mut h) },
        0
    );
    assert!(!h.is_null());
    h
}

/// The API arguments of one transfer from `s` (sender side) to `d` (receiver side) over `ep`.
pub struct Io {
    pub ji: urma_jetty_info_t,
    pub src: ost_buffer_info_t,
    pub dst: ost_buffer_info_t,
    pub host: ost_buffer_info_t,
    pub dev: ost_device_info_t,
}

pub fn io(ep: &Ep, s: &Buf, d: &Buf) -> Io {
    Io {
        ji: urma_jetty_info_t {
            jfs: ep.jfs,
            jetty: std::ptr::null_mut(),
            tjetty: ep.tjetty,
            jetty_mode: JETTY_MODE_DUPLEX,
        },
        src: ost_buffer_info_t {
            addr: s.mem.as_ptr() as u64,
            tseg: s.tseg,
        },
        dst: ost_buffer_info_t {
            addr: d.mem.as_ptr() as u64,
            tseg: d.imported,
        },
        host: ost_buffer_info_t {
            addr: d.mem.as_ptr() as u64,
            tseg: d.tseg,
        },
        dev: ost_device_info_t {
            jfr: ep.jfr,
            jetty: ep.jetty,
            dst: d.mem.as_ptr() as *mut std::ffi::c_void,
        },
    }
}

/// `os_transport_send`: (return, sync, status).
pub fn send(
    h: *mut c_void,
    io: &mut Io,
    len: u32,
    sk: u64,
    ck: u64,
) -> (u32, *mut task_sync_t, i32) {
    let mut sync: *mut task_sync_t = null_mut();
    let mut st: urma_status_t = -7;
    // SAFETY: every pointer refers to a live local or to `io`, whose buffers outlive the request;
    // a stale or foreign `h` is a plain value the library validates.
    let r = unsafe {
        os_transport_send(
            h,
            &mut io.ji,
            &mut io.src,
            &mut io.dst,
            len,
            sk,
            ck,
            &mut sync,
            &mut st,
        )
    };
    (r, sync, st)
}

/// `os_transport_recv`: (return, sync).
pub fn recv(
    h: *mut c_void,
    io: &mut Io,
    len: u32,
    ck: u64,
    cb: notify_callback_t,
) -> (u32, *mut task_sync_t) {
    let mut sync: *mut task_sync_t = null_mut();
    // SAFETY: as for `send`.
    let r = unsafe { os_transport_recv(h, &mut io.host, &mut io.dev, len, ck, &mut sync, cb) };
    (r, sync)
}

/// `wait_and_free_sync_timeout`: (return, status).
pub fn wait(h: *mut c_void, s: *mut task_sync_t, ms: i64) -> (u32, i32) {
    let mut st: urma_status_t = -7;
    // SAFETY: valid out-pointer; the sync is a plain value to the library.
    let r = unsafe { wait_and_free_sync_timeout(h, s, ms, &mut st) };
    (r, st)
}
