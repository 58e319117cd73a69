//! The tool's commands, output and exit codes (docs/inject.md, "The tool"), and what it leaves in
//! the host's registry.

use os_transport_inject as inj;
use os_transport_inject::testing::exclusive;
use ost_supervise::Capture;
use std::process::Command;
use std::time::Duration;

/// What the tool printed and how it exited.
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn tool(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mlcachedirect-inject"));
    cmd.args(args).env_remove("MLCD_INJECT_DEBUG");
    let end = ost_supervise::spawn("mlcachedirect-inject", &mut cmd, Capture::Pipes)
        .expect("run the tool")
        .finish(Duration::from_secs(30));
    Output {
        code: end.status.and_then(|s| s.code()),
        stdout: end.stdout,
        stderr: end.stderr,
    }
}

#[test]
fn commands_without_the_registry() {
    let o = tool(&[]);
    assert_eq!(o.code, Some(1));
    assert!(o.stdout.starts_with("Usage:"));
    for h in ["help", "-h", "--help"] {
        let o = tool(&[h]);
        assert_eq!(o.code, Some(0), "{h}");
        assert!(o.stdout.starts_with("Usage:"));
    }
    let o = tool(&["list"]);
    assert_eq!(o.code, Some(0));
    let out = o.stdout.clone();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Available injection points:");
    assert_eq!(lines.len(), 8, "{out}");
    assert!(lines[1..]
        .iter()
        .all(|l| l.trim_start().starts_with("os_transport.")));
    let o = tool(&["frobnicate"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(o.stderr.clone(), "Error: Unknown command 'frobnicate'\n");
    assert!(o.stdout.starts_with("Usage:"));
    let o = tool(&["clear"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(o.stderr.clone(), "Error: 'clear' requires point name\n");
    let o = tool(&["set", "os_transport.send.begin", "sleep"]);
    assert_eq!(o.code, Some(1));
    // The number is checked before the type.
    let o = tool(&["set", "os_transport.send.begin", "bogus", "12x"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(o.stderr.clone(), "Error: Invalid numeric value '12x'\n");
    let o = tool(&["verify", "os_transport.send.begin", "-1"]);
    assert_eq!(o.code, Some(1));
    assert_eq!(o.stderr.clone(), "Error: Invalid seconds value '-1'\n");
}

#[test]
fn set_verify_clear_through_the_registry() {
    let _x = exclusive();
    inj::cleanup();
    let p = "os_transport.urma.write";
    let o = tool(&["set", p, "error", "4096"]);
    assert_eq!(o.code, Some(0), "{}", o.stderr.clone());
    assert_eq!(
        o.stdout.clone(),
        "[mlcd_inject] Set os_transport.urma.write = return_error(4096)\n"
    );
    let o = tool(&["verify", p, "5"]);
    assert_eq!(
        (o.code, o.stdout.clone()),
        (Some(1), "NOT_TRIGGERED\n".into())
    );
    assert_eq!(inj::execute(p.as_bytes()), Some(4096));
    let o = tool(&["verify", p, "5"]);
    assert_eq!((o.code, o.stdout.clone()), (Some(0), "TRIGGERED\n".into()));
    let o = tool(&["set", p, "sleep", "-3"]);
    assert_eq!(o.code, Some(1));
    let o = tool(&["set", p, "sleep", "25"]);
    assert_eq!(o.code, Some(0));
    assert_eq!(
        o.stdout.clone(),
        "[mlcd_inject] Set os_transport.urma.write = sleep(25 ms)\n"
    );
    assert_eq!(inj::execute(p.as_bytes()), None, "a sleep returns no error");
    let o = tool(&["set", "custom.point", "nap", "1"]);
    assert_eq!(o.code, Some(1));
    assert!(o
        .stderr
        .clone()
        .contains("Error: Unknown type 'nap', use 'sleep' or 'error'"));
    let o = tool(&["clear", p]);
    assert_eq!(o.code, Some(0));
    assert_eq!(
        o.stdout.clone(),
        "[mlcd_inject] Clearing injection point: os_transport.urma.write\n\
         [mlcd_inject] Injection point 'os_transport.urma.write' cleared successfully\n"
    );
    assert_eq!(inj::set_return_error(p.as_bytes(), 1), 0);
    let o = tool(&["clearall"]);
    assert_eq!(o.code, Some(0));
    assert_eq!(inj::execute(p.as_bytes()), None, "cleared by the tool");
    inj::cleanup();
}
