//! The scenario context: one run of one scenario against one library (or, for the interop
//! matrix, a sender library and a receiver library), over fresh loopback endpoints, recording
//! every step in a [`Recorder`].
//!
//! Every API call is made from the scenario thread, in program order, and recorded with its
//! arguments given symbolically (`H` for the handle, `S<n>` for the n-th sync handed out,
//! `src+off`, `dst+off`, `NULL`, ...), its return value and its out-parameters. CRs reach the
//! library through two application-style pollers (poll mode, or event mode through a JFCE):
//! send-side CRs are handed to `os_transport_wake_up_task` as they come; receive-side CRs are
//! either handed over as they come (`Delivery::Pass`) or held and then delivered by the
//! scenario in a chosen order, one at a time, waiting for the resulting `notify_callback`
//! (`Delivery::Held`), which makes the trace deterministic.

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use urma_sys as u;

use super::aspect::{note_line, Aspect};
use super::backend;
use super::record::{self, ud, Recorder};
use crate::fixture::{
    Buffer, CrExt, EndpointCfg, EndpointPair, ImportedSeg, Loopback, PairArgs, PollMode, Poller,
    RecvKind, SegArgs, SendPtr,
};
use crate::lib_under_test::{
    os_transport_cfg_t, ost_buffer_info_t, ost_device_info_t, task_sync_t, urma_jetty_info_t,
    OsTransportLib, DEFAULT_CHUNK_SIZE,
};
use crate::oracle::{dec, UserData};

/// A loaded library under test with its log-callback slot.
pub struct Lib {
    pub lib: OsTransportLib,
    /// 0 = reference C build, 1 = Rust build.
    pub slot: u32,
    /// "legacy" or "rust".
    pub name: &'static str,
}

impl Lib {
    /// Loads `path` and registers the recording log callback (threshold DEBUG) once.
    pub fn load(
        path: &std::path::Path,
        slot: u32,
        name: &'static str,
    ) -> Result<&'static Lib, String> {
        let lib = OsTransportLib::load(path)?;
        // SAFETY: valid function pointer of the loaded library; the callback is a static fn.
        let r = unsafe { (lib.os_transport_log_reg)(-1, record::log_callback(slot)) };
        if r != 0 {
            return Err(format!(
                "{}: os_transport_log_reg returned {r}",
                path.display()
            ));
        }
        Ok(Box::leak(Box::new(Lib { lib, slot, name })))
    }
}

/// `(uint32_t)-1` prints as `ERR`.
pub fn r32(v: u32) -> String {
    if v == u32::MAX {
        "ERR".into()
    } else {
        v.to_string()
    }
}

/// Stream key of a CR: `req:0x<rid>` (decoded immediate for receive-side CRs, the user_ctx
/// request id for send-side ones).
pub fn cr_key(cr: &u::urma_cr_t) -> String {
    if cr.is_recv() {
        format!("req:0x{:x}", dec(cr.imm() & ((1 << 60) - 1)))
    } else {
        format!("req:0x{:x}", cr.user_ctx & ((1 << 60) - 1))
    }
}

/// One-line description of a CR handed to the library.
pub fn cr_line(cr: &u::urma_cr_t) -> String {
    if cr.is_recv() {
        let imm = cr.imm();
        let d = (imm & !((1u64 << 60) - 1)) | dec(imm & ((1 << 60) - 1));
        format!(
            "recv opc={} status={} imm={}",
            { cr.opcode },
            { cr.status },
            ud(d)
        )
    } else {
        format!(
            "send opc={} status={} uctx={}",
            { cr.opcode },
            { cr.status },
            ud(cr.user_ctx)
        )
    }
}

/// How receive-side CRs reach the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The poller hands each CR over at once (as an application would).
    Pass,
    /// The poller holds them; the scenario delivers them in this order, one at a time.
    Held(Order),
}

/// Delivery order of held receive-side CRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Arrival order.
    Fifo,
    /// Reverse arrival order.
    Reverse,
    /// Deterministic shuffle from a seed.
    Shuffle(u64),
}

impl Order {
    /// Applies the order to `v`.
    pub fn apply<T>(&self, v: &mut [T]) {
        match *self {
            Order::Fifo => {}
            Order::Reverse => v.reverse(),
            Order::Shuffle(seed) => {
                let mut s = seed | 1;
                for i in (1..v.len()).rev() {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    v.swap(i, (s % (i as u64 + 1)) as usize);
                }
            }
        }
    }

