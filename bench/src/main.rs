//! `ostbench`: the Rust `libos_transport` against the C reference (and `LEGACY_LIB`), side by side
//! in one run, over the loopback URMA provider. See `docs/performance.md`.
//!
//! ```text
//! ostbench quick [--out DIR]       callgrind instructions + heap allocations + one paced cell
//! ostbench full  [--out DIR] [--reps N] [--secs S] [--paced-reps N] [--paced-secs S]
//!                                   everything: + requests/s, latency, bandwidth, paced, idle, chart
//! ostbench cell  --lib PATH --kind tput|alloc|callgrind|paced|idle|xsend [--len N --depth N --workers N
//!                --copy 0|1 --event 0|1 --secs S --requests N --warmup N --rate N]
//!                                   (one child measurement)
//! ```
//! `DIR` defaults to `<target>/bench`. The exit status is non-zero only when a measurement broke
//! (a child failed, a library hung, a count could not be taken), never because a target was missed.
//!
//! The modules: [`cell`] (what a cell is: the plug-in point), [`cells`] (one file per cell: its
//! children, rows, targets and section; and the registry, one line per cell), [`orch`] (the run of
//! the registered cells, the report, the chart), [`child`] (what the child processes share), and
//! the helpers [`cg`] (callgrind attribution), [`memcpy`] (the memcpy baselines) and [`steal`]
//! (host steal time).

mod cell;
mod cells;
mod cg;
mod child;
mod memcpy;
mod orch;
mod steal;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: ostbench quick|full|cell ... (see docs/performance.md)");
        std::process::exit(2);
    };
    match cmd.as_str() {
        "cell" => {
            let result = child::CellCfg::parse(&args[1..]).and_then(|c| {
                let m =
                    cells::measure(&c.kind).ok_or_else(|| format!("unknown kind {}", c.kind))?;
                m.run(&c)
            });
            let code = match result {
                Ok(line) => {
                    println!("RESULT {line}");
                    0
                }
                Err(e) => {
                    println!("ERROR {e}");
                    2
                }
            };
            // Skip process teardown: library worker threads may still be parked.
            std::process::exit(code);
        }
        "quick" | "full" => {
            let opts = match orch::run::Opts::parse(cmd == "full", &args[1..]) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("ostbench: {e}");
                    std::process::exit(2);
                }
            };
            std::process::exit(orch::bench(&opts, cells::registry()));
        }
        _ => {
            eprintln!("ostbench: unknown command {cmd}");
            std::process::exit(2);
        }
    }
}
