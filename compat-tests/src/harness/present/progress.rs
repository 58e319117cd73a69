//! The progress line of a run: scenario k of n, the time elapsed, the FAILs so far. On a
//! terminal one line is rewritten in place; otherwise (a CI log, a pipe) a line is printed at
//! every tenth of the run and at least every 30 s. A FAIL's line (with its reason and replay
//! command) is always printed; with `--verbose` every scenario's line is.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// The progress of a run.
pub struct Progress {
    label: &'static str,
    total: usize,
    done: usize,
    fails: usize,
    t0: Instant,
    last: Instant,
    tty: bool,
    drawn: bool,
    verbose: bool,
}

/// `m:ss`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

impl Progress {
    /// A run of `total` steps, printed as `<label>: ...`.
    pub fn new(label: &'static str, total: usize, verbose: bool) -> Progress {
        let now = Instant::now();
        Progress {
            label,
            total,
            done: 0,
            fails: 0,
            t0: now,
            last: now,
            tty: std::io::stdout().is_terminal(),
            drawn: false,
            verbose,
        }
    }

    fn status(&self, running: Option<&str>) -> String {
        let mut s = format!(
            "{}: {}/{} scenarios, {} elapsed, {} FAIL",
            self.label,
            self.done,
            self.total,
            clock(self.t0.elapsed()),
            self.fails
        );
        if let Some(id) = running {
            s.push_str(&format!(", running {id}"));
        }
        s
    }

    fn clear(&mut self) {
        if self.drawn {
            print!("\r\x1b[K");
            self.drawn = false;
        }
    }

    /// Step `id` starts (drawn on a terminal).
    pub fn start(&mut self, id: &str) {
        if self.tty {
            self.clear();
            print!("{}", self.status(Some(id)));
            let _ = std::io::stdout().flush();
            self.drawn = true;
        }
    }

    /// Prints `text` above the progress line.
    pub fn say(&mut self, text: &str) {
        self.clear();
        println!("{text}");
    }

    /// A step ended with report line `line`; `failed` when it FAILed.
    pub fn done(&mut self, line: &str, failed: bool) {
        self.done += 1;
        if failed {
            self.fails += 1;
        }
        if failed || self.verbose {
            self.say(line);
        }
        if self.tty {
            return;
        }
        let tenth = self.total.div_ceil(10).max(1);
        if self.done == self.total
            || self.done % tenth == 0
            || self.last.elapsed() >= Duration::from_secs(30)
        {
            println!("{}", self.status(None));
            self.last = Instant::now();
        }
    }

    /// A step ended with a line that is always shown (SKIPPED, NOT RUN: not a FAIL, but the
    /// reader must see why).
    pub fn done_shown(&mut self, line: &str) {
        self.say(line);
        let verbose = self.verbose;
        self.verbose = false;
        self.done("", false);
        self.verbose = verbose;
    }

    /// The run's steps are over: the terminal's line is cleared.
    pub fn finish(&mut self) {
        self.clear();
        let _ = std::io::stdout().flush();
    }
}
