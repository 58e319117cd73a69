//! `compat`: the differential C-vs-Rust conformance harness of libos_transport.so.1.
//!
//! ```text
//! compat [--rust-lib PATH] [--legacy-lib PATH] [--out DIR] [--random N] [--seed S]
//!        [--scenario ID]... [--list] [--no-c-runner] [--c-runner-exe PATH] [--no-interop]
//!        [--ledger PATH]
//! ```
//! Defaults: the Rust library `<target>/<profile>/libos_transport.so`, the reference C library
//! `$LEGACY_LIB` or the library legacy-c's build script built, `--out <target>/compat`,
//! `--random $COMPAT_RANDOM` or 200, `--seed $COMPAT_SEED` or 20250413. Exit status 0 only when
//! nothing FAILs. See docs/compat.md.

use std::path::PathBuf;

use compat_tests::harness::{ledger, report};
use compat_tests::lib_under_test::{legacy_lib_path, rust_lib_path, target_dir};

fn usage() -> ! {
    eprintln!(
        "usage: compat [--rust-lib PATH] [--legacy-lib PATH] [--out DIR] [--random N] [--seed S] \
         [--scenario ID]... [--list] [--no-c-runner] [--c-runner-exe PATH] [--no-interop] \
         [--ledger PATH]"
    );
    std::process::exit(2)
}

fn main() {
    let mut opts = report::Options {
        rust_lib: rust_lib_path(),
        legacy_lib: legacy_lib_path(),
        out: target_dir().join("compat"),
        random: report::default_random(),
        seed: report::default_seed(),
        only: Vec::new(),
        list: false,
        ledger: ledger::default_path(),
        c_runner: true,
        c_runner_exe: None,
        interop: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("compat: {name} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "--rust-lib" => opts.rust_lib = PathBuf::from(val("--rust-lib")),
            "--legacy-lib" => opts.legacy_lib = PathBuf::from(val("--legacy-lib")),
            "--out" => opts.out = PathBuf::from(val("--out")),
            "--ledger" => opts.ledger = PathBuf::from(val("--ledger")),
            "--random" => {
                opts.random = val("--random").parse().unwrap_or_else(|_| usage());
            }
            "--seed" => opts.seed = val("--seed").parse().unwrap_or_else(|_| usage()),
            "--scenario" => {
                let v = val("--scenario");
                opts.only.push(v);
            }
            "--list" => opts.list = true,
            "--no-c-runner" => opts.c_runner = false,
            "--c-runner-exe" => opts.c_runner_exe = Some(PathBuf::from(val("--c-runner-exe"))),
            "--no-interop" => opts.interop = false,
            "-h" | "--help" => {
                println!("{}", include_str!("compat_help.txt"));
                return;
            }
            _ => {
                eprintln!("compat: unknown argument {a}");
                usage()
            }
        }
    }
    // A random scenario named on the command line (rand-<seed>) is generated from its seed.
    let mut extra = Vec::new();
    for o in &opts.only {
        if let Some(s) = o.strip_prefix("rand-").and_then(|s| s.parse::<u64>().ok()) {
            extra.push(s);
        }
    }
    if !extra.is_empty() && opts.random == report::default_random() {
        opts.random = 1;
        opts.seed = extra[0];
    }
    std::process::exit(report::run(&opts));
}
