//! The goals, in one table ([`GOALS`]: name, system packages, help, function). Knobs come from the environment, so `make GOAL VAR=value`
//! and `VAR=value cargo xtask GOAL` are the same: COMPAT_ARGS, COMPAT_DEVICE_RANDOM, BENCH_ARGS, BENCH_OUT,
//! HELGRIND_STRICT, STRESS_REQS, STRESS_FUZZ_CRS, FUZZ_TIME, FUZZ_SMOKE_RUNS, CLANG, REL_CC,
//! VALGRIND, RPMBUILD_OPTS, DIST_TREE, UMDK_SRC, UMDK_LAT_ITERS, UMDK_BW_ITERS.

use crate::cargo::{self, Built};
use crate::cmd::{
    cargo as cargo_cmd, env_or, fail, run, security_required, show, try_run, urma_exports,
};
use crate::ctx::Ctx;
use crate::reports;
use ost_build_support::archive;
use ost_build_support::cprog::{self, Build, Compiler, Lib};
use ost_build_support::legacy::{self, Flavour, Inputs};
use ost_build_support::umdk;
use std::path::{Path, PathBuf};
use std::process::Command;

const AARCH64: &str = "aarch64-unknown-linux-gnu";
const MSRV: &str = "1.82";

/// One goal of `cargo xtask`, and of `make` (the Makefile's goals are this table's names:
/// `cargo xtask goals` lists them).
pub struct Goal {
    pub name: &'static str,
    /// The `packaging/deps.sh` groups it needs.
    pub deps: &'static str,
    /// What it does (`cargo xtask help`).
    pub help: &'static str,
    /// Runs it: the context, the goal's name, the arguments after it.
    pub run: fn(&mut Ctx, &str, &[String]),
}

