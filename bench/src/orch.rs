//! The orchestrator: runs every cell in a child process (interleaving the libraries), then writes
//! the report (`report.md`, also printed), the CSV and the chart.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::cg;
use crate::steal;

const MIB: u32 = 1024 * 1024;
/// 2 MiB + 1: two chunks.
pub const LEN2: u32 = 2 * MIB + 1;
/// 14 MiB: seven chunks.
pub const LEN7: u32 = 14 * MIB;
const DEPTHS: [usize; 3] = [1, 8, 64];
const WORKERS: [u32; 3] = [1, 2, 4];

/// Orchestrator options.
pub struct Opts {
    pub full: bool,
    pub out: PathBuf,
    pub reps: usize,
    pub secs: f64,
    pub cg_requests: u64,
    pub cg_reps: usize,
    pub paced_reps: usize,
    pub paced_secs: f64,
    pub alloc_requests: u64,
}

impl Opts {
    pub fn parse(full: bool, args: &[String]) -> Result<Opts, String> {
        let mut o = Opts {
            full,
            out: testkit::target_dir().join("bench"),
            reps: 5,
            secs: 0.4,
            cg_requests: 200,
            cg_reps: 3,
            paced_reps: 3,
            paced_secs: 0.5,
            alloc_requests: 2000,
        };
        let mut it = args.iter();
        while let Some(k) = it.next() {
            let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
            match k.as_str() {
                "--out" => o.out = PathBuf::from(v),
                "--reps" => o.reps = v.parse().map_err(|e| format!("--reps: {e}"))?,
                "--secs" => o.secs = v.parse().map_err(|e| format!("--secs: {e}"))?,
                "--cg-requests" => o.cg_requests = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--cg-reps" => o.cg_reps = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--paced-reps" => o.paced_reps = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--paced-secs" => o.paced_secs = v.parse().map_err(|e| format!("{k}: {e}"))?,
                "--alloc-requests" => {
                    o.alloc_requests = v.parse().map_err(|e| format!("{k}: {e}"))?
                }
                _ => return Err(format!("unknown option {k}")),
            }
        }
        if o.reps == 0 {
            return Err("--reps must be > 0".into());
        }
        Ok(o)
    }
}

/// A library under test.
#[derive(Clone)]
struct Lib {
    name: String,
    label: String,
    path: PathBuf,
}

fn libs() -> Vec<Lib> {
    let mut v = vec![
        Lib {
            name: "rust".into(),
            label: "Rust".into(),
            path: testkit::profile_dir().join("libos_transport.so"),
        },
        Lib {
            name: "c".into(),
            label: "C ref (-O2)".into(),
            path: PathBuf::from(env!("OSTBENCH_LEGACY_O2")),
        },
    ];
    if let Some(p) = std::env::var_os("LEGACY_LIB").filter(|p| !p.is_empty()) {
        v.push(Lib {
            name: "ext".into(),
            label: "LEGACY_LIB".into(),
            path: PathBuf::from(p),
        });
    }
    v
}

type Res = HashMap<String, String>;

fn num(r: &Res, k: &str) -> Result<f64, String> {
    r.get(k)
        .ok_or_else(|| format!("result has no {k}"))?
        .parse::<f64>()
        .map_err(|e| format!("{k}: {e}"))
}

/// One CSV row (long format).
struct Row {
    kind: &'static str,
    lib: String,
    len: u32,
    copy: bool,
    event: bool,
    depth: usize,
    workers: u32,
    rate: u32,
    rep: usize,
    metric: String,
    value: f64,
}

impl Row {
    /// Whether this row is `metric` of `lib` in configuration `c` of `kind`.
    fn is(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> bool {
        self.kind == kind
            && self.lib == lib
            && self.len == c.len
            && self.copy == c.copy
            && self.event == c.event
            && self.depth == c.depth
            && self.workers == c.workers
            && self.rate == c.rate
            && self.metric == metric
    }
}

struct Ctx {
    opts: Opts,
    libs: Vec<Lib>,
    rows: Vec<Row>,
    errors: Vec<String>,
    log: Vec<String>,
    /// Host steal over each timed section, in the order they ran.
    steal: Vec<steal::Section>,
}

#[derive(Clone, Copy)]
struct Cfg {
    len: u32,
    depth: usize,
    workers: u32,
    copy: bool,
    event: bool,
    /// Offered load of a paced cell in pairs/s; 0 for the closed-loop cells.
    rate: u32,
}

impl Cfg {
    fn args(&self) -> Vec<String> {
        vec![
            "--len".into(),
            self.len.to_string(),
            "--depth".into(),
            self.depth.to_string(),
            "--workers".into(),
            self.workers.to_string(),
            "--copy".into(),
            (self.copy as u8).to_string(),
            "--event".into(),
            (self.event as u8).to_string(),
            "--rate".into(),
            self.rate.to_string(),
        ]
    }
}

fn chunks(len: u32) -> u32 {
    len.div_ceil(2 * MIB)
}

fn ld_library_path() -> String {
    let mut p = testkit::profile_dir().display().to_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        p.push(':');
        p.push_str(&old.to_string_lossy());
    }
    p
}

enum Runner<'a> {
    Native,
    Preload,
    Callgrind(&'a Path),
}

