//! The reliability goals: the ASan suite, memcheck, Helgrind, stress and the libFuzzer runs.

use super::common::{build, host_triple, urma_inputs};
use crate::cargo::{self, Built};
use crate::cmd::{cargo as cargo_cmd, env_or, fail, run, try_run};
use crate::ctx::Ctx;
use ost_build_support::cprog::{self, Build, Compiler, Lib};
use ost_build_support::legacy::{self, Flavour};
use std::path::PathBuf;
use std::process::Command;

/// compat-tests' `case_legacy` tests against the ASan/UBSan flavour of legacy-c (built here by
/// the one legacy build function, into `<target>/xtask/legacy-asan`), through
/// legacy-c/tests/asan_suite.sh.
pub(super) fn legacy_asan_suite(ctx: &mut Ctx, goal: &str) {
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
pub(super) fn reliability_bins(ctx: &mut Ctx, goal: &str) -> (Built, PathBuf) {
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

pub(super) fn valgrind() -> String {
    env_or("VALGRIND", "valgrind")
}

/// The C consumer (both modes) and the fuzz seeds under memcheck: fails on any error or any
/// byte definitely or indirectly lost.
pub(super) fn reliability_memcheck(ctx: &mut Ctx, goal: &str) {
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
pub(super) fn reliability_helgrind(ctx: &mut Ctx, goal: &str) {
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
pub(super) fn stress(ctx: &mut Ctx, goal: &str) {
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

/// rustc's SanitizerCoverage on stable Rust (1.82 and later): edge coverage with inline 8-bit
/// counters and a PC table, whose module constructors call `__sanitizer_cov_8bit_counters_init`
/// and `__sanitizer_cov_pcs_init`.
const SANCOV: &str = "-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=3 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table";

/// The differential fuzzer (`make fuzz-compat`, docs/compat.md "Differential fuzzing"): the Rust
/// library, the loopback and `fuzz-compat` built with [`SANCOV`] in `<target>/fuzz-compat`
/// (`--target <host>`, so the flags reach neither build scripts nor proc macros), legacy-c's
/// fuzz flavour built by clang beside them, then `fuzz-compat` over both libraries. `smoke`: the
/// checked-in seeds and `FUZZ_COMPAT_RUNS` (default 12) mutations with seed 1, failing on any
/// finding or when either library's counters never move (part of `test`); otherwise
/// `FUZZ_TIME` seconds (default 600) into a kept corpus, `FUZZ_COMPAT_BASELINE=1` first
/// measures what `make compat` reaches. Every edge reached goes to `edges.txt` (the baseline's to
/// `baseline-edges.txt`) beside the corpus.
pub(super) fn fuzz_compat(ctx: &mut Ctx, goal: &str, smoke: bool) {
    let built = build(ctx, goal);
    let dir = ctx.target.join("fuzz-compat");
    let triple = host_triple();
    let mut cmd = cargo_cmd();
    cmd.args([
        "build",
        "-p",
        "os-transport",
        "--lib",
        "-p",
        "urma-loopback",
    ])
    .args([
        "-p",
        "compat-tests",
        "--bin",
        "fuzz-compat",
        "--target",
        &triple,
    ])
    .arg("--target-dir")
    .arg(&dir)
    .env(
        "RUSTFLAGS",
        SANCOV.split_whitespace().collect::<Vec<_>>().join(" "),
    );
    let fz = cargo::build(cmd);
    let mut cc = ost_build_support::compiler_for(Some(&triple));
    cc.compiler(env_or("CLANG", "clang"));
    let legacy = legacy::build(&cc, Flavour::Fuzz, &urma_inputs(ctx, &built), &dir);
    let out = if smoke {
        let out = dir.join("smoke");
        let _ = std::fs::remove_dir_all(&out);
        out
    } else {
        dir.clone()
    };
    let mut cmd = Command::new(fz.executable("fuzz-compat"));
    cmd.env("LD_LIBRARY_PATH", ctx.loader_path(&fz, &[]))
        .arg("--rust-lib")
        .arg(fz.cdylib("os-transport"))
        .arg("--legacy-lib")
        .arg(legacy.join(legacy::SONAME));
    if !smoke && env_or("FUZZ_COMPAT_BASELINE", "0") == "1" {
        let mut b = Command::new(fz.executable("fuzz-compat"));
        b.envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .args(cmd.get_args())
            .arg("--edges")
            .arg(out.join("baseline-edges.txt"))
            .arg("--baseline");
        run(&mut b);
    }
    cmd.arg("--seeds")
        .arg(ctx.repo.join("compat-tests/fuzz/seeds"))
        .arg("--corpus")
        .arg(out.join("corpus"))
        .arg("--findings")
        .arg(out.join("findings"))
        .arg("--edges")
        .arg(out.join("edges.txt"));
    if smoke {
        cmd.args(["--smoke", "--seed", "1", "--runs"])
            .arg(env_or("FUZZ_COMPAT_RUNS", "12"));
    } else {
        cmd.arg("--time").arg(env_or("FUZZ_TIME", "600"));
    }
    run(&mut cmd);
}

/// Coverage-guided fuzzing of the completion handling: the Rust cdylib rebuilt with sancov
/// instrumentation, debug assertions and panic=abort in `<target>/fuzz`, and fuzz/cr_fuzz.c
/// linked with libFuzzer; `smoke`: a short fixed run (part of `test`).
pub(super) fn fuzz(ctx: &mut Ctx, goal: &str, smoke: bool) {
    let built = build(ctx, goal);
    let dir = ctx.target.join("fuzz");
    let triple = host_triple();
    let rustflags = [
        SANCOV,
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
