//! `compat`: the differential C-vs-Rust conformance harness of libos_transport.so.1.
//!
//! ```text
//! compat [--rust-lib PATH] [--legacy-lib PATH] [--out DIR] [--random N] [--seed S]
//!        [--scenario ID]... [--list] [--no-c-runner] [--c-runner-exe PATH] [--no-interop]
//!        [--ledger PATH] [--interpose] [--device NAME [--eid EID]] [--verbose]
//!        [--split [--serve HOST:PORT | --peer HOST:PORT]] [--inject]
//!        [--scenario-file F]... [--repeat N] [--print-scenario ID]
//! ```
//! Defaults: the Rust library `<target>/<profile>/libos_transport.so`, the reference C library
//! `$LEGACY_LIB` or the library legacy-c's build script built, `--out <target>/compat`,
//! `--random $COMPAT_RANDOM` or 200, `--seed $COMPAT_SEED` or 20250413. Exit status 0 only when
//! nothing FAILs. `--inject` runs the inject scenarios on the inject flavours of both libraries
//! (defaults: the Rust flavour built into `<target>/inject`, legacy-c's `legacy-inject/`).
//! `--device` is hardware mode: only the public URMA API of the system library, with
//! the interposition layer in front for the trace and the faults. See docs/compat.md.

use std::path::{Path, PathBuf};

use compat_tests::harness::{backend, driver, inject, ledger, outcome, random, scenario, split};
use compat_tests::interpose_ctl;
use compat_tests::lib_under_test::{legacy_lib_path, rust_lib_path, target_dir};

fn usage() -> ! {
    eprintln!(
        "usage: compat [--rust-lib PATH] [--legacy-lib PATH] [--out DIR] [--random N] [--seed S] \
         [--scenario ID]... [--list] [--no-c-runner] [--c-runner-exe PATH] [--no-interop] \
         [--ledger PATH] [--interpose] [--device NAME [--eid EID]] [--verbose] \
         [--split [--serve HOST:PORT | --peer HOST:PORT]] [--inject] [--scenario-file F]... \
         [--repeat N] [--print-scenario ID]"
    );
    std::process::exit(2)
}