fn spawn_cell(lib: &Lib, kind: &str, extra: &[String], runner: Runner) -> Result<Res, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = match runner {
        Runner::Callgrind(out) => {
            let mut c = Command::new("valgrind");
            c.args([
                "--tool=callgrind",
                "--dump-instr=no",
                "--collect-systime=yes",
                "--separate-threads=no",
            ])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&exe);
            c
        }
        _ => Command::new(&exe),
    };
    cmd.arg("cell")
        .args(["--kind", kind, "--lib"])
        .arg(&lib.path)
        .args(extra)
        .env("LD_LIBRARY_PATH", ld_library_path())
        .env_remove("LD_PRELOAD");
    if let Runner::Preload = runner {
        cmd.env("LD_PRELOAD", env!("OSTBENCH_ALLOC_SO"));
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("RESULT ") {
            if !out.status.success() {
                break;
            }
            return Ok(rest
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect());
        }
        if let Some(rest) = line.strip_prefix("ERROR ") {
            return Err(format!("{} {kind} {}: {rest}", lib.name, extra.join(" ")));
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    Err(format!(
        "{} {kind} {}: child exited with {} and no result; stderr tail: {}",
        lib.name,
        extra.join(" "),
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    ))
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The configuration columns of the rows that describe the host, not a cell.
const HOST: Cfg = Cfg {
    len: 0,
    depth: 0,
    workers: 0,
    copy: false,
    event: false,
    rate: 0,
};

/// Runs one timed section and records the host's steal over it (rows of `kind`, library `host`).
fn timed(ctx: &mut Ctx, kind: &'static str, label: &'static str, f: impl FnOnce(&mut Ctx)) {
    let before = steal::read();
    f(ctx);
    let share = steal::since(before);
    if let Some(p) = share.as_ref().ok().and_then(steal::Share::pct) {
        eprintln!("ostbench: {label}: host steal {p:.1} %");
    }
    ctx.push_steal(kind, &share);
    ctx.steal.push(steal::Section { label, share });
}

impl Ctx {
    /// The rows of a steal measurement: steal and all CPU ticks over the interval, and the share.
    fn push_steal(&mut self, kind: &'static str, share: &Result<steal::Share, String>) {
        let Ok(s) = share else { return };
        self.push(kind, "host", HOST, 0, "host_steal_ticks", s.steal as f64);
        self.push(kind, "host", HOST, 0, "cpu_ticks", s.total as f64);
        if let Some(p) = s.pct() {
            self.push(kind, "host", HOST, 0, "host_steal_pct", p);
        }
    }

    fn push(
        &mut self,
        kind: &'static str,
        lib: &str,
        c: Cfg,
        rep: usize,
        metric: &str,
        value: f64,
    ) {
        self.rows.push(Row {
            kind,
            lib: lib.to_string(),
            len: c.len,
            copy: c.copy,
            event: c.event,
            depth: c.depth,
            workers: c.workers,
            rate: c.rate,
            rep,
            metric: metric.to_string(),
            value,
        });
    }

    /// Values of `metric` over the reps of one configuration.
    fn values(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> Vec<f64> {
        self.rows
            .iter()
            .filter(|r| r.is(kind, lib, c, metric))
            .map(|r| r.value)
            .collect()
    }

    /// `lib`'s copy-mode MiB/s in `c` ÷ the memcpy limit measured around the same repetition
    /// (rows `memcpy_adj`, see [`run_tput`]), one ratio per repetition that has both.
    fn adjacent_ratios(&self, lib: &str, c: Cfg) -> Vec<f64> {
        let of = |kind: &str, lib: &str| -> Vec<(usize, f64)> {
            self.rows
                .iter()
                .filter(|r| r.is(kind, lib, c, "mib_s"))
                .map(|r| (r.rep, r.value))
                .collect()
        };
        let lims = of("memcpy_adj", "memcpy");
        of("tput", lib)
            .into_iter()
            .filter_map(|(rep, v)| {
                lims.iter()
                    .find(|&&(r, _)| r == rep)
                    .map(|&(_, lim)| v / lim)
            })
            .collect()
    }

    fn med(&self, kind: &str, lib: &str, c: Cfg, metric: &str) -> f64 {
        median(&mut self.values(kind, lib, c, metric))
    }

    fn note(&mut self, s: String) {
        eprintln!("ostbench: {s}");
        self.log.push(s);
    }

    fn fail(&mut self, s: String) {
        eprintln!("ostbench: MEASUREMENT ERROR: {s}");
        self.errors.push(s);
    }

    fn baseline(&self) -> Lib {
        self.libs
            .iter()
            .find(|l| l.name == "ext")
            .or_else(|| self.libs.iter().find(|l| l.name == "c"))
            .cloned()
            .expect("C library")
    }
}

// ---- measurements

struct CgResult {
    lib: String,
    len: u32,
    requests: u64,
    attr: cg::Attribution,
}

fn run_callgrind(ctx: &mut Ctx) -> Vec<CgResult> {
    let mut out = Vec::new();
    if std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_err()
        || env!("OSTBENCH_HAVE_VALGRIND") != "1"
    {
        ctx.fail(
            "valgrind (with <valgrind/callgrind.h>) is not available: no instruction counts".into(),
        );
        return out;
    }
    let dir = ctx.opts.out.join("callgrind");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create callgrind dir");
    let exe = std::env::current_exe().expect("exe");
    for rep in 0..ctx.opts.cg_reps {
        for len in [LEN2, LEN7] {
            for lib in ctx.libs.clone() {
                let c = Cfg {
                    len,
                    depth: 1,
                    workers: 1,
                    copy: false,
                    event: true,
                    rate: 0,
                };
                let file = dir.join(format!("{}-{}chunks-{rep}.out", lib.name, chunks(len)));
                let mut extra = c.args();
                extra.extend([
                    "--requests".into(),
                    ctx.opts.cg_requests.to_string(),
                    "--warmup".into(),
                    "20".into(),
                ]);
                let t = Instant::now();
                match spawn_cell(&lib, "callgrind", &extra, Runner::Callgrind(&file)) {
                    Err(e) => ctx.fail(e),
                    Ok(r) => {
                        let requests = num(&r, "requests").unwrap_or(0.0) as u64;
                        // The window dump is "<file>.1"; the final dump at exit is "<file>".
                        let dump = PathBuf::from(format!("{}.1", file.display()));
                        match cg::attribute(&dump, &lib.path, &exe) {
                            Err(e) => ctx.fail(e),
                            Ok(attr) if requests > 0 => {
                                let per = attr.lib_ir() as f64 / requests as f64;
                                ctx.push("callgrind", &lib.name, c, rep, "lib_ir_per_req", per);
                                if let Some(s) = attr.lib_syscalls() {
                                    ctx.push(
                                        "callgrind",
                                        &lib.name,
                                        c,
                                        rep,
                                        "lib_syscalls_per_req",
                                        s as f64 / requests as f64,
                                    );
                                }
                                let pv = attr.provider.first().copied().unwrap_or(0);
                                ctx.push(
                                    "callgrind",
                                    &lib.name,
                                    c,
                                    rep,
                                    "provider_ir_per_req",
                                    pv as f64 / requests as f64,
                                );
                                ctx.push(
                                    "callgrind",
                                    &lib.name,
                                    c,
                                    rep,
                                    "process_ir_per_req",
                                    attr.total.first().copied().unwrap_or(0) as f64
                                        / requests as f64,
                                );
                                ctx.note(format!(
                                "callgrind rep {rep} {} {} chunks: {:.0} lib instructions/request ({:.1} s)",
                                lib.name,
                                chunks(len),
                                per,
                                t.elapsed().as_secs_f64()
                            ));
                                out.push(CgResult {
                                    lib: lib.name.clone(),
                                    len,
                                    requests,
                                    attr,
                                });
                            }
                            Ok(_) => ctx.fail(format!("callgrind {}: 0 requests", lib.name)),
                        }
                    }
                }
            }
        }
    }
    out
}

fn run_alloc(ctx: &mut Ctx) {
    for len in [LEN2, LEN7] {
        for lib in ctx.libs.clone() {
            let c = Cfg {
                len,
                depth: 8,
                workers: 2,
                copy: false,
                event: false,
                rate: 0,
            };
            let mut extra = c.args();
            extra.extend([
                "--requests".into(),
                ctx.opts.alloc_requests.to_string(),
                "--warmup".into(),
                "500".into(),
            ]);
            match spawn_cell(&lib, "alloc", &extra, Runner::Preload) {
                Err(e) => ctx.fail(e),
                Ok(r) => {
                    for m in [
                        "lib_allocs_per_req",
                        "lib_allocs_per_chunk",
                        "lib_allocs",
                        "lib_frees",
                        "lib_bytes",
                        "other_allocs",
                        "requests",
                        "init_lib_allocs",
                    ] {
                        match num(&r, m) {
                            Ok(v) => ctx.push("alloc", &lib.name, c, 0, m, v),
                            Err(e) => ctx.fail(format!("alloc {}: {e}", lib.name)),
                        }
                    }
                }
            }
        }
    }
}

fn tput_cfgs() -> Vec<Cfg> {
    let mut v = Vec::new();
    for copy in [false, true] {
        for len in [LEN2, LEN7] {
            for depth in DEPTHS {
                for workers in WORKERS {
                    v.push(Cfg {
                        len,
                        depth,
                        workers,
                        copy,
                        event: false,
                        rate: 0,
                    });
                }
            }
        }
    }
    v
}

fn lat_cfgs() -> Vec<Cfg> {
    let mut v = Vec::new();
    for event in [false, true] {
        for depth in [1usize, 8] {
            v.push(Cfg {
                len: LEN2,
                depth,
                workers: 2,
                copy: false,
                event,
                rate: 0,
            });
        }
    }
    v
}

/// The libraries in the order of repetition `rep`: the order rotates with the repetition, so that
/// no library always runs first (interleaving).
fn interleaved(libs: &[Lib], rep: usize) -> Vec<Lib> {
    let mut order = libs.to_vec();
    let n = order.len();
    order.rotate_left(rep % n);
    order
}

/// Metrics of a closed-loop (`tput`) cell kept in the rows.
const TPUT_METRICS: [&str; 8] = [
    "rps",
    "mib_s",
    "lat_p50_ns",
    "lat_p99_ns",
    "lat_p999_ns",
    "lat_n",
    "logs",
    "wake_errors",
];

/// Runs child cells of kind `cell` for every configuration, library and repetition
/// (interleaved) and keeps `metrics` of each as rows of `kind`.
fn run_tput(
    ctx: &mut Ctx,
    (kind, cell): (&'static str, &str),
    cfgs: &[Cfg],
    secs: f64,
    metrics: &[&str],
) {
    let total = cfgs.len() * ctx.libs.len() * ctx.opts.reps;
    let mut done = 0;
    let t = Instant::now();
    // Only the sections with copy-mode 14 MiB cells need the memcpy source.
    let src = cfgs
        .iter()
        .any(|c| memcpy_around(kind, c))
        .then(memcpy_source);
    for rep in 0..ctx.opts.reps {
        for c in cfgs {
            // The memory bandwidth of a shared host moves between runs and within one (the
            // 1-destination memcpy ranged over 2.5x across the repetitions of one run): the
            // copy-mode cells are compared with the memcpy measured just before and after them.
            let before = src
                .as_deref()
                .filter(|_| memcpy_around(kind, c))
                .map(|s| (s, adjacent_limit(s, c.depth)));
            for lib in interleaved(&ctx.libs, rep) {
                let mut extra = c.args();
                extra.extend(["--secs".into(), secs.to_string()]);
                match spawn_cell(&lib, cell, &extra, Runner::Native) {
                    Err(e) => ctx.fail(e),
                    Ok(r) => {
                        for &m in metrics {
                            match num(&r, m) {
                                Ok(v) => ctx.push(kind, &lib.name, *c, rep, m, v),
                                Err(e) => ctx.fail(format!("{kind} {}: {e}", lib.name)),
                            }
                        }
                    }
                }
                done += 1;
            }
            if let Some((src, before)) = before {
                let after = adjacent_limit(src, c.depth);
                ctx.push(
                    "memcpy_adj",
                    "memcpy",
                    *c,
                    rep,
                    "mib_s",
                    (before + after) / 2.0,
                );
            }
        }
        eprintln!(
            "ostbench: {kind}: {done}/{total} runs ({:.0} s)",
            t.elapsed().as_secs_f64()
        );
    }
}

/// memcpy of the same buffer shapes as the 14 MiB copy-mode cells: the 14 MiB source into a ring
/// of `ndst` pre-faulted destinations (1 at depth 1, 8 at depth 8 and 64), in 2 MiB pieces like
/// the loopback's WRITEs, by 1 or 2 threads (each thread with its own destinations).
fn run_memcpy(ctx: &mut Ctx) {
    let src = memcpy_source();
    for (ndst, threads) in MEMCPY_SHAPES {
        for rep in 0..ctx.opts.reps {
            let v = memcpy_mib_s(&src, ndst, threads, 0.4);
            ctx.push(
                "memcpy",
                "memcpy",
                mc(ndst, threads as u32),
                rep,
                "mib_s",
                v,
            );
        }
    }
}

/// The 14 MiB source buffer of the memcpy baselines.
fn memcpy_source() -> Vec<u8> {
    vec![0xA5u8; LEN7 as usize]
}

/// MiB/s of `threads` threads each copying `src` (14 MiB) in 2 MiB pieces into its share of a ring
/// of `ndst` pre-faulted destinations for `secs` (after one warm-up pass over its destinations).
fn memcpy_mib_s(src: &[u8], ndst: usize, threads: usize, secs: f64) -> f64 {
    let len = src.len();
    let piece = 2 * MIB as usize;
    let per_thread = (ndst / threads).max(1);
    let bytes: f64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut dsts: Vec<Vec<u8>> = (0..per_thread).map(|_| vec![1u8; len]).collect();
                    let copy = |d: &mut Vec<u8>| {
                        for off in (0..len).step_by(piece) {
                            let end = (off + piece).min(len);
                            d[off..end].copy_from_slice(&src[off..end]);
                        }
                        std::hint::black_box(&d[len - 1]);
                    };
                    for d in dsts.iter_mut() {
                        copy(d); // warm-up pass
                    }
                    let t = Instant::now();
                    let mut n = 0u64;
                    let mut i = 0;
                    while t.elapsed().as_secs_f64() < secs {
                        let k = i % per_thread;
                        copy(&mut dsts[k]);
                        n += len as u64;
                        i += 1;
                    }
                    n as f64 / t.elapsed().as_secs_f64()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    bytes / MIB as f64
}

/// The memcpy shapes whose best rate limits a copy-mode 14 MiB cell at `depth`: its destinations
/// (1 at depth 1, a ring of 8 otherwise) with the thread counts the transfer could use (1 at
/// depth 1, where a request's chunks are copied one after the other; 1 or 2 otherwise).
fn limit_shapes(depth: usize) -> &'static [(usize, usize)] {
    if depth == 1 {
        &MEMCPY_SHAPES[..1]
    } else {
        &MEMCPY_SHAPES[1..]
    }
}

/// Whether the memcpy limit is measured around the repetitions of `c` in a section of `kind`:
/// the copy-mode 14 MiB requests/s cells.
fn memcpy_around(kind: &str, c: &Cfg) -> bool {
    kind == "tput" && c.copy && c.len == LEN7
}

/// Seconds of each memcpy measured around a copy-mode cell ([`adjacent_limit`]).
const ADJACENT_MEMCPY_SECS: f64 = 0.15;

/// The memcpy limit of a copy-mode 14 MiB cell measured right now, in this process: the best of
/// its [`limit_shapes`], each copied for [`ADJACENT_MEMCPY_SECS`].
fn adjacent_limit(src: &[u8], depth: usize) -> f64 {
    limit_shapes(depth)
        .iter()
        .map(|&(ndst, threads)| memcpy_mib_s(src, ndst, threads, ADJACENT_MEMCPY_SECS))
        .fold(f64::NAN, f64::max)
}

/// The two-process cell (`cell --kind xsend`, bench/src/xproc.rs): 14 MiB copy-mode transfers
/// from a sender process to a receiver process, one request in flight, 2 workers, poll mode.
const XPROC: Cfg = Cfg {
    len: LEN7,
    depth: 1,
    workers: 2,
    copy: true,
    event: false,
    rate: 0,
};
const XPROC_METRICS: [&str; 3] = ["rps", "mib_s", "recv_requests"];

/// (destinations, threads) of the memcpy baselines.
const MEMCPY_SHAPES: [(usize, usize); 3] = [(1, 1), (8, 1), (8, 2)];

/// The memcpy limit for a copy-mode 14 MiB cell at `depth`: same destinations, best thread count
/// that the transfer could use (1 at depth 1, where a request's chunks are copied one after the
/// other; 2 otherwise).
fn memcpy_limit(ctx: &Ctx, depth: usize) -> f64 {
    // The physical limit is the best memcpy rate observed (max over the repetitions).
    limit_shapes(depth)
        .iter()
        .flat_map(|&(ndst, threads)| {
            ctx.values("memcpy", "memcpy", mc(ndst, threads as u32), "mib_s")
        })
        .fold(f64::NAN, f64::max)
}

// ---- report

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "n/a".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn pass(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_else(|| "n/a".into())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "CPU {cpu}, {cores} cores available, kernel {}, load average at start {}; {}; {}; {}",
        sh("uname", &["-r"]),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        sh("rustc", &["-V"]),
        sh("cc", &["--version"]),
        sh("valgrind", &["--version"]),
    )
}

/// Threshold of a row that is reported, not a target.
const REPORT_ONLY: &str = "(none: reported)";

struct Target {
    name: &'static str,
    value: String,
    threshold: &'static str,
    ok: Option<bool>,
}

fn report(
    ctx: &mut Ctx,
    cgs: &[CgResult],
    started: &str,
    elapsed: f64,
    run_steal: &Result<steal::Share, String>,
) -> String {
    let base = ctx.baseline();
    let libs = ctx.libs.clone();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# ostbench report ({})\n",
        if ctx.opts.full {
            "make bench"
        } else {
            "make bench-quick"
        }
    );
    let _ = writeln!(md, "- started: {started}, took {elapsed:.0} s");
    let _ = writeln!(
        md,
        "- machine: {}; {}",
        machine(),
        steal::line(&ctx.steal, run_steal)
    );
    for l in &libs {
        let _ = writeln!(md, "- {}: `{}`", l.label, l.path.display());
    }
    let _ = writeln!(
        md,
        "- ratios are against **{}**; timed cells: median of {} interleaved repetitions, {} s each",
        base.label, ctx.opts.reps, ctx.opts.secs
    );
    let _ = writeln!(md);

    // targets
    let mut targets = Vec::new();
    let l7 = Cfg {
        len: LEN7,
        depth: 1,
        workers: 1,
        copy: false,
        event: true,
        rate: 0,
    };
    let ir_rust = ctx.med("callgrind", "rust", l7, "lib_ir_per_req");
    let ir_c = ctx.med("callgrind", &base.name, l7, "lib_ir_per_req");
    let r = ir_c / ir_rust;
    targets.push(Target {
        name: "C ÷ Rust instructions per 7-chunk request (callgrind)",
        value: format!("{} ({} ÷ {})", fmt_num(r), fmt_num(ir_c), fmt_num(ir_rust)),
        threshold: "≥ 3.5",
        ok: (!r.is_nan()).then_some(r >= 3.5),
    });
    let a = |len: u32, lib: &str, m: &str| {
        ctx.med(
            "alloc",
            lib,
            Cfg {
                len,
                depth: 8,
                workers: 2,
                copy: false,
                event: false,
                rate: 0,
            },
            m,
        )
    };
    let (a2, a7) = (
        a(LEN2, "rust", "lib_allocs_per_req"),
        a(LEN7, "rust", "lib_allocs_per_req"),
    );
    let per_chunk = (a7 - a2) / 5.0;
    targets.push(Target {
        name: "Rust heap allocations per chunk, steady state ((A7 − A2) ÷ 5)",
        value: format!(
            "{} (per request: {} at 2 chunks, {} at 7 chunks)",
            fmt_num(per_chunk),
            fmt_num(a2),
            fmt_num(a7)
        ),
        threshold: "= 0",
        ok: (!per_chunk.is_nan()).then_some(per_chunk.abs() < 0.01),
    });
    if ctx.opts.full {
        // requests/s at depth 64, no-copy, 2 chunks: every worker count must pass
        let mut ratios = Vec::new();
        for w in WORKERS {
            let c = Cfg {
                len: LEN2,
                depth: 64,
                workers: w,
                copy: false,
                event: false,
                rate: 0,
            };
            ratios.push((
                w,
                ctx.med("tput", "rust", c, "rps") / ctx.med("tput", &base.name, c, "rps"),
            ));
        }
        let min = ratios.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        targets.insert(
            0,
            Target {
                name: "Rust ÷ C requests/s, depth 64, no-copy, 2-chunk (worst of workers 1/2/4)",
                value: format!(
                    "{} ({})",
                    fmt_num(min),
                    ratios
                        .iter()
                        .map(|(w, r)| format!("w{w}: {}", fmt_num(*r)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                threshold: "≥ 3.0",
                ok: min.is_finite().then_some(min >= 3.0),
            },
        );
        let mut lr = Vec::new();
        for event in [false, true] {
            let c = Cfg {
                len: LEN2,
                depth: 1,
                workers: 2,
                copy: false,
                event,
                rate: 0,
            };
            lr.push((
                event,
                ctx.med("lat", &base.name, c, "lat_p99_ns")
                    / ctx.med("lat", "rust", c, "lat_p99_ns"),
            ));
        }
        let min = lr.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
        targets.insert(
            1,
            Target {
                name: "C ÷ Rust p99 completion → callback latency, depth 1 (worse of poll/event)",
                value: format!(
                    "{} (poll: {}, event: {})",
                    fmt_num(min),
                    fmt_num(lr[0].1),
                    fmt_num(lr[1].1)
                ),
                threshold: "≥ 2.0",
                ok: min.is_finite().then_some(min >= 2.0),
            },
        );
        // bandwidth: best configuration by the median of its per-repetition ratios to the
        // memcpy measured around each repetition
        let mut best = (f64::NAN, 0.0, 0.0, HOST);
        for c in tput_cfgs().into_iter().filter(|c| c.copy && c.len == LEN7) {
            let r = median(&mut ctx.adjacent_ratios("rust", c));
            if best.0.is_nan() || r > best.0 {
                let v = ctx.med("tput", "rust", c, "mib_s");
                best = (r, v, ctx.med("memcpy_adj", "memcpy", c, "mib_s"), c);
            }
        }
        let c = best.3;
        let run_best = memcpy_limit(ctx, c.depth);
        targets.push(Target {
            name: "Rust copy-mode 14 MiB bandwidth ÷ memcpy of the same buffers measured around each repetition (best configuration, median of the per-repetition ratios)",
            value: format!(
                "{} (depth {}, workers {}: {} MiB/s, memcpy around it {} MiB/s; ÷ the run's best memcpy {} MiB/s: {})",
                fmt_num(best.0),
                c.depth,
                c.workers,
                fmt_num(best.1),
                fmt_num(best.2),
                fmt_num(run_best),
                fmt_num(best.1 / run_best)
            ),
            threshold: "≥ 0.9",
            ok: best.0.is_finite().then_some(best.0 >= 0.9),
        });
    }
    if ctx.opts.full {
        let lim = memcpy_limit(ctx, XPROC.depth);
        let v = |l: &str| ctx.med("xproc", l, XPROC, "mib_s");
        targets.push(Target {
            name: "two-process copy-mode 14 MiB bandwidth ÷ memcpy of the same buffer, Rust (C) (depth 1, workers 2; the in-process target does not apply: the socket copies twice)",
            value: format!(
                "{} ({}) ({} and {} MiB/s ÷ {} MiB/s)",
                fmt_num(v("rust") / lim),
                fmt_num(v(&base.name) / lim),
                fmt_num(v("rust")),
                fmt_num(v(&base.name)),
                fmt_num(lim)
            ),
            threshold: REPORT_ONLY,
            ok: None,
        });
    }
    paced_targets(ctx, &mut targets, &base);
    let _ = writeln!(md, "## Targets\n");
    if let Some(w) = steal::warning(&ctx.steal) {
        let _ = writeln!(md, "{w}\n");
    }
    let _ = writeln!(
        md,
        "| target | measured | wanted | result |\n|---|---|---|---|"
    );
    for t in &targets {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            t.name,
            t.value,
            t.threshold,
            match t.ok {
                Some(ok) => pass(ok),
                None if t.threshold == REPORT_ONLY => "reported",
                None => "NOT MEASURED",
            }
        );
    }
    let _ = writeln!(md);

    if ctx.opts.full {
        tput_section(ctx, &mut md, &base, &libs);
        lat_section(ctx, &mut md, &base, &libs);
        bw_section(ctx, &mut md, &libs);
        xproc_section(ctx, &mut md, &base, &libs);
    }
    paced_section(ctx, &mut md, &base);
    cg_section(ctx, &mut md, cgs, &libs);
    alloc_section(ctx, &mut md, &libs);
    if !ctx.log.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for l in &ctx.log {
            let _ = writeln!(md, "- {l}");
        }
        let _ = writeln!(md);
    }
    if !ctx.errors.is_empty() {
        let _ = writeln!(md, "## Measurement errors\n");
        for e in &ctx.errors {
            let _ = writeln!(md, "- {e}");
        }
    }
    md
}

fn mc(ndst: usize, threads: u32) -> Cfg {
    Cfg {
        len: LEN7,
        depth: ndst,
        workers: threads,
        copy: true,
        event: false,
        rate: 0,
    }
}

fn tput_section(ctx: &Ctx, md: &mut String, base: &Lib, libs: &[Lib]) {
    let _ = writeln!(md, "## Requests/s (send + recv pairs; median of reps)\n");
    let mut head = String::from("| chunks | loopback | depth | workers |");
    let mut sep = String::from("|---|---|---|---|");
    for l in libs {
        let _ = write!(head, " {} req/s |", l.label);
        sep.push_str("---|");
    }
    let _ = write!(
        head,
        " Rust ÷ {} | spread (min–max per-rep ratio) |",
        base.label
    );
    sep.push_str("---|---|");
    let _ = writeln!(md, "{head}\n{sep}");
    for c in tput_cfgs() {
        let mut line = format!(
            "| {} | {} | {} | {} |",
            chunks(c.len),
            if c.copy { "copy" } else { "no-copy" },
            c.depth,
            c.workers
        );
        for l in libs {
            let _ = write!(line, " {} |", fmt_num(ctx.med("tput", &l.name, c, "rps")));
        }
        let r = ctx.med("tput", "rust", c, "rps") / ctx.med("tput", &base.name, c, "rps");
        let (lo, hi) = ratio_spread(ctx, "tput", base, c, "rps");
        let _ = writeln!(
            md,
            "{line} **{}** | {}–{} |",
            fmt_num(r),
            fmt_num(lo),
            fmt_num(hi)
        );
    }
    let _ = writeln!(
        md,
        "\nChart: `chart.png` (requests/s by depth, Rust vs C).\n"
    );
}

fn lat_section(ctx: &Ctx, md: &mut String, base: &Lib, libs: &[Lib]) {
    let _ = writeln!(
        md,
        "## Completion → notify_callback latency (2-chunk, no-copy, workers 2; µs; median of reps)\n"
    );
    let _ = writeln!(md, "| poller | depth | library | p50 | p99 | p99.9 | samples/rep |\n|---|---|---|---|---|---|---|");
    for c in lat_cfgs() {
        for l in libs {
            let us = |m: &str| fmt_num(ctx.med("lat", &l.name, c, m) / 1000.0);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                if c.event { "event" } else { "poll" },
                c.depth,
                l.label,
                us("lat_p50_ns"),
                us("lat_p99_ns"),
                us("lat_p999_ns"),
                fmt_num(ctx.med("lat", &l.name, c, "lat_n"))
            );
        }
        let r =
            ctx.med("lat", &base.name, c, "lat_p99_ns") / ctx.med("lat", "rust", c, "lat_p99_ns");
        let _ = writeln!(
            md,
            "| | | **{} ÷ Rust p99** | | **{}** | | |",
            base.label,
            fmt_num(r)
        );
    }
    let _ = writeln!(md);
}

fn bw_section(ctx: &Ctx, md: &mut String, libs: &[Lib]) {
    let _ = writeln!(
        md,
        "## Copy-mode bandwidth, 14 MiB transfers (MiB/s; median of reps)\n"
    );
    let _ = writeln!(
        md,
        "memcpy of the same shapes (14 MiB source, 2 MiB pieces, pre-faulted destinations): \
         1 destination 1 thread {} MiB/s; ring of 8 destinations: 1 thread {} MiB/s, 2 threads {} MiB/s. \
         The limit of a cell is the memcpy of its destinations (1 at depth 1, 8 otherwise) with the best thread count it could use.\n",
        fmt_num(ctx.med("memcpy", "memcpy", mc(1, 1), "mib_s")),
        fmt_num(ctx.med("memcpy", "memcpy", mc(8, 1), "mib_s")),
        fmt_num(ctx.med("memcpy", "memcpy", mc(8, 2), "mib_s"))
    );
    let _ = writeln!(
        md,
        "Two limits per cell: the best memcpy of the run (the shapes above, max over the repetitions), \
         and the memcpy measured just before and after each repetition of the cell (mean of the two, \
         median over the repetitions); the ratio to the second is the median of the per-repetition \
         ratios (the target).\n"
    );
    let mut head =
        String::from("| depth | workers | run's best memcpy MiB/s | memcpy around MiB/s |");
    let mut sep = String::from("|---|---|---|---|");
    for l in libs {
        let _ = write!(
            head,
            " {} MiB/s | ÷ run's best | ÷ around (per-rep median) |",
            l.label
        );
        sep.push_str("---|---|---|");
    }
    let _ = writeln!(md, "{head}\n{sep}");
    for c in tput_cfgs().into_iter().filter(|c| c.copy && c.len == LEN7) {
        let lim = memcpy_limit(ctx, c.depth);
        let mut line = format!(
            "| {} | {} | {} | {} |",
            c.depth,
            c.workers,
            fmt_num(lim),
            fmt_num(ctx.med("memcpy_adj", "memcpy", c, "mib_s"))
        );
        for l in libs {
            let v = ctx.med("tput", &l.name, c, "mib_s");
            let around = median(&mut ctx.adjacent_ratios(&l.name, c));
            let _ = write!(
                line,
                " {} | {} | {} |",
                fmt_num(v),
                fmt_num(v / lim),
                fmt_num(around)
            );
        }
        let _ = writeln!(md, "{line}");
    }
    let _ = writeln!(md);
}

/// Lowest and highest per-repetition ratio Rust ÷ `base` of `metric` in one configuration.
fn ratio_spread(ctx: &Ctx, kind: &str, base: &Lib, c: Cfg, metric: &str) -> (f64, f64) {
    let rv = ctx.values(kind, "rust", c, metric);
    let bv = ctx.values(kind, &base.name, c, metric);
    let per: Vec<f64> = rv.iter().zip(&bv).map(|(a, b)| a / b).collect();
    let lo = per.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = per.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

fn xproc_section(ctx: &Ctx, md: &mut String, base: &Lib, libs: &[Lib]) {
    let lim = memcpy_limit(ctx, XPROC.depth);
    let _ = writeln!(
        md,
        "## Two-process copy-mode transfer, 14 MiB (MiB/s; median of reps)\n\n\
         Receiver in a child process, sender in another, over the loopback's per-pair Unix socket \
         (each 2 MiB WRITE copied into the socket and out of it); depth 1, workers {}, poll mode. \
         memcpy of the same buffer (14 MiB source, 2 MiB pieces, 1 destination, 1 thread; best of reps): {} MiB/s.\n",
        XPROC.workers,
        fmt_num(lim)
    );
    let _ = writeln!(
        md,
        "| library | MiB/s | ÷ memcpy | ÷ {} |\n|---|---|---|---|",
        base.label
    );
    let b = ctx.med("xproc", &base.name, XPROC, "mib_s");
    for l in libs {
        let v = ctx.med("xproc", &l.name, XPROC, "mib_s");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            l.label,
            fmt_num(v),
            fmt_num(v / lim),
            fmt_num(v / b)
        );
    }
    let (lo, hi) = ratio_spread(ctx, "xproc", base, XPROC, "mib_s");
    let _ = writeln!(
        md,
        "\nRust ÷ {} per repetition: {}–{}.\n",
        base.label,
        fmt_num(lo),
        fmt_num(hi)
    );
}

fn cg_section(ctx: &Ctx, md: &mut String, cgs: &[CgResult], libs: &[Lib]) {
    let _ = writeln!(
        md,
        "## Instructions per request (callgrind; no-copy, depth 1, workers 1, event-mode pollers; median of {} runs of {} requests)\n",
        ctx.opts.cg_reps,
        ctx.opts.cg_requests
    );
    let _ = writeln!(
        md,
        "Library instructions = self cost in the library object + inclusive cost of its calls into libc/ld.so/vDSO; \
         calls into the URMA provider and into the application's callbacks are excluded (shown apart).\n"
    );
    let _ = writeln!(md, "| chunks | library | lib instr/request | lib instr/chunk | lib syscalls/request | provider instr/request | whole process instr/request |\n|---|---|---|---|---|---|---|");
    for len in [LEN2, LEN7] {
        let c = Cfg {
            len,
            depth: 1,
            workers: 1,
            copy: false,
            event: true,
            rate: 0,
        };
        for l in libs {
            let ir = ctx.med("callgrind", &l.name, c, "lib_ir_per_req");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                chunks(len),
                l.label,
                fmt_num(ir),
                fmt_num(ir / chunks(len) as f64),
                fmt_num(ctx.med("callgrind", &l.name, c, "lib_syscalls_per_req")),
                fmt_num(ctx.med("callgrind", &l.name, c, "provider_ir_per_req")),
                fmt_num(ctx.med("callgrind", &l.name, c, "process_ir_per_req")),
            );
        }
    }
    let _ = writeln!(md);
    // breakdown, 7-chunk
    for l in libs {
        let mut runs: Vec<&CgResult> = cgs
            .iter()
            .filter(|r| r.len == LEN7 && r.lib == l.name)
            .collect();
        runs.sort_by_key(|r| r.attr.lib_ir() / r.requests.max(1));
        let Some(r) = runs.get(runs.len() / 2).copied() else {
            continue;
        };
        let label = libs
            .iter()
            .find(|l| l.name == r.lib)
            .map(|l| l.label.clone())
            .unwrap_or_default();
        let n = r.requests as f64;
        let _ = writeln!(
            md,
            "### Where {label} spends its instructions (7-chunk request, per request)\n"
        );
        let _ = writeln!(md, "| own function (self) | instr | | external callee (inclusive) | instr | syscalls |\n|---|---|---|---|---|---|");
        let mut own: Vec<_> = r.attr.fn_self.iter().collect();
        own.sort_by(|a, b| b.1.cmp(a.1));
        let mut ext: Vec<_> = r.attr.callee_incl.iter().collect();
        ext.sort_by(|a, b| b.1.cmp(a.1));
        for i in 0..12 {
            let o = own
                .get(i)
                .map(|(f, v)| (short(f), fmt_num(**v as f64 / n)))
                .unwrap_or_default();
            let e = ext
                .get(i)
                .map(|(f, v)| {
                    (
                        short(f),
                        fmt_num(**v as f64 / n),
                        fmt_num(r.attr.callee_sys.get(*f).copied().unwrap_or(0) as f64 / n),
                    )
                })
                .unwrap_or_default();
            if o.0.is_empty() && e.0.is_empty() {
                break;
            }
            let _ = writeln!(md, "| {} | {} | | {} | {} | {} |", o.0, o.1, e.0, e.1, e.2);
        }
        let _ = writeln!(md);
    }
}

