//! The urma_perftest cell: the genuine UMDK URMA core's own benchmark tool (`urma_perftest`)
//! over the loopback plugin's device, a server and a client process on 127.0.0.1, beside the
//! two-process cell (the libraries' transfers between two processes over the standalone
//! loopback). Latency of 2-byte WRITE, SEND and READ; bandwidth of 2 MiB (one chunk of the
//! libraries) WRITE and READ and of 64 KiB SEND; the client's report line, rows `perftest` of
//! library `<test>`. `make bench-quick` runs `write_lat` and `write_bw` once.
//!
//! Without a genuine core and its `urma_perftest` it runs nothing and says so.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use ost_supervise::perftest::{result_row, run_pair, Pair};

use super::xproc::XPROC;
use crate::cell::{About, Cell, Target, REPORT_ONLY};
use crate::orch::report::fmt_num;
use crate::orch::run::{BenchRun, Cfg, GenuineCore, Lib, HOST, MIB, NO_GENUINE_CORE};

pub struct Perftest;

const ABOUT: About = About {
    name: "perftest",
    timed: Some("urma_perftest"),
    quick: true,
    measures: &[],
};

/// The loopback plugin's device.
const DEVICE: &str = "loopback0";
/// Exchanges per test (`-n`).
const ITERS: u64 = 1000;
/// Bound on one server + client pair.
const PAIR_WAIT: Duration = Duration::from_secs(60);

/// A test of urma_perftest and its message size.
struct Test {
    name: &'static str,
    size: u32,
    quick: bool,
}

const TESTS: [Test; 6] = [
    Test {
        name: "write_lat",
        size: 2,
        quick: true,
    },
    Test {
        name: "send_lat",
        size: 2,
        quick: false,
    },
    Test {
        name: "read_lat",
        size: 2,
        quick: false,
    },
    Test {
        name: "write_bw",
        size: 2 * MIB,
        quick: true,
    },
    // urma_perftest refuses SENDs above 64 KiB on this transport.
    Test {
        name: "send_bw",
        size: 64 * 1024,
        quick: false,
    },
    Test {
        name: "read_bw",
        size: 2 * MIB,
        quick: false,
    },
];

impl Test {
    fn latency(&self) -> bool {
        self.name.ends_with("_lat")
    }

    /// The configuration columns of its rows.
    fn cfg(&self) -> Cfg {
        Cfg {
            len: self.size,
            ..HOST
        }
    }
}

/// The metrics of a latency test's report line (µs; `t_*` of urma_perftest: half the round
/// trip for WRITE and SEND, the round trip for READ) and their columns.
const LAT_METRICS: [(&str, &str); 3] = [
    ("t_median_us", "t_median[us]"),
    ("t_avg_us", "t_avg[us]"),
    ("t_p99_us", "99%[us]"),
];
/// The metrics of a bandwidth test's report line (MiB/s: urma_perftest's MB is 2^20 bytes).
const BW_METRICS: [(&str, &str); 3] = [
    ("bw_peak_mib_s", "BW peak[MB/sec]"),
    ("bw_avg_mib_s", "BW average[MB/sec]"),
    ("msg_rate_mpps", "MsgRate[Mpps]"),
];

