//! Loopback URMA fixture: process-wide context, endpoint pairs, buffers and CR pollers.
//!
//! All URMA objects here are created through the real URMA API (`urma_sys` declarations), so
//! with the loopback `liburma.so.0` they are loopback objects, and the library under test sees
//! exactly what an application would hand it.
//!
//! Drop order matters: stop/drop [`Poller`]s before the [`EndpointPair`] whose JFCs they poll,
//! and drop [`ImportedSeg`]s / [`Buffer`]s after the library under test no longer uses them.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use urma_sys as u;
use urma_sys::flags;

/// Token used for every segment, jetty and JFR the fixture creates.
pub const TOKEN: u32 = 0x5EED_1234;

/// A raw pointer that may be moved into closures running on other threads (e.g. a library
/// handle for `os_transport_wake_up_task`). The user vouches for thread safety.
#[derive(Debug, Clone, Copy)]
pub struct SendPtr<T>(pub *mut T);
// SAFETY: documented contract of the type: the user guarantees the pointee is thread-safe.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

/// Process fixture: `urma_init` (once), one device, one context on one of its EIDs. Never torn
/// down. By default ([`Loopback::get`]) the first device of `urma_get_device_list` and EID index
/// 0 (the loopback's `loopback0`); [`Loopback::open`] chooses a device and an EID by name, as an
/// application on a UB machine does.
pub struct Loopback {
    pub dev: *mut u::urma_device_t,
    pub ctx: *mut u::urma_context_t,
    /// The EID index the context was created on.
    pub eid_index: u32,
}
// SAFETY: the loopback's context is usable from any thread.
unsafe impl Send for Loopback {}
// SAFETY: as above.
unsafe impl Sync for Loopback {}

static FIXTURE: OnceLock<Loopback> = OnceLock::new();

/// Parses an EID written as an IPv6 address (`::ffff:127.0.0.1`, `fe80::1`): URMA EIDs are 16
/// bytes in network order, printed that way by UMDK's tools.
pub fn parse_eid(s: &str) -> Result<[u8; 16], String> {
    s.parse::<std::net::Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("EID '{s}' is not an IPv6-style address (e.g. ::ffff:127.0.0.1)"))
}

/// Formats an EID the way [`parse_eid`] reads it.
pub fn eid_string(raw: [u8; 16]) -> String {
    std::net::Ipv6Addr::from(raw).to_string()
}

impl Loopback {
    /// The process-wide fixture (initialised on first use: the first device, EID index 0).
    pub fn get() -> &'static Loopback {
        FIXTURE.get_or_init(|| {
            // SAFETY: plain URMA calls with valid arguments; results are checked.
            unsafe {
                assert_eq!(
                    u::urma_init(std::ptr::null_mut()),
                    u::URMA_SUCCESS,
                    "urma_init"
                );
                let mut n = 0;
                let list = u::urma_get_device_list(&mut n);
                assert!(!list.is_null() && n >= 1, "no URMA device");
                let dev = *list;
                u::urma_free_device_list(list);
                let ctx = u::urma_create_context(dev, 0);
                assert!(!ctx.is_null(), "urma_create_context");
                Loopback {
                    dev,
                    ctx,
                    eid_index: 0,
                }
            }
        })
    }

    /// Opens the process-wide fixture on device `name` (`urma_get_device_by_name`) and the EID
    /// `eid` of its `urma_get_eid_list` (its first EID when `None`). Only the public URMA API
    /// is used. Err (nothing opened) when there is no such device or EID, or when the fixture
    /// is already open.
    pub fn open(name: &str, eid: Option<[u8; 16]>) -> Result<&'static Loopback, String> {
        if FIXTURE.get().is_some() {
            return Err("the URMA fixture is already open".into());
        }
        let cname =
            std::ffi::CString::new(name).map_err(|_| format!("bad device name {name:?}"))?;
        // SAFETY: plain URMA calls with valid arguments; every result is checked and the EID
        // list is read within its returned length and freed once.
        unsafe {
            let r = u::urma_init(std::ptr::null_mut());
            if r != u::URMA_SUCCESS {
                return Err(format!("urma_init failed ({r})"));
            }
            let dev = u::urma_get_device_by_name(cname.as_ptr() as *mut _);
            if dev.is_null() {
                return Err(format!("no URMA device named '{name}'"));
            }
            let mut n = 0u32;
            let list = u::urma_get_eid_list(dev, &mut n);
            if list.is_null() || n == 0 {
                return Err(format!("device '{name}' has no EID"));
            }
            let eids: Vec<([u8; 16], u32)> = std::slice::from_raw_parts(list, n as usize)
                .iter()
                .map(|e| (e.eid.raw, e.eid_index))
                .collect();
            u::urma_free_eid_list(list);
            let index = match eid {
                None => eids[0].1,
                Some(want) => eids
                    .iter()
                    .find(|e| e.0 == want)
                    .map(|e| e.1)
                    .ok_or_else(|| {
                        let have: Vec<String> = eids.iter().map(|e| eid_string(e.0)).collect();
                        format!(
                            "device '{name}' has no EID {} (it has {})",
                            eid_string(want),
                            have.join(", ")
                        )
                    })?,
            };
            let ctx = u::urma_create_context(dev, index);
            if ctx.is_null() {
                return Err(format!(
                    "urma_create_context on '{name}', EID index {index} failed"
                ));
            }
            let lb = Loopback {
                dev,
                ctx,
                eid_index: index,
            };
            FIXTURE
                .set(lb)
                .map_err(|_| "the URMA fixture is already open".to_string())?;
            Ok(FIXTURE.get().expect("just set"))
        }
    }
}

