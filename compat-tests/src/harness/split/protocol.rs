//! The parent-child protocol of `compat --split`, both ends of each exchange in one place:
//!
//! * a child's stdout, read by its parent (or by the serving node, which forwards it): `port
//!   <n>` (a receiver listening), `trace <event>` lines (its raw trace), `ctl_calls <n>` (its
//!   `urma_loopback_*` attempts) and `problems <json list>`; a child that cannot reach the other
//!   process prints `not-run <why>` and exits with [`NOT_RUN`]; the peer-death sender prints
//!   `posted` and `waited {"ret", "status", "t_ns"}` ([`monotonic_ns`]);
//! * the two children over TCP: the receiver sends its
//!   [`EndpointInfo`](testkit::peer::EndpointInfo) as one JSON line, the
//!   sender answers with its {uasid, EID} ([`id_json`]), and says `closed` when it is done.
//!
//! A child is the harness executable started with [`CHILD_ARG`] first (its options:
//! [`super::child::child_main`]).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::peer::{eid_from, eid_json};
use urma_sys as u;

use crate::fixture::Loopback;

/// First argument of a child process.
pub const CHILD_ARG: &str = "--split-child";

/// Exit status of a child that could not reach the other process.
pub const NOT_RUN: i32 = 3;

/// Prefix of a child's trace lines on its stdout.
pub(super) const TRACE: &str = "trace";

/// The end of a child's output: its raw trace (`trace <event>` lines; nothing is written to a
/// file, so the two sides may be on different hosts), its `ctl_calls` and its `problems`.
pub(super) fn print_end(events: &[Value], problems: &[String]) {
    {
        let mut o = std::io::stdout().lock();
        for e in events {
            let _ = writeln!(o, "{TRACE} {e}");
        }
        let _ = o.flush();
    }
    out(&format!(
        "ctl_calls {}",
        crate::loopback_ctl::forbidden_attempts()
    ));
    out(&format!("problems {}", json!(problems)));
}

/// CLOCK_MONOTONIC in ns (the same clock in every process of the host).
pub use ranked_lock::clock::now_ns as monotonic_ns;

/// One line on this child's stdout, flushed at once.
pub(super) fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// Says why the run is not run (`not-run <why>`); the exit status to end the child with.
pub(super) fn not_run(why: &str) -> i32 {
    out(&format!("not-run {why}"));
    NOT_RUN
}

/// The first connection to `l` within `limit`.
pub(super) fn accept(l: &TcpListener, limit: Duration) -> Option<TcpStream> {
    l.set_nonblocking(true).ok()?;
    let end = Instant::now() + limit;
    while Instant::now() < end {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).ok()?;
                return Some(s);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    None
}

/// One line from the other child (without its line end); `None` when none came.
pub(super) fn read_line(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut l = String::new();
    match r.read_line(&mut l) {
        Ok(n) if n > 0 => Some(l.trim_end().to_string()),
        _ => None,
    }
}

/// This process's {uasid, EID} (its context's): two processes are told apart by the pair
/// (two nodes may give their processes the same uasid).
pub(super) fn own_id() -> (u32, u::urma_eid_t) {
    // SAFETY: the fixture's context is live for the process.
    unsafe {
        let c = &*Loopback::get().ctx;
        (c.uasid, c.eid)
    }
}

/// The sender's answer to the endpoint information: its {uasid, EID}.
pub(super) fn id_json(id: (u32, u::urma_eid_t)) -> Value {
    json!({"uasid": id.0, "eid": eid_json(&id.1)})
}

/// Parses [`id_json`]'s form.
pub(super) fn id_from(v: &Value) -> Option<(u32, u::urma_eid_t)> {
    let uasid = u32::try_from(v.get("uasid")?.as_u64()?).ok()?;
    Some((uasid, eid_from(v.get("eid")?)?))
}

/// Whether two {uasid, EID} name the same process: then the provider does not tell the two
/// processes apart, and the run is not run.
pub(super) fn same_process(a: (u32, u::urma_eid_t), b: (u32, u::urma_eid_t)) -> Option<String> {
    // SAFETY: byte views of the unions.
    let same = a.0 == b.0 && unsafe { a.1.raw == b.1.raw };
    same.then(|| {
        format!(
            "both processes have uasid {} on EID {}: the provider does not tell processes apart",
            a.0,
            // SAFETY: as above.
            crate::fixture::eid_string(unsafe { a.1.raw })
        )
    })
}

/// `HOST:PORT`, or a bare port on 127.0.0.1, as a socket address (the first the name gives).
pub fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(port) = s.parse::<u16>() {
        return Ok(([127, 0, 0, 1], port).into());
    }
    s.to_socket_addrs()
        .map_err(|e| format!("'{s}' is not a HOST:PORT address ({e})"))?
        .next()
        .ok_or_else(|| format!("'{s}' names no address"))
}

// ---- the parent's reading of a child's lines

/// The trace lines of a child's stdout, each event tagged with its process (`proc_`).
pub(super) fn child_trace(lines: &[String], proc_: &str) -> Result<Vec<Value>, String> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(TRACE).and_then(|r| r.strip_prefix(' ')))
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))?;
            if let Some(o) = v.as_object_mut() {
                o.insert("proc".into(), json!(proc_));
            }
            Ok(v)
        })
        .collect()
}

/// The `ctl_calls` a child reported (0 when it did not get that far).
pub(super) fn child_ctl_calls(lines: &[String]) -> u64 {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("ctl_calls ")?.trim().parse().ok())
        .unwrap_or(0)
}

/// The `problems` a child reported; `None` without a readable result line.
pub(super) fn child_problems(lines: &[String]) -> Option<Vec<String>> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("problems "))
        .and_then(|p| serde_json::from_str::<Vec<String>>(p).ok())
}

/// The peer-death sender's `waited` object, if one of `lines` is it.
pub(super) fn child_waited(lines: &[String]) -> Option<Value> {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("waited "))
        .and_then(|w| serde_json::from_str(w).ok())
}

/// Why a child said its run is not run.
pub(super) fn not_run_reason(lines: &[String]) -> String {
    lines
        .iter()
        .find_map(|l| l.strip_prefix("not-run "))
        .unwrap_or("a child could not reach the other process")
        .to_string()
}
