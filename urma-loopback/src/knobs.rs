//! The provider's own tunables (set through `urma_loopback_*` or `URMA_LOOPBACK_KNOBS`): no-copy
//! mode, asynchronous posts, the delete and receiver-not-ready timeouts, and the limits of the
//! cross-process transport. The fault rules, the WR / CR numbering and held or delayed CRs are the
//! fault plane's ([`crate::faults`], two floors up, since it keeps CRs with their JFCs).
//!
//! Bottom floor of the provider: this module depends on nothing but [`crate::util`] and the
//! control plane's knob-spec syntax (`urma-loopback-ctl`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use urma_loopback_ctl::spec::num;

/// Default bound for `urma_delete_jfc` waiting on unacked events.
pub const DEFAULT_DELETE_TIMEOUT_MS: u64 = 2000;

/// Default receiver-not-ready timeout (ms): how long a SEND/SEND_IMM/WRITE_IMM that finds no
/// recv WR stays parked before it fails with `URMA_CR_RNR_RETRY_CNT_EXC_ERR`.
pub const DEFAULT_RNR_TIMEOUT_MS: u64 = 200;

pub static NOCOPY: AtomicBool = AtomicBool::new(false);
/// A send post returns once the DMA engine queued its WRs (true), or once it executed them
/// (false, the default). Process-wide, kept by `urma_loopback_reset`.
pub static ASYNC_POST: AtomicBool = AtomicBool::new(false);
pub static DELETE_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_DELETE_TIMEOUT_MS);
/// Receiver-not-ready timeout in ms (0 = fail at once).
pub static RNR_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_RNR_TIMEOUT_MS);

/// Restores the defaults of the tunables `urma_loopback_reset` resets (all but `async_post`).
pub fn reset() {
    NOCOPY.store(false, Ordering::Release);
    DELETE_TIMEOUT_MS.store(DEFAULT_DELETE_TIMEOUT_MS, Ordering::Release);
    RNR_TIMEOUT_MS.store(DEFAULT_RNR_TIMEOUT_MS, Ordering::Release);
}

/// Applies one knob-spec item of the provider's own (`nocopy=0|1`, `async_post=0|1`,
/// `delete_timeout_ms=N`, `rnr_timeout_ms=N`); `None` for another key or a value that does not
/// read.
pub fn apply_own(key: &str, v: &str) -> Option<()> {
    match key {
        "nocopy" => NOCOPY.store(num(v)? != 0, Ordering::Release),
        "async_post" => ASYNC_POST.store(num(v)? != 0, Ordering::Release),
        "delete_timeout_ms" => DELETE_TIMEOUT_MS.store(num(v)?, Ordering::Release),
        "rnr_timeout_ms" => RNR_TIMEOUT_MS.store(num(v)?, Ordering::Release),
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
mod limit_tests {
    use super::Limits;

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
