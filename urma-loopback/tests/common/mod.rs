//! Shared helpers of the loopback integration tests (included with `mod common;`).
#![allow(
    dead_code,
    clippy::field_reassign_with_default,
    clippy::missing_safety_doc
)]

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use urma_sys as u;
pub use urma_sys::flags;

/// Serialises tests: knobs and counters are process-wide.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    let g = M.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: loopback control function without arguments.
    unsafe { (ctl().reset)() };
    g
}

/// The control plane (`urma-loopback-ctl`): counters, trace capture, and the typed table of the
/// `urma_loopback_*` functions for the tests that check their raw return values.
#[allow(unused_imports)]
pub use urma_loopback_ctl::{counters, trace_take, Api};

/// The control functions of the loopback loaded by this binary (it is NEEDED: [`lb`] loads it).
pub fn ctl() -> &'static Api {
    lb();
    urma_loopback_ctl::api()
}

/// The process fixture of the testkit: `urma_init`, device `loopback0`, one context.
pub use testkit::Loopback as Lb;

pub fn lb() -> &'static Lb {
    Lb::get()
}

pub const TOKEN: u32 = 0x1234_5678;

pub unsafe fn jfc(depth: u32, jfce: *mut u::urma_jfce_t) -> *mut u::urma_jfc_t {
    let mut c: u::urma_jfc_cfg_t = Default::default();
    c.depth = depth;
    c.jfce = jfce;
    // SAFETY: the fixture context is live; `c` is a local the call only reads.
    let j = unsafe { u::urma_create_jfc(lb().ctx, &mut c) };
    assert!(!j.is_null());
    j
}

pub unsafe fn jfs(jfc: *mut u::urma_jfc_t) -> *mut u::urma_jfs_t {
    let mut c: u::urma_jfs_cfg_t = Default::default();
    c.depth = 256;
    c.max_sge = 4;
    c.jfc = jfc;
    c.trans_mode = u::URMA_TM_RM;
    // SAFETY: the fixture context is live; `c` is a local the call only reads.
    let j = unsafe { u::urma_create_jfs(lb().ctx, &mut c) };
    assert!(!j.is_null());
    j
}

pub fn jfr_cfg(jfc: *mut u::urma_jfc_t, depth: u32) -> u::urma_jfr_cfg_t {
    let mut c: u::urma_jfr_cfg_t = Default::default();
    c.depth = depth;
    c.max_sge = 2;
    c.jfc = jfc;
    c.trans_mode = u::URMA_TM_RM;
    c.flag.value = u::URMA_TOKEN_PLAIN_TEXT << flags::JFR_FLAG_TOKEN_POLICY_SHIFT;
    c.token_value.token = TOKEN;
    c
}

/// A jetty receiving through a JFR of its own that it shares (on a UB device the URMA core
/// refuses a jetty whose receive queue is not a shared JFR); [`delete_jetty`] deletes both.
pub unsafe fn jetty(jfc: *mut u::urma_jfc_t, rq_depth: u32) -> *mut u::urma_jetty_t {
    let mut rc = jfr_cfg(jfc, rq_depth);
    // SAFETY: the fixture context is live; `rc` is a local the call only reads.
    let jfr = unsafe { u::urma_create_jfr(lb().ctx, &mut rc) };
    assert!(!jfr.is_null());
    let mut c: u::urma_jetty_cfg_t = Default::default();
    c.jfs_cfg.depth = 256;
    c.jfs_cfg.jfc = jfc;
    c.jfs_cfg.max_sge = 4;
    c.jfs_cfg.trans_mode = u::URMA_TM_RM;
    c.flag.value = flags::JETTY_FLAG_SHARE_JFR;
    c.__bindgen_anon_1.shared.jfr = jfr;
    c.__bindgen_anon_1.shared.jfc = jfc;
    // SAFETY: the fixture context is live; `c` is a local the call only reads.
    let j = unsafe { u::urma_create_jetty(lb().ctx, &mut c) };
    assert!(!j.is_null());
    j
}

