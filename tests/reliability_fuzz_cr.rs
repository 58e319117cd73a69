//! Fuzzed completion records.
//!
//! A seeded generator feeds `OST_FUZZ_CRS` (default 1 000 000) arbitrary `urma_cr_t` values
//! (random status, opcode, flag bits, user_ctx, imm_data, lengths, ids) to
//! `os_transport_wake_up_task` from two threads, interleaved with real send/recv pairs in flight
//! over the loopback. One fuzzed CR in twenty is aimed at the ids of a live request (half of the
//! real pairs are exposed to that).
//!
//! Checked: no crash or panic; every real pair that no fuzzed CR named completes with status 0,
//! exactly one callback per chunk and the right bytes; a pair a fuzzed CR did name finishes with 0
//! or ERR (never a hang: waits are bounded) and, when both sides report 0, with the right bytes;
//! afterwards no sync is live and destroy succeeds. Seed: `OST_FUZZ_SEED`.
mod common;
mod reliability_common;

use common::lb;
use compat_tests::oracle::{dec, enc, UserData};
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::live_syncs;
use reliability_common::{self as rc, Draw, Rng};
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use urma_sys::*;

const APPS: usize = 2;
const BASE_S: u64 = 0x11_0000_0000;
const BASE_C: u64 = 0x22_0000_0000;
const ID_SPAN: u64 = 1 << 24;

/// Ids of real requests in flight (0 = none), two per app thread: sk, ck.
static LIVE: [AtomicU64; 2 * APPS] = [const { AtomicU64::new(0) }; 2 * APPS];
/// Real ids a fuzzed CR named (decoded the way the library decodes it).
static TARGETED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
/// ck -> (chunk mask, callback count).
static CB: Mutex<Option<HashMap<u64, (u8, u32)>>> = Mutex::new(None);

fn is_real(id: u64) -> bool {
    (BASE_S..BASE_S + ID_SPAN).contains(&id) || (BASE_C..BASE_C + ID_SPAN).contains(&id)
}

unsafe extern "C" fn on_chunk(ud: *mut c_void) -> i32 {
    // SAFETY: the library passes its 8-byte user-data copy, valid during the call.
    let u = UserData::decode(unsafe { *(ud as *const u64) });
    let mut g = CB.lock().unwrap();
    let e = g
        .get_or_insert_with(HashMap::new)
        .entry(u.request_id)
        .or_insert((0, 0));
    e.0 |= 1 << u.chunk_id;
    e.1 += 1;
    0
}

/// One arbitrary CR; 5 % of them aimed at a live (exposed) request.
fn fuzz_cr(r: &mut Rng) -> urma_cr_t {
    // SAFETY: urma_cr_t is plain data; all-zero is a valid value.
    let mut cr: urma_cr_t = unsafe { std::mem::zeroed() };
    cr.status = match r.below(10) {
        0..=5 => URMA_CR_SUCCESS,
        6 | 7 => r.below(24) as u32,
        8 => [URMA_CR_WR_FLUSH_ERR_DONE, URMA_CR_WR_SUSPEND_DONE][r.below(2) as usize],
        _ => r.next_u64() as u32,
    };
    cr.opcode = match r.below(4) {
        0 | 1 => URMA_CR_OPC_SEND_WITH_IMM,
        2 => r.below(6) as u32,
        _ => r.next_u64() as u32,
    };
    cr.flag.value = r.next_u64() as u8;
    cr.completion_len = match r.below(3) {
        0 => 0,
        1 => r.below(8 << 20) as u32,
        _ => r.next_u64() as u32,
    };
    cr.local_id = r.next_u64() as u32;
    cr.remote_id.id = r.next_u64() as u32;
    cr.remote_id.uasid = r.next_u64() as u32;
    cr.tpn = r.next_u64() as u32;
    cr.user_data = r.next_u64() as usize;
    cr.user_ctx = r.next_u64();
    let mut imm = if r.chance(10) {
        r.below(64)
    } else {
        r.next_u64()
    };
    if r.chance(5) {
        let id = LIVE[r.below(LIVE.len() as u64) as usize].load(Ordering::Relaxed);
        if id != 0 {
            let (chunk_type, chunk_id) = (r.below(2) as u8, r.below(8) as u8);
            imm = UserData {
                request_id: enc(id),
                chunk_type,
                chunk_id,
            }
            .encode();
            cr.user_ctx = UserData {
                request_id: id,
                chunk_type,
                chunk_id,
            }
            .encode();
        }
    }
    cr.__bindgen_anon_1.imm_data = imm;
    // Record the id the library will look up (receive side: decoded immediate; send side: user_ctx).
    // SAFETY: every bit pattern of the 1-byte flag union is a valid u8.
    let s_r = unsafe { cr.flag.value } & urma_sys::flags::CR_FLAG_S_R != 0;
    let named = if s_r {
        dec(UserData::decode(imm).request_id)
    } else {
        UserData::decode(cr.user_ctx).request_id
    };
    if is_real(named) {
        TARGETED
            .lock()
            .unwrap()
            .get_or_insert_with(HashSet::new)
            .insert(named);
    }
    cr
}

