//! The packaging and benchmark goals: `bench`, `dist`, `rpm`, `rpm-test`, `stage`.

use crate::cargo::{self};
use crate::cmd::{cargo as cargo_cmd, env_or, fail, run, try_run};
use crate::ctx::Ctx;
use ost_build_support::archive;
use ost_build_support::legacy::{self};
use ost_build_support::umdk;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The benchmark (release profile): `full` or `quick`. Exits non-zero only when a measurement
/// broke, never on a missed target.
pub(super) fn bench(ctx: &mut Ctx, goal: &str, mode: &str) {
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

pub(super) fn dist(ctx: &Ctx) {
    run(Command::new("./packaging/dist.sh").arg(ctx.target.join("rpm/SOURCES")));
}

/// `rpmbuild -ba openeuler.spec` from the sources of [`dist`] into `<target>/rpm`.
pub(super) fn rpm(ctx: &mut Ctx, goal: &str) {
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
pub(super) fn rpm_test(ctx: &Ctx) {
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
/// members), then `DIR/liburma.so.0` (the loopback), `DIR/legacy/` and `DIR/legacy-inject/`
/// (legacy-c's library of that profile and its inject flavour, each with its SONAME links) as
/// copies, `DIR/libos_transport.a` with `DIR/native-static-libs` (the static archive, built with
/// the same arguments: `ost_build_support::archive`) and the same two of the inject flavour in
/// `DIR/inject/`. The packaging takes them from there: build scripts keep their outputs in their
/// OUT_DIR.
pub(super) fn stage(args: &[String]) {
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
    std::fs::create_dir_all(&dest).unwrap_or_else(|e| fail(format!("{}: {e}", dest.display())));
    copy(
        &built.loopback_dir.join("liburma.so.0"),
        &dest.join("liburma.so.0"),
    );
    // legacy-c's build script builds each flavour into a directory of its own beside `legacy/`.
    for flavour in [legacy::Flavour::Profile, legacy::Flavour::Inject] {
        let from = legacy_dir.with_file_name(flavour.dir_name());
        let to = dest.join(flavour.dir_name());
        std::fs::create_dir_all(&to).unwrap_or_else(|e| fail(format!("{}: {e}", to.display())));
        copy(&from.join(legacy::REAL_NAME), &to.join(legacy::REAL_NAME));
        legacy::symlink_replace(legacy::REAL_NAME, &to.join(legacy::SONAME));
        legacy::symlink_replace(legacy::SONAME, &to.join(legacy::DEV_NAME));
    }
    let archive = archive::build(
        cargo_cmd(),
        &cargo_args,
        None,
        archive::Flavour::Default,
        &dest,
    );
    let inject = archive::build(
        cargo_cmd(),
        &cargo_args,
        None,
        archive::Flavour::Inject,
        &dest.join("inject"),
    );
    for a in [&archive, &inject] {
        println!(
            "stage: {} (needs {})",
            a.path.display(),
            a.native_libs.join(" ")
        );
    }
}