/// Every goal, in the order `help` lists them: the one place a goal is added.
pub const GOALS: &[Goal] = &[
    Goal {
        name: "build",
        deps: "base",
        help: "every crate and target of the workspace (debug)",
        run: |ctx, goal, _args| {
            build(ctx, goal);
        },
    },
    Goal {
        name: "test",
        deps: "base rpm bench fuzz aarch64 umdk msrv bazel",
        help: "everything a change must pass",
        run: |ctx, _goal, _args| {
            test(ctx);
        },
    },
    Goal {
        name: "test-umdk",
        deps: "base umdk",
        help: "the genuine-core lane: the loopback as a plugin of the genuine URMA core (system's, or \
         built from UMDK_SRC), urma_sample, urma_perftest, the loopback's suites and compat over it",
        run: |ctx, goal, _args| {
            // cmake first, for a core built from UMDK_SRC; nothing else without a core.
            ctx.deps(goal);
            let Some(core) = crate::umdk_lane::core(ctx) else {
                return;
            };
            let built = build(ctx, goal);
            let standalone = ctx.target.join("umdk/compat-standalone");
            // The standalone run to compare with, of the scenarios the lane runs.
            let args = [
                "--random".to_string(),
                crate::umdk_lane::compat_random(),
                "--out".to_string(),
                standalone.to_string_lossy().to_string(),
            ];
            compat(ctx, goal, &args);
            crate::umdk_lane::run(ctx, &built, core, &standalone, &compat_args(&[]));
        },
    },
    Goal {
        name: "compat",
        deps: "base",
        help: "the C-vs-Rust conformance report (target/compat/report.html, .md, .json, .xml); args: compat's",
        run: |ctx, goal, args| {
            compat(ctx, goal, args);
        },
    },
    Goal {
        name: "compat-device",
        deps: "base",
        help: "compat --device over the loopback built without urma_loopback_* (hardware mode, short; \
         --split as one command and as two nodes)",
        run: |ctx, goal, args| {
            compat_device(ctx, goal, args);
        },
    },
    Goal {
        name: "legacy-asan-suite",
        deps: "base",
        help: "compat-tests' case_legacy tests against the ASan/UBSan build of legacy-c",
        run: |ctx, goal, _args| {
            legacy_asan_suite(ctx, goal);
        },
    },
    Goal {
        name: "reliability-check",
        deps: "base fuzz",
        help: "memcheck + helgrind (both gating) + fuzz smoke",
        run: |ctx, goal, _args| {
            reliability_memcheck(ctx, goal);
            reliability_helgrind(ctx, goal);
            fuzz(ctx, goal, true);
        },
    },
    Goal {
        name: "reliability-memcheck",
        deps: "base",
        help: "C consumer and fuzz seeds under valgrind memcheck",
        run: |ctx, goal, _args| {
            reliability_memcheck(ctx, goal);
        },
    },
    Goal {
        name: "reliability-helgrind",
        deps: "base",
        help: "fuzz seeds under helgrind (HELGRIND_STRICT=0: report only)",
        run: |ctx, goal, _args| {
            reliability_helgrind(ctx, goal);
        },
    },
    Goal {
        name: "stress",
        deps: "base",
        help: "long reliability variants (release): STRESS_REQS, STRESS_FUZZ_CRS",
        run: |ctx, goal, _args| {
            stress(ctx, goal);
        },
    },
    Goal {
        name: "fuzz",
        deps: "base fuzz",
        help: "libFuzzer run of FUZZ_TIME seconds (default 600)",
        run: |ctx, goal, _args| {
            fuzz(ctx, goal, false);
        },
    },
    Goal {
        name: "fuzz-smoke",
        deps: "base fuzz",
        help: "short libFuzzer run (FUZZ_SMOKE_RUNS inputs, default 20000)",
        run: |ctx, goal, _args| {
            fuzz(ctx, goal, true);
        },
    },
    Goal {
        name: "bench",
        deps: "base bench",
        help: "full benchmark (target/bench/report.md); BENCH_ARGS for ostbench",
        run: |ctx, goal, _args| {
            bench(ctx, goal, "full");
        },
    },
    Goal {
        name: "bench-quick",
        deps: "base bench",
        help: "quick benchmark (target/bench/quick.md)",
        run: |ctx, goal, _args| {
            bench(ctx, goal, "quick");
        },
    },
    Goal {
        name: "dist",
        deps: "",
        help: "Source0 + Source1 of the RPM in target/rpm/SOURCES",
        run: |ctx, _goal, _args| {
            dist(ctx);
        },
    },
    Goal {
        name: "rpm",
        deps: "rpm",
        help: "rpmbuild -ba openeuler.spec (RPMBUILD_OPTS, DIST_TREE)",
        run: |ctx, goal, _args| {
            rpm(ctx, goal);
        },
    },
    Goal {
        name: "rpm-test",
        deps: "rpm umdk bazel",
        help: "make rpm, then the install test packaging/rpm-test.sh (over the genuine URMA core too: \
         the system's, or built from UMDK_SRC)",
        run: |ctx, goal, _args| {
            rpm(ctx, goal);
            rpm_test(ctx);
        },
    },
    Goal {
        name: "rpm-clean",
        deps: "",
        help: "remove target/rpm and target/rpm-test",
        run: |ctx, _goal, _args| {
            for d in ["rpm", "rpm-test"] {
                let _ = std::fs::remove_dir_all(ctx.target.join(d));
            }
        },
    },
    Goal {
        name: "stage",
        deps: "",
        help: "cargo build (args passed on), then place liburma.so.0, legacy-c and libos_transport.a in --dest DIR",
        run: |_ctx, _goal, args| {
            stage(args);
        },
    },
    Goal {
        name: "test-aarch64",
        deps: "base aarch64",
        help: "the workspace cross-built for aarch64, tests and compat under qemu",
        run: |ctx, goal, _args| {
            test_aarch64(ctx, goal);
        },
    },
    Goal {
        name: "test-aarch64-quick",
        deps: "base aarch64",
        help: "what differs on aarch64: layout, tests that start processes or use addresses as values",
        run: |ctx, goal, _args| {
            test_aarch64_quick(ctx, goal);
        },
    },
    Goal {
        name: "msrv",
        deps: "base msrv",
        help: "build and test with Rust 1.82 and the locked dependencies",
        run: |ctx, goal, _args| {
            msrv(ctx, goal);
        },
    },
    Goal {
        name: "lint",
        deps: "",
        help: "Cargo.lock up to date, no import circle (imports), cargo fmt --check, clippy -D warnings",
        run: |ctx, _goal, _args| {
            lint(ctx);
        },
    },
    Goal {
        name: "imports",
        deps: "",
        help: "no import circle between the module files of any crate of the workspace",
        run: |ctx, _goal, _args| {
            imports(ctx);
        },
    },
    Goal {
        name: "fmt",
        deps: "",
        help: "cargo fmt --all",
        run: |_ctx, _goal, _args| {
            run(cargo_cmd().args(["fmt", "--all"]));
        },
    },
    Goal {
        name: "ledger",
        deps: "",
        help: "render docs/divergences.md from compat-tests/ledger.json (the ledger's one source)",
        run: |ctx, _goal, _args| {
            ledger(ctx);
        },
    },
    Goal {
        name: "deps",
        deps: "",
        help: "install what any goal needs (root), else print it",
        run: |_ctx, _goal, _args| {
            run(Command::new("./packaging/deps.sh").args(["install", "all"]));
        },
    },
    Goal {
        name: "clean",
        deps: "",
        help: "cargo clean",
        run: |_ctx, _goal, _args| {
            run(cargo_cmd().arg("clean"));
        },
    },
];

/// The `packaging/deps.sh` groups of `goal` (`base` for a name not in the table).
pub fn deps_of(goal: &str) -> &'static str {
    GOALS
        .iter()
        .find(|g| g.name == goal)
        .map_or("base", |g| g.deps)
}