/// A JFC, with its JFCE in event mode (`jfce` NULL otherwise).
#[derive(Debug, Clone, Copy)]
pub struct Cq {
    pub jfc: *mut u::urma_jfc_t,
    pub jfce: *mut u::urma_jfce_t,
}
// SAFETY: loopback JFC/JFCE handles are thread-safe.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

impl Cq {
    /// Creates a JFC of `depth` (and a JFCE when `event_mode`).
    pub fn new(lb: &Loopback, depth: u32, event_mode: bool) -> Cq {
        // SAFETY: URMA calls on the fixture context with valid configs; results are checked.
        unsafe {
            let jfce = if event_mode {
                u::urma_create_jfce(lb.ctx)
            } else {
                std::ptr::null_mut()
            };
            assert!(!event_mode || !jfce.is_null(), "urma_create_jfce");
            let mut cfg: u::urma_jfc_cfg_t = Default::default();
            cfg.depth = depth;
            cfg.jfce = jfce;
            let jfc = u::urma_create_jfc(lb.ctx, &mut cfg);
            assert!(!jfc.is_null(), "urma_create_jfc");
            Cq { jfc, jfce }
        }
    }

    fn destroy(&self) {
        // SAFETY: handles created by Cq::new, deleted once.
        unsafe {
            let r = u::urma_delete_jfc(self.jfc);
            debug_assert_eq!(r, u::URMA_SUCCESS, "urma_delete_jfc");
            if !self.jfce.is_null() {
                let r = u::urma_delete_jfce(self.jfce);
                debug_assert_eq!(r, u::URMA_SUCCESS, "urma_delete_jfce");
            }
        }
    }

    /// Polls up to `max` CRs now (no waiting).
    pub fn poll(&self, max: usize) -> Vec<u::urma_cr_t> {
        let mut v = vec![u::urma_cr_t::default(); max];
        // SAFETY: v has room for max CRs.
        let n = unsafe { u::urma_poll_jfc(self.jfc, max as i32, v.as_mut_ptr()) };
        assert!(n >= 0, "urma_poll_jfc failed");
        v.truncate(n as usize);
        v
    }

    /// Polls until `n` CRs have been collected or `timeout` passes.
    pub fn poll_n(&self, n: usize, timeout: Duration) -> Vec<u::urma_cr_t> {
        let end = Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < end {
            let got = self.poll(n - out.len());
            if got.is_empty() {
                std::thread::sleep(Duration::from_micros(200));
            }
            out.extend(got);
        }
        out
    }
}

/// How the sender posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// A JFS only.
    Jfs,
    /// A jetty only.
    Jetty,
    /// Both a JFS and a jetty (on the same send JFC).
    Both,
}

/// How the receiver receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvKind {
    /// A jetty with its own JFR (the sender imports the jetty).
    Jetty,
    /// A JFR (the sender imports the JFR with `urma_import_jfr`).
    Jfr,
    /// A JFR plus a jetty sharing it (the sender imports the jetty).
    JettySharedJfr,
}

/// Endpoint configuration.
#[derive(Debug, Clone, Copy)]
pub struct EndpointCfg {
    pub send: SendKind,
    pub recv: RecvKind,
    /// Depth of both JFCs.
    pub jfc_depth: u32,
    /// Depth of the JFS / jetty send queue.
    pub sq_depth: u32,
    /// Depth of the receive queue (recv WRs that may be posted at once).
    pub rq_depth: u32,
    /// Create a JFCE per JFC (event mode).
    pub event_mode: bool,
    /// One JFC for both sides (the receiver's): every CR of the pair on one queue.
    pub shared_cq: bool,
    /// Also import the receiver's JFR into [`Sender::tjfr`] (needs a JFR: [`RecvKind::Jfr`] or
    /// [`RecvKind::JettySharedJfr`]).
    pub import_jfr: bool,
}

