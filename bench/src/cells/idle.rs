//! The idle cell: CPU time per second of an initialised instance of each library with 64 workers
//! and nothing to do (the application's pollers stopped); the idle target.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::paced::workers_named;
use crate::cell::{About, Cell, Measure, Target};
use crate::child::{cpu_snap, threads_cpu_ns, Window};
use crate::orch::report::fmt_num;
use crate::orch::run::{num, spawn_cell, BenchRun, Cfg, Lib, Runner, LEN2};

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

pub struct Idle;

const ABOUT: About = About {
    name: "idle",
    timed: Some("idle"),
    quick: false,
    measures: &[Measure::window("idle", window)],
};

impl Cell for Idle {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
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

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
        let idle = ctx.med("idle", "rust", IDLE, "cpu_process_ns_per_s") / 1e6;
        vec![Target {
            name: "Rust idle CPU, 64 idle workers (process, ms per s)",
            value: format!(
                "{} (worker threads {}; C: {})",
                fmt_num(idle),
                fmt_num(ctx.med("idle", "rust", IDLE, "cpu_workers_ns_per_s") / 1e6),
                fmt_num(ctx.med("idle", &base.name, IDLE, "cpu_process_ns_per_s") / 1e6)
            ),
            threshold: "≤ 1.0",
            ok: idle.is_finite().then_some(idle <= 1.0),
        }]
    }

    fn section(&self, ctx: &BenchRun, base: &Lib, md: &mut String) {
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

fn window(w: &mut Window) -> Result<(), String> {
    let cfg = w.cfg;
    w.d.drain()?;
    // Nothing arrives any more: the application's pollers are not the library's cost.
    w.stop_pollers();
    std::thread::sleep(Duration::from_millis(50));
    let c0 = cpu_snap(true);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(cfg.secs));
    let secs = t0.elapsed().as_secs_f64();
    let c1 = cpu_snap(false);
    w.kv("secs", format!("{secs:.6}"));
    w.kv(
        "cpu_process_ns_per_s",
        format!("{:.1}", (c1.process - c0.process) as f64 / secs),
    );
    w.kv(
        "cpu_workers_ns_per_s",
        format!("{:.1}", c1.workers.saturating_sub(c0.workers) as f64 / secs),
    );
    w.kv("workers_found", threads_cpu_ns("ost_wkr_").1.to_string());
    Ok(())
}
