//! Two processes (`compat --split`): each scenario's receiver and sender run in processes of
//! their own, over the provider's cross-process path (the loopback's, or a device's).
//!
//! The `compat` binary re-executes itself as a child ([`CHILD_ARG`] `recv|send`) that loads
//! one library, builds a [`Ctx`] of its own (fresh endpoints and buffers, the trace capture)
//! and runs one side of a [`Plan`]:
//!
//! * the receiver listens on 127.0.0.1 (or `--listen`) with an ephemeral port (printed as
//!   `port <n>` for the parent), inits its library, starts its pollers and posts its `os_transport_recv`s, then
//!   tells the sender its endpoint information ([`EndpointInfo`]: the context's uasid, the
//!   receive jetty's {EID, uasid, id}, the destination segment's {EID, uasid, va}, length and
//!   token id; the tokens are the fixture's) as one JSON line over TCP;
//! * the sender connects, answers with its own uasid and EID, imports the receiver's jetty and segment
//!   by what it was told (they replace the targets of its own in-process fixture), inits its
//!   library and runs the sends and their waits; it then releases its imports and says `closed`;
//! * the receiver waits for its receives, checks the destination byte for byte against the
//!   pattern the sender's source was filled with (both fill it the same way), waits for
//!   `closed` and tears down.
//!
//! Each child prints its raw trace (the recorder's events and its process's URMA trace) on its
//! stdout; the parent tags every event with its process (`"proc": "recv"|"send"`) and
//! concatenates the receiver's and the sender's. The normaliser keeps the two processes apart
//! (section `api:recv`, `urma:send`, ...), so nothing depends on how the two interleaved.
//!
//! The children take the parent's backend ([`Mode`]: the loopback's trace, or the
//! interposition layer's with `--interpose` / in hardware mode). With two nodes ([`node`]) the
//! receivers are children of the serving node, which forwards their output over TCP.
//!
//! This file holds the plans, the children and how a parent starts them ([`Launch`],
//! [`start_receiver`]); the parent's runs, their verdicts and the reports are [`driver`]'s.
//!
//! A child that finds the provider does not reach the other process (the peer has the same
//! uasid and EID, or the import of its jetty or segment is refused) exits with [`NOT_RUN`]; the run is
//! then reported as not run, never as a result.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::peer::{eid_from, eid_json, EndpointInfo};
use urma_sys as u;

pub mod driver;
pub mod node;

use super::backend;
use super::ctx::{Ctx, Delivery, Lib, Order, SendVia, Setup, Side};
use super::interop;
use super::outcome::Options;
use super::scenario::{self, Body, Flow, Xfer, MIB};
use crate::fixture::{Loopback, RecvKind};
use crate::lib_under_test::DEFAULT_CHUNK_SIZE;

/// First argument of a child process.
pub const CHILD_ARG: &str = "--split-child";

/// Exit status of a child that could not reach the other process.
pub const NOT_RUN: i32 = 3;

/// Longest time the sender's wait may take to fail after the receiver was killed: the
/// provider's peer-death bound (docs/loopback.md, 100 ms) plus the library's reaction and the
/// scheduling of a loaded 2-core machine.
pub const PEER_DEATH_BOUND: Duration = Duration::from_millis(1000);

/// Why peer death is not run in hardware mode.
pub const PEER_DEATH_SKIP: &str = "peer death needs the receiver's receiver-not-ready wait made \
     longer than the run (the loopback's rnr_timeout_ms), so that the transfer stalls until the \
     kill; a provider treated as unknown offers no such setting";

/// Why peer death is not run with the receiver on a serving node.
pub const PEER_DEATH_NODE_SKIP: &str = "peer death kills the receiver process at a moment the \
     sender's node notes on its own clock (CLOCK_MONOTONIC); with the receiver on another node \
     neither the kill nor the clock is the driver's";

/// Timeout of the children's waits (ms).
const WAIT_MS: i64 = 10_000;