impl Cell for Perftest {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        // Without them its target and section say so.
        let Some((core, exe)) = perftest(ctx) else {
            return;
        };
        let dir = ctx.opts.out.join("perftest");
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            ctx.fail(format!("cannot create {}: {e}", dir.display()));
            return;
        }
        let tests: Vec<&Test> = TESTS.iter().filter(|t| ctx.opts.full || t.quick).collect();
        let reps = if ctx.opts.full { ctx.opts.reps } else { 1 };
        for rep in 0..reps {
            // The order of the tests rotates with the repetition.
            let mut order = tests.clone();
            order.rotate_left(rep % tests.len());
            for t in order {
                match pair(&core, &exe, t, &dir.join(format!("{}-{rep}", t.name))) {
                    Err(e) => ctx.fail(format!("urma_perftest {}: {e}", t.name)),
                    Ok(values) => {
                        for (m, v) in values {
                            ctx.push("perftest", t.name, t.cfg(), rep, m, v);
                        }
                    }
                }
            }
        }
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
        let bw = ctx.med("perftest", "write_bw", TESTS[3].cfg(), "bw_avg_mib_s");
        let xp = |l: &str| ctx.med("xproc", l, XPROC, "mib_s");
        let value = if perftest(ctx).is_none() {
            not_run(ctx)
        } else if xp("rust").is_nan() {
            format!(
                "urma_perftest write_bw: {} MiB/s (the two-process cell runs in make bench)",
                fmt_num(bw)
            )
        } else {
            format!(
                "{} ({}) ({} and {} MiB/s ÷ {} MiB/s)",
                fmt_num(xp("rust") / bw),
                fmt_num(xp(&base.name) / bw),
                fmt_num(xp("rust")),
                fmt_num(xp(&base.name)),
                fmt_num(bw)
            )
        };
        vec![Target {
            name: "two-process copy-mode 14 MiB bandwidth ÷ urma_perftest write_bw of 2 MiB over the genuine core and the loopback plugin, Rust (C)",
            value,
            threshold: REPORT_ONLY,
            ok: None,
        }]
    }

    fn section(&self, ctx: &BenchRun, _base: &Lib, md: &mut String) {
        let _ = writeln!(
            md,
            "## urma_perftest over the genuine URMA core and the loopback plugin\n"
        );
        if perftest(ctx).is_none() {
            let _ = writeln!(md, "{}.\n", not_run(ctx));
            return;
        }
        let reps = if ctx.opts.full { ctx.opts.reps } else { 1 };
        let _ = writeln!(
            md,
            "`urma_perftest <test> -d {DEVICE} -n {ITERS}`, server and client processes on 127.0.0.1 \
             (the loopback's cross-process path); the client's report, median of {reps} run(s). \
             Latency as urma_perftest reports it: half the round trip for WRITE and SEND, the round \
             trip for READ.\n"
        );
        let _ = writeln!(
            md,
            "| test | bytes | median µs | average µs | p99 µs |\n|---|---|---|---|---|"
        );
        let ran = |t: &&Test| ctx.opts.full || t.quick;
        for t in TESTS.iter().filter(|t| t.latency()).filter(ran) {
            let m = |k: &str| fmt_num(ctx.med("perftest", t.name, t.cfg(), k));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                t.name,
                t.size,
                m("t_median_us"),
                m("t_avg_us"),
                m("t_p99_us")
            );
        }
        let _ = writeln!(
            md,
            "\n| test | bytes | MiB/s (average) | MiB/s (peak) | messages/s |\n|---|---|---|---|---|"
        );
        for t in TESTS.iter().filter(|t| !t.latency()).filter(ran) {
            let m = |k: &str| ctx.med("perftest", t.name, t.cfg(), k);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                t.name,
                t.size,
                fmt_num(m("bw_avg_mib_s")),
                fmt_num(m("bw_peak_mib_s")),
                fmt_num(m("msg_rate_mpps") * 1e6)
            );
        }
        let bw = ctx.med("perftest", "write_bw", TESTS[3].cfg(), "bw_avg_mib_s");
        let _ = writeln!(
            md,
            "\nBeside the two-process cell (the libraries' 14 MiB requests, 7 chunks of 2 MiB, copy \
             mode, depth 1, over the standalone loopback):\n"
        );
        let _ = writeln!(
            md,
            "| | MiB/s | ÷ urma_perftest write_bw |\n|---|---|---|\n| urma_perftest write_bw, 2 MiB | {} | 1.00 |",
            fmt_num(bw)
        );
        for l in &ctx.libs {
            let v = ctx.med("xproc", &l.name, XPROC, "mib_s");
            if v.is_nan() {
                let _ = writeln!(md, "| {} two-process | (runs in make bench) | |", l.label);
            } else {
                let _ = writeln!(
                    md,
                    "| {} two-process | {} | {} |",
                    l.label,
                    fmt_num(v),
                    fmt_num(v / bw)
                );
            }
        }
        let _ = writeln!(md);
    }
}