fn main() {
    // A child of `--split`: one side of a scenario, in a process of its own.
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some(split::CHILD_ARG) {
        std::process::exit(split::child_main(&argv[1..]));
    }
    let mut opts = outcome::Options {
        rust_lib: rust_lib_path(),
        legacy_lib: legacy_lib_path(),
        out: target_dir().join("compat"),
        random: driver::default_random(),
        seed: driver::default_seed(),
        only: Vec::new(),
        list: false,
        ledger: ledger::default_path(),
        c_runner: true,
        c_runner_exe: None,
        interop: true,
        c_runner_skip: None,
        verbose: false,
        files: Vec::new(),
        repeat: 1,
    };
    let mut print: Option<String> = None;
    let mut interpose = false;
    let mut inject_mode = false;
    let mut libs_given = (false, false);
    let mut two_processes = false;
    let mut device: Option<String> = None;
    let mut serve: Option<String> = None;
    let mut peer: Option<String> = None;
    let mut eid: Option<String> = None;
    let mut render_ledger = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("compat: {name} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "--rust-lib" => {
                opts.rust_lib = PathBuf::from(val("--rust-lib"));
                libs_given.0 = true;
            }
            "--legacy-lib" => {
                opts.legacy_lib = PathBuf::from(val("--legacy-lib"));
                libs_given.1 = true;
            }
            "--inject" => inject_mode = true,
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
            "--scenario-file" => opts.files.push(PathBuf::from(val("--scenario-file"))),
            "--print-scenario" => print = Some(val("--print-scenario")),
            "--repeat" => {
                opts.repeat = val("--repeat")
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .unwrap_or_else(|| usage());
            }
            "--list" => opts.list = true,
            "--render-ledger" => render_ledger = true,
            "--no-c-runner" => opts.c_runner = false,
            "--c-runner-exe" => opts.c_runner_exe = Some(PathBuf::from(val("--c-runner-exe"))),
            "--no-interop" => opts.interop = false,
            "-v" | "--verbose" => opts.verbose = true,
            "--interpose" => interpose = true,
            "--split" => two_processes = true,
            "--device" => device = Some(val("--device")),
            "--eid" => eid = Some(val("--eid")),
            "--serve" => serve = Some(val("--serve")),
            "--peer" => peer = Some(val("--peer")),
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
    if let Some(id) = print {
        std::process::exit(print_scenario(&id));
    }
    if opts.files.is_empty() {
        opts.files = driver::default_files(&opts.ledger);
    } else if !opts.list {
        // Files named on the command line select, as --scenario does: the run is them (and the
        // --scenario ids), not the catalogue, the C runner, the random scenarios and the matrix.
        match driver::load_files(&opts.files) {
            Ok(v) => opts.only.extend(v.into_iter().map(|s| s.id)),
            Err(e) => {
                eprintln!("compat: {e}");
                std::process::exit(2);
            }
        }
    }
    if inject_mode {
        if interpose || device.is_some() || two_processes {
            eprintln!("compat: --inject runs in one process over the loopback");
            usage()
        }
        if !libs_given.0 && !opts.list {
            opts.rust_lib = compat_tests::inject_build().rust.clone();
        }
        if !libs_given.1 {
            opts.legacy_lib = os_transport_legacy::legacy_inject_lib_path();
        }
        std::process::exit(inject::run(&opts));
    }
    if render_ledger {
        match ledger::Ledger::load(&opts.ledger).and_then(|l| l.markdown()) {
            Ok(md) => {
                print!("{md}");
                return;
            }
            Err(e) => {
                eprintln!("compat: {e}");
                std::process::exit(2);
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
    if !extra.is_empty() && opts.random == driver::default_random() {
        opts.random = 1;
        opts.seed = extra[0];
    }
    if (serve.is_some() || peer.is_some()) && !two_processes {
        eprintln!("compat: --serve and --peer are the two nodes of --split");
        usage()
    }
    if serve.is_some() && peer.is_some() {
        eprintln!("compat: a node either serves (--serve) or drives (--peer), not both");
        usage()
    }
    if eid.is_some() && device.is_none() {
        eprintln!("compat: --eid needs --device");
        usage()
    }
    if let Some(name) = &device {
        if interpose {
            eprintln!("compat: --device already puts the interposition layer in front");
            usage()
        }
        use_hardware(name, eid.as_deref());
    } else if interpose {
        use_interpose(false);
    }
    if device.is_some() || interpose {
        // The C runner prints the loopback's own trace: not comparable with the layer's.
        opts.c_runner_skip = Some(backend::C_RUNNER_SKIP);
    }
    if two_processes {
        let mode = match (&device, interpose) {
            (Some(d), _) => split::Mode::Hardware {
                device: d.clone(),
                eid: eid.clone(),
            },
            (None, true) => split::Mode::Interpose,
            (None, false) => split::Mode::Loopback,
        };
        if let Some(addr) = &serve {
            std::process::exit(split::node::serve(&opts, mode, addr));
        }
        std::process::exit(split::driver::run(&opts, mode, peer.as_deref()));
    }
    std::process::exit(driver::run(&opts));
}

/// `--print-scenario ID`: the scenario as a scenario file on stdout (a catalogue id or
/// `rand-<seed>`). Exit 0; 2 for an unknown id, and for a custom scenario, whose steps are Rust:
/// what the format can say is printed, and stderr names the function.
fn print_scenario(id: &str) -> i32 {
    let s = match id.strip_prefix("rand-").map(str::parse::<u64>) {
        Some(Ok(seed)) => Some(random::scenario(seed)),
        _ => scenario::catalogue().into_iter().find(|s| s.id == id),
    };
    let Some(s) = s else {
        eprintln!("compat: --print-scenario: no scenario {id} (a catalogue id, see --list, or rand-<seed>)");
        return 2;
    };
    print!("{}", scenario::file::to_text(&s));
    match &s.body {
        scenario::Body::Flow(_) => 0,
        scenario::Body::Custom(st) => {
            eprintln!(
                "compat: {id} is not a flow: its steps are Rust, fn {} in {}; only its id, \
                 description and setup are printed",
                st.name, st.file
            );
            2
        }
    }
}

/// Marks the process re-executed with the layer in front (so it is never re-executed twice).
const REEXEC_ENV: &str = "COMPAT_INTERPOSE_REEXEC";

/// `--device NAME [--eid EID]`: hardware mode. The layer goes in front of the system's
/// `liburma.so.0` (`URMA_INTERPOSE_REAL`, default [`system_liburma`]); the loopback's control
/// binding is forbidden before anything runs; the URMA fixture opens device `NAME` and the EID
/// `EID` (default its first) through the public API.
fn use_hardware(name: &str, eid: Option<&str>) {
    let eid = eid.map(|e| {
        compat_tests::parse_eid(e).unwrap_or_else(|e| {
            eprintln!("compat: --eid: {e}");
            std::process::exit(2)
        })
    });
    use_interpose(true);
    match backend::enter_hardware(name, eid) {
        Ok(index) => println!(
            "compat: hardware mode: device {name}, EID index {index}; interposition layer in front of {}",
            std::env::var("URMA_INTERPOSE_REAL").unwrap_or_default()
        ),
        Err(e) => {
            eprintln!("compat: --device: {e}");
            std::process::exit(2);
        }
    }
}

/// Where the system's `liburma.so.0` usually is (UMDK's `umdk-urma-lib` installs it in the
/// library directory): the first that exists of `/usr/lib64`, `/usr/lib/<multiarch>`, `/usr/lib`.
fn system_liburma() -> Option<PathBuf> {
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    ["/usr/lib64", multiarch.as_str(), "/usr/lib"]
        .iter()
        .map(|d| Path::new(d).join("liburma.so.0"))
        .find(|p| p.exists())
}

/// `--interpose`: the URMA trace and the faults go through the interposition layer. When the
/// layer is not this process's liburma.so.0 yet, re-executes the harness with
/// `LD_LIBRARY_PATH=<profile>/interpose:...` and `URMA_INTERPOSE_REAL` (when unset: for
/// `--interpose` the loopback, `testkit::target::loopback_lib`; for `--device` (`hardware`) the
/// system library, [`system_liburma`]). Returns only when the layer is this process's
/// liburma.so.0 (with `hardware` false, after choosing the [`backend::INTERPOSE`] backend).
fn use_interpose(hardware: bool) {
    if interpose_ctl::present() {
        if hardware {
            return;
        }
        if let Err(e) = backend::set(&backend::INTERPOSE) {
            eprintln!("compat: {e}");
            std::process::exit(2);
        }
        println!(
            "compat: URMA trace and faults: interposition layer in front of {}",
            std::env::var("URMA_INTERPOSE_REAL").unwrap_or_default()
        );
        return;
    }
    if std::env::var_os(REEXEC_ENV).is_some() {
        eprintln!(
            "compat: --interpose: the interposition layer is not active (see the message of \
             urma-interpose above; build it with `cargo build -p urma-interpose`)"
        );
        std::process::exit(2);
    }
    let dir = compat_tests::interpose_dir();
    if !dir.join("liburma.so.0").exists() {
        eprintln!(
            "compat: --interpose: {} is missing (cargo build -p urma-interpose)",
            dir.join("liburma.so.0").display()
        );
        std::process::exit(2);
    }
    let mut path = dir.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = compat_tests::target::command(std::env::current_exe().expect("current_exe"));
    cmd.args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", path)
        .env(REEXEC_ENV, "1");
    if std::env::var_os("URMA_INTERPOSE_REAL").is_none() {
        let real = if hardware {
            system_liburma()
        } else {
            Some(compat_tests::target::loopback_lib())
        };
        let Some(real) = real else {
            eprintln!(
                "compat: --device: no liburma.so.0 in /usr/lib64 or /usr/lib: set \
                 URMA_INTERPOSE_REAL to the path of the system's URMA library"
            );
            std::process::exit(2);
        };
        cmd.env("URMA_INTERPOSE_REAL", real);
    }
    let e = std::os::unix::process::CommandExt::exec(&mut cmd);
    eprintln!("compat: --interpose: cannot re-execute the harness: {e}");
    std::process::exit(2);
}
