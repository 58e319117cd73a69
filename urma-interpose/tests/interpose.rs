//! The interposition layer in front of the loopback.
//!
//! Each case runs in a child process of this binary (`harness = false`: `main` re-executes
//! itself) with `LD_LIBRARY_PATH=<profile>/interpose:<the loopback's directory>` and `URMA_INTERPOSE_REAL`
//! naming the loopback, so the layer is the process's `liburma.so.0`:
//!
//! * `trace-equals-loopback`: catalogue scenarios of the conformance harness, on both libraries
//!   under test (dlopened with `RTLD_DEEPBIND`): the layer's trace equals the loopback's own
//!   trace of the same run (every WR post and every poll, in order; the CRs of each JFC, in
//!   order), and both libraries' posts were recorded;
//! * `fault-*`: each fault kind of the layer acting on WRs and CRs posted and polled directly,
//!   with the loopback's counters and trace showing what the provider really did;
//! * `preload-is-bypassed`: the experiment behind the forwarding design: an `LD_PRELOAD`
//!   interposer does not see the posts of a library dlopened with `RTLD_DEEPBIND`.
//!
//! The layer, the loopback and both libraries are cdylibs this test does not link: build the
//! workspace first (`make build`, or `cargo build -p urma-interpose -p urma-loopback
//! -p os-transport -p os-transport-legacy`), as `make test` does.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use compat_tests::harness::ctx::Lib;
use compat_tests::harness::{driver, scenario};
use compat_tests::*;
use serde_json::Value;
use urma_sys as u;

const CHILD_ENV: &str = "URMA_INTERPOSE_TEST_CASE";