fn short(f: &str) -> String {
    let s: String = f.chars().take(90).collect();
    s.replace('|', "\\|")
}

fn alloc_section(ctx: &Ctx, md: &mut String, libs: &[Lib]) {
    let _ = writeln!(
        md,
        "## Heap allocations (LD_PRELOAD counter, calls whose return address is in the library; no-copy, depth 8, workers 2, after warm-up)\n"
    );
    let _ = writeln!(md, "| chunks | library | allocs/request | allocs/chunk | frees/request | bytes/request | allocs at init |\n|---|---|---|---|---|---|---|");
    for len in [LEN2, LEN7] {
        let c = Cfg {
            len,
            depth: 8,
            workers: 2,
            copy: false,
            event: false,
            rate: 0,
        };
        for l in libs {
            let n = ctx.med("alloc", &l.name, c, "requests");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                chunks(len),
                l.label,
                fmt_num(ctx.med("alloc", &l.name, c, "lib_allocs_per_req")),
                fmt_num(ctx.med("alloc", &l.name, c, "lib_allocs_per_chunk")),
                fmt_num(ctx.med("alloc", &l.name, c, "lib_frees") / n),
                fmt_num(ctx.med("alloc", &l.name, c, "lib_bytes") / n),
                fmt_num(ctx.med("alloc", &l.name, c, "init_lib_allocs")),
            );
        }
    }
    let _ = writeln!(md);
}

