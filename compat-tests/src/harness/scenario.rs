//! Scenarios: the model, the generic transfer flow and the catalogue.
//!
//! A scenario has an id, a one-line description, an endpoint [`Setup`] and a body: either a
//! [`Flow`] (init, pollers, loopback knobs, recvs, sends, CR delivery, waits, data checks,
//! destroy) or a custom function for cases that do not fit the flow. `features` name what the
//! scenario exercises; the divergence ledger's `random` predicates match on them.

use std::collections::BTreeSet;
use std::time::Duration;

use super::aspect::{note_line, Aspect};
use super::backend;
use super::ctx::{Ctx, Delivery, Order, SendVia, Setup, Side};
use crate::fixture::RecvKind;
use crate::lib_under_test::DEFAULT_CHUNK_SIZE;
use crate::loopback_ctl::ReleaseOrder;

/// `MiB`.
pub const MIB: u32 = 1024 * 1024;

/// Chunks of a transfer of `len` bytes.
pub fn chunks(len: u32) -> u32 {
    len.div_ceil(DEFAULT_CHUNK_SIZE)
}

/// One transfer of a [`Flow`].
#[derive(Debug, Clone)]
pub struct Xfer {
    pub len: u32,
    /// Length given to `recv` (normally `len`).
    pub recv_len: u32,
    pub sk: u64,
    pub ck: u64,
    /// Offset into the source and destination buffers.
    pub off: usize,
    /// Send first, deliver its receive-side CRs, and only then call `recv`.
    pub early: bool,
    /// The notify callback returns 1 for this chunk id.
    pub cb_fail: Option<u8>,
}

impl Xfer {
    /// A transfer of `len` bytes with keys `sk`, `ck` at offset 0.
    pub fn new(len: u32, sk: u64, ck: u64) -> Xfer {
        Xfer {
            len,
            recv_len: len,
            sk,
            ck,
            off: 0,
            early: false,
            cb_fail: None,
        }
    }
}

/// The generic transfer flow.
#[derive(Debug, Clone)]
pub struct Flow {
    pub workers: u32,
    pub capacity: u32,
    pub delivery: Delivery,
    /// Loopback knob spec applied after init (`urma_loopback_apply_knobs` syntax).
    pub knobs: String,
    pub xfers: Vec<Xfer>,
    /// Timeout of the waits (ms). A receive whose send did not start waits 50 ms.
    pub wait_ms: i64,
    /// Use the untimed `wait_and_free_sync` for transfers that started.
    pub untimed: bool,
    pub via: SendVia,
    /// Deliver the n-th held receive-side CR (after ordering) twice.
    pub dup_held: Option<usize>,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            workers: 2,
            capacity: 16,
            delivery: Delivery::Pass,
            knobs: String::new(),
            xfers: Vec::new(),
            wait_ms: 5000,
            untimed: false,
            via: SendVia::Jfs,
            dup_held: None,
        }
    }
}

/// A scenario body.
#[derive(Clone)]
pub enum Body {
    Flow(Flow),
    Custom(fn(&mut Ctx)),
}

/// A scenario.
#[derive(Clone)]
pub struct Scenario {
    pub id: String,
    pub desc: String,
    pub setup: Setup,
    pub body: Body,
    pub features: BTreeSet<String>,
    /// Watchdog budget of one run.
    pub budget: Duration,
    /// Seed of a random scenario.
    pub seed: Option<u64>,
}

impl Scenario {
    fn flow(id: &str, desc: &str, setup: Setup, f: Flow) -> Scenario {
        let features = flow_features(&setup, &f);
        Scenario {
            id: id.into(),
            desc: desc.into(),
            setup,
            body: Body::Flow(f),
            features,
            budget: Duration::from_secs(30),
            seed: None,
        }
    }

    fn custom(id: &str, desc: &str, setup: Setup, f: fn(&mut Ctx), features: &[&str]) -> Scenario {
        Scenario {
            id: id.into(),
            desc: desc.into(),
            setup,
            body: Body::Custom(f),
            features: features.iter().map(|s| s.to_string()).collect(),
            budget: Duration::from_secs(30),
            seed: None,
        }
    }

    /// Runs the scenario body on `ctx`.
    pub fn run(&self, ctx: &mut Ctx) {
        match &self.body {
            Body::Flow(f) => run_flow(ctx, f),
            Body::Custom(f) => f(ctx),
        }
    }
}

