//! The consumer's fault suite, re-stated here (docs/inject.md, "The consumer's fault suite"): a
//! program in the shape of the datasystem's `pipeline_h2d_fault_test` runs its 13 scenarios
//! against the inject flavour of both libraries. Per library: load it by path, look up the four
//! inject functions (injection is available only if all four resolve), and run each scenario as
//! the consumer does: clear all, arm the points (those the consumer arms on the remote worker
//! through `mlcachedirect-inject`, the others through the library's functions), run one
//! "MGetH2D" (a receive registered by the local side, the remote side's send, over the loopback,
//! falling back to a plain copy when the receive cannot be registered), verify with the tool
//! that the point fired, and judge the result: delay, keys failed, or success.
//!
//! Sleeps use the consumer's `--inject_delay_ms` override (here [`DELAY_MS`]) to keep the suite
//! short; the judgement is the consumer's.
use compat_tests::*;
use os_transport_inject::testing::{exclusive, SHM_PATH};
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every sleep of a scenario (the consumer's `--inject_delay_ms`).
const DELAY_MS: u32 = 200;
/// The consumer's RPC deadline for one MGetH2D: a wait still running then is DEADLINE_EXCEEDED.
const DEADLINE_MS: i64 = 10_000;
/// A two-chunk transfer (the C reference refuses sends of one chunk).
const LEN: u32 = DEFAULT_CHUNK_SIZE + 4096;
const URMA_FAIL: i32 = 0x1000;

type SetSleep = unsafe extern "C" fn(*const c_char, u32) -> c_int;
type SetError = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type Clear = unsafe extern "C" fn(*const c_char);
type ClearAll = unsafe extern "C" fn();

/// The four functions the consumer looks up.
struct Inject {
    set_sleep: SetSleep,
    set_return_error: SetError,
    clear: Clear,
    clear_all: ClearAll,
}

fn sym(lib: &OsTransportLib, name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).unwrap();
    // SAFETY: a live dlopen handle and a C string.
    let p = unsafe { libc::dlsym(lib.raw_handle(), c.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// Starts `lib` on a new registry object: its `os_transport_inject_cleanup` forgets the mapping
/// an earlier test of this process left it (and unlinks the name), so it attaches afresh.
fn fresh_registry(lib: &OsTransportLib) {
    let p = sym(lib, "os_transport_inject_cleanup").expect("the inject flavour");
    // SAFETY: `void os_transport_inject_cleanup(void)`.
    unsafe { fn_from_ptr::<ClearAll>(p)() };
}

fn lookup(lib: &OsTransportLib) -> Option<Inject> {
    let sym = |name: &str| sym(lib, name);
    // SAFETY: each symbol has the prototype of include/os_transport_inject.h named by its type.
    unsafe {
        Some(Inject {
            set_sleep: fn_from_ptr(sym("os_transport_inject_set_sleep")?),
            set_return_error: fn_from_ptr(sym("os_transport_inject_set_return_error")?),
            clear: fn_from_ptr(sym("os_transport_inject_clear")?),
            clear_all: fn_from_ptr(sym("os_transport_inject_clear_all")?),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Success,
    Delay,
    KeysFailed,
}

#[derive(Clone, Copy)]
enum Act {
    Sleep(u32),
    Error(i32),
}

/// One point armed by a scenario; `remote`: armed through the tool, as the consumer arms the
/// remote worker in cluster mode.
struct Arm {
    point: &'static str,
    act: Act,
    remote: bool,
}

struct Scenario {
    id: u32,
    arms: Vec<Arm>,
    expect: Expect,
    verify: Option<&'static str>,
}

fn arm(point: &'static str, act: Act, remote: bool) -> Arm {
    Arm { point, act, remote }
}

/// The consumer's 13 scenarios (ids 0-9, 20-22), every sleep at [`DELAY_MS`].
fn scenarios() -> Vec<Scenario> {
    use Act::*;
    use Expect::*;
    let d = DELAY_MS;
    let sc = |id, arms, expect, verify| Scenario {
        id,
        arms,
        expect,
        verify,
    };
    let p = |s: &'static str| s;
    vec![
        sc(0, vec![], Success, None),
        sc(
            1,
            vec![arm("os_transport.recv.begin", Sleep(d), false)],
            Delay,
            Some(p("os_transport.recv.begin")),
        ),
        sc(
            2,
            vec![arm("os_transport.recv.begin", Error(1), false)],
            Success,
            Some("os_transport.recv.begin"),
        ),
        sc(
            3,
            vec![arm("os_transport.send.begin", Sleep(d), true)],
            Delay,
            Some("os_transport.send.begin"),
        ),
        sc(
            4,
            vec![arm("os_transport.send.begin", Error(1), true)],
            KeysFailed,
            Some("os_transport.send.begin"),
        ),
        sc(
            5,
            vec![arm("os_transport.urma.write", Sleep(d), true)],
            Delay,
            Some("os_transport.urma.write"),
        ),
        sc(
            6,
            vec![arm("os_transport.urma.write", Error(URMA_FAIL), true)],
            KeysFailed,
            Some("os_transport.urma.write"),
        ),
        sc(
            7,
            vec![arm("os_transport.notify_callback", Sleep(d), false)],
            Delay,
            Some("os_transport.notify_callback"),
        ),
        sc(
            8,
            vec![arm("os_transport.notify_callback", Error(999), false)],
            KeysFailed,
            Some("os_transport.notify_callback"),
        ),
        sc(
            9,
            vec![
                arm("os_transport.recv.begin", Sleep(d), false),
                arm("os_transport.notify_callback", Sleep(d), false),
                arm("os_transport.send.begin", Sleep(d), true),
                arm("os_transport.urma.write", Sleep(d), true),
            ],
            Delay,
            Some("os_transport.recv.begin"),
        ),
        sc(
            20,
            vec![arm("os_transport.urma.recv", Error(URMA_FAIL), false)],
            Success,
            Some("os_transport.urma.recv"),
        ),
        sc(
            21,
            vec![arm("os_transport.send.first_chunk", Error(URMA_FAIL), true)],
            KeysFailed,
            Some("os_transport.send.first_chunk"),
        ),
        sc(
            22,
            vec![arm("os_transport.task_group.alloc", Error(1), false)],
            Success,
            Some("os_transport.task_group.alloc"),
        ),
    ]
}

/// What one MGetH2D returned, as the consumer sees it.
#[derive(Debug)]
struct Outcome {
    ok: bool,
    deadline_exceeded: bool,
    failed_keys: usize,
    latency: Duration,
}

impl Outcome {
    /// The consumer's checks.
    fn judge(&self, expect: Expect, delay: Duration) -> bool {
        match expect {
            Expect::Success => self.ok && self.failed_keys == 0,
            Expect::Delay => {
                self.deadline_exceeded
                    || (self.ok && self.failed_keys == 0 && self.latency >= delay)
            }
            Expect::KeysFailed => !self.ok || self.failed_keys > 0,
        }
    }
}

unsafe extern "C" fn h2d_done(_ud: *mut c_void) -> c_int {
    0
}

/// One library instance over a loopback endpoint pair, its completions fed back by two pollers:
/// the local worker (receive) and the remote one (send) of the consumer, in one process.
struct Worker {
    lib: OsTransportLib,
    h: Arc<AtomicUsize>,
    pair: EndpointPair,
    pollers: Vec<Poller>,
    src: Buffer,
    dst: Buffer,
    remote: ImportedSeg,
    next_key: u64,
}

impl Worker {
    fn start(lib: OsTransportLib) -> Worker {
        let lb = Loopback::get();
        reset();
        let pair = EndpointPair::new(lb, &EndpointCfg::default());
        let mut cfg = os_transport_cfg_t {
            worker_thread_num: 2,
            recv_queue_capacity: 16,
            ..Default::default()
        };
        let mut h = null_mut();
        // SAFETY: valid pointers.
        let r = unsafe { (lib.os_transport_init)(null_mut(), &mut cfg, &mut h) };
        assert_eq!(r, 0);
        let h = Arc::new(AtomicUsize::new(h as usize));
        let pollers = [pair.sender.jfc_handle(), pair.receiver.jfc_handle()]
            .iter()
            .map(|cq| {
                let (wake, h) = (lib.os_transport_wake_up_task, h.clone());
                Poller::start(cq, PollMode::Poll, move |cr| {
                    // SAFETY: a polled CR handed to the library's live instance.
                    unsafe {
                        wake(
                            h.load(Ordering::SeqCst) as *mut c_void,
                            (cr as *mut _) as *mut c_void,
                        )
                    };
                })
            })
            .collect();
        let mut src = Buffer::new(lb, LEN as usize);
        src.fill_pattern(7);
        let dst = Buffer::new(lb, LEN as usize);
        let remote = dst.import(lb);
        Worker {
            lib,
            h,
            pair,
            pollers,
            src,
            dst,
            remote,
            next_key: 0x100,
        }
    }

    fn h(&self) -> *mut c_void {
        self.h.load(Ordering::SeqCst) as *mut c_void
    }

    fn wait(&self, sync: *mut task_sync_t) -> (u32, i32) {
        let mut st = -7;
        // SAFETY: a sync of this instance, valid out-pointer.
        let r =
            unsafe { (self.lib.wait_and_free_sync_timeout)(self.h(), sync, DEADLINE_MS, &mut st) };
        (r, st)
    }

    /// One MGetH2D of one key: the local side registers the receive (or falls back to a plain
    /// copy when it cannot), the remote side sends, the local side waits for its receive.
    /// The local side's `os_transport_recv` of [`LEN`] bytes into `dst` under `ck`.
    fn recv(&self, ck: u64) -> (u32, *mut task_sync_t) {
        let mut host = self.src.info();
        let mut dev = self.pair.device_info(self.dst.as_ptr().cast());
        let mut rs = null_mut();
        // SAFETY: live fixture objects and valid out-pointers.
        let r = unsafe {
            (self.lib.os_transport_recv)(
                self.h(),
                &mut host,
                &mut dev,
                LEN,
                ck,
                &mut rs,
                Some(h2d_done),
            )
        };
        (r, rs)
    }

    /// The remote side's `os_transport_send` of `src` to `dst`: result, sync, status.
    fn send(&self, sk: u64, ck: u64) -> (u32, *mut task_sync_t, i32) {
        let (mut ji, mut s, mut d) = (self.pair.jetty_info(), self.src.info(), self.remote.info());
        let (mut ss, mut st) = (null_mut(), -7);
        // SAFETY: live fixture objects and valid out-pointers.
        let r = unsafe {
            (self.lib.os_transport_send)(
                self.h(),
                &mut ji,
                &mut s,
                &mut d,
                LEN,
                sk,
                ck,
                &mut ss,
                &mut st,
            )
        };
        (r, ss, st)
    }

    /// Gives the receive of `ck` up (its sync, if any, released).
    fn cancel(&self, rs: *mut task_sync_t, ck: u64) {
        let mut rs = rs;
        // SAFETY: NULL or the receive's sync of this instance.
        unsafe { (self.lib.os_transport_cancel_tasks)(self.h(), &mut rs, ck) };
    }

    fn keys(&mut self) -> (u64, u64) {
        self.next_key += 2;
        (self.next_key, self.next_key + 1)
    }

    /// One MGetH2D of one key: the local side registers the receive (or falls back to a plain
    /// copy when it cannot), the remote side sends, the local side waits for its receive.
    fn mget_h2d(&mut self) -> Outcome {
        self.dst.fill(0);
        let (ck, sk) = self.keys();
        let t = Instant::now();
        let (r, rs) = self.recv(ck);
        if r != 0 {
            // The consumer's fallback path: the data moves without URMA.
            assert!(rs.is_null(), "a failed recv returns no sync");
            self.dst.as_mut_slice().copy_from_slice(self.src.as_slice());
            return self.outcome(true, false, t);
        }
        let (r, ss, _) = self.send(sk, ck);
        if !ss.is_null() {
            let _ = self.wait(ss);
        }
        if r != 0 {
            // The remote worker reports the failure; the local side gives its receive up.
            self.cancel(rs, ck);
            return self.outcome(false, false, t);
        }
        let (r, _) = self.wait(rs);
        self.outcome(r == 0, r == 1, t)
    }

    fn outcome(&self, ok: bool, deadline_exceeded: bool, t: Instant) -> Outcome {
        let latency = t.elapsed();
        let intact = self.dst.verify_pattern(7, 0..LEN as usize).is_ok();
        Outcome {
            ok: ok && !deadline_exceeded,
            deadline_exceeded,
            failed_keys: usize::from(ok && !intact),
            latency,
        }
    }

    /// Stops the pollers, destroys the instance, and removes the registry object through the
    /// library (`os_transport_inject_cleanup`, once no thread of it can pass a point), so that no
    /// later run, of another user perhaps, meets this one's object.
    fn stop(mut self) {
        for p in self.pollers.drain(..) {
            p.stop();
        }
        // SAFETY: the live handle.
        assert_eq!(unsafe { (self.lib.os_transport_destroy)(self.h()) }, 0);
        fresh_registry(&self.lib);
    }
}

fn tool(build: &InjectBuild, args: &[&str]) -> bool {
    // Through the target runner when there is one (the aarch64 build under qemu).
    let mut cmd = compat_tests::target::command(&build.tool);
    cmd.args(args);
    ost_supervise::spawn(
        "mlcachedirect-inject",
        &mut cmd,
        ost_supervise::Capture::Pipes,
    )
    .expect("start mlcachedirect-inject")
    .finish(Duration::from_secs(30))
    .success()
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Runs the 13 scenarios against `path`; returns the failures.
fn fault_suite(path: &std::path::Path) -> Vec<String> {
    let build = inject_build();
    let lib = OsTransportLib::load(path).expect("load the inject flavour");
    fresh_registry(&lib);
    let inj = lookup(&lib).expect("the four inject functions resolve");
    let mut w = Worker::start(lib);
    let mut failures = Vec::new();
    for sc in scenarios() {
        // SAFETY: the library's clear_all takes no arguments.
        unsafe { (inj.clear_all)() };
        assert!(tool(build, &["clearall"]));
        for a in &sc.arms {
            let ok = match (a.remote, a.act) {
                (true, Act::Sleep(ms)) => tool(build, &["set", a.point, "sleep", &ms.to_string()]),
                (true, Act::Error(v)) => tool(build, &["set", a.point, "error", &v.to_string()]),
                // SAFETY: a C string for the library's setters.
                (false, Act::Sleep(ms)) => unsafe {
                    (inj.set_sleep)(cstr(a.point).as_ptr(), ms) == 0
                },
                // SAFETY: as above.
                (false, Act::Error(v)) => unsafe {
                    (inj.set_return_error)(cstr(a.point).as_ptr(), v) == 0
                },
            };
            assert!(ok, "scenario {}: arming {} failed", sc.id, a.point);
        }
        let out = w.mget_h2d();
        if let Some(p) = sc.verify {
            let secs = out.latency.as_secs_f64().ceil() as u64 + 1;
            if !tool(build, &["verify", p, &secs.to_string()]) {
                failures.push(format!("scenario {}: {p} NOT_TRIGGERED ({out:?})", sc.id));
                continue;
            }
        }
        if !out.judge(sc.expect, Duration::from_millis(u64::from(DELAY_MS))) {
            failures.push(format!(
                "scenario {}: expected {:?}, got {out:?}",
                sc.id, sc.expect
            ));
        }
        for a in &sc.arms {
            // SAFETY: a C string.
            unsafe { (inj.clear)(cstr(a.point).as_ptr()) };
        }
    }
    // SAFETY: as above.
    unsafe { (inj.clear_all)() };
    w.stop();
    failures
}

fn run(path: &std::path::Path) {
    let _x = exclusive();
    let failures = fault_suite(path);
    assert!(
        failures.is_empty(),
        "{}:\n{}",
        path.display(),
        failures.join("\n")
    );
}

#[test]
fn thirteen_scenarios_rust_inject_flavour() {
    run(&inject_build().rust);
}

#[test]
fn thirteen_scenarios_legacy_inject_flavour() {
    run(&inject_build().legacy);
}

/// A registry object laid out by hand as docs/inject.md gives it (as the original's tool writes
/// it) arms both flavours: an error at `urma.write` fails the transfer, and the firing is in the
/// ring at the spec's offsets.
fn hand_written_registry(path: &std::path::Path) {
    let _x = exclusive();
    let lib = OsTransportLib::load(path).expect("load the inject flavour");
    fresh_registry(&lib);
    let mut b = vec![0u8; 13272];
    b[0..4].copy_from_slice(&0x2025_0413u32.to_le_bytes());
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    b[12..16].copy_from_slice(&1u32.to_le_bytes());
    let name = b"os_transport.urma.write";
    b[20..20 + name.len()].copy_from_slice(name);
    b[84..88].copy_from_slice(&1u32.to_le_bytes()); // action RETURN_ERROR
    b[88..92].copy_from_slice(&(URMA_FAIL as u32).to_le_bytes());
    b[224..228].copy_from_slice(&1u32.to_le_bytes()); // enabled
    std::fs::write(SHM_PATH, &b).unwrap();
    let mut w = Worker::start(lib);
    let out = w.mget_h2d();
    assert!(
        out.judge(Expect::KeysFailed, Duration::ZERO),
        "{}: {out:?}",
        path.display()
    );
    let after = std::fs::read(SHM_PATH).unwrap();
    assert_eq!(after.len(), 13272);
    assert!(
        u32::from_le_bytes(after[8084..8088].try_into().unwrap()) >= 1,
        "ring_tail moved"
    );
    assert_eq!(
        &after[8160..8160 + name.len() + 1],
        b"os_transport.urma.write\0"
    );
    assert_eq!(after[8152 + 72], 1, "record: RETURN_ERROR");
    w.stop();
    assert!(
        !std::path::Path::new(SHM_PATH).exists(),
        "removed by the library"
    );
}

#[test]
fn hand_written_registry_arms_the_rust_flavour() {
    hand_written_registry(&inject_build().rust);
}

#[test]
fn hand_written_registry_arms_the_legacy_flavour() {
    hand_written_registry(&inject_build().legacy);
}

/// An injected error 0 fails the step in the Rust flavour (ledger D18), where the original
/// reports success while doing nothing (send/recv: 0 with a NULL handle; chunk 0's WRITE: the
/// wait hangs; notify_callback: the chunk counts as done) or crashes (task_group.alloc). Not run
/// on the C reference, which behaves as the original.
#[test]
fn injected_zero_fails_the_step_rust_flavour() {
    let _x = exclusive();
    let lib = OsTransportLib::load(&inject_build().rust).expect("load the inject flavour");
    fresh_registry(&lib);
    let inj = lookup(&lib).expect("the four inject functions resolve");
    let mut w = Worker::start(lib);
    let arm0 = |p: &str| {
        // SAFETY: the library's clear_all and set_return_error with a C string.
        unsafe {
            (inj.clear_all)();
            assert_eq!((inj.set_return_error)(cstr(p).as_ptr(), 0), 0);
        }
    };
    const ERR: u32 = OST_ERR;
    for p in ["os_transport.recv.begin", "os_transport.task_group.alloc"] {
        arm0(p);
        let (ck, _) = w.keys();
        let (r, rs) = w.recv(ck);
        assert_eq!((r, rs.is_null()), (ERR, true), "{p}");
    }
    for p in [
        "os_transport.send.begin",
        "os_transport.send.first_chunk",
        "os_transport.urma.write",
    ] {
        arm0(p);
        let (ck, sk) = w.keys();
        let (r, rs) = w.recv(ck);
        assert_eq!(r, 0, "{p}: recv");
        let (r, ss, st) = w.send(sk, ck);
        assert_eq!(r, ERR, "{p}: send");
        if p == "os_transport.send.begin" {
            assert!(ss.is_null(), "{p}: no handle");
        } else {
            assert_eq!(st, URMA_FAIL, "{p}: status");
            assert_eq!(
                w.wait(ss),
                (ERR, URMA_FAIL),
                "{p}: the wait fails at once (D8)"
            );
        }
        w.cancel(rs, ck);
    }
    arm0("os_transport.notify_callback");
    let out = w.mget_h2d();
    assert!(
        !out.ok && !out.deadline_exceeded,
        "notify_callback: {out:?}"
    );
    // SAFETY: as above.
    unsafe { (inj.clear_all)() };
    assert!(
        w.mget_h2d().judge(Expect::Success, Duration::ZERO),
        "works once cleared"
    );
    w.stop();
}

/// The default libraries do not have the four functions: the consumer's injection is unavailable.
#[test]
fn default_builds_have_no_injection() {
    for p in [rust_lib_path(), legacy_lib_path()] {
        let lib = OsTransportLib::load(&p).expect("load the default library");
        assert!(lookup(&lib).is_none(), "{}", p.display());
    }
}
