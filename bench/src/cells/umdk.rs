//! The genuine-core cell: what the dispatch of the genuine UMDK URMA core costs each library.
//! Every library runs over the genuine core with the loopback as its provider plugin
//! ([`Lib::over`], rows of library `<lib>@umdk`) beside itself over the standalone loopback
//! `liburma.so.0`, in the same run:
//!
//! * instructions per request (callgrind, the callgrind cell's configuration, rows `umdk_cg`):
//!   those executed in the core's own object and the calls into it ([`core_counts`]), the
//!   library's calls into the URMA library, and the whole process (the application's polling
//!   included); over the standalone loopback they are the callgrind cell's rows;
//! * `make bench` only: requests/s at depth 64 (the requests/s target's cells) and completion →
//!   callback latency at depth 1 (the latency target's cells), the two URMA libraries
//!   interleaved in every repetition (rows `umdk`).
//!
//! Without a genuine core it runs nothing and says so ([`NO_GENUINE_CORE`]).

use std::fmt::Write as _;

use super::callgrind;
use super::lat::lat_cfgs;
use super::tput::{run_closed, tput_cfgs, TPUT_METRICS};
use crate::cell::{About, Cell, Target, REPORT_ONLY};
use crate::orch::report::fmt_num;
use crate::orch::run::{chunks, BenchRun, Cfg, GenuineCore, Lib, LEN2, LEN7, NO_GENUINE_CORE};

pub struct Umdk;

const ABOUT: About = About {
    name: "umdk",
    timed: Some("genuine core"),
    quick: true,
    measures: &[],
};

/// The rows of the instruction counts over the genuine core.
const CG: &str = "umdk_cg";

/// The requests/s target's cells: depth 64, no-copy, 2 chunks, every worker count.
fn depth64() -> Vec<Cfg> {
    tput_cfgs()
        .into_iter()
        .filter(|c| c.depth == 64 && !c.copy && c.len == LEN2)
        .collect()
}

/// The latency target's cells: depth 1, poll and event mode.
fn depth1() -> Vec<Cfg> {
    lat_cfgs().into_iter().filter(|c| c.depth == 1).collect()
}