/// Features of a flow (for the ledger's random predicates).
pub fn flow_features(setup: &Setup, f: &Flow) -> BTreeSet<String> {
    let mut s = BTreeSet::new();
    let mut add = |x: &str| {
        s.insert(x.to_string());
    };
    for x in &f.xfers {
        if x.len >= 1 && x.len <= DEFAULT_CHUNK_SIZE {
            add("send_len_le_2mib");
        }
        if x.early {
            add("cr_before_recv");
        }
        if x.cb_fail.is_some() {
            add("callback_failure");
        }
        if x.recv_len != x.len {
            add("recv_len_mismatch");
        }
    }
    if setup.recv_kind == RecvKind::Jfr {
        add("jfr_only");
    }
    if f.capacity == 0 {
        add("recv_capacity_0");
    }
    for item in f.knobs.split(',').filter(|k| !k.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match k {
            "fail_post" => {
                if v.starts_with("1:") {
                    add("post_fail_first");
                } else {
                    add("post_fail_worker");
                }
            }
            "fail_recv_post" => add("recv_post_fail"),
            "fail_cr" => add("error_cr"),
            "drop_cr" => add("drop_cr"),
            "dup_cr" => {
                add("dup_cr");
                // CR 3k+2 of a single request is a receive-side CR: its duplicate may be handed
                // over after the request completed (always for the last chunk; for any chunk
                // when held CRs are delivered reversed or shuffled).
                if let Ok(n) = v.parse::<u64>() {
                    if f.xfers.len() == 1 && n % 3 == 2 {
                        add("cr_after_completion");
                    }
                    // CR 3k+1 is the local completion of WRITE k.
                    if f.xfers.len() == 1 && n % 3 == 1 {
                        add("dup_write_cr");
                    }
                }
            }
            _ => {}
        }
    }
    if f.dup_held.is_some() {
        add("dup_cr");
    }
    s
}

/// Applies a scenario's knob spec through the backend and notes it. A spec the backend rejects
/// is a harness bug (the scenario would inject nothing and judge a fault-free run), so it
/// panics: the scenario is reported as FAIL, never as a quiet PASS.
fn apply_knobs(ctx: &Ctx, spec: &str) {
    match backend::get().apply_knobs(spec) {
        Ok(_) => ctx
            .rec
            .note(note_line(Aspect::Wire, &format!("loopback knobs: {spec}"))),
        Err(e) => panic!(
            "harness bug: {} rejected the scenario's {e}",
            backend::get().name()
        ),
    }
}

/// Runs a [`Flow`] on `ctx`.
pub fn run_flow(ctx: &mut Ctx, f: &Flow) {
    if ctx.init(Side::Send, f.workers, f.capacity) != 0 || ctx.hs.is_null() {
        return;
    }
    ctx.start_pollers(f.delivery);
    if !f.knobs.is_empty() {
        apply_knobs(ctx, &f.knobs);
    }
    let mut recv_syncs: Vec<(usize, Option<String>)> = Vec::new();
    let mut send_syncs: Vec<(usize, Option<String>)> = Vec::new();
    let mut started = vec![false; f.xfers.len()];
    for (i, x) in f.xfers.iter().enumerate() {
        if let Some(k) = x.cb_fail {
            ctx.rec.fail_notify(x.ck, k, 1);
        }
        if !x.early {
            let (_, s) = ctx.recv(x.recv_len, x.ck, x.off);
            recv_syncs.push((i, s));
        }
    }
    // A duplicated WRITE completion (dup_cr = 3k+1 of a single request) makes legacy run the
    // next send task at once (§3.2, §5.4; D14). Handed over as polled, the outcome depended on
    // scheduling: the loopback pushes the two copies one after the other, so the poller could
    // hand a few later CRs over between them, and the surplus WRITE completion at the end found
    // legacy's request context still present (0 and a WARN) or already removed (-1), both
    // allowed by §5.4. The verdict flipped between PASS and DIVERGES-AS-DOCUMENTED D14. So the
    // send-side CRs of these flows are held and handed over one at a time in poll order,
    // letting the library's posts settle after each, as `dup-write-cr` does.
    let lockstep = f.xfers.len() == 1 && dup_write_knob(&f.knobs);
    if lockstep {
        ctx.set_send_hold(true);
    }
    let mut expected = 0u64;
    for (i, x) in f.xfers.iter().enumerate() {
        let (r, s) = ctx.send_ex(x.len, x.sk, x.ck, x.off, f.via);
        if r == 0 {
            started[i] = true;
            expected += chunks(x.len) as u64;
        }
        send_syncs.push((i, s));
    }
    if lockstep {
        send_lockstep(ctx);
    }
    ctx.settle_recv(
        expected,
        Duration::from_millis(150),
        Duration::from_secs(20),
    );
    if let Delivery::Held(order) = f.delivery {
        let mut v = ctx.take_held();
        order.apply(&mut v);
        for (n, cr) in v.into_iter().enumerate() {
            ctx.deliver(Side::Recv, cr, Duration::from_millis(500));
            if f.dup_held == Some(n) {
                ctx.deliver(Side::Recv, cr, Duration::from_millis(300));
            }
        }
    }
    for (i, x) in f.xfers.iter().enumerate() {
        if x.early {
            let (_, s) = ctx.recv(x.recv_len, x.ck, x.off);
            recv_syncs.push((i, s));
        }
    }
    for (i, s) in &send_syncs {
        if let Some(s) = s {
            let t = if f.untimed && started[*i] {
                None
            } else {
                Some(f.wait_ms)
            };
            ctx.wait(Side::Send, s, t);
        }
    }
    recv_syncs.sort_by_key(|(i, _)| *i);
    for (i, s) in &recv_syncs {
        if let Some(s) = s {
            let t = if !started[*i] {
                Some(50)
            } else if f.untimed {
                None
            } else {
                Some(f.wait_ms)
            };
            ctx.wait(Side::Recv, s, t);
        }
    }
    for (i, x) in f.xfers.iter().enumerate() {
        if started[i] {
            ctx.check_data(&format!("data ck=0x{:x}", x.ck), x.off, x.len as usize);
        }
    }
}

