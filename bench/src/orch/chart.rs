//! Charts of the report (gnuplot: Debian `gnuplot-nox`, openEuler `gnuplot`): one metric by
//! in-flight depth, a panel per loopback mode and request length, a line per library and worker
//! count. `chart.dat` and `chart.gp` are written in any case; `chart.png` when gnuplot runs.

use std::fmt::Write as _;
use std::process::Command;

use super::run::{BenchRun, Cfg};

/// One panel: the closed-loop cells of one loopback mode and request length.
pub struct Panel {
    pub copy: bool,
    pub len: u32,
    pub title: &'static str,
}

/// What a chart plots: the median of `metric` in the rows of `kind`.
pub struct Chart<'a> {
    pub kind: &'a str,
    pub metric: &'a str,
    /// The title above the panels (the repetitions are added) and the y axis.
    pub title: &'a str,
    pub ylabel: &'a str,
    pub panels: &'a [Panel],
    pub depths: &'a [usize],
    pub workers: &'a [u32],
}

/// Writes `chart.dat` and `chart.gp` into the output directory and runs gnuplot on them; its
/// absence is a note, its failure a measurement error.
pub fn draw(ctx: &mut BenchRun, chart: &Chart) {
    let dir = ctx.opts.out.clone();
    let libs = ctx.libs.clone();
    let mut dat = String::new();
    for p in chart.panels {
        let _ = write!(dat, "# depth");
        for l in &libs {
            for w in chart.workers {
                let _ = write!(dat, " {}_w{w}", l.name);
            }
        }
        let _ = writeln!(dat);
        for &depth in chart.depths {
            let _ = write!(dat, "{depth}");
            for l in &libs {
                for &workers in chart.workers {
                    let c = Cfg {
                        len: p.len,
                        depth,
                        workers,
                        copy: p.copy,
                        event: false,
                        rate: 0,
                    };
                    let _ = write!(dat, " {}", ctx.med(chart.kind, &l.name, c, chart.metric));
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
         set multiplot layout 2,2 title '{} (median of {} reps) — solid: Rust, dashed: C'\n\
         set logscale y\nset grid ytics\nset xlabel 'in-flight depth'\nset ylabel '{}'\n\
         set key outside right top box\nset xrange [-0.3:2.3]",
        dir.join("chart.png").display(),
        chart.title,
        ctx.opts.reps,
        chart.ylabel
    );
    let colors = ["#1f77b4", "#2ca02c", "#d62728"];
    for (i, p) in chart.panels.iter().enumerate() {
        let _ = writeln!(gp, "set title '{}'", p.title);
        let mut parts = Vec::new();
        let mut col = 2;
        for (li, l) in libs.iter().enumerate() {
            for (wi, w) in chart.workers.iter().enumerate() {
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
