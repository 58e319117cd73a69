//! The two-process cell: 14 MiB copy-mode transfers of each library from a sender process to a
//! receiver process over the loopback's cross-process path (docs/loopback.md, "Multiple
//! processes"), MiB/s against the memcpy of the same buffer; reported, not a target. Its child
//! is the sender (`--kind xsend`), which starts the receiver as a child of its own
//! (`--kind xrecv`).
//!
//! The pair exchanges its endpoint information as `compat --split` does (one JSON line of
//! [`EndpointInfo`] over TCP on 127.0.0.1: the receiver's uasid, jetty id and destination
//! segment; the tokens are the fixture's); the sender imports the receiver's jetty and segment
//! in place of its own fixture's local targets.
//!
//! Flow control: the C reference drops a SEND_IMM whose request is not registered yet, so the
//! sender sends request `k` only after the receiver said (a line `k` on the TCP connection)
//! that its `os_transport_recv` for `k` is registered. The receiver keeps [`AHEAD`] receives
//! registered, so the credit for the next request is already there when the sender needs it.
//! The sender keeps one request in flight (depth 1): its send sync ends when the receiver's
//! provider acknowledged the last chunk's SEND_IMM. After the window it says `stop`; the
//! receiver then registers no more and answers `last K`; the sender sends the requests it still
//! holds credits for, and both sides drain. The receiver checks that every chunk reached its
//! callback and that the destination holds the source's bytes, and reports to the sender.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::os_transport::DEFAULT_CHUNK_SIZE;
use testkit::{loopback_ctl as ctl, Buffer, EndpointInfo, Loopback, PairArgs, SegArgs};
use urma_sys as u;

use super::tput::run_closed;
use crate::cell::{About, Cell, Measure, Target, REPORT_ONLY};
use crate::child::{
    endpoints, init_lib, keys, load_lib, post_recv, post_send, shared, wait_sync, watchdog,
    CellCfg, Pollers, WakeFn, SRC_BYTE,
};
use crate::memcpy::memcpy_limit;
use crate::orch::report::fmt_num;
use crate::orch::run::{BenchRun, Cfg, Lib, LEN7};

/// The two-process cell's configuration: 14 MiB copy-mode transfers
/// from a sender process to a receiver process, one request in flight, 2 workers, poll mode.
pub const XPROC: Cfg = Cfg {
    len: LEN7,
    depth: 1,
    workers: 2,
    copy: true,
    event: false,
    rate: 0,
};
const XPROC_METRICS: [&str; 3] = ["rps", "mib_s", "recv_requests"];

pub struct XProc;

const ABOUT: About = About {
    name: "xproc",
    timed: Some("xproc"),
    quick: false,
    measures: &[Measure::own("xsend", send), Measure::own("xrecv", recv)],
};

impl Cell for XProc {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn run(&mut self, ctx: &mut BenchRun) {
        let (secs, libs) = (ctx.opts.secs, ctx.libs.clone());
        run_closed(
            ctx,
            &libs,
            ("xproc", "xsend"),
            &[XPROC],
            secs,
            &XPROC_METRICS,
        );
    }

    fn targets(&self, ctx: &BenchRun, base: &Lib) -> Vec<Target> {
        let lim = memcpy_limit(ctx, XPROC.depth);
        let v = |l: &str| ctx.med("xproc", l, XPROC, "mib_s");
        vec![Target {
            name: "two-process copy-mode 14 MiB bandwidth ÷ memcpy of the same buffer, Rust (C) (depth 1, workers 2; the in-process target does not apply: the socket copies twice)",
            value: format!(
                "{} ({}) ({} and {} MiB/s ÷ {} MiB/s)",
                fmt_num(v("rust") / lim),
                fmt_num(v(&base.name) / lim),
                fmt_num(v("rust")),
                fmt_num(v(&base.name)),
                fmt_num(lim)
            ),
            threshold: REPORT_ONLY,
            ok: None,
        }]
    }

    fn section(&self, ctx: &BenchRun, base: &Lib, md: &mut String) {
        let lim = memcpy_limit(ctx, XPROC.depth);
        let _ = writeln!(
            md,
            "## Two-process copy-mode transfer, 14 MiB (MiB/s; median of reps)\n\n\
             Receiver in a child process, sender in another, over the loopback's per-pair Unix socket \
             (each 2 MiB WRITE copied into the socket and out of it); depth 1, workers {}, poll mode. \
             memcpy of the same buffer (14 MiB source, 2 MiB pieces, 1 destination, 1 thread; best of reps): {} MiB/s.\n",
            XPROC.workers,
            fmt_num(lim)
        );
        let _ = writeln!(
            md,
            "| library | MiB/s | ÷ memcpy | ÷ {} |\n|---|---|---|---|",
            base.label
        );
        let b = ctx.med("xproc", &base.name, XPROC, "mib_s");
        for l in &ctx.libs {
            let v = ctx.med("xproc", &l.name, XPROC, "mib_s");
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                l.label,
                fmt_num(v),
                fmt_num(v / lim),
                fmt_num(v / b)
            );
        }
        let (lo, hi) = ctx.ratio_spread("xproc", base, XPROC, "mib_s");
        let _ = writeln!(
            md,
            "\nRust ÷ {} per repetition: {}–{}.\n",
            base.label,
            fmt_num(lo),
            fmt_num(hi)
        );
    }
}

