//! The parent's side of a `compat --split` child: started ([`Launch`], [`start_receiver`]), its
//! output read line by line with a bound on every wait, and its end collected ([`ChildEnd`]),
//! killing it when it overstays.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ost_supervise::{Capture, Running};

use super::mode::Mode;
use super::protocol::CHILD_ARG;
use crate::harness::outcome::Options;

/// A library as the parent hands it to a child.
#[derive(Debug, Clone)]
pub struct LibRef {
    pub path: PathBuf,
    pub slot: u32,
    pub name: &'static str,
}

/// A running child (`ost_supervise`): its stdout lines as they come, its stderr once it ended.
pub(super) struct Proc(Running);

/// How the parent starts the children of a run: the harness executable and the backend they
/// use.
pub struct Launch {
    pub exe: PathBuf,
    pub mode: Mode,
}

/// Starts a child in `role` for `plan`, loading `lib`, with `extra` arguments.
pub(super) fn spawn(
    launch: &Launch,
    role: &str,
    lib: &LibRef,
    plan: &str,
    extra: &[String],
) -> Result<Proc, String> {
    // Through the target runner: under qemu the kernel cannot execute this binary by itself.
    let mut c = crate::target::command(&launch.exe);
    c.arg(CHILD_ARG)
        .args(["--role", role, "--plan", plan])
        .arg("--lib")
        .arg(&lib.path)
        .args(["--slot", &lib.slot.to_string()])
        .args(launch.mode.child_args())
        .args(extra)
        .stdin(Stdio::null());
    ost_supervise::spawn(&format!("{role} child"), &mut c, Capture::Pipes).map(Proc)
}

impl Proc {
    /// The next stdout line starting with `prefix` (others are kept in `seen`), within `limit`.
    pub(super) fn expect(
        &self,
        prefix: &str,
        limit: Duration,
        seen: &mut Vec<String>,
    ) -> Option<String> {
        self.0.expect(prefix, limit, seen)
    }

    /// The stdout lines that have arrived, without waiting.
    pub(super) fn ready_lines(&self) -> Vec<String> {
        self.0.ready_lines()
    }

    /// Kills the child now.
    pub(super) fn kill(&mut self) {
        self.0.kill();
    }

    /// Waits for the exit (killing the process after `limit`); status code (-1 if killed or
    /// signalled), remaining stdout lines, stderr.
    pub(super) fn finish(self, limit: Duration) -> ChildEnd {
        let end = self.0.finish(limit);
        let rest = end.stdout.lines().map(str::to_string).collect();
        (end.code(), rest, end.stderr)
    }
}

/// How a child ended: exit status (-1 if killed or signalled), its stdout lines after the
/// ones already read, its stderr.
pub type ChildEnd = (i32, Vec<String>, String);

/// Bound of a receiver's start (its `port` line) and of its end after the sender's.
const RECV_START: Duration = Duration::from_secs(20);
pub(super) const RECV_END: Duration = Duration::from_secs(30);

/// A receiver of one run, started and printing its port: `Ok((its child, its port))`, or how
/// it ended without printing one.
pub fn start_receiver(
    launch: &Launch,
    plan: &str,
    lib: &LibRef,
    listen: &str,
) -> Result<(ReceiverChild, u16), ChildEnd> {
    let listen = vec!["--listen".to_string(), listen.to_string()];
    let recv = spawn(launch, "recv", lib, plan, &listen).map_err(|e| (2, Vec::new(), e))?;
    let mut seen = Vec::new();
    match recv
        .expect("port ", RECV_START, &mut seen)
        .and_then(|p| p.parse::<u16>().ok())
    {
        Some(port) => Ok((ReceiverChild(recv), port)),
        None => {
            let (code, rest, err) = recv.finish(Duration::from_secs(5));
            seen.extend(rest);
            Err((code, seen, err))
        }
    }
}

/// A started receiver child (see [`start_receiver`]).
pub struct ReceiverChild(pub(super) Proc);

impl ReceiverChild {
    /// Waits for its end, killing it after `limit`.
    pub fn finish(self, limit: Duration) -> ChildEnd {
        self.0.finish(limit)
    }
}

/// The libraries of a run, as the children load them.
pub(super) fn lib_refs(opts: &Options) -> (LibRef, LibRef) {
    (
        LibRef {
            path: opts.legacy_lib.clone(),
            slot: 0,
            name: "legacy",
        },
        LibRef {
            path: opts.rust_lib.clone(),
            slot: 1,
            name: "rust",
        },
    )
}

/// The last non-empty line of a child's stderr (what it said before it ended).
pub(super) fn last_words(err: &str) -> String {
    err.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}
