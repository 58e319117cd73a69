//! Shared behavioural suite, parameterised over the library under test: every case runs against
//! the Rust library (`case_rust`) and, when it is built, the legacy C library (`case_legacy`).
//! Where the two differ by design the legacy expectation comes from the 1.0 contract
//! (`docs/contract.md`) and the branch is tagged with its ledger id
//! (`docs/divergences.md`). Paths on which the legacy library hangs or aborts by design are not
//! run on it; each such place says why.
//!
//! One library instance per process: every case holds `SERIAL`. Every case starts with
//! `urma_loopback_reset()` (knobs, counters, trace and symbolic names), so the loopback trace
//! names are deterministic: `jfc1`/`jfc2` (receiver/sender JFC), receiver `jetty1` (or `jfr1`),
//! sender `jfs1` and `jetty2`, `tjetty1`, and the test's buffers `seg1`, `seg2`, ... in creation
//! order. Every wait is bounded; conditions are awaited, never slept for.
//!
//! Adding a case: docs/compat.md, "Adding a scenario" ("To the behavioural suite").
use compat_tests::oracle::{enc, ud, UserData};
use compat_tests::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use urma_sys as u;

static SERIAL: Mutex<()> = Mutex::new(());
static LOG: Mutex<Vec<(i32, String)>> = Mutex::new(Vec::new());
/// `os_transport_user_data_t` values seen by [`rec_cb`], in call order.
static NOTES: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// [`rec_cb`] returns -1 for this chunk id (-1: never).
static FAIL_CHUNK: AtomicI64 = AtomicI64::new(-1);

const SK: u64 = 0x12_3456_789A;
const CK: u64 = 0xAB_CDE1_2345;
const CHUNK: u32 = DEFAULT_CHUNK_SIZE;
/// Bound of every wait that is expected to succeed.
const LONG_MS: i64 = 10_000;
const LONG: Duration = Duration::from_secs(10);
/// Timeout of waits that are expected to time out.
const SHORT_MS: i64 = 30;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Which {
    Rust,
    Legacy,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn serial() -> MutexGuard<'static, ()> {
    let g = lock(&SERIAL);
    lock(&NOTES).clear();
    FAIL_CHUNK.store(-1, Ordering::SeqCst);
    g
}

/// Chunk count of a transfer.
fn chunks(len: u32) -> u32 {
    len.div_ceil(CHUNK)
}

/// Awaits `f()` for at most `t`.
fn until(t: Duration, f: impl Fn() -> bool) -> bool {
    let end = Instant::now() + t;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

unsafe extern "C" fn log_cb(level: c_int, msg: *const c_char) {
    // SAFETY: the library passes a NUL-terminated line valid during the call.
    let s = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    lock(&LOG).push((level, s));
}

unsafe extern "C" fn ok_cb(_ud: *mut c_void) -> c_int {
    0
}

/// Records the user data; fails chunk [`FAIL_CHUNK`].
unsafe extern "C" fn rec_cb(p: *mut c_void) -> c_int {
    // SAFETY: the library passes a pointer to an os_transport_user_data_t, valid during the call.
    let v = unsafe { *(p as *const u64) };
    lock(&NOTES).push(v);
    if i64::from(UserData::decode(v).chunk_id) == FAIL_CHUNK.load(Ordering::SeqCst) {
        -1
    } else {
        0
    }
}

fn notes() -> Vec<u64> {
    lock(&NOTES).clone()
}

fn load(which: Which) -> Option<OsTransportLib> {
    match which {
        Which::Rust => {
            Some(OsTransportLib::load(rust_lib_path()).expect("Rust library must be built"))
        }
        Which::Legacy => match OsTransportLib::load(legacy_lib_path()) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("legacy library not available, case skipped: {e}");
                None
            }
        },
    }
}

fn cfg(workers: u32, cap: u32) -> os_transport_cfg_t {
    os_transport_cfg_t {
        worker_thread_num: workers,
        recv_queue_capacity: cap,
        ..Default::default()
    }
}

fn init_with(lib: &OsTransportLib, workers: u32, cap: u32) -> *mut c_void {
    init_cfg(lib, cfg(workers, cap))
}

fn init_cfg(lib: &OsTransportLib, mut c: os_transport_cfg_t) -> *mut c_void {
    let mut h = null_mut();
    // SAFETY: valid pointers.
    let r = unsafe { (lib.os_transport_init)(null_mut(), &mut c, &mut h) };
    assert_eq!(r, 0);
    assert!(!h.is_null());
    h
}

fn init(lib: &OsTransportLib) -> *mut c_void {
    init_with(lib, 2, 16)
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => { $(
        mod $name {
            #[test]
            fn case_rust() { super::$name(super::Which::Rust) }
            #[test]
            fn case_legacy() { super::$name(super::Which::Legacy) }
        }
    )* };
}

cases!(
    transfer_sizes,
    bad_inputs,
    key_limit,
    log_callback_levels,
    duplicate_inflight_id,
    timeout_then_release,
    wr_trace_send_n2_n3_n7,
    wr_trace_jetty_fallback_and_no_queue,
    wr_trace_recv_jfr_only,
    recv_queue_capacity,
    recv_queue_switching,
    event_mode_configuration,
    recv_out_of_order,
    duplicate_cr,
    duplicated_write_completion,
    concurrent_transfers,
    cr_for_unknown_request,
    error_status_cr_send,
    error_status_cr_recv,
    callback_failure,
    first_chunk_post_failure,
    mid_pipeline_post_failure,
    early_send_imm_before_recv,
    wait_timeouts_with_tasks_queued,
    cancel_before_and_after_completion,
    destroy_with_requests_in_flight,
    second_init_and_zero_workers,
    prefill_failure,
    callback_waits_on_own_request,
    requests_in_flight_limit,
    wake_up_task_return_table,
);

// ------------------------------------------------------------------------------------------------
// Session: library + instance + endpoint pair + pollers feeding os_transport_wake_up_task.

/// One `os_transport_wake_up_task` call made by a poller or a test.
#[derive(Clone, Copy, Debug)]
struct Wk {
    recv: bool,
    status: u32,
    ret: i32,
}

type WakeFn = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;

struct Sess {
    lib: OsTransportLib,
    h: Arc<AtomicUsize>,
    pair: EndpointPair,
    sp: Option<Poller>,
    rp: Option<Poller>,
    wakes: Arc<Mutex<Vec<Wk>>>,
}

fn call_wake(wake: WakeFn, h: usize, wakes: &Mutex<Vec<Wk>>, cr: &mut u::urma_cr_t) -> i32 {
    // SAFETY: a CR (polled or built by the test) handed to the library under test.
    let ret = unsafe { wake(h as *mut c_void, (cr as *mut u::urma_cr_t).cast()) };
    lock(wakes).push(Wk {
        recv: cr.is_recv(),
        status: cr.status,
        ret,
    });
    ret
}

impl Sess {
    /// Loads `which`, resets the loopback, creates the endpoints, inits and starts both pollers.
    fn new(which: Which, workers: u32, cap: u32, ep: EndpointCfg) -> Option<Sess> {
        let lib = load(which)?;
        let lb = Loopback::get();
        reset();
        let pair = EndpointPair::new(lb, &ep);
        let mut c = cfg(workers, cap);
        if ep.event_mode {
            // Recorded, never used by either library (§1.3, §10 #16).
            c.urma_event_mode = true;
            c.jfce = pair.receiver.cq.jfce;
            c.jfc = pair.receiver.cq.jfc;
        }
        let h = init_cfg(&lib, c);
        let mut s = Sess {
            lib,
            h: Arc::new(AtomicUsize::new(h as usize)),
            pair,
            sp: None,
            rp: None,
            wakes: Arc::new(Mutex::new(Vec::new())),
        };
        s.start_pollers();
        Some(s)
    }

    fn std(which: Which) -> Option<Sess> {
        Sess::new(which, 2, 2, EndpointCfg::default())
    }

    fn start_pollers(&mut self) {
        let mode = if self.pair.cfg.event_mode {
            PollMode::Event
        } else {
            PollMode::Poll
        };
        let mk = |cq: Cq| {
            let (wake, h, wakes) = (
                self.lib.os_transport_wake_up_task,
                self.h.clone(),
                self.wakes.clone(),
            );
            Poller::start(&cq, mode, move |cr| {
                call_wake(wake, h.load(Ordering::SeqCst), &wakes, cr);
            })
        };
        self.sp = Some(mk(self.pair.sender.jfc_handle()));
        self.rp = Some(mk(self.pair.receiver.jfc_handle()));
    }

    /// Stops both pollers (after a final drain). Always done before destroy: the legacy library
    /// aborts on a wake-up through a destroyed handle (legacy-c README).
    fn stop_pollers(&mut self) {
        for p in [self.sp.take(), self.rp.take()].into_iter().flatten() {
            p.stop();
        }
    }

    fn h(&self) -> *mut c_void {
        self.h.load(Ordering::SeqCst) as *mut c_void
    }

    fn rp(&self) -> &Poller {
        self.rp.as_ref().expect("receiver poller running")
    }

    fn sp(&self) -> &Poller {
        self.sp.as_ref().expect("sender poller running")
    }

    fn destroy(&mut self) -> u32 {
        self.stop_pollers();
        let h = self.h.swap(0, Ordering::SeqCst);
        // SAFETY: the live handle (destroy of a NULL handle is a checked error).
        unsafe { (self.lib.os_transport_destroy)(h as *mut c_void) }
    }

    fn reinit(&mut self, workers: u32, cap: u32) {
        assert_eq!(self.destroy(), 0);
        let h = init_with(&self.lib, workers, cap);
        self.h.store(h as usize, Ordering::SeqCst);
        self.start_pollers();
    }

    fn wake(&self, cr: &mut u::urma_cr_t) -> i32 {
        call_wake(
            self.lib.os_transport_wake_up_task,
            self.h.load(Ordering::SeqCst),
            &self.wakes,
            cr,
        )
    }

    fn wakes(&self) -> Vec<Wk> {
        lock(&self.wakes).clone()
    }

    fn send_ji(
        &self,
        mut ji: urma_jetty_info_t,
        src: &Buffer,
        dst: &ImportedSeg,
        len: u32,
        sk: u64,
        ck: u64,
    ) -> (u32, *mut task_sync_t, i32) {
        let (mut s, mut d) = (src.info(), dst.info());
        let (mut sy, mut st) = (null_mut(), -7);
        // SAFETY: live fixture objects and valid out-pointers.
        let r = unsafe {
            (self.lib.os_transport_send)(
                self.h(),
                &mut ji,
                &mut s,
                &mut d,
                len,
                sk,
                ck,
                &mut sy,
                &mut st,
            )
        };
        (r, sy, st)
    }

    fn send(
        &self,
        src: &Buffer,
        dst: &ImportedSeg,
        len: u32,
        sk: u64,
        ck: u64,
    ) -> (u32, *mut task_sync_t, i32) {
        self.send_ji(self.pair.jetty_info(), src, dst, len, sk, ck)
    }

    fn recv_dev(
        &self,
        host: &Buffer,
        mut dev: ost_device_info_t,
        len: u32,
        ck: u64,
    ) -> (u32, *mut task_sync_t) {
        let mut hi = host.info();
        let mut sy = null_mut();
        // SAFETY: live fixture objects and valid out-pointers.
        let r = unsafe {
            (self.lib.os_transport_recv)(
                self.h(),
                &mut hi,
                &mut dev,
                len,
                ck,
                &mut sy,
                Some(rec_cb),
            )
        };
        (r, sy)
    }

