//! The run's metadata shown by every rendering: what ran against what (the two libraries, the
//! URMA library and provider this process actually mapped, the backend), with which seed, on
//! which host, when, and with which command.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The metadata of a run. `mode` says how the libraries ran (one process, two processes, two
/// nodes), `backend` where the URMA trace and faults came from; `extra` is appended.
#[allow(clippy::too_many_arguments)]
pub fn collect(
    mode: &str,
    backend: &str,
    legacy: &Path,
    rust: &Path,
    seed: u64,
    random: usize,
    ledger: &Path,
    extra: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut m = vec![
        ("mode".to_string(), mode.to_string()),
        ("URMA trace and faults".to_string(), backend_text(backend)),
        ("reference C library".to_string(), file_text(legacy)),
        ("Rust library".to_string(), file_text(rust)),
        (
            "URMA libraries loaded".to_string(),
            urma_libraries().join(", "),
        ),
    ];
    if let Some(real) = std::env::var_os("URMA_INTERPOSE_REAL") {
        m.push((
            "URMA_INTERPOSE_REAL".to_string(),
            Path::new(&real).display().to_string(),
        ));
    }
    m.push((
        "random scenarios".to_string(),
        format!("{random} (run seed {seed})"),
    ));
    m.push(("ledger".to_string(), ledger.display().to_string()));
    m.push((
        "compat".to_string(),
        format!("{} {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
    ));
    m.push(("host".to_string(), host()));
    m.push(("started (UTC)".to_string(), utc_now()));
    m.push((
        "command".to_string(),
        std::env::args().collect::<Vec<_>>().join(" "),
    ));
    m.extend(extra);
    m
}

fn backend_text(b: &str) -> String {
    match b {
        "loopback" => "loopback (the software URMA provider's own trace and knobs)".into(),
        "interpose" => "interposition layer in front of the loopback".into(),
        "hardware" => {
            "hardware mode: interposition layer in front of the system's URMA library".into()
        }
        other => other.into(),
    }
}

/// `path (N bytes, built YYYY-MM-DD HH:MM:SS UTC)`, or `path (missing)`: which build ran.
fn file_text(p: &Path) -> String {
    match std::fs::metadata(p) {
        Ok(m) => {
            let built = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| format!(", built {} UTC", utc(d.as_secs())))
                .unwrap_or_default();
            format!("{} ({} bytes{built})", p.display(), m.len())
        }
        Err(_) => format!("{} (missing)", p.display()),
    }
}

/// The files this process mapped whose name says URMA or UDMA (`liburma.so.0`, the layer, a
/// provider plug-in), in the order `/proc/self/maps` lists them: which stack the run used.
pub fn urma_libraries() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<String> = Vec::new();
    for l in maps.lines() {
        let Some(path) = l.split_whitespace().nth(5) else {
            continue;
        };
        let base = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
        if (base.contains("urma") || base.contains("udma"))
            && base.contains(".so")
            && !v.iter().any(|x| x == path)
        {
            v.push(path.to_string());
        }
    }
    if v.is_empty() {
        v.push("(none mapped)".into());
    }
    v
}

/// `hostname, kernel <release>, <arch>`.
fn host() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "?".into())
    };
    format!(
        "{}, kernel {}, {}",
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/osrelease"),
        std::env::consts::ARCH
    )
}

/// The current time as `YYYY-MM-DD HH:MM:SS`, UTC.
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    utc(secs)
}

/// `secs` since the epoch as `YYYY-MM-DD HH:MM:SS` (proleptic Gregorian calendar).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (era-based conversion).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_744_502_400 + 3661), "2025-04-13 01:01:01");
    }

    #[test]
    fn the_harness_maps_a_urma_library() {
        // Test binaries link liburma.so.0 (urma-sys).
        let v = urma_libraries();
        assert!(v.iter().any(|p| p.contains("liburma")), "{v:?}");
    }
}
