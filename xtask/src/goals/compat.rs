//! The conformance goals: `compat`, hardware mode over the loopback (`compat-device`), the ledger's page.

use super::common::{build, compat_args, reports_written};
use crate::cargo::{self, Built};
use crate::cmd::{cargo as cargo_cmd, env_or, fail, run, show, try_run, urma_exports};
use crate::ctx::Ctx;
use crate::reports;
use std::path::Path;
use std::process::Command;

/// The loopback's one-process suites again with the provider kept in-process only
/// (`URMA_LOOPBACK_DIR` names a regular file, so no process joins the host): the default run
/// above has every test process joined, so both modes of docs/loopback.md are covered.
pub(super) fn loopback_in_process_only(ctx: &Ctx) {
    let unusable = ctx.target.join("loopback-dir-unusable");
    std::fs::write(&unusable, b"not a directory\n").expect("write the marker file");
    let mut cmd = cargo_cmd();
    cmd.args([
        "test",
        "-p",
        "urma-loopback",
        "--test",
        "loopback",
        "--test",
        "header",
    ]);
    run(cmd.env("URMA_LOOPBACK_DIR", &unusable));
}

pub(super) fn compat(ctx: &mut Ctx, goal: &str, args: &[String]) {
    build(ctx, goal);
    run(cargo_cmd()
        .args(["run", "-q", "-p", "compat-tests", "--bin", "compat", "--"])
        .args(compat_args(args)));
}

