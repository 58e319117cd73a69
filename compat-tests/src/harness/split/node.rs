//! Two nodes: `compat --split --serve ADDR` (the serving node, B) runs the receiver child of
//! every run that `compat --split --peer ADDR` (the driving node, A) asks for; A runs the
//! senders, compares and writes the report.
//!
//! The children are the same as in one-node `--split` ([`super::child::child_main`]): B starts each
//! receiver with `--listen <B's address>` and forwards what it prints (its port, its trace,
//! its result) to A over one TCP connection, one JSON object a line:
//!
//! * A → B `{"hello": PROTOCOL, "version", "catalogue", "backend"}`; B answers the same
//!   object, or `{"error": why}` when the two ends differ (then both stop);
//! * A → B `{"recv": plan id, "lib": "legacy"|"rust"}`; B answers `{"port": n}` once its child
//!   printed one (or `{"end": ...}` at once when it did not), then `{"end": {"code", "lines",
//!   "err"}}` when the child ended (bounded by [`super::supervise::RECV_END`] after the sender's end);
//! * A → B `{"done": true}`; B answers `{"bye": true, "ctl_calls": n}` and exits 0.
//!
//! Every wait is bounded: B waits [`peer_wait`] for A to come and [`IDLE`] between requests;
//! A retries its connection for [`peer_wait`] and waits [`REPLY`] for each answer. A connection
//! that breaks ends B with exit 1 and turns every later run of A into a FAIL naming it (the
//! runs already made stay in the report).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::mode::Mode;
use super::plan::plans;
use super::protocol::{accept, parse_addr};
use super::supervise::{lib_refs, start_receiver, ChildEnd, Launch, LibRef};
use crate::harness::outcome::Options;

/// Version of the node protocol (the hello's `hello`).
pub const PROTOCOL: u32 = 1;

