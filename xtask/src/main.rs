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
//! and [`reports`] (reading compat's reports) use `cmd`; [`ctx`] (the repository, the target
//! directory, the loader path) uses `cmd` and `cargo`; [`umdk_lane`] (the genuine-core lane) uses
//! those four; [`goals`] (the goal table, [`goals::GOALS`]: the one place a goal is added, from
//! which `help` and the Makefile's goals follow) uses all of them; this file only finds the goal
//! in the table and runs it.

mod cargo;
mod cmd;
mod ctx;
mod goals;
mod helgrind;
mod imports;
mod reports;
mod umdk_lane;

use std::process::ExitCode;

use ctx::Ctx;
use goals::GOALS;

fn help() {
    println!("cargo xtask <goal> [args]   (make <goal> runs the same)\n");
    for g in GOALS {
        println!("  {:<20} {}", g.name, g.help);
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
    if goal == "goals" {
        // The Makefile's goals (one line, for `$(shell ...)`).
        let names: Vec<&str> = GOALS.iter().map(|g| g.name).collect();
        println!("{} help", names.join(" "));
        return ExitCode::SUCCESS;
    }
    let Some(g) = GOALS.iter().find(|g| g.name == goal) else {
        eprintln!("xtask: unknown goal {goal:?}\n");
        help();
        return ExitCode::from(2);
    };
    let mut ctx = Ctx::new(goals::deps_of);
    (g.run)(&mut ctx, &goal, &rest);
    ExitCode::SUCCESS
}