/// Receives the receiver keeps registered ahead of the sender.
const AHEAD: u64 = 2;
/// Bound on every wait for the other process (connect, a line, its exit).
const PEER_WAIT: Duration = Duration::from_secs(30);

fn read_line(r: &mut impl BufRead) -> Result<String, String> {
    let mut l = String::new();
    match r.read_line(&mut l) {
        Ok(n) if n > 0 => Ok(l.trim_end().to_string()),
        Ok(_) => Err("the other process closed the connection".into()),
        Err(e) => Err(format!("reading from the other process: {e}")),
    }
}

fn say(w: &mut TcpStream, line: &str) -> Result<(), String> {
    writeln!(w, "{line}").map_err(|e| format!("writing to the other process: {e}"))
}

fn own_uasid(lb: &Loopback) -> u32 {
    // SAFETY: the fixture's context is live for the process.
    unsafe { (*lb.ctx).uasid }
}

/// Loopback or callback errors of this process, as an error.
fn check_errors(pollers: Pollers) -> Result<(), String> {
    let (_, poll_errors) = pollers.stop();
    let c = ctl::counters();
    let cb = shared().cb_errors.load(Ordering::Relaxed);
    if c.rnr_errors + c.crs_error + c.crs_overflow + poll_errors + cb > 0 {
        return Err(format!(
            "loopback errors: rnr {} crs_error {} overflow {} poll {poll_errors} callback {cb}",
            c.rnr_errors, c.crs_error, c.crs_overflow
        ));
    }
    Ok(())
}

/// The receiver child: prints `port N`, serves one sender, prints its own result line.
pub fn recv(cfg: &CellCfg) -> Result<String, String> {
    watchdog(Duration::from_secs(120));
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind 127.0.0.1:0: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let lb = Loopback::get();
    ctl::reset();
    ctl::set_nocopy(false);
    let pair = endpoints(lb, cfg.event);
    let mut dst = Buffer::new(lb, cfg.len as usize);
    dst.fill(0);
    let (host, dev) = (dst.info(), pair.device_info(dst.as_ptr().cast()));
    let (lib, _) = load_lib(&cfg.lib)?;
    let h = init_lib(&lib, lb, &pair, cfg)?;
    let pollers = Pollers::start(&pair, h, WakeFn(lib.os_transport_wake_up_task), cfg.event);
    let mut ring = std::collections::VecDeque::new();
    for k in 0..AHEAD {
        ring.push_back(post_recv(&lib, h, host, dev, cfg.len, keys(k).1)?);
    }
    println!("port {port}");
    let _ = std::io::stdout().flush();

    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let end = Instant::now() + PEER_WAIT;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("no sender connected: {e}")),
        }
    };
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    let _ = stream.set_read_timeout(Some(PEER_WAIT));
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(stream);
    // SAFETY: the receiver's jetty and the destination segment are live fixture objects.
    let info = unsafe {
        EndpointInfo {
            uasid: own_uasid(lb),
            jetty: (*pair.receiver.jetty).jetty_id,
            seg: (*dst.tseg).seg,
        }
    };
    say(&mut w, &info.to_json().to_string())?;
    for k in 0..AHEAD {
        say(&mut w, &k.to_string())?;
    }
    // The sender's `stop` arrives while this thread waits for receives.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let got = read_line(&mut r);
            stop.store(true, Ordering::Release);
            got
        })
    };
    let (mut next, mut done, mut stopping) = (AHEAD, 0u64, false);
    while let Some(rs) = ring.pop_front() {
        wait_sync(&lib, h, "recv", rs)?;
        done += 1;
        if !stopping && stop.load(Ordering::Acquire) {
            stopping = true;
            say(&mut w, &format!("last {}", next - 1))?;
        }
        if !stopping {
            ring.push_back(post_recv(&lib, h, host, dev, cfg.len, keys(next).1)?);
            say(&mut w, &next.to_string())?;
            next += 1;
        }
    }
    if !stopping {
        return Err("the receiver ran out of receives before the sender stopped".into());
    }
    match reader.join() {
        Ok(Ok(l)) if l == "stop" => {}
        other => return Err(format!("expected stop from the sender, got {other:?}")),
    }
    let chunks = shared().chunks.load(Ordering::Relaxed);
    let want = done * u64::from(cfg.len.div_ceil(DEFAULT_CHUNK_SIZE));
    if chunks != want {
        return Err(format!(
            "{chunks} chunk callbacks for {done} requests (want {want})"
        ));
    }
    if dst.as_slice().iter().any(|&b| b != SRC_BYTE) {
        return Err("the destination does not hold the source bytes".into());
    }
    check_errors(pollers)?;
    // SAFETY: every receive has been waited on; pollers are stopped.
    let d = unsafe { (lib.os_transport_destroy)(h) };
    drop(pair);
    Ok(format!(
        "recv_requests={done} chunks_cb={chunks} recv_destroy={d}"
    ))
}

