//! The scenario model and the generic transfer flow.
//!
//! A scenario has an id, a one-line description, an endpoint [`Setup`] and a body: either a
//! [`Flow`] (init, pollers, loopback knobs, recvs, sends, CR delivery, waits, data checks,
//! destroy) or a custom function for cases that do not fit the flow. `features` name what the
//! scenario exercises; the divergence ledger's `random` predicates match on them.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::fixture::RecvKind;
use crate::harness::aspect::{note_line, Aspect};
use crate::harness::backend;
use crate::harness::ctx::{wait_workers_idle, Delivery, ScenarioRun, SendVia, Setup, Side};
use crate::lib_under_test::DEFAULT_CHUNK_SIZE;

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
    /// Only the recv: no send is made for it (its recv is waited on with the flow's timeout).
    pub no_send: bool,
    /// Cancel the recv (`cancel_tasks` with the client key) at this point, instead of only
    /// waiting on it.
    pub cancel_recv: Option<Cancel>,
    /// Cancel the send request (`cancel_tasks` with the server key) at this point.
    pub cancel_send: Option<Cancel>,
}

/// When a [`Cancel`] of a [`Flow`] is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelAt {
    /// Right after the recv registered, before its send starts (recv only).
    Registered,
    /// Once every transfer's CRs arrived, before the held receive-side CRs are handed over
    /// (held delivery only: polled CRs are handed over as they come).
    Before,
    /// After the receive-side CRs were handed over, before the waits.
    After,
}

/// A cancel of one side of a transfer: `os_transport_cancel_tasks(h, &sync or NULL, id)`.
/// When the library takes the sync over (`*sync` NULL afterwards) it is not waited on; a sync
/// it keeps, or one cancelled by id only, is waited on (timed, [`Flow::wait_ms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancel {
    pub at: CancelAt,
    /// Pass the sync (true) or NULL (by id only).
    pub with_sync: bool,
}

/// When a [`Flow`]'s instance is destroyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DestroyAt {
    /// After the waits and data checks, when the run ends (every scenario's default).
    #[default]
    End,
    /// At [`CancelAt::Before`]'s point: every CR arrived, held receive-side CRs not handed
    /// over, no wait made; the pollers stop first (held CRs are recorded as undelivered) and
    /// no wait follows (the syncs died with the instance).
    Inflight,
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
            no_send: false,
            cancel_recv: None,
            cancel_send: None,
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
    /// When the instance is destroyed.
    pub destroy: DestroyAt,
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
            destroy: DestroyAt::End,
        }
    }
}

/// A scenario body.
#[derive(Clone)]
pub enum Body {
    Flow(Flow),
    Custom(Steps),
}

/// The Rust steps of a custom scenario, with the function's name and file (made by
/// [`steps!`](crate::steps)), so that `compat --print-scenario` can say where they are.
#[derive(Clone, Copy)]
pub struct Steps {
    pub run: fn(&mut ScenarioRun),
    pub name: &'static str,
    pub file: &'static str,
}

/// `steps!(f)`: the [`Steps`] of function `f`, named with its name and file.
#[macro_export]
macro_rules! steps {
    ($f:ident) => {
        $crate::harness::scenario::Steps {
            run: $f,
            name: stringify!($f),
            file: file!(),
        }
    };
}

/// The verdict a scenario pins (`expect` of a scenario file): a verdict, and/or per aspect
/// `same`, the ledger entries explaining its difference, or `FAIL`. When the run's verdict or
/// an aspect's differs, the scenario FAILs, saying what was expected and what came.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expect {
    /// `PASS`, `DIVERGES-AS-DOCUMENTED` with its entries (sorted), or `FAIL`.
    pub verdict: Option<Expected>,
    /// Per aspect, in the order written.
    pub aspects: Vec<(Aspect, Expected)>,
}

/// One expected verdict (of a scenario or of an aspect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// `PASS` (scenario) or `same` (aspect).
    Same,
    /// Different, explained by exactly these ledger entries (sorted).
    Documented(Vec<String>),
    /// `FAIL`.
    Fail,
}

impl Expected {
    /// [`Expected::Documented`] with `ids` in the ledger's order (D2 before D13), once each.
    pub fn documented(ids: &[String]) -> Expected {
        let mut v = ids.to_vec();
        v.sort_by_key(|id| id.get(1..).and_then(|n| n.parse::<u64>().ok()));
        v.dedup();
        Expected::Documented(v)
    }

    /// As a scenario file writes it: of the scenario (`PASS`, `DIVERGES-AS-DOCUMENTED D1 D13`,
    /// `FAIL`) or of an aspect (`same`, `D1 D13`, `FAIL`).
    pub fn text(&self, aspect: bool) -> String {
        match self {
            Expected::Same if aspect => "same".into(),
            Expected::Same => "PASS".into(),
            Expected::Documented(ids) if aspect => ids.join(" "),
            Expected::Documented(ids) => format!("DIVERGES-AS-DOCUMENTED {}", ids.join(" ")),
            Expected::Fail => "FAIL".into(),
        }
    }
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
    /// The verdict the scenario pins, if any (scenario files).
    pub expect: Option<Expect>,
}