/// Renders `docs/divergences.md` from the ledger (`compat --render-ledger`): the page's one
/// source is `compat-tests/ledger.json`.
pub(super) fn ledger(ctx: &Ctx) {
    let out = cargo_cmd()
        .args(["run", "-q", "-p", "compat-tests", "--bin", "compat", "--"])
        .arg("--render-ledger")
        .output()
        .unwrap_or_else(|e| fail(format!("cargo run compat: {e}")));
    if !out.status.success() {
        fail(format!(
            "compat --render-ledger failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let page = ctx.repo.join("docs/divergences.md");
    std::fs::write(&page, &out.stdout).unwrap_or_else(|e| fail(format!("{}: {e}", page.display())));
    println!("ledger: wrote {}", page.display());
}

/// Hardware mode over the loopback treated as an unknown provider: `compat --device loopback0`
/// with the interposition layer in front of a loopback built without its control API (cargo
/// feature `ctl` off, in `<target>/xtask/no-ctl`). Checks that this build exports the URMA
/// functions and no `urma_loopback_*` (and that the normal build does, so the check can fail),
/// that the run passes and reports no control-API call, and, as the negative control, that the
/// loopback-controlled `--interpose` backend cannot pass over that build. `COMPAT_DEVICE_RANDOM`
/// random scenarios (default 10); `args` go to compat.
pub(super) fn compat_device(ctx: &mut Ctx, goal: &str, args: &[String]) {
    let built = build(ctx, goal);
    let dir = ctx.target.join("xtask/no-ctl");
    let mut cmd = cargo_cmd();
    cmd.args([
        "build",
        "-p",
        "urma-loopback",
        "--no-default-features",
        "--target-dir",
    ])
    .arg(&dir);
    let no_ctl = cargo::build(cmd).loopback_dir.join("liburma.so.0");
    let full = urma_exports(&built.loopback_dir.join("liburma.so.0"));
    let bare = urma_exports(&no_ctl);
    let is_ctl = |n: &&String| n.starts_with("urma_loopback_");
    if !full.iter().any(|n| n == "urma_loopback_reset") {
        fail("the check is blind: nm finds no urma_loopback_reset in the normal loopback");
    }
    let leaked: Vec<&String> = bare.iter().filter(is_ctl).collect();
    if !leaked.is_empty() {
        fail(format!("{} exports {leaked:?}", no_ctl.display()));
    }
    let want: Vec<&String> = full.iter().filter(|n| !is_ctl(n)).collect();
    if bare.iter().collect::<Vec<_>>() != want {
        fail(format!(
            "{} does not export the same URMA functions as the normal loopback",
            no_ctl.display()
        ));
    }
    println!(
        "compat-device: {} exports {} urma_* functions, none of them urma_loopback_* (the normal build: {} more)",
        no_ctl.display(),
        bare.len(),
        full.len() - bare.len()
    );
    let out = ctx.target.join("compat-device");
    let random = env_or("COMPAT_DEVICE_RANDOM", "10");
    let compat = |extra: &[&str]| {
        let mut c = cargo_cmd();
        c.args(["run", "-q", "-p", "compat-tests", "--bin", "compat", "--"])
            .args(extra)
            .env("URMA_INTERPOSE_REAL", &no_ctl);
        c
    };
    let out_s = out.to_string_lossy().to_string();
    run(compat(&[
        "--device",
        "loopback0",
        "--random",
        &random,
        "--out",
        &out_s,
    ])
    .args(args));
    let hardware_report = |dir: &Path, what: &str| -> serde_json::Value {
        let report = reports::read(dir, "report.json");
        if report["backend"] != "hardware" || report["loopback_control_calls"] != 0 {
            fail(format!(
                "{what}: backend {}, loopback control calls {}",
                report["backend"], report["loopback_control_calls"]
            ));
        }
        report
    };
    hardware_report(&out, "compat --device");
    // A strict provider, as real transports without receiver-not-ready retries are: a SEND_IMM
    // finding no posted receive completes at once with an RNR error CR, which the libraries are
    // handed. Only the scenarios where that happens or could: the prefill failures (no receive
    // posted at all) and a receive queue of 4 WRs for 7 SEND_IMMs.
    let strict = out.join("strict-provider");
    let strict_s = strict.to_string_lossy().to_string();
    let mut strict_cmd = compat(&["--device", "loopback0", "--no-interop", "--out", &strict_s]);
    for id in STRICT_PROVIDER_SCENARIOS {
        strict_cmd.args(["--scenario", id]);
    }
    run(strict_cmd.env("URMA_LOOPBACK_RNR_TIMEOUT_MS", "0"));
    let report = hardware_report(&strict, "compat --device over a strict provider");
    // Not blind: the provider really was strict, and the difference it caused was judged by
    // the error CR both libraries received (D3), not by a list naming the scenario.
    let d3 = report["scenarios"].as_array().is_some_and(|a| {
        a.iter().any(|s| {
            s["id"] == "recv-post-fail"
                && s["ledger"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|x| x == "D3"))
        })
    });
    if !d3 {
        fail(format!(
            "compat --device over a strict provider: recv-post-fail is not D3 (the RNR error CR \
             never came, or was not judged by what the libraries received); see {}",
            strict.join("report.md").display()
        ));
    }
    reports_written(&out, "report");
    println!(
        "compat-device: over a strict provider (URMA_LOOPBACK_RNR_TIMEOUT_MS=0) {} scenarios, 0 FAIL; \
         recv-post-fail judged D3 by the RNR error CR both libraries received",
        STRICT_PROVIDER_SCENARIOS.len()
    );
    // Negative control: the backend that resets the loopback through urma_loopback_* between
    // scenarios fails over the same build.
    let neg = ctx.target.join("compat-device/negative-control");
    let neg_s = neg.to_string_lossy().to_string();
    let mut neg_cmd = compat(&[
        "--interpose",
        "--scenario",
        "len-1",
        "--no-interop",
        "--out",
        &neg_s,
    ]);
    eprintln!("+ {}", show(&neg_cmd));
    let o = neg_cmd
        .output()
        .unwrap_or_else(|e| fail(format!("cannot run compat: {e}")));
    let stderr = String::from_utf8_lossy(&o.stderr);
    if o.status.code() != Some(1) || !stderr.contains("urma_loopback_reset not found") {
        fail(format!(
            "negative control: compat --interpose over {} should FAIL (exit 1) for want of \
             urma_loopback_reset, got {}:\n{}\n{stderr}",
            no_ctl.display(),
            o.status,
            String::from_utf8_lossy(&o.stdout),
        ));
    }
    println!(
        "compat-device: negative control OK (compat --interpose FAILs without the control API)"
    );
    compat_device_split(ctx, &built, &no_ctl, &out);
}

/// The scenarios `compat-device` also runs over the loopback made strict (no receiver-not-ready
/// retries, `URMA_LOOPBACK_RNR_TIMEOUT_MS=0`).
pub(super) const STRICT_PROVIDER_SCENARIOS: &[&str] =
    &["recv-post-fail", "recv-post-fail-retry", "recv-capacity-1"];

/// Hardware mode with sender and receiver in two processes, first as one command
/// (`compat --split --device loopback0`), then as two nodes: `--serve` and `--peer` started as
/// two separate invocations on 127.0.0.1. Both must have no FAIL, no `urma_loopback_*` call and
/// every interop cell of the two-process column OK; the two-node run must give every scenario
/// the one-command run's verdict.
pub(super) fn compat_device_split(ctx: &Ctx, built: &Built, no_ctl: &Path, out: &Path) {
    let exe = built.executable("compat");
    let compat = |args: &[&str], dir: &Path| {
        let mut c = Command::new(exe);
        c.args(["--split", "--device", "loopback0"])
            .args(args)
            .arg("--out")
            .arg(dir)
            .env("URMA_INTERPOSE_REAL", no_ctl)
            .env("LD_LIBRARY_PATH", ctx.loader_path(built, &[]));
        c
    };
    let check = |what: &str, r: &serde_json::Value| {
        let t = &r["totals"];
        let cells = t["interop_cells"].as_u64().unwrap_or(0);
        if r["backend"] != "hardware"
            || r["loopback_control_calls"] != 0
            || t["fail"] != 0
            || t["not_run"] != 0
            || cells == 0
            || t["interop_two_ok"].as_u64() != Some(cells)
        {
            fail(format!(
                "{what}: backend {}, loopback control calls {}, totals {t}",
                r["backend"], r["loopback_control_calls"]
            ));
        }
    };
    let one_dir = out.join("split-one-command");
    run(&mut compat(&[], &one_dir));
    reports_written(&one_dir, "report-split");
    let one = reports::read(&one_dir, "report-split.json");
    check("compat --split --device", &one);
    // Two nodes: the serving node in a process tree of its own, the driver in another.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| fail(format!("no free port on 127.0.0.1: {e}")));
    let addr = format!("127.0.0.1:{port}");
    let serve_dir = out.join("split-serve");
    let mut serve_cmd = compat(&["--serve", &addr], &serve_dir);
    eprintln!("+ {} &", show(&serve_cmd));
    let mut serve = serve_cmd
        .spawn()
        .unwrap_or_else(|e| fail(format!("cannot start the serving node: {e}")));
    let two_dir = out.join("split-two-nodes");
    let driven = try_run(&mut compat(&["--peer", &addr], &two_dir));
    let served = serve.wait().map(|s| s.success()).unwrap_or(false);
    if driven.is_err() || !served {
        fail(format!(
            "two nodes: the driver {}, the serving node {}",
            if driven.is_ok() { "passed" } else { "failed" },
            if served { "passed" } else { "failed" }
        ));
    }
    reports_written(&two_dir, "report-split");
    let two = reports::read(&two_dir, "report-split.json");
    check("compat --split --device --peer", &two);
    let (v1, v2) = (reports::verdicts(&one), reports::verdicts(&two));
    if v1.is_empty() || v1 != v2 || one["interop"] != two["interop"] {
        fail(format!(
            "two nodes judged otherwise than one command:\n one: {v1:?}\n two: {v2:?}\n interop one: {}\n interop two: {}",
            one["interop"], two["interop"]
        ));
    }
    println!(
        "compat-device: two processes over the layer: {} scenarios and {} interop cells, the same \
         verdicts as one command and as two nodes (--serve / --peer); no urma_loopback_* call",
        v1.len(),
        two["totals"]["interop_cells"]
    );
}
