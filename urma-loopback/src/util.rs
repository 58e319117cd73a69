//! Small helpers: panic boundary, poison-tolerant locking, zeroed C structs, logging.

use std::ops::{Deref, DerefMut};

use ranked_lock::{rank, Mutex, MutexGuard, RwLock};

/// Runs `f` behind a panic boundary: a panic never unwinds into C; `default` is returned instead.
pub fn guard<R>(default: R, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            log_err("internal panic caught at the C boundary");
            default
        }
    }
}

/// Locks a mutex of rank `R` (`ranked_lock`: every lock of the provider has a rank from the
/// workspace's one table, `ranked_lock::rank`, and debug builds check their order), ignoring
/// poisoning (a panicking thread never leaves our state half-updated in a way that matters more
/// than a deadlock would).
#[cfg_attr(debug_assertions, track_caller)]
pub fn lock<T: ?Sized, const R: u8>(m: &Mutex<T, R>) -> MutexGuard<'_, T, R> {
    ranked_lock::lock(m)
}

/// Read-locks an `RwLock` of rank `R`, ignoring poisoning.
#[cfg_attr(debug_assertions, track_caller)]
pub fn rlock<T, const R: u8>(m: &RwLock<T, R>) -> impl Deref<Target = T> + '_ {
    ranked_lock::read(m)
}

/// Write-locks an `RwLock` of rank `R`, ignoring poisoning.
#[cfg_attr(debug_assertions, track_caller)]
pub fn wlock<T, const R: u8>(m: &RwLock<T, R>) -> impl DerefMut<Target = T> + '_ {
    ranked_lock::write(m)
}

/// An all-zero value of a plain C type.
///
/// Only used with `urma-sys` structs/unions, which are plain old data (integers, raw pointers,
/// arrays and unions thereof) for which all-zero bytes are a valid value.
pub fn zeroed<T: Copy>() -> T {
    // SAFETY: T is a bindgen-generated POD C type (see above); zero bytes are a valid value.
    unsafe { std::mem::MaybeUninit::<T>::zeroed().assume_init() }
}

static LOG_FUNC: Mutex<urma_sys::urma_log_cb_t, { rank::LOG_FUNC }> = Mutex::new(None);

/// Stores the callback given to `urma_register_log_func`.
pub fn set_log_func(f: urma_sys::urma_log_cb_t) {
    *lock(&LOG_FUNC) = f;
}

/// Reports an error through the registered log callback (if any).
pub fn log_err(msg: &str) {
    let f = *lock(&LOG_FUNC);
    if let Some(f) = f {
        let text = format!("[urma-loopback] {msg}\n");
        if let Ok(c) = std::ffi::CString::new(text) {
            // SAFETY: f is the caller-registered C callback; the message is a valid C string that
            // outlives the call.
            unsafe { f(urma_sys::URMA_VLOG_LEVEL_ERR as _, c.as_ptr() as *mut _) };
        }
    }
}

/// Reports an error that must not go unseen: through the registered log callback, or, when the
/// application registered none, on standard error. Used where the provider refuses to talk to
/// another process or is refused by it (docs/loopback.md, "Security model").
pub fn log_alert(msg: &str) {
    if lock(&LOG_FUNC).is_some() {
        log_err(msg);
    } else {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "[urma-loopback] error: {msg}");
    }
}

/// At most [`RateLimit::BURST`] reports per [`RateLimit::WINDOW`]; the number held back is told
/// with the next report let through.
pub struct RateLimit(Mutex<(Option<std::time::Instant>, u32, u64), { rank::RATE_LIMIT }>);

impl RateLimit {
    pub const BURST: u32 = 10;
    pub const WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

    pub const fn new() -> RateLimit {
        RateLimit(Mutex::new((None, 0, 0)))
    }

    /// `msg` through [`log_alert`], unless this limiter already let [`Self::BURST`] through in
    /// the current window. Returns whether it was reported.
    pub fn alert(&self, msg: impl FnOnce() -> String) -> bool {
        let held = {
            let mut g = lock(&self.0);
            let now = std::time::Instant::now();
            let (start, sent, held) = &mut *g;
            if start.is_none_or(|t| now.duration_since(t) >= Self::WINDOW) {
                *start = Some(now);
                *sent = 0;
            }
            if *sent >= Self::BURST {
                *held += 1;
                return false;
            }
            *sent += 1;
            std::mem::take(held)
        };
        let m = msg();
        if held > 0 {
            log_alert(&format!("{m} ({held} similar reports held back)"));
        } else {
            log_alert(&m);
        }
        true
    }
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether the process runs with privileges its user did not have (`AT_SECURE`: setuid, setgid,
/// file capabilities, an LSM transition): the loader then ignores `LD_*`, and the provider
/// ignores its own variables ([`env_os`]).
pub fn privileged() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The provider's environment: the one place where a `URMA_LOOPBACK*` variable is read. `None`
/// in a privileged process ([`privileged`]), as `secure_getenv` does, so that a user cannot steer
/// a setuid or setcap URMA program (its trace file, its faults, its registry directory) through
/// the loopback. docs/loopback.md, "Security model".
pub fn env_os(name: &str) -> Option<std::ffi::OsString> {
    debug_assert!(
        name.starts_with("URMA_LOOPBACK"),
        "{name}: not the provider's"
    );
    if privileged() {
        return None;
    }
    std::env::var_os(name)
}

/// [`env_os`] as text (`None` for a value that is not UTF-8 too).
pub fn env(name: &str) -> Option<String> {
    env_os(name)?.into_string().ok()
}

/// The thread stripes of the striped globals (the engine's lane locks, the statistics, the fault
/// plane's sequence counters) and the cache-line wrapper, from the control plane.
pub use urma_datapath::stripe::{stripe, Line, STRIPES};

#[cfg(test)]
mod rate_tests {
    use super::RateLimit;

    #[test]
    fn a_rate_limit_lets_a_burst_through_then_holds_back_until_the_window_ends() {
        let r = RateLimit::new();
        let through = (0..RateLimit::BURST + 5)
            .filter(|i| r.alert(|| format!("report {i}")))
            .count();
        assert_eq!(through, RateLimit::BURST as usize);
        // A new window lets the next report through (it tells the 5 held back).
        *super::lock(&r.0) = (
            Some(std::time::Instant::now() - RateLimit::WINDOW),
            RateLimit::BURST,
            5,
        );
        assert!(r.alert(|| "after the window".into()));
        assert_eq!(super::lock(&r.0).2, 0, "the held-back count was told");
    }
}

#[cfg(test)]
mod env_tests {
    /// Every `URMA_LOOPBACK*` variable goes through [`super::env_os`] (ignored when privileged):
    /// no other file of the crate reads the environment itself.
    #[test]
    fn only_env_os_reads_the_environment() {
        fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).expect("src").flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, found);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("util.rs") {
                    let text = std::fs::read_to_string(&p).expect("source");
                    for (i, l) in text.lines().enumerate() {
                        if l.contains("env::var") || l.contains("getenv") {
                            found.push(format!("{}:{}: {}", p.display(), i + 1, l.trim()));
                        }
                    }
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut found,
        );
        assert!(
            found.is_empty(),
            "read the environment past util::env: {found:#?}"
        );
        assert!(!super::privileged(), "the unit tests run unprivileged");
        assert_eq!(
            super::env("URMA_LOOPBACK_UNIT_TEST_UNSET"),
            None,
            "an unset variable"
        );
    }
}
