//! The API calls of a scenario run: every call made from the scenario thread, recorded with its symbolic arguments, return value and out-parameters.

use std::ffi::c_void;
use std::ptr::null_mut;

use urma_sys as u;

use crate::fixture::{Loopback, PairArgs, SegArgs};
use crate::harness::record::{self};
use crate::lib_under_test::{
    os_transport_cfg_t, ost_buffer_info_t, ost_device_info_t, task_sync_t, urma_jetty_info_t,
    DEFAULT_CHUNK_SIZE,
};

use super::types::{r32, SendVia, Side};
use super::ScenarioRun;

impl ScenarioRun {
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

    pub(super) fn name_sync(&mut self, p: *mut task_sync_t) -> String {
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

    pub(super) fn forget_sync(&mut self, name: &str) {
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
}