/// `cargo build --workspace --all-targets` (debug), after the system packages `goal` needs.
fn build(ctx: &mut Ctx, goal: &str) -> Built {
    ctx.deps(goal);
    let mut cmd = cargo_cmd();
    cmd.args(["build", "--workspace", "--all-targets"]);
    cargo::build(cmd)
}

/// The loopback's one-process suites again with the provider kept in-process only
/// (`URMA_LOOPBACK_DIR` names a regular file, so no process joins the host): the default run
/// above has every test process joined, so both modes of docs/loopback.md are covered.
fn loopback_in_process_only(ctx: &Ctx) {
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

/// Everything a change must pass, in this order; stops at the first failing step.
fn test(ctx: &mut Ctx) {
    let built = build(ctx, "test");
    // deps.sh (base) installed Chromium and xmllint: the report test must not skip.
    run(
        security_required(cargo_cmd().args(["test", "--workspace", "--no-fail-fast"]))
            .env(REPORT_TOOLS_REQUIRED, "1"),
    );
    loopback_in_process_only(ctx);
    compat(ctx, "test", &[]);
    compat_device(ctx, "test", &[]);
    // The same scenarios with sender and receiver in two processes (docs/compat.md).
    compat(ctx, "test", &["--split".to_string()]);
    // Faults at the inject points of both libraries' inject flavours (docs/inject.md).
    compat(ctx, "test", &["--inject".to_string()]);
    // The pages and JUnit files of those runs (in-process and --split; hardware mode).
    report_files(&ctx.target.join("compat"));
    report_files(&ctx.target.join("compat-device"));
    // Over the genuine URMA core, compared with the two runs above.
    if let Some(core) = crate::umdk_lane::core(ctx) {
        let standalone = ctx.target.join("compat");
        crate::umdk_lane::run(ctx, &built, core, &standalone, &compat_args(&[]));
    }
    legacy_asan_suite(ctx, "test");
    reliability_memcheck(ctx, "test");
    reliability_helgrind(ctx, "test");
    fuzz(ctx, "test", true);
    bench(ctx, "test", "quick");
    rpm(ctx, "test");
    rpm_test(ctx);
    test_aarch64_quick(ctx, "test");
}

/// Set for the report test (compat-tests/tests/report_files.rs): a missing Chromium or xmllint
/// fails it instead of skipping it.
const REPORT_TOOLS_REQUIRED: &str = "COMPAT_REPORT_TOOLS_REQUIRED";

/// The report test on the reports a run wrote into `dir` (`report.*`, `report-split.*`):
/// `report.html` in headless Chromium (its numbers against `report.json`, a filter, the
/// screenshot `report.png` beside it) and `report.xml` against the JUnit schema.
fn report_files(dir: &Path) {
    run(cargo_cmd()
        .args(["test", "-q", "-p", "compat-tests", "--test", "report_files"])
        .env("COMPAT_REPORT_DIR", dir)
        .env(REPORT_TOOLS_REQUIRED, "1"));
}

/// Fails unless `dir` has the four renderings of the report `stem`.
fn reports_written(dir: &Path, stem: &str) {
    for ext in ["json", "md", "html", "xml"] {
        let p = dir.join(format!("{stem}.{ext}"));
        if !p.is_file() {
            fail(format!("{} was not written", p.display()));
        }
    }
}

/// `COMPAT_ARGS` split on white space, then `args`.
fn compat_args(args: &[String]) -> Vec<String> {
    env_or("COMPAT_ARGS", "")
        .split_whitespace()
        .map(str::to_string)
        .chain(args.iter().cloned())
        .collect()
}

fn compat(ctx: &mut Ctx, goal: &str, args: &[String]) {
    build(ctx, goal);
    run(cargo_cmd()
        .args(["run", "-q", "-p", "compat-tests", "--bin", "compat", "--"])
        .args(compat_args(args)));
}

/// Renders `docs/divergences.md` from the ledger (`compat --render-ledger`): the page's one
/// source is `compat-tests/ledger.json`.
fn ledger(ctx: &Ctx) {
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
fn compat_device(ctx: &mut Ctx, goal: &str, args: &[String]) {
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
const STRICT_PROVIDER_SCENARIOS: &[&str] =
    &["recv-post-fail", "recv-post-fail-retry", "recv-capacity-1"];

/// Hardware mode with sender and receiver in two processes, first as one command
/// (`compat --split --device loopback0`), then as two nodes: `--serve` and `--peer` started as
/// two separate invocations on 127.0.0.1. Both must have no FAIL, no `urma_loopback_*` call and
/// every interop cell of the two-process column OK; the two-node run must give every scenario
/// the one-command run's verdict.
fn compat_device_split(ctx: &Ctx, built: &Built, no_ctl: &Path, out: &Path) {
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

/// The URMA headers and `-lurma` directory for C built here: the ones urma-sys's build script
/// selected in `built` (the selection exists once, in `ost_build_support::urma`).
fn urma_inputs(ctx: &Ctx, built: &Built) -> Inputs {
    let (urma_include, urma_link_dir) = built
        .urma
        .clone()
        .unwrap_or_else(|| fail("the build did not report urma-sys's URMA directories"));
    Inputs {
        repo: ctx.repo.clone(),
        urma_include,
        urma_link_dir,
    }
}

/// The host triple (`rustc -vV`).
fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .unwrap_or_else(|e| fail(format!("rustc -vV: {e}")));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap_or_else(|| fail("rustc -vV printed no host"))
}

/// compat-tests' `case_legacy` tests against the ASan/UBSan flavour of legacy-c (built here by
/// the one legacy build function, into `<target>/xtask/legacy-asan`), through
/// legacy-c/tests/asan_suite.sh.
fn legacy_asan_suite(ctx: &mut Ctx, goal: &str) {
    let built = build(ctx, goal);
    let base = ost_build_support::compiler_for(Some(&host_triple()));
    let inputs = urma_inputs(ctx, &built);
    let out = ctx.target.join("xtask");
    let dir = legacy::build(&base, Flavour::Asan, &inputs, &out);
    // LD_PRELOAD shim: lets the (uninstrumented) test binary dlopen the ASan build with
    // RTLD_DEEPBIND, which the sanitizer runtime refuses.
    Build::new(cprog::Flavour::Plain, dir.join("libstrip_deepbind.so"))
        .compiler(Compiler::Triple(host_triple()))
        .source(ctx.repo.join("legacy-c/tests/strip_deepbind.c"))
        .shared(None)
        .run();
    let mut tests = cargo_cmd();
    tests.args([
        "test",
        "-p",
        "compat-tests",
        "--test",
        "behaviour",
        "--no-run",
    ]);
    let behaviour = cargo::build(tests);
    let bin = behaviour.executable("behaviour");
    run(Command::new("legacy-c/tests/asan_suite.sh")
        .arg(bin)
        .arg(&dir)
        .arg(&built.loopback_dir));
}

/// `<target>/reliability`: the fuzz replayer and the C consumer (against the Rust library under
/// its SONAME), for valgrind.
fn reliability_bins(ctx: &mut Ctx, goal: &str) -> (Built, PathBuf) {
    let built = build(ctx, goal);
    let rel = ctx.target.join("reliability");
    let lib = rel.join("lib");
    std::fs::create_dir_all(&lib).unwrap_or_else(|e| fail(format!("{}: {e}", lib.display())));
    for name in ["libos_transport.so", "libos_transport.so.1"] {
        let l = lib.join(name);
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(built.profile_dir.join("libos_transport.so"), &l)
            .unwrap_or_else(|e| fail(format!("{}: {e}", l.display())));
    }
    let rust_lib = built.profile_dir.join("libos_transport.so");
    let program = |main: &str, exe: &str| {
        Build::urma_program(
            &ctx.repo,
            cprog::Flavour::Valgrind,
            ctx.repo.join(main),
            rel.join(exe),
        )
        .compiler(Compiler::Command(env_or("REL_CC", "cc").into()))
        .lib(Lib::Urma(built.loopback_dir.clone()))
    };
    program("fuzz/cr_fuzz.c", "replay")
        .source(ctx.repo.join("fuzz/replay_main.c"))
        .define(
            "OST_FUZZ_LIB_DEFAULT",
            format!("\"{}\"", rust_lib.display()),
        )
        .run();
    program("tests/c/consumer.c", "consumer")
        .lib(Lib::OsTransport(lib))
        .run();
    (built, rel)
}

fn valgrind() -> String {
    env_or("VALGRIND", "valgrind")
}

/// The C consumer (both modes) and the fuzz seeds under memcheck: fails on any error or any
/// byte definitely or indirectly lost.
fn reliability_memcheck(ctx: &mut Ctx, goal: &str) {
    let (built, rel) = reliability_bins(ctx, goal);
    let memcheck = |cmd: &mut Command| {
        cmd.args([
            "-q",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
            "--error-exitcode=99",
        ]);
    };
    let path = ctx.loader_path(&built, &[&rel.join("lib")]);
    let mut c = Command::new(valgrind());
    memcheck(&mut c);
    run(c.env("LD_LIBRARY_PATH", &path).arg(rel.join("consumer")));
    let mut c = Command::new(valgrind());
    memcheck(&mut c);
    run(c
        .env("LD_LIBRARY_PATH", &path)
        .env("URMA_LOOPBACK_KNOBS", "nocopy=1")
        .arg(rel.join("consumer"))
        .args(["pattern", "1200"]));
    let mut c = Command::new(valgrind());
    memcheck(&mut c);
    run(c
        .env("LD_LIBRARY_PATH", ctx.loader_path(&built, &[]))
        .arg(rel.join("replay"))
        .arg("fuzz/seeds"));
    println!(
        "memcheck: 0 errors, 0 bytes definitely/indirectly lost (consumer, consumer pattern with \
         1200 uncollected gets, fuzz/seeds replay)"
    );
}

/// The fuzz seeds under Helgrind against the `valgrind-annotations` build of the library (its
/// own target dir, so the normal build keeps plain std::sync). Strict (`HELGRIND_STRICT=1`, the
/// default): fails when a report has an `os_transport::` frame in an access stack.
fn reliability_helgrind(ctx: &mut Ctx, goal: &str) {
    let (built, rel) = reliability_bins(ctx, goal);
    let dir = ctx.target.join("helgrind");
    run(cargo_cmd()
        .args([
            "build",
            "-q",
            "-p",
            "os-transport",
            "--features",
            "valgrind-annotations",
        ])
        .env("CARGO_TARGET_DIR", &dir));
    let lib = dir.join("debug/libos_transport.so");
    let log_path = rel.join("helgrind.log");
    let log = std::fs::File::create(&log_path)
        .unwrap_or_else(|e| fail(format!("{}: {e}", log_path.display())));
    let mut cmd = Command::new(valgrind());
    cmd.args([
        "--tool=helgrind",
        "--suppressions=tests/reliability_c/helgrind.supp",
    ])
    .arg(rel.join("replay"))
    .arg("fuzz/seeds")
    .env("OST_FUZZ_LIB", &lib)
    .env("LD_LIBRARY_PATH", ctx.loader_path(&built, &[]))
    .stdout(log.try_clone().expect("dup log"))
    .stderr(log);
    // Helgrind's exit status is not the verdict: the report below is.
    let _ = try_run(&mut cmd);
    let text = std::fs::read_to_string(&log_path)
        .unwrap_or_else(|e| fail(format!("{}: {e}", log_path.display())));
    let r = crate::helgrind::parse(&text);
    println!(
        "{}",
        r.summary.as_deref().unwrap_or("helgrind: no ERROR SUMMARY")
    );
    if !r.finished {
        fail(format!(
            "helgrind: replay did not finish (see {})",
            log_path.display()
        ));
    }
    println!(
        "helgrind: {} error contexts left after suppressions, {} with an os_transport:: frame in \
         the access or conflicting stack (docs/reliability.md; log: {})",
        r.contexts,
        r.ours,
        log_path.display()
    );
    for (frame, n) in &r.race_frames {
        println!("{n:7} {frame}");
    }
    if env_or("HELGRIND_STRICT", "1") == "1" && r.ours != 0 {
        fail("helgrind: reports in the library (HELGRIND_STRICT=0 reports only)");
    }
}

/// The long variants of the reliability suites, in the release profile.
fn stress(ctx: &mut Ctx, goal: &str) {
    build(ctx, goal);
    let mut cmd = cargo_cmd();
    cmd.args(["build", "--release", "-p", "urma-loopback"]);
    cargo::build(cmd);
    run(cargo_cmd()
        .args([
            "test",
            "--release",
            "--test",
            "reliability_stress",
            "--",
            "--nocapture",
        ])
        .env("OST_STRESS_REQS", env_or("STRESS_REQS", "10000")));
    run(cargo_cmd()
        .args([
            "test",
            "--release",
            "--test",
            "reliability_fuzz_cr",
            "--",
            "--nocapture",
        ])
        .env("OST_FUZZ_CRS", env_or("STRESS_FUZZ_CRS", "10000000"))
        .env("OST_FUZZ_PAIRS", "50000"));
}

/// Coverage-guided fuzzing of the completion handling: the Rust cdylib rebuilt with sancov
/// instrumentation, debug assertions and panic=abort in `<target>/fuzz`, and fuzz/cr_fuzz.c
/// linked with libFuzzer; `smoke`: a short fixed run (part of `test`).
fn fuzz(ctx: &mut Ctx, goal: &str, smoke: bool) {
    let built = build(ctx, goal);
    let dir = ctx.target.join("fuzz");
    let triple = host_triple();
    let rustflags = [
        "-Cpasses=sancov-module",
        "-Cllvm-args=-sanitizer-coverage-level=3",
        "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
        "-Cllvm-args=-sanitizer-coverage-pc-table",
        "-Cllvm-args=-sanitizer-coverage-trace-compares",
        "-Cdebug-assertions=on",
        "-Cpanic=abort",
    ]
    .join(" ");
    run(cargo_cmd()
        .args([
            "build",
            "--release",
            "-p",
            "os-transport",
            "--lib",
            "--target",
            &triple,
        ])
        .arg("--target-dir")
        .arg(&dir)
        .env("RUSTFLAGS", rustflags));
    let lib = dir.join(&triple).join("release/libos_transport.so");
    let bin = dir.join("cr_fuzz");
    Build::urma_program(
        &ctx.repo,
        cprog::Flavour::Fuzzer,
        ctx.repo.join("fuzz/cr_fuzz.c"),
        &bin,
    )
    .define("OST_FUZZ_LIB_DEFAULT", format!("\"{}\"", lib.display()))
    .lib(Lib::Urma(built.loopback_dir.clone()))
    .run();
    let corpus = dir.join(if smoke { "smoke-corpus" } else { "corpus" });
    if smoke {
        let _ = std::fs::remove_dir_all(&corpus);
    }
    std::fs::create_dir_all(&corpus).unwrap_or_else(|e| fail(format!("{}: {e}", corpus.display())));
    let mut cmd = Command::new(&bin);
    cmd.env("ASAN_OPTIONS", "detect_leaks=0")
        .env("LD_LIBRARY_PATH", ctx.loader_path(&built, &[]));
    if smoke {
        cmd.arg(format!("-runs={}", env_or("FUZZ_SMOKE_RUNS", "20000")))
            .arg("-seed=9");
    } else {
        cmd.arg(format!("-max_total_time={}", env_or("FUZZ_TIME", "600")));
    }
    run(cmd
        .args(["-timeout=10", "-print_final_stats=1"])
        .arg(format!("-artifact_prefix={}/", dir.display()))
        .arg(&corpus)
        .arg("fuzz/seeds"));
}

/// The benchmark (release profile): `full` or `quick`. Exits non-zero only when a measurement
/// broke, never on a missed target.
fn bench(ctx: &mut Ctx, goal: &str, mode: &str) {
    ctx.deps(goal);
    let mut cmd = cargo_cmd();
    cmd.args([
        "build",
        "--release",
        "-p",
        "os-transport",
        "-p",
        "urma-loopback",
        "-p",
        "urma-loopback-preload",
    ])
    .args(["-p", "os-transport-bench"]);
    let built = cargo::build(cmd);
    if mode == "full"
        && try_run(Command::new("./packaging/deps.sh").args(["check", "bench"])).is_err()
    {
        println!("bench: without gnuplot the chart is skipped (make deps)");
    }
    let out = env_or("BENCH_OUT", &ctx.target.join("bench").display().to_string());
    let mut cmd = Command::new(built.executable("ostbench"));
    cmd.env("LD_LIBRARY_PATH", ctx.loader_path(&built, &[]));
    // The genuine URMA stack the cells over the genuine core run over (docs/bench.md, "Over the
    // genuine URMA core"): as given in the environment, else the one built here when UMDK or
    // UMDK_SRC is there; set here, they show in the echoed command line.
    const STACK: [&str; 3] = [
        "MLCD_UMDK_LIBDIR",
        "MLCD_UMDK_PRELOAD",
        "MLCD_UMDK_PERFTEST",
    ];
    let given: Vec<(&str, std::ffi::OsString)> = STACK
        .iter()
        .filter_map(|&var| Some((var, std::env::var_os(var).filter(|v| !v.is_empty())?)))
        .collect();
    let stack = if given.is_empty() {
        crate::umdk_lane::bench_env(ctx, &built)
    } else {
        given
    };
    for (var, v) in stack {
        cmd.env(var, v);
    }
    run(cmd
        .args([mode, "--out", &out])
        .args(env_or("BENCH_ARGS", "").split_whitespace()));
}

fn dist(ctx: &Ctx) {
    run(Command::new("./packaging/dist.sh").arg(ctx.target.join("rpm/SOURCES")));
}

/// `rpmbuild -ba openeuler.spec` from the sources of [`dist`] into `<target>/rpm`.
fn rpm(ctx: &mut Ctx, goal: &str) {
    if goal == "rpm-test" {
        // The rpm tools only (rpm-test.sh installs into a root of its own).
        ctx.deps(goal);
    }
    dist(ctx);
    let top = ctx.target.join("rpm");
    for d in ["RPMS", "SRPMS", "BUILD", "BUILDROOT"] {
        let _ = std::fs::remove_dir_all(top.join(d));
    }
    run(Command::new("./packaging/build-rpm.sh").arg(&top));
}

/// The install test packaging/rpm-test.sh of the RPMs [`rpm`] made. Its UMDK-host step runs the
/// installed packages over the genuine URMA core: the one `umdk::get` gives (the system's, or
/// built from `UMDK_SRC` into `<target>/umdk`), named in `RPM_TEST_UMDK_CORE`,
/// `RPM_TEST_UMDK_COMMON` and `RPM_TEST_URMA_SAMPLE`; without one the script says why it skips
/// that step (or fails, in CI). Its consumer-shaped probe takes the genuine UMDK headers of the
/// same UMDK: `RPM_TEST_UMDK_INCLUDE` (the system's) or `RPM_TEST_UMDK_SRC` (the source tree).
fn rpm_test(ctx: &Ctx) {
    let mut cmd = Command::new("./packaging/rpm-test.sh");
    cmd.env("TARGET_DIR", &ctx.target);
    match umdk::get(&ctx.target.join("umdk")) {
        Ok(core) => {
            cmd.env("RPM_TEST_UMDK_CORE", core.core())
                .env("RPM_TEST_UMDK_COMMON", core.common());
            if let Some(sample) = &core.sample {
                cmd.env("RPM_TEST_URMA_SAMPLE", sample);
            }
            match &core.origin {
                umdk::Origin::System(_) => cmd.env("RPM_TEST_UMDK_INCLUDE", "/usr/include"),
                umdk::Origin::Source(src) => cmd.env("RPM_TEST_UMDK_SRC", src),
            };
        }
        Err(why) => println!("rpm-test: {why}"),
    }
    run(&mut cmd);
}

/// `stage --dest DIR [cargo build args]`: `cargo build` with those arguments (the default
/// members), then `DIR/liburma.so.0` (the loopback) and `DIR/legacy/` (legacy-c's library of
/// that profile, with its SONAME links) as copies, and `DIR/libos_transport.a` with
/// `DIR/native-static-libs` (the static archive, built with the same arguments:
/// `ost_build_support::archive`). The packaging takes them from there: build scripts keep their
/// outputs in their OUT_DIR.
fn stage(args: &[String]) {
    let pos = args
        .iter()
        .position(|a| a == "--dest")
        .unwrap_or_else(|| fail("stage: --dest DIR is required"));
    let dest = PathBuf::from(
        args.get(pos + 1)
            .unwrap_or_else(|| fail("stage: --dest needs a directory")),
    );
    let cargo_args: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != pos && *i != pos + 1)
        .map(|(_, a)| a)
        .collect();
    let mut cmd = cargo_cmd();
    cmd.arg("build").args(&cargo_args);
    let built = cargo::build(cmd);
    let legacy_dir = built
        .legacy_dir
        .as_deref()
        .unwrap_or_else(|| fail("stage: the build did not build legacy-c"));
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to)
            .unwrap_or_else(|e| fail(format!("copy {} to {}: {e}", from.display(), to.display())));
    };
    let dest_legacy = dest.join("legacy");
    std::fs::create_dir_all(&dest_legacy)
        .unwrap_or_else(|e| fail(format!("{}: {e}", dest_legacy.display())));
    copy(
        &built.loopback_dir.join("liburma.so.0"),
        &dest.join("liburma.so.0"),
    );
    copy(
        &legacy_dir.join(legacy::REAL_NAME),
        &dest_legacy.join(legacy::REAL_NAME),
    );
    legacy::symlink_replace(legacy::REAL_NAME, &dest_legacy.join(legacy::SONAME));
    legacy::symlink_replace(legacy::SONAME, &dest_legacy.join(legacy::DEV_NAME));
    let archive = archive::build(cargo_cmd(), &cargo_args, None, &dest);
    println!(
        "stage: {} ({}, needs {})",
        dest.display(),
        archive.path.display(),
        archive.native_libs.join(" ")
    );
}