/// What a two-process run does.
#[derive(Clone)]
pub enum PlanKind {
    /// A catalogue scenario: the C pair and the Rust pair are compared.
    Scenario,
    /// A cell of the interop matrix's two-process column.
    Interop,
    /// The receiver is killed mid-transfer; the sender's wait must fail within the bound.
    PeerDeath,
}

/// One two-process run.
#[derive(Clone)]
pub struct Plan {
    pub id: String,
    pub desc: String,
    pub setup: Setup,
    pub flow: Flow,
    pub kind: PlanKind,
}

/// A catalogue flow whose sender and receiver can be split: receive-side CRs handed over as
/// polled (no delivery order imposed across processes), no loopback knob (knobs count per
/// process), every transfer starting (1 byte ..= 14 MiB, 40-bit keys) after its receive, through the JFS,
/// to a receive jetty, with data copied.
pub fn splittable(sc: &scenario::Scenario) -> Option<Flow> {
    let Body::Flow(f) = &sc.body else {
        return None;
    };
    let ok = f.delivery == Delivery::Pass
        && f.knobs.is_empty()
        && f.via == SendVia::Jfs
        && f.dup_held.is_none()
        && f.capacity >= 1
        && sc.setup.recv_kind == RecvKind::Jetty
        && !sc.setup.nocopy
        && !f.xfers.is_empty()
        && f.xfers.iter().all(|x| {
            !x.early
                && x.cb_fail.is_none()
                && x.recv_len == x.len
                && x.len >= 1
                && x.len <= 7 * DEFAULT_CHUNK_SIZE
                && x.sk < 1 << 40
                && x.ck < 1 << 40
        });
    ok.then(|| f.clone())
}

/// Every plan: the splittable catalogue scenarios, the interop column's cells
/// (`xp-<dir>-<len>`) and the peer-death runs.
pub fn plans() -> Vec<Plan> {
    let mut v: Vec<Plan> = scenario::catalogue()
        .iter()
        .filter_map(|sc| {
            splittable(sc).map(|flow| Plan {
                id: sc.id.clone(),
                desc: sc.desc.clone(),
                setup: sc.setup,
                flow,
                kind: PlanKind::Scenario,
            })
        })
        .collect();
    let mut lens = interop::LENS.to_vec();
    lens.insert(0, 1);
    for len in lens {
        let ck = 0xC0FFEE + len as u64;
        v.push(Plan {
            id: format!("xp-{len}"),
            desc: format!("interop, two processes, {len} bytes"),
            setup: Setup {
                buf_len: (len as usize).max(4 << 20),
                ..Default::default()
            },
            flow: Flow {
                xfers: vec![Xfer::new(len, 0x5EED + len as u64, ck)],
                ..Default::default()
            },
            kind: PlanKind::Interop,
        });
    }
    v.push(Plan {
        id: "peer-death".into(),
        desc: "14 MiB; the receiver process is killed (SIGKILL) mid-transfer; the sender's \
               wait_and_free_sync_timeout must fail within the bound"
            .into(),
        setup: Setup {
            buf_len: 14 * MIB as usize,
            ..Default::default()
        },
        // Capacity 1: the receiver's library posts 4 recv WRs and, its receive-side CRs held,
        // never re-posts them; the fifth SEND_IMM waits for a recv WR (the receiver's RNR wait
        // is made long), so the transfer stalls mid-way until the receiver dies.
        flow: Flow {
            workers: 2,
            capacity: 1,
            xfers: vec![Xfer::new(14 * MIB, 0xDEAD, 0xBEEF)],
            ..Default::default()
        },
        kind: PlanKind::PeerDeath,
    });
    v
}

fn plan(id: &str) -> Option<Plan> {
    plans().into_iter().find(|p| p.id == id)
}

/// CLOCK_MONOTONIC in ns (the same clock in every process of the host).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// ---- the child ---------------------------------------------------------------------------------

fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

fn not_run(why: &str) -> i32 {
    out(&format!("not-run {why}"));
    NOT_RUN
}

fn read_line(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut l = String::new();
    match r.read_line(&mut l) {
        Ok(n) if n > 0 => Some(l.trim_end().to_string()),
        _ => None,
    }
}

