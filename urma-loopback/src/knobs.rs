//! Fault-injection and timing knobs (set through `urma_loopback_*` or `URMA_LOOPBACK_KNOBS`).
//!
//! Counting: "the Nth send WR" counts every send WR that reaches a post call (1-based, since
//! process start or `urma_loopback_reset`), "the Nth recv WR" likewise for recv posts, and "the
//! Nth CR" counts every CR generated (send and recv side, before drop/dup).

//!
//! Bottom floor of the provider: this module depends on nothing but [`crate::util`], the counter
//! type of [`crate::stats`] and the control-plane constants (`urma-loopback-ctl`). What acts on
//! the knobs (holding and delaying CRs) lives above the queues, in [`crate::hold`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use urma_loopback_ctl::faults;
use urma_loopback_ctl::spec::{self, num, Knob};

use crate::stats::Counter;
use crate::util::{lock, Line};

pub use urma_loopback_ctl::{
    CR_DROP, CR_DUP, ORDER_FIFO, ORDER_REVERSE, ORDER_SHUFFLE, Q_RECV, Q_SEND,
};

/// Default bound for `urma_delete_jfc` waiting on unacked events.
pub const DEFAULT_DELETE_TIMEOUT_MS: u64 = 2000;

/// Default receiver-not-ready timeout (ms): how long a SEND/SEND_IMM/WRITE_IMM that finds no
/// recv WR stays parked before it fails with `URMA_CR_RNR_RETRY_CNT_EXC_ERR`.
pub const DEFAULT_RNR_TIMEOUT_MS: u64 = 200;

#[derive(Default)]
pub struct Knobs {
    /// (queue, nth, status): the Nth WR of that queue kind is rejected by the post call.
    pub fail_post: Vec<(i32, u64, i32)>,
    /// (nth, cr status): the Nth send WR completes with this error status (nothing executed).
    pub fail_cr: Vec<(u64, u32)>,
    /// (nth, action): the Nth CR generated is dropped or duplicated.
    pub cr_action: Vec<(u64, i32)>,
    pub hold: bool,
    pub delay_ms: u64,
}

pub static KNOBS: Mutex<Knobs> = Mutex::new(Knobs {
    fail_post: Vec::new(),
    fail_cr: Vec::new(),
    cr_action: Vec::new(),
    hold: false,
    delay_ms: 0,
});
/// Fast path: false when no rule/hold/delay is set.
pub static ANY: AtomicBool = AtomicBool::new(false);
pub static NOCOPY: AtomicBool = AtomicBool::new(false);
/// A send post returns once the DMA engine queued its WRs (true), or once it executed them
/// (false, the default). Process-wide, kept by `urma_loopback_reset`.
pub static ASYNC_POST: AtomicBool = AtomicBool::new(false);
pub static DELETE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_DELETE_TIMEOUT_MS);
/// Receiver-not-ready timeout in ms (0 = fail at once).
pub static RNR_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_RNR_TIMEOUT_MS);

/// "The Nth send WR / recv WR / CR" (see the module doc), counted by every post and CR.
pub static SEND_SEQ: Seq = Seq::new();
pub static RECV_SEQ: Seq = Seq::new();
pub static CR_SEQ: Seq = Seq::new();

/// A sequence counter that is exact only while some knob is set ([`ANY`]), the only time anyone
/// asks which number an event has: then every event takes the next number from one shared word.
/// Otherwise each thread counts on its own stripe ([`crate::stats::Counter`]), so that the
/// posting threads and the poller do not pass one cache line back and forth at every post and
/// CR; the stripes still count, so that a rule set later numbers from process start or reset.
pub struct Seq {
    exact: Line<AtomicU64>,
    quiet: Counter,
}

impl Seq {
    const fn new() -> Seq {
        Seq {
            exact: Line(AtomicU64::new(0)),
            quiet: Counter::new(),
        }
    }

    /// Counts one event; returns its 1-based number while a knob is set, 0 (no rule names it)
    /// otherwise. Events counted while no knob was set are numbered before every later one.
    #[inline]
    pub fn next(&self) -> u64 {
        self.count(ANY.load(Ordering::Acquire))
    }

    /// [`Seq::next`] with "a knob is set" given.
    #[inline]
    fn count(&self, exact: bool) -> u64 {
        if !exact {
            self.quiet.fetch_add(1, Ordering::Relaxed);
            return 0;
        }
        self.exact.fetch_add(1, Ordering::Relaxed) + 1 + self.quiet.load(Ordering::Relaxed)
    }