/// The sender (the cell the orchestrator runs): starts the receiver child, transfers for
/// `cfg.secs` after a warm-up, returns the result line (the receiver's checks included).
pub fn send(cfg: &CellCfg) -> Result<String, String> {
    watchdog(Duration::from_secs(120));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = testkit::target::command(exe)
        .args(["cell", "--kind", "xrecv", "--lib"])
        .arg(&cfg.lib)
        .args(["--len", &cfg.len.to_string()])
        .args(["--workers", &cfg.workers.to_string()])
        .args(["--event", if cfg.event { "1" } else { "0" }])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the receiver: {e}"))?;
    let mut cout = BufReader::new(child.stdout.take().ok_or("no receiver stdout")?);
    let res = sender(cfg, &mut cout);
    if res.is_err() {
        // Its own error (if any) is still read below; it need not wait for a sender.
        let _ = child.kill();
    }
    // The receiver's last line: its result or its error.
    let mut theirs = Err("the receiver printed no result".to_string());
    while let Ok(l) = read_line(&mut cout) {
        if let Some(v) = l.strip_prefix("RESULT ") {
            theirs = Ok(v.to_string());
        } else if let Some(v) = l.strip_prefix("ERROR ") {
            theirs = Err(format!("receiver: {v}"));
        }
    }
    let _ = child.wait();
    let mine = res?;
    Ok(format!("{mine} {}", theirs?))
}

fn sender(cfg: &CellCfg, cout: &mut impl BufRead) -> Result<String, String> {
    let port = loop {
        let l = read_line(cout)?;
        if let Some(p) = l.strip_prefix("port ") {
            break p.parse::<u16>().map_err(|e| format!("port {p}: {e}"))?;
        }
        if let Some(v) = l.strip_prefix("ERROR ") {
            return Err(format!("receiver: {v}"));
        }
    };
    let stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_read_timeout(Some(PEER_WAIT));
    let mut w = stream.try_clone().map_err(|e| e.to_string())?;
    let mut r = BufReader::new(stream);
    let line = read_line(&mut r)?;
    let info = serde_json::from_str(&line)
        .ok()
        .and_then(|v| EndpointInfo::from_json(&v))
        .ok_or_else(|| format!("bad endpoint information: {line}"))?;

    let lb = Loopback::get();
    ctl::reset();
    ctl::set_nocopy(false);
    if info.uasid == own_uasid(lb) {
        return Err("both processes have the same uasid: no cross-process path".into());
    }
    let mut pair = endpoints(lb, cfg.event);
    // The fixture's local target is replaced by the receiver's jetty and segment.
    let (tjetty, remote) = info.import(lb)?;
    // SAFETY: the fixture's own import of its local receiver, replaced and released once.
    unsafe { u::urma_unimport_jetty(pair.sender.tjetty) };
    pair.sender.tjetty = tjetty;
    let mut src = Buffer::new(lb, cfg.len as usize);
    src.fill(SRC_BYTE);
    let (lib, _) = load_lib(&cfg.lib)?;
    let h = init_lib(&lib, lb, &pair, cfg)?;
    let pollers = Pollers::start(&pair, h, WakeFn(lib.os_transport_wake_up_task), cfg.event);
    let mut ji = pair.jetty_info();
    let mut one = |k: u64| -> Result<(), String> {
        let ss = post_send(
            &lib,
            h,
            &mut ji,
            src.info(),
            remote.info(),
            cfg.len,
            keys(k),
        )?;
        wait_sync(&lib, h, "send", ss)
    };

    // Every line is a credit `k` (the receive of request k is registered), until `last K`.
    let window = Duration::from_secs_f64(cfg.secs);
    let (mut sent, mut n, mut t0, mut secs) = (0u64, 0u64, None::<Instant>, 0.0);
    loop {
        let l = read_line(&mut r)?;
        if l.starts_with("last ") {
            break;
        }
        let k: u64 = l.parse().map_err(|_| format!("unexpected line {l:?}"))?;
        if k != sent {
            return Err(format!("credit {k} out of order (expected {sent})"));
        }
        one(k)?;
        sent += 1;
        match t0 {
            None if sent == cfg.warmup => t0 = Some(Instant::now()),
            Some(t) if secs == 0.0 => {
                n += 1;
                if t.elapsed() >= window {
                    secs = t.elapsed().as_secs_f64();
                    say(&mut w, "stop")?;
                }
            }
            _ => {}
        }
    }
    if secs == 0.0 {
        return Err("the receiver stopped before the window ended".into());
    }
    check_errors(pollers)?;
    // SAFETY: every send has been waited on; pollers are stopped.
    let d = unsafe { (lib.os_transport_destroy)(h) };
    drop(remote);
    drop(pair);
    let mib = f64::from(1024 * 1024);
    Ok(format!(
        "requests={n} secs={secs:.6} rps={:.3} mib_s={:.3} destroy={d}",
        n as f64 / secs,
        n as f64 * f64::from(cfg.len) / secs / mib
    ))
}
