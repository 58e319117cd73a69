//! The genuine-core lane (`cargo xtask test-umdk`, and part of `test`): the loopback as a
//! provider plugin of the genuine UMDK URMA core, and what runs over it.
//!
//! 1. The core (`ost_build_support::umdk`: the system's, else built from `$UMDK_SRC` into
//!    `<target>/umdk/build`). Without either the lane says so and skips; with `CI` set it fails.
//! 2. The plugin face (`cargo build -p urma-loopback --features plugin` in
//!    `<target>/xtask/plugin`), copied into the core's plugin directory as
//!    [`PLUGIN_FILE_NAME`] (a copy: the core loads its plugins by their resolved path, and the
//!    plugin is found in the process by that file name); the helper (`urma-loopback-preload`)
//!    copied to `<target>/umdk/` as [`PRELOAD_FILE_NAME`], never into the plugin directory.
//! 3. Over the core (`LD_LIBRARY_PATH=<core dir>:<common dir>:...`, `LD_PRELOAD=<helper>`,
//!    `URMA_LOOPBACK=1`):
//!    the helper's own test; the plugin's safety cases (`urma-loopback --test plugin_safety`);
//!    `urma_sample` as two processes (RC, RM, RC in event mode);
//!    `urma_perftest` as two processes (the three latency and the three bandwidth tests, results
//!    kept in `<target>/umdk/perftest.json`); the loopback's behaviour suites and C program pair;
//!    `compat` (its verdicts the standalone run's, scenario by scenario), `compat --device
//!    loopback0` (the interposition layer in front of the genuine core) and `compat --split`,
//!    each with no FAIL.
//!
//! Every program runs with a deadline; every step runs, and the lane fails at the end with the
//! list of the steps that failed. Knobs: `UMDK_LAT_ITERS` (default 1000), `UMDK_BW_ITERS`
//! (default 2000), `UMDK_COMPAT_RANDOM` (the random scenarios of the compat run over the core,
//! default 50: the first ones of the standalone run's seed), `COMPAT_DEVICE_RANDOM` (default
//! 10).

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ost_build_support::umdk::{self, Umdk};
use ost_supervise::perftest::{self, run_pair, Pair};
use ost_supervise::{free_port, wait_listening, Capture, Ended, Running};
use serde_json::{json, Value};

use crate::cargo::{self, Built};
use crate::cmd::{cargo as cargo_cmd, env_or, fail, security_required, show, urma_exports};
use crate::ctx::Ctx;
use crate::reports;

/// The plugin's file name in the plugin directory (`urma_loopback_ctl::plugin::FILE_NAME`).
pub const PLUGIN_FILE_NAME: &str = "liburma-loopback.so";
/// The helper's file name (`urma_loopback_ctl::plugin::PRELOAD_FILE_NAME`).
pub const PRELOAD_FILE_NAME: &str = "liburma-loopback-preload.so";
/// The device of the plugin.
const DEVICE: &str = "loopback0";
/// The variable that enables the plugin in a process (`urma_loopback_ctl::plugin::ENABLE_VAR`).
const ENABLE_VAR: &str = "URMA_LOOPBACK";

/// What the lane runs over.
struct Lane<'a> {
    ctx: &'a Ctx,
    built: &'a Built,
    umdk: Umdk,
    /// `<target>/umdk`.
    out: PathBuf,
    /// `<out>/logs`: every program's output.
    logs: PathBuf,
    plugin: PathBuf,
    preload: PathBuf,
    /// Name and outcome of every step.
    steps: Vec<(String, Result<String, String>)>,
}

/// The genuine core to run the lane over (`<target>/umdk`), or `None` when there is none (the
/// lane says so; with `CI` set it fails instead).
pub fn core(ctx: &Ctx) -> Option<Umdk> {
    match umdk::get(&ctx.target.join("umdk")) {
        Ok(u) => Some(u),
        Err(why) if std::env::var_os("CI").is_some() => {
            fail(format!("genuine-core lane: {why}; CI must run it"))
        }
        Err(why) => {
            println!("genuine-core lane: skipped: {why}");
            None
        }
    }
}

