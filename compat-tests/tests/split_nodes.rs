//! `compat --split` across two nodes: `--serve HOST:PORT` (the receivers' node) and
//! `--peer HOST:PORT` (the driver) as two separate invocations on 127.0.0.1, with the
//! interposition layer in front of the loopback (`--interpose`), must judge every scenario as
//! the one-command `compat --split --interpose` does; and each way a two-node run can go wrong
//! (a bad address, a node that never comes, two ends that differ, a node that goes away
//! mid-run) ends with a clear error in bounded time. Needs the layer built
//! (`cargo build -p urma-interpose`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use compat_tests::lib_under_test::target_dir;
use compat_tests::target;
use serde_json::Value;

const SCENARIOS: [&str; 2] = ["len-1", "len-6m+5"];

fn compat() -> Command {
    target::command(env!("CARGO_BIN_EXE_compat"))
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let d = target_dir().join("compat-split-nodes").join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `c` and asserts that it ends with status `code` and says `msg`.
fn expect_error(c: &mut Command, code: i32, msg: &str) -> Output {
    let o = c.output().expect("run compat");
    assert_eq!(o.status.code(), Some(code), "{}", text(&o));
    assert!(text(&o).contains(msg), "wanted {msg:?}:\n{}", text(&o));
    o
}

/// A free port on 127.0.0.1 (bound and released: nothing listens on it afterwards).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A serving node (`compat --split [extra] --serve <free port>`) started in the background:
/// (its process, its address).
fn start_serving(extra: &[&str], out: &str) -> (std::process::Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let child = compat()
        .arg("--split")
        .args(extra)
        .args(["--serve", &addr, "--out"])
        .arg(out_dir(out))
        .env("COMPAT_PEER_WAIT", "60")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the serving node");
    (child, addr)
}

/// A connection to the serving node at `addr`, once it listens (at most 30 s).
fn connect(addr: &str) -> std::net::TcpStream {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if Instant::now() > end => panic!("the serving node never listened: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn verdicts(out: &Path) -> (BTreeMap<String, String>, Value) {
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report-split.json")).expect("report-split.json"),
    )
    .expect("report-split.json is JSON");
    let v = compat_tests::harness::driver::verdicts_of(&report);
    (v, report)
}

fn with_scenarios(c: &mut Command) -> &mut Command {
    for s in SCENARIOS {
        c.args(["--scenario", s]);
    }
    // Run with the receiver on this node, skipped with the receiver on the other.
    c.args(["--scenario", "peer-death"])
}

#[test]
fn two_invocations_judge_as_one() {
    let one = out_dir("one");
    let o = with_scenarios(compat().args(["--split", "--interpose", "--out"]).arg(&one))
        .output()
        .expect("run compat");
    assert!(
        o.status.success(),
        "compat --split --interpose:\n{}",
        text(&o)
    );
    let (want, one_report) = verdicts(&one);
    assert_eq!(want.len(), SCENARIOS.len(), "{want:?}");
    assert_eq!(one_report["totals"]["peer_death_ok"], 2, "{one_report}");

    let (serve, addr) = start_serving(&["--interpose"], "serve");
    let two = out_dir("two");
    let o = with_scenarios(
        compat()
            .args(["--split", "--interpose", "--peer", &addr, "--out"])
            .arg(&two)
            .env("COMPAT_PEER_WAIT", "60"),
    )
    .output()
    .expect("run the driver");
    let s = serve.wait_with_output().expect("serving node");
    assert!(
        o.status.success(),
        "driver:\n{}\nserving node:\n{}",
        text(&o),
        text(&s)
    );
    assert!(s.status.success(), "serving node:\n{}", text(&s));
    assert!(
        String::from_utf8_lossy(&s.stdout)
            .contains(&format!("done after {} runs", 2 * SCENARIOS.len())),
        "{}",
        text(&s)
    );
    let (got, report) = verdicts(&two);
    assert_eq!(got, want, "two nodes vs one command");
    assert_eq!(report["nodes"], 2);
    assert_eq!(report["backend"], "interpose");
    assert_eq!(report["totals"]["fail"], 0);
    assert!(
        report["skipped"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("peer-death: ")),
        "{report}"
    );
}

#[test]
fn a_bad_address_is_a_usage_error() {
    for role in ["--peer", "--serve"] {
        expect_error(
            compat()
                .args(["--split", role, "no-such-host.invalid:x", "--out"])
                .arg(out_dir("bad")),
            2,
            "is not a HOST:PORT address",
        );
    }
    expect_error(
        compat().args(["--peer", "127.0.0.1:1"]),
        2,
        "--serve and --peer are the two nodes of --split",
    );
}

#[test]
fn a_node_that_never_comes_ends_the_wait() {
    let t = Instant::now();
    for (role, msg) in [
        ("--peer", "no serving node answered"),
        ("--serve", "no driver connected"),
    ] {
        expect_error(
            compat()
                .args(["--split", role, &format!("127.0.0.1:{}", free_port())])
                .arg("--out")
                .arg(out_dir(&format!("never{role}")))
                .env("COMPAT_PEER_WAIT", "1"),
            2,
            msg,
        );
    }
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

/// A stand-in serving node: answers the driver's hello through `answer` and then hangs up at
/// its first request.
fn fake_node(answer: fn(Value) -> Value) -> (String, std::thread::JoinHandle<Option<Value>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().ok()?;
        s.set_read_timeout(Some(Duration::from_secs(60))).ok()?;
        let mut w = s.try_clone().ok()?;
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let hello: Value = serde_json::from_str(&line).ok()?;
        writeln!(w, "{}", answer(hello)).ok()?;
        line.clear();
        r.read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    });
    (addr, h)
}