    /// Receive into `host` through the receiver's jetty (and JFR).
    fn recv(&self, host: &Buffer, len: u32, ck: u64) -> (u32, *mut task_sync_t) {
        self.recv_dev(host, self.pair.device_info(host.as_ptr().cast()), len, ck)
    }

    fn wait(&self, s: *mut task_sync_t, ms: i64) -> (u32, i32) {
        let mut st = -7;
        // SAFETY: a sync handed out by this instance (or NULL), valid out-pointer.
        let r = unsafe { (self.lib.wait_and_free_sync_timeout)(self.h(), s, ms, &mut st) };
        (r, st)
    }

    /// Registers a recv of `len` bytes under `CK`, sends it (`SK`) with the receiver's CRs held,
    /// waits for the send (0, 0) and for `n` held receive CRs, and returns the recv's sync and the
    /// held CRs (not yet handed to the library).
    fn send_with_recv_crs_held(
        &self,
        src: &Buffer,
        dst: &Buffer,
        remote: &ImportedSeg,
        len: u32,
        n: u64,
    ) -> (*mut task_sync_t, Vec<u::urma_cr_t>) {
        self.rp().set_hold(true);
        let (r, rs) = self.recv(dst, len, CK);
        assert_eq!(r, 0);
        let (r, ss, _) = self.send(src, remote, len, SK, CK);
        assert_eq!(r, 0);
        assert_eq!(self.wait(ss, LONG_MS), (0, 0));
        assert!(self.rp().wait_seen(n, LONG));
        (rs, self.rp().take_held())
    }

    /// `os_transport_cancel_tasks(h, &s, id)`; returns the result and `s` afterwards.
    fn cancel(&self, s: *mut task_sync_t, id: u64) -> (u32, *mut task_sync_t) {
        let mut s = s;
        // SAFETY: valid pointer to a sync pointer (possibly NULL).
        let r = unsafe { (self.lib.os_transport_cancel_tasks)(self.h(), &mut s, id) };
        (r, s)
    }

    /// A whole transfer `src → dst` (recv registered first), both waits 0, data checked.
    #[allow(clippy::too_many_arguments)]
    fn transfer(
        &self,
        src: &Buffer,
        dst: &Buffer,
        remote: &ImportedSeg,
        len: u32,
        sk: u64,
        ck: u64,
        seed: u64,
    ) {
        let (r, rs) = self.recv(dst, len, ck);
        assert_eq!(r, 0, "recv len {len}");
        let (r, ss, st) = self.send(src, remote, len, sk, ck);
        assert_eq!((r, st), (0, 0), "send len {len}");
        assert_eq!(self.wait(ss, LONG_MS), (0, 0), "send wait len {len}");
        assert_eq!(self.wait(rs, LONG_MS), (0, 0), "recv wait len {len}");
        assert_eq!(
            dst.verify_pattern(seed, 0..len as usize),
            Ok(()),
            "data, len {len}"
        );
    }
}

impl Drop for Sess {
    fn drop(&mut self) {
        self.stop_pollers();
        let h = self.h.swap(0, Ordering::SeqCst);
        if h != 0 {
            // SAFETY: the live handle.
            unsafe { (self.lib.os_transport_destroy)(h as *mut c_void) };
        }
    }
}

/// Source (pattern `seed`), destination and its import: `seg1`, `seg2` after a fresh session.
fn buffers(len: usize, seed: u64) -> (Buffer, Buffer, ImportedSeg) {
    let lb = Loopback::get();
    let mut src = Buffer::new(lb, len);
    src.fill_pattern(seed);
    let dst = Buffer::new(lb, len);
    let remote = dst.import(lb);
    (src, dst, remote)
}

/// A receive-side SEND_WITH_IMM CR carrying `imm`.
fn recv_cr(imm: u64, status: u32) -> u::urma_cr_t {
    let mut cr = u::urma_cr_t {
        status,
        opcode: u::URMA_CR_OPC_SEND_WITH_IMM,
        ..Default::default()
    };
    cr.flag.value = u::flags::CR_FLAG_S_R;
    cr.__bindgen_anon_1.imm_data = imm;
    cr
}

/// A send-side CR carrying `user_ctx`.
fn send_cr(user_ctx: u64) -> u::urma_cr_t {
    u::urma_cr_t {
        user_ctx,
        ..Default::default()
    }
}

// ------------------------------------------------------------------------------------------------
// Loopback trace (docs/loopback.md): one flat JSON object per line, keys in a fixed order.

/// Top-level members of one trace line, values raw with `"` removed.
struct Ev(Vec<(String, String)>);