/// This process's {uasid, EID} (its context's): two processes are told apart by the pair
/// (two nodes may give their processes the same uasid).
fn own_id() -> (u32, u::urma_eid_t) {
    // SAFETY: the fixture's context is live for the process.
    unsafe {
        let c = &*Loopback::get().ctx;
        (c.uasid, c.eid)
    }
}

fn id_json(id: (u32, u::urma_eid_t)) -> Value {
    json!({"uasid": id.0, "eid": eid_json(&id.1)})
}

fn id_from(v: &Value) -> Option<(u32, u::urma_eid_t)> {
    let uasid = u32::try_from(v.get("uasid")?.as_u64()?).ok()?;
    Some((uasid, eid_from(v.get("eid")?)?))
}

/// Whether two {uasid, EID} name the same process: then the provider does not tell the two
/// processes apart, and the run is not run.
fn same_process(a: (u32, u::urma_eid_t), b: (u32, u::urma_eid_t)) -> Option<String> {
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

/// Who records the trace and injects the faults of the children: the parent's own backend,
/// passed on in the children's arguments ([`Mode::child_args`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Mode {
    /// The loopback's own trace and knobs.
    #[default]
    Loopback,
    /// The interposition layer in front of the loopback (`--interpose`).
    Interpose,
    /// Hardware mode (`--device NAME [--eid EID]`): the layer in front of a provider treated as
    /// unknown, no `urma_loopback_*` call.
    Hardware { device: String, eid: Option<String> },
}

impl Mode {
    /// The backend's name in reports (`loopback`, `interpose`, `hardware`).
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Loopback => "loopback",
            Mode::Interpose => "interpose",
            Mode::Hardware { .. } => "hardware",
        }
    }

    /// The arguments that put a child in this mode.
    pub fn child_args(&self) -> Vec<String> {
        match self {
            Mode::Loopback => Vec::new(),
            Mode::Interpose => vec!["--interpose".into()],
            Mode::Hardware { device, eid } => {
                let mut v = vec!["--device".to_string(), device.clone()];
                if let Some(e) = eid {
                    v.extend(["--eid".to_string(), e.clone()]);
                }
                v
            }
        }
    }

    /// Chooses this mode's backend in a child (the layer, when needed, is already this
    /// process's `liburma.so.0`: the children inherit the parent's environment).
    fn enter(&self) -> Result<(), String> {
        match self {
            Mode::Loopback => Ok(()),
            Mode::Interpose => {
                if !crate::interpose_ctl::present() {
                    return Err(
                        "--interpose: the interposition layer is not this process's \
                                liburma.so.0"
                            .into(),
                    );
                }
                backend::set(&backend::INTERPOSE)
            }
            Mode::Hardware { device, eid } => {
                let eid = eid.as_deref().map(crate::parse_eid).transpose()?;
                backend::enter_hardware(device, eid).map(|_| ())
            }
        }
    }
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