    /// Short name.
    pub fn name(&self) -> String {
        match self {
            Order::Fifo => "fifo".into(),
            Order::Reverse => "reverse".into(),
            Order::Shuffle(s) => format!("shuffle({s})"),
        }
    }
}

/// Endpoint and library set-up of a run.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub recv_kind: RecvKind,
    pub event_mode: bool,
    /// Bytes of each of the source and destination buffers.
    pub buf_len: usize,
    /// Loopback no-copy mode (no payload moves; data is not checked).
    pub nocopy: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            recv_kind: RecvKind::Jetty,
            event_mode: false,
            buf_len: 4 << 20,
            nocopy: false,
        }
    }
}

/// Which library a call goes to (the same one outside the interop matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Send,
    Recv,
}

/// How `os_transport_send` gets its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendVia {
    /// `jfs` set (and the jetty as fallback).
    Jfs,
    /// `jfs` NULL, `jetty` set.
    Jetty,
    /// Both NULL.
    None,
}

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

/// Longest wait of the send poller for the receive side to catch up (Pass mode).
const PACE_MAX: Duration = Duration::from_millis(100);

const PATTERN_LEN: usize = 15 * 1024 * 1024 + 7;

fn pattern() -> &'static [u8] {
    static P: OnceLock<Vec<u8>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v = vec![0u8; PATTERN_LEN];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for b in v.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = (s >> 24) as u8;
        }
        v
    })
}

/// The scenario context.
pub struct Ctx {
    pub rec: Arc<Recorder>,
    pub slib: &'static Lib,
    pub rlib: &'static Lib,
    pub hs: *mut c_void,
    pub hr: *mut c_void,
    pub setup: Setup,
    pub pair: EndpointPair,
    pub src: Buffer,
    pub dst: Buffer,
    pub rdst: ImportedSeg,
    send_poller: Option<Poller>,
    recv_poller: Option<Poller>,
    syncs: Vec<(String, *mut task_sync_t)>,
    nsync: u32,
    finished: bool,
    /// Pass mode: the send poller waits for the receive poller (below). Off when the receiver
    /// is another process (`compat --split`): its CRs never reach this process's pollers.
    pub pace: bool,
}

impl Ctx {
    /// Resets the loopback, starts the trace capture and creates endpoints and buffers.
    /// `slib` sends, `rlib` receives (the same library outside the interop matrix).
    pub fn new(slib: &'static Lib, rlib: &'static Lib, setup: Setup) -> Ctx {
        let lb = Loopback::get();
        backend::get().start();
        let rec = Recorder::new();
        record::set_current(Some(rec.clone()));
        let pair = EndpointPair::new(
            lb,
            &EndpointCfg {
                recv: setup.recv_kind,
                event_mode: setup.event_mode,
                ..Default::default()
            },
        );
        let mut src = Buffer::new(lb, setup.buf_len + 4096);
        let dst = Buffer::new(lb, setup.buf_len + 4096);
        let rdst = dst.import(lb);
        // A backend without a no-copy mode (hardware) moves and checks the payload instead.
        let mut setup = setup;
        setup.nocopy = setup.nocopy && backend::get().set_nocopy(true);
        if !setup.nocopy {
            let p = pattern();
            for (i, c) in src.as_mut_slice().chunks_mut(PATTERN_LEN).enumerate() {
                let n = c.len();
                c.copy_from_slice(&p[..n]);
                c[0] = i as u8;
            }
        }
        Ctx {
            rec,
            slib,
            rlib,
            hs: null_mut(),
            hr: null_mut(),
            setup,
            pair,
            src,
            dst,
            rdst,
            send_poller: None,
            recv_poller: None,
            syncs: Vec::new(),
            nsync: 0,
            finished: false,
            pace: true,
        }
    }

    fn single(&self) -> bool {
        std::ptr::eq(self.slib, self.rlib)
    }