impl Ev {
    fn parse(line: &str) -> Ev {
        let t = line.trim();
        assert!(
            t.starts_with('{') && t.ends_with('}'),
            "not a trace object: {t}"
        );
        let inner = &t[1..t.len() - 1];
        let mut out = Vec::new();
        let (mut depth, mut in_str, mut start) = (0i32, false, 0usize);
        let mut push = |m: &str| {
            let (k, v) = m.split_once(':').expect("key:value");
            out.push((k.replace('"', ""), v.replace('"', "")));
        };
        for (i, c) in inner.char_indices() {
            match c {
                '"' => in_str = !in_str,
                '[' | '{' if !in_str => depth += 1,
                ']' | '}' if !in_str => depth -= 1,
                ',' if !in_str && depth == 0 => {
                    push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        push(&inner[start..]);
        Ev(out)
    }

    fn get(&self, k: &str) -> &str {
        self.0
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in trace line"))
    }

    /// `post_send` as `"<q> <op> flags=.. uctx=.. target=.. imm=.. src=.. dst=.. ret=.."`.
    fn send_line(&self) -> String {
        format!(
            "{} {} flags={} uctx={} target={} imm={} src={} dst={} ret={}",
            self.get("q"),
            self.get("op"),
            self.get("flags"),
            self.get("user_ctx"),
            self.get("target"),
            self.get("imm"),
            self.get("src"),
            self.get("dst"),
            self.get("ret")
        )
    }

    /// `post_recv` as `"<q> uctx=.. sge=.. ret=.."`.
    fn recv_line(&self) -> String {
        format!(
            "{} uctx={} sge={} ret={}",
            self.get("q"),
            self.get("user_ctx"),
            self.get("sge"),
            self.get("ret")
        )
    }
}

/// Lines of event kind `ev`, in order.
fn events(lines: &[String], ev: &str) -> Vec<Ev> {
    lines
        .iter()
        .map(|l| Ev::parse(l))
        .filter(|e| e.get("ev") == ev)
        .collect()
}

fn send_posts(lines: &[String]) -> Vec<String> {
    events(lines, "post_send")
        .iter()
        .map(Ev::send_line)
        .collect()
}

fn recv_posts(lines: &[String]) -> Vec<String> {
    events(lines, "post_recv")
        .iter()
        .map(Ev::recv_line)
        .collect()
}

fn sge(seg: &str, off: i128, len: u32) -> String {
    format!("[{{seg:{seg},off:{off},len:{len}}}]")
}

/// Expected WRITE of chunk `k` (§3.2) posted on `q`, from `seg1` to `seg2`.
fn exp_write(q: &str, sk: u64, n: u32, len: u32, k: u32, ret: i32) -> String {
    let cl = CHUNK.min(len - k * CHUNK);
    let off = i128::from(k * CHUNK);
    format!(
        "{q} WRITE flags=32 uctx={:#018x} target=tjetty1 imm=null src={} dst={} ret={ret}",
        ud(sk, k + 1 == n, k),
        sge("seg1", off, cl),
        sge("seg2", off, cl)
    )
}

/// Expected SEND_IMM notifying chunk `k` (§3.2): user_ctx `{sk, k ≥ N-2, 7}`, imm `{enc(ck), k == N-1, k}`.
fn exp_send_imm(q: &str, sk: u64, ck: u64, n: u32, k: u32, ret: i32) -> String {
    format!(
        "{q} SEND_IMM flags=32 uctx={:#018x} target=tjetty1 imm={:#018x} src=[] dst=[] ret={ret}",
        ud(sk, k + 2 >= n, 7),
        ud(enc(ck), k + 1 == n, k)
    )
}

/// The whole §3.3 sequence of a successful N-chunk send: WRITE 0, then per task k SEND_IMM k and
/// WRITE k+1.
fn exp_send_seq(q: &str, sk: u64, ck: u64, len: u32) -> Vec<String> {
    let n = chunks(len);
    let mut v = vec![exp_write(q, sk, n, len, 0, 0)];
    for k in 0..n {
        v.push(exp_send_imm(q, sk, ck, n, k, 0));
        if k + 1 < n {
            v.push(exp_write(q, sk, n, len, k + 1, 0));
        }
    }
    v
}

/// Expected prefill recv WR (§4.1): sge `{0, 0, host tseg}`, user_ctx `ck`.
/// The trace name of the receiver jetty's receive queue: the trace names a recv post after the
/// queue it lands in, and every fixture jetty shares a JFR of its own (the receiver's is the
/// first JFR made).
const RX_JETTY_QUEUE: &str = "jfr1";

fn exp_prefill(q: &str, host: &Buffer, host_seg: &str, ck: u64) -> String {
    format!(
        "{q} uctx={ck:#018x} sge={} ret=0",
        sge(host_seg, -i128::from(host.addr()), 0)
    )
}

/// Expected re-post (§4.1): sge `{0, 0, NULL}`, user_ctx 0.
fn exp_repost(q: &str) -> String {
    format!(
        "{q} uctx={:#018x} sge=[{{seg:null,off:null,len:0}}] ret=0",
        0
    )
}

// ------------------------------------------------------------------------------------------------
// Cases from the first suite.

/// send + recv end to end, data checked byte for byte; D1 for sends of ≤ 2 MiB.
fn transfer_sizes(which: Which) {
    let _g = serial();
    let Some(s) = Sess::new(which, 2, 16, EndpointCfg::default()) else {
        return;
    };
    let lb = Loopback::get();
    for (i, &len) in [1u32, 4096, CHUNK, CHUNK + 1, MAX_TRANSFER]
        .iter()
        .enumerate()
    {
        let seed = i as u64 + 1;
        let mut src = Buffer::new(lb, len as usize);
        src.fill_pattern(seed);
        let dst = Buffer::new(lb, len as usize);
        let remote = dst.import(lb);
        let (sk, ck) = (0x1000 + i as u64, CK + i as u64);
        if len <= CHUNK && which == Which::Legacy {
            // D1: legacy refuses one-chunk sends (nothing posted); the recv never completes.
            let (r, rs) = s.recv(&dst, len, ck);
            assert_eq!(r, 0);
            let (r, ss, st) = s.send(&src, &remote, len, sk, ck);
            assert_eq!((r, ss.is_null(), st), (OST_ERR, true, 0));
            assert_eq!(s.cancel(rs, ck), (0, null_mut()));
            continue;
        }
        s.transfer(&src, &dst, &remote, len, sk, ck, seed);
    }
}

/// NULL for each pointer argument, len 0, len > 14 MiB, and calls with a NULL handle: each refused
/// with `*ret_sync_handle` reset to NULL and nothing posted; a wait with a NULL handle frees nothing.
fn bad_inputs(which: Which) {
    let _g = serial();
    let Some(lib) = load(which) else { return };
    let lb = Loopback::get();
    reset();
    let pair = EndpointPair::new(lb, &EndpointCfg::default());
    let h = init(&lib);
    let b = Buffer::new(lb, 4096);
    let r = b.import(lb);
    let (mut ji, mut s, mut d, mut host) = (pair.jetty_info(), b.info(), r.info(), b.info());
    let mut dev = pair.device_info(b.as_ptr().cast());
    let mut sy = std::ptr::NonNull::<task_sync_t>::dangling().as_ptr();
    let mut st = 5;
    // SAFETY: each call gets valid or NULL pointers.
    unsafe {
        let send = lib.os_transport_send;
        let recv = lib.os_transport_recv;
        assert_eq!(
            send(
                null_mut(),
                &mut ji,
                &mut s,
                &mut d,
                4096,
                1,
                2,
                &mut sy,
                &mut st
            ),
            OST_ERR
        );
        assert!(sy.is_null() && st == 0, "out-parameters reset first");
        for (a, b2, c, n) in [
            (true, false, false, 1u32),
            (false, true, false, 1),
            (false, false, true, 1),
            (false, false, false, 0),
        ] {
            let ji_p = if a { null_mut() } else { &mut ji as *mut _ };
            let s_p = if b2 { null_mut() } else { &mut s as *mut _ };
            let d_p = if c { null_mut() } else { &mut d as *mut _ };
            sy = std::ptr::NonNull::dangling().as_ptr();
            assert_eq!(
                send(h, ji_p, s_p, d_p, 4096 * n, 1, 2, &mut sy, &mut st),
                OST_ERR
            );
            assert!(sy.is_null(), "*ret_sync_handle reset");
        }
        assert_eq!(
            send(h, &mut ji, &mut s, &mut d, 4096, 1, 2, null_mut(), &mut st),
            OST_ERR
        );
        sy = std::ptr::NonNull::dangling().as_ptr();
        assert_eq!(
            send(
                h,
                &mut ji,
                &mut s,
                &mut d,
                MAX_TRANSFER + 1,
                1,
                2,
                &mut sy,
                &mut st
            ),
            OST_ERR
        );
        assert!(sy.is_null(), "*ret_sync_handle reset");
        assert_eq!(
            recv(h, &mut host, &mut dev, 4096, 1, null_mut(), Some(ok_cb)),
            OST_ERR
        );
        let mut none = pair.device_info(b.as_ptr().cast());
        none.jetty = null_mut();
        none.jfr = null_mut();
        let (hp, devp): (*mut ost_buffer_info_t, *mut ost_device_info_t) = (&mut host, &mut dev);
        let cb: notify_callback_t = Some(ok_cb);
        let cases: [(
            &str,
            *mut c_void,
            *mut ost_buffer_info_t,
            *mut ost_device_info_t,
            u32,
            _,
        ); 7] = [
            ("NULL handle", null_mut(), hp, devp, 4096, cb),
            ("NULL host_src", h, null_mut(), devp, 4096, cb),
            ("NULL device_dst", h, hp, null_mut(), 4096, cb),
            ("NULL notify_callback", h, hp, devp, 4096, None),
            ("len 0", h, hp, devp, 0, cb),
            ("len > 14 MiB", h, hp, devp, MAX_TRANSFER + 1, cb),
            ("neither jetty nor jfr", h, hp, &mut none, 4096, cb),
        ];
        for (what, hh, hi, dv, len, cb) in cases {
            sy = std::ptr::NonNull::dangling().as_ptr();
            assert_eq!(recv(hh, hi, dv, len, 1, &mut sy, cb), OST_ERR, "{what}");
            assert!(sy.is_null(), "{what}: *ret_sync_handle reset");
        }
        let c = counters();
        assert_eq!(
            (c.send_wrs, c.recv_wrs, c.post_errors),
            (0, 0, 0),
            "nothing posted for a refused send or recv"
        );
        assert_eq!((lib.os_transport_wake_up_task)(h, null_mut()), -1);
        let mut cr = send_cr(ud(1, false, 0));
        assert_eq!(
            (lib.os_transport_wake_up_task)(null_mut(), (&mut cr as *mut u::urma_cr_t).cast()),
            -1
        );
        assert_eq!((lib.wait_and_free_sync)(h, null_mut(), &mut st), OST_ERR);
        assert_eq!(
            (lib.wait_and_free_sync_timeout)(h, null_mut(), 0, &mut st),
            OST_ERR
        );
        // A NULL handle with a live sync: refused, and the sync is not freed.
        let mut live = null_mut();
        assert_eq!(
            recv(h, &mut host, &mut dev, 4096, 0x5A, &mut live, Some(ok_cb)),
            0
        );
        st = 5;
        assert_eq!((lib.wait_and_free_sync)(null_mut(), live, &mut st), OST_ERR);
        assert_eq!(st, 0, "*urma_status reset first");
        assert_eq!(
            (lib.wait_and_free_sync_timeout)(null_mut(), live, 0, &mut st),
            OST_ERR
        );
        st = -7;
        assert_eq!(
            (lib.wait_and_free_sync_timeout)(h, live, 0, &mut st),
            1,
            "the sync was not freed by the refused waits"
        );
        assert_eq!(st, 0);
        assert_eq!(
            (lib.os_transport_cancel_tasks)(null_mut(), null_mut(), 1),
            OST_ERR
        );
        assert_eq!(
            (lib.os_transport_cancel_tasks)(h, null_mut(), 0x9999),
            0,
            "no sync pointer, unknown id"
        );
        assert_eq!(
            (lib.os_transport_reg_jfc)(null_mut(), null_mut(), null_mut()),
            OST_ERR
        );
        assert_eq!((lib.os_transport_reg_jfc)(null_mut(), null_mut(), h), 0);
        assert_eq!((lib.os_transport_destroy)(null_mut()), OST_ERR);
        assert_eq!((lib.os_transport_destroy)(h), 0);
        assert_eq!((lib.os_transport_destroy)(h), OST_ERR, "second destroy");
    }
}

/// Keys ≥ 2^40 are refused before any work.
fn key_limit(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let (src, dst, remote) = buffers(3 << 20, 1);
    assert_eq!(s.send(&src, &remote, 3 << 20, 1 << 40, 2).0, OST_ERR);
    assert_eq!(s.send(&src, &remote, 3 << 20, 1, 1 << 40).0, OST_ERR);
    let (r, sy) = s.recv(&dst, 4096, 1 << 40);
    assert_eq!((r, sy), (OST_ERR, null_mut()));
    let c = counters();
    assert_eq!(
        (c.send_wrs, c.recv_wrs, c.post_errors),
        (0, 0, 0),
        "nothing posted"
    );
    // The largest keys are fine (ck travels encoded). sk != ck: they share one namespace (D7).
    let max = (1u64 << 40) - 1;
    s.transfer(&src, &dst, &remote, CHUNK + 1, max - 1, max, 1);
    // Key 0 is valid too (its chunk-0 immediate is 0).
    s.transfer(&src, &dst, &remote, CHUNK + 1, 1, 0, 1);
    assert_eq!(notes()[2..], [ud(0, false, 0), ud(0, true, 1)]);
}

/// Log callback: registration, the level value `(level & 0xFF) | (vlevel << 8)` for INFO, WARN,
/// ERROR, DEBUG v1 and v2 (§8), the `[ost:..] [PIPLN RH2D] ` prefix, and thresholds 0 and 3.
fn log_callback_levels(which: Which) {
    let _g = serial();
    let Some(mut s) = Sess::std(which) else {
        return;
    };
    // SAFETY: NULL callback.
    assert_eq!(unsafe { (s.lib.os_transport_log_reg)(0, None) }, -1);
    lock(&LOG).clear();
    // SAFETY: valid callback.
    assert_eq!(unsafe { (s.lib.os_transport_log_reg)(-1, Some(log_cb)) }, 0);
    let b = Buffer::new(Loopback::get(), 4096);
    let exercise = |s: &mut Sess, ck: u64| {
        s.reinit(2, 2); // INFO (destroy, init)
        let mut c = cfg(0, 2);
        let mut h = std::ptr::NonNull::dangling().as_ptr();
        // SAFETY: valid pointers. An instance exists: ERR.
        let r = unsafe { (s.lib.os_transport_init)(null_mut(), &mut c, &mut h) };
        assert_eq!(r, OST_ERR);
        let (r, rs) = s.recv(&b, 4096, ck); // DEBUG v1 (request registered)
        assert_eq!(r, 0);
        assert_eq!(s.wake(&mut send_cr(ud(0x4711, false, 0))), -1); // DEBUG v2 (no context)
        assert_eq!(s.cancel(rs, ck), (0, null_mut()));
        let mut bad = b.info();
        let mut sy = null_mut();
        // SAFETY: NULL device info: ERROR.
        let r = unsafe {
            (s.lib.os_transport_recv)(s.h(), &mut bad, null_mut(), 4096, 1, &mut sy, Some(ok_cb))
        };
        assert_eq!(r, OST_ERR);
        assert_eq!(s.destroy(), 0);
        let mut h = std::ptr::NonNull::dangling().as_ptr();
        // SAFETY: valid pointers; worker_thread_num 0: WARN, success without a handle.
        let r = unsafe { (s.lib.os_transport_init)(null_mut(), &mut c, &mut h) };
        assert_eq!(r, 0);
        assert!(h.is_null());
        s.reinit_after_destroy(2, 2);
    };
    exercise(&mut s, 0x101);
    let log = lock(&LOG).clone();
    for lv in [0xFF00, 0xFF01, 0xFF02, 0x01FF, 0x02FF] {
        assert!(
            log.iter().any(|(l, _)| *l == lv),
            "no line with level {lv:#x}: {log:#?}"
        );
    }
    for (l, m) in &log {
        assert!(
            [0xFF00, 0xFF01, 0xFF02, 0x01FF, 0x02FF].contains(l),
            "level {l:#x}"
        );
        assert!(
            m.starts_with("[ost:") && m.contains("] [PIPLN RH2D] ") && m.ends_with('\n'),
            "{m:?}"
        );
    }
    // Threshold 0 hides DEBUG.
    // SAFETY: valid callback.
    assert_eq!(unsafe { (s.lib.os_transport_log_reg)(0, Some(log_cb)) }, 0);
    lock(&LOG).clear();
    exercise(&mut s, 0x102);
    let log = lock(&LOG).clone();
    assert!(log.iter().any(|(l, _)| *l == 0xFF00));
    assert!(
        log.iter().all(|(l, _)| l & 0xFF != 0xFF),
        "DEBUG hidden: {log:#?}"
    );
    // Threshold 3 hides everything.
    // SAFETY: valid callback.
    assert_eq!(unsafe { (s.lib.os_transport_log_reg)(3, Some(log_cb)) }, 0);
    lock(&LOG).clear();
    exercise(&mut s, 0x103);
    assert!(lock(&LOG).is_empty());
}

impl Sess {
    /// Init after [`Sess::destroy`] (no destroy first).
    fn reinit_after_destroy(&mut self, workers: u32, cap: u32) {
        let h = init_with(&self.lib, workers, cap);
        self.h.store(h as usize, Ordering::SeqCst);
        self.start_pollers();
    }
}

/// D7: a request id in flight (a second recv of a pending recv's ck, and a send whose sk is that
/// ck) is refused by Rust, with no sync handed back and nothing posted.
fn duplicate_inflight_id(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let b = Buffer::new(Loopback::get(), 4096);
    let (r, r1) = s.recv(&b, 4096, 42);
    assert_eq!(r, 0);
    let (r, r2) = s.recv(&b, 4096, 42);
    match which {
        Which::Rust => assert_eq!((r, r2.is_null()), (OST_ERR, true)),
        // D7: legacy accepts the duplicate (its tasks may be stranded).
        Which::Legacy => assert_eq!(r, 0),
    }
    if which == Which::Rust {
        // The same id as a send key (sk == ck of the pending recv): refused before any post.
        let (src, _dst, remote) = buffers(4096, 1);
        let before = counters();
        let (r, ss, st) = s.send(&src, &remote, 4096, 42, 43);
        assert_eq!((r, ss, st), (OST_ERR, null_mut(), 0), "D7: sk in flight");
        assert_eq!(counters().send_wrs, before.send_wrs, "nothing posted");
    }
    for sy in [r1, r2] {
        if !sy.is_null() {
            assert_eq!(s.cancel(sy, 42).0, 0);
        }
    }
}

/// A wait that times out returns 1 and releases the sync.
fn timeout_then_release(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let b = Buffer::new(Loopback::get(), 4096);
    let (r, rs) = s.recv(&b, 4096, 99);
    assert_eq!(r, 0);
    assert_eq!(s.wait(rs, 20), (1, 0));
}

// ------------------------------------------------------------------------------------------------
// Exact work-request sequences through the loopback trace (§3.3, §4.1).

/// §3.3 tables for N = 2, 3, 7 (jfs preferred over the jetty), and §4.1 prefill (capacity × 4
/// WRs, user_ctx ck, sge {0, 0, host tseg}, once per jetty) and re-post (one per accepted CR,
/// user_ctx 0, tseg NULL).
fn wr_trace_send_n2_n3_n7(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let (src, dst, remote) = buffers(MAX_TRANSFER as usize, 7);
    // The spec's recorded raw values (sk = 0x123456789A, ck = 0xABCDE12345).
    assert_eq!(ud(SK, false, 0), 0x0000_0012_3456_789A);
    assert_eq!(ud(SK, true, 7), 0xF000_0012_3456_789A);
    assert_eq!(ud(enc(CK), false, 0), 0x0ABC_DE00_0001_2345);
    assert_eq!(ud(SK, true, 1), 0x3000_0012_3456_789A);
    assert_eq!(ud(enc(CK), true, 1), 0x3ABC_DE00_0001_2345);
    for (i, len) in [CHUNK + 12345, 2 * CHUNK + 1, MAX_TRANSFER]
        .into_iter()
        .enumerate()
    {
        let n = chunks(len);
        let seen = s.sp().seen();
        // Fresh ids per transfer: the legacy worker may still hold the previous request's pool
        // context just after its wait returned, and reusing a live id strands the new tasks
        // (§10 #10). The first transfer keeps the contract's keys for the raw-value checks below.
        let (sk, ck) = (SK + i as u64, CK + i as u64);
        let (_, lines) = capture_trace(|| {
            s.transfer(&src, &dst, &remote, len, sk, ck, 7);
            // The send wait returns once the last SEND_IMM is posted; await its local CR too.
            assert!(until(LONG, || s.sp().seen() >= seen + u64::from(2 * n)));
        });
        let sends = send_posts(&lines);
        assert_eq!(sends, exp_send_seq("jfs1", sk, ck, len), "N = {n}");
        assert_eq!(sends.len() as u32, 2 * n);
        if n == 2 {
            assert_eq!((sk, ck), (SK, CK));
            assert!(sends[0].contains("uctx=0x000000123456789a"));
            assert!(sends[1].contains("uctx=0xf00000123456789a "));
            assert!(sends[1].contains("imm=0x0abcde0000012345 "));
            assert!(sends[2].contains("uctx=0x300000123456789a"));
            assert!(sends[3].contains("imm=0x3abcde0000012345"));
        }
        let mut want = Vec::new();
        if i == 0 {
            // First recv on this jetty: recv_queue_capacity (2) × 4 prefill WRs.
            want.extend((0..8).map(|_| exp_prefill(RX_JETTY_QUEUE, &dst, "seg2", CK)));
        }
        want.extend((0..n).map(|_| exp_repost(RX_JETTY_QUEUE)));
        assert_eq!(recv_posts(&lines), want, "N = {n}");
        // Exactly N WRITE completions and N SEND_IMM local completions fed back.
        let polled = events(&lines, "poll");
        assert_eq!(
            polled.iter().filter(|e| e.get("s_r") == "0").count() as u32,
            2 * n
        );
        assert_eq!(
            polled.iter().filter(|e| e.get("s_r") == "1").count() as u32,
            n
        );
    }
}

/// jfs NULL: every WR goes to the jetty; jfs and jetty NULL: nothing posted, URMA_FAIL (D8 for
/// the later wait's status).
fn wr_trace_jetty_fallback_and_no_queue(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let (src, dst, remote) = buffers(3 * CHUNK as usize, 3);
    let len = 2 * CHUNK + 77;
    let mut ji = s.pair.jetty_info();
    ji.jfs = null_mut();
    let ((), lines) = capture_trace(|| {
        let (r, rs) = s.recv(&dst, len, CK);
        assert_eq!(r, 0);
        let (r, ss, st) = s.send_ji(ji, &src, &remote, len, SK, CK);
        assert_eq!((r, st), (0, 0));
        assert_eq!(s.wait(ss, LONG_MS), (0, 0));
        assert_eq!(s.wait(rs, LONG_MS), (0, 0));
    });
    assert_eq!(dst.verify_pattern(3, 0..len as usize), Ok(()));
    assert_eq!(send_posts(&lines), exp_send_seq("jetty2", SK, CK, len));

    ji.jetty = null_mut();
    let ((r, ss, st), lines) = capture_trace(|| s.send_ji(ji, &src, &remote, len, SK + 1, CK + 1));
    assert_eq!((r, st), (OST_ERR, u::URMA_FAIL));
    assert!(
        !ss.is_null(),
        "the sync is handed back and must be waited or cancelled"
    );
    assert!(send_posts(&lines).is_empty());
    let want = match which {
        Which::Rust => (OST_ERR, u::URMA_FAIL),
        // D8: legacy's wait reports SUCCESS alongside ERR.
        Which::Legacy => (OST_ERR, u::URMA_SUCCESS),
    };
    assert_eq!(s.wait(ss, LONG_MS), want);
}

/// D6: a jfr-only recv (`device_dst->jetty == NULL`). Legacy never posts recv WRs (the
/// application's own WRs carry the transfer and re-posts fail silently); Rust prefills
/// capacity × 4 on the JFR and re-posts there.
fn wr_trace_recv_jfr_only(which: Which) {
    let _g = serial();
    let ep = EndpointCfg {
        recv: RecvKind::Jfr,
        ..Default::default()
    };
    let Some(s) = Sess::new(which, 2, 2, ep) else {
        return;
    };
    let (src, dst, remote) = buffers(3 * CHUNK as usize, 5);
    // The application's own recv WRs (what a legacy jfr-only receiver depends on).
    assert_eq!(s.pair.receiver.post_recvs(2, 0x77), u::URMA_SUCCESS);
    let len = CHUNK + 1;
    let dev = s.pair.device_info(dst.as_ptr().cast());
    assert!(dev.jetty.is_null() && !dev.jfr.is_null());
    let ((), lines) = capture_trace(|| {
        let (r, rs) = s.recv_dev(&dst, dev, len, CK);
        assert_eq!(r, 0);
        let (r, ss, st) = s.send(&src, &remote, len, SK, CK);
        assert_eq!((r, st), (0, 0));
        assert_eq!(s.wait(ss, LONG_MS), (0, 0));
        assert_eq!(s.wait(rs, LONG_MS), (0, 0));
    });
    assert_eq!(dst.verify_pattern(5, 0..len as usize), Ok(()));
    assert_eq!(send_posts(&lines), exp_send_seq("jfs1", SK, CK, len));
    let want: Vec<String> = match which {
        Which::Rust => (0..8)
            .map(|_| exp_prefill("jfr1", &dst, "seg2", CK))
            .chain((0..2).map(|_| exp_repost("jfr1")))
            .collect(),
        // D6: nothing; the re-posts fail with URMA_FAIL before reaching URMA (no jetty recorded).
        Which::Legacy => Vec::new(),
    };
    assert_eq!(recv_posts(&lines), want);
}

/// recv_queue_capacity 0, 1, 64: the first recv on a jetty posts capacity × 4 WRs, a second recv
/// on the same jetty none.
fn recv_queue_capacity(which: Which) {
    let _g = serial();
    let Some(mut s) = Sess::std(which) else {
        return;
    };
    let b = Buffer::new(Loopback::get(), 4096);
    // 0x4000_0001 × 4 wraps to 4 in 32 bits (§10 #13), on both libraries.
    for cap in [0u32, 1, 64, 0x4000_0001] {
        s.reinit(2, cap);
        let ((r1, r2), lines) = capture_trace(|| (s.recv(&b, 4096, 1), s.recv(&b, 4096, 2)));
        assert_eq!((r1.0, r2.0), (0, 0), "capacity {cap}");
        let want: Vec<String> = (0..cap.wrapping_mul(4))
            .map(|_| exp_prefill(RX_JETTY_QUEUE, &b, "seg1", 1))
            .collect();
        assert_eq!(recv_posts(&lines), want, "capacity {cap}");
        assert_eq!(s.cancel(r1.1, 1), (0, null_mut()));
        assert_eq!(s.cancel(r2.1, 2), (0, null_mut()));
    }
}

/// §4.1 with two receivers A and B (B's jetty shares its JFR): the single recorded-jetty slot
/// prefills at every switch (A, B, A), re-posts go to the recorded jetty whichever queue the CR
/// came from, and a switch to jfr-only prefills once on the JFR (legacy then records NULL, Rust
/// the JFR: the same posts here; they differ on later re-posts, D6).
fn recv_queue_switching(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let b_pair = EndpointPair::new(
        Loopback::get(),
        &EndpointCfg {
            recv: RecvKind::JettySharedJfr,
            ..Default::default()
        },
    );
    let len = CHUNK + 64;
    let (src, dst, remote) = buffers(len as usize, 61);
    let on_a = s.pair.device_info(dst.as_ptr().cast());
    let on_b = b_pair.device_info(dst.as_ptr().cast());
    let mut b_jfr_only = on_b;
    b_jfr_only.jetty = null_mut();
    let mut syncs = Vec::new();
    let ((), lines) = capture_trace(|| {
        for (ck, dev) in [(1u64, on_a), (2, on_b)] {
            let (r, sy) = s.recv_dev(&dst, dev, 4096, ck);
            assert_eq!(r, 0);
            syncs.push((ck, sy));
        }
        // B is recorded: a transfer arriving on A's jetty re-posts on B's.
        let (r, rs) = s.recv_dev(&dst, on_b, len, CK);
        assert_eq!(r, 0);
        let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
        assert_eq!(r, 0);
        assert_eq!(s.wait(ss, LONG_MS), (0, 0));
        assert_eq!(s.wait(rs, LONG_MS), (0, 0));
        for (ck, dev) in [(4u64, on_a), (5, on_a), (6, b_jfr_only), (7, b_jfr_only)] {
            let (r, sy) = s.recv_dev(&dst, dev, 4096, ck);
            assert_eq!(r, 0);
            syncs.push((ck, sy));
        }
    });
    assert_eq!(dst.verify_pattern(61, 0..len as usize), Ok(()));
    let prefill = |q: &str, ck: u64| -> Vec<String> {
        (0..8).map(|_| exp_prefill(q, &dst, "seg2", ck)).collect()
    };
    // A jetty's recv posts are traced under the JFR it shares: A's receiver jetty under jfr1
    // (A's sender jetty has jfr2), B's jetty and B's JFR both under jfr3.
    let mut want = prefill(RX_JETTY_QUEUE, 1);
    want.extend(prefill("jfr3", 2));
    want.extend((0..2).map(|_| exp_repost("jfr3")));
    want.extend(prefill(RX_JETTY_QUEUE, 4));
    want.extend(prefill("jfr3", 6));
    assert_eq!(recv_posts(&lines), want);
    for (ck, sy) in syncs {
        assert_eq!(s.cancel(sy, ck), (0, null_mut()));
    }
}

/// `urma_event_mode`, `jfce` and `jfc` in the configuration are only recorded: a transfer with
/// event-driven pollers (JFCE wait, ack, rearm) behaves exactly as with polling.
fn event_mode_configuration(which: Which) {
    let _g = serial();
    let ep = EndpointCfg {
        event_mode: true,
        ..Default::default()
    };
    let Some(s) = Sess::new(which, 2, 2, ep) else {
        return;
    };
    let len = 3 * CHUNK;
    let (src, dst, remote) = buffers(len as usize, 67);
    // SAFETY: reg_jfc only records the pointers.
    let r =
        unsafe { (s.lib.os_transport_reg_jfc)(s.pair.sender.cq.jfce, s.pair.sender.cq.jfc, s.h()) };
    assert_eq!(r, 0);
    let ((), lines) = capture_trace(|| s.transfer(&src, &dst, &remote, len, SK, CK, 67));
    assert_eq!(send_posts(&lines), exp_send_seq("jfs1", SK, CK, len));
    assert!(
        counters().events_reported > 0,
        "the pollers ran in event mode"
    );
}

// ------------------------------------------------------------------------------------------------
// Completion handling.

/// D14: a duplicated completion of WRITE 0. Legacy runs task 1 on it (SEND_IMM 1 and WRITE 2 are
/// posted before WRITE 1's completion was delivered, §3.2/§10 #7); Rust discards it. Both finish
/// the transfer.
///
/// Ordering is asserted against what the test controls, not against the poller: every send-side
/// CR is held, and the trace is split at the moment the held CRs are handed to the library.
/// The loopback completes a WRITE as soon as it is posted, so the poller may *poll* WRITE 1's CR
/// before or after the legacy worker posts SEND_IMM 1 (task 0 posts WRITE 1, then task 1 posts
/// SEND_IMM 1, on the worker thread, concurrently with the poller): comparing with the `poll`
/// line made this test flaky (~1 run in 5). What §3.2/§5.4 guarantee for legacy is that the
/// duplicated wake-up runs task 1 at once, i.e. SEND_IMM 1 and WRITE 2 are posted while WRITE 1's
/// CR has not reached `os_transport_wake_up_task`; for Rust (D14) that SEND_IMM 1 is posted only
/// after WRITE 1's CR was delivered.
fn duplicated_write_completion(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = 2 * CHUNK + 10;
    let (src, dst, remote) = buffers(len as usize, 71);
    s.sp().set_hold(true);
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    let (held_part, rest) = capture_trace(|| {
        let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
        assert_eq!(r, 0);
        assert!(s.sp().wait_seen(1, LONG));
        let mut w0 = s.sp().take_held();
        assert_eq!(w0.len(), 1);
        let mut dup = w0[0];
        assert_eq!(s.wake(&mut w0[0]), 0);
        // Legacy queues it and runs task 1; Rust discards it (D14) and says so (D16).
        let dup_ret = match which {
            Which::Rust => -1,
            Which::Legacy => 0,
        };
        assert_eq!(
            s.wake(&mut dup),
            dup_ret,
            "the duplicated WRITE 0 completion"
        );
        // Local CRs of what the worker(s) posted on these two wake-ups: S0, W1 (+ S1, W2).
        let more = match which {
            Which::Rust => 2,
            Which::Legacy => 4,
        };
        assert!(s.sp().wait_seen(1 + more, LONG));
        assert!(!until(Duration::from_millis(20), || s.sp().seen() > 1 + more));
        // Everything traced so far happened before any held CR reached the library.
        let held_part = trace_take();
        s.sp().set_hold(false);
        s.sp().release_held();
        assert_eq!(s.wait(ss, LONG_MS), (0, 0));
        assert_eq!(s.wait(rs, LONG_MS), (0, 0));
        held_part
    });
    let split = held_part.len();
    let lines: Vec<String> = held_part.into_iter().chain(rest).collect();
    assert_eq!(dst.verify_pattern(71, 0..len as usize), Ok(()));
    assert_eq!(send_posts(&lines), exp_send_seq("jfs1", SK, CK, len));
    let evs: Vec<Ev> = lines.iter().map(|l| Ev::parse(l)).collect();
    let pos = |f: &dyn Fn(&Ev) -> bool| evs.iter().position(f).expect("event in trace");
    let w1_polled = pos(&|e| {
        e.get("ev") == "poll" && e.get("user_ctx") == format!("{:#018x}", ud(SK, false, 1))
    });
    let s1_posted = pos(&|e| {
        e.get("ev") == "post_send" && e.get("imm") == format!("{:#018x}", ud(enc(CK), false, 1))
    });
    let w2_posted = pos(&|e| {
        e.get("ev") == "post_send" && e.get("user_ctx") == format!("{:#018x}", ud(SK, true, 2))
    });
    assert!(w1_polled < split, "WRITE 1's CR was polled (and held)");
    match which {
        Which::Rust => {
            assert!(
                s1_posted >= split && w2_posted >= split,
                "D14: SEND_IMM 1 and WRITE 2 only after WRITE 1's CR was delivered"
            );
            assert!(w1_polled < s1_posted);
        }
        Which::Legacy => assert!(
            s1_posted < split && w2_posted < split,
            "legacy: SEND_IMM 1 and WRITE 2 posted before WRITE 1's CR was delivered"
        ),
    }
}

/// Several threads transferring at once (distinct ids): every byte and every callback arrives.
fn concurrent_transfers(which: Which) {
    let _g = serial();
    let Some(s) = Sess::new(which, 3, 4, EndpointCfg::default()) else {
        return;
    };
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 3;
    let len = 2 * CHUNK + 4097;
    let bufs: Vec<_> = (0..THREADS)
        .map(|t| buffers(len as usize, 100 + t))
        .collect();
    std::thread::scope(|sc| {
        for (t, (src, dst, remote)) in bufs.iter().enumerate() {
            let s = &s;
            sc.spawn(move || {
                for round in 0..ROUNDS {
                    let id = 0x1000 * (t as u64 + 1) + round;
                    s.transfer(src, dst, remote, len, id, id + 0x800, 100 + t as u64);
                }
            });
        }
    });
    assert_eq!(notes().len() as u64, THREADS * ROUNDS * 3);
    let c = counters();
    assert_eq!(c.send_wrs, THREADS * ROUNDS * 6);
    assert_eq!(c.crs_error, 0);
    assert!(s.wakes().iter().all(|w| w.ret == 0), "every CR accepted");
}

/// Receive completions in reverse order: each runs its own chunk's task (§4.2).
fn recv_out_of_order(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = 2 * CHUNK + 99;
    let (src, dst, remote) = buffers(len as usize, 11);
    let (rs, mut held) = s.send_with_recv_crs_held(&src, &dst, &remote, len, 3);
    assert_eq!(held.len(), 3);
    held.reverse();
    for cr in &mut held {
        assert_eq!(s.wake(cr), 0);
    }
    assert_eq!(s.wait(rs, LONG_MS), (0, 0));
    assert_eq!(
        notes(),
        vec![ud(CK, true, 2), ud(CK, false, 1), ud(CK, false, 0)]
    );
    assert_eq!(dst.verify_pattern(11, 0..len as usize), Ok(()));
}

/// A duplicated receive CR while the request is live is discarded by the worker (0, no second
/// callback); after the request ended it is refused (-1) by legacy and kept by Rust (D4).
fn duplicate_cr(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 1;
    let (src, dst, remote) = buffers(len as usize, 13);
    let (rs, mut held) = s.send_with_recv_crs_held(&src, &dst, &remote, len, 2);
    assert_eq!(held.len(), 2);
    let mut dup = held[0];
    assert_eq!(s.wake(&mut held[0]), 0);
    assert_eq!(
        s.wake(&mut dup),
        0,
        "request still live: queued, then discarded"
    );
    assert_eq!(s.wake(&mut held[1]), 0);
    assert_eq!(s.wait(rs, LONG_MS), (0, 0));
    assert_eq!(notes(), vec![ud(CK, false, 0), ud(CK, true, 1)]);
    let late = s.wake(&mut dup);
    match which {
        // D4: a receive CR for an id with no live request is kept for a later recv of that id.
        Which::Rust => assert_eq!(late, 0),
        // No context: -1. The legacy pool drops a request's context only after its last task
        // returned (§5.4), which may be just after the waiter woke: then the CR is queued and
        // discarded by the worker (0). Either way no callback runs.
        Which::Legacy => assert!(late == -1 || late == 0, "{late}"),
    }
    assert_eq!(notes().len(), 2);
}

/// CRs that match nothing: send side -1 (SEND_IMM sentinel 0), wrong receive opcode -1,
/// receive CR for an unknown id -1 on legacy / kept by Rust and delivered to the recv that
/// registers it later (D4).
fn cr_for_unknown_request(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let b = Buffer::new(Loopback::get(), 4096);
    assert_eq!(s.wake(&mut send_cr(ud(0x4242, false, 0))), -1);
    assert_eq!(
        s.wake(&mut send_cr(ud(0x4242, true, 7))),
        0,
        "SEND_IMM sentinel"
    );
    let mut wrong = recv_cr(ud(enc(0x5151), true, 0), 0);
    wrong.opcode = u::URMA_CR_OPC_WRITE_WITH_IMM;
    assert_eq!(
        s.wake(&mut wrong),
        -1,
        "receive opcode other than SEND_WITH_IMM"
    );
    let early = s.wake(&mut recv_cr(ud(enc(0x5151), true, 0), 0));
    let (r, rs) = s.recv(&b, 4096, 0x5151);
    assert_eq!(r, 0);
    match which {
        Which::Rust => {
            // D4: kept, then delivered to the recv of that id.
            assert_eq!(early, 0);
            assert_eq!(s.wait(rs, LONG_MS), (0, 0));
            assert_eq!(notes(), vec![ud(0x5151, true, 0)]);
        }
        Which::Legacy => {
            assert_eq!(early, -1);
            assert_eq!(s.wait(rs, SHORT_MS), (1, 0));
            assert!(notes().is_empty());
        }
    }
    // Nothing was re-posted for the wrong opcode; the other CR's re-post found no queue.
    assert_eq!(counters().recv_wrs, 8, "only the prefill of the recv");
}

/// D3 on the send side: the WRITE of chunk 1 completes with an error status.
fn error_status_cr_send(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 4096;
    let (src, dst, remote) = buffers(len as usize, 17);
    // Send WRs: 1 = WRITE 0, 2 = SEND_IMM 0, 3 = WRITE 1.
    fail_completion(3, u::URMA_CR_REM_ACCESS_ABORT_ERR);
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    let sw = s.wait(ss, LONG_MS);
    assert!(until(LONG, || s.wakes().iter().any(|w| w.status != 0)));
    let err = s.wakes().into_iter().find(|w| w.status != 0).unwrap();
    assert_eq!((err.recv, err.ret), (false, 0));
    assert_eq!(dst.verify_pattern(17, 0..CHUNK as usize), Ok(()));
    match which {
        Which::Rust => {
            // D3: the error completion fails the send; the receiver never hears of chunk 1.
            assert_eq!(sw, (OST_ERR, u::URMA_FAIL));
            assert_eq!(s.wait(rs, SHORT_MS), (1, 0));
        }
        Which::Legacy => {
            // D3: legacy ignores cr->status: both sides report success, chunk 1 never landed.
            assert_eq!(sw, (0, 0));
            assert_eq!(s.wait(rs, LONG_MS), (0, 0));
            assert!(dst
                .verify_pattern(17, CHUNK as usize..len as usize)
                .is_err());
        }
    }
}

/// D3 on the receive side: a SEND_WITH_IMM CR with an error status.
fn error_status_cr_recv(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 1;
    let (src, dst, remote) = buffers(len as usize, 19);
    let (rs, mut held) = s.send_with_recv_crs_held(&src, &dst, &remote, len, 2);
    held[0].status = u::URMA_CR_LOC_LEN_ERR;
    assert_eq!(s.wake(&mut held[0]), 0);
    let second = s.wake(&mut held[1]);
    match which {
        Which::Rust => {
            // D3: the request failed at the error CR; the next CR finds it ended.
            assert_eq!(second, -1);
            assert_eq!(s.wait(rs, LONG_MS), (OST_ERR, u::URMA_FAIL));
            assert!(notes().is_empty());
        }
        Which::Legacy => {
            assert_eq!(second, 0);
            assert_eq!(s.wait(rs, LONG_MS), (0, 0));
            assert_eq!(notes(), vec![ud(CK, false, 0), ud(CK, true, 1)]);
        }
    }
}

/// D2: notify_callback fails at chunk 1 of 3: the wait returns ERR (legacy leaks the sync, Rust
/// frees it; not observable here); a later CR of that request is refused.
fn callback_failure(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = 2 * CHUNK + 5;
    let (src, dst, remote) = buffers(len as usize, 23);
    FAIL_CHUNK.store(1, Ordering::SeqCst);
    let (rs, mut held) = s.send_with_recv_crs_held(&src, &dst, &remote, len, 3);
    assert_eq!(s.wake(&mut held[0]), 0);
    assert_eq!(s.wake(&mut held[1]), 0);
    assert_eq!(s.wait(rs, LONG_MS), (OST_ERR, 0));
    assert_eq!(notes(), vec![ud(CK, false, 0), ud(CK, false, 1)]);
    let late = s.wake(&mut held[2]);
    match which {
        Which::Rust => assert_eq!(late, -1, "request ended"),
        // §4.4: "either find no context (-1) or are dropped by the worker" (0): the legacy pool
        // decrements a context's pending count only after the failed task returned, which may be
        // after the waiter's cancel.
        Which::Legacy => assert!(late == -1 || late == 0, "{late}"),
    }
    // Either way chunk 2 never runs.
    let t0 = Instant::now();
    assert!(!until(Duration::from_millis(20), || notes().len() > 2));
    assert!(t0.elapsed() >= Duration::from_millis(20));
    assert_eq!(notes().len(), 2);
}

/// D8: the first WRITE post fails: send returns ERR with the status and a sync to wait on.
fn first_chunk_post_failure(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let (src, _dst, remote) = buffers(3 * CHUNK as usize, 29);
    fail_post(Queue::Send, 1, u::URMA_EAGAIN);
    let ((r, ss, st), lines) = capture_trace(|| s.send(&src, &remote, 2 * CHUNK, SK, CK));
    assert_eq!((r, st), (OST_ERR, u::URMA_EAGAIN));
    assert!(!ss.is_null());
    assert_eq!(
        send_posts(&lines),
        vec![exp_write("jfs1", SK, 2, 2 * CHUNK, 0, u::URMA_EAGAIN)]
    );
    let want = match which {
        Which::Rust => (OST_ERR, u::URMA_EAGAIN),
        // D8: the status is not kept in the legacy sync.
        Which::Legacy => (OST_ERR, u::URMA_SUCCESS),
    };
    assert_eq!(s.wait(ss, LONG_MS), want);
    assert_eq!(counters().send_wrs, 0);
}

/// §3.4: a worker's WRITE (chunk 1) or SEND_IMM (chunk 1) post fails: the pipeline stops there and
/// the wait returns ERR with that status (same on both libraries).
fn mid_pipeline_post_failure(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = 2 * CHUNK + 3;
    let (src, dst, remote) = buffers(len as usize, 31);
    // nth send WR: 1 WRITE 0, 2 SEND_IMM 0, 3 WRITE 1, 4 SEND_IMM 1.
    for (nth, id) in [(3u64, 0x10u64), (4, 0x20)] {
        reset();
        fail_post(Queue::Send, nth, u::URMA_EAGAIN);
        let ((), lines) = capture_trace(|| {
            let (r, rs) = s.recv(&dst, len, CK + id);
            assert_eq!(r, 0);
            let (r, ss, st) = s.send(&src, &remote, len, SK + id, CK + id);
            assert_eq!((r, st), (0, 0));
            assert_eq!(s.wait(ss, LONG_MS), (OST_ERR, u::URMA_EAGAIN), "nth {nth}");
            assert_eq!(s.cancel(rs, CK + id).0, 0);
        });
        let mut want = exp_send_seq("jfs1", SK + id, CK + id, len);
        want.truncate(nth as usize);
        let last = want.last_mut().unwrap();
        *last = last.replace(" ret=0", &format!(" ret={}", u::URMA_EAGAIN));
        assert_eq!(send_posts(&lines), want, "nth {nth}");
    }
}

/// D4: the sender runs ahead, its SEND_IMMs reach the receiver before `os_transport_recv`:
/// legacy drops them (-1) and the recv times out; Rust keeps them and the recv completes.
fn early_send_imm_before_recv(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 8;
    let (src, dst, remote) = buffers(len as usize, 37);
    assert_eq!(s.pair.receiver.post_recvs(2, 0x99), u::URMA_SUCCESS);
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    assert_eq!(s.wait(ss, LONG_MS), (0, 0));
    assert!(s.rp().wait_seen(2, LONG));
    let early: Vec<i32> = s.wakes().iter().filter(|w| w.recv).map(|w| w.ret).collect();
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    assert_eq!(
        dst.verify_pattern(37, 0..len as usize),
        Ok(()),
        "the data landed"
    );
    match which {
        Which::Rust => {
            assert_eq!(early, vec![0, 0]);
            assert_eq!(s.wait(rs, LONG_MS), (0, 0));
            assert_eq!(notes(), vec![ud(CK, false, 0), ud(CK, true, 1)]);
        }
        Which::Legacy => {
            assert_eq!(early, vec![-1, -1]);
            assert_eq!(s.wait(rs, SHORT_MS), (1, 0));
        }
    }
}

/// Timeouts: 0 ms is an immediate check; a send whose WRITE completion is held times out with
/// its tasks queued, the wait cancels them and a late completion finds nothing (-1).
fn wait_timeouts_with_tasks_queued(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 8;
    let (src, dst, remote) = buffers(len as usize, 41);
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    let t0 = Instant::now();
    assert_eq!(s.wait(rs, 0), (1, 0));
    assert!(t0.elapsed() < Duration::from_secs(1) * target::slowdown());
    s.sp().set_hold(true);
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    let t0 = Instant::now();
    assert_eq!(s.wait(ss, SHORT_MS), (1, 0));
    assert!(t0.elapsed() >= Duration::from_millis(SHORT_MS as u64));
    assert!(s.sp().wait_seen(1, LONG));
    let mut held = s.sp().take_held();
    assert_eq!(held.len(), 1, "WRITE 0 only");
    assert_eq!(
        s.wake(&mut held[0]),
        -1,
        "tasks cancelled by the timed-out wait"
    );
    assert_eq!(counters().send_wrs, 1);
}

/// Cancel before completion (later CRs refused), after completion (sync consumed, 0), by id
/// with no sync (D11), and of an unknown id.
fn cancel_before_and_after_completion(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 8;
    let (src, dst, remote) = buffers(len as usize, 43);
    // Before.
    let (r, rs) = s.recv(&dst, len, 0x71);
    assert_eq!(r, 0);
    assert_eq!(s.cancel(rs, 0x71), (0, null_mut()));
    assert_eq!(s.wake(&mut recv_cr(ud(enc(0x71), false, 0), 0)), -1);
    // After: every callback ran, nobody waited yet.
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    assert_eq!(s.wait(ss, LONG_MS), (0, 0));
    assert!(until(LONG, || notes().len() == 2));
    assert_eq!(s.cancel(rs, CK), (0, null_mut()));
    assert_eq!(dst.verify_pattern(43, 0..len as usize), Ok(()));
    // Unknown id, no sync.
    assert_eq!(s.cancel(null_mut(), 0x9999), (0, null_mut()));
    // By id only, then wait on the sync.
    let (r, rs) = s.recv(&dst, len, 0x72);
    assert_eq!(r, 0);
    assert_eq!(s.cancel(null_mut(), 0x72).0, 0);
    match which {
        Which::Rust => assert_eq!(s.wait(rs, LONG_MS), (OST_ERR, 0)),
        // D11: legacy only removed the queued tasks; the sync never completes (timed wait: 1).
        Which::Legacy => assert_eq!(s.wait(rs, SHORT_MS), (1, 0)),
    }
    // A sync passed with another request's id: that sync is consumed, the id's request cancelled.
    let (r, a) = s.recv(&dst, len, 0x73);
    assert_eq!(r, 0);
    let (r, b) = s.recv(&dst, len, 0x74);
    assert_eq!(r, 0);
    assert_eq!(s.cancel(a, 0x74), (0, null_mut()));
    match which {
        Which::Rust => assert_eq!(s.wait(b, LONG_MS), (OST_ERR, 0)),
        // D11: legacy moved B's removed count onto A's sync; B's own sync never completes.
        Which::Legacy => assert_eq!(s.wait(b, SHORT_MS), (1, 0)),
    }
}

/// D5: destroy with requests in flight.
fn destroy_with_requests_in_flight(which: Which) {
    let _g = serial();
    let Some(mut s) = Sess::std(which) else {
        return;
    };
    let b = Buffer::new(Loopback::get(), 4096);
    let (r, waited) = s.recv(&b, 4096, 0x61);
    assert_eq!(r, 0);
    let (r, idle) = s.recv(&b, 4096, 0x62);
    assert_eq!(r, 0);
    match which {
        Which::Rust => {
            let (wait, h, sy) = (s.lib.wait_and_free_sync, s.h() as usize, waited as usize);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut st = -7;
                // SAFETY: an untimed wait on a live sync (D5: destroy wakes it).
                let r = unsafe { wait(h as *mut c_void, sy as *mut task_sync_t, &mut st) };
                let _ = tx.send((r, st));
            });
            let h_old = s.h();
            assert_eq!(s.destroy(), 0);
            assert_eq!(rx.recv_timeout(LONG).expect("waiter woke"), (OST_ERR, 0));
            let mut st = -7;
            // SAFETY: stale handle and sync: refused (D10).
            let r = unsafe { (s.lib.wait_and_free_sync_timeout)(h_old, idle, 0, &mut st) };
            assert_eq!(r, OST_ERR);
        }
        Which::Legacy => {
            // D5: legacy drops the queued tasks without completing the syncs: an untimed waiter
            // would hang and a wait after destroy would use the freed handle, so neither sync is
            // touched again.
            let _ = (waited, idle);
            assert_eq!(s.destroy(), 0);
        }
    }
    // A new instance works.
    s.reinit_after_destroy(2, 2);
    let (src, dst, remote) = buffers(CHUNK as usize + 8, 47);
    s.transfer(&src, &dst, &remote, CHUNK + 8, SK, CK, 47);
}

/// One instance per process; `worker_thread_num == 0` "succeeds" without a handle; more than 1024
/// workers are refused (D12).
fn second_init_and_zero_workers(which: Which) {
    let _g = serial();
    let Some(lib) = load(which) else { return };
    let mut c = cfg(2, 2);
    let mut h = std::ptr::NonNull::dangling().as_ptr();
    // SAFETY: NULL cfg / NULL handle pointer: ERR, *handle untouched.
    unsafe {
        assert_eq!(
            (lib.os_transport_init)(null_mut(), null_mut(), &mut h),
            OST_ERR
        );
        assert_eq!(h, std::ptr::NonNull::dangling().as_ptr());
        assert_eq!(
            (lib.os_transport_init)(null_mut(), &mut c, null_mut()),
            OST_ERR
        );
    }
    let h1 = init(&lib);
    let mut h2 = std::ptr::NonNull::dangling().as_ptr();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(
            (lib.os_transport_init)(null_mut(), &mut c, &mut h2),
            OST_ERR
        );
        assert!(h2.is_null(), "*handle reset before the check");
        assert_eq!((lib.os_transport_destroy)(h1), 0);
        let mut z = cfg(0, 2);
        let mut h0 = std::ptr::NonNull::dangling().as_ptr();
        assert_eq!((lib.os_transport_init)(null_mut(), &mut z, &mut h0), 0);
        assert!(h0.is_null());
        let mut sy = null_mut();
        let mut st = 0;
        let (mut ji, mut b) = (
            std::mem::zeroed::<urma_jetty_info_t>(),
            std::mem::zeroed::<ost_buffer_info_t>(),
        );
        let mut b2 = b;
        assert_eq!(
            (lib.os_transport_send)(
                h0,
                &mut ji,
                &mut b,
                &mut b2,
                4 << 20,
                1,
                2,
                &mut sy,
                &mut st
            ),
            OST_ERR
        );
    }
    // D12: at most 1024 workers (Rust); legacy has no bound.
    let mut over = cfg(1025, 2);
    let mut h4 = std::ptr::NonNull::dangling().as_ptr();
    // SAFETY: valid pointers.
    let r = unsafe { (lib.os_transport_init)(null_mut(), &mut over, &mut h4) };
    match which {
        Which::Rust => {
            assert_eq!((r, h4), (OST_ERR, null_mut()), "D12: 1025 workers refused");
            // The bound itself is accepted (and the refusal left no instance behind).
            let h5 = init_with(&lib, 1024, 2);
            // SAFETY: live handle.
            assert_eq!(unsafe { (lib.os_transport_destroy)(h5) }, 0);
        }
        Which::Legacy => {
            assert_eq!(r, 0, "D12: legacy takes any number of workers");
            assert!(!h4.is_null());
            // SAFETY: live handle.
            assert_eq!(unsafe { (lib.os_transport_destroy)(h4) }, 0);
        }
    }
    // No instance was left behind.
    let h3 = init(&lib);
    // SAFETY: live handle.
    assert_eq!(unsafe { (lib.os_transport_destroy)(h3) }, 0);
}