impl Default for EndpointCfg {
    fn default() -> Self {
        EndpointCfg {
            send: SendKind::Both,
            recv: RecvKind::Jetty,
            jfc_depth: 4096,
            sq_depth: 1024,
            rq_depth: 1024,
            event_mode: false,
            shared_cq: false,
            import_jfr: false,
        }
    }
}

/// Sender side: send JFC, JFS and/or jetty, and the imported receiver (`tjetty`; `tjfr`, the
/// imported JFR, with [`EndpointCfg::import_jfr`], else NULL).
#[derive(Debug)]
pub struct Sender {
    pub cq: Cq,
    pub jfs: *mut u::urma_jfs_t,
    pub jetty: *mut u::urma_jetty_t,
    pub tjetty: *mut u::urma_target_jetty_t,
    pub tjfr: *mut u::urma_target_jetty_t,
}

/// Receiver side: recv JFC, jetty and/or JFR.
#[derive(Debug)]
pub struct Receiver {
    pub cq: Cq,
    pub jetty: *mut u::urma_jetty_t,
    pub jfr: *mut u::urma_jfr_t,
}

impl Sender {
    /// The send JFC (for [`Poller::start`]).
    pub fn jfc_handle(&self) -> Cq {
        self.cq
    }
}

impl Receiver {
    /// The recv JFC (for [`Poller::start`]).
    pub fn jfc_handle(&self) -> Cq {
        self.cq
    }

    /// Posts `n` zero-length recv WRs (like MLCacheDirect's prefill) with `user_ctx`
    /// `base, base + 1, ...`, to the jetty if any, else the JFR. Returns the status of the post.
    pub fn post_recvs(&self, n: usize, base: u64) -> i32 {
        for i in 0..n {
            let mut wr = u::urma_jfr_wr_t {
                user_ctx: base + i as u64,
                ..Default::default()
            };
            let mut bad: *mut u::urma_jfr_wr_t = std::ptr::null_mut();
            // SAFETY: wr is a valid single recv WR; handles come from the fixture.
            let r = unsafe {
                if !self.jetty.is_null() {
                    u::urma_post_jetty_recv_wr(self.jetty, &mut wr, &mut bad)
                } else {
                    u::urma_post_jfr_wr(self.jfr, &mut wr, &mut bad)
                }
            };
            if r != u::URMA_SUCCESS {
                return r;
            }
        }
        u::URMA_SUCCESS
    }
}

/// A sender + receiver pair in one process (the loopback connects them).
#[derive(Debug)]
pub struct EndpointPair {
    pub sender: Sender,
    pub receiver: Receiver,
    pub cfg: EndpointCfg,
}
// SAFETY: all handles are loopback objects, usable from any thread.
unsafe impl Send for EndpointPair {}
// SAFETY: as above.
unsafe impl Sync for EndpointPair {}

fn jfr_cfg(jfc: *mut u::urma_jfc_t, depth: u32) -> u::urma_jfr_cfg_t {
    let mut c: u::urma_jfr_cfg_t = Default::default();
    c.depth = depth;
    c.flag.value = u::URMA_TOKEN_PLAIN_TEXT << flags::JFR_FLAG_TOKEN_POLICY_SHIFT;
    c.trans_mode = u::URMA_TM_RM;
    c.max_sge = 1;
    c.jfc = jfc;
    c.token_value.token = TOKEN;
    c
}

fn jfs_cfg(jfc: *mut u::urma_jfc_t, depth: u32) -> u::urma_jfs_cfg_t {
    let mut c: u::urma_jfs_cfg_t = Default::default();
    c.depth = depth;
    c.trans_mode = u::URMA_TM_RM;
    c.max_sge = 1;
    c.jfc = jfc;
    c
}

