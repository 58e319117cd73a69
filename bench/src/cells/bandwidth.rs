//! The memcpy cell: the memcpy baselines of the copy-mode cells (the same buffer shapes copied
//! in this process, rows and steal section `memcpy`), and the copy-mode bandwidth of the
//! requests/s cell's 14 MiB cells against them: the bandwidth target and its table.

use std::fmt::Write as _;

use super::tput::tput_cfgs;
use crate::cell::{About, Cell, Target};
use crate::memcpy::{mc, memcpy_limit, memcpy_mib_s, memcpy_source, MEMCPY_SHAPES};
use crate::orch::report::fmt_num;
use crate::orch::run::{median, BenchRun, Cfg, Lib, HOST, LEN7};

pub struct Bandwidth;

/// The copy-mode 14 MiB cells of the requests/s cell.
fn copy_cfgs() -> impl Iterator<Item = Cfg> {
    tput_cfgs().into_iter().filter(|c| c.copy && c.len == LEN7)
}

const ABOUT: About = About {
    name: "memcpy",
    timed: Some("memcpy"),
    quick: false,
    measures: &[],
};

impl Cell for Bandwidth {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    /// memcpy of the same buffer shapes as the 14 MiB copy-mode cells: the 14 MiB source into a
    /// ring of `ndst` pre-faulted destinations (1 at depth 1, 8 at depth 8 and 64), in 2 MiB
    /// pieces like the loopback's WRITEs, by 1 or 2 threads (each thread with its own
    /// destinations).
    fn run(&mut self, ctx: &mut BenchRun) {
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

    fn targets(&self, ctx: &BenchRun, _base: &Lib) -> Vec<Target> {
        // The best configuration by the median of its per-repetition ratios to the memcpy
        // measured around each repetition.
        let mut best = (f64::NAN, 0.0, 0.0, HOST);
        for c in copy_cfgs() {
            let r = median(&mut adjacent_ratios(ctx, "rust", c));
            if best.0.is_nan() || r > best.0 {
                let v = ctx.med("tput", "rust", c, "mib_s");
                best = (r, v, ctx.med("memcpy_adj", "memcpy", c, "mib_s"), c);
            }
        }
        let c = best.3;
        let run_best = memcpy_limit(ctx, c.depth);
        vec![Target {
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
        }]
    }

    fn section(&self, ctx: &BenchRun, _base: &Lib, md: &mut String) {
        let libs = &ctx.libs;
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
        for c in copy_cfgs() {
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
                let around = median(&mut adjacent_ratios(ctx, &l.name, c));
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
}

/// `lib`'s copy-mode MiB/s in `c` ÷ the memcpy limit measured around the same repetition
/// (rows `memcpy_adj`, see [`super::tput::run_closed`]), one ratio per repetition that has both.
fn adjacent_ratios(ctx: &BenchRun, lib: &str, c: Cfg) -> Vec<f64> {
    let of = |kind: &str, lib: &str| -> Vec<(usize, f64)> {
        ctx.rows
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
