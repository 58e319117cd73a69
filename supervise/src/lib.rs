//! Child processes under supervision: one way to start a program, read its output with a bound
//! on every wait, wait for it with a deadline and kill it when it overstays, for every part of
//! the project that starts programs (the xtask's genuine-core lane, the conformance harness's C
//! runner and `--split` children, the benchmarks' `urma_perftest` cell, the loopback's C program
//! pair). A [`Running`] never outlives its owner: dropping it kills and reaps the process.
//!
//! Also here: a free TCP port ([`free_port`]), waiting until a port listens ([`wait_listening`]),
//! and `urma_perftest` as a server and client pair with the parser of its report ([`perftest`]).

pub mod perftest;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a child's output goes.
#[derive(Debug, Clone)]
pub enum Capture {
    /// Pipes read by two threads: stdout line by line ([`Running::expect`]), stderr whole.
    Pipes,
    /// Stdout and stderr into these two files (created or truncated): a log to keep.
    Files { out: PathBuf, err: PathBuf },
}

/// A started child.
pub struct Running {
    name: String,
    child: Child,
    reaped: Option<ExitStatus>,
    lines: Option<mpsc::Receiver<String>>,
    err: Option<JoinHandle<String>>,
    files: Option<(PathBuf, PathBuf)>,
}

/// How a child ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// Its exit status; `None` when it was killed at its deadline.
    pub status: Option<ExitStatus>,
    /// Its standard output not yet read through [`Running::expect`], one `\n` after each line.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ended {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The exit code; -1 when killed (at the deadline or by a signal).
    pub fn code(&self) -> i32 {
        self.status.and_then(|s| s.code()).unwrap_or(-1)
    }

    /// Stdout and stderr, for a failure message.
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Starts `cmd` (`name` names it in errors) with its output as `capture` says; standard input
/// as `cmd` has it (inherited unless set: [`Running::take_stdin`] for a pipe).
pub fn spawn(name: &str, cmd: &mut Command, capture: Capture) -> Result<Running, String> {
    let files = match &capture {
        Capture::Pipes => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            None
        }
        Capture::Files { out, err } => {
            let open = |p: &Path| {
                std::fs::File::create(p).map_err(|e| format!("{name}: {}: {e}", p.display()))
            };
            cmd.stdout(open(out)?).stderr(open(err)?);
            Some((out.clone(), err.clone()))
        }
    };
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
    let (lines, err) = match (child.stdout.take(), child.stderr.take()) {
        (Some(so), Some(mut se)) => {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for l in BufReader::new(so).lines().map_while(Result::ok) {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
            });
            let err = std::thread::spawn(move || {
                let mut s = String::new();
                let _ = se.read_to_string(&mut s);
                s
            });
            (Some(rx), Some(err))
        }
        _ => (None, None),
    };
    Ok(Running {
        name: name.to_string(),
        child,
        reaped: None,
        lines,
        err,
        files,
    })
}

impl Running {
    /// The name given to [`spawn`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The write end of the child's standard input, when `cmd` had `Stdio::piped()` (once).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// With [`Capture::Pipes`]: the rest of the next stdout line that starts with `prefix`
    /// (trimmed), within `limit`; the lines before it go to `seen`. `None` at the limit, at the
    /// end of the output, or without pipes.
    pub fn expect(&self, prefix: &str, limit: Duration, seen: &mut Vec<String>) -> Option<String> {
        let lines = self.lines.as_ref()?;
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(l) => match l.strip_prefix(prefix) {
                    Some(rest) => return Some(rest.trim().to_string()),
                    None => seen.push(l),
                },
                Err(_) => return None,
            }
        }
    }

    /// With [`Capture::Pipes`]: the stdout lines that have arrived, without waiting.
    pub fn ready_lines(&self) -> Vec<String> {
        self.lines
            .as_ref()
            .map(|l| l.try_iter().collect())
            .unwrap_or_default()
    }

    /// Whether the process has exited (it is then reaped).
    pub fn exited(&mut self) -> bool {
        if self.reaped.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.reaped = Some(st);
            }
        }
        self.reaped.is_some()
    }

    /// Waits for the exit until `deadline`; kills the process (and reaps it) when the deadline
    /// passes first, then `None`.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if self.exited() {
                return self.reaped;
            }
            if Instant::now() >= deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Kills the process now (if it still runs) and reaps it.
    pub fn kill(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Waits for the exit within `limit` (killing the process when late), then collects its
    /// output.
    pub fn finish(self, limit: Duration) -> Ended {
        self.finish_by(Instant::now() + limit)
    }

    /// [`Running::finish`] with an absolute deadline.
    pub fn finish_by(mut self, deadline: Instant) -> Ended {
        let status = self.wait_until(deadline);
        let (stdout, stderr) = match (&self.files, self.lines.take(), self.err.take()) {
            (Some((out, err)), _, _) => (
                std::fs::read_to_string(out).unwrap_or_default(),
                std::fs::read_to_string(err).unwrap_or_default(),
            ),
            (None, Some(lines), err) => {
                // The process is gone; a grandchild holding the pipe must not stall this.
                let mut out = String::new();
                while let Ok(l) = lines.recv_timeout(Duration::from_millis(200)) {
                    out.push_str(&l);
                    out.push('\n');
                }
                let err = match err {
                    Some(h) if h.is_finished() || wait_briefly(&h) => h.join().unwrap_or_default(),
                    _ => String::new(),
                };
                (out, err)
            }
            (None, None, _) => (String::new(), String::new()),
        };
        Ended {
            status,
            stdout,
            stderr,
        }
    }
}

/// Gives a reader thread up to 200 ms to reach the end of its pipe.
fn wait_briefly(h: &JoinHandle<String>) -> bool {
    let end = Instant::now() + Duration::from_millis(200);
    while !h.is_finished() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
    h.is_finished()
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits for every child of `all` until `deadline`; when one is late, kills them all and says
/// which.
pub fn wait_all(all: &mut [&mut Running], deadline: Instant) -> Result<Vec<ExitStatus>, String> {
    loop {
        if all.iter_mut().all(|r| r.exited()) {
            return Ok(all.iter().filter_map(|r| r.reaped).collect());
        }
        if Instant::now() >= deadline {
            let late: Vec<String> = all
                .iter_mut()
                .filter_map(|r| (!r.exited()).then(|| r.name.clone()))
                .collect();
            for r in all.iter_mut() {
                r.kill();
            }
            return Err(format!(
                "{} did not finish in time (killed)",
                late.join(", ")
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, read, released).
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Whether a socket of this host listens on TCP port `port` (`/proc/net/tcp` and `tcp6`, state
/// `0A`): read from the kernel's tables, so probing connects to nothing.
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// Waits until TCP port `port` listens, at most `limit`, giving up early when `server` exits.
pub fn wait_listening(port: u16, server: &mut Running, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    loop {
        if listening(port) {
            return true;
        }
        if server.exited() || Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
