//! The requests/s cell: send + recv pairs per second of each library in a closed loop (2 and 7
//! chunks × depth {1, 8, 64} × workers {1, 2, 4} × no-copy / copy), copy-mode 14 MiB cells also
//! in MiB/s with the memcpy measured around each repetition; the depth-64 target, the table and
//! the chart. [`run_closed`] runs the closed-loop children of the latency and two-process cells
//! too.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::cell::{About, Cell, Measure, Target};
use crate::child::{percentile, record_latencies, recorded_latencies, Window};
use crate::memcpy::{adjacent_limit, memcpy_source};
use crate::orch::chart::{self, Chart, Panel};
use crate::orch::report::fmt_num;
use crate::orch::run::{
    chunks, interleaved, num, spawn_cell, BenchRun, Cfg, Lib, Runner, LEN2, LEN7,
};

const DEPTHS: [usize; 3] = [1, 8, 64];
const WORKERS: [u32; 3] = [1, 2, 4];

/// The chart: requests/s by depth, a panel per loopback mode and request length.
const PANELS: [Panel; 4] = [
    Panel {
        copy: false,
        len: LEN2,
        title: "no-copy, 2 chunks (2 MiB + 1)",
    },
    Panel {
        copy: false,
        len: LEN7,
        title: "no-copy, 7 chunks (14 MiB)",
    },
    Panel {
        copy: true,
        len: LEN2,
        title: "copy, 2 chunks (2 MiB + 1)",
    },
    Panel {
        copy: true,
        len: LEN7,
        title: "copy, 7 chunks (14 MiB)",
    },
];

pub struct Tput;

const ABOUT: About = About {
    name: "tput",
    timed: Some("tput"),
    quick: false,
    measures: &[Measure::window("tput", window)],
};

impl Cell for Tput {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        let (secs, libs) = (ctx.opts.secs, ctx.libs.clone());
        run_closed(
            ctx,
            &libs,
            ("tput", "tput"),
            &tput_cfgs(),
            secs,
            &TPUT_METRICS,
        );
    }

    fn after(&mut self, ctx: &mut BenchRun) {
        chart::draw(
            ctx,
            &Chart {
                kind: "tput",
                metric: "rps",
                title: "ostbench: requests/s by in-flight depth",
                ylabel: "requests/s",
                panels: &PANELS,
                depths: &DEPTHS,
                workers: &WORKERS,
            },
        );
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
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
        vec![Target {
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
        }]
    }

    fn section(&self, ctx: &BenchRun, base: &Lib, md: &mut String) {
        let libs = &ctx.libs;
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
            let (lo, hi) = ctx.ratio_spread("tput", base, c, "rps");
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
}

/// The closed-loop cells: no-copy and copy, 2 and 7 chunks, every depth and worker count.
pub fn tput_cfgs() -> Vec<Cfg> {
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

/// Metrics of a closed-loop (`tput`) cell kept in the rows.
pub const TPUT_METRICS: [&str; 8] = [
    "rps",
    "mib_s",
    "lat_p50_ns",
    "lat_p99_ns",
    "lat_p999_ns",
    "lat_n",
    "logs",
    "wake_errors",
];

/// Runs child cells of kind `cell` for every configuration, library of `libs` and repetition
/// (interleaved) and keeps `metrics` of each as rows of `kind`.
pub fn run_closed(
    ctx: &mut BenchRun,
    libs: &[Lib],
    (kind, cell): (&'static str, &str),
    cfgs: &[Cfg],
    secs: f64,
    metrics: &[&str],
) {
    let total = cfgs.len() * libs.len() * ctx.opts.reps;
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
            for lib in interleaved(libs, rep) {
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

/// Whether the memcpy limit is measured around the repetitions of `c` in a section of `kind`:
/// the copy-mode 14 MiB requests/s cells.
fn memcpy_around(kind: &str, c: &Cfg) -> bool {
    kind == "tput" && c.copy && c.len == LEN7
}

fn window(w: &mut Window) -> Result<(), String> {
    let cfg = w.cfg;
    record_latencies(true);
    let t0 = Instant::now();
    let window = Duration::from_secs_f64(cfg.secs);
    let mut n = 0u64;
    let mut t_end;
    loop {
        w.d.step()?;
        n += 1;
        t_end = t0.elapsed();
        if t_end >= window {
            break;
        }
    }
    record_latencies(false);
    let secs = t_end.as_secs_f64();
    w.kv("requests", n.to_string());
    w.kv("secs", format!("{secs:.6}"));
    w.kv("rps", format!("{:.3}", n as f64 / secs));
    w.kv(
        "mib_s",
        format!(
            "{:.3}",
            n as f64 * cfg.len as f64 / secs / (1024.0 * 1024.0)
        ),
    );
    let lat = recorded_latencies();
    w.kv("lat_n", lat.len().to_string());
    for (name, q) in [
        ("lat_p50_ns", 0.50),
        ("lat_p99_ns", 0.99),
        ("lat_p999_ns", 0.999),
    ] {
        w.kv(name, percentile(&lat, q).to_string());
    }
    w.d.drain()
}
