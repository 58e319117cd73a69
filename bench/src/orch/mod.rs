//! The orchestrator: runs every registered cell that belongs to the run (each in child processes,
//! interleaving the libraries), then writes the report (`report.md`, also printed), the CSV and
//! the chart.
//!
//! * [`run`]: the options, the libraries, a cell's configuration, its children, the rows;
//! * [`report`]: `report.md` and `report.csv`;
//! * [`chart`]: the gnuplot chart.
//!
//! Which cells there are, and what each runs and reports, is the registry's
//! (`crate::cells::registry`); this module knows none of them.

use std::time::Instant;

use crate::cell::Entry;
use crate::steal;

pub mod chart;
pub mod report;
pub mod run;

use report::{now_string, write_csv};
use run::{libs, BenchRun, GenuineCore, Opts};

/// Runs one timed section and records the host's steal over it (rows of `kind`, library `host`).
fn timed(
    ctx: &mut BenchRun,
    kind: &'static str,
    label: &'static str,
    f: impl FnOnce(&mut BenchRun),
) {
    let before = steal::read();
    f(ctx);
    let share = steal::since(before);
    if let Some(p) = share.as_ref().ok().and_then(steal::Share::pct) {
        eprintln!("ostbench: {label}: host steal {p:.1} %");
    }
    ctx.push_steal(kind, &share);
    ctx.steal.push(steal::Section { label, share });
}

/// Runs the quick or full benchmark with the registered `cells`; returns the process exit
/// status.
pub fn bench(opts: &Opts, mut cells: Vec<Entry>) -> i32 {
    let started = now_string();
    let t = Instant::now();
    let steal_start = steal::read();
    if let Err(e) = std::fs::create_dir_all(&opts.out) {
        eprintln!("ostbench: cannot create {}: {e}", opts.out.display());
        return 2;
    }
    let mut ctx = BenchRun {
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
        genuine: None,
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
    match GenuineCore::from_env() {
        Ok(core) => ctx.genuine = core,
        Err(e) => {
            eprintln!("ostbench: {e}");
            return 2;
        }
    }
    cells.retain(|e| opts.full || e.cell.about().quick);
    for e in &mut cells {
        let cell = &mut e.cell;
        let about = cell.about();
        match about.timed {
            None => cell.run(&mut ctx),
            Some(label) => timed(&mut ctx, about.name, label, |ctx| cell.run(ctx)),
        }
    }
    for e in &mut cells {
        e.cell.after(&mut ctx);
    }
    let run_steal = steal::since(steal_start);
    ctx.push_steal("timed", &steal::over_sections(&ctx.steal));
    ctx.push_steal("run", &run_steal);
    let ran: Vec<&Entry> = cells.iter().collect();
    let md = report::report(&ctx, &ran, &started, t.elapsed().as_secs_f64(), &run_steal);
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
