//! The application's pollers: one thread busy-polling both JFCs, or one thread per JFC blocked in `urma_wait_jfc`, handing every CR to `os_transport_wake_up_task`.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::callbacks::{now_ns, shared, stamp_index};
use super::cpu::thread_cpu_ns;
use testkit::{CrExt, EndpointPair};
use urma_sys as u;

pub(crate) struct Pollers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    wake_errors: Arc<AtomicU64>,
    poll_errors: Arc<AtomicU64>,
}

#[derive(Clone, Copy)]
pub(crate) struct WakeFn(pub(crate) unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int);

pub(super) fn handle_crs(crs: &mut [u::urma_cr_t], h: usize, wake: WakeFn, errs: &AtomicU64) {
    let s = shared();
    if crs.is_empty() {
        return;
    }
    let split = s.split_cpu.load(Ordering::Relaxed);
    let t0 = if split { thread_cpu_ns(None) } else { 0 };
    for cr in crs.iter_mut() {
        if cr.is_recv() {
            let imm = cr.imm();
            // Keys stay below 2^20, where the transport encoding of a request id is the identity.
            let rid = imm & ((1u64 << 60) - 1);
            s.stamps[stamp_index(rid, imm >> 61)].store(now_ns(s), Ordering::Release);
        }
        // SAFETY: h is the live instance handle; cr is a CR we polled.
        let r = unsafe { (wake.0)(h as *mut c_void, (cr as *mut u::urma_cr_t).cast()) };
        if r != 0 {
            errs.fetch_add(1, Ordering::Relaxed);
        }
    }
    if split {
        let dt = thread_cpu_ns(None).saturating_sub(t0);
        s.poll_busy_ns.fetch_add(dt, Ordering::Relaxed);
    }
}

impl Pollers {
    pub(crate) fn start(pair: &EndpointPair, h: *mut c_void, wake: WakeFn, event: bool) -> Pollers {
        let stop = Arc::new(AtomicBool::new(false));
        let wake_errors = Arc::new(AtomicU64::new(0));
        let poll_errors = Arc::new(AtomicU64::new(0));
        let h = h as usize;
        let cqs = [pair.sender.cq, pair.receiver.cq];
        let mut threads = Vec::new();
        if !event {
            let (stop, we, pe) = (stop.clone(), wake_errors.clone(), poll_errors.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("bench-poll".into())
                    .spawn(move || {
                        let cqs = cqs;
                        let mut buf = vec![u::urma_cr_t::default(); 32];
                        let mut idle = 0u32;
                        loop {
                            let stopping = stop.load(Ordering::Acquire);
                            let mut got = 0;
                            for cq in &cqs {
                                // SAFETY: live JFC; buf has room for 32 CRs.
                                let n = unsafe { u::urma_poll_jfc(cq.jfc, 32, buf.as_mut_ptr()) };
                                if n < 0 {
                                    pe.fetch_add(1, Ordering::Relaxed);
                                    continue;
                                }
                                handle_crs(&mut buf[..n as usize], h, wake, &we);
                                got += n;
                            }
                            if stopping && got == 0 {
                                break;
                            }
                            if got == 0 {
                                idle = idle.saturating_add(1);
                                if idle < 64 {
                                    std::hint::spin_loop();
                                } else {
                                    std::thread::yield_now();
                                }
                            } else {
                                idle = 0;
                            }
                        }
                    })
                    .expect("spawn poller"),
            );
        } else {
            for cq in cqs {
                let (stop, we, pe) = (stop.clone(), wake_errors.clone(), poll_errors.clone());
                threads.push(
                    std::thread::Builder::new()
                        .name("bench-event".into())
                        .spawn(move || {
                            let cq = cq;
                            let mut buf = vec![u::urma_cr_t::default(); 32];
                            let drain = |buf: &mut [u::urma_cr_t]| loop {
                                // SAFETY: live JFC; buf has room for 32 CRs.
                                let n = unsafe { u::urma_poll_jfc(cq.jfc, 32, buf.as_mut_ptr()) };
                                if n <= 0 {
                                    if n < 0 {
                                        pe.fetch_add(1, Ordering::Relaxed);
                                    }
                                    return;
                                }
                                handle_crs(&mut buf[..n as usize], h, wake, &we);
                            };
                            // SAFETY: live JFC.
                            unsafe { u::urma_rearm_jfc(cq.jfc, false) };
                            loop {
                                let stopping = stop.load(Ordering::Acquire);
                                let mut got = [std::ptr::null_mut(); 1];
                                // SAFETY: live JFCE; room for one JFC handle.
                                let n =
                                    unsafe { u::urma_wait_jfc(cq.jfce, 1, 20, got.as_mut_ptr()) };
                                if n > 0 {
                                    drain(&mut buf);
                                    let mut nev = [n as u32];
                                    // SAFETY: one JFC handle and one count.
                                    unsafe {
                                        u::urma_ack_jfc(got.as_mut_ptr(), nev.as_mut_ptr(), 1);
                                        u::urma_rearm_jfc(cq.jfc, false);
                                    }
                                    drain(&mut buf);
                                } else if n < 0 {
                                    pe.fetch_add(1, Ordering::Relaxed);
                                }
                                if stopping {
                                    drain(&mut buf);
                                    break;
                                }
                            }
                        })
                        .expect("spawn event poller"),
                );
            }
        }
        Pollers {
            stop,
            threads,
            wake_errors,
            poll_errors,
        }
    }

    pub(crate) fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads {
            let _ = t.join();
        }
        (
            self.wake_errors.load(Ordering::Relaxed),
            self.poll_errors.load(Ordering::Relaxed),
        )
    }
}