/// `compat --split-child --role recv|send --lib PATH --slot N --plan ID [--listen IP]
/// [--connect HOST:PORT] [--interpose | --device NAME [--eid EID]]`. Prints its raw trace on
/// stdout (`trace <event>` lines), then `ctl_calls <n>` and `problems <json>`. Returns the exit
/// status.
pub fn child_main(args: &[String]) -> i32 {
    let mut role = String::new();
    let mut lib = PathBuf::new();
    let mut slot = 0u32;
    let mut plan_id = String::new();
    let mut listen = String::from("127.0.0.1");
    let mut connect: Option<String> = None;
    let mut mode = Mode::Loopback;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--interpose" {
            mode = Mode::Interpose;
            continue;
        }
        let v = it.next().cloned().unwrap_or_default();
        match a.as_str() {
            "--role" => role = v,
            "--lib" => lib = PathBuf::from(v),
            "--slot" => slot = v.parse().unwrap_or(0),
            "--plan" => plan_id = v,
            "--listen" => listen = v,
            "--connect" => connect = Some(v),
            "--device" => {
                mode = Mode::Hardware {
                    device: v,
                    eid: None,
                }
            }
            "--eid" => {
                if let Mode::Hardware { eid, .. } = &mut mode {
                    *eid = Some(v);
                }
            }
            _ => {
                eprintln!("compat: split child: unknown argument {a}");
                return 2;
            }
        }
    }
    let Some(p) = plan(&plan_id) else {
        eprintln!("compat: split child: unknown plan {plan_id}");
        return 2;
    };
    if let Err(e) = mode.enter() {
        eprintln!("compat: split child: {e}");
        return 2;
    }
    let name = if slot == 0 { "legacy" } else { "rust" };
    let lib = match Lib::load(&lib, slot, name) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("compat: split child: {e}");
            return 2;
        }
    };
    let mut problems: Vec<String> = Vec::new();
    let events = match (role.as_str(), connect) {
        ("recv", _) => match receiver(lib, &p, &listen, &mut problems) {
            Ok(ev) => ev,
            Err(code) => return code,
        },
        ("send", Some(to)) => {
            let addr = match parse_addr(&to) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("compat: split sender: --connect: {e}");
                    return 2;
                }
            };
            match sender(lib, &p, addr, &mut problems) {
                Ok(ev) => ev,
                Err(code) => return code,
            }
        }
        _ => {
            eprintln!("compat: split child: needs --role recv, or --role send with --connect");
            return 2;
        }
    };
    // The trace goes back on stdout (to the parent, or to the serving node that forwards it
    // over its TCP connection): nothing is written to a file, so the two sides may be on
    // different hosts.
    {
        let mut o = std::io::stdout().lock();
        for e in &events {
            let _ = writeln!(o, "{TRACE} {e}");
        }
        let _ = o.flush();
    }
    out(&format!(
        "ctl_calls {}",
        crate::loopback_ctl::forbidden_attempts()
    ));
    out(&format!("problems {}", json!(problems)));
    0
}

/// Prefix of a child's trace lines on its stdout.
const TRACE: &str = "trace";