impl Cell for Umdk {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        // Without a core its target and section say so.
        let Some(core) = ctx.genuine.clone() else {
            return;
        };
        let over: Vec<Lib> = ctx.libs.iter().map(|l| l.over(&core)).collect();
        if callgrind::available() {
            let dir = callgrind::fresh_dir(ctx, "umdk-callgrind");
            let reps = if ctx.opts.full { ctx.opts.cg_reps } else { 1 };
            for rep in 0..reps {
                for len in [LEN2, LEN7] {
                    for lib in &over {
                        if let Some(r) = callgrind::count(ctx, CG, lib, len, rep, &dir) {
                            core_counts(ctx, &core, lib, len, rep, &r);
                        }
                    }
                }
            }
        } else {
            ctx.note("genuine core: no instruction counts without valgrind".into());
        }
        if !ctx.opts.full {
            return;
        }
        // Each library beside itself over the genuine core, interleaved.
        let both: Vec<Lib> = ctx
            .libs
            .iter()
            .zip(&over)
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect();
        let secs = ctx.opts.secs;
        run_closed(
            ctx,
            &both,
            ("umdk", "tput"),
            &depth64(),
            secs,
            &TPUT_METRICS,
        );
        run_closed(
            ctx,
            &both,
            ("umdk", "tput"),
            &depth1(),
            secs.max(1.0),
            &TPUT_METRICS,
        );
    }

    fn targets(&self, ctx: &BenchRun, _base: &Lib) -> Vec<Target> {
        let target = |name, value| Target {
            name,
            value,
            threshold: REPORT_ONLY,
            ok: None,
        };
        if ctx.genuine.is_none() {
            return vec![target(
                "genuine URMA core + loopback plugin ÷ standalone loopback",
                NO_GENUINE_CORE.to_string(),
            )];
        }
        let per_lib = |f: &dyn Fn(&Lib) -> String| {
            ctx.libs
                .iter()
                .map(|l| format!("{}: {}", l.label, f(l)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let c7 = callgrind::cfg(LEN7);
        let mut v = vec![target(
            "instructions the genuine core executes per 7-chunk request (per call into it), callgrind",
            per_lib(&|l| {
                let g = l.genuine_name();
                let ir = ctx.med(CG, &g, c7, "core_ir_per_req");
                let calls = ctx.med(CG, &g, c7, "core_calls_per_req");
                format!(
                    "{} ({} per call, {} calls)",
                    fmt_num(ir),
                    fmt_num(ir / calls),
                    fmt_num(calls)
                )
            }),
        )];
        // Genuine ÷ standalone of `metric` in each of `cfgs`, per library.
        let ratios = |cfgs: Vec<Cfg>, metric: &str| {
            per_lib(&|l| {
                cfgs.iter()
                    .map(|&c| fmt_num(ratio(ctx, l, c, metric)))
                    .collect::<Vec<_>>()
                    .join(" / ")
            })
        };
        if ctx.opts.full {
            v.push(target(
                "genuine core ÷ standalone loopback requests/s, depth 64, no-copy, 2 chunks (workers 1 / 2 / 4)",
                ratios(depth64(), "rps"),
            ));
            v.push(target(
                "genuine core ÷ standalone loopback p99 completion → callback latency, depth 1 (poll / event)",
                ratios(depth1(), "lat_p99_ns"),
            ));
        }
        v
    }

    fn section(&self, ctx: &BenchRun, _base: &Lib, md: &mut String) {
        let _ = writeln!(
            md,
            "## Over the genuine URMA core (genuine core + loopback plugin beside the standalone loopback)\n"
        );
        let Some(core) = &ctx.genuine else {
            let _ = writeln!(md, "{NO_GENUINE_CORE}.\n");
            return;
        };
        let _ = writeln!(
            md,
            "Each library over the genuine UMDK URMA core, which dispatches every call to the loopback \
             loaded as its provider plugin ({}), beside the same library over the standalone loopback \
             `liburma.so.0`, in this run.\n",
            core.describe()
        );
        let _ = writeln!(
            md,
            "### Instructions per request (callgrind; no-copy, depth 1, workers 1, event-mode pollers; \
             standalone: the callgrind section's runs; genuine: {})\n\n\
             In the core = the instructions executed in the genuine core's own object (its entry \
             points and their dispatch to the plugin; every caller: the library and the \
             application's pollers), per request and per call into it from another object. URMA \
             library = the library's calls into `liburma*` objects (standalone: the loopback; \
             genuine: the core and the plugin). Process = every instruction of the process in the \
             window (it moves with the number of poller wake-ups).\n",
            if ctx.opts.full {
                format!("median of {} runs", ctx.opts.cg_reps)
            } else {
                "one run".to_string()
            }
        );
        let _ = writeln!(
            md,
            "| chunks | library | calls into the core/request | in the core, instr/request | in the core, instr/call | URMA library instr/request, standalone → genuine | process instr/request, standalone → genuine | library instr/request, standalone → genuine |\n|---|---|---|---|---|---|---|---|"
        );
        for len in [LEN2, LEN7] {
            let c = callgrind::cfg(len);
            for l in &ctx.libs {
                let pair = |m: &str| {
                    let (a, b) = cg_pair(ctx, l, c, m);
                    format!("{} → {}", fmt_num(a), fmt_num(b))
                };
                let g = l.genuine_name();
                let ir = ctx.med(CG, &g, c, "core_ir_per_req");
                let calls = ctx.med(CG, &g, c, "core_calls_per_req");
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} | {} | {} |",
                    chunks(len),
                    l.label,
                    fmt_num(calls),
                    fmt_num(ir),
                    fmt_num(ir / calls),
                    pair("provider_ir_per_req"),
                    pair("process_ir_per_req"),
                    pair("lib_ir_per_req"),
                );
            }
        }
        let _ = writeln!(md);
        if !ctx.opts.full {
            return;
        }
        let _ = writeln!(
            md,
            "### Requests/s and latency (median of {} interleaved repetitions; genuine ÷ standalone with the spread of the per-repetition ratios)\n",
            ctx.opts.reps
        );
        let _ = writeln!(
            md,
            "| cell | library | standalone | genuine core | genuine ÷ standalone | spread |\n|---|---|---|---|---|---|"
        );
        let rows: Vec<(String, Cfg, &str, f64)> = depth64()
            .into_iter()
            .map(|c| {
                (
                    format!("req/s, depth 64, no-copy, 2 chunks, workers {}", c.workers),
                    c,
                    "rps",
                    1.0,
                )
            })
            .chain(depth1().into_iter().flat_map(|c| {
                let poller = if c.event { "event" } else { "poll" };
                [("p50", "lat_p50_ns"), ("p99", "lat_p99_ns")].map(|(q, m)| {
                    (
                        format!("{q} completion → callback µs, depth 1, {poller}"),
                        c,
                        m,
                        1000.0,
                    )
                })
            }))
            .collect();
        for (what, c, m, unit) in rows {
            for l in &ctx.libs {
                let g = l.genuine_name();
                let (lo, hi) = ctx.ratio_spread_of("umdk", (&g, &l.name), c, m);
                let _ = writeln!(
                    md,
                    "| {what} | {} | {} | {} | **{}** | {}–{} |",
                    l.label,
                    fmt_num(ctx.med("umdk", &l.name, c, m) / unit),
                    fmt_num(ctx.med("umdk", &g, c, m) / unit),
                    fmt_num(ratio(ctx, l, c, m)),
                    fmt_num(lo),
                    fmt_num(hi)
                );
            }
        }
        let _ = writeln!(md);
    }
}