/// True when `knobs` duplicates the local completion of a WRITE (`dup_cr=3k+1`).
fn dup_write_knob(knobs: &str) -> bool {
    knobs.split(',').any(|item| {
        item.strip_prefix("dup_cr=")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n % 3 == 1)
    })
}

/// Hands the held send-side CRs over one at a time, in poll order, waiting after each until
/// the library's posts settled; then stops holding (and hands over any CR polled meanwhile).
fn send_lockstep(ctx: &mut Ctx) {
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while ctx.send_seen() < 1 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..256 {
        let mut v = ctx.take_send_held();
        if v.is_empty() {
            ctx.settle_send_wrs(Duration::from_millis(20));
            v = ctx.take_send_held();
            if v.is_empty() {
                break;
            }
        }
        for cr in v {
            ctx.deliver(Side::Send, cr, Duration::from_millis(0));
            ctx.settle_send_wrs(Duration::from_millis(20));
        }
    }
    ctx.set_send_hold(false);
    for cr in ctx.take_send_held() {
        ctx.deliver(Side::Send, cr, Duration::from_millis(0));
    }
}

fn setup_for(len: u32) -> Setup {
    Setup {
        buf_len: (len as usize).max(4 << 20),
        ..Default::default()
    }
}

fn one(len: u32, sk: u64, ck: u64) -> Vec<Xfer> {
    vec![Xfer::new(len, sk, ck)]
}