/// Deletes a jetty made by [`jetty`], then its JFR: the first status other than success.
pub unsafe fn delete_jetty(j: *mut u::urma_jetty_t) -> u::urma_status_t {
    // SAFETY: the caller passes a live jetty made by `jetty`; its config copy names its JFR.
    let jfr = unsafe { (*j).jetty_cfg.__bindgen_anon_1.shared.jfr };
    // SAFETY: as above; the JFR is deleted only after the jetty that shares it.
    unsafe {
        match u::urma_delete_jetty(j) {
            0 => u::urma_delete_jfr(jfr),
            s => s,
        }
    }
}

pub unsafe fn import_jetty(j: *mut u::urma_jetty_t, token: u32) -> *mut u::urma_target_jetty_t {
    let mut r: u::urma_rjetty_t = Default::default();
    // SAFETY: the caller passes a live jetty handle of the fixture context.
    r.jetty_id = unsafe { (*j).jetty_id };
    r.type_ = u::URMA_JETTY;
    r.trans_mode = u::URMA_TM_RM;
    let mut t = u::urma_token_t { token };
    // SAFETY: the fixture context is live; `r` and `t` are locals the call only reads.
    unsafe { u::urma_import_jetty(lb().ctx, &mut r, &mut t) }
}

/// A registered buffer.
pub struct Seg {
    pub buf: Vec<u8>,
    pub tseg: *mut u::urma_target_seg_t,
}

// SAFETY: `buf` is an owned Vec; `tseg` is the loopback handle registered for it, valid until
// `Drop` unregisters it, and only used through the thread-safe liburma API (the loopback pins a
// segment's memory with an Arc while it copies, so any thread may use or drop the handle).
unsafe impl Send for Seg {}
// SAFETY: `&Seg` only reads the buffer address and the `tseg` handle value; liburma calls made
// with them from several threads are synchronised inside the loopback.
unsafe impl Sync for Seg {}

impl Seg {
    pub fn new(len: usize, access: u32) -> Seg {
        let mut buf = vec![0u8; len];
        // SAFETY: the memory is `buf`'s, which the returned Seg owns and keeps alive (a Vec's
        // heap buffer does not move when the Vec is moved) until `Drop` unregisters it.
        let tseg =
            unsafe { testkit::register_seg(lb(), buf.as_mut_ptr(), len, Some(TOKEN), access) };
        Seg { buf, tseg }
    }
    pub fn rw(len: usize) -> Seg {
        Seg::new(len, u::URMA_ACCESS_READ | u::URMA_ACCESS_WRITE)
    }
    pub fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }
    pub fn import(&self, token: u32) -> *mut u::urma_target_seg_t {
        let mut t = u::urma_token_t { token };
        // SAFETY: `self.tseg` is non-NULL (checked in `new`) and stays registered while `self`
        // lives, so `(*self.tseg).seg` is a valid urma_seg_t; liburma copies it and the token
        // during the call and keeps no pointer to them.
        unsafe {
            u::urma_import_seg(
                lb().ctx,
                &mut (*self.tseg).seg,
                &mut t,
                0,
                Default::default(),
            )
        }
    }
}

impl Drop for Seg {
    fn drop(&mut self) {
        // SAFETY: `self.tseg` was returned by urma_register_seg and is unregistered exactly once,
        // here, while `buf` is still alive (fields drop after this body runs).
        unsafe { u::urma_unregister_seg(self.tseg) };
    }
}