/// The core's own share of a callgrind child over it: the instructions executed in the core's
/// objects (every caller: the library, the application's pollers) and the calls into them from
/// other objects, per request (rows `core_ir_per_req`, `core_calls_per_req`).
fn core_counts(
    ctx: &mut BenchRun,
    core: &GenuineCore,
    lib: &Lib,
    len: u32,
    rep: usize,
    r: &callgrind::CgResult,
) {
    let sum = |m: &std::collections::HashMap<String, u64>| -> u64 {
        m.iter()
            .filter(|(ob, _)| core.is_core_object(ob))
            .map(|(_, v)| v)
            .sum()
    };
    let (ir, calls) = (sum(&r.attr.ob_self), sum(&r.attr.ob_calls_in));
    if calls == 0 {
        ctx.fail(format!(
            "{CG} {}: no call into the genuine core in the window",
            lib.name
        ));
        return;
    }
    let (c, n) = (callgrind::cfg(len), r.requests as f64);
    let name = lib.name.as_str();
    ctx.push(CG, name, c, rep, "core_ir_per_req", ir as f64 / n);
    ctx.push(CG, name, c, rep, "core_calls_per_req", calls as f64 / n);
}

/// `metric` of the callgrind cell over the standalone loopback and of this cell over the genuine
/// core, for `lib` in configuration `c` (medians).
fn cg_pair(ctx: &BenchRun, lib: &Lib, c: Cfg, metric: &str) -> (f64, f64) {
    (
        ctx.med("callgrind", &lib.name, c, metric),
        ctx.med(CG, &lib.genuine_name(), c, metric),
    )
}

/// Genuine ÷ standalone of the medians of `metric` of `lib` in `c`.
fn ratio(ctx: &BenchRun, lib: &Lib, c: Cfg, metric: &str) -> f64 {
    ctx.med("umdk", &lib.genuine_name(), c, metric) / ctx.med("umdk", &lib.name, c, metric)
}
