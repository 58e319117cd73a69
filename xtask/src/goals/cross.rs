//! The aarch64 goals (cross-built, under qemu) and the minimum Rust (`msrv`).

use super::common::MSRV;
use super::common::{a64, compat_args};
use crate::cmd::{cargo as cargo_cmd, fail, run, security_required};
use crate::ctx::Ctx;
use std::process::Command;

/// The workspace cross-built for aarch64; its tests and the conformance catalogue under qemu
/// (natively on an aarch64 host).
pub(super) fn test_aarch64(ctx: &mut Ctx, goal: &str) {
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
pub(super) const AARCH64_QUICK_PACKAGES: &[&str] = &[
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
pub(super) const AARCH64_QUICK_TESTS: &[(&str, &[&str])] = &[
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
    // The consumer-shaped fault suite on both inject flavours, built for aarch64 (the Rust one
    // by the test, into <target>/aarch64-unknown-linux-gnu/inject): about 22 s under qemu.
    ("fault_suite", &[]),
];

/// What differs on aarch64 (part of `test`): [`AARCH64_QUICK_TESTS`] and the library's unit
/// tests, cross-built and run under qemu.
pub(super) fn test_aarch64_quick(ctx: &mut Ctx, goal: &str) {
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
pub(super) fn msrv(ctx: &mut Ctx, goal: &str) {
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