// ------------------------------------------------------------------------------------------------
// Failure paths of recv prefill, send tasks and notify callbacks (D9, D10, D12).

/// D9: the recv prefill fails (3rd recv WR rejected): ERR, no sync; the next recv retries the
/// prefill. Rust releases the failed request (its id is reusable at once). A tolerated
/// URMA_ENOMEM still records the jetty.
fn prefill_failure(which: Which) {
    let _g = serial();
    let Some(mut s) = Sess::std(which) else {
        return;
    };
    let b = Buffer::new(Loopback::get(), 4096);
    fail_post(Queue::Recv, 3, u::URMA_EINVAL);
    let ((r, sy), lines) = capture_trace(|| s.recv(&b, 4096, 0x81));
    assert_eq!((r, sy), (OST_ERR, null_mut()));
    let mut want: Vec<String> = (0..3)
        .map(|_| exp_prefill(RX_JETTY_QUEUE, &b, "seg1", 0x81))
        .collect();
    want[2] = want[2].replace("ret=0", &format!("ret={}", u::URMA_EINVAL));
    assert_eq!(recv_posts(&lines), want);
    let ((r, r2), lines) = capture_trace(|| s.recv(&b, 4096, 0x82));
    assert_eq!(r, 0);
    assert_eq!(recv_posts(&lines).len(), 8, "prefill retried");
    assert_eq!(s.cancel(r2, 0x82).0, 0);
    if which == Which::Rust {
        // D9: the failed request was released, its id is free.
        let (r, again) = s.recv(&b, 4096, 0x81);
        assert_eq!(r, 0);
        assert_eq!(s.cancel(again, 0x81).0, 0);
    }
    // Legacy: the failed request's tasks and context stay behind (§10 #4); reusing 0x81 there
    // would strand tasks (D7), so it is not tried.

    // URMA_ENOMEM ("queue full") is tolerated: the jetty is recorded, no retry.
    s.reinit(2, 2);
    reset();
    fail_post(Queue::Recv, 2, u::URMA_ENOMEM);
    let ((r, sy), lines) = capture_trace(|| s.recv(&b, 4096, 0x83));
    assert_eq!(r, 0);
    assert_eq!(recv_posts(&lines).len(), 2);
    let ((r, sy2), lines) = capture_trace(|| s.recv(&b, 4096, 0x84));
    assert_eq!(r, 0);
    assert!(recv_posts(&lines).is_empty());
    assert_eq!(s.cancel(sy, 0x83).0, 0);
    assert_eq!(s.cancel(sy2, 0x84).0, 0);
}