fn write_csv(ctx: &Ctx, path: &Path) -> std::io::Result<()> {
    let mut s =
        String::from("kind,lib,len,chunks,loopback,poller,depth,workers,rate,rep,metric,value\n");
    for r in &ctx.rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            r.kind,
            r.lib,
            r.len,
            chunks(r.len),
            if r.copy { "copy" } else { "nocopy" },
            if r.event { "event" } else { "poll" },
            r.depth,
            r.workers,
            r.rate,
            r.rep,
            r.metric,
            r.value
        );
    }
    std::fs::write(path, s)
}

/// gnuplot (Debian `gnuplot-nox`, openEuler `gnuplot`): 2×2 panels, requests/s by depth.
fn chart(ctx: &mut Ctx) {
    let dir = ctx.opts.out.clone();
    let libs = ctx.libs.clone();
    let mut dat = String::new();
    let panels = [
        (false, LEN2, "no-copy, 2 chunks (2 MiB + 1)"),
        (false, LEN7, "no-copy, 7 chunks (14 MiB)"),
        (true, LEN2, "copy, 2 chunks (2 MiB + 1)"),
        (true, LEN7, "copy, 7 chunks (14 MiB)"),
    ];
    for (copy, len, _) in panels {
        let _ = write!(dat, "# depth");
        for l in &libs {
            for w in WORKERS {
                let _ = write!(dat, " {}_w{w}", l.name);
            }
        }
        let _ = writeln!(dat);
        for depth in DEPTHS {
            let _ = write!(dat, "{depth}");
            for l in &libs {
                for workers in WORKERS {
                    let c = Cfg {
                        len,
                        depth,
                        workers,
                        copy,
                        event: false,
                        rate: 0,
                    };
                    let _ = write!(dat, " {}", ctx.med("tput", &l.name, c, "rps"));
                }
            }
            let _ = writeln!(dat);
        }
        let _ = writeln!(dat, "\n");
    }
    let dat_path = dir.join("chart.dat");
    let _ = std::fs::write(&dat_path, dat);
    let mut gp = String::new();
    let _ = writeln!(
        gp,
        "set terminal pngcairo size 1400,1000 font 'Sans,10'\nset output '{}'\n\
         set multiplot layout 2,2 title 'ostbench: requests/s by in-flight depth (median of {} reps) — solid: Rust, dashed: C'\n\
         set logscale y\nset grid ytics\nset xlabel 'in-flight depth'\nset ylabel 'requests/s'\n\
         set key outside right top box\nset xrange [-0.3:2.3]",
        dir.join("chart.png").display(),
        ctx.opts.reps
    );
    let colors = ["#1f77b4", "#2ca02c", "#d62728"];
    for (i, (_, _, title)) in panels.iter().enumerate() {
        let _ = writeln!(gp, "set title '{title}'");
        let mut parts = Vec::new();
        let mut col = 2;
        for (li, l) in libs.iter().enumerate() {
            for (wi, w) in WORKERS.iter().enumerate() {
                parts.push(format!(
                    "'{}' index {i} using 0:{col}:xtic(1) with linespoints lw 2 pt {} dt {} lc rgb '{}' title '{} w{w}'",
                    dat_path.display(),
                    5 + li * 2,
                    li + 1,
                    colors[wi],
                    l.label
                ));
                col += 1;
            }
        }
        let _ = writeln!(gp, "plot {}", parts.join(", \\\n  "));
    }
    let _ = writeln!(gp, "unset multiplot");
    let gp_path = dir.join("chart.gp");
    let _ = std::fs::write(&gp_path, gp);
    match Command::new("gnuplot").arg(&gp_path).output() {
        Ok(o) if o.status.success() => ctx.note(format!("chart: {}", dir.join("chart.png").display())),
        Ok(o) => ctx.fail(format!(
            "gnuplot failed: {}",
            String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")
        )),
        Err(_) => ctx.note(
            "chart skipped: gnuplot is not installed (make deps EXTRA_DEPS=bench); chart.gp + chart.dat written"
                .into(),
        ),
    }
}