/// cargo with the aarch64 target (the runner and linker of .cargo/config.toml).
fn a64() -> Command {
    let mut c = cargo_cmd();
    c.args(["--config", &format!("build.target=\"{AARCH64}\"")]);
    c
}

/// The workspace cross-built for aarch64; its tests and the conformance catalogue under qemu
/// (natively on an aarch64 host).
fn test_aarch64(ctx: &mut Ctx, goal: &str) {
    ctx.deps(goal);
    run(a64().args(["build", "--workspace", "--all-targets"]));
    run(security_required(a64().args([
        "test",
        "--workspace",
        "--no-fail-fast",
    ])));
    run(a64()
        .args(["run", "-q", "-p", "compat-tests", "--bin", "compat", "--"])
        .args(compat_args(&[])));
}

/// The packages of [`AARCH64_QUICK_TESTS`], built first: the cdylibs and the harness those
/// tests start or load (the loopback, the layer, both libraries, `compat`).
const AARCH64_QUICK_PACKAGES: &[&str] = &[
    "urma-sys",
    "urma-loopback",
    "urma-interpose",
    "os-transport-legacy",
    "os-transport",
    "compat-tests",
    "os-transport-inject",
];

/// The aarch64 test binaries of the quick part, with the arguments given to each (a filter when
/// only some of its tests run): every one that starts a process (a C program it compiles,
/// itself, `compat`, `make`, a host tool), and every one that hands the library `user_ctx`
/// values that are addresses (the C consumer's pointer; behaviour's wake-up return table, whose
/// pointer rows are fixed values of both address-space sizes). Under qemu a child started
/// without the target runner, or an expectation taken from where the platform maps memory,
/// fails only there. Left to `test-aarch64`, for time: the rest of behaviour (about 80 s under
/// qemu; nothing there starts a process or uses an address as a value) and split_nodes' two full
/// `compat --split` runs (about 45 s; its driver-gone test starts a receiver on the serving node
/// the same way). Not here as they skip themselves under emulation: interpose_verdicts (two
/// harness runs) and genuine_core (builds the URMA core with the host's cmake). The other test
/// binaries run in-process code that is the same on both architectures.
const AARCH64_QUICK_TESTS: &[(&str, &[&str])] = &[
    ("abi_layout", &["--nocapture"]),
    ("provider_abi", &[]),
    ("link_stub", &[]),
    ("header", &[]),
    ("c_program", &[]),
    ("xproc", &[]),
    ("security", &[]),
    ("interpose", &[]),
    ("c_smoke", &[]),
    ("c_consumer", &[]),
    ("abi_drift", &[]),
    ("symbols", &[]),
    // The archive with the aarch64 binutils: its symbols, a C program under qemu, a shared
    // library (no aarch64 C++ compiler, nor the 1.82 toolchain's aarch64 std, for the others).
    (
        "static_archive",
        &[
            "only_the_ten_functions_are_global",
            "a_c_program_links_it_after_ranlib",
            "a_shared_library_without_version_script",
        ],
    ),
    ("split_nodes", &["--skip", "two_invocations_judge_as_one"]),
    ("behaviour", &["wake_up_task_return_table"]),
    // The inject registry's bytes in /dev/shm at the spec's offsets (docs/inject.md).
    ("registry", &[]),
];