impl EndpointPair {
    /// Creates both sides and imports the receiver into the sender.
    pub fn new(lb: &Loopback, cfg: &EndpointCfg) -> EndpointPair {
        // SAFETY: URMA calls on the fixture context with valid configs; results are checked.
        unsafe {
            // Receiver.
            let rcq = Cq::new(lb, cfg.jfc_depth, cfg.event_mode);
            let mut jfr = std::ptr::null_mut();
            let mut rjetty = std::ptr::null_mut();
            if matches!(cfg.recv, RecvKind::Jfr | RecvKind::JettySharedJfr) {
                let mut c = jfr_cfg(rcq.jfc, cfg.rq_depth);
                jfr = u::urma_create_jfr(lb.ctx, &mut c);
                assert!(!jfr.is_null(), "urma_create_jfr");
            }
            if matches!(cfg.recv, RecvKind::Jetty | RecvKind::JettySharedJfr) {
                let mut own = jfr_cfg(rcq.jfc, cfg.rq_depth);
                let mut jc: u::urma_jetty_cfg_t = Default::default();
                jc.jfs_cfg = jfs_cfg(rcq.jfc, cfg.sq_depth);
                if cfg.recv == RecvKind::JettySharedJfr {
                    jc.flag.value = flags::JETTY_FLAG_SHARE_JFR;
                    jc.__bindgen_anon_1.shared.jfr = jfr;
                    jc.__bindgen_anon_1.shared.jfc = rcq.jfc;
                } else {
                    jc.__bindgen_anon_1.jfr_cfg = &mut own;
                }
                rjetty = u::urma_create_jetty(lb.ctx, &mut jc);
                assert!(!rjetty.is_null(), "urma_create_jetty (receiver)");
            }
            // Sender.
            let scq = if cfg.shared_cq {
                rcq
            } else {
                Cq::new(lb, cfg.jfc_depth, cfg.event_mode)
            };
            let mut jfs = std::ptr::null_mut();
            let mut sjetty = std::ptr::null_mut();
            if matches!(cfg.send, SendKind::Jfs | SendKind::Both) {
                let mut c = jfs_cfg(scq.jfc, cfg.sq_depth);
                jfs = u::urma_create_jfs(lb.ctx, &mut c);
                assert!(!jfs.is_null(), "urma_create_jfs");
            }
            if matches!(cfg.send, SendKind::Jetty | SendKind::Both) {
                // The sender's jetty also gets a small receive queue (duplex capable).
                let mut own = jfr_cfg(scq.jfc, cfg.rq_depth);
                let mut jc: u::urma_jetty_cfg_t = Default::default();
                jc.jfs_cfg = jfs_cfg(scq.jfc, cfg.sq_depth);
                jc.__bindgen_anon_1.jfr_cfg = &mut own;
                sjetty = u::urma_create_jetty(lb.ctx, &mut jc);
                assert!(!sjetty.is_null(), "urma_create_jetty (sender)");
            }
            let tjetty = if cfg.recv == RecvKind::Jfr {
                import_receiver(lb, RecvKind::Jfr, (*jfr).jfr_id)
            } else {
                import_receiver(lb, RecvKind::Jetty, (*rjetty).jetty_id)
            };
            assert!(!tjetty.is_null(), "import of the receiver");
            let tjfr = if cfg.import_jfr {
                assert!(!jfr.is_null(), "import_jfr needs a receiver JFR");
                let t = import_receiver(lb, RecvKind::Jfr, (*jfr).jfr_id);
                assert!(!t.is_null(), "urma_import_jfr");
                t
            } else {
                std::ptr::null_mut()
            };
            EndpointPair {
                sender: Sender {
                    cq: scq,
                    jfs,
                    jetty: sjetty,
                    tjetty,
                    tjfr,
                },
                receiver: Receiver {
                    cq: rcq,
                    jetty: rjetty,
                    jfr,
                },
                cfg: *cfg,
            }
        }
    }
}

/// Imports a receiver by id with token [`TOKEN`] (RM): a JFR with [`RecvKind::Jfr`], else a
/// jetty. The receiver may live in another process (its {EID, uasid, id} as that process
/// tells it). NULL when the provider refuses the import.
pub fn import_receiver(
    lb: &Loopback,
    kind: RecvKind,
    id: u::urma_jetty_id_t,
) -> *mut u::urma_target_jetty_t {
    let mut token = u::urma_token_t { token: TOKEN };
    // SAFETY: the descriptors and the token are locals read during the call.
    unsafe {
        if kind == RecvKind::Jfr {
            let mut r: u::urma_rjfr_t = Default::default();
            r.jfr_id = id;
            r.trans_mode = u::URMA_TM_RM;
            u::urma_import_jfr(lb.ctx, &mut r, &mut token)
        } else {
            let mut r: u::urma_rjetty_t = Default::default();
            r.jetty_id = id;
            r.trans_mode = u::URMA_TM_RM;
            r.type_ = u::URMA_JETTY;
            u::urma_import_jetty(lb.ctx, &mut r, &mut token)
        }
    }
}