fn receiver(
    lib: &'static Lib,
    p: &Plan,
    listen: &str,
    problems: &mut Vec<String>,
) -> Result<Vec<Value>, i32> {
    let listener = TcpListener::bind((listen, 0)).map_err(|e| {
        eprintln!("compat: split receiver: bind {listen}:0: {e}");
        2
    })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut ctx = Ctx::new(lib, lib, p.setup);
    ctx.pace = false;
    let f = &p.flow;
    let death = matches!(p.kind, PlanKind::PeerDeath);
    if death {
        // The receiver's RNR wait (the responder's, in this process) outlasts the run, so the
        // stalled SEND_IMM waits for the kill instead of failing on its own.
        match backend::get().provider_knobs("rnr_timeout_ms=60000") {
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                eprintln!("compat: split receiver: {e}");
                return Err(2);
            }
            None => return Err(not_run(PEER_DEATH_SKIP)),
        }
    }
    if ctx.init(Side::Recv, f.workers, f.capacity) != 0 || ctx.hr.is_null() {
        problems.push("receiver init failed".into());
    }
    ctx.start_pollers(if death {
        Delivery::Held(Order::Fifo)
    } else {
        Delivery::Pass
    });
    let mut syncs = Vec::new();
    if !death {
        for x in &f.xfers {
            let (r, s) = ctx.recv(x.recv_len, x.ck, x.off);
            if r != 0 {
                problems.push(format!("recv returned {r}"));
            }
            syncs.push(s);
        }
    }
    out(&format!("port {port}"));
    let stream = accept(&listener, Duration::from_secs(20)).ok_or_else(|| {
        eprintln!("compat: split receiver: no sender connected within 20 s");
        2
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut w = stream.try_clone().map_err(|_| 2)?;
    let mut r = BufReader::new(stream);
    let me = own_id();
    // SAFETY: the receiver's jetty and the destination segment are live fixture objects.
    let info = unsafe {
        EndpointInfo {
            uasid: me.0,
            jetty: (*ctx.pair.receiver.jetty).jetty_id,
            seg: (*ctx.dst.tseg).seg,
        }
    };
    if writeln!(w, "{}", info.to_json()).is_err() {
        eprintln!("compat: split receiver: sending the endpoint information failed");
        return Err(2);
    }
    let peer = read_line(&mut r)
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .and_then(|v| id_from(&v));
    let Some(peer) = peer else {
        eprintln!("compat: split receiver: no answer from the sender");
        return Err(2);
    };
    if let Some(why) = same_process(peer, me) {
        return Err(not_run(&why));
    }
    if death {
        // Until killed: the sender closes only if something went wrong.
        let l = read_line(&mut r);
        eprintln!("compat: split receiver: still alive, the sender said {l:?}");
        return Err(1);
    }
    wait_all(&mut ctx, Side::Recv, &syncs, &f.xfers, problems);
    for x in &f.xfers {
        if !ctx.check_data(&format!("data ck=0x{:x}", x.ck), x.off, x.len as usize) {
            problems.push(format!("data ck=0x{:x} differs", x.ck));
        }
    }
    if read_line(&mut r).as_deref() != Some("closed") {
        problems.push("the sender did not close".into());
    }
    Ok(ctx.finish())
}

fn accept(l: &TcpListener, limit: Duration) -> Option<TcpStream> {
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

fn sender(
    lib: &'static Lib,
    p: &Plan,
    to: std::net::SocketAddr,
    problems: &mut Vec<String>,
) -> Result<Vec<Value>, i32> {
    let stream = TcpStream::connect_timeout(&to, Duration::from_secs(10)).map_err(|e| {
        eprintln!("compat: split sender: connect {to}: {e}");
        2
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut w = stream.try_clone().map_err(|_| 2)?;
    let mut r = BufReader::new(stream);
    let Some(info) = read_line(&mut r)
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .and_then(|v| EndpointInfo::from_json(&v))
    else {
        eprintln!("compat: split sender: no endpoint information from the receiver");
        return Err(2);
    };
    let me = own_id();
    if writeln!(w, "{}", id_json(me)).is_err() {
        return Err(2);
    }
    if let Some(why) = same_process((info.uasid, info.jetty.eid), me) {
        return Err(not_run(&why));
    }
    let lb = Loopback::get();
    let mut ctx = Ctx::new(lib, lib, p.setup);
    ctx.pace = false;
    // The targets of this process's own fixture are replaced by the receiver's objects.
    let (tjetty, rdst) = info.import(lb).map_err(not_run)?;
    // SAFETY: the fixture's own import of its local receiver, replaced and released once.
    unsafe { u::urma_unimport_jetty(ctx.pair.sender.tjetty) };
    ctx.pair.sender.tjetty = tjetty;
    ctx.rdst = rdst;
    let f = &p.flow;
    if ctx.init(Side::Send, f.workers, f.capacity) != 0 || ctx.hs.is_null() {
        problems.push("sender init failed".into());
    }
    ctx.start_pollers(Delivery::Pass);
    let mut syncs = Vec::new();
    for x in &f.xfers {
        let (rc, s) = ctx.send_ex(x.len, x.sk, x.ck, x.off, SendVia::Jfs);
        if rc != 0 {
            problems.push(format!("send ck=0x{:x} returned {rc}", x.ck));
        }
        syncs.push(s);
    }
    if matches!(p.kind, PlanKind::PeerDeath) {
        out("posted");
        if let Some(Some(s)) = syncs.first() {
            let (rc, st) = ctx.wait(Side::Send, s, Some(WAIT_MS));
            out(&format!(
                "waited {}",
                json!({"ret": rc, "status": st, "t_ns": monotonic_ns()})
            ));
        }
    } else {
        wait_all(&mut ctx, Side::Send, &syncs, &f.xfers, problems);
    }
    // A CR of a WR to another process comes with the peer's acknowledgement, possibly after
    // the wait returned: hand every one over before the pollers stop, as in-process (where a
    // post returns with its CRs queued) they always are.
    let end = Instant::now() + Duration::from_secs(5);
    while ctx.send_seen() < backend::get().send_wrs() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ev = ctx.finish();
    let _ = writeln!(w, "closed");
    Ok(ev)
}

// ---- the parent ---------------------------------------------------------------------------------

/// A library as the parent hands it to a child.
#[derive(Debug, Clone)]
pub struct LibRef {
    pub path: PathBuf,
    pub slot: u32,
    pub name: &'static str,
}

/// Waits (bounded) for every request of `syncs` on `side`; a wait that does not return 0 is a
/// problem naming its transfer.
fn wait_all(
    ctx: &mut Ctx,
    side: Side,
    syncs: &[Option<String>],
    xfers: &[Xfer],
    problems: &mut Vec<String>,
) {
    let what = if side == Side::Recv { "recv" } else { "send" };
    for (s, x) in syncs.iter().zip(xfers) {
        if let Some(s) = s {
            let (rc, st) = ctx.wait(side, s, Some(WAIT_MS));
            if rc != 0 {
                problems.push(format!(
                    "{what} wait ck=0x{:x} returned {rc} status {st}",
                    x.ck
                ));
            }
        }
    }
}

struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
    err: std::thread::JoinHandle<String>,
}

/// How the parent starts the children of a run: the harness executable and the backend they
/// use.
pub struct Launch {
    pub exe: PathBuf,
    pub mode: Mode,
}

fn spawn(
    launch: &Launch,
    role: &str,
    lib: &LibRef,
    plan: &str,
    extra: &[String],
) -> Result<Proc, String> {
    let exe = &launch.exe;
    let mut c = Command::new(exe);
    c.arg(CHILD_ARG)
        .args(["--role", role, "--plan", plan])
        .arg("--lib")
        .arg(&lib.path)
        .args(["--slot", &lib.slot.to_string()])
        .args(launch.mode.child_args())
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", exe.display()))?;
    let so = child.stdout.take().ok_or("no stdout")?;
    let mut se = child.stderr.take().ok_or("no stderr")?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(so).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    Ok(Proc { child, lines, err })
}

impl Proc {
    /// The next stdout line starting with `prefix` (others are kept in `seen`), within `limit`.
    fn expect(&self, prefix: &str, limit: Duration, seen: &mut Vec<String>) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Some(l[prefix.len()..].trim().into()),
                Ok(l) => seen.push(l),
                Err(_) => return None,
            }
        }
    }

    /// Waits for the exit (killing the process after `limit`); status code (-1 if killed or
    /// signalled), remaining stdout lines, stderr.
    fn finish(mut self, limit: Duration) -> ChildEnd {
        let end = Instant::now() + limit;
        let code = loop {
            match self.child.try_wait() {
                Ok(Some(st)) => break st.code().unwrap_or(-1),
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(5)),
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break -1;
                }
            }
        };
        let mut rest = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            rest.push(l);
        }
        (code, rest, self.err.join().unwrap_or_default())
    }
}

