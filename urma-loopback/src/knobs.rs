//! The provider's own tunables (set through `urma_loopback_*` or `URMA_LOOPBACK_KNOBS`): no-copy
//! mode, asynchronous posts, the delete and receiver-not-ready timeouts; and, read from the
//! environment in every build (with or without the control API), the provider's default
//! receiver-not-ready timeout and the limits of the cross-process transport. The fault rules, the WR / CR numbering and held or delayed CRs are the
//! fault plane's ([`crate::faults`], two floors up, since it keeps CRs with their JFCs).
//!
//! Bottom floor of the provider: this module depends on nothing but [`crate::util`] and the
//! control plane's knob-spec syntax (`urma-loopback-ctl`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use urma_datapath::spec::num;

/// Default bound for `urma_delete_jfc` waiting on unacked events.
pub const DEFAULT_DELETE_TIMEOUT_MS: u64 = 2000;

/// Default receiver-not-ready timeout (ms): how long a SEND/SEND_IMM/WRITE_IMM that finds no
/// recv WR stays parked before it fails with `URMA_CR_RNR_RETRY_CNT_EXC_ERR`, unless
/// `URMA_LOOPBACK_RNR_TIMEOUT_MS` says otherwise ([`default_rnr_timeout_ms`]).
pub const DEFAULT_RNR_TIMEOUT_MS: u64 = 200;

/// Longest value the millisecond variables of the environment take (one day).
const DAY_MS: u64 = 86_400_000;

/// [`RNR_TIMEOUT_MS`] when no knob set it: the process's default applies.
const RNR_UNSET: u64 = u64::MAX;

pub static NOCOPY: AtomicBool = AtomicBool::new(false);
/// A send post returns once the DMA engine queued its WRs (true), or once it executed them
/// (false, the default). Process-wide, kept by `urma_loopback_reset`.
pub static ASYNC_POST: AtomicBool = AtomicBool::new(false);
pub static DELETE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_DELETE_TIMEOUT_MS);
/// Receiver-not-ready timeout in ms set by a knob (0 = fail at once), or [`RNR_UNSET`]: read it
/// with [`rnr_timeout_ms`].
static RNR_TIMEOUT_MS: AtomicU64 = AtomicU64::new(RNR_UNSET);

/// The receiver-not-ready timeout in force (ms; 0 = a message finding no recv WR fails at once):
/// the last knob's value (`rnr_timeout_ms=N`, `urma_loopback_set_rnr_timeout`), else the
/// process's default.
pub fn rnr_timeout_ms() -> u64 {
    match RNR_TIMEOUT_MS.load(Ordering::Acquire) {
        RNR_UNSET => default_rnr_timeout_ms(),
        ms => ms,
    }
}

/// Sets the receiver-not-ready timeout (a knob; `urma_loopback_reset` goes back to the default).
pub fn set_rnr_timeout_ms(ms: u64) {
    RNR_TIMEOUT_MS.store(ms.min(RNR_UNSET - 1), Ordering::Release);
}

/// The process's default receiver-not-ready timeout: `URMA_LOOPBACK_RNR_TIMEOUT_MS` (0 ..= one
/// day, read at first use; 0 makes the provider strict: a message finding no recv WR fails at
/// once, as a transport without RNR retries does), else [`DEFAULT_RNR_TIMEOUT_MS`]. Read in every
/// build, so a run over the provider without its control API can choose it too.
pub fn default_rnr_timeout_ms() -> u64 {
    static D: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *D.get_or_init(|| rnr_timeout_from(&crate::util::env, &mut |m| crate::util::log_alert(&m)))
}

/// The default receiver-not-ready timeout `var` (an environment lookup) gives.
fn rnr_timeout_from(var: &dyn Fn(&str) -> Option<String>, bad: &mut dyn FnMut(String)) -> u64 {
    env_num(
        var,
        bad,
        ("URMA_LOOPBACK_RNR_TIMEOUT_MS", DEFAULT_RNR_TIMEOUT_MS),
        0..=DAY_MS,
    )
}