/// The scenario catalogue. Adding a scenario: docs/compat.md, "Adding a scenario".
pub fn catalogue() -> Vec<Scenario> {
    let mut v = Vec::new();
    let two = 2 * MIB;
    // --- lengths ---
    for (id, len) in [
        ("len-1", 1u32),
        ("len-2m", two),
        ("len-2m+1", two + 1),
        ("len-4m", 4 * MIB),
        ("len-6m+5", 6 * MIB + 5),
        ("len-14m", 14 * MIB),
        ("len-14m+1", 14 * MIB + 1),
    ] {
        v.push(Scenario::flow(
            id,
            &format!("send + recv of {len} bytes, untimed waits, data checked byte for byte"),
            setup_for(len),
            Flow {
                xfers: one(len, 0x123456789A, 0xABCDE12345),
                untimed: true,
                ..Default::default()
            },
        ));
    }
    // --- keys ---
    for (id, key) in [
        ("key-0", 0u64),
        ("key-2^20-1", (1 << 20) - 1),
        ("key-2^20", 1 << 20),
        ("key-2^40-1", (1 << 40) - 1),
        ("key-2^40", 1 << 40),
    ] {
        let sk = if key == 1 << 40 {
            key
        } else if key == 0 {
            1
        } else {
            key - 1
        };
        v.push(Scenario::flow(
            id,
            &format!("client key {key:#x} (server key {sk:#x}), 4 MiB + 3: encoding in the SEND_IMM immediate and range checks"),
            setup_for(4 * MIB + 3),
            Flow {
                xfers: one(4 * MIB + 3, sk, key),
                ..Default::default()
            },
        ));
    }
    // --- completion order ---
    v.push(Scenario::flow(
        "recv-reverse",
        "14 MiB, receive-side CRs delivered in reverse order",
        setup_for(14 * MIB),
        Flow {
            delivery: Delivery::Held(Order::Reverse),
            xfers: one(14 * MIB, 0x10, 0x20),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "recv-shuffled",
        "12 MiB + 1, receive-side CRs delivered in a shuffled order (seed 7)",
        setup_for(12 * MIB + 1),
        Flow {
            delivery: Delivery::Held(Order::Shuffle(7)),
            xfers: one(12 * MIB + 1, 0x11, 0x21),
            ..Default::default()
        },
    ));
    // --- duplicates / unknown ---
    v.push(Scenario::flow(
        "dup-recv-cr",
        "6 MiB + 5, the second receive-side CR is handed to wake_up_task twice",
        setup_for(6 * MIB + 5),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            dup_held: Some(1),
            xfers: one(6 * MIB + 5, 0x12, 0x22),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "dup-send-cr",
        "6 MiB + 5, the loopback duplicates CR #3, the local completion of SEND_IMM 0 (chunk id 7)",
        setup_for(6 * MIB + 5),
        Flow {
            knobs: "dup_cr=3".into(),
            delivery: Delivery::Held(Order::Fifo),
            xfers: one(6 * MIB + 5, 0x13, 0x23),
            ..Default::default()
        },
    ));
    v.push(Scenario::custom(
        "dup-write-cr",
        "6 MiB + 5, send CRs handed over one at a time; WRITE 0's CR is handed over twice",
        setup_for(6 * MIB + 5),
        sc_dup_write_cr,
        &["dup_write_cr"],
    ));
    v.push(Scenario::custom(
        "dup-last-recv-cr",
        "6 MiB + 5: the last receive-side CR is handed over again after the recv completed, then a new recv reuses the key",
        setup_for(6 * MIB + 5),
        sc_dup_last_recv_cr,
        &["cr_after_completion"],
    ));
    v.push(Scenario::custom(
        "unknown-cr",
        "forged CRs for unknown requests: send side, receive side, wrong opcode, NULL cr",
        Setup::default(),
        sc_unknown_cr,
        &["cr_before_recv"],
    ));
    v.push(Scenario::flow(
        "early-send-imm",
        "after a first transfer, a second one's SEND_IMMs are delivered before its recv registers",
        setup_for(8 * MIB + 2),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![
                Xfer::new(2 * MIB + 1, 0x30, 0x31),
                Xfer {
                    off: 4 * MIB as usize,
                    early: true,
                    ..Xfer::new(4 * MIB + 1, 0x32, 0x33)
                },
            ],
            wait_ms: 200,
            ..Default::default()
        },
    ));
    // --- post failures and error CRs ---
    for (id, desc, knobs) in [
        (
            "post-fail-first",
            "the first WRITE post fails (URMA_EAGAIN)",
            "fail_post=1:11",
        ),
        (
            "post-fail-mid-write",
            "the WRITE of chunk 1 (send WR #3) fails to post (URMA_FAIL)",
            "fail_post=3:4096",
        ),
        (
            "post-fail-send-imm",
            "the SEND_IMM of chunk 0 (send WR #2) fails to post (URMA_ENOMEM)",
            "fail_post=2:12",
        ),
        (
            "error-cr",
            "the WRITE of chunk 0 completes with URMA_CR_LOC_ACCESS_ERR",
            "fail_cr=1:4",
        ),
        (
            "error-cr-mid",
            "the WRITE of chunk 1 (send WR #3) completes with URMA_CR_REM_ACCESS_ABORT_ERR",
            "fail_cr=3:8",
        ),
        (
            "error-cr-send-imm",
            "the SEND_IMM of chunk 0 (send WR #2) completes with URMA_CR_WR_FLUSH_ERR",
            "fail_cr=2:11",
        ),
        (
            "recv-post-fail",
            "the first recv WR of the prefill fails to post (URMA_FAIL)",
            "fail_recv_post=1:4096",
        ),
    ] {
        v.push(Scenario::flow(
            id,
            &format!("6 MiB + 5: {desc}"),
            setup_for(6 * MIB + 5),
            Flow {
                knobs: knobs.into(),
                delivery: Delivery::Held(Order::Fifo),
                xfers: one(6 * MIB + 5, 0x40, 0x41),
                wait_ms: 200,
                ..Default::default()
            },
        ));
    }
    v.push(Scenario::custom(
        "recv-post-fail-retry",
        "a recv whose prefill fails, then a recv with the same key, its transfer and waits",
        setup_for(4 * MIB + 1),
        sc_recv_post_fail_retry,
        &["recv_post_fail"],
    ));
    v.push(Scenario::flow(
        "recv-post-fail-enomem",
        "6 MiB + 5: the third recv WR of the prefill fails with URMA_ENOMEM (tolerated)",
        setup_for(6 * MIB + 5),
        Flow {
            knobs: "fail_recv_post=3:12".into(),
            capacity: 1,
            delivery: Delivery::Held(Order::Fifo),
            xfers: one(6 * MIB + 5, 0x42, 0x43),
            wait_ms: 200,
            ..Default::default()
        },
    ));
    // --- callback failure ---
    for k in [0u8, 2] {
        v.push(Scenario::flow(
            &format!("cb-fail-chunk{k}"),
            &format!(
                "8 MiB: notify_callback returns 1 for chunk {k}; later chunks still delivered"
            ),
            setup_for(8 * MIB),
            Flow {
                delivery: Delivery::Held(Order::Fifo),
                xfers: vec![Xfer {
                    cb_fail: Some(k),
                    ..Xfer::new(8 * MIB, 0x50, 0x51)
                }],
                wait_ms: 200,
                ..Default::default()
            },
        ));
    }
    // --- timeouts / cancel / destroy ---
    v.push(Scenario::custom(
        "wait-timeout-0",
        "wait with 0 ms on a recv and a send whose tasks are still queued",
        Setup::default(),
        sc_timeout_0,
        &[],
    ));
    v.push(Scenario::custom(
        "wait-timeout-short",
        "wait with 30 ms on a recv whose tasks are queued, then its late completions",
        Setup::default(),
        sc_timeout_short,
        &[],
    ));
    v.push(Scenario::custom(
        "cancel-before",
        "cancel a recv (with its sync) before any completion, then deliver its completions",
        Setup::default(),
        sc_cancel_before,
        &[],
    ));
    v.push(Scenario::custom(
        "cancel-after",
        "cancel a completed recv with its sync, and a completed send by id only",
        Setup::default(),
        sc_cancel_after,
        &[],
    ));
    v.push(Scenario::custom(
        "cancel-by-id-only",
        "cancel a queued recv by id with a NULL sync, then wait on its sync (30 ms)",
        Setup::default(),
        sc_cancel_by_id,
        &[],
    ));
    v.push(Scenario::custom(
        "destroy-inflight",
        "destroy while a recv is queued and a thread blocks in an untimed wait on it",
        Setup::default(),
        sc_destroy_inflight,
        &[],
    ));
    // --- init ---
    v.push(Scenario::custom(
        "init-twice",
        "a second init while an instance is live; init again after destroy",
        Setup::default(),
        sc_init_twice,
        &[],
    ));
    v.push(Scenario::custom(
        "init-workers-0",
        "init with worker_thread_num = 0, then calls with the NULL handle",
        Setup::default(),
        sc_init_workers_0,
        &[],
    ));
    v.push(Scenario::custom(
        "init-workers-1025",
        "init with worker_thread_num = 1025 (above the Rust bound of 1024)",
        Setup::default(),
        sc_init_workers_1025,
        &[],
    ));
    v.push(Scenario::custom(
        "bad-inputs",
        "NULL arguments, len 0, a recv without queues, before and after init",
        Setup::default(),
        sc_bad_inputs,
        &[],
    ));
    // --- recv queue capacity and queues ---
    for cap in [0u32, 1, 64] {
        v.push(Scenario::flow(
            &format!("recv-capacity-{cap}"),
            &format!("recv_queue_capacity = {cap}: prefill of 4 x {cap} recv WRs, 14 MiB transfer"),
            setup_for(14 * MIB),
            Flow {
                capacity: cap,
                xfers: one(14 * MIB, 0x60, 0x61),
                wait_ms: if cap == 0 { 200 } else { 5000 },
                ..Default::default()
            },
        ));
    }
    v.push(Scenario::flow(
        "recv-jetty",
        "recv on a jetty (device_dst.jetty set, jfr NULL), 6 MiB + 5",
        setup_for(6 * MIB + 5),
        Flow {
            xfers: one(6 * MIB + 5, 0x70, 0x71),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "recv-jfr-only",
        "recv on a JFR only (device_dst.jetty NULL), 6 MiB + 5",
        Setup {
            recv_kind: RecvKind::Jfr,
            ..setup_for(6 * MIB + 5)
        },
        Flow {
            xfers: one(6 * MIB + 5, 0x72, 0x73),
            wait_ms: 200,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "send-via-jetty",
        "send with jfs NULL (posts go to the jetty), 4 MiB + 1",
        setup_for(4 * MIB + 1),
        Flow {
            via: SendVia::Jetty,
            xfers: one(4 * MIB + 1, 0x74, 0x75),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "send-no-queue",
        "send with jfs and jetty NULL: the first post fails with URMA_FAIL",
        setup_for(4 * MIB + 1),
        Flow {
            via: SendVia::None,
            xfers: one(4 * MIB + 1, 0x76, 0x77),
            wait_ms: 100,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "event-mode",
        "pollers in event mode (urma_wait_jfc on a JFCE), 10 MiB + 9",
        Setup {
            event_mode: true,
            ..setup_for(10 * MIB + 9)
        },
        Flow {
            xfers: one(10 * MIB + 9, 0x78, 0x79),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "recv-len-mismatch",
        "the receiver registers 2 MiB + 1 for a 4 MiB + 1 send (different last-chunk key)",
        setup_for(4 * MIB + 1),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![Xfer {
                recv_len: 2 * MIB + 1,
                ..Xfer::new(4 * MIB + 1, 0x7A, 0x7B)
            }],
            wait_ms: 100,
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "reuse-live-id",
        "a send whose server key equals the client key of a live recv (same request id)",
        setup_for(8 * MIB),
        Flow {
            delivery: Delivery::Held(Order::Fifo),
            xfers: vec![
                Xfer::new(2 * MIB + 1, 0x7C, 0x7D),
                Xfer {
                    off: 4 * MIB as usize,
                    ..Xfer::new(2 * MIB + 1, 0x7D, 0x7E)
                },
            ],
            wait_ms: 100,
            ..Default::default()
        },
    ));
    // --- concurrency ---
    v.push(Scenario::flow(
        "concurrent-64x4",
        "64 concurrent 2 MiB + 1 transfers over 4 workers (no-copy), receive CRs shuffled",
        Setup {
            nocopy: true,
            buf_len: 4 << 20,
            ..Default::default()
        },
        Flow {
            workers: 4,
            capacity: 64,
            delivery: Delivery::Held(Order::Shuffle(64)),
            xfers: (0..64u64)
                .map(|i| Xfer::new(2 * MIB + 1, 0x1000 + i, 0x2000 + i))
                .collect(),
            ..Default::default()
        },
    ));
    v.push(Scenario::flow(
        "concurrent-8-copy",
        "8 concurrent transfers of 1.5..8 MiB over 3 workers with data, CRs as they come",
        setup_for(56 * MIB),
        Flow {
            workers: 3,
            capacity: 64,
            xfers: (0..8u64)
                .map(|i| Xfer {
                    off: i as usize * 6 * MIB as usize,
                    ..Xfer::new(
                        2 * MIB + 1 + (i as u32) * (3 * MIB / 4),
                        0x3000 + i,
                        0x4000 + i,
                    )
                })
                .collect(),
            ..Default::default()
        },
    ));
    // --- logging ---
    v.push(Scenario::custom(
        "log-levels",
        "log callback registration: NULL rejected, threshold INFO hides DEBUG, threshold 3 hides all",
        Setup::default(),
        sc_log_levels,
        &[],
    ));
    v
}

fn sc_dup_write_cr(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 16) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    ctx.set_send_hold(true);
    let len = 6 * MIB + 5;
    let (_, r) = ctx.recv(len, 0x17, 0);
    let (_, s) = ctx.send(len, 0x16, 0x17, 0);
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while ctx.send_seen() < 1 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut first = true;
    // Hand send CRs over one at a time, in poll order, letting the worker settle each time.
    for _ in 0..64 {
        let v = ctx.take_send_held();
        if v.is_empty() {
            break;
        }
        for cr in v {
            ctx.deliver(Side::Send, cr, Duration::from_millis(0));
            if first {
                first = false;
                ctx.deliver(Side::Send, cr, Duration::from_millis(0));
                let n = ctx.settle_send_wrs(Duration::from_millis(40));
                ctx.rec.note(note_line(
                    Aspect::Wire,
                    &format!("send WRs posted once WRITE 0's CR was handed over twice: {n}"),
                ));
            } else {
                ctx.settle_send_wrs(Duration::from_millis(20));
            }
        }
    }
    ctx.set_send_hold(false);
    ctx.settle_recv(4, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(1000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(1000));
    }
    ctx.check_data("data ck=0x17", 0, len as usize);
}

fn sc_dup_last_recv_cr(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 16) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let len = 6 * MIB + 5;
    let (_, r) = ctx.recv(len, 0x14, 0);
    let (_, s) = ctx.send(len, 0x15, 0x14, 0);
    ctx.settle_recv(4, Duration::from_millis(150), Duration::from_secs(5));
    let held = ctx.take_held();
    for cr in &held {
        ctx.deliver(Side::Recv, *cr, Duration::from_millis(500));
    }
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(5000));
    }
    ctx.check_data("data ck=0x14", 0, len as usize);
    // The stray duplicate of the last chunk's completion.
    if let Some(last) = held.last() {
        ctx.deliver(Side::Recv, *last, Duration::from_millis(200));
    }
    // A later request reusing the client key: does the stray completion reach it?
    let (_, r2) = ctx.recv(len, 0x14, 0);
    std::thread::sleep(Duration::from_millis(50));
    if let Some(r2) = r2 {
        ctx.wait(Side::Recv, &r2, Some(50));
    }
}

fn sc_unknown_cr(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    // A recv on another key first, so the library has a recorded receive queue.
    let (_, s) = ctx.recv(2 * MIB + 1, 0x90, 0);
    let mut cr = urma_sys::urma_cr_t::default();
    // Send side, unknown server key.
    cr.user_ctx = 0x999;
    cr.opcode = urma_sys::URMA_CR_OPC_SEND;
    ctx.deliver(Side::Send, cr, Duration::from_millis(100));
    // Send side sentinel (chunk id 7) of an unknown request.
    cr.user_ctx = 0x998 | (7u64 << 61);
    ctx.deliver(Side::Send, cr, Duration::from_millis(100));
    // Receive side SEND_WITH_IMM for an unknown client key.
    let mut r = urma_sys::urma_cr_t::default();
    r.opcode = urma_sys::URMA_CR_OPC_SEND_WITH_IMM;
    r.flag.value = urma_sys::flags::CR_FLAG_S_R;
    r.__bindgen_anon_1.imm_data = crate::oracle::enc(0x997) | (1u64 << 60);
    ctx.deliver(Side::Recv, r, Duration::from_millis(100));
    // Receive side with a wrong opcode (WRITE_WITH_IMM) for the live recv.
    r.opcode = urma_sys::URMA_CR_OPC_WRITE_WITH_IMM;
    r.__bindgen_anon_1.imm_data = crate::oracle::enc(0x90);
    ctx.deliver(Side::Recv, r, Duration::from_millis(100));
    // NULL cr and NULL handle.
    // SAFETY: NULL arguments are part of the API contract (return -1).
    let a = unsafe { (ctx.slib.lib.os_transport_wake_up_task)(ctx.hs, std::ptr::null_mut()) };
    ctx.rec.api(format!("wake_up_task(H, NULL) = {a}"));
    let mut c2 = cr;
    // SAFETY: as above, NULL handle.
    let b = unsafe {
        (ctx.slib.lib.os_transport_wake_up_task)(
            std::ptr::null_mut(),
            (&mut c2 as *mut urma_sys::urma_cr_t).cast(),
        )
    };
    ctx.rec.api(format!("wake_up_task(NULL, cr) = {b}"));
    if let Some(s) = s {
        ctx.wait(Side::Recv, &s, Some(20));
    }
}

fn sc_recv_post_fail_retry(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 1, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    apply_knobs(ctx, "fail_recv_post=1:4096");
    ctx.recv(4 * MIB + 1, 0x45, 0);
    let (_, r) = ctx.recv(4 * MIB + 1, 0x45, 0);
    let (_, s) = ctx.send(4 * MIB + 1, 0x46, 0x45, 0);
    ctx.settle_recv(3, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(100));
    }
    ctx.check_data("data ck=0x45", 0, 4 * MIB as usize + 1);
}