fn now_string() -> String {
    sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])
}

/// Runs the quick or full benchmark; returns the process exit status.
pub fn run(opts: &Opts) -> i32 {
    let started = now_string();
    let t = Instant::now();
    let steal_start = steal::read();
    if let Err(e) = std::fs::create_dir_all(&opts.out) {
        eprintln!("ostbench: cannot create {}: {e}", opts.out.display());
        return 2;
    }
    let mut ctx = Ctx {
        opts: Opts {
            full: opts.full,
            out: opts.out.clone(),
            reps: opts.reps,
            secs: opts.secs,
            cg_requests: opts.cg_requests,
            cg_reps: opts.cg_reps.max(1),
            paced_reps: opts.paced_reps.max(1),
            paced_secs: opts.paced_secs,
            alloc_requests: opts.alloc_requests,
        },
        libs: libs(),
        rows: Vec::new(),
        errors: Vec::new(),
        log: Vec::new(),
        steal: Vec::new(),
    };
    for l in ctx.libs.clone() {
        if !l.path.exists() {
            ctx.fail(format!(
                "{} library not found at {}",
                l.name,
                l.path.display()
            ));
        }
    }
    if !ctx.errors.is_empty() {
        eprintln!("ostbench: build first (make bench builds everything it needs)");
        return 1;
    }
    let cgs = run_callgrind(&mut ctx);
    run_alloc(&mut ctx);
    if opts.full {
        let reps = ctx.opts.paced_reps;
        timed(&mut ctx, "paced", "paced", |ctx| {
            run_paced(ctx, &paced_cfgs(), reps)
        });
        timed(&mut ctx, "idle", "idle", run_idle);
    } else {
        timed(&mut ctx, "paced", "paced", |ctx| {
            run_paced(ctx, &[QUICK_PACED], 1)
        });
    }
    if opts.full {
        timed(&mut ctx, "memcpy", "memcpy", run_memcpy);
        let secs = ctx.opts.secs;
        timed(&mut ctx, "lat", "latency", |ctx| {
            run_tput(
                ctx,
                ("lat", "tput"),
                &lat_cfgs(),
                secs.max(1.0),
                &TPUT_METRICS,
            )
        });
        timed(&mut ctx, "tput", "tput", |ctx| {
            run_tput(ctx, ("tput", "tput"), &tput_cfgs(), secs, &TPUT_METRICS)
        });
        timed(&mut ctx, "xproc", "xproc", |ctx| {
            run_tput(ctx, ("xproc", "xsend"), &[XPROC], secs, &XPROC_METRICS)
        });
        chart(&mut ctx);
    }
    let run_steal = steal::since(steal_start);
    ctx.push_steal("timed", &steal::over_sections(&ctx.steal));
    ctx.push_steal("run", &run_steal);
    let md = report(
        &mut ctx,
        &cgs,
        &started,
        t.elapsed().as_secs_f64(),
        &run_steal,
    );
    let name = if opts.full { "report" } else { "quick" };
    let md_path = opts.out.join(format!("{name}.md"));
    let csv_path = opts.out.join(format!("{name}.csv"));
    println!("{md}");
    if let Err(e) = std::fs::write(&md_path, &md).and_then(|_| write_csv(&ctx, &csv_path)) {
        eprintln!("ostbench: writing the report: {e}");
        return 1;
    }
    eprintln!(
        "ostbench: wrote {} and {} in {:.1} s",
        md_path.display(),
        csv_path.display(),
        t.elapsed().as_secs_f64()
    );
    if ctx.errors.is_empty() {
        0
    } else {
        1
    }
}