/// The lane over `umdk` (from [`core`]); `standalone` is the directory of the standalone
/// `compat` run with `compat_args` to compare with (its `report.json`, and its
/// `report-split.json` if there is one).
pub fn run(ctx: &Ctx, built: &Built, umdk: Umdk, standalone: &Path, compat_args: &[String]) {
    let started = Instant::now();
    let out = ctx.target.join("umdk");
    println!(
        "genuine-core lane: core {} ({:?}), plugins in {}",
        umdk.core().display(),
        umdk.origin,
        umdk.plugin_dir.display()
    );
    let (plugin, preload) = install(ctx, built, &umdk, &out, false);
    let logs = out.join("logs");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).unwrap_or_else(|e| fail(format!("{}: {e}", logs.display())));
    let mut lane = Lane {
        ctx,
        built,
        umdk,
        out,
        logs,
        plugin,
        preload,
        steps: Vec::new(),
    };
    lane.preload_test();
    lane.plugin_safety();
    lane.samples();
    lane.perftests();
    lane.suites();
    lane.compat(standalone, compat_args);
    let failed: Vec<&(String, Result<String, String>)> =
        lane.steps.iter().filter(|s| s.1.is_err()).collect();
    println!("\ngenuine-core lane ({:.0?}):", started.elapsed());
    for (name, r) in &lane.steps {
        match r {
            Ok(what) => println!("  ok    {name}: {what}"),
            Err(why) => println!("  FAIL  {name}: {why}"),
        }
    }
    if !failed.is_empty() {
        fail(format!(
            "genuine-core lane: {} of {} steps failed (logs in {})",
            failed.len(),
            lane.steps.len(),
            lane.logs.display()
        ));
    }
}

/// Builds the plugin face (`release`: optimised, as the benchmarks need it), installs it in the
/// plugin directory and the helper of `built` in `out`; returns both installed files.
fn install(ctx: &Ctx, built: &Built, umdk: &Umdk, out: &Path, release: bool) -> (PathBuf, PathBuf) {
    let mut cmd = cargo_cmd();
    cmd.args(["build", "-p", "urma-loopback", "--features", "plugin"])
        .args(release.then_some("--release"))
        .arg("--target-dir")
        .arg(ctx.target.join("xtask/plugin"));
    let face = cargo::build_cdylib(cmd, "urma-loopback");
    check_plugin_exports(&face, &built.loopback_dir.join("liburma.so.0"));
    let plugin = umdk.plugin_dir.join(PLUGIN_FILE_NAME);
    copy_replacing(&face, &plugin);
    let preload = out.join(PRELOAD_FILE_NAME);
    copy_replacing(built.cdylib("urma-loopback-preload"), &preload);
    (plugin, preload)
}

/// The plugin face defines no URMA function in its dynamic symbol table, only `urma_loopback_*`
/// names (the control API and the device queries of the helper): a lookup through the plugin must
/// never find a second `urma_poll_jfc` beside the core's. The same `nm` reading of the standalone
/// face (`standalone`) must find the URMA functions, or the check is blind.
fn check_plugin_exports(face: &Path, standalone: &Path) {
    let ours = |n: &String| n.starts_with("urma_loopback_");
    if !urma_exports(standalone)
        .iter()
        .any(|n| n == "urma_poll_jfc")
    {
        fail(format!(
            "the plugin export check is blind: nm finds no urma_poll_jfc in {}",
            standalone.display()
        ));
    }
    let urma: Vec<String> = urma_exports(face)
        .into_iter()
        .filter(|n| !ours(n))
        .collect();
    if !urma.is_empty() {
        fail(format!(
            "the plugin face {} exports {urma:?}",
            face.display()
        ));
    }
    println!(
        "genuine-core lane: {} exports no URMA function (only urma_loopback_* names)",
        face.display()
    );
}