    fn lib(&self, side: Side) -> &'static OsTransportLib {
        match side {
            Side::Send => &self.slib.lib,
            Side::Recv => &self.rlib.lib,
        }
    }

    /// The live handle used for `side`.
    pub fn handle(&self, side: Side) -> *mut c_void {
        match side {
            Side::Send => self.hs,
            Side::Recv => self.hr,
        }
    }

    fn hname(&self, h: *mut c_void) -> String {
        if h.is_null() {
            "NULL".into()
        } else if h == self.hs || h == self.hr {
            if self.single() {
                "H".into()
            } else if h == self.hs {
                "Hs".into()
            } else {
                "Hr".into()
            }
        } else {
            "H?".into()
        }
    }

    fn side_tag(&self, side: Side) -> &'static str {
        if self.single() {
            ""
        } else if side == Side::Send {
            "[send-lib] "
        } else {
            "[recv-lib] "
        }
    }

    /// A library configuration for this context's endpoints.
    pub fn cfg(&self, workers: u32, capacity: u32) -> os_transport_cfg_t {
        let mut c = os_transport_cfg_t::default();
        c.worker_thread_num = workers;
        c.recv_queue_capacity = capacity;
        c.urma_event_mode = self.setup.event_mode;
        c.jfc = self.pair.receiver.cq.jfc;
        c.jfce = self.pair.receiver.cq.jfce;
        c
    }

    /// `os_transport_init` for `side` (both handles when the context has one library).
    pub fn init(&mut self, side: Side, workers: u32, capacity: u32) -> u32 {
        let mut cfg = self.cfg(workers, capacity);
        let mut h: *mut c_void = std::ptr::NonNull::<c_void>::dangling().as_ptr();
        // SAFETY: valid cfg and out-pointer; the loopback context is live.
        let r =
            unsafe { (self.lib(side).os_transport_init)(Loopback::get().ctx, &mut cfg, &mut h) };
        let hn = if h.is_null() {
            "NULL".to_string()
        } else if h == std::ptr::NonNull::<c_void>::dangling().as_ptr() {
            "untouched".to_string()
        } else {
            "set".to_string()
        };
        let live = r == 0 && !h.is_null() && h != std::ptr::NonNull::<c_void>::dangling().as_ptr();
        if live {
            if self.single() {
                self.hs = h;
                self.hr = h;
            } else if side == Side::Send {
                self.hs = h;
            } else {
                self.hr = h;
            }
        }
        self.rec.api(format!(
            "{}init(ctx, {{workers={workers}, cap={capacity}, event={}}}) = {} handle={hn}",
            self.side_tag(side),
            self.setup.event_mode,
            r32(r)
        ));
        if live {
            // SAFETY: live handle; stored pointers are informational.
            let rj = unsafe { (self.lib(side).os_transport_reg_jfc)(cfg.jfce, cfg.jfc, h) };
            self.rec.api(format!(
                "{}reg_jfc(jfce, jfc, H) = {}",
                self.side_tag(side),
                r32(rj)
            ));
        }
        r
    }

    /// Raw `os_transport_init` with arbitrary pointers (bad-input cases); not kept.
    pub fn init_raw(
        &mut self,
        side: Side,
        cfg_null: bool,
        handle_null: bool,
        workers: u32,
    ) -> (u32, String) {
        let mut cfg = self.cfg(workers, 16);
        let mut h: *mut c_void = std::ptr::NonNull::<c_void>::dangling().as_ptr();
        let pc: *mut os_transport_cfg_t = if cfg_null { null_mut() } else { &mut cfg };
        let ph: *mut *mut c_void = if handle_null { null_mut() } else { &mut h };
        // SAFETY: NULL or valid pointers.
        let r = unsafe { (self.lib(side).os_transport_init)(Loopback::get().ctx, pc, ph) };
        let hn = if h.is_null() {
            "NULL"
        } else if h == std::ptr::NonNull::<c_void>::dangling().as_ptr() {
            "untouched"
        } else {
            "set"
        };
        self.rec.api(format!(
            "{}init(ctx, {}, {}) = {} handle={hn}",
            self.side_tag(side),
            if cfg_null { "NULL" } else { "cfg" },
            if handle_null { "NULL" } else { "&h" },
            r32(r)
        ));
        if r == 0
            && !handle_null
            && !h.is_null()
            && h != std::ptr::NonNull::<c_void>::dangling().as_ptr()
        {
            // Unexpected live instance: tear it down at once.
            // SAFETY: live handle just created.
            let d = unsafe { (self.lib(side).os_transport_destroy)(h) };
            self.rec.api(format!("destroy(extra) = {}", r32(d)));
        }
        (r, hn.to_string())
    }

    /// Starts the CR pollers (send side: pass-through; receive side: per `delivery`).
    pub fn start_pollers(&mut self, delivery: Delivery) {
        let mode = if self.setup.event_mode {
            PollMode::Event
        } else {
            PollMode::Poll
        };
        // Pass mode: the receiving application keeps up with the sender. The loopback has no
        // RNR retry (a SEND_IMM finding no recv WR completes with RNR_RETRY_CNT_EXC_ERR), and
        // each receive-side CR re-posts its recv WR inside wake_up_task (§4.1, §4.3), so
        // whether a fast sender overruns the cap x 4 prefilled WRs would depend on how the two
        // poller threads are scheduled (recv-capacity-1 FAILed on a loaded machine). Before
        // handing over a send-side CR, the send poller waits until the receive poller has
        // handed over the receive-side CR of every SEND_IMM whose successful local CR it saw
        // (the loopback emits the receive-side CR first). A receive-side CR that never comes
        // (dropped by a knob) is written off after a bounded wait.
        let pace = self.pace && matches!(delivery, Delivery::Pass);
        let recv_done = Arc::new(AtomicU64::new(0));
        let mut imm_ok: u64 = 0;
        let mut written_off: u64 = 0;
        for side in [Side::Send, Side::Recv] {
            let lib = self.lib(side);
            let wake = lib.os_transport_wake_up_task;
            let h = SendPtr(self.handle(side));
            let rec = self.rec.clone();
            let tag = self.side_tag(side);
            let cq = match side {
                Side::Send => self.pair.sender.cq,
                Side::Recv => self.pair.receiver.cq,
            };
            let done = recv_done.clone();
            let p = Poller::start(&cq, mode, move |cr| {
                if pace && side == Side::Send {
                    let target = imm_ok.saturating_sub(written_off);
                    let end = Instant::now() + PACE_MAX;
                    while done.load(Ordering::Acquire) < target {
                        if Instant::now() >= end {
                            written_off += target - done.load(Ordering::Acquire).min(target);
                            break;
                        }
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    if UserData::decode(cr.user_ctx).chunk_id == 7
                        && cr.status == u::URMA_CR_SUCCESS
                    {
                        imm_ok += 1;
                    }
                }
                let h = &h;
                // SAFETY: the handle is live while the pollers run (they stop before destroy);
                // cr is a CR just polled.
                let r = unsafe { wake(h.0, (cr as *mut u::urma_cr_t).cast()) };
                rec.push(json!({"k": "wake", "key": cr_key(cr), "line": format!("{tag}wake {} -> {r}", cr_line(cr))}));
                if side == Side::Recv {
                    done.fetch_add(1, Ordering::Release);
                }
            });
            if side == Side::Recv && matches!(delivery, Delivery::Held(_)) {
                p.set_hold(true);
            }
            match side {
                Side::Send => self.send_poller = Some(p),
                Side::Recv => self.recv_poller = Some(p),
            }
        }
    }

    /// Stops both pollers (final drain included).
    pub fn stop_pollers(&mut self) {
        if let Some(p) = self.send_poller.take() {
            p.stop();
        }
        if let Some(p) = self.recv_poller.take() {
            // Held CRs never delivered are recorded as such.
            let left = p.take_held();
            p.stop();
            for cr in left {
                self.rec.push(json!({"k": "wake", "key": cr_key(&cr), "line": format!("undelivered {}", cr_line(&cr))}));
            }
        }
    }

    /// Holds (true) or stops holding send-side CRs in the send poller.
    pub fn set_send_hold(&self, on: bool) {
        if let Some(p) = self.send_poller.as_ref() {
            p.set_hold(on);
        }
    }

    /// Takes the held send-side CRs (poll order).
    pub fn take_send_held(&self) -> Vec<u::urma_cr_t> {
        self.send_poller
            .as_ref()
            .map(|p| p.take_held())
            .unwrap_or_default()
    }

    /// Send-side CRs seen so far.
    pub fn send_seen(&self) -> u64 {
        self.send_poller.as_ref().map(|p| p.seen()).unwrap_or(0)
    }

    /// Waits until the loopback's posted send-WR count did not change for `quiet` (at most
    /// 5 s); returns it.
    pub fn settle_send_wrs(&self, quiet: Duration) -> u64 {
        let end = Instant::now() + Duration::from_secs(5);
        let mut last = backend::get().send_wrs();
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(2));
            let now = backend::get().send_wrs();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet || Instant::now() >= end {
                return now;
            }
        }
    }

    /// Receive-side CRs seen (held or handed over) so far.
    pub fn recv_seen(&self) -> u64 {
        self.recv_poller.as_ref().map(|p| p.seen()).unwrap_or(0)
    }

    /// Waits until `n` receive-side CRs were seen and nothing new arrived for 25 ms (a
    /// duplicated CR may follow), or until neither side saw a new CR for `quiet` (at most `max`
    /// in all). Returns the count of receive-side CRs. The quiet period counts from the last
    /// CR of either side: while the sender's CRs still come, its transfer is moving and its
    /// receive-side CRs are on their way, however slowly a loaded machine runs it.
    pub fn settle_recv(&self, n: u64, quiet: Duration, max: Duration) -> u64 {
        let end = Instant::now() + max;
        let progress = || (self.recv_seen(), self.send_seen());
        let mut last = progress();
        let mut since = Instant::now();
        loop {
            let p = progress();
            let now = p.0;
            if p != last {
                last = p;
                since = Instant::now();
            }
            let idle = since.elapsed();
            if (now >= n && idle >= Duration::from_millis(25))
                || idle >= quiet
                || Instant::now() >= end
            {
                return now;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Takes the held receive-side CRs, in a canonical order: arrival order across requests
    /// depends on worker scheduling, so they are sorted by (request id, chunk id); the order
    /// within one request (chunk order) is kept.
    pub fn take_held(&self) -> Vec<u::urma_cr_t> {
        let mut v = self
            .recv_poller
            .as_ref()
            .map(|p| p.take_held())
            .unwrap_or_default();
        v.sort_by_key(|cr| {
            let imm = cr.imm();
            (dec(imm & ((1 << 60) - 1)), imm >> 61)
        });
        v
    }

    /// Hands `cr` to `os_transport_wake_up_task` of `side` on the scenario thread; when it
    /// returns 0 on a receive-side CR, waits (up to `notify_wait`) for the notify it causes.
    pub fn deliver(&mut self, side: Side, mut cr: u::urma_cr_t, notify_wait: Duration) -> i32 {
        let before = self.rec.notify_count();
        let h = self.handle(side);
        // SAFETY: h is live or NULL (the library checks); cr is a valid CR.
        let r = unsafe {
            (self.lib(side).os_transport_wake_up_task)(h, (&mut cr as *mut u::urma_cr_t).cast())
        };
        self.rec.push(json!({"k": "wake", "key": cr_key(&cr), "line": format!("{}wake {} -> {r}", self.side_tag(side), cr_line(&cr))}));
        if r == 0 && cr.is_recv() && self.rec.wait_notifies(before + 1, notify_wait) {
            // The notify counter moves inside the callback; the worker then still does the
            // task's accounting (and, for the last chunk, ends the request). A CR delivered in
            // that window (a duplicate of the last chunk's CR) would find the request still
            // registered or already gone depending on scheduling: on both libraries that is
            // 0 with a discard WARN versus -1 (legacy) or kept (Rust, D4). Wait until the
            // workers are idle again so the next delivery always sees the ended request.
            wait_workers_idle(Duration::from_millis(200));
        }
        r
    }

    /// Delivers the held CRs in `order` (one at a time, waiting for each notify).
    pub fn deliver_held(&mut self, order: Order) -> usize {
        let mut v = self.take_held();
        order.apply(&mut v);
        let n = v.len();
        for cr in v {
            self.deliver(Side::Recv, cr, Duration::from_millis(500));
        }
        n
    }

    fn name_sync(&mut self, p: *mut task_sync_t) -> String {
        if p.is_null() {
            return "NULL".into();
        }
        self.nsync += 1;
        let n = format!("S{}", self.nsync);
        self.syncs.push((n.clone(), p));
        n
    }

    /// The raw pointer of sync `name` (null if unknown).
    pub fn sync_ptr(&self, name: &str) -> *mut task_sync_t {
        self.syncs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p)
            .unwrap_or(null_mut())
    }

    fn forget_sync(&mut self, name: &str) {
        self.syncs.retain(|(n, _)| n != name);
    }

    /// `os_transport_send` of `len` bytes from `src+off` to `dst+off`.
    pub fn send(&mut self, len: u32, sk: u64, ck: u64, off: usize) -> (u32, Option<String>) {
        self.send_ex(len, sk, ck, off, SendVia::Jfs)
    }

    /// `os_transport_send` with a choice of queues.
    pub fn send_ex(
        &mut self,
        len: u32,
        sk: u64,
        ck: u64,
        off: usize,
        via: SendVia,
    ) -> (u32, Option<String>) {
        let mut ji = self.pair.jetty_info();
        match via {
            SendVia::Jfs => {}
            SendVia::Jetty => ji.jfs = null_mut(),
            SendVia::None => {
                ji.jfs = null_mut();
                ji.jetty = null_mut();
            }
        }
        let mut s = ost_buffer_info_t {
            addr: self.src.addr() + off as u64,
            tseg: self.src.tseg,
        };
        let mut d = ost_buffer_info_t {
            addr: self.rdst.addr + off as u64,
            tseg: self.rdst.tseg,
        };
        let mut sync: *mut task_sync_t = std::ptr::NonNull::<task_sync_t>::dangling().as_ptr();
        let mut st: u::urma_status_t = -77;
        let h = self.hs;
        // SAFETY: valid pointers to live endpoint/buffer descriptions.
        let r = unsafe {
            (self.slib.lib.os_transport_send)(
                h, &mut ji, &mut s, &mut d, len, sk, ck, &mut sync, &mut st,
            )
        };
        let sn = if sync == std::ptr::NonNull::<task_sync_t>::dangling().as_ptr() {
            "untouched".to_string()
        } else {
            self.name_sync(sync)
        };
        let via_s = match via {
            SendVia::Jfs => "jfs",
            SendVia::Jetty => "jetty",
            SendVia::None => "none",
        };
        self.rec.api(format!(
            "{}send({}, ji[{via_s}], src+{off}, dst+{off}, len={len}, sk=0x{sk:x}, ck=0x{ck:x}) = {} sync={sn} status={st}",
            self.side_tag(Side::Send),
            self.hname(h),
            r32(r)
        ));
        let name = (sn != "NULL" && sn != "untouched").then_some(sn);
        (r, name)
    }

    /// `os_transport_send` with NULL pointers (bad inputs): `which` selects the NULL argument
    /// ("handle", "jetty_info", "local_src", "remote_dst", "ret_sync", "status").
    pub fn send_null(&mut self, which: &str, len: u32, sk: u64, ck: u64) -> u32 {
        let mut ji = self.pair.jetty_info();
        let mut s = self.src.info();
        let mut d = self.rdst.info();
        let mut sync: *mut task_sync_t = std::ptr::NonNull::<task_sync_t>::dangling().as_ptr();
        let mut st: u::urma_status_t = -77;
        let h = if which == "handle" {
            null_mut()
        } else {
            self.hs
        };
        let pji: *mut urma_jetty_info_t = if which == "jetty_info" {
            null_mut()
        } else {
            &mut ji
        };
        let ps: *mut ost_buffer_info_t = if which == "local_src" {
            null_mut()
        } else {
            &mut s
        };
        let pd: *mut ost_buffer_info_t = if which == "remote_dst" {
            null_mut()
        } else {
            &mut d
        };
        let psync: *mut *mut task_sync_t = if which == "ret_sync" {
            null_mut()
        } else {
            &mut sync
        };
        let pst: *mut u::urma_status_t = if which == "status" {
            null_mut()
        } else {
            &mut st
        };
        // SAFETY: NULL or valid pointers.
        let r =
            unsafe { (self.slib.lib.os_transport_send)(h, pji, ps, pd, len, sk, ck, psync, pst) };
        let sn = if sync == std::ptr::NonNull::<task_sync_t>::dangling().as_ptr() {
            "untouched".to_string()
        } else {
            self.name_sync(sync)
        };
        self.rec.api(format!(
            "send(NULL {which}, len={len}, sk=0x{sk:x}, ck=0x{ck:x}) = {} sync={sn} status={st}",
            r32(r)
        ));
        r
    }

    /// `os_transport_recv` of `len` bytes into `dst+off`.
    pub fn recv(&mut self, len: u32, ck: u64, off: usize) -> (u32, Option<String>) {
        let mut host = ost_buffer_info_t {
            addr: self.dst.addr() + off as u64,
            tseg: self.dst.tseg,
        };
        let mut dev = self
            .pair
            .device_info((self.dst.addr() + off as u64) as *mut c_void);
        let mut sync: *mut task_sync_t = std::ptr::NonNull::<task_sync_t>::dangling().as_ptr();
        let h = self.hr;
        // SAFETY: valid pointers to live endpoint/buffer descriptions; NOTIFY is a static fn.
        let r = unsafe {
            (self.rlib.lib.os_transport_recv)(
                h,
                &mut host,
                &mut dev,
                len,
                ck,
                &mut sync,
                record::NOTIFY,
            )
        };
        let sn = if sync == std::ptr::NonNull::<task_sync_t>::dangling().as_ptr() {
            "untouched".to_string()
        } else {
            self.name_sync(sync)
        };
        let q = if dev.jetty.is_null() { "jfr" } else { "jetty" };
        self.rec.api(format!(
            "{}recv({}, dst+{off}, dev[{q}], len={len}, ck=0x{ck:x}, cb) = {} sync={sn}",
            self.side_tag(Side::Recv),
            self.hname(h),
            r32(r)
        ));
        let name = (sn != "NULL" && sn != "untouched").then_some(sn);
        (r, name)
    }

    /// `os_transport_recv` with a NULL argument or an empty device ("handle", "host_src",
    /// "device_dst", "ret_sync", "callback", "no_queue").
    pub fn recv_null(&mut self, which: &str, len: u32, ck: u64) -> u32 {
        let mut host = self.dst.info();
        let mut dev = self.pair.device_info(self.dst.addr() as *mut c_void);
        if which == "no_queue" {
            dev = ost_device_info_t {
                jfr: null_mut(),
                jetty: null_mut(),
                dst: dev.dst,
            };
        }
        let mut sync: *mut task_sync_t = std::ptr::NonNull::<task_sync_t>::dangling().as_ptr();
        let h = if which == "handle" {
            null_mut()
        } else {
            self.hr
        };
        let ph: *mut ost_buffer_info_t = if which == "host_src" {
            null_mut()
        } else {
            &mut host
        };
        let pd: *mut ost_device_info_t = if which == "device_dst" {
            null_mut()
        } else {
            &mut dev
        };
        let ps: *mut *mut task_sync_t = if which == "ret_sync" {
            null_mut()
        } else {
            &mut sync
        };
        let cb = if which == "callback" {
            None
        } else {
            record::NOTIFY
        };
        // SAFETY: NULL or valid pointers.
        let r = unsafe { (self.rlib.lib.os_transport_recv)(h, ph, pd, len, ck, ps, cb) };
        let sn = if sync == std::ptr::NonNull::<task_sync_t>::dangling().as_ptr() {
            "untouched".to_string()
        } else {
            self.name_sync(sync)
        };
        self.rec.api(format!(
            "recv(NULL {which}, len={len}, ck=0x{ck:x}) = {} sync={sn}",
            r32(r)
        ));
        r
    }

    /// `wait_and_free_sync` (`timeout` None) or `wait_and_free_sync_timeout` on sync `name`.
    /// The sync is forgotten afterwards (the pointer is dead per the contract).
    pub fn wait(&mut self, side: Side, name: &str, timeout: Option<i64>) -> (u32, i32) {
        let p = self.sync_ptr(name);
        let h = self.handle(side);
        let mut st: u::urma_status_t = -77;
        // SAFETY: p is a sync handed out by this library and not yet released.
        let r = unsafe {
            match timeout {
                None => (self.lib(side).wait_and_free_sync)(h, p, &mut st),
                Some(ms) => (self.lib(side).wait_and_free_sync_timeout)(h, p, ms, &mut st),
            }
        };
        let f = match timeout {
            None => "wait_and_free_sync".to_string(),
            Some(ms) => format!("wait_and_free_sync_timeout(.., {ms} ms)"),
        };
        self.rec.api(format!(
            "{}{f}({}, {name}) = {} status={st}",
            self.side_tag(side),
            self.hname(h),
            r32(r)
        ));
        self.forget_sync(name);
        (r, st)
    }

    /// `wait_*` with NULL arguments (bad inputs): `which` = "handle" | "sync" | "status".
    pub fn wait_null(&mut self, which: &str) -> u32 {
        let h = if which == "handle" {
            null_mut()
        } else {
            self.hs
        };
        let mut st: u::urma_status_t = -77;
        let pst: *mut u::urma_status_t = if which == "status" {
            null_mut()
        } else {
            &mut st
        };
        // SAFETY: NULL sync pointers only (which = "sync") or NULL handle; never a stale pointer.
        let r = unsafe { (self.slib.lib.wait_and_free_sync_timeout)(h, null_mut(), 0, pst) };
        self.rec.api(format!(
            "wait_and_free_sync_timeout(NULL {which}, NULL sync, 0 ms) = {} status={st}",
            r32(r)
        ));
        r
    }

    /// `os_transport_cancel_tasks(h, &sync or NULL, rid)`.
    pub fn cancel(&mut self, side: Side, sync: Option<&str>, rid: u64) -> u32 {
        let h = self.handle(side);
        let mut p: *mut task_sync_t = sync.map(|n| self.sync_ptr(n)).unwrap_or(null_mut());
        let pp: *mut *mut task_sync_t = if sync.is_some() { &mut p } else { null_mut() };
        // SAFETY: pp is NULL or points to a live sync pointer of this library.
        let r = unsafe { (self.lib(side).os_transport_cancel_tasks)(h, pp, rid) };
        let after = if sync.is_none() {
            "-".to_string()
        } else if p.is_null() {
            "NULL".to_string()
        } else {
            "kept".to_string()
        };
        self.rec.api(format!(
            "{}cancel_tasks({}, {}, 0x{rid:x}) = {} *sync={after}",
            self.side_tag(side),
            self.hname(h),
            sync.map(|s| format!("&{s}"))
                .unwrap_or_else(|| "NULL".into()),
            r32(r)
        ));
        if let Some(n) = sync {
            if p.is_null() {
                self.forget_sync(n);
            }
        }
        r
    }

    /// `os_transport_destroy` of `side` (pollers must be stopped first).
    pub fn destroy(&mut self, side: Side) -> u32 {
        let h = self.handle(side);
        // SAFETY: h is the live handle (or NULL).
        let r = unsafe { (self.lib(side).os_transport_destroy)(h) };
        self.rec.api(format!(
            "{}destroy({}) = {}",
            self.side_tag(side),
            self.hname(h),
            r32(r)
        ));
        if r == 0 {
            if self.single() {
                self.hs = null_mut();
                self.hr = null_mut();
            } else if side == Side::Send {
                self.hs = null_mut();
            } else {
                self.hr = null_mut();
            }
        }
        r
    }

    /// `os_transport_destroy(NULL)`.
    pub fn destroy_null(&mut self, side: Side) -> u32 {
        // SAFETY: NULL handle.
        let r = unsafe { (self.lib(side).os_transport_destroy)(null_mut()) };
        self.rec.api(format!("destroy(NULL) = {}", r32(r)));
        r
    }

    /// `os_transport_log_reg(level, recording callback or NULL)` on `side`.
    pub fn log_reg(&mut self, side: Side, level: i32, null_cb: bool) -> i32 {
        let lib = match side {
            Side::Send => self.slib,
            Side::Recv => self.rlib,
        };
        let cb = if null_cb {
            None
        } else {
            record::log_callback(lib.slot)
        };
        // SAFETY: static callback or NULL.
        let r = unsafe { (lib.lib.os_transport_log_reg)(level, cb) };
        self.rec.api(format!(
            "log_reg({level}, {}) = {r}",
            if null_cb { "NULL" } else { "cb" }
        ));
        r
    }

    /// Compares `dst[off..off+len]` with `src[off..off+len]` and checks the byte after it was
    /// not written; records the result under `label`.
    pub fn check_data(&mut self, label: &str, off: usize, len: usize) -> bool {
        if self.setup.nocopy {
            self.rec.data(format!("{label}: not checked (no-copy)"));
            return true;
        }
        let s = &self.src.as_slice()[off..off + len];
        let d = &self.dst.as_slice()[off..off + len];
        let mut first = None;
        let mut bad_chunks = Vec::new();
        for (k, (a, b)) in s
            .chunks(DEFAULT_CHUNK_SIZE as usize)
            .zip(d.chunks(DEFAULT_CHUNK_SIZE as usize))
            .enumerate()
        {
            if a != b {
                bad_chunks.push(k);
                if first.is_none() {
                    let i = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
                    first = Some(k * DEFAULT_CHUNK_SIZE as usize + i);
                }
            }
        }
        let over = self.dst.as_slice().get(off + len).copied().unwrap_or(0);
        let ok = first.is_none() && over == 0;
        let line = match first {
            None if over == 0 => format!("{label}: {len} bytes match"),
            None => format!("{label}: {len} bytes match, byte after the end written"),
            Some(i) => format!("{label}: mismatch from byte {i}, chunks {bad_chunks:?} differ"),
        };
        self.rec.data(line);
        ok
    }

    /// Ends the run: stops the pollers, destroys live handles, closes the URMA trace capture
    /// and returns the raw trace.
    pub fn finish(mut self) -> Vec<Value> {
        self.finish_inner();
        self.rec.events()
    }

    fn finish_inner(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.stop_pollers();
        if self.single() {
            if !self.hs.is_null() {
                self.destroy(Side::Send);
            }
        } else {
            if !self.hs.is_null() {
                self.destroy(Side::Send);
            }
            if !self.hr.is_null() {
                self.destroy(Side::Recv);
            }
        }
        let at_poll = backend::get().cr_at_poll();
        for l in backend::get().take() {
            match serde_json::from_str::<Value>(&l) {
                Ok(v) if at_poll => self
                    .rec
                    .push(json!({"k": "urma", "raw": v, "at_poll": true})),
                Ok(v) => self.rec.push(json!({"k": "urma", "raw": v})),
                Err(_) => self.rec.note(note_line(
                    Aspect::Wire,
                    &format!("unparsable loopback trace line: {l}"),
                )),
            }
        }
        if self.setup.nocopy {
            backend::get().set_nocopy(false);
        }
        record::set_current(None);
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        self.finish_inner();
    }
}