    fn reset(&self) {
        self.exact.store(0, Ordering::Release);
        self.quiet.store(0, Ordering::Release);
    }
}

fn refresh(k: &Knobs) {
    let any = !k.fail_post.is_empty()
        || !k.fail_cr.is_empty()
        || !k.cr_action.is_empty()
        || k.hold
        || k.delay_ms > 0;
    ANY.store(any, Ordering::Release);
}

/// Edits the knobs.
pub fn edit(f: impl FnOnce(&mut Knobs)) {
    let mut k = lock(&KNOBS);
    f(&mut k);
    refresh(&k);
}

/// Clears every knob and sequence counter (the caller then releases the CRs held so far:
/// [`crate::hold::release_held`]).
pub fn reset() {
    edit(|k| *k = Knobs::default());
    NOCOPY.store(false, Ordering::Release);
    DELETE_TIMEOUT_MS.store(DEFAULT_DELETE_TIMEOUT_MS, Ordering::Release);
    RNR_TIMEOUT_MS.store(DEFAULT_RNR_TIMEOUT_MS, Ordering::Release);
    SEND_SEQ.reset();
    RECV_SEQ.reset();
    CR_SEQ.reset();
}

/// Status the Nth post of `queue` must fail with, if any (consumes the rule).
pub fn take_fail_post(queue: i32, nth: u64) -> Option<i32> {
    if nth == 0 || !ANY.load(Ordering::Acquire) {
        return None;
    }
    let mut out = None;
    edit(|k| out = faults::take_post(&mut k.fail_post, queue, nth));
    out
}

/// CR status the Nth send WR must complete with, if any (consumes the rule).
pub fn take_fail_cr(nth: u64) -> Option<u32> {
    if nth == 0 || !ANY.load(Ordering::Acquire) {
        return None;
    }
    let mut out = None;
    edit(|k| out = faults::take(&mut k.fail_cr, nth));
    out
}

/// What happens to one generated CR (the control plane's, shared with the interposition layer).
pub use urma_loopback_ctl::faults::Fate;

/// Decides the fate of the Nth CR (consumes the rule).
pub fn cr_fate(nth: u64) -> Fate {
    if nth == 0 || !ANY.load(Ordering::Acquire) {
        return Fate::Deliver;
    }
    let mut out = Fate::Deliver;
    edit(|k| out = faults::take(&mut k.cr_action, nth).map_or(Fate::Deliver, Fate::of));
    out
}

/// Applies a knob spec (syntax, value rules and the fault keys: `urma_loopback_ctl::spec`).
///
/// Keys: `fail_post=N:STATUS`, `fail_recv_post=N:STATUS` (STATUS an `int`, negative allowed),
/// `fail_cr=N:CR_STATUS`, `drop_cr=N`, `dup_cr=N`, `hold=0|1`, `delay_ms=N`, `nocopy=0|1`,
/// `delete_timeout_ms=N`, `rnr_timeout_ms=N`,
/// `async_post=0|1`. Returns the number of items applied, or Err(item)
/// for the first item that does not parse (items before it are applied).
pub fn apply_spec(spec: &str) -> Result<usize, String> {
    spec::apply(spec, |knob| {
        match knob {
            Knob::FailPost { queue, nth, status } => {
                edit(|kn| kn.fail_post.push((queue, nth, status)))
            }
            Knob::FailCr { nth, status } => edit(|kn| kn.fail_cr.push((nth, status))),
            Knob::CrAction { nth, action } => edit(|kn| kn.cr_action.push((nth, action))),
            Knob::Hold(on) => edit(|kn| kn.hold = on),
            Knob::DelayMs(ms) => edit(|kn| kn.delay_ms = ms),
            Knob::Other(k, v) => match k {
                "nocopy" => NOCOPY.store(num(v)? != 0, Ordering::Release),
                "async_post" => ASYNC_POST.store(num(v)? != 0, Ordering::Release),
                "delete_timeout_ms" => DELETE_TIMEOUT_MS.store(num(v)?, Ordering::Release),
                "rnr_timeout_ms" => RNR_TIMEOUT_MS.store(num(v)?, Ordering::Release),
                _ => return None,
            },
        }
        Some(())
    })
}

