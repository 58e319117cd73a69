//! The supervision of real processes (`sh`): output captured or logged, lines read with a bound,
//! a late process killed at its deadline, nothing left running after a drop.

use std::process::Command;
use std::time::{Duration, Instant};

use ost_supervise::{free_port, listening, spawn, wait_all, wait_listening, Capture};

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", script]);
    c
}

fn alive(pid: u32) -> bool {
    // A reaped process has no /proc entry (a zombie would still have one: reaping matters too).
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn lines_are_read_with_a_bound_and_the_rest_is_collected_at_the_end() {
    let r = spawn(
        "printer",
        &mut sh("echo one; echo 'port 4242'; echo three; echo oops >&2"),
        Capture::Pipes,
    )
    .unwrap();
    let mut seen = Vec::new();
    assert_eq!(
        r.expect("port ", Duration::from_secs(10), &mut seen)
            .as_deref(),
        Some("4242")
    );
    assert_eq!(seen, ["one"]);
    let end = r.finish(Duration::from_secs(10));
    assert!(end.success(), "{end:?}");
    assert_eq!(end.code(), 0);
    assert_eq!(end.stdout, "three\n");
    assert_eq!(end.stderr, "oops\n");
}

#[test]
fn a_missing_line_gives_up_at_its_limit() {
    let r = spawn("quiet", &mut sh("sleep 5"), Capture::Pipes).unwrap();
    let t = Instant::now();
    assert_eq!(
        r.expect("never ", Duration::from_millis(200), &mut Vec::new()),
        None
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn a_late_process_is_killed_at_its_deadline_and_reaped() {
    let r = spawn("sleeper", &mut sh("echo started; sleep 30"), Capture::Pipes).unwrap();
    let pid = r.id();
    let t = Instant::now();
    let end = r.finish(Duration::from_millis(300));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(end.status.is_none(), "killed: {end:?}");
    assert_eq!(end.code(), -1);
    assert!(!end.success());
    assert_eq!(end.stdout, "started\n");
    assert!(!alive(pid), "pid {pid} still there");
}

#[test]
fn a_dropped_child_is_killed_and_reaped() {
    let r = spawn("forgotten", &mut sh("sleep 30"), Capture::Pipes).unwrap();
    let pid = r.id();
    drop(r);
    assert!(!alive(pid), "pid {pid} still there");
}

#[test]
fn output_goes_to_log_files_when_asked() {
    let dir = std::env::temp_dir().join(format!("ost-supervise-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, err) = (dir.join("p.out"), dir.join("p.err"));
    let r = spawn(
        "logger",
        &mut sh("echo to-out; echo to-err >&2; exit 3"),
        Capture::Files {
            out: out.clone(),
            err: err.clone(),
        },
    )
    .unwrap();
    let end = r.finish(Duration::from_secs(10));
    assert_eq!(end.code(), 3);
    assert_eq!(end.stdout, "to-out\n");
    assert_eq!(end.stderr, "to-err\n");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "to-out\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pair_waits_for_both_and_names_the_late_one() {
    let mut a = spawn("fast", &mut sh("exit 0"), Capture::Pipes).unwrap();
    let mut b = spawn("slow", &mut sh("sleep 30"), Capture::Pipes).unwrap();
    let err = wait_all(
        &mut [&mut a, &mut b],
        Instant::now() + Duration::from_millis(300),
    )
    .unwrap_err();
    assert!(err.contains("slow") && !err.contains("fast"), "{err}");
    let mut c = spawn("one", &mut sh("exit 0"), Capture::Pipes).unwrap();
    let mut d = spawn("two", &mut sh("exit 4"), Capture::Pipes).unwrap();
    let st = wait_all(
        &mut [&mut c, &mut d],
        Instant::now() + Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(
        st.iter().map(|s| s.code()).collect::<Vec<_>>(),
        [Some(0), Some(4)]
    );
}

#[test]
fn a_listening_port_is_seen_and_a_free_one_is_not() {
    let port = free_port().unwrap();
    assert!(!listening(port));
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    assert!(listening(port));
    let mut server = spawn("idle", &mut sh("sleep 5"), Capture::Pipes).unwrap();
    assert!(wait_listening(port, &mut server, Duration::from_secs(1)));
    drop(l);
    let mut gone = spawn("gone", &mut sh("exit 0"), Capture::Pipes).unwrap();
    let t = Instant::now();
    assert!(!wait_listening(port, &mut gone, Duration::from_secs(10)));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "gave up when the server exited"
    );
}