// ---- paced load

/// Offered loads of the paced cells, pairs/s.
const PACED_RATES: [u32; 3] = [1000, 10000, 50000];
/// Most pairs a paced driver keeps in flight (its depth).
const PACED_MAX_INFLIGHT: usize = 64;
/// The one paced cell of `make bench-quick` (reported, not a target there).
const QUICK_PACED: Cfg = Cfg {
    len: LEN2,
    depth: PACED_MAX_INFLIGHT,
    workers: 4,
    copy: false,
    event: true,
    rate: 1000,
};
/// The idle cell: 64 workers, nothing to do.
const IDLE: Cfg = Cfg {
    len: LEN2,
    depth: 1,
    workers: 64,
    copy: false,
    event: true,
    rate: 0,
};
const IDLE_SECS: f64 = 2.0;

/// The full cross product: 3 rates × workers {4, 64} × {2, 7} chunks × poll/event = 24 cells.
fn paced_cfgs() -> Vec<Cfg> {
    let mut v = Vec::new();
    for rate in PACED_RATES {
        for workers in [4, 64] {
            for len in [LEN2, LEN7] {
                for event in [false, true] {
                    v.push(Cfg {
                        len,
                        depth: PACED_MAX_INFLIGHT,
                        workers,
                        copy: false,
                        event,
                        rate,
                    });
                }
            }
        }
    }
    v
}

