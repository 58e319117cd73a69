//! `fuzz-compat` as the ordinary (uninstrumented) build runs it: the seeds run, a finding-free
//! input writes nothing, and `--smoke` fails because no library counter moved, so the check
//! `make fuzz-compat-smoke` relies on (both libraries' counters move when a scenario runs, over
//! the instrumented build) can fail; a crash is written once, reproduced and minimized. The
//! instrumented run itself is `make fuzz-compat-smoke`.

use std::path::Path;
use std::process::{Command, Output};

/// `fuzz-compat <args> --seeds <dir>/seeds --runs 0` with its corpus and findings in `dir`.
fn fuzz_seeds(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fuzz-compat"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(args)
        .args(["--runs", "0", "--seeds"])
        .arg(dir.join("seeds"))
        .arg("--corpus")
        .arg(dir.join("corpus"))
        .arg("--findings")
        .arg(dir.join("findings"))
        .output()
        .expect("start fuzz-compat")
}

#[test]
fn smoke_fails_when_no_library_is_instrumented() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-compat-plain");
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = dir.join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    // Two workers, one plain transfer.
    std::fs::write(seeds.join("one"), [1u8, 2, 0, 0, 0, 0, 0, 0]).unwrap();
    let out = fuzz_seeds(&dir, &["--smoke"], &[]);
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

/// A crash (here the self-test's abort, `FUZZ_COMPAT_ABORT_ABOVE`, standing for a library that
/// crashes on long transfers) is written once, re-run and minimized in processes of their own,
/// and the input that crashed is not run again by the next child.
#[test]
fn a_crash_is_reproduced_minimized_and_not_run_again() {
    use compat_tests::harness::random;
    use compat_tests::harness::scenario::{file, Body, MIB};
    // A seeded random scenario of three or more fault-free transfers, one longer than the rest
    // and than 4 MiB: the crash needs that one only.
    let (seed, above) = (0..5000u64)
        .find_map(|seed| {
            let sc = random::scenario(seed);
            let Body::Flow(f) = &sc.body else {
                return None;
            };
            let max = f.xfers.iter().map(|x| x.len).max()?;
            let longest = f.xfers.iter().filter(|x| x.len == max).count();
            (f.xfers.len() >= 3 && f.knobs.is_empty() && longest == 1 && max > 4 * MIB)
                .then_some((seed, max - 1))
        })
        .expect("a random scenario of that shape");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-compat-crash");
    let _ = std::fs::remove_dir_all(&dir);
    let seeds = dir.join("seeds");
    let enc = Command::new(env!("CARGO_BIN_EXE_fuzz-compat"))
        .arg("--encode-random")
        .arg(seed.to_string())
        .arg("1")
        .arg(&seeds)
        .output()
        .expect("start fuzz-compat --encode-random");
    assert!(enc.status.success(), "{enc:?}");
    let out = fuzz_seeds(&dir, &[], &[("FUZZ_COMPAT_ABORT_ABOVE", above.to_string())]);
    let text = String::from_utf8_lossy(&out.stdout);
    let all = format!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert_eq!(text.matches("FINDING crash").count(), 1, "{all}");
    assert!(
        !text.contains("again"),
        "the crashing input ran again: {all}"
    );
    let found: Vec<_> = std::fs::read_dir(dir.join("findings"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(found.len(), 1, "{all}");
    let d = found[0].path();
    assert!(found[0].file_name().to_string_lossy().starts_with("crash-"));
    let note = std::fs::read_to_string(d.join("finding.txt")).unwrap();
    assert!(note.contains("reproduced: 3 of 3 runs"), "{note}");
    let scn = std::fs::read_to_string(d.join("scenario.scn")).unwrap();
    let m = file::parse(&scn, "scenario.scn").expect("the minimized scenario parses");
    let Body::Flow(f) = &m.body else {
        panic!("{scn}")
    };
    // Minimized to the one transfer that crashes, still long enough to crash.
    assert_eq!(f.xfers.len(), 1, "{scn}");
    assert!(f.xfers[0].len > above, "{scn}");
}
