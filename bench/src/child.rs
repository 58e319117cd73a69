//! The child process of a cell (`ostbench cell --kind KIND ...`): one library, one
//! configuration, one measurement. Prints exactly one `RESULT key=value ...` line on stdout (or
//! `ERROR ...` and a non-zero exit status when the measurement itself broke). Which measurement a
//! kind is belongs to its cell (`crate::cells::registry`); this module is what they share: the
//! options ([`CellCfg`]), the callbacks and their counters, library loading, the application's
//! pollers, the request driver, CPU clocks, and the one-process harness ([`one_process`]).
//!
//! Workload: a closed loop of send + recv pairs with `depth` pairs in flight. Per pair the
//! submitter (main thread) calls `os_transport_recv(ck)` then `os_transport_send(sk, ck)` (the
//! recv is registered first, so the C reference never sees an early SEND_WITH_IMM) and, once
//! `depth` pairs are outstanding, waits FIFO on the oldest pair (`wait_and_free_sync` on its send
//! sync, then its recv sync). Completions are fed to `os_transport_wake_up_task` by the
//! application's poller: one thread busy-polling both JFCs (poll mode; idle spins then
//! `sched_yield`), or one thread per JFC blocked in `urma_wait_jfc` (event mode).
//!
//! Paced windows replace the closed loop by an open-loop schedule of R pairs/s (see
//! [`Driver::paced`]).
//!
//! Latency sample = time from the poller holding a receive CR (just before it calls
//! `os_transport_wake_up_task`) to the start of `notify_callback` for that chunk, i.e. the
//! library's hand-off from the polling thread to its worker and the callback dispatch.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use testkit::os_transport::{
    os_transport_cfg_t, ost_buffer_info_t, ost_device_info_t, task_sync_t, urma_jetty_info_t,
    DEFAULT_CHUNK_SIZE,
};
use testkit::{
    loopback_ctl as ctl, Buffer, CrExt, EndpointCfg, EndpointPair, ImportedSeg, Loopback,
    OsTransportLib, PairArgs, RecvKind, SegArgs, SendKind,
};
use urma_sys as u;

extern "C" {
    fn ostbench_on_valgrind() -> c_int;
}

/// Cell parameters (command line of `ostbench cell`).
#[derive(Debug, Clone)]
pub struct CellCfg {
    /// The measurement (`--kind`), one of a registered cell's.
    pub kind: String,
    pub lib: PathBuf,
    pub len: u32,
    pub depth: usize,
    pub workers: u32,
    pub nocopy: bool,
    pub event: bool,
    /// Timed window (requests/s, paced, idle, two-process).
    pub secs: f64,
    /// Requests in the window (allocations, callgrind).
    pub requests: u64,
    pub warmup: u64,
    /// Offered load in pairs/s (paced).
    pub rate: u64,
}

impl CellCfg {
    pub fn parse(args: &[String]) -> Result<CellCfg, String> {
        let mut c = CellCfg {
            kind: "tput".into(),
            lib: PathBuf::new(),
            len: DEFAULT_CHUNK_SIZE + 1,
            depth: 1,
            workers: 1,
            nocopy: true,
            event: false,
            secs: 0.5,
            requests: 200,
            warmup: 0,
            rate: 0,
        };
        let mut it = args.iter();
        while let Some(k) = it.next() {
            let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
            let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{k} {v}: {e}"));
            match k.as_str() {
                "--kind" => c.kind = v.clone(),
                "--lib" => c.lib = PathBuf::from(v),
                "--len" => c.len = num(v)? as u32,
                "--depth" => c.depth = num(v)? as usize,
                "--workers" => c.workers = num(v)? as u32,
                "--copy" => c.nocopy = num(v)? == 0,
                "--event" => c.event = num(v)? != 0,
                "--secs" => c.secs = v.parse().map_err(|e| format!("--secs {v}: {e}"))?,
                "--requests" => c.requests = num(v)?,
                "--warmup" => c.warmup = num(v)?,
                "--rate" => c.rate = num(v)?,
                _ => return Err(format!("unknown option {k}")),
            }
        }
        if c.lib.as_os_str().is_empty() {
            return Err("--lib is required".into());
        }
        if c.depth == 0 || c.depth > 1024 || c.workers == 0 || c.len == 0 {
            return Err("bad depth/workers/len".into());
        }
        if c.warmup == 0 {
            c.warmup = (4 * c.depth as u64).max(32);
        }
        Ok(c)
    }
}

