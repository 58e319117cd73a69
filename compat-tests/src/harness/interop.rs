//! The interop matrix: the reference C library on one side of a transfer and the Rust library
//! on the other, in one process.
//!
//! Both libraries are dlopened with `RTLD_LOCAL | RTLD_DEEPBIND`, so each has its own globals
//! (its single-instance flag, pool, log state) and each binds its own symbols first; both share
//! the one loopback `liburma.so.0` of the process, which is what connects them (the loopback is
//! in-process: two processes could not talk through it). The sender library gets the send-side
//! CRs (send JFC), the receiver library the receive-side CRs (recv JFC).

use std::sync::mpsc;
use std::time::Duration;

use super::ctx::{Delivery, Lib, ScenarioRun, Setup, Side};
use super::scenario::MIB;

/// One cell of the matrix.
#[derive(Debug, Clone)]
pub struct Cell {
    pub dir: String,
    pub len: u32,
    pub ok: bool,
    pub detail: String,
}

/// Lengths of the matrix (both directions), plus 1 byte from Rust to C (D1).
pub const LENS: &[u32] = &[
    2 * MIB + 1,
    4 * MIB,
    6 * MIB + 5,
    8 * MIB + 3,
    10 * MIB,
    12 * MIB + 1,
    14 * MIB,
];

fn one(slib: &'static Lib, rlib: &'static Lib, len: u32) -> (bool, String) {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("compat-interop".into())
        .spawn(move || {
            let mut ctx = ScenarioRun::new(
                slib,
                rlib,
                Setup {
                    buf_len: (len as usize).max(4 << 20),
                    ..Default::default()
                },
            );
            let mut why = Vec::new();
            if ctx.init(Side::Recv, 2, 16) != 0 || ctx.hr.is_null() {
                why.push("receiver init failed".to_string());
            }
            if ctx.init(Side::Send, 2, 16) != 0 || ctx.hs.is_null() {
                why.push("sender init failed".to_string());
            }
            if why.is_empty() {
                ctx.start_pollers(Delivery::Pass);
                let ck = 0xC0FFEE + len as u64;
                let (rr, rs) = ctx.recv(len, ck, 0);
                let (sr, ss) = ctx.send(len, 0x5EED + len as u64, ck, 0);
                if rr != 0 {
                    why.push(format!("recv returned {rr}"));
                }
                if sr != 0 {
                    why.push(format!("send returned {sr}"));
                }
                if let Some(s) = ss {
                    let (r, st) = ctx.wait(Side::Send, &s, Some(10_000));
                    if r != 0 {
                        why.push(format!("send wait returned {r} status {st}"));
                    }
                }
                if let Some(s) = rs {
                    let t = if sr == 0 { 10_000 } else { 50 };
                    let (r, st) = ctx.wait(Side::Recv, &s, Some(t));
                    if r != 0 {
                        why.push(format!("recv wait returned {r} status {st}"));
                    }
                }
                if sr == 0 && !ctx.check_data("data", 0, len as usize) {
                    why.push("data mismatch".into());
                }
            }
            drop(ctx.finish());
            let _ = tx.send(why);
        });
    if let Err(e) = spawned {
        return (false, format!("spawn: {e}"));
    }
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(why) if why.is_empty() => (true, "data verified byte for byte".into()),
        Ok(why) => (false, why.join("; ")),
        Err(_) => (false, "watchdog: no result within 60 s".into()),
    }
}

/// Runs the matrix.
pub fn run(legacy: &'static Lib, rust: &'static Lib) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (dir, s, r) in [("C -> Rust", legacy, rust), ("Rust -> C", rust, legacy)] {
        let mut lens: Vec<u32> = LENS.to_vec();
        if dir == "Rust -> C" {
            lens.insert(0, 1);
        }
        for len in lens {
            let (ok, detail) = one(s, r, len);
            cells.push(Cell {
                dir: dir.into(),
                len,
                ok,
                detail,
            });
        }
    }
    cells
}

/// Plain-text matrix.
pub fn render(cells: &[Cell]) -> String {
    let mut s = String::new();
    for c in cells {
        s.push_str(&format!(
            "  {:<10} {:>9} B  {}  {}\n",
            c.dir,
            c.len,
            if c.ok { "OK  " } else { "FAIL" },
            c.detail
        ));
    }
    s
}

/// Markdown matrix.
pub fn render_md(cells: &[Cell]) -> String {
    let mut s = String::from("| direction | length | result | detail |\n|---|---|---|---|\n");
    for c in cells {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            c.dir,
            c.len,
            if c.ok { "OK" } else { "FAIL" },
            c.detail
        ));
    }
    s
}
