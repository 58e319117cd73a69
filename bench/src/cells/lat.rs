//! The latency cell: completion → `notify_callback` latency of each library (2 chunks,
//! no-copy, workers 2, depth 1 and 8, poll and event mode), from the requests/s cell's children
//! run for at least a second; the depth-1 p99 target.

use std::fmt::Write as _;

use super::tput::{run_closed, TPUT_METRICS};
use crate::cell::{About, Cell, Target};
use crate::orch::report::fmt_num;
use crate::orch::run::{BenchRun, Cfg, Lib, LEN2};

pub struct Lat;

const ABOUT: About = About {
    name: "lat",
    timed: Some("latency"),
    quick: false,
    measures: &[],
};

impl Cell for Lat {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        let (secs, libs) = (ctx.opts.secs, ctx.libs.clone());
        run_closed(
            ctx,
            &libs,
            ("lat", "tput"),
            &lat_cfgs(),
            secs.max(1.0),
            &TPUT_METRICS,
        );
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
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
        vec![Target {
            name: "C ÷ Rust p99 completion → callback latency, depth 1 (worse of poll/event)",
            value: format!(
                "{} (poll: {}, event: {})",
                fmt_num(min),
                fmt_num(lr[0].1),
                fmt_num(lr[1].1)
            ),
            threshold: "≥ 2.0",
            ok: min.is_finite().then_some(min >= 2.0),
        }]
    }

    fn section(&self, ctx: &BenchRun, base: &Lib, md: &mut String) {
        let _ = writeln!(
            md,
            "## Completion → notify_callback latency (2-chunk, no-copy, workers 2; µs; median of reps)\n"
        );
        let _ = writeln!(md, "| poller | depth | library | p50 | p99 | p99.9 | samples/rep |\n|---|---|---|---|---|---|---|");
        for c in lat_cfgs() {
            for l in &ctx.libs {
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
            let r = ctx.med("lat", &base.name, c, "lat_p99_ns")
                / ctx.med("lat", "rust", c, "lat_p99_ns");
            let _ = writeln!(
                md,
                "| | | **{} ÷ Rust p99** | | **{}** | | |",
                base.label,
                fmt_num(r)
            );
        }
        let _ = writeln!(md);
    }
}

/// The latency cells: 2 chunks, no-copy, workers 2, depth 1 and 8, poll and event mode.
pub fn lat_cfgs() -> Vec<Cfg> {
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