impl Drop for EndpointPair {
    fn drop(&mut self) {
        // SAFETY: handles created in new(), deleted once, in dependency order.
        unsafe {
            let s = &self.sender;
            u::urma_unimport_jetty(s.tjetty);
            if !s.tjfr.is_null() {
                u::urma_unimport_jfr(s.tjfr);
            }
            if !s.jfs.is_null() {
                u::urma_delete_jfs(s.jfs);
            }
            if !s.jetty.is_null() {
                u::urma_delete_jetty(s.jetty);
            }
            if !self.cfg.shared_cq {
                s.cq.destroy();
            }
            let r = &self.receiver;
            if !r.jetty.is_null() {
                u::urma_delete_jetty(r.jetty);
            }
            if !r.jfr.is_null() {
                u::urma_delete_jfr(r.jfr);
            }
            r.cq.destroy();
        }
    }
}

/// Registers `len` bytes at `va` as a local segment of the fixture context with `access`
/// (`URMA_ACCESS_*` bits) and, with `Some(token)`, a plain-text token (no token otherwise).
///
/// # Safety
/// `va..va + len` must stay valid memory until the returned segment is unregistered.
pub unsafe fn register_seg(
    lb: &Loopback,
    va: *mut u8,
    len: usize,
    token: Option<u32>,
    access: u32,
) -> *mut u::urma_target_seg_t {
    let mut cfg: u::urma_seg_cfg_t = Default::default();
    cfg.va = va as u64;
    cfg.len = len as u64;
    cfg.flag.value = access << flags::REG_SEG_FLAG_ACCESS_SHIFT;
    if let Some(t) = token {
        cfg.token_value.token = t;
        // SAFETY: `value` is the whole flag word of the union, written just above.
        unsafe {
            cfg.flag.value |= u::URMA_TOKEN_PLAIN_TEXT << flags::REG_SEG_FLAG_TOKEN_POLICY_SHIFT;
        }
    }
    // SAFETY: cfg is a live local read during the call; the caller keeps the memory valid.
    let tseg = unsafe { u::urma_register_seg(lb.ctx, &mut cfg) };
    assert!(!tseg.is_null(), "urma_register_seg");
    tseg
}

/// Imports the registered segment `tseg` (as a peer would, from its `urma_seg_t`) with `token`
/// (NULL token when `None`) and `flag` (`IMPORT_SEG_FLAG_*` bits).
///
/// # Safety
/// `tseg` must be a live segment registered on the fixture context.
pub unsafe fn import_seg(
    lb: &Loopback,
    tseg: *mut u::urma_target_seg_t,
    token: Option<u32>,
    flag: u32,
) -> *mut u::urma_target_seg_t {
    // SAFETY: tseg is live (caller).
    let imported = import_seg_desc(lb, unsafe { (*tseg).seg }, token, flag);
    assert!(!imported.is_null(), "urma_import_seg");
    imported
}

/// Imports the segment described by `seg` (its {EID, uasid, va}, length and token id: what a
/// peer, possibly another process, tells) with `token` (NULL token when `None`) and `flag`;
/// NULL when the provider refuses it.
pub fn import_seg_desc(
    lb: &Loopback,
    mut seg: u::urma_seg_t,
    token: Option<u32>,
    flag: u32,
) -> *mut u::urma_target_seg_t {
    let mut t = u::urma_token_t {
        token: token.unwrap_or(0),
    };
    let tp: *mut u::urma_token_t = if token.is_some() {
        &mut t
    } else {
        std::ptr::null_mut()
    };
    let mut f: u::urma_import_seg_flag_t = Default::default();
    f.value = flag;
    // SAFETY: `t` and the segment descriptor are locals read during the call.
    unsafe { u::urma_import_seg(lb.ctx, &mut seg, tp, 0, f) }
}

/// A page-aligned, zero-initialised buffer registered as a local segment (token [`TOKEN`],
/// remote read + write access).
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    layout: std::alloc::Layout,
    pub tseg: *mut u::urma_target_seg_t,
}
// SAFETY: the buffer is plain memory plus a loopback handle.
unsafe impl Send for Buffer {}
// SAFETY: as above (concurrent writers are the test's business, like with real RDMA).
unsafe impl Sync for Buffer {}

/// Byte `i` of the pattern for `seed` (depends on the offset so misplaced chunks are caught).
pub fn pattern_byte(seed: u64, i: usize) -> u8 {
    let x =
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8 ^ (i as u8)
}

impl Buffer {
    /// Allocates and registers `len` bytes (`len` > 0).
    pub fn new(lb: &Loopback, len: usize) -> Buffer {
        assert!(len > 0);
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        let access = u::URMA_ACCESS_READ | u::URMA_ACCESS_WRITE;
        // SAFETY: ptr..ptr + len is our allocation, freed only after the unregistration in Drop.
        let tseg = unsafe { register_seg(lb, ptr, len, Some(TOKEN), access) };
        Buffer {
            ptr,
            len,
            layout,
            tseg,
        }
    }

