//! `cargo xtask <goal>`: the project's one build driver. The Makefile's goals are aliases of
//! these (`make test` = `cargo xtask test`), so every step is Rust: a failing step stops with the
//! command that failed, not with a shell exit code.
//!
//! What it adds to plain cargo: the system packages a goal needs (`packaging/deps.sh`), the
//! loader path of the programs it runs ([`ctx::Ctx::loader_path`]: the loopback's `liburma.so.0`
//! and the profile's libraries, found from cargo's build messages, see [`cargo`]), the C builds
//! that are not a crate's (the ASan flavour of legacy-c, the fuzz and valgrind programs), and the
//! checks that read tool output (Helgrind's report, [`helgrind`]).
//!
//! Layering: [`cmd`] (running a command, failing the goal) uses nothing of the crate; [`cargo`]
//! and [`reports`] (reading compat's reports) use `cmd`; [`ctx`] (the goal table, the
//! repository, the target directory, the loader path) uses `cmd` and `cargo`; [`umdk_lane`] (the
//! genuine-core lane) uses those four; [`goals`] uses all of them; this file only picks the goal
//! and hands it to `goals`.

mod cargo;
mod cmd;
mod ctx;
mod goals;
mod helgrind;
mod imports;
mod reports;
mod umdk_lane;

use std::process::ExitCode;

use ctx::{Ctx, GOALS};

fn help() {
    println!("cargo xtask <goal> [args]   (make <goal> runs the same)\n");
    for (goal, _, what) in GOALS {
        println!("  {goal:<20} {what}");
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(goal) = args.next() else {
        help();
        return ExitCode::SUCCESS;
    };
    let rest: Vec<String> = args.collect();
    if goal == "help" || goal == "--help" || goal == "-h" {
        help();
        return ExitCode::SUCCESS;
    }
    if !GOALS.iter().any(|g| g.0 == goal) {
        eprintln!("xtask: unknown goal {goal:?}\n");
        help();
        return ExitCode::from(2);
    }
    let mut ctx = Ctx::new();
    goals::dispatch(&mut ctx, &goal, &rest);
    ExitCode::SUCCESS
}