/// What differs on aarch64 (part of `test`): [`AARCH64_QUICK_TESTS`] and the library's unit
/// tests, cross-built and run under qemu.
fn test_aarch64_quick(ctx: &mut Ctx, goal: &str) {
    ctx.deps(goal);
    // `cargo <sub> -p <each package>`.
    let on_packages = |sub: &[&str]| {
        let mut c = a64();
        c.args(sub);
        for p in AARCH64_QUICK_PACKAGES {
            c.args(["-p", p]);
        }
        c
    };
    run(&mut on_packages(&["build"]));
    run(a64().args([
        "test",
        "--no-fail-fast",
        "-p",
        "os-transport",
        "-p",
        "ranked-lock",
        "--lib",
    ]));
    // One cargo run for the binaries taking no arguments, one for each of the others.
    let mut all = on_packages(&["test", "--no-fail-fast"]);
    for (t, args) in AARCH64_QUICK_TESTS {
        if args.is_empty() {
            all.args(["--test", t]);
        }
    }
    run(security_required(&mut all));
    for (t, args) in AARCH64_QUICK_TESTS.iter().filter(|(_, a)| !a.is_empty()) {
        run(on_packages(&["test", "--no-fail-fast", "--test", t])
            .arg("--")
            .args(*args));
    }
}

