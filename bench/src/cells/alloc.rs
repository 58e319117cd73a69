//! The allocation cell: heap allocations of each library per request and per chunk after the
//! warm-up (2 and 7 chunks, no-copy, depth 8, workers 2), counted by the `LD_PRELOAD` allocator
//! (`bench/c/alloc_count.c`) for the calls whose return address is in the library; the
//! steady-state target.

use std::fmt::Write as _;

use crate::cell::{About, Cell, Measure, Target};
use crate::child::{alloc_snapshot, Needs, Window};
use crate::orch::report::fmt_num;
use crate::orch::run::{chunks, num, spawn_cell, BenchRun, Cfg, Lib, Runner, LEN2, LEN7};
use testkit::os_transport::DEFAULT_CHUNK_SIZE;

pub struct Alloc;

/// The configuration of a request length's cell.
fn cfg(len: u32) -> Cfg {
    Cfg {
        len,
        depth: 8,
        workers: 2,
        copy: false,
        event: false,
        rate: 0,
    }
}

const ABOUT: About = About {
    name: "alloc",
    timed: None,
    quick: true,
    measures: &[Measure::window_needing(
        "alloc",
        Needs {
            alloc_counter: true,
            ..Needs::NOTHING
        },
        window,
    )],
};

impl Cell for Alloc {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        for len in [LEN2, LEN7] {
            for lib in ctx.libs.clone() {
                let c = cfg(len);
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

    fn targets(&self, ctx: &BenchRun, _base: &Lib) -> Vec<Target> {
        let a = |len: u32| ctx.med("alloc", "rust", cfg(len), "lib_allocs_per_req");
        let (a2, a7) = (a(LEN2), a(LEN7));
        let per_chunk = (a7 - a2) / 5.0;
        vec![Target {
            name: "Rust heap allocations per chunk, steady state ((A7 − A2) ÷ 5)",
            value: format!(
                "{} (per request: {} at 2 chunks, {} at 7 chunks)",
                fmt_num(per_chunk),
                fmt_num(a2),
                fmt_num(a7)
            ),
            threshold: "= 0",
            ok: (!per_chunk.is_nan()).then_some(per_chunk.abs() < 0.01),
        }]
    }

    fn section(&self, ctx: &BenchRun, _base: &Lib, md: &mut String) {
        let _ = writeln!(
            md,
            "## Heap allocations (LD_PRELOAD counter, calls whose return address is in the library; no-copy, depth 8, workers 2, after warm-up)\n"
        );
        let _ = writeln!(md, "| chunks | library | allocs/request | allocs/chunk | frees/request | bytes/request | allocs at init |\n|---|---|---|---|---|---|---|");
        for len in [LEN2, LEN7] {
            let c = cfg(len);
            for l in &ctx.libs {
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
}

fn window(w: &mut Window) -> Result<(), String> {
    let cfg = w.cfg;
    let (_, get) = w.alloc.expect("checked by one_process");
    let chunks_per_req = cfg.len.div_ceil(DEFAULT_CHUNK_SIZE) as u64;
    w.d.drain()?;
    let a0 = alloc_snapshot(get);
    w.d.fill(cfg.depth)?;
    for _ in 0..cfg.requests.saturating_sub(cfg.depth as u64) {
        w.d.step()?;
    }
    w.d.drain()?;
    let a1 = alloc_snapshot(get);
    let n = cfg.requests.max(cfg.depth as u64);
    w.kv("requests", n.to_string());
    let init = w.allocs_after_init.expect("alloc api present");
    w.kv("init_lib_allocs", init[0].to_string());
    w.kv("lib_allocs", (a1[0] - a0[0]).to_string());
    w.kv("lib_frees", (a1[1] - a0[1]).to_string());
    w.kv("lib_bytes", (a1[2] - a0[2]).to_string());
    w.kv("other_allocs", (a1[3] - a0[3]).to_string());
    w.kv(
        "lib_allocs_per_req",
        format!("{:.4}", (a1[0] - a0[0]) as f64 / n as f64),
    );
    w.kv(
        "lib_allocs_per_chunk",
        format!(
            "{:.4}",
            (a1[0] - a0[0]) as f64 / (n * chunks_per_req) as f64
        ),
    );
    if init[0] == 0 {
        return Err(
            "the counting allocator saw no allocation of the library at init: \
                    it is not interposed (RTLD_DEEPBIND?)"
                .into(),
        );
    }
    Ok(())
}