/// Longest wait of one end for the other to come (`COMPAT_PEER_WAIT` seconds, default 120).
pub fn peer_wait() -> Duration {
    let s = std::env::var("COMPAT_PEER_WAIT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(120);
    Duration::from_secs(s)
}

/// Longest silence of the driver between two requests before the serving node gives up.
const IDLE: Duration = Duration::from_secs(300);

/// Longest life of a receiver on the serving node, from its port on: the sender's run (its
/// own bound is 60 s) and the receiver's end.
const SERVE_RECV_END: Duration = Duration::from_secs(90);

/// Longest wait of the driver for one answer of the serving node (a receiver's start and end
/// are bounded well below it).
const REPLY: Duration = Duration::from_secs(120);

/// A digest of the two-process catalogue (every plan's id, description, set-up and flow): both
/// ends must run the same plans under the same names.
pub fn catalogue_digest() -> String {
    // FNV-1a, 64 bits: stable across builds and architectures.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in plans() {
        let text = format!("{}|{}|{:?}|{:?};", p.id, p.desc, p.setup, p.flow);
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The first line each end sends: what must be the same on both.
pub fn hello(mode: &Mode) -> Value {
    json!({
        "hello": PROTOCOL,
        "version": env!("CARGO_PKG_VERSION"),
        "catalogue": catalogue_digest(),
        "backend": mode.name(),
    })
}

/// What differs between two hellos (None: they match).
fn hello_mismatch(mine: &Value, theirs: &Value) -> Option<String> {
    let what = [
        ("hello", "node protocol"),
        ("version", "compat version"),
        ("catalogue", "two-process catalogue"),
        ("backend", "backend"),
    ];
    let diff: Vec<String> = what
        .iter()
        .filter(|(k, _)| mine.get(k) != theirs.get(k))
        .map(|(k, name)| {
            format!(
                "{name}: here {}, there {}",
                mine.get(k).unwrap_or(&Value::Null),
                theirs.get(k).unwrap_or(&Value::Null)
            )
        })
        .collect();
    (!diff.is_empty()).then(|| diff.join("; "))
}

/// One JSON line from `r`; the error says why there is none (closed, no answer in time, a
/// read error, or not JSON).
fn read_json(r: &mut BufReader<TcpStream>) -> Result<Value, String> {
    let mut l = String::new();
    match r.read_line(&mut l) {
        Ok(0) => Err("the connection was closed".into()),
        Ok(_) => serde_json::from_str(l.trim_end()).map_err(|e| format!("not JSON ({e}): {l}")),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err("no answer in time".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

fn write_json(w: &mut TcpStream, v: &Value) -> Result<(), String> {
    writeln!(w, "{v}")
        .and_then(|_| w.flush())
        .map_err(|e| e.to_string())
}

fn end_json(end: &ChildEnd) -> Value {
    json!({"end": {"code": end.0, "lines": end.1, "err": end.2}})
}

fn end_from(v: &Value) -> Option<ChildEnd> {
    let e = v.get("end")?;
    let code = i32::try_from(e.get("code")?.as_i64()?).ok()?;
    let lines = e
        .get("lines")?
        .as_array()?
        .iter()
        .map(|l| l.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()?;
    let err = e.get("err")?.as_str()?.to_string();
    Some((code, lines, err))
}

/// The driver's connection to the serving node.
pub struct Node {
    addr: SocketAddr,
    r: BufReader<TcpStream>,
    w: TcpStream,
    /// Why the connection is unusable (every later run FAILs with it).
    broken: Option<String>,
}

impl Node {
    /// Connects to the node serving at `addr` (retrying for `wait`: it may start after this
    /// end) and exchanges hellos. Err names a bad address, a node that never came, or what
    /// differs between the two ends.
    pub fn connect(addr: &str, mode: &Mode, wait: Duration) -> Result<Node, String> {
        let to = parse_addr(addr)?;
        let end = Instant::now() + wait;
        let stream = loop {
            match TcpStream::connect_timeout(&to, Duration::from_secs(5)) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= end => {
                    return Err(format!(
                        "no serving node answered at {to} within {} s (last error: {e}); start \
                         `compat --split --serve {addr}` on the other node first",
                        wait.as_secs()
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(REPLY))
            .map_err(|e| e.to_string())?;
        let mut w = stream.try_clone().map_err(|e| e.to_string())?;
        let mut r = BufReader::new(stream);
        let mine = hello(mode);
        write_json(&mut w, &mine)?;
        let theirs = read_json(&mut r).map_err(|e| format!("the serving node's hello: {e}"))?;
        if let Some(e) = theirs.get("error").and_then(Value::as_str) {
            return Err(format!("the serving node refused this driver: {e}"));
        }
        if let Some(d) = hello_mismatch(&mine, &theirs) {
            return Err(format!("the two ends differ: {d}"));
        }
        Ok(Node {
            addr: to,
            r,
            w,
            broken: None,
        })
    }

    /// The serving node's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn broken_end(&self) -> ChildEnd {
        (
            2,
            Vec::new(),
            format!(
                "the serving node at {} is gone: {}",
                self.addr,
                self.broken.as_deref().unwrap_or("")
            ),
        )
    }

    fn ask(&mut self, v: &Value) -> Result<Value, String> {
        if let Some(b) = &self.broken {
            return Err(b.clone());
        }
        let res = write_json(&mut self.w, v).and_then(|_| read_json(&mut self.r));
        if let Err(e) = &res {
            self.broken = Some(e.clone());
        }
        res
    }

    /// Starts the receiver of `plan` with `lib` on the serving node: Ok((the node's host as
    /// the sender connects to it, the receiver's port)) or how it ended without a port.
    pub fn start_receiver(&mut self, plan: &str, lib: &LibRef) -> Result<(String, u16), ChildEnd> {
        let v = self
            .ask(&json!({"recv": plan, "lib": lib.name}))
            .map_err(|_| self.broken_end())?;
        if let Some(port) = v
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
        {
            return Ok((self.addr.ip().to_string(), port));
        }
        Err(end_from(&v)
            .unwrap_or_else(|| (2, Vec::new(), format!("the serving node answered {v}"))))
    }

    /// The end of the receiver started last.
    pub fn finish_receiver(&mut self) -> ChildEnd {
        if self.broken.is_some() {
            return self.broken_end();
        }
        match read_json(&mut self.r) {
            Ok(v) => end_from(&v)
                .unwrap_or_else(|| (2, Vec::new(), format!("the serving node answered {v}"))),
            Err(e) => {
                self.broken = Some(e);
                self.broken_end()
            }
        }
    }

    /// Tells the serving node the run is over: Ok(its `urma_loopback_*` call count).
    pub fn done(&mut self) -> Result<u64, String> {
        if let Some(b) = &self.broken {
            return Err(format!(
                "the connection to the serving node at {} broke mid-run: {b}",
                self.addr
            ));
        }
        let v = self
            .ask(&json!({"done": true}))
            .map_err(|e| format!("the serving node at {} did not say goodbye: {e}", self.addr))?;
        Ok(v.get("ctl_calls").and_then(Value::as_u64).unwrap_or(0))
    }
}

/// `compat --split --serve ADDR`: listens on `ADDR` (`HOST:PORT`, reachable from the driving
/// node), waits [`peer_wait`] for one driver, then runs the receiver child of each run it asks
/// for (its own libraries, `--rust-lib` / `--legacy-lib`, in `mode`) until it says done. Exit
/// status: 0 after `done`, 1 when the driver went away mid-run or differs from this end, 2 on
/// set-up errors (the address cannot be listened on, no driver came).
pub fn serve(opts: &Options, mode: Mode, addr: &str) -> i32 {
    let to = match parse_addr(addr) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("compat: --serve: {e}");
            return 2;
        }
    };
    let listener = match TcpListener::bind(to) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("compat: --serve: cannot listen on {to}: {e}");
            return 2;
        }
    };
    let wait = peer_wait();
    println!(
        "compat --split --serve: listening on {}; waiting at most {} s for `compat --split --peer`",
        listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        wait.as_secs()
    );
    let Some(stream) = accept(&listener, wait) else {
        eprintln!(
            "compat: --serve: no driver connected to {to} within {} s",
            wait.as_secs()
        );
        return 2;
    };
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if stream.set_read_timeout(Some(IDLE)).is_err() {
        return 2;
    }
    let Ok(mut w) = stream.try_clone() else {
        return 2;
    };
    let mut r = BufReader::new(stream);
    let mine = hello(&mode);
    let theirs = match read_json(&mut r) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("compat: --serve: the driver at {peer} sent no hello: {e}");
            return 1;
        }
    };
    if let Some(d) = hello_mismatch(&mine, &theirs) {
        let _ = write_json(&mut w, &json!({ "error": d }));
        eprintln!("compat: --serve: the driver at {peer} differs from this end: {d}");
        return 1;
    }
    if write_json(&mut w, &mine).is_err() {
        return 1;
    }
    println!("compat --split --serve: driver {peer} connected");
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("compat: --serve: where am I: {e}");
            return 2;
        }
    };
    let launch = Launch { exe, mode };
    let (c, rust) = lib_refs(opts);
    // The receivers listen on the address the driver reached (any, when serving on all).
    let listen = to.ip().to_string();
    let mut runs = 0u32;
    loop {
        let req = match read_json(&mut r) {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "compat: --serve: the driver at {peer} went away before saying done ({e}) \
                     after {runs} runs"
                );
                return 1;
            }
        };
        if req.get("done").is_some() {
            let calls = crate::loopback_ctl::forbidden_attempts();
            let _ = write_json(&mut w, &json!({"bye": true, "ctl_calls": calls}));
            println!("compat --split --serve: done after {runs} runs");
            return 0;
        }
        let (Some(plan), Some(lib)) = (
            req.get("recv").and_then(Value::as_str),
            req.get("lib").and_then(Value::as_str),
        ) else {
            let _ = write_json(&mut w, &json!({"error": format!("unknown request {req}")}));
            eprintln!("compat: --serve: unknown request {req}");
            return 1;
        };
        let lib = match lib {
            "legacy" => &c,
            "rust" => &rust,
            other => {
                let end = (2, Vec::new(), format!("unknown library {other}"));
                if write_json(&mut w, &end_json(&end)).is_err() {
                    return 1;
                }
                continue;
            }
        };
        runs += 1;
        let sent = match start_receiver(&launch, plan, lib, &listen) {
            Ok((child, port)) => write_json(&mut w, &json!({ "port": port }))
                .and_then(|_| write_json(&mut w, &end_json(&child.finish(SERVE_RECV_END)))),
            Err(end) => write_json(&mut w, &end_json(&end)),
        };
        if let Err(e) = sent {
            eprintln!("compat: --serve: the driver at {peer} went away mid-run ({e})");
            return 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hellos_that_differ_name_what_differs() {
        let a = hello(&Mode::Hardware {
            device: "d".into(),
            eid: None,
        });
        assert_eq!(hello_mismatch(&a, &a.clone()), None);
        let mut b = a.clone();
        b["version"] = json!("0.0.0");
        b["backend"] = json!("loopback");
        let d = hello_mismatch(&a, &b).expect("a difference");
        assert!(
            d.contains("compat version") && d.contains("backend") && !d.contains("catalogue"),
            "{d}"
        );
        assert_eq!(catalogue_digest(), catalogue_digest());
        assert_eq!(catalogue_digest().len(), 16);
    }

    #[test]
    fn a_child_end_crosses_the_connection_intact() {
        let end: ChildEnd = (
            3,
            vec!["trace {\"k\":\"api\"}".into(), "problems []".into()],
            "stderr\nlast".into(),
        );
        assert_eq!(end_from(&end_json(&end)), Some(end));
        assert_eq!(end_from(&json!({"end": {"code": 0}})), None);
    }

    #[test]
    fn addresses_are_host_port_or_a_bare_port() {
        assert_eq!(
            parse_addr("47311").unwrap(),
            "127.0.0.1:47311".parse().unwrap()
        );
        assert_eq!(parse_addr("[::1]:5").unwrap(), "[::1]:5".parse().unwrap());
        assert!(parse_addr("10.0.0.1").is_err());
        assert!(parse_addr("host:port")
            .unwrap_err()
            .contains("is not a HOST:PORT address"));
    }
}
