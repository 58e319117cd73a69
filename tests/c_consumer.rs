//! The drop-in claim, end to end: `tests/c/consumer.c`, an ordinary C application of
//! `libos_transport.so.1`, is compiled once (`testkit::cprog`, with the `cc` crate's compiler for
//! the target) against `include/os_transport.h` and the bundled URMA header, linked with
//! `-los_transport -l:liburma.so.0` against the Rust cdylib, and then the **same binary** is run
//! twice over the loopback `liburma.so.0`: with the Rust library first on `LD_LIBRARY_PATH`, and
//! with the legacy C library (legacy-c's build) first. Both runs must pass every check of the
//! program.
mod common;

use common::{repo, run, rust_lib, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use testkit::cprog::{Build, Compiler, Flavour, Lib};

/// The directory of the C reference library (`$LEGACY_LIB`, else legacy-c's build).
fn legacy_dir() -> PathBuf {
    compat_tests::lib_under_test::legacy_lib_path()
        .parent()
        .expect("the legacy library has a directory")
        .to_path_buf()
}

/// The directory of the loopback `liburma.so.0` on the loader path.
fn loopback_dir() -> PathBuf {
    compat_tests::target::loopback_dir()
        .expect("no loopback liburma.so.0 on LD_LIBRARY_PATH (run through cargo test)")
}

/// A directory holding `libos_transport.so` (link time) and `libos_transport.so.1` (the SONAME,
/// run time), both pointing at the Rust cdylib, as an installed package would.
fn rust_install_dir(root: &Path) -> PathBuf {
    let d = root.join("rust-lib");
    std::fs::create_dir_all(&d).expect("mkdir");
    for name in ["libos_transport.so", "libos_transport.so.1"] {
        let l = d.join(name);
        let _ = std::fs::remove_file(&l);
        std::os::unix::fs::symlink(rust_lib(), &l).expect("symlink");
    }
    d
}

fn compile(root: &Path, rust_dir: &Path) -> PathBuf {
    Build::urma_program(
        &repo(),
        Flavour::Plain,
        repo().join("tests/c/consumer.c"),
        root.join("consumer"),
    )
    .compiler(Compiler::Triple(env!("OST_BUILD_TARGET").to_string()))
    .lib(Lib::OsTransport(rust_dir.to_path_buf()))
    .lib(Lib::Urma(loopback_dir()))
    .run()
}

/// Runs `exe args` with the library in `first` ahead of the loopback; it must exit 0 and print
/// `ok_marker`. Returns its output.
fn run_with(
    exe: &Path,
    first: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    ok_marker: &str,
) -> String {
    let path = format!("{}:{}", first.display(), loopback_dir().display());
    let out = compat_tests::target::command(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", path)
        .env_remove("OST_LOG_FILE_PATH")
        .envs(env.iter().copied())
        .output()
        .expect("run consumer");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains(ok_marker),
        "consumer {args:?} with {} first failed ({}):\n{text}",
        first.display(),
        out.status
    );
    text
}

/// Checks the prerequisites and builds the program once: `(scratch root, Rust library dir,
/// legacy library dir, executable)`.
fn prepare(name: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    loopback_dir();
    let legacy = legacy_dir();
    assert!(
        legacy.join("libos_transport.so.1").exists(),
        "legacy library not built in {} (build the workspace: cargo build --workspace)",
        legacy.display()
    );
    let root = scratch(name);
    let rust_dir = rust_install_dir(&root);
    let exe = compile(&root, &rust_dir);
    (root, rust_dir, legacy, exe)
}

#[test]
fn same_c_binary_runs_against_rust_and_legacy() {
    let (root, rust_dir, legacy, exe) = prepare("c-consumer");

    // The binary depends on the SONAMEs only, never on a path.
    let dynamic = run(Command::new("readelf").arg("-d").arg(&exe));
    assert!(
        dynamic.contains("[libos_transport.so.1]") && dynamic.contains("[liburma.so.0]"),
        "{dynamic}"
    );
    assert!(!dynamic.contains("RPATH") && !dynamic.contains("RUNPATH"));

    let with_rust = run_with(&exe, &rust_dir, &[], &[], "consumer ok: ");
    assert!(
        with_rust.contains(&rust_dir.join("libos_transport.so.1").display().to_string()),
        "the Rust library was not the one loaded: {with_rust}"
    );
    let with_legacy = run_with(&exe, &legacy, &[], &[], "consumer ok: ");
    assert!(
        with_legacy.contains(&legacy.join("libos_transport.so.1").display().to_string()),
        "the legacy library was not the one loaded: {with_legacy}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// The usage pattern of a real cache client (`consumer pattern`, see `tests/c/consumer.c`): one
/// poller handing every CR of one shared JFC to `os_transport_wake_up_task` (its own plain
/// WRITE/READ completions must get -1), 64 workers, request ids from one shared counter, 100 000
/// gets (10 000 under emulation) whose receive syncs are never collected (none may be refused), callbacks that cancel their
/// own request or block for a second, waits with short deadlines, then destroy. Same binary on
/// both libraries, over the loopback's no-copy mode (transfers move no bytes). The growth of the
/// resident set per uncollected get is printed and bounded: for the Rust library by twice the
/// documented cost of a sync kept uncollected, for legacy by 2 KiB (it leaks the sync, its tasks
/// and its chunk records, about 1.2 KB a get in this build).
#[test]
fn consumer_pattern_with_uncollected_receive_syncs() {
    let (root, rust_dir, legacy, exe) = prepare("c-consumer-pattern");
    // Under qemu (the aarch64 part of `make test`) every instruction is emulated: the pattern
    // runs with a tenth of the gets there, and without the memory bounds, which hold per get
    // only once the table's segment growth (4096 slots at a time) is spread over many gets;
    // natively (and on an aarch64 host) with all 100 000 gets and both bounds.
    let emulated = compat_tests::target::emulated();
    let default_gets = if emulated { "10000" } else { "100000" };
    let gets = std::env::var("OST_CONSUMER_GETS").unwrap_or_else(|_| default_gets.into());
    let nocopy = [("URMA_LOOPBACK_KNOBS", "nocopy=1")];
    let rust_bound = (2 * os_transport::testing::SLOT_BYTES).to_string();
    let bounds = if emulated {
        ["0", "0"] // 0: the consumer reports the growth without checking it
    } else {
        [rust_bound.as_str(), "2048"]
    };
    for (dir, bound) in [(&rust_dir, bounds[0]), (&legacy, bounds[1])] {
        let t = std::time::Instant::now();
        let out = run_with(
            &exe,
            dir,
            &["pattern", &gets, bound],
            &nocopy,
            "consumer pattern ok: ",
        );
        assert!(
            out.contains(&dir.join("libos_transport.so.1").display().to_string()),
            "not the library in {}: {out}",
            dir.display()
        );
        eprintln!(
            "{} [{:.1} s]",
            out.lines().next().unwrap_or(""),
            t.elapsed().as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
