//! `fuzz-compat`: the coverage-guided differential fuzzer of the conformance harness
//! (docs/compat.md, "Differential fuzzing"; `make fuzz-compat`, `make fuzz-compat-smoke`).
//!
//! ```text
//! fuzz-compat [--time SECONDS] [--runs N] [--seed S] [--corpus DIR] [--seeds DIR]...
//!             [--findings DIR] [--smoke] [--edges FILE] [--rust-lib PATH] [--legacy-lib PATH]
//!             [--ledger PATH]
//! fuzz-compat --replay FILE      one input (or a scenario file, *.scn): its verdict, finding and
//!                                traces side by side
//! fuzz-compat --baseline [N]     what make compat runs (catalogue, N random, interop): edges
//! fuzz-compat --distil OUT [--seeds DIR]... [--corpus DIR]   a small set covering the same edges
//! fuzz-compat --encode-random SEED N OUT   the inputs of random scenarios rand-SEED.. (compat's)
//! ```
//! This binary defines and exports the two SanitizerCoverage hooks the instrumented modules call
//! from their constructors (the exports are this binary's link arguments, compat-tests/build.rs).
//! Built without instrumentation it runs, but no counter moves.

use std::path::PathBuf;
use std::time::Duration;

use compat_tests::harness::fuzz::{coverage, decode, engine};
use compat_tests::harness::ledger;
use compat_tests::lib_under_test::{legacy_lib_path, rust_lib_path, target_dir};

/// Called by every module built with inline 8-bit counters, from its constructor.
///
/// # Safety
/// Called by instrumented code with the bounds of its counter array.
#[no_mangle]
pub unsafe extern "C" fn __sanitizer_cov_8bit_counters_init(start: *mut u8, end: *mut u8) {
    // SAFETY of the boundary: registering stores two addresses into atomics and cannot panic;
    // catch_unwind keeps any panic from unwinding into the C constructor that called it.
    let _ = std::panic::catch_unwind(|| coverage::register_counters(start as usize, end as usize));
}

/// Called by every module built with a PC table, from its constructor.
///
/// # Safety
/// Called by instrumented code with the bounds of its PC table.
#[no_mangle]
pub unsafe extern "C" fn __sanitizer_cov_pcs_init(start: *const usize, end: *const usize) {
    let _ = std::panic::catch_unwind(|| coverage::register_pcs(start as usize, end as usize));
}

/// `--encode-random SEED N OUT`: the inputs of the random scenarios `rand-SEED` ..
/// `rand-<SEED+N-1>` into OUT (named `rand-<seed>`).
fn encode_random(seed: u64, n: u64, out: &std::path::Path) -> i32 {
    if let Err(e) = std::fs::create_dir_all(out) {
        eprintln!("fuzz-compat: {}: {e}", out.display());
        return 2;
    }
    for s in seed..seed.saturating_add(n) {
        let p = out.join(format!("rand-{s}"));
        if let Err(e) = std::fs::write(&p, decode::encode_random(s)) {
            eprintln!("fuzz-compat: {}: {e}", p.display());
            return 2;
        }
    }
    0
}

fn usage() -> ! {
    eprintln!(
        "usage: fuzz-compat [--time SECONDS] [--runs N] [--seed S] [--corpus DIR] [--seeds DIR]... \
         [--findings DIR] [--smoke] [--edges FILE] [--rust-lib PATH] [--legacy-lib PATH] [--ledger PATH] \
         | --replay FILE | --baseline [N] | --distil OUT | --encode-random SEED N OUT"
    );
    std::process::exit(2)
}

fn main() {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let child = argv.first().map(String::as_str) == Some(engine::CHILD_ARG);
    if child {
        argv.remove(0);
    }
    let dir = target_dir().join("fuzz-compat");
    let mut opts = engine::Options {
        legacy_lib: legacy_lib_path(),
        rust_lib: rust_lib_path(),
        ledger: ledger::default_path(),
        time: None,
        runs: None,
        seed: 1,
        corpus: dir.join("corpus"),
        seeds: Vec::new(),
        findings: dir.join("findings"),
        smoke: false,
        edges: None,
    };
    let mut replay: Option<PathBuf> = None;
    let mut baseline: Option<usize> = None;
    let mut distil: Option<PathBuf> = None;
    let mut encode: Option<(u64, u64, PathBuf)> = None;
    let mut it = argv.iter().peekable();
    // The child gets the parent's arguments, with the time left as a last `--time`.
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next().cloned().unwrap_or_else(|| {
                eprintln!("fuzz-compat: {name} needs a value");
                usage()
            })
        };
        let num = |name: &str, v: String| -> u64 {
            v.parse().unwrap_or_else(|_| {
                eprintln!("fuzz-compat: {name}: not a number: {v}");
                usage()
            })
        };
        match a.as_str() {
            "--time" => opts.time = Some(Duration::from_secs(num("--time", val("--time")))),
            "--runs" => opts.runs = Some(num("--runs", val("--runs"))),
            "--seed" => opts.seed = num("--seed", val("--seed")),
            "--corpus" => opts.corpus = PathBuf::from(val("--corpus")),
            "--seeds" => opts.seeds.push(PathBuf::from(val("--seeds"))),
            "--findings" => opts.findings = PathBuf::from(val("--findings")),
            "--smoke" => opts.smoke = true,
            "--edges" => opts.edges = Some(PathBuf::from(val("--edges"))),
            "--rust-lib" => opts.rust_lib = PathBuf::from(val("--rust-lib")),
            "--legacy-lib" => opts.legacy_lib = PathBuf::from(val("--legacy-lib")),
            "--ledger" => opts.ledger = PathBuf::from(val("--ledger")),
            "--replay" => replay = Some(PathBuf::from(val("--replay"))),
            "--distil" => distil = Some(PathBuf::from(val("--distil"))),
            "--encode-random" => {
                let seed = num("--encode-random", val("--encode-random"));
                let n = num("--encode-random", val("--encode-random"));
                encode = Some((seed, n, PathBuf::from(val("--encode-random"))));
            }
            "--baseline" => {
                let n = it
                    .next_if(|v| v.parse::<usize>().is_ok())
                    .map_or(200, |v| v.parse().unwrap_or(200));
                baseline = Some(n);
            }
            _ => usage(),
        }
    }
    let code = if let Some((seed, n, out)) = encode {
        encode_random(seed, n, &out)
    } else if let Some(f) = replay {
        engine::replay(&opts, &f)
    } else if let Some(out) = distil {
        engine::distil(&opts, &out)
    } else if let Some(n) = baseline {
        engine::baseline(&opts, n)
    } else if child {
        engine::child(&opts)
    } else {
        let exe = std::env::current_exe().unwrap_or_else(|e| {
            eprintln!("fuzz-compat: own path: {e}");
            std::process::exit(2)
        });
        let args: Vec<String> = std::env::args().skip(1).collect();
        engine::supervise(&exe, &args, &opts)
    };
    std::process::exit(code)
}
