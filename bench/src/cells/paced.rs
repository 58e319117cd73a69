//! The paced cell: CPU time per send + recv pair of each library under an open-loop load of
//! {1 k, 10 k, 50 k} pairs/s (2 and 7 chunks, workers 4 and 64, poll and event mode; no-copy),
//! achieved rate and latency; `make bench-quick` runs one cell of it, reported without a target.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::cell::{About, Cell, Measure, Target, REPORT_ONLY};
use crate::child::{
    cpu_snap, percentile, record_latencies, recorded_latencies, split_poller_cpu, threads_cpu_ns,
    Needs, Window,
};
use crate::orch::report::fmt_num;
use crate::orch::run::{
    chunks, interleaved, num, spawn_cell, BenchRun, Cfg, Lib, Res, Runner, LEN2, LEN7,
};

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
fn paced_secs(ctx: &BenchRun, c: Cfg) -> f64 {
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

pub struct Paced;

const ABOUT: About = About {
    name: "paced",
    timed: Some("paced"),
    quick: true,
    measures: &[Measure::window_needing(
        "paced",
        Needs {
            rate: true,
            ..Needs::NOTHING
        },
        window,
    )],
};

impl Cell for Paced {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        if ctx.opts.full {
            let reps = ctx.opts.paced_reps;
            run_paced(ctx, &paced_cfgs(), reps);
        } else {
            run_paced(ctx, &[QUICK_PACED], 1);
        }
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
        if !ctx.opts.full {
            let r = paced_cpu_ratio(ctx, base, QUICK_PACED);
            return vec![Target {
                name: "Rust ÷ C CPU per pair, paced 1 k pairs/s, 2 chunks, 4 workers, event mode (one run; reported, the full bench gates every paced cell)",
                value: fmt_num(r),
                threshold: REPORT_ONLY,
                ok: None,
            }];
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
        vec![Target {
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
        }]
    }

    fn section(&self, ctx: &BenchRun, base: &Lib, md: &mut String) {
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
    }
}

/// Runs the paced children of `cfgs`, `reps` interleaved repetitions.
fn run_paced(ctx: &mut BenchRun, cfgs: &[Cfg], reps: usize) {
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
pub fn workers_named(
    ctx: &mut BenchRun,
    lib: &Lib,
    r: &Res,
    workers: u32,
    what: &str,
) -> Option<bool> {
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

/// Rust ÷ baseline CPU per pair of a paced cell (medians over the repetitions).
fn paced_cpu_ratio(ctx: &BenchRun, base: &Lib, c: Cfg) -> f64 {
    ctx.med("paced", "rust", c, "cpu_ns_per_pair")
        / ctx.med("paced", &base.name, c, "cpu_ns_per_pair")
}

fn window(w: &mut Window) -> Result<(), String> {
    let cfg = w.cfg;
    w.d.drain()?;
    // Sleep to the microsecond (the default timer slack of 50 µs would lower the offered rate;
    // the schedule absorbs late wake-ups anyway).
    // SAFETY: plain prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
    // Settle into the regime (the libraries' waits adapt to the arrival pattern).
    w.d.paced(cfg.rate, Duration::from_millis(200), cfg.depth)?;
    split_poller_cpu(true);
    record_latencies(true);
    let c0 = cpu_snap(true);
    let t0 = Instant::now();
    let n =
        w.d.paced(cfg.rate, Duration::from_secs_f64(cfg.secs), cfg.depth)?;
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cpu_snap(false);
    record_latencies(false);
    split_poller_cpu(false);
    w.d.drain()?;
    if n == 0 {
        return Err("paced window completed no pair".into());
    }
    let process = c1.process - c0.process;
    let workers = c1.workers.saturating_sub(c0.workers);
    // The pollers' time outside the calls into the library is the application's own (event
    // waits, polls, and in poll mode its idle spinning).
    let poll_busy = c1.poll_busy - c0.poll_busy;
    let poll_idle = (c1.pollers - c0.pollers).saturating_sub(poll_busy);
    let per = |v: u64| format!("{:.1}", v as f64 / n as f64);
    w.kv("requests", n.to_string());
    w.kv("secs", format!("{secs:.6}"));
    w.kv("rps", format!("{:.3}", n as f64 / secs));
    w.kv("offered", cfg.rate.to_string());
    w.kv("cpu_process_ns_per_pair", per(process));
    w.kv("cpu_poll_idle_ns_per_pair", per(poll_idle));
    w.kv("cpu_ns_per_pair", per(process.saturating_sub(poll_idle)));
    w.kv("cpu_workers_ns_per_pair", per(workers));
    w.kv("cpu_main_ns_per_pair", per(c1.main - c0.main));
    w.kv("cpu_pollers_lib_ns_per_pair", per(poll_busy));
    w.kv("workers_found", threads_cpu_ns("ost_wkr_").1.to_string());
    let lat = recorded_latencies();
    w.kv("lat_n", lat.len().to_string());
    w.kv("lat_p50_ns", percentile(&lat, 0.50).to_string());
    w.kv("lat_p99_ns", percentile(&lat, 0.99).to_string());
    Ok(())
}