static SELF_WAIT: Mutex<Option<(usize, usize, usize)>> = Mutex::new(None);
static SELF_WAIT_RESULT: Mutex<Vec<(u32, i32)>> = Mutex::new(Vec::new());

/// Waits on its own request (lib wait fn, handle, sync in [`SELF_WAIT`]) from notify_callback.
unsafe extern "C" fn self_wait_cb(p: *mut c_void) -> c_int {
    // SAFETY: as in rec_cb.
    unsafe { rec_cb(p) };
    if let Some((f, h, sy)) = *lock(&SELF_WAIT) {
        // SAFETY: f is the library's wait_and_free_sync_timeout.
        let wait: unsafe extern "C" fn(*mut c_void, *mut task_sync_t, i64, *mut i32) -> u32 =
            unsafe { fn_from_ptr(f as *mut c_void) };
        let mut st = -7;
        // SAFETY: the live handle and this request's own sync.
        let r = unsafe { wait(h as *mut c_void, sy as *mut task_sync_t, LONG_MS, &mut st) };
        lock(&SELF_WAIT_RESULT).push((r, st));
    }
    0
}

/// D10: a notify_callback that waits on its own request gets ERR at once and the sync stays
/// with its owner. Not run on legacy: there it deadlocks the worker (§4.4, §10 #22), and the
/// following destroy would hang joining it.
fn callback_waits_on_own_request(which: Which) {
    let _g = serial();
    if which == Which::Legacy {
        eprintln!("skipped on legacy: a callback waiting on its own request deadlocks (§10 #22)");
        return;
    }
    let Some(s) = Sess::std(which) else { return };
    let len = CHUNK + 1;
    let (src, dst, remote) = buffers(len as usize, 53);
    lock(&SELF_WAIT_RESULT).clear();
    let mut hi = dst.info();
    let mut dev = s.pair.device_info(dst.as_ptr().cast());
    let mut rs = null_mut();
    // SAFETY: live fixture objects and valid out-pointers.
    let r = unsafe {
        (s.lib.os_transport_recv)(
            s.h(),
            &mut hi,
            &mut dev,
            len,
            CK,
            &mut rs,
            Some(self_wait_cb),
        )
    };
    assert_eq!(r, 0);
    *lock(&SELF_WAIT) = Some((
        s.lib.wait_and_free_sync_timeout as usize,
        s.h() as usize,
        rs as usize,
    ));
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    assert_eq!(s.wait(ss, LONG_MS), (0, 0));
    assert_eq!(
        s.wait(rs, LONG_MS),
        (0, 0),
        "the sync stayed with its owner"
    );
    *lock(&SELF_WAIT) = None;
    assert_eq!(*lock(&SELF_WAIT_RESULT), vec![(OST_ERR, 0), (OST_ERR, 0)]);
    assert_eq!(notes().len(), 2);
}