/// Window of a paced cell: at least ~1000 pairs (twice the window at 1 k pairs/s).
fn paced_secs(ctx: &Ctx, c: Cfg) -> f64 {
    if c.rate <= 1000 {
        2.0 * ctx.opts.paced_secs
    } else {
        ctx.opts.paced_secs
    }
}

const PACED_METRICS: [&str; 10] = [
    "rps",
    "cpu_ns_per_pair",
    "cpu_process_ns_per_pair",
    "cpu_poll_idle_ns_per_pair",
    "cpu_workers_ns_per_pair",
    "cpu_main_ns_per_pair",
    "cpu_pollers_lib_ns_per_pair",
    "lat_p50_ns",
    "lat_p99_ns",
    "lat_n",
];

fn run_paced(ctx: &mut Ctx, cfgs: &[Cfg], reps: usize) {
    let t = Instant::now();
    for rep in 0..reps {
        for c in cfgs {
            for lib in interleaved(&ctx.libs, rep) {
                let mut extra = c.args();
                extra.extend(["--secs".into(), paced_secs(ctx, *c).to_string()]);
                let r = match spawn_cell(&lib, "paced", &extra, Runner::Native) {
                    Err(e) => {
                        ctx.fail(e);
                        continue;
                    }
                    Ok(r) => r,
                };
                let Some(named) = workers_named(ctx, &lib, &r, c.workers, "paced") else {
                    continue;
                };
                for m in PACED_METRICS {
                    if m == "cpu_workers_ns_per_pair" && !named {
                        continue;
                    }
                    match num(&r, m) {
                        Ok(v) => ctx.push("paced", &lib.name, *c, rep, m, v),
                        Err(e) => ctx.fail(format!("paced {}: {e}", lib.name)),
                    }
                }
            }
        }
        eprintln!(
            "ostbench: paced: rep {}/{reps} ({:.0} s)",
            rep + 1,
            t.elapsed().as_secs_f64()
        );
    }
}