impl Scenario {
    /// A scenario run by the generic flow ([`run_flow`]); its features follow from the flow.
    pub fn flow(id: &str, desc: &str, setup: Setup, f: Flow) -> Scenario {
        let features = flow_features(&setup, &f);
        Scenario {
            id: id.into(),
            desc: desc.into(),
            setup,
            body: Body::Flow(f),
            features,
            budget: Duration::from_secs(30),
            seed: None,
            expect: None,
        }
    }

    /// A scenario run by its own steps `f`, with the features it names (for the ledger's
    /// random predicates).
    pub fn custom(id: &str, desc: &str, setup: Setup, f: Steps, features: &[&str]) -> Scenario {
        Scenario {
            id: id.into(),
            desc: desc.into(),
            setup,
            body: Body::Custom(f),
            features: features.iter().map(|s| s.to_string()).collect(),
            budget: Duration::from_secs(30),
            seed: None,
            expect: None,
        }
    }

    /// Runs the scenario body on `ctx`.
    pub fn run(&self, ctx: &mut ScenarioRun) {
        match &self.body {
            Body::Flow(f) => run_flow(ctx, f),
            Body::Custom(f) => (f.run)(ctx),
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
        for c in [x.cancel_recv, x.cancel_send].into_iter().flatten() {
            add("cancel");
            if !c.with_sync {
                add("cancel_by_id");
            }
        }
    }
    if f.destroy == DestroyAt::Inflight {
        add("destroy_inflight");
    }
    if setup.recv_kind == RecvKind::Jfr {
        add("jfr_only");
    }
    // Neither a JFS nor a jetty to post to: the first WRITE post fails (as `send-no-queue`).
    if f.via == SendVia::None {
        add("post_fail_first");
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
        // The duplicate of a held receive-side CR is handed over right after the original:
        // when that was the last chunk its request was waiting for, after the request completed.
        add("cr_after_completion");
    }
    s
}

/// Applies a scenario's knob spec through the backend and notes it. A spec the backend rejects
/// is a harness bug (the scenario would inject nothing and judge a fault-free run), so it
/// panics: the scenario is reported as FAIL, never as a quiet PASS.
pub fn apply_knobs(ctx: &ScenarioRun, spec: &str) {
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

/// Longest wait for idle workers before a flow's cancel or destroy in flight.
const SETTLE_WORKERS: Duration = Duration::from_millis(500);

/// Runs a [`Flow`] on `ctx`.
pub fn run_flow(ctx: &mut ScenarioRun, f: &Flow) {
    if ctx.init(Side::Send, f.workers, f.capacity) != 0 || ctx.hs.is_null() {
        return;
    }
    ctx.start_pollers(f.delivery);
    if !f.knobs.is_empty() {
        apply_knobs(ctx, &f.knobs);
    }
    let mut syncs = Syncs::default();
    let mut started = vec![false; f.xfers.len()];
    for (i, x) in f.xfers.iter().enumerate() {
        if let Some(k) = x.cb_fail {
            ctx.rec.fail_notify(x.ck, k, 1);
        }
        if !x.early {
            let (_, s) = ctx.recv(x.recv_len, x.ck, x.off);
            syncs.recv.push((i, s));
            syncs.cancel(ctx, f, CancelAt::Registered, Some(i));
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
    for (i, x) in f.xfers.iter().enumerate().filter(|(_, x)| !x.no_send) {
        let (r, s) = ctx.send_ex(x.len, x.sk, x.ck, x.off, f.via);
        if r == 0 {
            started[i] = true;
            expected += chunks(x.len) as u64;
        }
        syncs.send.push((i, s));
    }
    if lockstep {
        send_lockstep(ctx);
    }
    ctx.settle_recv(
        expected,
        Duration::from_millis(150),
        Duration::from_secs(20),
    );
    syncs.cancel(ctx, f, CancelAt::Before, None);
    if f.destroy == DestroyAt::Inflight {
        // The syncs die with the instance: no wait follows. The CRs handed over so far (all of
        // them when polled, and the pollers' final drain) are the workers' to finish first: a
        // destroy while a worker still ran a chunk's task found its notify done on one library
        // and dropped on the other, depending on scheduling (1 run in 60).
        ctx.stop_pollers();
        wait_workers_idle(SETTLE_WORKERS);
        ctx.destroy(Side::Send);
        check_all_data(ctx, f, &started);
        return;
    }
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
            syncs.recv.push((i, s));
            syncs.cancel(ctx, f, CancelAt::Registered, Some(i));
        }
    }
    syncs.cancel(ctx, f, CancelAt::After, None);
    for (i, s) in &syncs.send {
        if let Some(s) = syncs.waitable(ctx, s) {
            let t = if f.untimed && started[*i] && !syncs.cancelled.contains(s) {
                None
            } else {
                Some(f.wait_ms)
            };
            ctx.wait(Side::Send, s, t);
        }
    }
    syncs.recv.sort_by_key(|(i, _)| *i);
    for (i, s) in &syncs.recv {
        if let Some(s) = syncs.waitable(ctx, s) {
            let t = if !started[*i] && !f.xfers[*i].no_send {
                Some(50)
            } else if f.untimed && started[*i] && !syncs.cancelled.contains(s) {
                None
            } else {
                Some(f.wait_ms)
            };
            ctx.wait(Side::Recv, s, t);
        }
    }
    check_all_data(ctx, f, &started);
}

/// The data check of every transfer that started.
fn check_all_data(ctx: &mut ScenarioRun, f: &Flow, started: &[bool]) {
    for (i, x) in f.xfers.iter().enumerate() {
        if started[i] {
            ctx.check_data(&format!("data ck=0x{:x}", x.ck), x.off, x.len as usize);
        }
    }
}

/// The syncs a flow was handed (per transfer index) and the ones it cancelled.
#[derive(Default)]
struct Syncs {
    recv: Vec<(usize, Option<String>)>,
    send: Vec<(usize, Option<String>)>,
    cancelled: BTreeSet<String>,
}

impl Syncs {
    /// Makes the cancels of `at` (of transfer `only`, else of every transfer), recv before
    /// send, in transfer order, once the workers finished what was handed to them (a cancel
    /// racing a running task removes more or fewer tasks by chance).
    fn cancel(&mut self, ctx: &mut ScenarioRun, f: &Flow, at: CancelAt, only: Option<usize>) {
        let due = |x: &Xfer| {
            [x.cancel_recv, x.cancel_send]
                .into_iter()
                .flatten()
                .any(|c| c.at == at)
        };
        let mine = |(i, x): &(usize, &Xfer)| only.is_none_or(|o| o == *i) && due(x);
        if !f.xfers.iter().enumerate().any(|e| mine(&e)) {
            return;
        }
        wait_workers_idle(SETTLE_WORKERS);
        for (i, x) in f.xfers.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            for (side, c, list, rid) in [
                (Side::Recv, x.cancel_recv, &self.recv, x.ck),
                (Side::Send, x.cancel_send, &self.send, x.sk),
            ] {
                let Some(c) = c.filter(|c| c.at == at) else {
                    continue;
                };
                // A transfer whose call handed out no sync is cancelled by id only.
                let sync = list
                    .iter()
                    .find(|(j, _)| *j == i)
                    .and_then(|(_, s)| s.clone());
                let passed = sync.as_deref().filter(|_| c.with_sync);
                ctx.cancel(side, passed, rid);
                if let Some(s) = sync {
                    self.cancelled.insert(s);
                }
            }
        }
    }

    /// `s` if it is still to be waited on: not taken over by a cancel.
    fn waitable<'a>(&self, ctx: &ScenarioRun, s: &'a Option<String>) -> Option<&'a String> {
        s.as_ref().filter(|s| !ctx.sync_ptr(s).is_null())
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
fn send_lockstep(ctx: &mut ScenarioRun) {
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

/// The endpoint setup of a transfer of `len` bytes (buffers of at least 4 MiB).
pub fn setup_for(len: u32) -> Setup {
    Setup {
        buf_len: (len as usize).max(4 << 20),
        ..Default::default()
    }
}

/// One transfer of `len` bytes with server key `sk` and client key `ck`.
pub fn one(len: u32, sk: u64, ck: u64) -> Vec<Xfer> {
    vec![Xfer::new(len, sk, ck)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_without_queues_is_a_failed_first_post() {
        let f = Flow {
            xfers: one(2 * MIB + 1, 1, 2),
            via: SendVia::None,
            ..Default::default()
        };
        assert!(flow_features(&Setup::default(), &f).contains("post_fail_first"));
        let g = Flow {
            via: SendVia::Jetty,
            ..f
        };
        assert!(!flow_features(&Setup::default(), &g).contains("post_fail_first"));
    }

    #[test]
    fn a_duplicated_held_cr_may_come_after_its_request_completed() {
        let f = Flow {
            xfers: one(2 * MIB + 1, 1, 2),
            delivery: Delivery::Held(crate::harness::ctx::Order::Fifo),
            dup_held: Some(1),
            ..Default::default()
        };
        let features = flow_features(&Setup::default(), &f);
        assert!(features.contains("cr_after_completion"), "{features:?}");
    }
}
