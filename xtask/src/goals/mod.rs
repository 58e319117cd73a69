//! The goals, in one table ([`GOALS`]: name, system packages, help, function). Knobs come from the environment, so `make GOAL VAR=value`
//! and `VAR=value cargo xtask GOAL` are the same: COMPAT_ARGS, COMPAT_DEVICE_RANDOM, BENCH_ARGS, BENCH_OUT,
//! HELGRIND_STRICT, STRESS_REQS, STRESS_FUZZ_CRS, FUZZ_TIME, FUZZ_SMOKE_RUNS, FUZZ_COMPAT_RUNS, FUZZ_COMPAT_BASELINE, CLANG, REL_CC,
//! VALGRIND, RPMBUILD_OPTS, DIST_TREE, UMDK_SRC, UMDK_LAT_ITERS, UMDK_BW_ITERS.

mod common;
mod compat;
mod cross;
mod lint;
mod package;
mod reliability;

use crate::cmd::{cargo as cargo_cmd, run, security_required};
use crate::ctx::Ctx;
use common::{build, compat_args, report_files, REPORT_TOOLS_REQUIRED};
use compat::{compat, compat_device, ledger, loopback_in_process_only};
use cross::{msrv, test_aarch64, test_aarch64_quick};
use lint::{imports, lint};
use package::{bench, dist, rpm, rpm_test, stage};
use reliability::{
    fuzz, fuzz_compat, legacy_asan_suite, reliability_helgrind, reliability_memcheck, stress,
};
use std::process::Command;

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
        name: "fuzz-compat",
        deps: "base fuzz",
        help: "differential C-vs-Rust fuzzer, coverage-guided, FUZZ_TIME seconds (default 600; \
         FUZZ_COMPAT_BASELINE=1: first what make compat reaches); findings in target/fuzz-compat/findings",
        run: |ctx, goal, _args| {
            fuzz_compat(ctx, goal, false);
        },
    },
    Goal {
        name: "fuzz-compat-smoke",
        deps: "base fuzz",
        help: "the differential fuzzer on its checked-in seeds and FUZZ_COMPAT_RUNS mutations (default 12)",
        run: |ctx, goal, _args| {
            fuzz_compat(ctx, goal, true);
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
    fuzz_compat(ctx, "test", true);
    bench(ctx, "test", "quick");
    rpm(ctx, "test");
    rpm_test(ctx);
    test_aarch64_quick(ctx, "test");
}