/// A sender (JFS) and a receiver (a jetty with its JFR, see [`jetty`]) on separate JFCs, receiver imported.
pub struct Pair {
    pub sjfc: *mut u::urma_jfc_t,
    pub rjfc: *mut u::urma_jfc_t,
    pub jfs: *mut u::urma_jfs_t,
    pub rjetty: *mut u::urma_jetty_t,
    pub tjetty: *mut u::urma_target_jetty_t,
}
// SAFETY: the fields are loopback handles owned by this Pair (deleted once, in `Drop`) and only
// passed to liburma, which validates and locks every handle internally; they are never
// dereferenced here.
unsafe impl Send for Pair {}
// SAFETY: `&Pair` only posts/polls through the handles; liburma serialises concurrent posts on
// one JFS/jetty and polls on one JFC with its per-queue mutexes.
unsafe impl Sync for Pair {}

impl Pair {
    pub fn new(jfc_depth: u32, rq_depth: u32) -> Pair {
        // SAFETY: the helpers' only precondition is a live loopback context (`lb()`); each
        // handle is asserted non-NULL before it is passed to the next call.
        unsafe {
            let sjfc = jfc(jfc_depth, std::ptr::null_mut());
            let rjfc = jfc(jfc_depth, std::ptr::null_mut());
            let jfs = jfs(sjfc);
            let rjetty = jetty(rjfc, rq_depth);
            let tjetty = import_jetty(rjetty, TOKEN);
            assert!(!tjetty.is_null());
            Pair {
                sjfc,
                rjfc,
                jfs,
                rjetty,
                tjetty,
            }
        }
    }
    pub fn post_recv(&self, user_ctx: u64, sge: Option<(&Seg, u32)>) -> i32 {
        post_jetty_recv(self.rjetty, user_ctx, sge)
    }
}

/// Posts one recv WR (at most one SGE: the first `len` bytes of `seg`) on a jetty.
pub fn post_jetty_recv(
    jetty: *mut u::urma_jetty_t,
    user_ctx: u64,
    sge: Option<(&Seg, u32)>,
) -> i32 {
    let mut s = match sge {
        Some((seg, len)) => u::urma_sge_t {
            addr: seg.addr(),
            len,
            tseg: seg.tseg,
            user_tseg: std::ptr::null_mut(),
        },
        None => u::urma_sge_t::default(),
    };
    let mut wr = u::urma_jfr_wr_t {
        user_ctx,
        ..Default::default()
    };
    if sge.is_some() {
        wr.src = u::urma_sg_t {
            sge: &mut s,
            num_sge: 1,
        };
    }
    let mut bad = std::ptr::null_mut();
    // SAFETY: `wr`, `s` (its SGE) and `bad` are locals alive for the whole call; liburma
    // copies the WR and SGE into its recv queue, keeping only the `seg.buf` address, which
    // the caller's Seg keeps registered; the loopback checks the `jetty` handle.
    unsafe { u::urma_post_jetty_recv_wr(jetty, &mut wr, &mut bad) }
}

impl Drop for Pair {
    fn drop(&mut self) {
        // SAFETY: each handle was created in `new`, is owned by this Pair and is released exactly
        // once, importer before imported jetty and queues before the JFCs they complete to.
        unsafe {
            assert_eq!(u::urma_unimport_jetty(self.tjetty), 0);
            assert_eq!(delete_jetty(self.rjetty), 0);
            assert_eq!(u::urma_delete_jfs(self.jfs), 0);
            assert_eq!(u::urma_delete_jfc(self.sjfc), 0);
            assert_eq!(u::urma_delete_jfc(self.rjfc), 0);
        }
    }
}

pub fn sge(addr: u64, len: u32, tseg: *mut u::urma_target_seg_t) -> u::urma_sge_t {
    u::urma_sge_t {
        addr,
        len,
        tseg,
        user_tseg: std::ptr::null_mut(),
    }
}

