//! The memcpy baselines of the copy-mode cells: the same buffer shapes copied in this process
//! ([`memcpy_mib_s`]), the limit of a cell measured just before and after its repetitions
//! ([`adjacent_limit`]), and the run's best from the `memcpy` cell's rows ([`memcpy_limit`]).

use std::time::Instant;

use crate::orch::run::{BenchRun, Cfg, LEN7, MIB};

/// (destinations, threads) of the memcpy baselines.
pub const MEMCPY_SHAPES: [(usize, usize); 3] = [(1, 1), (8, 1), (8, 2)];

/// The 14 MiB source buffer of the memcpy baselines.
pub fn memcpy_source() -> Vec<u8> {
    vec![0xA5u8; LEN7 as usize]
}

/// MiB/s of `threads` threads each copying `src` (14 MiB) in 2 MiB pieces into its share of a ring
/// of `ndst` pre-faulted destinations for `secs` (after one warm-up pass over its destinations).
pub fn memcpy_mib_s(src: &[u8], ndst: usize, threads: usize, secs: f64) -> f64 {
    let len = src.len();
    let piece = 2 * MIB as usize;
    let per_thread = (ndst / threads).max(1);
    let bytes: f64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut dsts: Vec<Vec<u8>> = (0..per_thread).map(|_| vec![1u8; len]).collect();
                    let copy = |d: &mut Vec<u8>| {
                        for off in (0..len).step_by(piece) {
                            let end = (off + piece).min(len);
                            d[off..end].copy_from_slice(&src[off..end]);
                        }
                        std::hint::black_box(&d[len - 1]);
                    };
                    for d in dsts.iter_mut() {
                        copy(d); // warm-up pass
                    }
                    let t = Instant::now();
                    let mut n = 0u64;
                    let mut i = 0;
                    while t.elapsed().as_secs_f64() < secs {
                        let k = i % per_thread;
                        copy(&mut dsts[k]);
                        n += len as u64;
                        i += 1;
                    }
                    n as f64 / t.elapsed().as_secs_f64()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    bytes / MIB as f64
}

/// The memcpy shapes whose best rate limits a copy-mode 14 MiB cell at `depth`: its destinations
/// (1 at depth 1, a ring of 8 otherwise) with the thread counts the transfer could use (1 at
/// depth 1, where a request's chunks are copied one after the other; 1 or 2 otherwise).
fn limit_shapes(depth: usize) -> &'static [(usize, usize)] {
    if depth == 1 {
        &MEMCPY_SHAPES[..1]
    } else {
        &MEMCPY_SHAPES[1..]
    }
}

/// Seconds of each memcpy measured around a copy-mode cell ([`adjacent_limit`]).
const ADJACENT_MEMCPY_SECS: f64 = 0.15;

/// The memcpy limit of a copy-mode 14 MiB cell measured right now, in this process: the best of
/// its [`limit_shapes`], each copied for [`ADJACENT_MEMCPY_SECS`].
pub fn adjacent_limit(src: &[u8], depth: usize) -> f64 {
    limit_shapes(depth)
        .iter()
        .map(|&(ndst, threads)| memcpy_mib_s(src, ndst, threads, ADJACENT_MEMCPY_SECS))
        .fold(f64::NAN, f64::max)
}

/// The memcpy limit for a copy-mode 14 MiB cell at `depth`: same destinations, best thread count
/// that the transfer could use (1 at depth 1, where a request's chunks are copied one after the
/// other; 2 otherwise).
pub fn memcpy_limit(ctx: &BenchRun, depth: usize) -> f64 {
    // The physical limit is the best memcpy rate observed (max over the repetitions).
    limit_shapes(depth)
        .iter()
        .flat_map(|&(ndst, threads)| {
            ctx.values("memcpy", "memcpy", mc(ndst, threads as u32), "mib_s")
        })
        .fold(f64::NAN, f64::max)
}

/// The configuration columns of the `memcpy` rows of `ndst` destinations and `threads` threads.
pub fn mc(ndst: usize, threads: u32) -> Cfg {
    Cfg {
        len: LEN7,
        depth: ndst,
        workers: threads,
        copy: true,
        event: false,
        rate: 0,
    }
}