/// The whole number in `range` the variable `name` holds (`var` looks it up), or `default` when
/// it is unset; a value that is not one is reported to `bad` and gives `default` too.
fn env_num(
    var: &dyn Fn(&str) -> Option<String>,
    bad: &mut dyn FnMut(String),
    (name, default): (&str, u64),
    range: std::ops::RangeInclusive<u64>,
) -> u64 {
    let Some(v) = var(name) else { return default };
    match v.trim().parse::<u64>() {
        Ok(n) if range.contains(&n) => n,
        _ => {
            bad(format!(
                "{name}={v:?} is not a whole number in {}..={}; using {default}",
                range.start(),
                range.end()
            ));
            default
        }
    }
}

/// Restores the defaults of the tunables `urma_loopback_reset` resets (all but `async_post`).
pub fn reset() {
    NOCOPY.store(false, Ordering::Release);
    DELETE_TIMEOUT_MS.store(DEFAULT_DELETE_TIMEOUT_MS, Ordering::Release);
    RNR_TIMEOUT_MS.store(RNR_UNSET, Ordering::Release);
}

/// Applies one knob-spec item of the provider's own (`nocopy=0|1`, `async_post=0|1`,
/// `delete_timeout_ms=N`, `rnr_timeout_ms=N`); `None` for another key or a value that does not
/// read.
pub fn apply_own(key: &str, v: &str) -> Option<()> {
    match key {
        "nocopy" => NOCOPY.store(num(v)? != 0, Ordering::Release),
        "async_post" => ASYNC_POST.store(num(v)? != 0, Ordering::Release),
        "delete_timeout_ms" => DELETE_TIMEOUT_MS.store(num(v)?, Ordering::Release),
        "rnr_timeout_ms" => set_rnr_timeout_ms(num(v)?),
        _ => return None,
    }
    Some(())
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
            env_num(&var, &mut bad, (name, default), min..=max)
        };
        let ms = std::time::Duration::from_millis;
        Limits {
            connect: ms(num(
                "URMA_LOOPBACK_CONNECT_TIMEOUT_MS",
                d.connect.as_millis() as u64,
                1,
                DAY_MS,
            )),
            io: ms(num(
                "URMA_LOOPBACK_IO_TIMEOUT_MS",
                d.io.as_millis() as u64,
                1,
                DAY_MS,
            )),
            idle: ms(num(
                "URMA_LOOPBACK_IDLE_TIMEOUT_MS",
                d.idle.as_millis() as u64,
                1,
                DAY_MS,
            )),
            max_conns: num("URMA_LOOPBACK_MAX_CONNS", d.max_conns as u64, 1, 65_536) as usize,
        }
    }
}

/// This process's transport limits (read at first use).
pub fn limits() -> &'static Limits {
    static L: std::sync::OnceLock<Limits> = std::sync::OnceLock::new();
    L.get_or_init(|| Limits::from(crate::util::env, |m| crate::util::log_alert(&m)))
}

#[cfg(test)]
mod env_tests {
    use super::*;

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

    #[test]
    fn rnr_timeout_comes_from_the_environment_and_a_knob_overrides_it_until_reset() {
        let mut said = Vec::new();
        let var = |v: &'static str| {
            move |n: &str| (n == "URMA_LOOPBACK_RNR_TIMEOUT_MS").then(|| v.to_string())
        };
        let none = |_: &str| None;
        assert_eq!(
            rnr_timeout_from(&none, &mut |m| said.push(m)),
            DEFAULT_RNR_TIMEOUT_MS
        );
        assert_eq!(
            rnr_timeout_from(&var("0"), &mut |m| said.push(m)),
            0,
            "0: strict, no parking"
        );
        assert_eq!(rnr_timeout_from(&var(" 750 "), &mut |m| said.push(m)), 750);
        assert!(said.is_empty(), "{said:?}");
        assert_eq!(
            rnr_timeout_from(&var("-1"), &mut |m| said.push(m)),
            DEFAULT_RNR_TIMEOUT_MS
        );
        assert_eq!(
            rnr_timeout_from(&var("86400001"), &mut |m| said.push(m)),
            DEFAULT_RNR_TIMEOUT_MS
        );
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("URMA_LOOPBACK_RNR_TIMEOUT_MS"), "{said:?}");
        // The knob wins over the process's default; reset goes back to that default.
        let d = default_rnr_timeout_ms();
        assert!(apply_own("rnr_timeout_ms", "0").is_some());
        assert_eq!(rnr_timeout_ms(), 0);
        set_rnr_timeout_ms(d + 1);
        assert_eq!(rnr_timeout_ms(), d + 1);
        reset();
        assert_eq!(rnr_timeout_ms(), d);
    }
}
