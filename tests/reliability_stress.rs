//! Stress with faults.
//!
//! `OST_STRESS_THREADS` (8) application threads each run `OST_STRESS_REQS` send+recv pairs
//! (default 400 here, 10 000 for `make stress`) with lengths log-uniform over 1 B .. 14 MiB, while
//! faults are injected:
//! * loopback (global knobs, scheduled at random points ahead of its counters): send-WR and
//!   recv-WR post failures, send WRs completing with an error status;
//! * the two pollers (the application's side of the completion path): dropped send-side CRs,
//!   duplicated CRs, CRs turned into error CRs, CRs delayed by 0-5 ms (so reordered);
//! * the application: failing notify callbacks, cancels (by sync and by id), very short timeouts,
//!   sends issued before their receive is registered (D4).
//!
//! Checked: every wait returns within its timeout (plus scheduling slack); every sync is freed
//! exactly once (the live-sync counter returns to 0 and never underflows); the bytes of every pair
//! whose both sides succeeded are verified; a pair no fault touched must succeed (no lost request).
mod common;
mod reliability_common;

use common::lb;
use compat_tests::loopback_ctl::{self, Queue};
use compat_tests::oracle::{dec, UserData};
use os_transport::abi::*;
use os_transport::ffi::*;
use os_transport::testing::live_syncs;
use reliability_common::{self as rc, Draw, Rng};
use std::collections::{HashSet, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use urma_sys::*;

/// Ids a fault touched (recorded by the pollers).
static FAULTED: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
/// client_key bit 39 set: the notify callback fails.
const CB_FAIL_BIT: u64 = 1 << 39;
const SLACK: Duration = Duration::from_millis(1500);

fn mark(id: u64) {
    FAULTED
        .lock()
        .unwrap()
        .get_or_insert_with(HashSet::new)
        .insert(id);
}

fn faulted(id: u64) -> bool {
    FAULTED
        .lock()
        .unwrap()
        .as_ref()
        .is_some_and(|s| s.contains(&id))
}

unsafe extern "C" fn cb(ud: *mut c_void) -> i32 {
    // SAFETY: the library passes its 8-byte user-data copy, valid during the call.
    let u = UserData::decode(unsafe { *(ud as *const u64) });
    i32::from(u.request_id & CB_FAIL_BIT != 0)
}

unsafe extern "C" fn ok_cb(_ud: *mut c_void) -> i32 {
    0
}

fn cr_id(cr: &urma_cr_t) -> u64 {
    // SAFETY: every bit pattern of the flag byte is a valid u8.
    let f = unsafe { cr.flag.value };
    if f & urma_sys::flags::CR_FLAG_S_R != 0 {
        // SAFETY: imm_data is plain u64 data.
        dec(UserData::decode(unsafe { cr.__bindgen_anon_1.imm_data }).request_id)
    } else {
        UserData::decode(cr.user_ctx).request_id
    }
}

fn is_recv_side(cr: &urma_cr_t) -> bool {
    // SAFETY: as above.
    let f = unsafe { cr.flag.value };
    f & urma_sys::flags::CR_FLAG_S_R != 0
}

#[derive(Default, Debug)]
struct Tally {
    pairs: u64,
    ok: u64,
    failed_clean: u64,
    timeouts: u64,
    bytes_verified: u64,
    waits: u64,
    max_overshoot_ms: u64,
    app_faults: u64,
}

fn pick_len(r: &mut Rng, max: u32) -> u32 {
    // log-uniform over 1 .. max, plus the chunk boundaries
    match r.below(16) {
        0 => DEFAULT_CHUNK_SIZE.min(max),
        1 => max,
        _ => {
            let bits = 32 - max.leading_zeros();
            let b = 1 + r.below(u64::from(bits)) as u32;
            let v = (1u64 << (b - 1)) + r.below(1u64 << (b - 1));
            (v as u32).clamp(1, max)
        }
    }
}

/// Waits until the request that used `id` has ended in the library (D7: an id is refused while
/// in flight), so the buffers of a failed pair can be reused without a late WRITE landing in the
/// next pair's destination.
fn settle_id(h: *mut c_void, io: &mut lb::Io, id: u64) {
    let t = Instant::now();
    loop {
        let (r, s) = rc::recv(h, io, 1, id, Some(ok_cb));
        if r == 0 {
            assert_eq!(rc::cancel(h, s, id).0, 0);
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10) * compat_tests::target::slowdown(),
            "request {id:#x} never ended"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn stress_with_faults() {
    let threads = rc::env_u64("OST_STRESS_THREADS", 8) as usize;
    let reqs = rc::env_u64("OST_STRESS_REQS", 400);
    let seed = rc::env_u64("OST_STRESS_SEED", 0x57E5_5009);
    let max = rc::env_u64("OST_STRESS_MAXLEN", 7 * u64::from(DEFAULT_CHUNK_SIZE)) as u32;
    *FAULTED.lock().unwrap() = Some(HashSet::new());
    rc::quiet_logs();
    loopback_ctl::reset();
    let ep = lb::ep();
    let h = lb::init(4, 200);
    let hv = h as usize;
    let jfc = ep.jfc as usize;
    let bufs: Vec<rc::Shared<(lb::Buf, lb::Buf)>> = (0..threads)
        .map(|_| rc::Shared((lb::buf(&ep, max as usize), lb::buf(&ep, max as usize))))
        .collect();
    let ep = rc::Shared(ep);
    let stop = AtomicBool::new(false);
    let apps_left = AtomicUsize::new(threads);
    let tally = Mutex::new(Tally::default());
    let poller_stats = [const { AtomicU64::new(0) }; 6]; // fed, dropped, dup, errored, delayed, knobs
    let max_live = AtomicUsize::new(0);
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for p in 0..2u64 {
            let (stop, poller_stats) = (&stop, &poller_stats);
            sc.spawn(move || {
                let h = hv as *mut c_void;
                let mut r = rc::rng(seed ^ (0xAB00 + p));
                let mut delayed: VecDeque<(Instant, urma_cr_t)> = VecDeque::new();
                // SAFETY: zeroed CRs are a valid out-buffer.
                let mut crs: [urma_cr_t; 32] = unsafe { std::mem::zeroed() };
                let feed = |cr: &mut urma_cr_t| {
                    rc::wake(h, cr);
                    poller_stats[0].fetch_add(1, Ordering::Relaxed);
                };
                while !stop.load(Ordering::Acquire) || !delayed.is_empty() {
                    // SAFETY: live JFC, room for 32 CRs.
                    let n = unsafe { urma_poll_jfc(jfc as *mut urma_jfc_t, 32, crs.as_mut_ptr()) };
                    for cr in crs.iter_mut().take(n.max(0) as usize) {
                        if cr.status != URMA_CR_SUCCESS {
                            mark(cr_id(cr)); // loopback-injected error completion or RNR
                        }
                        let roll = r.below(1000);
                        if roll < 1 && !is_recv_side(cr) {
                            mark(cr_id(cr));
                            poller_stats[1].fetch_add(1, Ordering::Relaxed);
                        } else if roll < 6 {
                            let mut d = *cr;
                            feed(cr);
                            feed(&mut d);
                            poller_stats[2].fetch_add(1, Ordering::Relaxed);
                        } else if roll < 9 {
                            mark(cr_id(cr));
                            cr.status = 1 + r.below(22) as u32;
                            feed(cr);
                            poller_stats[3].fetch_add(1, Ordering::Relaxed);
                        } else if roll < 40 {
                            let at = Instant::now() + Duration::from_micros(r.below(5000));
                            delayed.push_back((at, *cr));
                            poller_stats[4].fetch_add(1, Ordering::Relaxed);
                        } else {
                            feed(cr);
                        }
                    }
                    let now = Instant::now();
                    let mut i = 0;
                    while i < delayed.len() {
                        if delayed[i].0 <= now {
                            let (_, mut cr) = delayed.remove(i).expect("index checked");
                            feed(&mut cr);
                        } else {
                            i += 1;
                        }
                    }
                    if n <= 0 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            });
        }
        // Loopback fault scheduler.
        {
            let (stop, poller_stats) = (&stop, &poller_stats);
            sc.spawn(move || {
                let mut r = rc::rng(seed ^ 0xFA17);
                let mut recv_faults = 0;
                while !stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(5));
                    let c = loopback_ctl::counters();
                    match r.below(30) {
                        0 => {
                            let st = [URMA_FAIL, URMA_EAGAIN, URMA_ENOMEM][r.below(3) as usize];
                            let nth = c.send_wrs + 1 + r.below(200);
                            loopback_ctl::fail_post(Queue::Send, nth, st);
                        }
                        1 => {
                            let nth = c.send_wrs + 1 + r.below(200);
                            loopback_ctl::fail_completion(nth, 1 + r.below(22) as u32);
                        }
                        2 if recv_faults < 40 => {
                            recv_faults += 1;
                            let nth = c.recv_wrs + 1 + r.below(100);
                            loopback_ctl::fail_post(Queue::Recv, nth, URMA_FAIL);
                        }
                        _ => continue,
                    }
                    poller_stats[5].fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut apps = Vec::new();
        for (t, b) in bufs.iter().enumerate() {
            let (tally, ep, stop, apps_left, max_live) =
                (&tally, &ep, &stop, &apps_left, &max_live);
            apps.push(sc.spawn(move || {
                let h = hv as *mut c_void;
                let mut r = rc::rng(seed.wrapping_add(t as u64 * 7919));
                let (sb, db) = &b.0;
                let mut io = rc::io(&ep.0, sb, db);
                let src = sb.mem.as_ptr() as *mut u8;
                let mut tl = Tally::default();
                for i in 0..reqs {
                    let len = pick_len(&mut r, max);
                    let mib = u64::from(len >> 20);
                    let tmo = (400 + 80 * mib as i64) * i64::from(compat_tests::target::slowdown());
                    let sk = ((t as u64 + 1) << 32) | (2 * i);
                    let app_fault = r.below(100);
                    let cb_fail = app_fault < 2;
                    let ck = ((t as u64 + 1) << 32)
                        | (2 * i + 1)
                        | if cb_fail { CB_FAIL_BIT } else { 0 };
                    // SAFETY: this thread's source buffer; no request of ours uses it now.
                    let s = unsafe { std::slice::from_raw_parts_mut(src, max as usize) };
                    rc::fill(s, sk, len as usize);
                    let send_first = r.chance(10);
                    let mut touched = cb_fail;
                    let mut rs = std::ptr::null_mut();
                    let mut rr = ERR;
                    if !send_first {
                        (rr, rs) = rc::recv(h, &mut io, len, ck, Some(cb));
                    }
                    let (sr, mut ss, sst) = rc::send(h, &mut io, len, sk, ck);
                    if send_first {
                        (rr, rs) = rc::recv(h, &mut io, len, ck, Some(cb));
                    }
                    if rr != 0 {
                        assert!(rs.is_null());
                        touched = true; // recv-WR prefill failure (loopback)
                    }
                    if sr != 0 {
                        assert_ne!(sst, URMA_SUCCESS, "send ERR without a URMA status");
                        touched = true; // first WRITE post failure (loopback)
                    }
                    // Application faults.
                    let mut ws = (ERR, URMA_SUCCESS);
                    let mut wr = (ERR, URMA_SUCCESS);
                    let timed = |tl: &mut Tally, s: *mut task_sync_t, ms: i64| {
                        let t = Instant::now();
                        let res = rc::wait(h, s, ms);
                        let el = t.elapsed();
                        let lim = Duration::from_millis(ms as u64);
                        assert!(el <= lim + SLACK, "wait took {el:?} with timeout {ms} ms");
                        tl.waits += 1;
                        tl.max_overshoot_ms = tl
                            .max_overshoot_ms
                            .max(el.saturating_sub(lim).as_millis() as u64);
                        res
                    };
                    match app_fault {
                        2 | 3 if !rs.is_null() => {
                            let (c, left) = rc::cancel(h, rs, ck);
                            assert_eq!((c, left), (0, std::ptr::null_mut()));
                            rs = std::ptr::null_mut();
                            touched = true;
                        }
                        4 | 5 if !ss.is_null() => {
                            assert_eq!(rc::cancel(h, std::ptr::null_mut(), sk).0, 0);
                            touched = true;
                        }
                        6..=9 => {
                            if !ss.is_null() {
                                ws = timed(&mut tl, ss, r.below(3) as i64);
                                ss = std::ptr::null_mut();
                            }
                            touched = true;
                        }
                        _ => {}
                    }
                    if touched {
                        tl.app_faults += u64::from(app_fault < 10);
                    }
                    if !ss.is_null() {
                        ws = timed(&mut tl, ss, tmo);
                    }
                    if !rs.is_null() {
                        let rt = if ws.0 == 0 { tmo } else { 20 };
                        wr = timed(&mut tl, rs, rt);
                    }
                    if ws.1 != URMA_SUCCESS || wr.1 != URMA_SUCCESS {
                        touched = true; // a post failed inside a task (status reported by wait)
                    }
                    let both_ok = ws == (0, URMA_SUCCESS) && wr == (0, URMA_SUCCESS);
                    let faulted = touched || faulted(sk) || faulted(ck);
                    tl.pairs += 1;
                    if both_ok {
                        assert!(
                            rc::check(&db.mem, sk, len as usize),
                            "data of {sk:#x} len {len}"
                        );
                        tl.bytes_verified += u64::from(len);
                        tl.ok += 1;
                    } else {
                        assert!(
                            faulted,
                            "lost request: pair {sk:#x}/{ck:#x} len {len} untouched by faults \
                             but send {ws:?} recv {wr:?}"
                        );
                        if ws.0 == 1 || wr.0 == 1 {
                            tl.timeouts += 1;
                        }
                        tl.failed_clean += 1;
                        settle_id(h, &mut io, sk);
                    }
                    max_live.fetch_max(live_syncs(), Ordering::Relaxed);
                }
                let mut g = tally.lock().unwrap();
                g.pairs += tl.pairs;
                g.ok += tl.ok;
                g.failed_clean += tl.failed_clean;
                g.timeouts += tl.timeouts;
                g.bytes_verified += tl.bytes_verified;
                g.waits += tl.waits;
                g.max_overshoot_ms = g.max_overshoot_ms.max(tl.max_overshoot_ms);
                g.app_faults += tl.app_faults;
                if apps_left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    stop.store(true, Ordering::Release);
                }
            }));
        }
        for a in apps {
            if let Err(e) = a.join() {
                stop.store(true, Ordering::Release);
                std::panic::resume_unwind(e);
            }
        }
    });
    let elapsed = t0.elapsed();
    let t = Instant::now();
    while live_syncs() != 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(live_syncs(), 0, "every sync freed");
    let c = loopback_ctl::counters();
    loopback_ctl::reset();
    assert_eq!(os_transport_destroy(h), 0);
    assert_eq!(live_syncs(), 0);
    let g = tally.into_inner().unwrap();
    let ps: Vec<u64> = poller_stats
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    eprintln!(
        "RELIABILITY stress seed={seed:#x} threads={threads} pairs={} ok={} failed_clean={} (timeouts {}) \
         lost=0 bytes_verified={} waits={} max_wait_overshoot_ms={} app_faults={} crs_fed={} \
         crs_dropped={} crs_duplicated={} crs_errored={} crs_delayed={} loopback_rules={} \
         loopback_post_errors={} loopback_error_crs={} rnr={} max_live_syncs={} live_syncs_after=0 elapsed_ms={}",
        g.pairs,
        g.ok,
        g.failed_clean,
        g.timeouts,
        g.bytes_verified,
        g.waits,
        g.max_overshoot_ms,
        g.app_faults,
        ps[0],
        ps[1],
        ps[2],
        ps[3],
        ps[4],
        ps[5],
        c.post_errors,
        c.crs_error,
        c.rnr_errors,
        max_live.load(Ordering::Relaxed),
        elapsed.as_millis()
    );
    assert_eq!(g.pairs, threads as u64 * reqs);
    assert!(
        g.ok * 10 >= g.pairs * 7,
        "most pairs succeed ({} of {})",
        g.ok,
        g.pairs
    );
}