fn sc_timeout_0(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xA1, 0);
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(0));
    }
    // A send whose WRITE completion is held by the loopback: its tasks stay queued.
    backend::get().hold_crs(true);
    let (_, s) = ctx.send(4 * MIB, 0xA2, 0xA3, 0);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(0));
    }
    let n = backend::get().release_crs(ReleaseOrder::Fifo);
    backend::get().hold_crs(false);
    ctx.rec.note(note_line(
        Aspect::Completion,
        &format!("released {n} held CRs"),
    ));
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(2));
    std::thread::sleep(Duration::from_millis(50));
    ctx.deliver_held(Order::Fifo);
}

fn sc_timeout_short(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xB1, 0);
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(30));
    }
    let (_, s) = ctx.send(4 * MIB, 0xB2, 0xB1, 0);
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
}

fn sc_cancel_before(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xC1, 0);
    if let Some(r) = r {
        ctx.cancel(Side::Recv, Some(&r), 0xC1);
    }
    let (_, s) = ctx.send(4 * MIB, 0xC2, 0xC1, 0);
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    if let Some(s) = s {
        ctx.wait(Side::Send, &s, Some(5000));
    }
    // Cancel with an unknown id and a NULL sync.
    ctx.cancel(Side::Send, None, 0xDEAD);
}

