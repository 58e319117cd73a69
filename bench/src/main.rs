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

mod cell;
mod cg;
mod orch;
mod steal;
mod xproc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: ostbench quick|full|cell ... (see docs/performance.md)");
        std::process::exit(2);
    };
    match cmd.as_str() {
        "cell" => {
            let result = cell::CellCfg::parse(&args[1..]).and_then(|c| match c.kind {
                cell::Kind::XSend => xproc::send(&c),
                cell::Kind::XRecv => xproc::recv(&c),
                _ => cell::run(&c),
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
            let opts = match orch::Opts::parse(cmd == "full", &args[1..]) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("ostbench: {e}");
                    std::process::exit(2);
                }
            };
            std::process::exit(orch::run(&opts));
        }
        _ => {
            eprintln!("ostbench: unknown command {cmd}");
            std::process::exit(2);
        }
    }
}