#[derive(Default, Debug)]
struct Tally {
    fuzz_accepted: u64,
    fuzz_refused: u64,
    real_crs: u64,
    pairs: u64,
    pairs_targeted: u64,
    targeted_failed: u64,
    bytes_verified: u64,
}

fn pick_len(r: &mut Rng) -> u32 {
    match r.below(20) {
        0 => DEFAULT_CHUNK_SIZE + 1 + r.below(2 * DEFAULT_CHUNK_SIZE as u64) as u32, // 2-3 chunks
        1 => DEFAULT_CHUNK_SIZE,
        _ => 1 + r.below(16 << 10) as u32,
    }
}

#[test]
fn fuzzed_completions_interleaved_with_real_requests() {
    let total = rc::env_u64("OST_FUZZ_CRS", 1_000_000);
    let seed = rc::env_u64("OST_FUZZ_SEED", 0x5EED_0009);
    *TARGETED.lock().unwrap() = Some(HashSet::new());
    *CB.lock().unwrap() = Some(HashMap::new());
    rc::quiet_logs();
    let ep = lb::ep();
    let h = lb::init(2, 16);
    let hv = h as usize;
    let stop_apps = AtomicBool::new(false);
    let stop_poll = AtomicBool::new(false);
    let fuzzed = AtomicU64::new(0);
    // Pacing: the fuzzers stay within `ratio` CRs per finished real pair, so fuzzed CRs are spread
    // over the whole run instead of racing ahead of the (slower) real traffic.
    let min_pairs = rc::env_u64("OST_FUZZ_PAIRS", 2000);
    let ratio = total.div_ceil(min_pairs).max(1);
    let pairs_done = AtomicU64::new(0);
    let budget_ok =
        || fuzzed.load(Ordering::Relaxed) < (pairs_done.load(Ordering::Relaxed) + 2) * ratio;
    let tally = Mutex::new(Tally::default());
    let max = 3 * DEFAULT_CHUNK_SIZE as usize;
    let bufs: Vec<rc::Shared<(lb::Buf, lb::Buf)>> = (0..APPS)
        .map(|_| rc::Shared((lb::buf(&ep, max), lb::buf(&ep, max))))
        .collect();
    let ep = rc::Shared(ep);
    let jfc = ep.0.jfc as usize;
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        // Poller: real CRs, each poll followed by a burst of fuzzed CRs.
        let poller = sc.spawn(|| {
            let h = hv as *mut c_void;
            let mut r = rc::rng(seed);
            let (mut acc, mut refd, mut real) = (0u64, 0u64, 0u64);
            // SAFETY: zeroed CR array is a valid out-buffer.
            let mut crs: [urma_cr_t; 32] = unsafe { std::mem::zeroed() };
            while !stop_poll.load(Ordering::Acquire) {
                // SAFETY: live JFC, buffer of 32 CRs.
                let n = unsafe { urma_poll_jfc(jfc as *mut urma_jfc_t, 32, crs.as_mut_ptr()) };
                for cr in crs.iter_mut().take(n.max(0) as usize) {
                    rc::wake(h, cr);
                    real += 1;
                }
                if fuzzed.load(Ordering::Relaxed) < total && budget_ok() {
                    for _ in 0..16 {
                        let mut cr = fuzz_cr(&mut r);
                        if rc::wake(h, &mut cr) == 0 {
                            acc += 1
                        } else {
                            refd += 1
                        }
                    }
                    fuzzed.fetch_add(16, Ordering::Relaxed);
                } else if n <= 0 {
                    if fuzzed.load(Ordering::Relaxed) >= total
                        && pairs_done.load(Ordering::Relaxed) >= min_pairs
                    {
                        stop_apps.store(true, Ordering::Release);
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            let mut t = tally.lock().unwrap();
            t.fuzz_accepted += acc;
            t.fuzz_refused += refd;
            t.real_crs += real;
        });
        // A second fuzzer racing the poller and the workers.
        let fuzzer = sc.spawn(|| {
            let h = hv as *mut c_void;
            let mut r = rc::rng(seed ^ 0xF0F0);
            let (mut acc, mut refd) = (0u64, 0u64);
            while fuzzed.load(Ordering::Relaxed) < total {
                if !budget_ok() {
                    std::thread::sleep(Duration::from_micros(50));
                    continue;
                }
                for _ in 0..64 {
                    let mut cr = fuzz_cr(&mut r);
                    if rc::wake(h, &mut cr) == 0 {
                        acc += 1
                    } else {
                        refd += 1
                    }
                }
                fuzzed.fetch_add(64, Ordering::Relaxed);
            }
            let mut t = tally.lock().unwrap();
            t.fuzz_accepted += acc;
            t.fuzz_refused += refd;
        });
        let mut apps = Vec::new();
        for (a, b) in bufs.iter().enumerate() {
            let (stop_apps, tally, ep, pairs_done) = (&stop_apps, &tally, &ep, &pairs_done);
            apps.push(sc.spawn(move || {
                let h = hv as *mut c_void;
                let mut r = rc::rng(seed.wrapping_add(a as u64 + 1));
                let (sb, db) = &b.0;
                let mut io = rc::io(&ep.0, sb, db);
                let src = sb.mem.as_ptr() as *mut u8;
                let mut k = a as u64;
                while !stop_apps.load(Ordering::Acquire) {
                    let (sk, ck) = (BASE_S + k, BASE_C + k);
                    k += APPS as u64;
                    let len = pick_len(&mut r);
                    // SAFETY: the source buffer belongs to this thread; no request is using it.
                    let s = unsafe { std::slice::from_raw_parts_mut(src, max) };
                    rc::fill(s, sk, len as usize);
                    // Half of the pairs are published to the fuzzers as targets.
                    if r.chance(50) {
                        LIVE[2 * a].store(sk, Ordering::Relaxed);
                        LIVE[2 * a + 1].store(ck, Ordering::Relaxed);
                    }
                    let (rr, rs) = rc::recv(h, &mut io, len, ck, Some(on_chunk));
                    assert_eq!(rr, 0, "recv {ck:#x}");
                    let (sr, ss, st) = rc::send(h, &mut io, len, sk, ck);
                    assert_eq!((sr, st), (0, URMA_SUCCESS), "send {sk:#x}");
                    let ws = rc::wait(h, ss, 10_000);
                    let wr = if ws.0 == 0 {
                        rc::wait(h, rs, 10_000)
                    } else {
                        // The sender failed: the receiver gives up (as an application would).
                        assert_eq!(rc::cancel(h, rs, ck), (0, std::ptr::null_mut()));
                        (ERR, URMA_SUCCESS)
                    };
                    LIVE[2 * a].store(0, Ordering::Relaxed);
                    LIVE[2 * a + 1].store(0, Ordering::Relaxed);
                    let targeted = {
                        let g = TARGETED.lock().unwrap();
                        let set = g.as_ref().unwrap();
                        set.contains(&sk) || set.contains(&ck)
                    };
                    let n = len.div_ceil(DEFAULT_CHUNK_SIZE);
                    let cbs = CB
                        .lock()
                        .unwrap()
                        .as_mut()
                        .unwrap()
                        .remove(&ck)
                        .unwrap_or((0, 0));
                    pairs_done.fetch_add(1, Ordering::Relaxed);
                    let mut t = tally.lock().unwrap();
                    t.pairs += 1;
                    assert!(ws.0 == 0 || ws.0 == ERR, "send wait {ws:?} for {sk:#x}");
                    assert!(
                        wr.0 == 0 || wr.0 == ERR,
                        "recv wait {wr:?} for {ck:#x} (hang?)"
                    );
                    if !targeted {
                        assert_eq!(
                            (ws, wr),
                            ((0, 0), (0, 0)),
                            "untouched pair {sk:#x}/{ck:#x} len {len}"
                        );
                        assert_eq!(cbs, (((1u16 << n) - 1) as u8, n), "callbacks of {ck:#x}");
                    } else {
                        t.pairs_targeted += 1;
                        if ws.0 != 0 || wr.0 != 0 {
                            t.targeted_failed += 1;
                        }
                    }
                    if ws.0 == 0 && wr.0 == 0 {
                        assert!(
                            rc::check(&db.mem, sk, len as usize),
                            "data of {sk:#x} len {len}"
                        );
                        t.bytes_verified += u64::from(len);
                    }
                }
            }));
        }
        for a in apps {
            a.join().expect("app thread");
        }
        fuzzer.join().expect("fuzzer thread");
        // Let in-flight real CRs drain, then stop the poller.
        std::thread::sleep(Duration::from_millis(50));
        stop_poll.store(true, Ordering::Release);
        poller.join().expect("poller thread");
    });
    let elapsed = t0.elapsed();
    assert_eq!(live_syncs(), 0, "every sync freed");
    // After the flood, an early completion (D4: the sender runs before the receiver registers)
    // must still be kept: garbage must not have filled the early-completion stash for good.
    {
        let (poll_stop, pj) = lb::poller(hv, ep.0.jfc as usize);
        let (sb, db) = &bufs[0].0;
        let mut io = rc::io(&ep.0, sb, db);
        let (sk, ck) = (BASE_S + ID_SPAN - 1, BASE_C + ID_SPAN - 1);
        // SAFETY: no request uses the buffer now.
        let s = unsafe { std::slice::from_raw_parts_mut(sb.mem.as_ptr() as *mut u8, max) };
        rc::fill(s, sk, 4096);
        let (sr, ss, _) = rc::send(h, &mut io, 4096, sk, ck);
        assert_eq!(sr, 0);
        assert_eq!(rc::wait(h, ss, 5000), (0, URMA_SUCCESS));
        std::thread::sleep(Duration::from_millis(20));
        let (rr, rs) = rc::recv(h, &mut io, 4096, ck, Some(on_chunk));
        assert_eq!(rr, 0);
        assert_eq!(
            rc::wait(h, rs, 5000),
            (0, URMA_SUCCESS),
            "D4 early completion after the flood"
        );
        assert!(rc::check(&db.mem, sk, 4096));
        poll_stop.store(true, Ordering::Release);
        pj.join().unwrap();
    }
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0);
    let t = tally.into_inner().unwrap();
    let n = t.fuzz_accepted + t.fuzz_refused;
    eprintln!(
        "RELIABILITY fuzz_cr seed={seed:#x} fuzzed_crs={n} accepted={} refused={} real_crs={} pairs={} \
         targeted_pairs={} targeted_failed={} untargeted_ok={} bytes_verified={} log_errors={} log_warns={} \
         live_syncs_after=0 elapsed_ms={}",
        t.fuzz_accepted,
        t.fuzz_refused,
        t.real_crs,
        t.pairs,
        t.pairs_targeted,
        t.targeted_failed,
        t.pairs - t.pairs_targeted,
        t.bytes_verified,
        rc::LOG_ERRORS.load(Ordering::Relaxed),
        rc::LOG_WARNS.load(Ordering::Relaxed),
        elapsed.as_millis()
    );
    assert!(n >= total, "fed {n} fuzzed CRs");
    assert!(
        t.pairs >= min_pairs,
        "real traffic ran alongside ({} pairs)",
        t.pairs
    );
}