fn sc_cancel_after(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xD1, 0);
    let (_, s) = ctx.send(4 * MIB, 0xD2, 0xD1, 0);
    ctx.settle_recv(2, Duration::from_millis(150), Duration::from_secs(5));
    ctx.deliver_held(Order::Fifo);
    std::thread::sleep(Duration::from_millis(20));
    if let Some(r) = r {
        ctx.cancel(Side::Recv, Some(&r), 0xD1);
    }
    if let Some(s) = s {
        ctx.cancel(Side::Send, None, 0xD2);
        ctx.wait(Side::Send, &s, Some(5000));
    }
    ctx.check_data("data ck=0xd1", 0, 4 * MIB as usize);
}

fn sc_cancel_by_id(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.start_pollers(Delivery::Held(Order::Fifo));
    let (_, r) = ctx.recv(4 * MIB, 0xE1, 0);
    ctx.cancel(Side::Recv, None, 0xE1);
    if let Some(r) = r {
        ctx.wait(Side::Recv, &r, Some(30));
    }
}

fn sc_destroy_inflight(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    let (_, r) = ctx.recv(4 * MIB, 0xF1, 0);
    let Some(r) = r else { return };
    let p = crate::fixture::SendPtr(ctx.sync_ptr(&r));
    let h = crate::fixture::SendPtr(ctx.hs);
    let wait = ctx.rlib.lib.wait_and_free_sync;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("compat-waiter".into())
        .spawn(move || {
            let (p, h) = (p, h);
            let mut st = -77;
            // SAFETY: p is a live sync of this handle; the call may block forever (legacy,
            // by design): this thread is then left blocked on a sync legacy never frees.
            let r = unsafe { wait(h.0, p.0, &mut st) };
            let _ = tx.send((r, st));
        })
        .expect("spawn waiter");
    std::thread::sleep(Duration::from_millis(50));
    ctx.destroy(Side::Send);
    match rx.recv_timeout(Duration::from_millis(500)) {
        Ok((rv, st)) => ctx.rec.api(format!(
            "[waiter] wait_and_free_sync(H, {r}) = {} status={st}",
            super::ctx::r32(rv)
        )),
        Err(_) => ctx.rec.api(format!(
            "[waiter] wait_and_free_sync(H, {r}) still blocked 500 ms after destroy"
        )),
    }
    ctx.destroy(Side::Send);
}

