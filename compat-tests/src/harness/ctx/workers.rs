//! Waiting until the library worker threads of this process are idle.

use std::time::{Duration, Instant};

/// Waits (at most `max`) until every library worker thread (`ost_wkr_<n>`, both libraries)
/// of this process is sleeping (state `S`/`D`, i.e. waiting for work or blocked) in two
/// samples in a row. Returns false on timeout.
pub fn wait_workers_idle(max: Duration) -> bool {
    let end = Instant::now() + max;
    let mut idle_samples = 0;
    loop {
        if workers_sleeping() {
            idle_samples += 1;
            if idle_samples >= 2 {
                return true;
            }
        } else {
            idle_samples = 0;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// True when no `ost_wkr_*` thread of this process is running or runnable.
fn workers_sleeping() -> bool {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return true;
    };
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "<tid> (<comm>) <state> ...": comm may contain spaces, so split at the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("ost_wkr_") {
            continue;
        }
        let state = stat[close + 1..].trim_start().chars().next().unwrap_or('S');
        if !matches!(state, 'S' | 'D' | 'Z' | 'X' | 'I' | 't' | 'T') {
            return false;
        }
    }
    true
}
