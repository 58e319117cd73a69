//! The host's monotonic clock (`CLOCK_MONOTONIC`, the clock `std::time::Instant` reads and the
//! futex deadlines are set on): one reading for every crate that needs it as a number, for
//! timestamps shared between processes of the host (the inject registry's ring, the two-process
//! harness) and for the library's spin loops. Only differences of two readings mean anything.

/// The clock now.
#[inline]
pub fn now() -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local of that type; every Linux
    // kernel has CLOCK_MONOTONIC, so the call cannot fail and only writes `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts
}

/// The clock now, in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    let ts = now();
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_clock_instant_reads() {
        let a = now_ns();
        let t = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let inner = t.elapsed().as_nanos() as u64;
        let b = now_ns();
        // The same clock: the interval read around `Instant`'s covers its, whatever the load;
        // another clock (CLOCK_REALTIME stepped, a coarse clock) could give less.
        assert!(inner >= 20_000_000, "{inner}");
        assert!(b - a >= inner, "{a} {b} {inner}");
    }
}