fn sc_init_twice(ctx: &mut Ctx) {
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    ctx.init_raw(Side::Send, false, false, 2);
    ctx.destroy(Side::Send);
    ctx.destroy_null(Side::Send);
    if ctx.init(Side::Send, 1, 4) == 0 {
        ctx.start_pollers(Delivery::Pass);
        let (_, r) = ctx.recv(2 * MIB + 7, 0x1A, 0);
        let (_, s) = ctx.send(2 * MIB + 7, 0x1B, 0x1A, 0);
        if let Some(s) = s {
            ctx.wait(Side::Send, &s, Some(5000));
        }
        if let Some(r) = r {
            ctx.wait(Side::Recv, &r, Some(5000));
        }
        ctx.check_data("data ck=0x1a", 0, 2 * MIB as usize + 7);
    }
}

fn sc_init_workers_0(ctx: &mut Ctx) {
    ctx.init(Side::Send, 0, 4);
    ctx.send_null("handle", 4 * MIB, 1, 2);
    ctx.recv_null("handle", 4 * MIB, 2);
    ctx.destroy_null(Side::Send);
    // The instance slot is free again.
    if ctx.init(Side::Send, 1, 4) == 0 {
        ctx.destroy(Side::Send);
    }
}

fn sc_init_workers_1025(ctx: &mut Ctx) {
    ctx.init(Side::Send, 1025, 4);
}