    /// Start address.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Raw pointer to the start.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (buffers are never empty).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr/len describe our live allocation.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr/len describe our live allocation; &mut self gives exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Fills every byte with `v`.
    pub fn fill(&mut self, v: u8) {
        self.as_mut_slice().fill(v);
    }

    /// Fills with [`pattern_byte`]`(seed, offset)`.
    pub fn fill_pattern(&mut self, seed: u64) {
        for (i, b) in self.as_mut_slice().iter_mut().enumerate() {
            *b = pattern_byte(seed, i);
        }
    }

    /// Checks `range` against the pattern; `Err(offset)` of the first mismatch.
    pub fn verify_pattern(&self, seed: u64, range: Range<usize>) -> Result<(), usize> {
        let s = self.as_slice();
        for i in range {
            if s[i] != pattern_byte(seed, i) {
                return Err(i);
            }
        }
        Ok(())
    }

    /// Imports this segment (as a peer would, with `urma_seg_t` + token).
    pub fn import(&self, lb: &Loopback) -> ImportedSeg {
        let flag =
            (u::URMA_ACCESS_READ | u::URMA_ACCESS_WRITE) << flags::IMPORT_SEG_FLAG_ACCESS_SHIFT;
        // SAFETY: tseg is our live registered segment.
        let t = unsafe { import_seg(lb, self.tseg, Some(TOKEN), flag) };
        ImportedSeg {
            tseg: t,
            addr: self.addr(),
            len: self.len,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: tseg registered in new(); memory allocated with layout in new().
        unsafe {
            u::urma_unregister_seg(self.tseg);
            std::alloc::dealloc(self.ptr, self.layout);
        }
    }
}

/// An imported (remote) segment over a [`Buffer`].
pub struct ImportedSeg {
    pub tseg: *mut u::urma_target_seg_t,
    pub addr: u64,
    pub len: usize,
}
// SAFETY: plain loopback handle.
unsafe impl Send for ImportedSeg {}
// SAFETY: as above.
unsafe impl Sync for ImportedSeg {}

impl Drop for ImportedSeg {
    fn drop(&mut self) {
        // SAFETY: imported in Buffer::import, unimported once.
        unsafe { u::urma_unimport_seg(self.tseg) };
    }
}

/// How a [`Poller`] waits for CRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollMode {
    /// Busy-poll `urma_poll_jfc` (short sleeps when idle).
    Poll,
    /// `urma_wait_jfc` on the JFCE, then poll, ack, rearm, poll again.
    Event,
}

type Handler = Box<dyn FnMut(&mut u::urma_cr_t) + Send>;

struct PollShared {
    stop: AtomicBool,
    seen: AtomicU64,
    errors: AtomicU64,
    hold: AtomicBool,
    held: Mutex<Vec<u::urma_cr_t>>,
    record: AtomicBool,
    log: Mutex<Vec<u::urma_cr_t>>,
    handler: Mutex<Handler>,
}

impl PollShared {
    fn handle(&self, crs: &mut [u::urma_cr_t]) {
        if crs.is_empty() {
            return;
        }
        if self.record.load(Ordering::Acquire) {
            self.log.lock().unwrap().extend_from_slice(crs);
        }
        if self.hold.load(Ordering::Acquire) {
            self.held.lock().unwrap().extend_from_slice(crs);
        } else {
            let mut h = self.handler.lock().unwrap();
            for cr in crs.iter_mut() {
                (h)(cr);
            }
        }
        self.seen.fetch_add(crs.len() as u64, Ordering::AcqRel);
    }

    fn drain(&self, jfc: *mut u::urma_jfc_t, buf: &mut [u::urma_cr_t]) -> usize {
        let mut total = 0;
        loop {
            // SAFETY: buf has room for buf.len() CRs; jfc is a live JFC (Poller contract).
            let n = unsafe { u::urma_poll_jfc(jfc, buf.len() as i32, buf.as_mut_ptr()) };
            if n < 0 {
                self.errors.fetch_add(1, Ordering::Relaxed);
                return total;
            }
            if n == 0 {
                return total;
            }
            self.handle(&mut buf[..n as usize]);
            total += n as usize;
        }
    }
}

/// A thread polling one JFC and handing every CR to a closure (e.g. a call of
/// `os_transport_wake_up_task`). Stops (after a final drain) on [`Poller::stop`] or drop.
pub struct Poller {
    shared: Arc<PollShared>,
    thread: Option<JoinHandle<()>>,
}