/// The genuine URMA stack for `make bench`'s cells over the genuine core (docs/bench.md, "Over
/// the genuine URMA core"): `MLCD_UMDK_LIBDIR`, `MLCD_UMDK_PRELOAD` and `MLCD_UMDK_PERFTEST`, over
/// the optimised plugin in a plugin directory of its own (`<target>/umdk/bench/urma`, so the
/// lane's plugin is left alone) and the helper of `built` (a release build). Empty, with a line
/// saying why, when there is no core: the cells then report that they did not run.
pub fn bench_env(ctx: &Ctx, built: &Built) -> Vec<(&'static str, OsString)> {
    let view = umdk::get(&ctx.target.join("umdk"))
        .and_then(|u| u.with_plugin_dir_in(&ctx.target.join("umdk/bench")));
    let umdk = match view {
        Ok(u) => u,
        Err(why) => {
            println!("bench: no genuine URMA core ({why}): its cells do not run");
            return Vec::new();
        }
    };
    let out = ctx.target.join("umdk/bench");
    let (_, preload) = install(ctx, built, &umdk, &out, true);
    let dirs: Vec<PathBuf> = umdk.library_dirs();
    let mut env = vec![
        (
            "MLCD_UMDK_LIBDIR",
            std::env::join_paths(&dirs).unwrap_or_else(|e| fail(format!("{dirs:?}: {e}"))),
        ),
        ("MLCD_UMDK_PRELOAD", preload.into_os_string()),
    ];
    if let Some(p) = &umdk.perftest {
        env.push(("MLCD_UMDK_PERFTEST", p.clone().into_os_string()));
    }
    env
}

/// Copies `from` to `to` through a temporary file renamed over it (a process that has the old
/// file loaded keeps its mapping; the temporary's name does not start with `liburma`, so the
/// core never loads it).
fn copy_replacing(from: &Path, to: &Path) {
    let dir = to.parent().expect("a directory");
    let tmp = dir.join(format!(
        ".{}.tmp",
        to.file_name().expect("a name").to_string_lossy()
    ));
    std::fs::copy(from, &tmp)
        .and_then(|_| std::fs::rename(&tmp, to))
        .unwrap_or_else(|e| fail(format!("copy {} to {}: {e}", from.display(), to.display())));
}

/// A program's end as a step sees it: its stdout, or why it failed (with its output).
fn judged(name: &str, end: Ended) -> Result<String, String> {
    match end.status {
        Some(s) if s.success() => Ok(end.stdout),
        Some(s) => Err(format!("{name} exited with {s}:\n{}", end.output())),
        None => Err(format!(
            "{name} did not finish in time (killed):\n{}",
            end.output()
        )),
    }
}

impl Lane<'_> {
    /// The loader path of programs over the core: the core's directories first.
    fn loader_path(&self) -> OsString {
        let dirs = self.umdk.library_dirs();
        let first: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        self.ctx.loader_path(self.built, &first)
    }

    /// `cmd` over the core, with the helper preloaded and the plugin enabled (it is inert
    /// without `URMA_LOOPBACK=1`).
    fn over_core<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("LD_LIBRARY_PATH", self.loader_path())
            .env("LD_PRELOAD", &self.preload)
            .env(ENABLE_VAR, "1")
    }

    /// Starts `cmd` over the core, stdin piped, output to the log files of `name`.
    fn start(&self, name: &str, cmd: &mut Command) -> Result<Running, String> {
        self.over_core(cmd).stdin(Stdio::piped());
        eprintln!("+ {} &", show(cmd));
        let capture = Capture::Files {
            out: self.logs.join(format!("{name}.out")),
            err: self.logs.join(format!("{name}.err")),
        };
        ost_supervise::spawn(name, cmd, capture)
    }

    /// Runs `cmd` over the core to completion within `limit`: its stdout, or why it failed.
    fn run_over_core(
        &self,
        name: &str,
        cmd: &mut Command,
        limit: Duration,
    ) -> Result<String, String> {
        let p = self.start(name, cmd)?;
        judged(name, p.finish(limit))
    }

    fn step(&mut self, name: &str, r: Result<String, String>) {
        match &r {
            Ok(what) => println!("genuine-core lane: ok: {name}: {what}"),
            Err(why) => println!("genuine-core lane: FAIL: {name}: {why}"),
        }
        self.steps.push((name.to_string(), r));
    }

    /// The helper's test under the core with this plugin.
    fn preload_test(&mut self) {
        let mut cmd = cargo_cmd();
        cmd.args([
            "test",
            "-p",
            "urma-loopback-preload",
            "--test",
            "genuine_core",
        ])
        .env("URMA_LOOPBACK_PLUGIN", &self.plugin);
        let r = cmd_status(&mut cmd).map(|_| {
            "urma_query_device and urma_get_eid_list of loopback0 are the plugin's".to_string()
        });
        self.step("urma-loopback-preload genuine_core", r);
    }

    /// The plugin's safety cases under the core with this plugin (inert until enabled, nothing
    /// left behind, a setuid process ignoring the variables): `urma-loopback/tests/plugin_safety.rs`.
    fn plugin_safety(&mut self) {
        let mut cmd = cargo_cmd();
        cmd.args(["test", "-p", "urma-loopback", "--test", "plugin_safety"])
            .env("URMA_LOOPBACK_PLUGIN", &self.plugin);
        let r = cmd_status(security_required(&mut cmd)).map(|_| {
            "inert until URMA_LOOPBACK=1, nothing left behind, a setuid process ignores the \
             variables"
                .to_string()
        });
        self.step("urma-loopback plugin_safety", r);
    }
}