// ---- state shared with the C callbacks (notify_callback and log callback take no context)

const STAMP_SLOTS: usize = 4096;
const SAMPLE_CAP: usize = 1 << 20;

pub(crate) struct Shared {
    base: Instant,
    /// Poll time of the receive CR of (client_key % STAMP_SLOTS, chunk_id), ns since `base`.
    stamps: Box<[AtomicU64]>,
    samples: Box<[AtomicU64]>,
    nsamples: AtomicUsize,
    record: AtomicBool,
    pub(crate) chunks: AtomicU64,
    pub(crate) cb_errors: AtomicU64,
    logs: AtomicU64,
    log_errors: AtomicU64,
    /// Paced cells: the pollers measure the CPU time they spend handing CRs to the library, so
    /// that the rest of their time (the application's own polling loop or event wait, and in poll
    /// mode its idle spinning) can be told apart.
    split_cpu: AtomicBool,
    poll_busy_ns: AtomicU64,
}

pub(crate) fn shared() -> &'static Shared {
    static S: OnceLock<Shared> = OnceLock::new();
    S.get_or_init(|| Shared {
        base: Instant::now(),
        stamps: (0..STAMP_SLOTS * 8).map(|_| AtomicU64::new(0)).collect(),
        samples: (0..SAMPLE_CAP).map(|_| AtomicU64::new(0)).collect(),
        nsamples: AtomicUsize::new(0),
        record: AtomicBool::new(false),
        chunks: AtomicU64::new(0),
        cb_errors: AtomicU64::new(0),
        logs: AtomicU64::new(0),
        log_errors: AtomicU64::new(0),
        split_cpu: AtomicBool::new(false),
        poll_busy_ns: AtomicU64::new(0),
    })
}

/// Starts (clearing the samples) or stops the recording of latency samples.
pub(crate) fn record_latencies(on: bool) {
    let s = shared();
    if on {
        s.nsamples.store(0, Ordering::Relaxed);
    }
    s.record.store(on, Ordering::Release);
}

/// Whether the pollers measure the CPU time of their calls into the library (paced windows).
pub(crate) fn split_poller_cpu(on: bool) {
    shared().split_cpu.store(on, Ordering::Relaxed);
}

fn now_ns(s: &Shared) -> u64 {
    s.base.elapsed().as_nanos() as u64
}

fn stamp_index(rid: u64, chunk: u64) -> usize {
    (rid as usize % STAMP_SLOTS) * 8 + (chunk as usize & 7)
}

unsafe extern "C" fn on_chunk(ud: *mut c_void) -> c_int {
    let s = shared();
    let t1 = now_ns(s);
    if ud.is_null() {
        s.cb_errors.fetch_add(1, Ordering::Relaxed);
        return 0;
    }
    // SAFETY: the library passes a pointer to an os_transport_user_data_t (a u64), valid
    // during the call.
    let v = unsafe { *(ud as *const u64) };
    let rid = v & ((1u64 << 60) - 1);
    let chunk = v >> 61;
    if s.record.load(Ordering::Relaxed) {
        let t0 = s.stamps[stamp_index(rid, chunk)].load(Ordering::Acquire);
        if t0 != 0 && t1 >= t0 {
            let i = s.nsamples.fetch_add(1, Ordering::Relaxed);
            if i < SAMPLE_CAP {
                s.samples[i].store(t1 - t0, Ordering::Relaxed);
            }
        }
    }
    s.chunks.fetch_add(1, Ordering::Relaxed);
    0
}

