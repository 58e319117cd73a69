//! Builds the C programs of tests/c (smoke.c; fork.c, the DMA engine after fork) and the
//! repository's two-process pair (tests/c/urma_pair.c), each with the repository's shared C URMA
//! fixture (tests/c/urma_fixture.c), against urma-sys's bundled header and the loopback header,
//! with `testkit::cprog`; links them against the loopback `liburma.so.0` on the loader path and
//! runs them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ost_supervise::{spawn, Capture};
use testkit::cprog::{Build, Flavour, Lib};
use testkit::{repo, target};

/// Compiles `src` (a C program) with the C URMA fixture against the bundled and loopback
/// headers, links it with the loopback `liburma.so.0` and returns the executable.
fn build(src: &Path, name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("loopback-c-{name}"));
    let lib_dir = target::loopback_dir()
        .expect("no loopback liburma.so.0 on LD_LIBRARY_PATH (run through cargo test)");
    Build::urma_program(&repo(), Flavour::Plain, src, out)
        .lib(Lib::Urma(lib_dir))
        .run()
}

/// Builds `tests/c/<name>.c` of this crate, runs it and returns its stdout + stderr after
/// asserting it exited with 0.
fn build_and_run(name: &str) -> String {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = build(&manifest.join(format!("tests/c/{name}.c")), name);
    // Inherits LD_LIBRARY_PATH: cargo puts the loopback's liburma.so.0 on it (build.rs).
    let o = target::command(&out).output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    text
}

#[test]
fn c_program_links_and_runs_against_the_loopback() {
    let text = build_and_run("smoke");
    assert!(text.contains("c-smoke ok"), "{text}");
}

#[test]
fn a_forked_child_posts_on_inherited_objects_with_an_engine_of_its_own() {
    let text = build_and_run("fork");
    assert!(text.contains("c-fork ok"), "{text}");
}

/// The pair of tests/c/urma_pair.c in `mode`: the server prints its port, the client connects;
/// both must exit 0 having checked the transfer. A failed assertion leaves no process behind
/// (`ost_supervise` kills a dropped child).
fn run_pair(mode: &str) {
    // One executable per test: the tests run in parallel, and a program being written cannot
    // be started ("text file busy").
    let exe = build(
        &repo().join("tests/c/urma_pair.c"),
        &format!("urma_pair-{mode}"),
    );
    let start = |name: &str, args: &[&str]| {
        let mut cmd = target::command(&exe);
        cmd.args(args);
        spawn(name, &mut cmd, Capture::Pipes).expect("start a pair process")
    };
    let server = start("server", &["server", mode]);
    let mut seen = Vec::new();
    let port = server
        .expect("port ", Duration::from_secs(30), &mut seen)
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("server did not print its port: {seen:?}"));
    let client = start("client", &["client", mode, &port.to_string()]);
    let (c, s) = (
        client.finish(Duration::from_secs(30)),
        server.finish(Duration::from_secs(30)),
    );
    let (ctext, stext) = (c.output(), s.output());
    assert!(
        c.success() && s.success(),
        "client ({:?}):\n{ctext}\nserver ({:?}):\n{stext}",
        c.status,
        s.status
    );
    assert!(
        ctext.contains(&format!("urma-pair client {mode} ok")),
        "{ctext}"
    );
    assert!(
        stext.contains(&format!("urma-pair server {mode} ok")),
        "{stext}"
    );
}

#[test]
fn a_program_pair_writes_and_sends_an_immediate_across_processes_in_poll_mode() {
    run_pair("poll");
}

#[test]
fn a_program_pair_writes_and_sends_an_immediate_across_processes_in_event_mode() {
    run_pair("event");
}
