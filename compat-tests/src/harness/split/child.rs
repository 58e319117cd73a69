//! A `compat --split` child: it loads one library, builds a [`ScenarioRun`] of its own (fresh endpoints
//! and buffers, the trace capture) and runs one side of a [`Plan`], as the receiver
//! ([`receiver`]) or the sender ([`sender`]); what it prints and says to the other child is
//! [`super::protocol`]'s.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testkit::peer::EndpointInfo;
use urma_sys as u;

use super::mode::Mode;
use super::plan::{plan, Plan, PlanKind, PEER_DEATH_SKIP};
use super::protocol::{
    accept, id_from, id_json, monotonic_ns, not_run, out, own_id, parse_addr, print_end, read_line,
    same_process,
};
use crate::fixture::Loopback;
use crate::harness::backend;
use crate::harness::ctx::{Delivery, Lib, Order, ScenarioRun, SendVia, Side};
use crate::harness::scenario::Xfer;

/// Timeout of the children's waits (ms).
const WAIT_MS: i64 = 10_000;

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
    // The trace goes back on stdout, to the parent or to the serving node that forwards it over
    // its TCP connection.
    print_end(&events, &problems);
    0
}

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
    let mut ctx = ScenarioRun::new(lib, lib, p.setup);
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
    let mut ctx = ScenarioRun::new(lib, lib, p.setup);
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

/// Waits (bounded) for every request of `syncs` on `side`; a wait that does not return 0 is a
/// problem naming its transfer.
fn wait_all(
    ctx: &mut ScenarioRun,
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