/// Runs `cmd` (inheriting the terminal); `Err` with its command line when it fails.
fn cmd_status(cmd: &mut Command) -> Result<(), String> {
    eprintln!("+ {}", show(cmd));
    match cmd.status() {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => Err(format!("{} exited with {st}", show(cmd))),
        Err(e) => Err(format!("cannot start {}: {e}", show(cmd))),
    }
}

// ---------------------------------------------------------------------------------------------
// urma_sample

impl Lane<'_> {
    fn samples(&mut self) {
        for (label, mode, event) in [
            ("RC", "1", false),
            ("RM", "0", false),
            ("RC event", "1", true),
        ] {
            let r = self.sample(mode, event);
            self.step(&format!("urma_sample {label}"), r);
        }
    }

    /// `urma_sample` as a server and a client on a free port: the client WRITEs, READs back
    /// and SENDs; the server answers the SEND and exits on a key.
    fn sample(&self, mode: &str, event: bool) -> Result<String, String> {
        let exe = self
            .umdk
            .sample
            .clone()
            .ok_or("no urma_sample (not installed with the system's UMDK)")?;
        let port = free_port()?.to_string();
        let mut args = vec!["-m", mode, "-d", DEVICE, "-p", port.as_str()];
        if event {
            args.push("-e");
        }
        let tag = format!("sample-m{mode}{}", if event { "e" } else { "" });
        let server_name = format!("{tag}-server");
        let mut server = self.start(&server_name, Command::new(&exe).args(&args))?;
        if !wait_listening(
            port.parse().unwrap_or(0),
            &mut server,
            Duration::from_secs(30),
        ) {
            return judged(&server_name, server.finish(Duration::ZERO))
                .and_then(|_| Err("the server did not listen".to_string()));
        }
        let client = self.run_over_core(
            &format!("{tag}-client"),
            Command::new(&exe).args(&args).args(["-i", "127.0.0.1"]),
            Duration::from_secs(60),
        );
        // A key ends the server; in event mode it cannot end: its receiving thread waits for a
        // completion without a time limit (urma_wait_jfc, -1) and is joined at exit, so after
        // the last completion it waits for ever (on any provider). It is killed then, and its
        // part is judged by the reply the client received.
        if let Some(mut stdin) = server.take_stdin() {
            let _ = stdin.write_all(b"q\n");
        }
        let served = if event {
            server
                .wait_until(Instant::now() + Duration::from_secs(3))
                .map(|_| judged(&server_name, server.finish(Duration::ZERO)))
        } else {
            Some(judged(&server_name, server.finish(Duration::from_secs(20))))
        };
        let client = client?;
        let served = served.transpose()?;
        let line = |text: &str, prefix: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(str::to_string)
        };
        let written = line(&client, "Msg write: ").ok_or("client: no \"Msg write\"")?;
        let read = line(&client, "Msg read: ").ok_or("client: no \"Msg read\"")?;
        if written.is_empty() || read != written {
            return Err(format!(
                "client: READ gave {read:?}, WRITE wrote {written:?}"
            ));
        }
        let sent = line(&client, "Msg sent: ").ok_or("client: no \"Msg sent\"")?;
        let reply =
            line(&client, "Response received: ").ok_or("client: no \"Response received\"")?;
        if !reply.starts_with("Send response from server") {
            return Err(format!("client: the response was {reply:?}"));
        }
        let Some(served) = served else {
            return Ok(format!(
                "WRITE/READ {written:?}, SEND {sent:?}, reply {reply:?}; the server (event \
                 mode) killed after the key"
            ));
        };
        let got = line(&served, "Msg received: ").ok_or("server: no \"Msg received\"")?;
        if !got.starts_with(&sent) {
            return Err(format!(
                "server: received {got:?}, the client sent {sent:?}"
            ));
        }
        Ok(format!(
            "WRITE/READ {written:?}, SEND {sent:?}, reply {reply:?}"
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// urma_perftest

/// The tests run, each with the default transport mode (RM) and sizes.
const PERFTESTS: &[&str] = &[
    "write_lat",
    "send_lat",
    "read_lat",
    "write_bw",
    "send_bw",
    "read_bw",
];

impl Lane<'_> {
    fn perftests(&mut self) {
        let mut results = Vec::new();
        for test in PERFTESTS {
            let r = self.perftest(test);
            let summary = r.as_ref().map(|rows| {
                rows.iter()
                    .map(|(side, row)| format!("{side}: {row}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            if let Ok(rows) = &r {
                for (side, row) in rows {
                    results.push(json!({ "test": test, "side": side, "result": row }));
                }
            }
            self.step(
                &format!("urma_perftest {test}"),
                summary.map_err(|e| e.to_string()),
            );
        }
        let file = self.out.join("perftest.json");
        let doc = json!({
            "core": self.umdk.core().display().to_string(),
            "device": DEVICE,
            "plugin": self.plugin.display().to_string(),
            "plugin_profile": "debug",
            "lat_iters": lat_iters(),
            "bw_iters": bw_iters(),
            "results": results,
        });
        if let Err(e) = std::fs::write(
            &file,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        ) {
            println!("genuine-core lane: cannot write {}: {e}", file.display());
        } else {
            println!(
                "genuine-core lane: urma_perftest results in {}",
                file.display()
            );
        }
    }

    /// One test as a server and a client: the result rows each side printed (column name to
    /// value).
    fn perftest(&self, test: &str) -> Result<Vec<(String, Value)>, String> {
        let exe = self
            .umdk
            .perftest
            .clone()
            .ok_or("no urma_perftest (not installed with the system's UMDK)")?;
        let iters = if test.ends_with("_bw") {
            bw_iters()
        } else {
            lat_iters()
        };
        let pair = Pair {
            exe: &exe,
            test,
            device: DEVICE,
            iters,
            size: None,
            log: &self.logs.join(format!("perftest-{test}")),
            limit: Duration::from_secs(60),
        };
        let out = run_pair(&pair, &|cmd| {
            self.over_core(cmd);
        })?;
        let (client, served) = (out.client.stdout, out.server.stdout);
        let measure = if test.ends_with("_bw") {
            "BW average[MB/sec]"
        } else {
            "t_avg[us]"
        };
        let mut rows = Vec::new();
        for (side, text) in [("client", &client), ("server", &served)] {
            if let Some(row) = result_row(text) {
                if row[measure].as_f64().is_none_or(|v| v.is_nan() || v <= 0.0) {
                    return Err(format!("{side}: {measure} is not positive: {row}"));
                }
                rows.push((side.to_string(), row));
            }
        }
        if rows.is_empty() {
            return Err(format!("no result line:\n{client}"));
        }
        Ok(rows)
    }
}

fn lat_iters() -> u64 {
    env_or("UMDK_LAT_ITERS", "1000").parse().unwrap_or(1000)
}

fn bw_iters() -> u64 {
    env_or("UMDK_BW_ITERS", "2000").parse().unwrap_or(2000)
}

/// The result row of a perftest output (`ost_supervise::perftest::result_row`) as JSON: column
/// name to value.
fn result_row(text: &str) -> Option<Value> {
    let row = perftest::result_row(text)?;
    Some(Value::Object(
        row.into_iter().map(|(n, v)| (n, json!(v))).collect(),
    ))
}

// ---------------------------------------------------------------------------------------------
// The project's suites over the core

/// The loopback's test binaries run over the core: its behaviour suite (one process) and the
/// ones with a second process (the C program pair, processes joining the host).
const SUITES: &[&str] = &["loopback", "c_program", "xproc"];

impl Lane<'_> {
    fn suites(&mut self) {
        let mut cmd = cargo_cmd();
        cmd.args(["test", "-p", "urma-loopback", "--no-run"]);
        for t in SUITES {
            cmd.args(["--test", t]);
        }
        let tests = cargo::build(cmd);
        for t in SUITES {
            let exe = tests.executable(t).to_path_buf();
            let r = self.run_over_core(
                &format!("suite-{t}"),
                &mut Command::new(&exe),
                Duration::from_secs(300),
            );
            let r = r.map(|out| {
                out.lines()
                    .rev()
                    .find(|l| l.starts_with("test result:"))
                    .unwrap_or("")
                    .to_string()
            });
            self.step(&format!("urma-loopback --test {t}"), r);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// compat over the core

impl Lane<'_> {
    fn compat(&mut self, standalone: &Path, args: &[String]) {
        let exe = self.built.executable("compat").to_path_buf();
        let limit = Duration::from_secs(900);
        let base = self.out.clone();
        let dir = |d: &str| base.join(d);

        let out = dir("compat");
        let random = compat_random();
        let r = self
            .run_over_core(
                "compat",
                Command::new(&exe)
                    .args(args)
                    .args(["--random", &random, "--out"])
                    .arg(&out),
                limit,
            )
            .and_then(|_| {
                same_verdicts(
                    &reports::read(standalone, "report.json"),
                    &reports::read(&out, "report.json"),
                )
            });
        self.step("compat (catalogue, random, interop)", r);

        let out = dir("compat-device");
        let random = env_or("COMPAT_DEVICE_RANDOM", "10");
        let r = self
            .run_over_core(
                "compat-device",
                Command::new(&exe)
                    .args(["--device", DEVICE, "--random", &random, "--out"])
                    .arg(&out)
                    .env("URMA_INTERPOSE_REAL", self.umdk.core()),
                limit,
            )
            .and_then(|_| {
                let r = reports::read(&out, "report.json");
                if r["backend"] != "hardware" || r["loopback_control_calls"] != 0 {
                    return Err(format!(
                        "backend {}, loopback control calls {}",
                        r["backend"], r["loopback_control_calls"]
                    ));
                }
                no_fail(&r)
            });
        self.step("compat --device loopback0 (interposition layer)", r);

        let out = dir("compat-split");
        let r = self
            .run_over_core(
                "compat-split",
                Command::new(&exe)
                    .args(args)
                    .arg("--split")
                    .arg("--out")
                    .arg(&out),
                limit,
            )
            .and_then(|_| {
                let ours = reports::read(&out, "report-split.json");
                if standalone.join("report-split.json").exists() {
                    same_verdicts(&reports::read(standalone, "report-split.json"), &ours)
                } else {
                    no_fail(&ours)
                }
            });
        self.step("compat --split", r);
    }
}

/// The random scenarios of the compat run over the core (`UMDK_COMPAT_RANDOM`, default 50).
pub fn compat_random() -> String {
    env_or("UMDK_COMPAT_RANDOM", "50")
}

/// No FAIL (and nothing not run) in a report's totals.
fn no_fail(report: &Value) -> Result<String, String> {
    let t = &report["totals"];
    if t["fail"] != 0 || t["not_run"].as_u64().unwrap_or(0) != 0 {
        return Err(format!("totals {t}"));
    }
    Ok(format!("totals {t}"))
}

/// Every scenario of `ours` has its verdict in `standalone`, every scenario of `standalone` but
/// the random ones (`ours` may have run fewer: the first ones of the same seed) is in `ours`,
/// and `ours` has no FAIL.
fn same_verdicts(standalone: &Value, ours: &Value) -> Result<String, String> {
    let (a, b) = (reports::verdicts(standalone), reports::verdicts(ours));
    let of =
        |v: &[(String, String)], id: &str| v.iter().find(|(i, _)| i == id).map(|(_, w)| w.clone());
    let mut differ: Vec<String> = b
        .iter()
        .filter(|(id, w)| of(&a, id).as_ref() != Some(w))
        .map(|(id, w)| format!("{id}: {w} here, {:?} standalone", of(&a, id)))
        .collect();
    differ.extend(
        a.iter()
            .filter(|(id, _)| !id.starts_with("\"rand-") && of(&b, id).is_none())
            .map(|(id, _)| format!("{id}: not run here")),
    );
    if b.is_empty() || !differ.is_empty() {
        return Err(format!(
            "{} scenarios standalone, {} here; differing: {differ:?}",
            a.len(),
            b.len()
        ));
    }
    no_fail(ours).map(|t| format!("{} scenarios, the standalone verdicts; {t}", b.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_are_the_control_planes() {
        assert_eq!(PLUGIN_FILE_NAME, urma_loopback_ctl::plugin::FILE_NAME);
        assert_eq!(ENABLE_VAR, urma_loopback_ctl::plugin::ENABLE_VAR);
        assert_eq!(
            PRELOAD_FILE_NAME,
            urma_loopback_ctl::plugin::PRELOAD_FILE_NAME
        );
    }

    #[test]
    fn a_perftest_result_row_is_read_under_its_header() {
        let lat = "junk\n bytes   iterations  t_min[us]  t_max[us]  t_median[us]  t_avg[us]  \
                   t_stdev[us]  99%[us]  99.9%[us]  99.99%[us]  99.999%[us]\n 2       1000        \
                   1.00       9.00       2.00          2.50       0.50         8.00     9.00       \
                   9.00        9.00\n";
        let row = result_row(lat).expect("row");
        assert_eq!(row["t_median[us]"], json!(2.0));
        assert_eq!(row["iterations"], json!(1000.0));
        let bw = " bytes   iterations  BW peak[MB/sec]  BW average[MB/sec]  MsgRate[Mpps]\n \
                  65536   2000        0.00             1234.50             0.018836\n";
        let row = result_row(bw).expect("row");
        assert_eq!(row["BW average[MB/sec]"], json!(1234.5));
        assert_eq!(result_row("no header\n"), None);
    }

    #[test]
    fn verdicts_compare_by_scenario_with_fewer_random_ones() {
        let report = |rows: &[(&str, &str)], fail: u64| {
            json!({
                "totals": { "fail": fail },
                "scenarios": rows.iter().map(|(id, v)| json!({"id": id, "verdict": v})).collect::<Vec<_>>(),
            })
        };
        let standalone = report(
            &[("a", "PASS"), ("rand-1", "PASS"), ("rand-2", "DIVERGES")],
            0,
        );
        assert!(same_verdicts(
            &standalone,
            &report(&[("a", "PASS"), ("rand-1", "PASS")], 0)
        )
        .is_ok());
        assert!(same_verdicts(
            &standalone,
            &report(&[("a", "FAIL"), ("rand-1", "PASS")], 0)
        )
        .is_err());
        assert!(same_verdicts(&standalone, &report(&[("rand-1", "PASS")], 0)).is_err());
        assert!(same_verdicts(
            &standalone,
            &report(&[("a", "PASS"), ("rand-9", "PASS")], 0)
        )
        .is_err());
        assert!(same_verdicts(&standalone, &report(&[("a", "PASS")], 1)).is_err());
    }
}