/// Whether a paced or idle cell found the library's `workers` worker threads by name
/// (`ost_wkr_<n>`, as both libraries of this repository name them). For them a mismatch is a
/// broken measurement (`None`); a `LEGACY_LIB` build may name its threads otherwise, and then only
/// its worker-thread CPU is left out (`Some(false)`).
fn workers_named(ctx: &mut Ctx, lib: &Lib, r: &Res, workers: u32, what: &str) -> Option<bool> {
    if num(r, "workers_found").ok() == Some(f64::from(workers)) {
        return Some(true);
    }
    let msg = format!(
        "{what} {}: found {:?} worker threads named ost_wkr_*, expected {workers}",
        lib.name,
        r.get("workers_found")
    );
    if lib.name == "ext" {
        ctx.note(format!("{msg}: its worker-thread CPU is not shown"));
        return Some(false);
    }
    ctx.fail(msg);
    None
}

fn run_idle(ctx: &mut Ctx) {
    for rep in 0..ctx.opts.paced_reps {
        for lib in ctx.libs.clone() {
            let mut extra = IDLE.args();
            extra.extend(["--secs".into(), IDLE_SECS.to_string()]);
            match spawn_cell(&lib, "idle", &extra, Runner::Native) {
                Err(e) => ctx.fail(e),
                Ok(r) => {
                    let Some(named) = workers_named(ctx, &lib, &r, IDLE.workers, "idle") else {
                        continue;
                    };
                    for m in ["cpu_process_ns_per_s", "cpu_workers_ns_per_s"] {
                        if m == "cpu_workers_ns_per_s" && !named {
                            continue;
                        }
                        match num(&r, m) {
                            Ok(v) => ctx.push("idle", &lib.name, IDLE, rep, m, v),
                            Err(e) => ctx.fail(format!("idle {}: {e}", lib.name)),
                        }
                    }
                }
            }
        }
    }
}

/// Rust ÷ baseline CPU per pair of a paced cell (medians over the repetitions).
fn paced_cpu_ratio(ctx: &Ctx, base: &Lib, c: Cfg) -> f64 {
    ctx.med("paced", "rust", c, "cpu_ns_per_pair")
        / ctx.med("paced", &base.name, c, "cpu_ns_per_pair")
}

fn paced_targets(ctx: &Ctx, targets: &mut Vec<Target>, base: &Lib) {
    if !ctx.opts.full {
        let r = paced_cpu_ratio(ctx, base, QUICK_PACED);
        targets.push(Target {
            name: "Rust ÷ C CPU per pair, paced 1 k pairs/s, 2 chunks, 4 workers, event mode (one run; reported, the full bench gates every paced cell)",
            value: fmt_num(r),
            threshold: REPORT_ONLY,
            ok: None,
        });
        return;
    }
    let mut worst: Option<(f64, Cfg)> = None;
    let mut fails = 0;
    let mut measured = 0;
    for c in paced_cfgs() {
        let r = paced_cpu_ratio(ctx, base, c);
        if r.is_nan() {
            continue;
        }
        measured += 1;
        if r > 1.0 {
            fails += 1;
        }
        if worst.is_none_or(|(w, _)| r > w) {
            worst = Some((r, c));
        }
    }
    let total = paced_cfgs().len();
    targets.push(Target {
        name: "Rust ÷ C CPU per pair in every paced cell (worst cell)",
        value: match worst {
            Some((r, c)) => format!(
                "{} ({} pairs/s, {} chunks, workers {}, {}); {fails} of {measured} cells above 1",
                fmt_num(r),
                c.rate,
                chunks(c.len),
                c.workers,
                if c.event { "event" } else { "poll" }
            ),
            None => "n/a".into(),
        },
        threshold: "≤ 1.0",
        ok: (measured == total).then_some(fails == 0),
    });
    let idle = ctx.med("idle", "rust", IDLE, "cpu_process_ns_per_s") / 1e6;
    targets.push(Target {
        name: "Rust idle CPU, 64 idle workers (process, ms per s)",
        value: format!(
            "{} (worker threads {}; C: {})",
            fmt_num(idle),
            fmt_num(ctx.med("idle", "rust", IDLE, "cpu_workers_ns_per_s") / 1e6),
            fmt_num(ctx.med("idle", &base.name, IDLE, "cpu_process_ns_per_s") / 1e6)
        ),
        threshold: "≤ 1.0",
        ok: idle.is_finite().then_some(idle <= 1.0),
    });
}

fn paced_section(ctx: &Ctx, md: &mut String, base: &Lib) {
    let cfgs = if ctx.opts.full {
        paced_cfgs()
    } else {
        vec![QUICK_PACED]
    };
    let reps = if ctx.opts.full {
        ctx.opts.paced_reps
    } else {
        1
    };
    let _ = writeln!(
        md,
        "## Paced load (no-copy; median of {reps} interleaved repetitions; CPU in µs per send + recv pair)\n"
    );
    let _ = writeln!(
        md,
        "**CPU** (the target) = process user + system time (getrusage) over the window, minus the \
         application pollers' CPU time outside their calls into the library (waiting for events, \
         polling, and in poll mode spinning on empty JFCs; per-thread CPU clocks around each batch \
         of `os_transport_wake_up_task` calls), ÷ completed pairs: the library's threads, the \
         library's work on the application's threads, and the driver's own loop. **Process** = the \
         whole process, pollers included. **Workers** = the library's `ost_wkr_*` threads alone. \
         Latency: receive CR polled → `notify_callback` entered, µs.\n"
    );
    let _ = writeln!(
        md,
        "| offered pairs/s | chunks | workers | poller | Rust pairs/s | {b} pairs/s | Rust CPU | {b} CPU | **Rust ÷ {b} CPU** | Rust workers | {b} workers | Rust process | {b} process | Rust ÷ {b} process | Rust p50 / p99 | {b} p50 / p99 |",
        b = base.label
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let us = |lib: &str, c: Cfg, m: &str| fmt_num(ctx.med("paced", lib, c, m) / 1000.0);
    for c in cfgs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} | {} | {} | {} | {} / {} | {} / {} |",
            c.rate,
            chunks(c.len),
            c.workers,
            if c.event { "event" } else { "poll" },
            fmt_num(ctx.med("paced", "rust", c, "rps")),
            fmt_num(ctx.med("paced", &base.name, c, "rps")),
            us("rust", c, "cpu_ns_per_pair"),
            us(&base.name, c, "cpu_ns_per_pair"),
            fmt_num(paced_cpu_ratio(ctx, base, c)),
            us("rust", c, "cpu_workers_ns_per_pair"),
            us(&base.name, c, "cpu_workers_ns_per_pair"),
            us("rust", c, "cpu_process_ns_per_pair"),
            us(&base.name, c, "cpu_process_ns_per_pair"),
            fmt_num(
                ctx.med("paced", "rust", c, "cpu_process_ns_per_pair")
                    / ctx.med("paced", &base.name, c, "cpu_process_ns_per_pair")
            ),
            us("rust", c, "lat_p50_ns"),
            us("rust", c, "lat_p99_ns"),
            us(&base.name, c, "lat_p50_ns"),
            us(&base.name, c, "lat_p99_ns"),
        );
    }
    let _ = writeln!(md);
    if ctx.opts.full {
        let _ = writeln!(
            md,
            "Idle, 64 workers, pollers stopped ({IDLE_SECS} s windows): Rust {} ms/s (workers {} ms/s), {} {} ms/s (workers {} ms/s).\n",
            fmt_num(ctx.med("idle", "rust", IDLE, "cpu_process_ns_per_s") / 1e6),
            fmt_num(ctx.med("idle", "rust", IDLE, "cpu_workers_ns_per_s") / 1e6),
            base.label,
            fmt_num(ctx.med("idle", &base.name, IDLE, "cpu_process_ns_per_s") / 1e6),
            fmt_num(ctx.med("idle", &base.name, IDLE, "cpu_workers_ns_per_s") / 1e6),
        );
    }
}