fn sc_bad_inputs(ctx: &mut Ctx) {
    // Before init.
    ctx.send(4 * MIB, 1, 2, 0);
    ctx.recv(4 * MIB, 3, 0);
    ctx.cancel(Side::Send, None, 1);
    ctx.destroy_null(Side::Send);
    ctx.init_raw(Side::Send, true, false, 2);
    ctx.init_raw(Side::Send, false, true, 2);
    if ctx.init(Side::Send, 2, 4) != 0 {
        return;
    }
    for w in [
        "handle",
        "jetty_info",
        "local_src",
        "remote_dst",
        "ret_sync",
    ] {
        ctx.send_null(w, 4 * MIB, 0x11, 0x12);
    }
    ctx.send(0, 0x13, 0x14, 0);
    ctx.send(14 * MIB + 1, 0x15, 0x16, 0);
    for w in [
        "handle",
        "host_src",
        "device_dst",
        "ret_sync",
        "callback",
        "no_queue",
    ] {
        ctx.recv_null(w, 4 * MIB, 0x17);
    }
    ctx.recv(0, 0x18, 0);
    ctx.recv(14 * MIB + 1, 0x19, 0);
    for w in ["handle", "sync"] {
        ctx.wait_null(w);
    }
    // SAFETY: NULL handle is part of the contract.
    let r = unsafe {
        (ctx.slib.lib.os_transport_reg_jfc)(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    ctx.rec.api(format!(
        "reg_jfc(NULL, NULL, NULL) = {}",
        super::ctx::r32(r)
    ));
    // SAFETY: NULL handle.
    let r = unsafe {
        (ctx.slib.lib.os_transport_cancel_tasks)(std::ptr::null_mut(), std::ptr::null_mut(), 1)
    };
    ctx.rec.api(format!(
        "cancel_tasks(NULL, NULL, 1) = {}",
        super::ctx::r32(r)
    ));
    ctx.destroy_null(Side::Send);
}

fn sc_log_levels(ctx: &mut Ctx) {
    ctx.log_reg(Side::Send, 0, true);
    ctx.log_reg(Side::Send, 0, false);
    if ctx.init(Side::Send, 1, 2) == 0 {
        ctx.start_pollers(Delivery::Pass);
        let (_, r) = ctx.recv(2 * MIB + 1, 0x2A, 0);
        let (_, s) = ctx.send(2 * MIB + 1, 0x2B, 0x2A, 0);
        if let Some(s) = s {
            ctx.wait(Side::Send, &s, Some(5000));
        }
        if let Some(r) = r {
            ctx.wait(Side::Recv, &r, Some(5000));
        }
        ctx.stop_pollers();
        ctx.log_reg(Side::Send, 3, false);
        ctx.send(0, 0x2C, 0x2D, 0);
        ctx.destroy(Side::Send);
    }
    ctx.log_reg(Side::Send, -1, false);
    ctx.destroy_null(Side::Send);
}
