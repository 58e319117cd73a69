//! The one-process harness: a cell's needs, its measurement window, and the run that sets everything up, measures and reports.

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::callbacks::{shared, SAMPLE_CAP};
use super::cfg::CellCfg;
use super::driver::{Driver, Io};
use super::load::{alloc_api, alloc_snapshot, load_lib, AllocGet, AllocSetRange};
use super::poll::{Pollers, WakeFn};
use super::setup::{endpoints, init_lib, watchdog, SRC_BYTE};
use testkit::{loopback_ctl as ctl, Buffer, ImportedSeg, Loopback, PairArgs, SegArgs};

extern "C" {
    fn ostbench_on_valgrind() -> c_int;
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