/// A WRITE-family WR (src/dst must outlive the post).
pub fn rw_wr(
    op: u32,
    src: &mut u::urma_sge_t,
    dst: &mut u::urma_sge_t,
    tjetty: *mut u::urma_target_jetty_t,
    user_ctx: u64,
    complete: bool,
) -> u::urma_jfs_wr_t {
    let mut wr: u::urma_jfs_wr_t = Default::default();
    wr.opcode = op;
    wr.flag.value = if complete {
        flags::JFS_WR_FLAG_COMPLETE_ENABLE
    } else {
        0
    };
    wr.tjetty = tjetty;
    wr.user_ctx = user_ctx;
    wr.__bindgen_anon_1.rw.src = u::urma_sg_t {
        sge: src,
        num_sge: 1,
    };
    wr.__bindgen_anon_1.rw.dst = u::urma_sg_t {
        sge: dst,
        num_sge: 1,
    };
    wr
}

/// A SEND / SEND_IMM WR with an optional payload SGE.
pub fn send_wr(
    op: u32,
    src: Option<&mut u::urma_sge_t>,
    tjetty: *mut u::urma_target_jetty_t,
    user_ctx: u64,
    imm: u64,
    complete: bool,
) -> u::urma_jfs_wr_t {
    let mut wr: u::urma_jfs_wr_t = Default::default();
    wr.opcode = op;
    wr.flag.value = if complete {
        flags::JFS_WR_FLAG_COMPLETE_ENABLE
    } else {
        0
    };
    wr.tjetty = tjetty;
    wr.user_ctx = user_ctx;
    wr.__bindgen_anon_1.send.imm_data = imm;
    if let Some(s) = src {
        wr.__bindgen_anon_1.send.src = u::urma_sg_t { sge: s, num_sge: 1 };
    }
    wr
}

pub fn post(jfs: *mut u::urma_jfs_t, wr: &mut u::urma_jfs_wr_t) -> (i32, *mut u::urma_jfs_wr_t) {
    let mut bad = std::ptr::null_mut();
    // SAFETY: `wr` is a valid exclusive reference and `bad` a local out-pointer, both alive for
    // the call; the SGEs `wr` points to are owned by the caller and alive across the post
    // (liburma copies the WR and SGE list before returning); `jfs` is checked by the loopback.
    let r = unsafe { u::urma_post_jfs_wr(jfs, wr, &mut bad) };
    (r, bad)
}

pub fn poll(jfc: *mut u::urma_jfc_t, max: usize) -> Vec<u::urma_cr_t> {
    let mut v = vec![u::urma_cr_t::default(); max];
    // SAFETY: `v` holds `max` initialised CRs, so liburma may write up to `max` entries through
    // `v.as_mut_ptr()`; `jfc` is checked against the loopback registry.
    let n = unsafe { u::urma_poll_jfc(jfc, max as i32, v.as_mut_ptr()) };
    assert!(n >= 0);
    v.truncate(n as usize);
    v
}

pub fn poll_n(jfc: *mut u::urma_jfc_t, n: usize, timeout: Duration) -> Vec<u::urma_cr_t> {
    let end = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < end {
        let got = poll(jfc, n - out.len());
        if got.is_empty() {
            std::thread::sleep(Duration::from_micros(100));
        }
        out.extend(got);
    }
    out
}

pub fn s_r(cr: &u::urma_cr_t) -> u8 {
    // SAFETY: urma_cr_flag is a union of a u8 and a one-byte bitfield struct; every bit pattern
    // is a valid u8 and the CR is initialised (default or written by poll).
    unsafe { cr.flag.value & flags::CR_FLAG_S_R }
}
pub fn jetty_bit(cr: &u::urma_cr_t) -> u8 {
    // SAFETY: as in `s_r`: reading the `value` byte of the initialised flag union is always valid.
    unsafe { (cr.flag.value & flags::CR_FLAG_JETTY) >> 1 }
}
pub fn imm(cr: &u::urma_cr_t) -> u64 {
    // SAFETY: the union's members are `imm_data: u64` and an 8-byte struct of two u32 (no
    // padding), so the 8 initialised bytes are always a valid u64.
    unsafe { cr.__bindgen_anon_1.imm_data }
}