unsafe extern "C" fn on_log(level: c_int, _msg: *const c_char) {
    let s = shared();
    s.logs.fetch_add(1, Ordering::Relaxed);
    // ERROR = 0xFF02
    if level & 0xFF == 2 {
        s.log_errors.fetch_add(1, Ordering::Relaxed);
    }
}

// ---- library loading

/// dlopens `path` without RTLD_DEEPBIND first (so an LD_PRELOAD allocator sees the library's
/// malloc calls), then through the testkit loader, which finds the object already loaded.
/// Returns the library and its mapped address range.
pub(crate) fn load_lib(path: &Path) -> Result<(OsTransportLib, (usize, usize)), String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: valid C string and flags; the handle is deliberately never closed.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!("dlopen {} failed", path.display()));
    }
    let lib = OsTransportLib::load(path)?;
    let range = mapped_range(path)?;
    Ok((lib, range))
}

/// Lowest start and highest end of the mappings of `path` in /proc/self/maps.
fn mapped_range(path: &Path) -> Result<(usize, usize), String> {
    let canon = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| e.to_string())?;
    let mut lo = usize::MAX;
    let mut hi = 0usize;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let range = f.next().unwrap_or("");
        let file = f.nth(4).unwrap_or("");
        if Path::new(file) != canon {
            continue;
        }
        if let Some((a, b)) = range.split_once('-') {
            let a = usize::from_str_radix(a, 16).map_err(|e| e.to_string())?;
            let b = usize::from_str_radix(b, 16).map_err(|e| e.to_string())?;
            lo = lo.min(a);
            hi = hi.max(b);
        }
    }
    if lo >= hi {
        return Err(format!("{} is not mapped", canon.display()));
    }
    Ok((lo, hi))
}

/// The allocation counter's `ostbench_alloc_get` and `ostbench_alloc_set_range`.
pub type AllocGet = unsafe extern "C" fn(*mut u64);
pub type AllocSetRange = unsafe extern "C" fn(usize, usize);

fn alloc_api() -> Option<(AllocSetRange, AllocGet)> {
    let f = |n: &str| {
        let c = CString::new(n).expect("name");
        // SAFETY: dlsym on the global scope with a valid C string.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) }
    };
    let set = f("ostbench_alloc_set_range");
    let get = f("ostbench_alloc_get");
    if set.is_null() || get.is_null() {
        return None;
    }
    // SAFETY: the symbols are the counting allocator's functions with these prototypes.
    unsafe {
        Some((
            testkit::fn_from_ptr::<AllocSetRange>(set),
            testkit::fn_from_ptr::<AllocGet>(get),
        ))
    }
}

/// The allocation counter's counts: the library's allocations, frees and bytes, then the same
/// for every other caller.
pub(crate) fn alloc_snapshot(get: AllocGet) -> [u64; 6] {
    let mut v = [0u64; 6];
    // SAFETY: v has the 6 entries the function writes.
    unsafe { get(v.as_mut_ptr()) };
    v
}

// ---- pollers

pub(crate) struct Pollers {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    wake_errors: Arc<AtomicU64>,
    poll_errors: Arc<AtomicU64>,
}

#[derive(Clone, Copy)]
pub(crate) struct WakeFn(pub(crate) unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int);

fn handle_crs(crs: &mut [u::urma_cr_t], h: usize, wake: WakeFn, errs: &AtomicU64) {
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

// ---- the cell

struct Io {
    ji: urma_jetty_info_t,
    src: ost_buffer_info_t,
    dsts: Vec<(ost_buffer_info_t, ost_buffer_info_t, ost_device_info_t)>,
}

struct Pending {
    ss: *mut task_sync_t,
    rs: *mut task_sync_t,
}

/// The request driver of a one-process cell: submits send + recv pairs and waits for them in
/// order.
pub struct Driver<'a> {
    lib: &'a OsTransportLib,
    h: *mut c_void,
    io: Io,
    len: u32,
    ring: VecDeque<Pending>,
    next: u64,
}