/// The genuine core and its urma_perftest, when `make bench` gave both.
fn perftest(ctx: &BenchRun) -> Option<(GenuineCore, std::path::PathBuf)> {
    let core = ctx.genuine.clone()?;
    let exe = core.perftest.clone()?;
    Some((core, exe))
}

/// Why the cell did not run.
fn not_run(ctx: &BenchRun) -> String {
    match &ctx.genuine {
        None => NO_GENUINE_CORE.to_string(),
        Some(_) => "not run: no urma_perftest (MLCD_UMDK_PERFTEST)".to_string(),
    }
}

/// One server + client pair of `t` (`ost_supervise::perftest`), their output in
/// `<log>-server.out`, `.err` and `<log>-client.out`, `.err`: the metrics of the client's report
/// line.
fn pair(
    core: &GenuineCore,
    exe: &Path,
    t: &Test,
    log: &Path,
) -> Result<Vec<(&'static str, f64)>, String> {
    let p = Pair {
        exe,
        test: t.name,
        device: DEVICE,
        iters: ITERS,
        size: Some(t.size),
        log,
        limit: PAIR_WAIT,
    };
    let rest = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let out = run_pair(&p, &|cmd| {
        cmd.env_remove("LD_PRELOAD");
        core.apply(cmd, &rest, None);
    })?;
    report(&out.client.stdout, t)
        .map_err(|e| format!("{e} (in {})", p.log_file("client", "out").display()))
}

/// The metrics of `t` in urma_perftest's output: the row of its report table, which must be
/// the one of `t.size` bytes.
fn report(text: &str, t: &Test) -> Result<Vec<(&'static str, f64)>, String> {
    let metrics: &[(&'static str, &str)] = if t.latency() {
        &LAT_METRICS
    } else {
        &BW_METRICS
    };
    let row = result_row(text).ok_or("no report table")?;
    let col = |name: &str| row.iter().find(|(n, _)| n == name).map(|c| c.1);
    if col("bytes") != Some(f64::from(t.size)) {
        return Err(format!("no report line of {} bytes", t.size));
    }
    metrics
        .iter()
        .map(|&(metric, name)| {
            col(name)
                .map(|v| (metric, v))
                .ok_or_else(|| format!("the report has no column {name}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_urma_perftests_report_lines() {
        let lat = "[shim] open\n---\n bytes   iterations  t_min[us]  t_max[us]  t_median[us]  t_avg[us]  t_stdev[us]  99%[us]  99.9%[us]  99.99%[us]  99.999%[us]\n 2       1000        29.68      71408.29    44.15         576.12     3020.43      6120.32  71408.29    71408.29     71408.29\n";
        assert_eq!(
            report(lat, &TESTS[0]).unwrap(),
            vec![
                ("t_median_us", 44.15),
                ("t_avg_us", 576.12),
                ("t_p99_us", 6120.32)
            ]
        );
        let bw = " bytes   iterations  BW peak[MB/sec]  BW average[MB/sec]  MsgRate[Mpps]\n 2097152 1000        6781.80          5747.75             0.002874\n";
        assert_eq!(
            report(bw, &TESTS[3]).unwrap(),
            vec![
                ("bw_peak_mib_s", 6781.80),
                ("bw_avg_mib_s", 5747.75),
                ("msg_rate_mpps", 0.002874)
            ]
        );
        assert!(report(bw, &TESTS[0]).is_err());
        assert!(report("Failed to run test: 5.\n", &TESTS[3]).is_err());
    }
}