/// Build and test with Rust 1.82 and the locked dependencies, in `<target>/msrv`. The bindings
/// freshness test formats bindgen's output with the default toolchain's rustfmt (the minimal
/// 1.82 toolchain has none; formatting is not a property of the minimum Rust version).
fn msrv(ctx: &mut Ctx, goal: &str) {
    ctx.deps(goal);
    let dir = ctx.target.join("msrv");
    let toolchain = format!("+{MSRV}");
    run(cargo_cmd()
        .args([
            toolchain.as_str(),
            "build",
            "--locked",
            "--workspace",
            "--all-targets",
        ])
        .arg("--target-dir")
        .arg(&dir));
    let rustfmt = Command::new("rustup")
        .args(["which", "rustfmt"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| fail("msrv: rustup which rustfmt failed"));
    run(cargo_cmd()
        .args([
            toolchain.as_str(),
            "test",
            "--locked",
            "--workspace",
            "--no-fail-fast",
        ])
        .arg("--target-dir")
        .arg(&dir)
        .env("RUSTFMT", rustfmt));
}

/// No module file of a crate in an import circle (the crates of `imports::REPORT_ONLY` are
/// printed, not enforced).
fn imports(ctx: &Ctx) {
    if let Err(e) = crate::imports::check(&ctx.repo) {
        fail(e);
    }
}

fn lint(ctx: &Ctx) {
    // Cargo.lock matches the manifests.
    run(cargo_cmd()
        .args(["metadata", "--locked", "--format-version", "1"])
        .stdout(std::process::Stdio::null()));
    imports(ctx);
    run(cargo_cmd().args(["fmt", "--all", "--", "--check"]));
    run(cargo_cmd().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]));
    // The loopback's plugin face is built on its own (docs/loopback.md, "The two faces"), so the
    // workspace run above never compiles src/plugin.rs.
    run(cargo_cmd()
        .args(["clippy", "-p", "urma-loopback", "--features", "plugin"])
        .arg("--target-dir")
        .arg(ctx.target.join("xtask/plugin"))
        .args(["--", "-D", "warnings"]));
    // Likewise the library's inject flavour (docs/inject.md), in the target directory the tests
    // build it in: src/inject/ffi.rs is compiled only with the feature.
    run(cargo_cmd()
        .args(["clippy", "-p", "os-transport", "--features", "inject"])
        .arg("--target-dir")
        .arg(ctx.target.join("inject"))
        .args(["--", "-D", "warnings"]));
}
