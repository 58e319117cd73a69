//! Scenario files (`compat --scenario-file`, docs/compat.md "Scenario files"): the checked-in
//! files under `compat-tests/scenarios/` give the same verdict every time (`--repeat`), a pinned
//! expectation that the outcome contradicts FAILs, `--print-scenario` prints what the format
//! reads back and a printed catalogue flow run from its file is judged as the catalogue's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use compat_tests::harness::driver::{load_files, verdicts_of};
use compat_tests::harness::scenario::{catalogue, file};
use compat_tests::harness::{ledger, random};
use compat_tests::lib_under_test::target_dir;
use compat_tests::target;
use serde_json::Value;

fn compat() -> Command {
    target::command(env!("CARGO_BIN_EXE_compat"))
}

/// One harness process at a time: they share the host's loopback device, and two at once were
/// seen to disturb each other's timing (tests/interpose_verdicts.rs).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn scenarios_dir() -> PathBuf {
    ledger::default_path()
        .parent()
        .expect("the ledger's directory")
        .join("scenarios")
}

fn out_dir(name: &str) -> PathBuf {
    let d = target_dir().join("compat-scenario-files").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create the output directory");
    d
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn report(out: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report.json"))
        .expect("report.json parses")
}

/// Every checked-in file, run `--repeat` times (10; 2 under emulation), gives one verdict, and
/// none FAILs.
#[test]
fn checked_in_files_are_stable_under_repeat() {
    let _g = serial();
    let repeat = if target::emulated() { "2" } else { "10" };
    let out = out_dir("repeat");
    let t = std::time::Instant::now();
    let o = compat()
        .arg("--scenario-file")
        .arg(scenarios_dir())
        .args(["--repeat", repeat, "--out"])
        .arg(&out)
        .output()
        .expect("run compat");
    let all = text(&o);
    assert!(o.status.success(), "compat --repeat failed:\n{all}");
    let mut stems: Vec<String> = load_files(&[scenarios_dir()])
        .expect("the scenario files")
        .into_iter()
        .map(|s| s.id)
        .collect();
    stems.sort();
    assert!(stems.len() >= 5, "{stems:?}");
    let verdicts = verdicts_of(&report(&out));
    assert_eq!(verdicts.keys().cloned().collect::<Vec<_>>(), stems);
    assert!(verdicts.values().all(|v| v != "FAIL"), "{verdicts:?}");
    assert!(
        all.contains(&format!(
            "compat: --repeat {repeat}: {} scenarios, {} runs, 0 with a verdict that flipped",
            stems.len(),
            stems.len() * repeat.parse::<usize>().unwrap()
        )),
        "{all}"
    );
    println!(
        "{} files x {repeat} runs in {:.1} s",
        stems.len(),
        t.elapsed().as_secs_f64()
    );
}

/// A file that pins PASS for a one-byte transfer (DIVERGES-AS-DOCUMENTED D1, D13) FAILs, and
/// says what it expected and what came; pinning what comes passes.
#[test]
fn a_contradicted_expectation_fails() {
    let _g = serial();
    let out = out_dir("expect");
    let body = "xfer len=1 sk=0x96 ck=0x97\n";
    let wrong = out.join("pinned-wrong.scn");
    std::fs::write(&wrong, format!("{body}expect = PASS\nexpect wire = same\n")).unwrap();
    let right = out.join("pinned-right.scn");
    std::fs::write(
        &right,
        format!("{body}expect = DIVERGES-AS-DOCUMENTED D13 D1\nexpect log = D1 D13\n"),
    )
    .unwrap();
    let o = compat()
        .arg("--scenario-file")
        .arg(&wrong)
        .arg("--scenario-file")
        .arg(&right)
        .arg("--out")
        .arg(out.join("report"))
        .output()
        .expect("run compat");
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains(
            "expected PASS, got DIVERGES-AS-DOCUMENTED D1 D13; expected wire same, got D1"
        ),
        "{all}"
    );
    let v = verdicts_of(&report(&out.join("report")));
    assert_eq!(v["file:pinned-wrong"], "FAIL");
    assert_eq!(v["file:pinned-right"], "DIVERGES-AS-DOCUMENTED D1,D13");
}

/// `--print-scenario` prints a flow as `file::to_text` does (exit 0) and names a custom
/// scenario's function (exit 2); the printed file of `len-6m+5` runs and is judged as the
/// catalogue's `len-6m+5`.
#[test]
fn printed_scenarios_read_back_and_run_alike() {
    let _g = serial();
    let print = |id: &str| compat().args(["--print-scenario", id]).output().unwrap();
    let cat = catalogue();
    let o = print("len-6m+5");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let want = cat.iter().find(|s| s.id == "len-6m+5").unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), file::to_text(want));
    let o42 = print("rand-42");
    assert_eq!(
        String::from_utf8_lossy(&o42.stdout),
        file::to_text(&random::scenario(42))
    );
    let c = print("destroy-inflight");
    assert_eq!(c.status.code(), Some(2), "{}", text(&c));
    assert!(
        String::from_utf8_lossy(&c.stderr).contains(
            "steps are Rust, fn sc_destroy_inflight in compat-tests/src/harness/scenario/lifecycle.rs"
        ),
        "{}",
        text(&c)
    );
    assert_eq!(print("no-such-id").status.code(), Some(2));

    let out = out_dir("printed");
    let f = out.join("len-6m+5.scn");
    std::fs::write(&f, &o.stdout).unwrap();
    let r = compat()
        .args(["--scenario", "len-6m+5", "--scenario-file"])
        .arg(&f)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run compat");
    assert!(r.status.success(), "{}", text(&r));
    let v = verdicts_of(&report(&out));
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(v["file:len-6m+5"], v["len-6m+5"]);
}
