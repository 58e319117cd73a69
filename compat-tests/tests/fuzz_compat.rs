//! `fuzz-compat` as the ordinary (uninstrumented) build runs it: the seeds run, a finding-free
//! input writes nothing, and `--smoke` fails because no library counter moved, so the check
//! `make fuzz-compat-smoke` relies on (both libraries' counters move when a scenario runs, over
//! the instrumented build) can fail. The instrumented run itself is `make fuzz-compat-smoke`.

use std::path::Path;
use std::process::Command;

#[test]
fn smoke_fails_when_no_library_is_instrumented() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-compat-plain");
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = dir.join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    // Two workers, one plain transfer.
    std::fs::write(seeds.join("one"), [1u8, 2, 0, 0, 0, 0, 0, 0]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_fuzz-compat"))
        .args(["--smoke", "--runs", "0", "--seeds"])
        .arg(&seeds)
        .arg("--corpus")
        .arg(dir.join("corpus"))
        .arg("--findings")
        .arg(dir.join("findings"))
        .output()
        .expect("start fuzz-compat");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 initial inputs"), "{text}");
    for lib in ["C reference", "Rust library"] {
        assert!(
            text.contains(&format!("the {lib}'s counters never moved")),
            "{text}"
        );
    }
    assert!(!text.contains("FINDING"), "{text}");
}