type Case = (&'static str, fn());

const CASES: &[Case] = &[
    ("trace-equals-loopback", trace_equals_loopback),
    ("fault-fail-post", fault_fail_post),
    ("fault-fail-completion", fault_fail_completion),
    ("fault-drop-dup", fault_drop_dup),
    ("fault-hold-reorder", fault_hold_reorder),
    ("fault-delay", fault_delay),
    ("fault-event-mode", fault_event_mode),
    ("preload-is-bypassed", preload_is_bypassed),
];

/// Child-only cases (started by a case above, never directly).
const CHILD_ONLY: &[Case] = &[("preload-shim", preload_shim)];

fn main() {
    if let Ok(case) = std::env::var(CHILD_ENV) {
        let f = CASES
            .iter()
            .chain(CHILD_ONLY)
            .find(|(n, _)| *n == case)
            .unwrap_or_else(|| panic!("unknown case {case}"))
            .1;
        f();
        return;
    }
    let layer = interpose_dir().join("liburma.so.0");
    assert!(
        layer.exists(),
        "{} is missing: build the workspace first (cargo build -p urma-interpose)",
        layer.display()
    );
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, _) in CASES {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let t0 = Instant::now();
        let out = child(name, &[]).output().expect("spawn the test binary");
        let ok = out.status.success();
        println!(
            "test {name} ... {} ({} ms)",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_millis()
        );
        if !ok {
            println!("{}", String::from_utf8_lossy(&out.stdout));
            println!("{}", String::from_utf8_lossy(&out.stderr));
            failed.push(*name);
        }
    }
    println!("\n{ran} cases, {} failed {failed:?}", failed.len());
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

/// This binary as the child running `case`, with the layer in front of the loopback.
fn child(case: &str, extra_env: &[(&str, String)]) -> Command {
    let lb = target::loopback_dir().unwrap_or_else(profile_dir);
    let mut c = target::command(std::env::current_exe().expect("current exe"));
    c.env(CHILD_ENV, case)
        .env(
            "LD_LIBRARY_PATH",
            format!("{}:{}", interpose_dir().display(), lb.display()),
        )
        .env("URMA_INTERPOSE_REAL", target::loopback_lib())
        .env_remove("URMA_INTERPOSE_TRACE")
        .env_remove("URMA_INTERPOSE_KNOBS");
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c
}

// ------------------------------------------------------------------ helpers

use compat_tests::interpose_ctl as layer;

/// Resets the layer (checking that it loaded the loopback).
fn layer_reset() {
    assert!(layer::present(), "the layer did not load the loopback");
    layer::reset();
}

/// The layer's captured lines, parsed.
fn layer_take() -> Vec<Value> {
    layer::knobs()
        .trace_take()
        .iter()
        .map(|l| serde_json::from_str(l).expect("layer trace line is JSON"))
        .collect()
}

fn ev(v: &Value) -> &str {
    v.get("ev").and_then(|x| x.as_str()).unwrap_or("")
}

// ------------------------------------------------------------------ trace equality

/// Posts and polls in call order, and the CRs of each JFC in order.
fn split(lines: &[Value]) -> (Vec<Value>, BTreeMap<String, Vec<Value>>) {
    let mut calls = Vec::new();
    let mut crs: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for l in lines {
        match ev(l) {
            "post_send" | "post_recv" | "poll" => calls.push(l.clone()),
            "cr" => crs
                .entry(l["jfc"].as_str().unwrap_or("").to_string())
                .or_default()
                .push(l.clone()),
            other => panic!("unexpected trace line kind {other:?}: {l}"),
        }
    }
    (calls, crs)
}

fn trace_equals_loopback() {
    let legacy = Lib::load(&legacy_lib_path(), 0, "legacy").expect("legacy library");
    let rust = Lib::load(&rust_lib_path(), 1, "rust").expect("Rust library");
    let ids = [
        "len-6m+5",
        "event-mode",
        "recv-jfr-only",
        "send-via-jetty",
        "concurrent-8-copy",
        "post-fail-mid-write",
        "recv-reverse",
    ];
    let cat = scenario::catalogue();
    for id in ids {
        let sc = cat
            .iter()
            .find(|s| s.id == id)
            .unwrap_or_else(|| panic!("no scenario {id}"));
        for lib in [legacy, rust] {
            // The harness resets the loopback (names, knobs) as each run starts: reset the
            // layer right before, so both number the run's objects alike.
            layer_reset();
            layer::knobs().trace_capture(true);
            let events = driver::run_on(lib, sc).unwrap_or_else(|e| panic!("{id}: {e}"));
            layer::knobs().trace_capture(false);
            let layer = layer_take();
            let lb: Vec<Value> = events
                .iter()
                .filter(|e| e["k"] == "urma")
                .map(|e| e["raw"].clone())
                .collect();
            let (lcalls, lcrs) = split(&layer);
            let (bcalls, bcrs) = split(&lb);
            assert_eq!(
                lcalls.len(),
                bcalls.len(),
                "{id} on {}: number of posts and polls (layer vs loopback)",
                lib.name
            );
            for (i, (a, b)) in lcalls.iter().zip(&bcalls).enumerate() {
                assert_eq!(a, b, "{id} on {}: call line {i}", lib.name);
            }
            assert_eq!(lcrs, bcrs, "{id} on {}: CRs per JFC", lib.name);
            // The posts come from the library under test (the harness posts none), through
            // the layer although the library was dlopened with RTLD_DEEPBIND.
            let posts = layer.iter().filter(|l| ev(l) == "post_send").count();
            assert!(
                posts >= 2,
                "{id} on {}: {posts} send posts traced",
                lib.name
            );
            println!(
                "{id} on {}: {} lines equal ({posts} send posts)",
                lib.name,
                layer.len()
            );
        }
    }
}

// ------------------------------------------------------------------ faults

/// Sender and receiver over the loopback, a 64 KiB source and an imported destination.
struct Bench {
    pair: EndpointPair,
    src: Buffer,
    dst: Buffer,
    rdst: ImportedSeg,
}

const LEN: usize = 64 << 10;

fn bench(event_mode: bool) -> Bench {
    let lb = Loopback::get();
    let pair = EndpointPair::new(
        lb,
        &EndpointCfg {
            event_mode,
            ..Default::default()
        },
    );
    let mut src = Buffer::new(lb, LEN);
    src.fill_pattern(3);
    let dst = Buffer::new(lb, LEN);
    let rdst = dst.import(lb);
    reset();
    layer_reset();
    Bench {
        pair,
        src,
        dst,
        rdst,
    }
}

impl Bench {
    /// A WRITE of 4 KiB at `k * 4 KiB` with `user_ctx` `ctx` (not posted).
    fn write_wr(&self, ctx: u64, k: u64, sges: &mut [u::urma_sge_t; 2]) -> u::urma_jfs_wr_t {
        sges[0] = u::urma_sge_t {
            addr: self.src.addr() + k * 4096,
            len: 4096,
            tseg: self.src.tseg,
            ..Default::default()
        };
        sges[1] = u::urma_sge_t {
            addr: self.rdst.addr + k * 4096,
            len: 4096,
            tseg: self.rdst.tseg,
            ..Default::default()
        };
        let mut wr = u::urma_jfs_wr_t {
            opcode: u::URMA_OPC_WRITE,
            tjetty: self.pair.sender.tjetty,
            user_ctx: ctx,
            ..Default::default()
        };
        wr.flag.value = urma_sys::flags::JFS_WR_FLAG_COMPLETE_ENABLE;
        // rw is the member a WRITE uses; the SGE arrays outlive the post (the caller's).
        wr.__bindgen_anon_1.rw = u::urma_rw_wr_t {
            src: u::urma_sg_t {
                sge: &mut sges[0],
                num_sge: 1,
            },
            dst: u::urma_sg_t {
                sge: &mut sges[1],
                num_sge: 1,
            },
            ..Default::default()
        };
        wr
    }

    /// Posts one WRITE; returns the post status.
    fn write(&self, ctx: u64) -> i32 {
        let mut sges = [u::urma_sge_t::default(); 2];
        let mut wr = self.write_wr(ctx, ctx % 16, &mut sges);
        let mut bad = std::ptr::null_mut();
        // SAFETY: a valid single WR on the fixture's JFS.
        unsafe { u::urma_post_jfs_wr(self.pair.sender.jfs, &mut wr, &mut bad) }
    }

    /// Posts one zero-length SEND_IMM carrying `imm` (`user_ctx` = `imm`).
    fn send_imm(&self, imm: u64) -> i32 {
        let mut wr = u::urma_jfs_wr_t {
            opcode: u::URMA_OPC_SEND_IMM,
            tjetty: self.pair.sender.tjetty,
            user_ctx: imm,
            ..Default::default()
        };
        wr.flag.value = urma_sys::flags::JFS_WR_FLAG_COMPLETE_ENABLE;
        wr.__bindgen_anon_1.send = u::urma_send_wr_t {
            imm_data: imm,
            ..Default::default()
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a valid single WR (no SGE) on the fixture's JFS.
        unsafe { u::urma_post_jfs_wr(self.pair.sender.jfs, &mut wr, &mut bad) }
    }

    fn cq(&self) -> Cq {
        self.pair.sender.jfc_handle()
    }
}

fn ctxs(crs: &[u::urma_cr_t]) -> Vec<u64> {
    crs.iter().map(|c| c.user_ctx).collect()
}

const T: Duration = Duration::from_secs(5);

fn fault_fail_post() {
    let b = bench(false);
    assert_eq!(layer::knobs().fail_post(Queue::Send, 2, u::URMA_ENOMEM), 0);
    assert_eq!(
        layer::knobs().fail_post(Queue::Send, 0, u::URMA_ENOMEM),
        -1,
        "nth 0"
    );
    layer::knobs().trace_capture(true);
    assert_eq!(b.write(1), u::URMA_SUCCESS);
    assert_eq!(
        b.write(2),
        u::URMA_ENOMEM,
        "the 2nd send WR fails at the layer"
    );
    assert_eq!(b.write(3), u::URMA_SUCCESS);
    assert_eq!(
        counters().send_wrs,
        2,
        "the failed WR never reached the provider"
    );
    assert_eq!(ctxs(&b.cq().poll_n(2, T)), [1, 3]);

    // In a chain: the 5th WR (the 2nd of a chain of 3) fails; the 1st is posted, the 3rd not.
    assert_eq!(layer::knobs().apply_knobs("fail_post=5:0x1000").unwrap(), 1);
    let mut s = [[u::urma_sge_t::default(); 2]; 3];
    let [s0, s1, s2] = &mut s;
    let mut w = [
        b.write_wr(4, 4, s0),
        b.write_wr(5, 5, s1),
        b.write_wr(6, 6, s2),
    ];
    w[1].next = &mut w[2];
    let w1: *mut u::urma_jfs_wr_t = &mut w[1];
    w[0].next = w1;
    let mut bad = std::ptr::null_mut();
    // SAFETY: a valid chain of 3 WRs.
    let r = unsafe { u::urma_post_jfs_wr(b.pair.sender.jfs, &mut w[0], &mut bad) };
    assert_eq!(r, u::URMA_FAIL);
    assert_eq!(bad, w1, "bad_wr names the failed WR");
    assert_eq!(w[0].next, w1, "the caller's chain is restored");
    assert_eq!(counters().send_wrs, 3);
    assert_eq!(ctxs(&b.cq().poll_n(1, T)), [4]);
    let rets: Vec<(u64, i64)> = layer_take()
        .iter()
        .filter(|l| ev(l) == "post_send")
        .map(|l| {
            let uc =
                u64::from_str_radix(l["user_ctx"].as_str().unwrap().trim_start_matches("0x"), 16);
            (uc.unwrap(), l["ret"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(
        rets,
        [
            (1, 0),
            (2, u::URMA_ENOMEM as i64),
            (3, 0),
            (4, 0),
            (5, u::URMA_FAIL as i64)
        ]
    );
    assert_eq!(layer::counters().posts_failed_injected, 2);
}

fn fault_fail_completion() {
    let b = bench(false);
    assert_eq!(
        layer::knobs().fail_completion(2, u::URMA_CR_REM_ACCESS_ABORT_ERR),
        0
    );
    trace_start();
    layer::knobs().trace_capture(true);
    for i in 1..=3 {
        assert_eq!(b.write(i), u::URMA_SUCCESS);
    }
    let crs = b.cq().poll_n(3, T);
    assert_eq!(ctxs(&crs), [1, 2, 3]);
    let st: Vec<u32> = crs.iter().map(|c| c.status).collect();
    assert_eq!(st, [0, u::URMA_CR_REM_ACCESS_ABORT_ERR, 0]);
    assert_eq!(crs[1].completion_len, 0);
    // The provider got a NOP for WR 2 (nothing written) and completed it; the layer's trace
    // shows the WR as posted and the rewritten CR.
    let lb: Vec<Value> = trace_take()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    let ops = |v: &[Value]| -> Vec<String> {
        v.iter()
            .filter(|l| ev(l) == "post_send")
            .map(|l| l["op"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ops(&lb), ["WRITE", "NOP", "WRITE"]);
    let lb_polls: Vec<u64> = lb
        .iter()
        .filter(|l| ev(l) == "poll")
        .map(|l| l["status"].as_u64().unwrap())
        .collect();
    assert_eq!(lb_polls, [0, 0, 0]);
    let lines = layer_take();
    assert_eq!(ops(&lines), ["WRITE", "WRITE", "WRITE"]);
    let layer_crs: Vec<u64> = lines
        .iter()
        .filter(|l| ev(l) == "cr")
        .map(|l| l["status"].as_u64().unwrap())
        .collect();
    assert_eq!(layer_crs, [0, u::URMA_CR_REM_ACCESS_ABORT_ERR as u64, 0]);
    let d = b.dst.as_slice();
    assert_eq!(
        &d[4096..8192],
        &b.src.as_slice()[4096..8192],
        "WR 1 written"
    );
    assert!(d[8192..12288].iter().all(|x| *x == 0), "WR 2 not executed");
    assert_eq!(
        &d[12288..16384],
        &b.src.as_slice()[12288..16384],
        "WR 3 written"
    );
    assert_eq!(layer::counters().crs_rewritten, 1);
}

fn fault_drop_dup() {
    let b = bench(false);
    assert_eq!(layer::knobs().cr_action_raw(2, 1), 0);
    assert_eq!(layer::knobs().cr_action_raw(4, 2), 0);
    assert_eq!(layer::knobs().cr_action_raw(1, 7), -1, "unknown action");
    for i in 1..=4 {
        assert_eq!(b.write(i), u::URMA_SUCCESS);
    }
    // Polled one at a time: the duplicate of CR 4 does not fit and comes at the next poll.
    let mut got = Vec::new();
    let end = Instant::now() + T;
    while got.len() < 4 && Instant::now() < end {
        got.extend(ctxs(&b.cq().poll(1)));
    }
    assert_eq!(got, [1, 3, 4, 4], "CR 2 dropped, CR 4 handed over twice");
    std::thread::sleep(Duration::from_millis(50));
    assert!(b.cq().poll(8).is_empty(), "nothing more");
    assert_eq!(
        counters().crs_polled,
        4,
        "the provider returned each CR once"
    );
    let c = layer::counters();
    assert_eq!((c.crs_dropped, c.crs_duplicated, c.crs_to_app), (1, 1, 4));

    // By send WR number, and by receive-side CR number (independent of poll interleaving).
    layer_reset();
    assert_eq!(layer::send_cr_action(1, CrAction::Duplicate), 0);
    assert_eq!(layer::send_cr_action(3, CrAction::Drop), 0);
    assert_eq!(layer::recv_cr_action(2, CrAction::Drop), 0);
    assert_eq!(layer::recv_cr_action(3, CrAction::Duplicate), 0);
    assert_eq!(b.pair.receiver.post_recvs(4, 100), u::URMA_SUCCESS);
    for imm in 1..=3 {
        assert_eq!(b.send_imm(imm), u::URMA_SUCCESS);
    }
    assert_eq!(
        ctxs(&b.cq().poll_n(3, T)),
        [1, 1, 2],
        "send CRs: WR 1 twice, WR 3 dropped"
    );
    let recv: Vec<u64> = b
        .pair
        .receiver
        .cq
        .poll_n(3, T)
        .iter()
        // SAFETY: imm_data is plain data, set on receive-side CRs of SEND_IMM.
        .map(|c| unsafe { c.__bindgen_anon_1.imm_data })
        .collect();
    assert_eq!(recv, [1, 3, 3], "recv CRs: 2nd dropped, 3rd twice");
}

fn fault_hold_reorder() {
    let b = bench(false);
    layer::knobs().hold_crs(true);
    for i in 1..=3 {
        assert_eq!(b.write(i), u::URMA_SUCCESS);
    }
    let end = Instant::now() + T;
    while counters().crs_polled < 3 && Instant::now() < end {
        assert!(b.cq().poll(8).is_empty(), "held CRs are not handed over");
    }
    assert_eq!(layer::counters().crs_in_layer, 3);
    layer::knobs().hold_crs(false);
    assert_eq!(
        layer::knobs().release_crs_raw(9, 0, 0),
        u64::MAX,
        "unknown order"
    );
    assert_eq!(layer::knobs().release_crs(ReleaseOrder::Reverse, 0), 3);
    assert_eq!(ctxs(&b.cq().poll_n(3, T)), [3, 2, 1], "released in reverse");
    // A seeded shuffle is deterministic.
    let mut orders = Vec::new();
    for round in 0..2 {
        layer::knobs().hold_crs(true);
        for i in 1..=6 {
            assert_eq!(b.write(10 * (round + 1) + i), u::URMA_SUCCESS);
        }
        let end = Instant::now() + T;
        while layer::counters().crs_in_layer < 6 && Instant::now() < end {
            assert!(b.cq().poll(8).is_empty());
        }
        layer::knobs().hold_crs(false);
        assert_eq!(layer::knobs().release_crs(ReleaseOrder::Shuffle(42), 0), 6);
        let got: Vec<u64> = ctxs(&b.cq().poll_n(6, T)).iter().map(|c| c % 10).collect();
        orders.push(got);
    }
    assert_eq!(orders[0], orders[1]);
    assert_ne!(orders[0], [1, 2, 3, 4, 5, 6], "seed 42 changes the order");
}

fn fault_delay() {
    let b = bench(false);
    // Long enough (scaled under emulation) that a write and a poll without it take less.
    let delay = 150 * target::slowdown();
    layer::knobs().set_cr_delay(delay);
    let t0 = Instant::now();
    assert_eq!(b.write(1), u::URMA_SUCCESS);
    let crs = b.cq().poll_n(1, T);
    let dt = t0.elapsed();
    assert_eq!(ctxs(&crs), [1]);
    assert!(
        dt >= Duration::from_millis(delay.into()),
        "handed over after {dt:?}"
    );
    layer::knobs().set_cr_delay(0);
    let t0 = Instant::now();
    assert_eq!(b.write(2), u::URMA_SUCCESS);
    assert_eq!(ctxs(&b.cq().poll_n(1, T)), [2]);
    assert!(
        t0.elapsed() < Duration::from_millis(delay.into()),
        "no delay once off"
    );
}

fn fault_event_mode() {
    // An event-mode poller gets CRs kept by the layer through synthetic events, and the acks
    // of those events are not passed on to the provider (its JFC deletes cleanly).
    let b = bench(true);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let start = || {
        let s2 = seen.clone();
        Poller::start(&b.cq(), PollMode::Event, move |cr| {
            s2.lock().unwrap().push(cr.user_ctx)
        })
    };
    let poller = start();
    layer::knobs().hold_crs(true);
    assert_eq!(layer::knobs().cr_action_raw(4, 2), 0);
    for i in 1..=3 {
        assert_eq!(b.write(i), u::URMA_SUCCESS);
    }
    let end = Instant::now() + T;
    while layer::counters().crs_in_layer < 3 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(layer::counters().crs_in_layer, 3);
    assert_eq!(poller.errors(), 0, "no failed poll or wait");
    assert_eq!(poller.stop(), 0, "every CR held by the layer");
    // Released while no poller runs: the next poller's first call is a wait, which the layer
    // answers with a synthetic event (a poller still draining after the provider's last event
    // would take them without one).
    layer::knobs().hold_crs(false);
    assert_eq!(layer::knobs().release_crs(ReleaseOrder::Reverse, 0), 3);
    assert_eq!(layer::counters().synthetic_events, 0);
    let poller = start();
    assert!(
        poller.wait_seen(3, T),
        "released CRs reach the event-mode poller"
    );
    assert_eq!(*seen.lock().unwrap(), [3, 2, 1]);
    assert_eq!(layer::counters().synthetic_events, 1);
    // A duplicate (CR 4) arrives with the provider's event.
    assert_eq!(b.write(4), u::URMA_SUCCESS);
    assert!(poller.wait_seen(5, T));
    assert_eq!(*seen.lock().unwrap(), [3, 2, 1, 4, 4]);
    assert_eq!(poller.errors(), 0, "no failed poll or wait");
    assert_eq!(poller.stop(), 5, "nothing more");
    drop(b);
    assert_eq!(counters().live_jfc, 0, "JFCs deleted (acks balanced)");
}

// ------------------------------------------------------------------ the LD_PRELOAD experiment

const SHIM: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
static atomic_long posts, polls;
typedef int (*post_fn)(void *, void *, void **);
typedef int (*poll_fn)(void *, int, void *);
int urma_post_jfs_wr(void *q, void *wr, void **bad) {
    atomic_fetch_add(&posts, 1);
    return ((post_fn)dlsym(RTLD_NEXT, "urma_post_jfs_wr"))(q, wr, bad);
}
int urma_post_jetty_send_wr(void *q, void *wr, void **bad) {
    atomic_fetch_add(&posts, 1);
    return ((post_fn)dlsym(RTLD_NEXT, "urma_post_jetty_send_wr"))(q, wr, bad);
}
int urma_poll_jfc(void *jfc, int n, void *cr) {
    atomic_fetch_add(&polls, 1);
    return ((poll_fn)dlsym(RTLD_NEXT, "urma_poll_jfc"))(jfc, n, cr);
}
long shim_posts(void) { return atomic_load(&posts); }
long shim_polls(void) { return atomic_load(&polls); }
"#;

fn build_shim(dir: &Path) -> PathBuf {
    let c = dir.join("shim.c");
    std::fs::write(&c, SHIM).expect("write shim.c");
    testkit::cprog::Build::new(
        testkit::cprog::Flavour::Plain,
        dir.join("libpreload_shim.so"),
    )
    .shared(None)
    .source(c)
    .run()
}

/// Parent side: run the `preload-shim` child (the loopback as liburma.so.0, the shim preloaded).
fn preload_is_bypassed() {
    let dir = std::env::temp_dir().join(format!("urma-interpose-shim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let so = build_shim(&dir);
    let lb = target::loopback_dir().unwrap_or_else(profile_dir);
    let out = target::command(std::env::current_exe().expect("exe"))
        .env(CHILD_ENV, "preload-shim")
        .env("LD_LIBRARY_PATH", &lb)
        .env("LD_PRELOAD", &so)
        .output()
        .expect("spawn");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Child side (registered below): one scenario on the Rust library under the preloaded shim.
fn preload_shim() {
    let shim = |n: &str| -> i64 {
        let c = CString::new(n).unwrap();
        // SAFETY: dlsym on the global scope.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c.as_ptr()) };
        assert!(!p.is_null(), "{n}: the shim is not preloaded");
        // SAFETY: the shim's `long f(void)`.
        let f: unsafe extern "C" fn() -> i64 = unsafe { fn_from_ptr(p) };
        // SAFETY: plain call.
        unsafe { f() }
    };
    let rust = Lib::load(&rust_lib_path(), 1, "rust").expect("Rust library");
    let sc = scenario::catalogue()
        .into_iter()
        .find(|s| s.id == "len-6m+5")
        .expect("scenario");
    driver::run_on(rust, &sc).expect("run");
    let lb_posts = counters().send_wrs;
    println!(
        "loopback send WRs {lb_posts}, shim posts {}, shim polls {}",
        shim("shim_posts"),
        shim("shim_polls")
    );
    assert!(lb_posts >= 2);
    assert!(
        shim("shim_polls") > 0,
        "the application's own calls reach the shim"
    );
    assert_eq!(
        shim("shim_posts"),
        0,
        "the RTLD_DEEPBIND library's posts bypass the preloaded interposer"
    );
}
