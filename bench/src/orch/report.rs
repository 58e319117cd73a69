//! The report of a run: `report.md` (`quick.md`), also printed: its header, the targets table
//! and the cells' sections in the registry's order of places, the notes and the measurement
//! errors; and `report.csv` (`quick.csv`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::run::{chunks, BenchRun};
use crate::cell::{Entry, REPORT_ONLY};
use crate::steal;

/// `report.md` of the cells that ran.
pub fn report(
    ctx: &BenchRun,
    cells: &[&Entry],
    started: &str,
    elapsed: f64,
    run_steal: &Result<steal::Share, String>,
) -> String {
    let base = ctx.baseline();
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
    for l in &ctx.libs {
        let _ = writeln!(md, "- {}: `{}`", l.label, l.path.display());
    }
    let _ = writeln!(
        md,
        "- genuine URMA core: {}",
        ctx.genuine
            .as_ref()
            .map_or_else(|| "none given".to_string(), |g| g.describe())
    );
    let _ = writeln!(
        md,
        "- ratios are against **{}**; timed cells: median of {} interleaved repetitions, {} s each",
        base.label, ctx.opts.reps, ctx.opts.secs
    );
    let _ = writeln!(md);

    let mut by_target: Vec<&&Entry> = cells.iter().collect();
    by_target.sort_by_key(|e| e.target_at);
    let targets: Vec<_> = by_target
        .iter()
        .flat_map(|e| e.cell.targets(ctx, &base))
        .collect();
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

    let mut by_section: Vec<&&Entry> = cells.iter().collect();
    by_section.sort_by_key(|e| e.section_at);
    for e in by_section {
        e.cell.section(ctx, &base, &mut md);
    }
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

/// A number as the report shows it: no decimals from 100, one from 10, else two; `n/a` for NaN.
pub fn fmt_num(v: f64) -> String {
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

/// The first line `cmd args` prints (`n/a` when it does not run).
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

/// `report.csv` (`quick.csv`): every row, long format.
pub fn write_csv(ctx: &BenchRun, path: &Path) -> std::io::Result<()> {
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

/// The time now, UTC, as the report's `started`.
pub fn now_string() -> String {
    sh("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])
}