/// `os_transport_recv` of `len` bytes for client key `ck` into `host`/`dev`, with the bench's
/// chunk callback; returns the recv sync.
pub(crate) fn post_recv(
    lib: &OsTransportLib,
    h: *mut c_void,
    mut host: ost_buffer_info_t,
    mut dev: ost_device_info_t,
    len: u32,
    ck: u64,
) -> Result<*mut task_sync_t, String> {
    let mut rs: *mut task_sync_t = std::ptr::null_mut();
    // SAFETY: valid pointers for the call; buffers and endpoints outlive the request.
    let r = unsafe {
        (lib.os_transport_recv)(h, &mut host, &mut dev, len, ck, &mut rs, Some(on_chunk))
    };
    if r != 0 || rs.is_null() {
        return Err(format!("os_transport_recv({ck}) returned {r:#x}"));
    }
    Ok(rs)
}

/// `os_transport_send` of `len` bytes from `src` to `remote` (server key `sk`, client key
/// `ck`); returns the send sync.
pub(crate) fn post_send(
    lib: &OsTransportLib,
    h: *mut c_void,
    ji: &mut urma_jetty_info_t,
    mut src: ost_buffer_info_t,
    mut remote: ost_buffer_info_t,
    len: u32,
    (sk, ck): (u64, u64),
) -> Result<*mut task_sync_t, String> {
    let mut ss: *mut task_sync_t = std::ptr::null_mut();
    let mut st: u::urma_status_t = 0;
    // SAFETY: as for post_recv.
    let r = unsafe {
        (lib.os_transport_send)(h, ji, &mut src, &mut remote, len, sk, ck, &mut ss, &mut st)
    };
    if r != 0 || ss.is_null() {
        return Err(format!(
            "os_transport_send({sk}) returned {r:#x} status {st}"
        ));
    }
    Ok(ss)
}

/// `wait_and_free_sync` on a sync returned by [`post_recv`] or [`post_send`] (consumed here);
/// an error unless it returned 0 with a successful status.
pub(crate) fn wait_sync(
    lib: &OsTransportLib,
    h: *mut c_void,
    what: &str,
    s: *mut task_sync_t,
) -> Result<(), String> {
    let mut st: u::urma_status_t = 0;
    // SAFETY: s is a live sync returned by send/recv, consumed exactly once here.
    let r = unsafe { (lib.wait_and_free_sync)(h, s, &mut st) };
    if r != 0 || st != u::URMA_SUCCESS {
        return Err(format!("wait on {what} sync returned {r:#x} status {st}"));
    }
    Ok(())
}

/// The keys of request `k`: client key (even) and server key (odd), below 2^20 (identity
/// transport encoding) and unique among 2^18 requests in flight.
pub(crate) fn keys(k: u64) -> (u64, u64) {
    let ck = 2 * (k % (1 << 18)) + 2;
    (ck + 1, ck)
}

impl Driver<'_> {
    fn submit(&mut self) -> Result<(), String> {
        let k = self.next;
        self.next += 1;
        let (sk, ck) = keys(k);
        let d = (k % self.io.dsts.len() as u64) as usize;
        let (remote, host, dev) = self.io.dsts[d];
        let rs = post_recv(self.lib, self.h, host, dev, self.len, ck)?;
        let ss = post_send(
            self.lib,
            self.h,
            &mut self.io.ji,
            self.io.src,
            remote,
            self.len,
            (sk, ck),
        )?;
        self.ring.push_back(Pending { ss, rs });
        Ok(())
    }

    fn complete_one(&mut self) -> Result<(), String> {
        let p = self.ring.pop_front().ok_or("nothing in flight")?;
        wait_sync(self.lib, self.h, "send", p.ss)?;
        wait_sync(self.lib, self.h, "recv", p.rs)
    }

    /// Submits until `depth` pairs are in flight.
    pub fn fill(&mut self, depth: usize) -> Result<(), String> {
        while self.ring.len() < depth {
            self.submit()?;
        }
        Ok(())
    }

    /// Waits for every pair in flight.
    pub fn drain(&mut self) -> Result<(), String> {
        while !self.ring.is_empty() {
            self.complete_one()?;
        }
        Ok(())
    }

    /// One completion followed by one submission (closed loop at `depth`).
    pub fn step(&mut self) -> Result<(), String> {
        self.complete_one()?;
        self.submit()
    }
}