#[test]
fn two_ends_that_differ_refuse_each_other() {
    // The driver, told of another catalogue.
    let (addr, node) = fake_node(|mut h| {
        h["catalogue"] = Value::from("0000000000000000");
        h
    });
    expect_error(
        compat()
            .args(["--split", "--peer", &addr, "--out"])
            .arg(out_dir("differ-driver")),
        2,
        "the two ends differ: two-process catalogue",
    );
    let _ = node.join();
    // The serving node, greeted by another version.
    let (serve, addr) = start_serving(&[], "differ-serve");
    let s = connect(&addr);
    let mut w = s.try_clone().expect("clone");
    let hello = serde_json::json!({"hello": 1, "version": "0.0.0", "catalogue": "x", "backend": "loopback"});
    writeln!(w, "{hello}").expect("hello");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).expect("answer");
    let answer: Value = serde_json::from_str(&line).expect("JSON answer");
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("compat version")),
        "{answer}"
    );
    let o = serve.wait_with_output().expect("serving node");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("differs from this end"), "{}", text(&o));
}

#[test]
fn a_node_that_goes_away_mid_run_fails_the_run_and_keeps_the_report() {
    let (addr, node) = fake_node(|h| h);
    let out = out_dir("gone");
    let t = Instant::now();
    let o = compat()
        .args(["--split", "--peer", &addr, "--scenario", "len-1", "--out"])
        .arg(&out)
        .output()
        .expect("run compat");
    let req = node.join().expect("fake node");
    assert_eq!(
        req.as_ref().and_then(|r| r["recv"].as_str()),
        Some("len-1"),
        "{req:?}"
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    let (_, report) = verdicts(&out);
    assert!(
        report["serving_node"]
            .as_str()
            .is_some_and(|s| s.contains("broke mid-run")),
        "{report}"
    );
    assert!(
        report["not_run"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("len-1: ") && s.contains("is gone")),
        "{report}"
    );
}

#[test]
fn a_driver_that_goes_away_mid_run_ends_the_serving_node() {
    use compat_tests::harness::split::{node, Mode};
    let t = Instant::now();
    let (serve, addr) = start_serving(&[], "driver-gone");
    let s = connect(&addr);
    {
        // A driver that starts one receiver and then disappears.
        let mut w = s.try_clone().expect("clone");
        let mut r = BufReader::new(s);
        let mut line = String::new();
        writeln!(w, "{}", node::hello(&Mode::Loopback)).expect("hello");
        r.read_line(&mut line).expect("hello back");
        let back: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(back, node::hello(&Mode::Loopback));
        writeln!(w, "{}", serde_json::json!({"recv": "len-1", "lib": "rust"})).expect("recv");
        line.clear();
        r.read_line(&mut line).expect("port");
        let port: Value = serde_json::from_str(&line).expect("JSON");
        assert!(port["port"].as_u64().is_some_and(|p| p > 0), "{port}");
    }
    let o = serve.wait_with_output().expect("serving node");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("went away"), "{}", text(&o));
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
}