impl Poller {
    /// Starts polling `cq` in `mode` ([`PollMode::Event`] needs a JFCE: `EndpointCfg::event_mode`).
    pub fn start(
        cq: &Cq,
        mode: PollMode,
        handler: impl FnMut(&mut u::urma_cr_t) + Send + 'static,
    ) -> Poller {
        assert!(
            mode == PollMode::Poll || !cq.jfce.is_null(),
            "event mode needs a JFCE"
        );
        let shared = Arc::new(PollShared {
            stop: AtomicBool::new(false),
            seen: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            hold: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
            record: AtomicBool::new(false),
            log: Mutex::new(Vec::new()),
            handler: Mutex::new(Box::new(handler)),
        });
        let sh = shared.clone();
        let cq = *cq;
        let thread = std::thread::Builder::new()
            .name("cr-poller".into())
            .spawn(move || {
                let cq: Cq = cq; // capture the whole (Send) struct, not its raw-pointer fields
                let mut buf = vec![u::urma_cr_t::default(); 16];
                match mode {
                    PollMode::Poll => loop {
                        let stop = sh.stop.load(Ordering::Acquire);
                        let n = sh.drain(cq.jfc, &mut buf);
                        if stop {
                            break;
                        }
                        if n == 0 {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                    },
                    PollMode::Event => {
                        // SAFETY: live JFC.
                        unsafe { u::urma_rearm_jfc(cq.jfc, false) };
                        loop {
                            let stop = sh.stop.load(Ordering::Acquire);
                            let mut got = [std::ptr::null_mut(); 1];
                            // SAFETY: live JFCE; got has room for 1 handle.
                            let n = unsafe { u::urma_wait_jfc(cq.jfce, 1, 20, got.as_mut_ptr()) };
                            if n > 0 {
                                sh.drain(cq.jfc, &mut buf);
                                let mut nev = [n as u32];
                                // SAFETY: arrays of one entry each.
                                unsafe {
                                    u::urma_ack_jfc(got.as_mut_ptr(), nev.as_mut_ptr(), 1);
                                    u::urma_rearm_jfc(cq.jfc, false);
                                }
                                sh.drain(cq.jfc, &mut buf);
                            } else if n < 0 {
                                sh.errors.fetch_add(1, Ordering::Relaxed);
                            }
                            if stop {
                                sh.drain(cq.jfc, &mut buf);
                                break;
                            }
                        }
                    }
                }
            })
            .expect("spawn poller");
        Poller {
            shared,
            thread: Some(thread),
        }
    }

    /// CRs polled so far (handled or held).
    pub fn seen(&self) -> u64 {
        self.shared.seen.load(Ordering::Acquire)
    }

    /// Failed `urma_poll_jfc` / `urma_wait_jfc` calls.
    pub fn errors(&self) -> u64 {
        self.shared.errors.load(Ordering::Acquire)
    }

    /// Waits until at least `n` CRs were seen; false on timeout.
    pub fn wait_seen(&self, n: u64, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.seen() < n {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }

    /// While on, polled CRs are kept (see [`Poller::take_held`]) instead of going to the closure.
    pub fn set_hold(&self, on: bool) {
        self.shared.hold.store(on, Ordering::Release);
    }

    /// Takes the held CRs (they are not passed to the closure).
    pub fn take_held(&self) -> Vec<u::urma_cr_t> {
        std::mem::take(&mut *self.shared.held.lock().unwrap())
    }

    /// Passes the held CRs to the closure now (in the caller's thread, in polled order).
    pub fn release_held(&self) -> usize {
        let mut v = self.take_held();
        let mut h = self.shared.handler.lock().unwrap();
        for cr in v.iter_mut() {
            (h)(cr);
        }
        v.len()
    }

    /// Records a copy of every CR seen (see [`Poller::recorded`]).
    pub fn set_record(&self, on: bool) {
        self.shared.record.store(on, Ordering::Release);
    }

    /// Copies of the CRs recorded so far.
    pub fn recorded(&self) -> Vec<u::urma_cr_t> {
        self.shared.log.lock().unwrap().clone()
    }

    /// Stops the thread after a final drain; returns the number of CRs seen.
    pub fn stop(mut self) -> u64 {
        self.stop_inner();
        self.seen()
    }

    fn stop_inner(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// CR accessors (the flag bits and the imm_data union).
pub trait CrExt {
    /// `flag.bs.s_r`: true on receive-side CRs.
    fn is_recv(&self) -> bool;
    /// `flag.bs.jetty`.
    fn is_jetty(&self) -> bool;
    /// `imm_data`.
    fn imm(&self) -> u64;
}

impl CrExt for u::urma_cr_t {
    fn is_recv(&self) -> bool {
        // SAFETY: plain u8 flag union.
        unsafe { self.flag.value & flags::CR_FLAG_S_R != 0 }
    }
    fn is_jetty(&self) -> bool {
        // SAFETY: plain u8 flag union.
        unsafe { self.flag.value & flags::CR_FLAG_JETTY != 0 }
    }
    fn imm(&self) -> u64 {
        // SAFETY: plain u64 union member.
        unsafe { self.__bindgen_anon_1.imm_data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loopback_ctl as ctl;

    fn post_write_and_send_imm(
        pair: &EndpointPair,
        src: &Buffer,
        dst: &ImportedSeg,
        len: u32,
        imm: u64,
    ) {
        let mut s = u::urma_sge_t {
            addr: src.addr(),
            len,
            tseg: src.tseg,
            user_tseg: std::ptr::null_mut(),
        };
        let mut d = u::urma_sge_t {
            addr: dst.addr,
            len,
            tseg: dst.tseg,
            user_tseg: std::ptr::null_mut(),
        };
        let mut wr: u::urma_jfs_wr_t = Default::default();
        wr.opcode = u::URMA_OPC_WRITE;
        wr.flag.value = flags::JFS_WR_FLAG_COMPLETE_ENABLE;
        wr.tjetty = pair.sender.tjetty;
        wr.user_ctx = 7;
        wr.__bindgen_anon_1.rw.src = u::urma_sg_t {
            sge: &mut s,
            num_sge: 1,
        };
        wr.__bindgen_anon_1.rw.dst = u::urma_sg_t {
            sge: &mut d,
            num_sge: 1,
        };
        let mut imm_wr: u::urma_jfs_wr_t = Default::default();
        imm_wr.opcode = u::URMA_OPC_SEND_IMM;
        imm_wr.flag.value = flags::JFS_WR_FLAG_COMPLETE_ENABLE;
        imm_wr.tjetty = pair.sender.tjetty;
        imm_wr.user_ctx = 8;
        imm_wr.__bindgen_anon_1.send.imm_data = imm;
        wr.next = &mut imm_wr;
        let mut bad = std::ptr::null_mut();
        // SAFETY: valid WR chain over live fixture objects.
        let r = unsafe { u::urma_post_jfs_wr(pair.sender.jfs, &mut wr, &mut bad) };
        assert_eq!(r, u::URMA_SUCCESS);
    }

    #[test]
    fn eids_parse_and_print_in_ipv6_notation() {
        let e = parse_eid("::ffff:127.0.0.1").unwrap();
        assert_eq!(e, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1]);
        assert_eq!(eid_string(e), "::ffff:127.0.0.1");
        assert!(parse_eid("127.0.0.1").unwrap_err().contains("IPv6"));
        assert!(parse_eid("").is_err());
    }

    #[test]
    fn fixture_round_trip_poll_and_event_mode() {
        let lb = Loopback::get();
        for event_mode in [false, true] {
            let pair = EndpointPair::new(
                lb,
                &EndpointCfg {
                    event_mode,
                    ..Default::default()
                },
            );
            let mut src = Buffer::new(lb, 1 << 20);
            src.fill_pattern(42);
            let dst = Buffer::new(lb, 1 << 20);
            let rdst = dst.import(lb);
            assert_eq!(pair.receiver.post_recvs(4, 100), u::URMA_SUCCESS);
            let mode = if event_mode {
                PollMode::Event
            } else {
                PollMode::Poll
            };
            let got = Arc::new(Mutex::new(Vec::new()));
            let g2 = got.clone();
            let rp = Poller::start(&pair.receiver.jfc_handle(), mode, move |cr| {
                g2.lock().unwrap().push(*cr)
            });
            let sp = Poller::start(&pair.sender.jfc_handle(), mode, |_| {});
            post_write_and_send_imm(&pair, &src, &rdst, 1 << 20, 0xABCD);
            assert!(rp.wait_seen(1, Duration::from_secs(5)));
            assert!(sp.wait_seen(2, Duration::from_secs(5)));
            assert_eq!(rp.stop(), 1);
            assert_eq!(sp.stop(), 2);
            dst.verify_pattern(42, 0..1 << 20).unwrap();
            let crs = got.lock().unwrap().clone();
            assert!(crs[0].is_recv());
            assert_eq!(crs[0].imm(), 0xABCD);
            assert_eq!(crs[0].user_ctx, 100);
            assert_eq!(crs[0].opcode, u::URMA_CR_OPC_SEND_WITH_IMM);
            drop(rdst);
        }
        let c = ctl::counters();
        assert!(c.crs_polled >= 6);
    }
}