/// D12: at most `OS_TRANSPORT_MAX_INFLIGHT` unfinished requests (Rust; set to 64 here, default
/// 2^20): the next send/recv gets ERR with nothing posted, the refusals are logged once per burst,
/// and the library recovers once requests end. Requests that finished without their syncs being
/// collected never count, and those syncs stay valid for a later wait or cancel. Legacy has no
/// bound (the 65th is accepted; it ignores the variable).
fn requests_in_flight_limit(which: Which) {
    const LIMIT: u64 = 64;
    let _g = serial();
    std::env::set_var("OS_TRANSPORT_MAX_INFLIGHT", LIMIT.to_string());
    let s = Sess::std(which);
    std::env::remove_var("OS_TRANSPORT_MAX_INFLIGHT");
    let Some(s) = s else { return };
    lock(&LOG).clear();
    // SAFETY: valid callback (WARN and above).
    assert_eq!(unsafe { (s.lib.os_transport_log_reg)(1, Some(log_cb)) }, 0);
    let len = CHUNK + 8;
    let (src, dst, remote) = buffers(len as usize, 59);
    // Twice the limit of gets whose receive syncs are never collected: all served.
    let mut kept = Vec::new();
    for i in 0..2 * LIMIT {
        let ck = 0x30_0000 + i;
        let (r, rs) = s.recv(&dst, len, ck);
        assert_eq!(r, 0, "get {i}");
        let (r, ss, st) = s.send(&src, &remote, len, 0x40_0000 + i, ck);
        assert_eq!((r, st), (0, 0), "get {i}");
        assert_eq!(s.wait(ss, LONG_MS), (0, 0));
        assert!(
            until(LONG, || notes().len() == 2 * (i as usize + 1)),
            "get {i}"
        );
        kept.push((ck, rs));
    }
    let b = Buffer::new(Loopback::get(), 4096);
    let mut syncs = Vec::new();
    for i in 0..LIMIT {
        let (r, sy) = s.recv(&b, 4096, 0x10_0000 + i);
        assert_eq!(r, 0, "recv {i}");
        syncs.push((0x10_0000 + i, sy));
    }
    let before = counters();
    let (r, sy) = s.recv(&b, 4096, 0x20_0000);
    let (r2, ss, st) = s.send(&src, &remote, len, SK, CK);
    let (r3, sy3) = s.recv(&b, 4096, 0x20_0002);
    let refusal_lines = || {
        lock(&LOG)
            .iter()
            .filter(|(_, m)| m.contains("refused"))
            .count()
    };
    match which {
        Which::Rust => {
            assert_eq!((r, sy), (OST_ERR, null_mut()), "D12: limit reached");
            assert_eq!((r2, ss, st), (OST_ERR, null_mut(), 0));
            assert_eq!(r3, OST_ERR);
            let after = counters();
            assert_eq!(
                (after.send_wrs, after.recv_wrs, after.post_errors),
                (before.send_wrs, before.recv_wrs, before.post_errors),
                "nothing posted"
            );
            assert_eq!(refusal_lines(), 1, "one line for a burst of 3 refusals");
            // Recovers: two requests end, a whole transfer fits, and then one more recv.
            for (id, sy) in syncs.drain(..2) {
                assert_eq!(s.cancel(sy, id), (0, null_mut()));
            }
            s.transfer(&src, &dst, &remote, len, SK, CK, 59);
            assert!(
                lock(&LOG)
                    .iter()
                    .any(|(_, m)| m.contains("accepted again after 3 refused")),
                "the end of the burst is logged with its size"
            );
            let (r, sy) = s.recv(&b, 4096, 0x20_0001);
            assert_eq!(r, 0);
            syncs.push((0x20_0001, sy));
        }
        Which::Legacy => {
            // D12: unbounded.
            assert_eq!((r, r3), (0, 0));
            syncs.push((0x20_0000, sy));
            syncs.push((0x20_0002, sy3));
            assert_eq!((r2, st), (0, 0));
            assert_eq!(s.cancel(ss, SK).0, 0);
            assert_eq!(refusal_lines(), 0);
        }
    }
    for (id, sy) in syncs {
        assert_eq!(s.cancel(sy, id).0, 0);
    }
    // The syncs of the finished gets are still valid: waited (success) or cancelled (0).
    for (i, (ck, rs)) in kept.into_iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!(s.wait(rs, LONG_MS), (0, 0), "kept sync {i}");
        } else {
            assert_eq!(s.cancel(rs, ck), (0, null_mut()), "kept sync {i}");
        }
    }
}