/// How a child ended: exit status (-1 if killed or signalled), its stdout lines after the
/// ones already read, its stderr.
pub type ChildEnd = (i32, Vec<String>, String);

/// Bound of a receiver's start (its `port` line) and of its end after the sender's.
const RECV_START: Duration = Duration::from_secs(20);
const RECV_END: Duration = Duration::from_secs(30);

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
pub struct ReceiverChild(Proc);

impl ReceiverChild {
    /// Waits for its end, killing it after `limit`.
    pub fn finish(self, limit: Duration) -> ChildEnd {
        self.0.finish(limit)
    }
}

/// The libraries of a run, as the children load them.
fn lib_refs(opts: &Options) -> (LibRef, LibRef) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_has_splittable_flows_and_leaves_out_the_rest() {
        let p = plans();
        let ids: Vec<&str> = p.iter().map(|p| p.id.as_str()).collect();
        assert!(
            ids.contains(&"len-6m+5") && ids.contains(&"event-mode"),
            "{ids:?}"
        );
        // Knobs, held delivery and transfers that never start cannot be split.
        for no in [
            "len-14m+1",
            "key-2^40",
            "recv-reverse",
            "error-cr",
            "early-send-imm",
        ] {
            assert!(!ids.contains(&no), "{no} in {ids:?}");
        }
        assert!(ids.contains(&"peer-death") && ids.contains(&"xp-1"));
    }
}