impl Driver<'_> {
    /// Paced load: pair `i` is due at `start + i / rate`. Every pair that is due is submitted
    /// (at most `max_inflight` in flight), then the oldest is waited for; with nothing in flight
    /// the driver sleeps until the next pair is due. When the library falls more than
    /// `max_inflight` intervals behind, the excess offered load is dropped (the achieved rate
    /// shows it). Returns the pairs completed before `window` ended.
    pub fn paced(
        &mut self,
        rate: u64,
        window: Duration,
        max_inflight: usize,
    ) -> Result<u64, String> {
        let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
        let lag_cap = interval * max_inflight as u32;
        let t0 = Instant::now();
        let mut due = t0;
        let mut done = 0u64;
        loop {
            let now = Instant::now();
            if now.duration_since(t0) >= window {
                return Ok(done);
            }
            if now > due + lag_cap {
                due = now - lag_cap;
            }
            while due <= now && self.ring.len() < max_inflight {
                self.submit()?;
                due += interval;
            }
            if self.ring.is_empty() {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            } else {
                self.complete_one()?;
                done += 1;
            }
        }
    }
}

// ---- CPU time

/// User + system CPU time of the whole process (getrusage), ns.
fn process_cpu_ns() -> u64 {
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
fn thread_cpu_ns(tid: Option<i32>) -> u64 {
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

pub(crate) fn watchdog(limit: Duration) {
    std::thread::Builder::new()
        .name("bench-watchdog".into())
        .spawn(move || {
            std::thread::sleep(limit);
            println!("ERROR watchdog: the cell did not finish within {limit:?} (library hang?)");
            std::process::exit(3);
        })
        .expect("spawn watchdog");
}

/// The byte every source buffer is filled with (copy-mode cells check the destinations hold it).
pub(crate) const SRC_BYTE: u8 = 0xA5;

/// The endpoints of a cell: a JFS sender and a jetty receiver with deep queues.
pub(crate) fn endpoints(lb: &Loopback, event: bool) -> EndpointPair {
    EndpointPair::new(
        lb,
        &EndpointCfg {
            send: SendKind::Jfs,
            recv: RecvKind::Jetty,
            jfc_depth: 16384,
            sq_depth: 4096,
            rq_depth: 4096,
            event_mode: event,
            ..EndpointCfg::default()
        },
    )
}

/// Registers the log callback (level INFO hides DEBUG, as in a production application) and
/// initialises an instance on the receiver's JFC with `cfg.workers` workers.
pub(crate) fn init_lib(
    lib: &OsTransportLib,
    lb: &Loopback,
    pair: &EndpointPair,
    cfg: &CellCfg,
) -> Result<*mut c_void, String> {
    // SAFETY: valid callback.
    unsafe { (lib.os_transport_log_reg)(0, Some(on_log)) };
    let mut ocfg = os_transport_cfg_t {
        urma_event_mode: cfg.event,
        worker_thread_num: cfg.workers,
        recv_queue_capacity: 256,
        ..Default::default()
    };
    ocfg.jfc = pair.receiver.cq.jfc;
    ocfg.jfce = pair.receiver.cq.jfce;
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid context, config and out-pointer.
    let r = unsafe { (lib.os_transport_init)(lb.ctx, &mut ocfg, &mut h) };
    if r != 0 || h.is_null() {
        return Err(format!("os_transport_init returned {r:#x}"));
    }
    Ok(h)
}

/// What a one-process measurement needs of its process and its options.
#[derive(Clone, Copy)]
pub struct Needs {
    /// To run under callgrind (with the client requests compiled in).
    pub callgrind: bool,
    /// The `LD_PRELOAD` allocation counter, whose range is set to the library's mapping before
    /// init.
    pub alloc_counter: bool,
    /// An offered load (`--rate`).
    pub rate: bool,
}

impl Needs {
    pub const NOTHING: Needs = Needs {
        callgrind: false,
        alloc_counter: false,
        rate: false,
    };
}

/// A one-process measurement: the common set-up (loopback, endpoints, buffers, library,
/// instance, pollers, warm-up), its window, then the common result keys (the loopback's
/// counters, and `plugin`: 1 when the loopback is the plugin of a genuine URMA core) and checks
/// ([`one_process`]).
#[derive(Clone, Copy)]
pub struct OneProcess {
    pub needs: Needs,
    /// The measurement window, after the warm-up (the pipeline full at the cell's depth): adds
    /// its result keys.
    pub window: fn(&mut Window) -> Result<(), String>,
}

/// What a [`OneProcess`] window works with.
pub struct Window<'a> {
    pub cfg: &'a CellCfg,
    /// The request driver, `depth` pairs in flight after the warm-up.
    pub d: Driver<'a>,
    /// The allocation counter's functions (when preloaded) and its counts after init.
    pub alloc: Option<(AllocSetRange, AllocGet)>,
    pub allocs_after_init: Option<[u64; 6]>,
    pollers: Option<Pollers>,
    poller_errors: Option<(u64, u64)>,
    out: Vec<(String, String)>,
}

impl Window<'_> {
    /// Adds `key=value` to the result line.
    pub fn kv(&mut self, k: &str, v: String) {
        self.out.push((k.to_string(), v));
    }

    /// Stops the application's pollers (nothing arrives any more).
    pub fn stop_pollers(&mut self) {
        self.poller_errors = self.pollers.take().map(Pollers::stop);
    }
}

