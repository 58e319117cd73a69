//! CPU clocks: the process's (getrusage) and its threads' (per-thread scheduler clocks).

use std::sync::atomic::Ordering;

use super::callbacks::shared;

/// User + system CPU time of the whole process (getrusage), ns.
pub(super) fn process_cpu_ns() -> u64 {
    // SAFETY: zeroed rusage is a valid out-buffer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// CPU time of thread `tid` of this process (the calling thread for `None`), ns; 0 if the
/// thread has gone. The clock id of another thread is the kernel's per-thread scheduler clock,
/// `(~tid << 3) | 6`, as `pthread_getcpuclockid` builds it.
pub(super) fn thread_cpu_ns(tid: Option<i32>) -> u64 {
    let clock = match tid {
        None => libc::CLOCK_THREAD_CPUTIME_ID,
        Some(t) => (!t << 3) | 6,
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the threads whose name starts with `prefix` (`ost_wkr_`: the library's workers,
/// named so by both libraries; `bench-`: the application's pollers), ns, and how many were found.
pub(crate) fn threads_cpu_ns(prefix: &str) -> (u64, u64) {
    let (mut ns, mut n) = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            ns += thread_cpu_ns(Some(tid));
            n += 1;
        }
    }
    (ns, n)
}

/// A snapshot of the CPU counters of a paced or idle window.
#[derive(Clone, Copy)]
pub(crate) struct CpuSnap {
    pub(crate) process: u64,
    pub(crate) workers: u64,
    pub(crate) pollers: u64,
    pub(crate) main: u64,
    pub(crate) poll_busy: u64,
}

/// Reads the counters; the process CPU time innermost (last at the `start` of a window, first at
/// its end), so that the window does not count the snapshot's own work (reading
/// `/proc/self/task`, 65 threads with 64 workers, costs about a millisecond).
pub(crate) fn cpu_snap(start: bool) -> CpuSnap {
    let s = shared();
    let early = (!start).then(process_cpu_ns);
    let mut c = CpuSnap {
        process: 0,
        workers: threads_cpu_ns("ost_wkr_").0,
        pollers: threads_cpu_ns("bench-poll").0 + threads_cpu_ns("bench-event").0,
        main: thread_cpu_ns(None),
        poll_busy: s.poll_busy_ns.load(Ordering::Relaxed),
    };
    c.process = early.unwrap_or_else(process_cpu_ns);
    c
}