/// The limits of the cross-process transport ([`crate::peer`]), read once per process from the
/// environment (docs/loopback.md, "Security model", lists them with their defaults). An unset
/// variable takes the default; one that is not a whole number in range is reported through the
/// log and takes the default too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `URMA_LOOPBACK_CONNECT_TIMEOUT_MS`: longest wait to connect to another process.
    pub connect: std::time::Duration,
    /// `URMA_LOOPBACK_IO_TIMEOUT_MS`: longest wait for a peer's next bytes inside a message, for
    /// a whole message body, and for the acknowledgement of the oldest outstanding request.
    pub io: std::time::Duration,
    /// `URMA_LOOPBACK_IDLE_TIMEOUT_MS`: an owner closes a connection that sent nothing this long.
    pub idle: std::time::Duration,
    /// `URMA_LOOPBACK_MAX_CONNS`: most connections an owner serves at once.
    pub max_conns: usize,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        connect: std::time::Duration::from_millis(1000),
        io: std::time::Duration::from_millis(5000),
        idle: std::time::Duration::from_millis(60_000),
        max_conns: 256,
    };

    /// The limits `var` (an environment lookup) gives; each refused value is reported to `bad`.
    pub fn from(var: impl Fn(&str) -> Option<String>, mut bad: impl FnMut(String)) -> Limits {
        let d = Limits::DEFAULT;
        let mut num = |name: &str, default: u64, min: u64, max: u64| -> u64 {
            let Some(v) = var(name) else { return default };
            match v.trim().parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => n,
                _ => {
                    bad(format!(
                        "{name}={v:?} is not a whole number in {min}..={max}; using {default}"
                    ));
                    default
                }
            }
        };
        let ms = std::time::Duration::from_millis;
        let day = 86_400_000;
        Limits {
            connect: ms(num(
                "URMA_LOOPBACK_CONNECT_TIMEOUT_MS",
                d.connect.as_millis() as u64,
                1,
                day,
            )),
            io: ms(num(
                "URMA_LOOPBACK_IO_TIMEOUT_MS",
                d.io.as_millis() as u64,
                1,
                day,
            )),
            idle: ms(num(
                "URMA_LOOPBACK_IDLE_TIMEOUT_MS",
                d.idle.as_millis() as u64,
                1,
                day,
            )),
            max_conns: num("URMA_LOOPBACK_MAX_CONNS", d.max_conns as u64, 1, 65_536) as usize,
        }
    }
}

/// This process's transport limits (read at first use).
pub fn limits() -> &'static Limits {
    static L: std::sync::OnceLock<Limits> = std::sync::OnceLock::new();
    L.get_or_init(|| Limits::from(|n| std::env::var(n).ok(), |m| crate::util::log_alert(&m)))
}

#[cfg(test)]
mod seq_tests {
    use super::{Limits, Seq};

    #[test]
    fn events_counted_quietly_come_before_the_numbered_ones() {
        let s = Seq::new();
        for _ in 0..5 {
            assert_eq!(s.count(false), 0, "no knob set: no number");
        }
        assert_eq!(s.count(true), 6);
        assert_eq!(s.count(true), 7);
        assert_eq!(s.count(false), 0);
        assert_eq!(s.count(true), 9, "the quiet one in between was counted");
        s.reset();
        assert_eq!(s.count(true), 1, "1-based again after a reset");
    }

    #[test]
    fn numbered_events_of_several_threads_get_distinct_numbers() {
        let s = Seq::new();
        for _ in 0..3 {
            s.count(false);
        }
        let mut all: Vec<u64> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|_| sc.spawn(|| (0..500).map(|_| s.count(true)).collect::<Vec<_>>()))
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        all.sort_unstable();
        assert_eq!(all, (4..=2003).collect::<Vec<u64>>());
    }

    #[test]
    fn limits_take_whole_numbers_in_range_and_report_the_rest() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |n: &str| pairs.iter().find(|p| p.0 == n).map(|p| p.1.to_string())
        };
        let mut said = Vec::new();
        let l = Limits::from(env(&[]), |m| said.push(m));
        assert_eq!(l, Limits::DEFAULT);
        assert!(said.is_empty());
        let l = Limits::from(
            env(&[
                ("URMA_LOOPBACK_IO_TIMEOUT_MS", "250"),
                ("URMA_LOOPBACK_MAX_CONNS", " 3 "),
                ("URMA_LOOPBACK_IDLE_TIMEOUT_MS", "0"),
                ("URMA_LOOPBACK_CONNECT_TIMEOUT_MS", "soon"),
            ]),
            |m| said.push(m),
        );
        assert_eq!(l.io, std::time::Duration::from_millis(250));
        assert_eq!(l.max_conns, 3);
        assert_eq!(l.idle, Limits::DEFAULT.idle);
        assert_eq!(l.connect, Limits::DEFAULT.connect);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said
            .iter()
            .any(|m| m.contains("URMA_LOOPBACK_IDLE_TIMEOUT_MS")));
    }
}