/// Runs a one-process cell; `Ok(result line)` or `Err(reason)`.
pub fn one_process(cfg: &CellCfg, m: &OneProcess) -> Result<String, String> {
    if m.needs.rate && cfg.rate == 0 {
        return Err(format!("kind {} needs --rate > 0", cfg.kind));
    }
    let s = shared();
    // SAFETY: plain query.
    let on_vg = unsafe { ostbench_on_valgrind() } != 0;
    if m.needs.callgrind && !on_vg {
        return Err(format!(
            "kind {} must run under valgrind --tool=callgrind (with client requests compiled in)",
            cfg.kind
        ));
    }
    watchdog(Duration::from_secs(if on_vg { 900 } else { 120 }));

    let lb = Loopback::get();
    ctl::reset();
    ctl::set_nocopy(cfg.nocopy);
    let pair = endpoints(lb, cfg.event);

    // Buffers: one source, a ring of destinations (distinct in copy mode so that concurrent
    // copies do not write the same memory), all pre-faulted.
    let ndst = if cfg.nocopy { 1 } else { cfg.depth.min(8) };
    let mut src = Buffer::new(lb, cfg.len as usize);
    src.fill(SRC_BYTE);
    let mut dsts: Vec<(Buffer, ImportedSeg)> = Vec::new();
    for _ in 0..ndst {
        let mut b = Buffer::new(lb, cfg.len as usize);
        b.fill(0);
        let imp = b.import(lb);
        dsts.push((b, imp));
    }
    let io = Io {
        ji: pair.jetty_info(),
        src: src.info(),
        dsts: dsts
            .iter()
            .map(|(b, imp)| {
                (
                    imp.info(),
                    b.info(),
                    pair.device_info(b.as_ptr() as *mut c_void),
                )
            })
            .collect(),
    };

    let (lib, range) = load_lib(&cfg.lib)?;
    let alloc = alloc_api();
    if m.needs.alloc_counter {
        let (set, _) = alloc
            .ok_or_else(|| format!("kind {} needs LD_PRELOAD=libostbench_alloc.so", cfg.kind))?;
        // SAFETY: plain values.
        unsafe { set(range.0, range.1) };
    }
    let h = init_lib(&lib, lb, &pair, cfg)?;
    let allocs_after_init = alloc.map(|(_, g)| alloc_snapshot(g));

    let pollers = Some(Pollers::start(
        &pair,
        h,
        WakeFn(lib.os_transport_wake_up_task),
        cfg.event,
    ));
    let mut w = Window {
        cfg,
        d: Driver {
            lib: &lib,
            h,
            io,
            len: cfg.len,
            ring: VecDeque::with_capacity(cfg.depth + 1),
            next: 0,
        },
        alloc,
        allocs_after_init,
        pollers,
        poller_errors: None,
        out: Vec::new(),
    };

    // Warm-up.
    w.d.fill(cfg.depth)?;
    for _ in 0..cfg.warmup {
        w.d.step()?;
    }

    (m.window)(&mut w)?;

    let (wake_errors, poll_errors) = match w.pollers.take() {
        Some(p) => p.stop(),
        None => w.poller_errors.unwrap_or_default(),
    };
    let c = ctl::counters();
    w.kv("chunks_cb", s.chunks.load(Ordering::Relaxed).to_string());
    w.kv("cb_errors", s.cb_errors.load(Ordering::Relaxed).to_string());
    w.kv("wake_errors", wake_errors.to_string());
    w.kv("poll_errors", poll_errors.to_string());
    w.kv("logs", s.logs.load(Ordering::Relaxed).to_string());
    w.kv(
        "log_errors",
        s.log_errors.load(Ordering::Relaxed).to_string(),
    );
    w.kv("rnr_errors", c.rnr_errors.to_string());
    w.kv("crs_error", c.crs_error.to_string());
    w.kv("crs_overflow", c.crs_overflow.to_string());
    w.kv("bytes_copied", c.bytes_copied.to_string());
    w.kv("send_wrs", c.send_wrs.to_string());
    w.kv("recv_wrs", c.recv_wrs.to_string());
    // Which liburma.so.0 the cell ran over: the loopback as the plugin of a genuine core, or the
    // standalone loopback (checked against the one asked for by the orchestrator).
    w.kv(
        "plugin",
        u8::from(ctl::plugin::loaded().is_some()).to_string(),
    );

    // Copy mode: the data really arrived (first and last bytes of every destination).
    if !cfg.nocopy {
        let n = cfg.len as usize;
        for (b, _) in &dsts {
            let sl = b.as_slice();
            let edge = 64.min(n);
            if sl[..edge].iter().any(|&x| x != SRC_BYTE)
                || sl[n - edge..].iter().any(|&x| x != SRC_BYTE)
            {
                return Err("copy mode: destination does not hold the source bytes".into());
            }
        }
    }
    if c.rnr_errors
        + c.crs_error
        + c.crs_overflow
        + poll_errors
        + s.cb_errors.load(Ordering::Relaxed)
        > 0
    {
        return Err(format!(
            "loopback errors: rnr {} crs_error {} overflow {} poll {poll_errors}",
            c.rnr_errors, c.crs_error, c.crs_overflow
        ));
    }
    // SAFETY: every request has been waited on; pollers are stopped.
    let r = unsafe { (lib.os_transport_destroy)(h) };
    w.kv("destroy", r.to_string());
    drop(pair);
    Ok(w.out
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The latency samples of the window, sorted.
pub(crate) fn recorded_latencies() -> Vec<u64> {
    let s = shared();
    let m = s.nsamples.load(Ordering::Relaxed).min(SAMPLE_CAP);
    let mut lat: Vec<u64> = (0..m)
        .map(|i| s.samples[i].load(Ordering::Relaxed))
        .collect();
    lat.sort_unstable();
    lat
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