/// One row of the `os_transport_wake_up_task` return table (docs/abi.md): hands `cr` over and
/// checks the return against `(rust, legacy)`.
fn wake_row(s: &Sess, which: Which, row: &str, mut cr: u::urma_cr_t, rust: i32, legacy: i32) {
    let want = match which {
        Which::Rust => rust,
        Which::Legacy => legacy,
    };
    assert_eq!(s.wake(&mut cr), want, "{row}");
}

/// A send-side CR with `status`.
fn send_cr_status(user_ctx: u64, status: u32) -> u::urma_cr_t {
    u::urma_cr_t {
        status,
        ..send_cr(user_ctx)
    }
}

/// Every row of the `os_transport_wake_up_task` return table in docs/abi.md, on both libraries:
/// the CRs a consumer polling one shared JFC hands over (pipeline WRITE / SEND_IMM completions of
/// live, finished, cancelled and never-registered requests, the completions of its own plain work
/// with arbitrary `user_ctx`, error statuses, flush). Where the two differ, the ledger says why
/// (D3, D4, D16).
fn wake_up_task_return_table(which: Which) {
    let _g = serial();
    let Some(s) = Sess::std(which) else { return };
    let len = 2 * CHUNK + 10;
    let (src, dst, remote) = buffers(len as usize, 83);
    // The user_ctx of plain work whose context is a pointer, built with exactly the bits each
    // row is about, whatever address this platform's heap has: a pointer of a 48-bit address
    // space (request-id field above 40 bits; x86_64, most aarch64 hosts) and one below 2^40
    // (a 39-bit address space, or the guest heap of qemu user emulation); chunk bits clear.
    let ptr_above_40 = 0x561e_33f7_42a0u64;
    let ptr_below_40 = 0x55_0002_12a0u64;
    assert_eq!(UserData::decode(ptr_above_40).request_id >> 40, 0x56);
    assert_eq!(UserData::decode(ptr_below_40).request_id >> 40, 0);

    // A live send (its WRITE 0 completion held) and its live recv.
    s.sp().set_hold(true);
    let (r, rs) = s.recv(&dst, len, CK);
    assert_eq!(r, 0);
    let (r, ss, _) = s.send(&src, &remote, len, SK, CK);
    assert_eq!(r, 0);
    assert!(s.sp().wait_seen(1, LONG));
    let mut w0 = s.sp().take_held();
    assert_eq!(w0.len(), 1);
    let write0 = w0[0];
    assert_eq!(write0.user_ctx, ud(SK, false, 0));
    wake_row(
        &s,
        which,
        "SEND_IMM completion (chunk id 7) of a live send",
        send_cr(ud(SK, false, 7)),
        0,
        0,
    );
    // Legacy queues it to the recv's worker, which finds no task with that key and drops it.
    wake_row(
        &s,
        which,
        "own work whose user_ctx names a live recv (D16)",
        send_cr(ud(CK, false, 6)),
        -1,
        0,
    );
    wake_row(&s, which, "pipeline WRITE of a live send", write0, 0, 0);
    s.sp().set_hold(false);
    s.sp().release_held();
    assert_eq!(s.wait(ss, LONG_MS), (0, 0));
    assert!(until(LONG, || notes().len() == 3));
    // The last callback has run; its task is accounted (and the request finished) once the
    // worker is back to sleep.
    assert!(compat_tests::harness::ctx::wait_workers_idle(LONG));

    // Finished: the send was waited for, the recv's sync is not collected yet.
    wake_row(
        &s,
        which,
        "pipeline WRITE of a finished send",
        write0,
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "SEND_IMM completion of a finished send",
        send_cr(ud(SK, true, 7)),
        0,
        0,
    );
    wake_row(
        &s,
        which,
        "receive completion of a finished recv, sync uncollected (D4: kept)",
        recv_cr(ud(enc(CK), true, 2), 0),
        0,
        -1,
    );
    assert_eq!(
        s.wait(rs, 0),
        (0, 0),
        "the uncollected sync of the finished recv is still valid"
    );

    // A cancelled send (its WRITE 0 completion arrives after the cancel). First every send-side
    // CR of the transfer above (3 WRITE, 3 SEND_IMM) has gone by.
    assert!(s.sp().wait_seen(6, LONG));
    s.sp().set_hold(true);
    let (r, ss, _) = s.send(&src, &remote, len, SK + 1, CK + 1);
    assert_eq!(r, 0);
    assert!(s.sp().wait_seen(7, LONG));
    w0 = s.sp().take_held();
    assert_eq!(w0.len(), 1);
    assert_eq!(w0[0].user_ctx, ud(SK + 1, false, 0));
    assert_eq!(s.cancel(ss, SK + 1), (0, null_mut()));
    wake_row(
        &s,
        which,
        "pipeline WRITE of a cancelled send",
        w0[0],
        -1,
        -1,
    );
    s.sp().set_hold(false);
    // A cancelled recv.
    let (r, rs) = s.recv(&dst, len, CK + 2);
    assert_eq!(r, 0);
    assert_eq!(s.cancel(rs, CK + 2), (0, null_mut()));
    wake_row(
        &s,
        which,
        "receive completion of a cancelled recv",
        recv_cr(ud(enc(CK + 2), false, 0), 0),
        -1,
        -1,
    );

    // Never registered.
    wake_row(
        &s,
        which,
        "WRITE-shaped, never-registered id",
        send_cr(ud(0x4242, false, 0)),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "SEND_IMM-shaped, never-registered id",
        send_cr(ud(0x4242, true, 7)),
        0,
        0,
    );
    wake_row(
        &s,
        which,
        "receive completion, never-registered id (D4: kept)",
        recv_cr(ud(enc(0x4343), false, 0), 0),
        0,
        -1,
    );

    // The application's own plain WRITE / READ / SEND completions (send side; the opcode of a
    // send-side CR carries no meaning).
    wake_row(
        &s,
        which,
        "own work, user_ctx = an unused id",
        send_cr(0x77_0001),
        -1,
        -1,
    );
    wake_row(&s, which, "own work, user_ctx = 0", send_cr(0), -1, -1);
    wake_row(
        &s,
        which,
        "own work, user_ctx = a pointer above 2^40",
        send_cr(ptr_above_40),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "own work, user_ctx = a pointer below 2^40",
        send_cr(ptr_below_40),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "own work, request id above 40 bits, chunk id 7 (D16)",
        send_cr(ud(ptr_above_40, false, 7)),
        -1,
        0,
    );
    // The same top three bits over an id of at most 40 bits: the shape of a SEND_IMM completion,
    // which neither library can tell from its own.
    wake_row(
        &s,
        which,
        "own work, request id below 2^40, chunk id 7 (SEND_IMM shape)",
        send_cr(ud(ptr_below_40, false, 7)),
        0,
        0,
    );
    wake_row(
        &s,
        which,
        "own work, all bits set (D16)",
        send_cr(u64::MAX),
        -1,
        0,
    );
    // Own SEND / WRITE_WITH_IMM arriving on the receive side.
    let mut own = recv_cr(0x77_0002, 0);
    own.opcode = u::URMA_CR_OPC_SEND;
    wake_row(&s, which, "own SEND received", own, -1, -1);
    own.opcode = u::URMA_CR_OPC_WRITE_WITH_IMM;
    wake_row(&s, which, "own WRITE_WITH_IMM received", own, -1, -1);

    // Error statuses (no live request involved: a live one is failed, D3, see
    // error_status_cr_send / error_status_cr_recv; both return 0 there).
    let err = u::URMA_CR_LOC_LEN_ERR;
    wake_row(
        &s,
        which,
        "error, WRITE-shaped unknown id",
        send_cr_status(ud(0x4242, false, 1), err),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "error, SEND_IMM-shaped",
        send_cr_status(ud(0x4242, true, 7), err),
        0,
        0,
    );
    wake_row(
        &s,
        which,
        "error, own work (pointer above 2^40)",
        send_cr_status(ptr_above_40, err),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "error, own work, top bits set (D16)",
        send_cr_status(u64::MAX, err),
        -1,
        0,
    );
    wake_row(
        &s,
        which,
        "error, receive side, unknown id",
        recv_cr(ud(enc(0x4444), false, 0), err),
        -1,
        -1,
    );
    // Flush: the per-WR flush error is an error status; the provider's flush/suspend markers
    // carry no user_ctx of ours (D3).
    wake_row(
        &s,
        which,
        "WR_FLUSH_ERR, unknown id",
        send_cr_status(ud(0x4242, false, 0), u::URMA_CR_WR_FLUSH_ERR),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "WR_FLUSH_ERR_DONE",
        send_cr_status(0, u::URMA_CR_WR_FLUSH_ERR_DONE),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "WR_SUSPEND_DONE",
        send_cr_status(0, u::URMA_CR_WR_SUSPEND_DONE),
        -1,
        -1,
    );
    wake_row(
        &s,
        which,
        "WR_FLUSH_ERR_DONE, SEND_IMM-shaped user_ctx (D3)",
        send_cr_status(ud(0x4242, true, 7), u::URMA_CR_WR_FLUSH_ERR_DONE),
        -1,
        0,
    );
    // NULL arguments.
    // SAFETY: NULL CR / NULL handle are checked errors on both libraries.
    let (a, b) = unsafe {
        let mut cr = send_cr(0);
        (
            (s.lib.os_transport_wake_up_task)(s.h(), null_mut()),
            (s.lib.os_transport_wake_up_task)(null_mut(), (&mut cr as *mut u::urma_cr_t).cast()),
        )
    };
    assert_eq!((a, b), (-1, -1), "NULL cr, NULL handle");
}
