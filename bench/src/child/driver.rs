//! The request driver of a one-process cell: send + recv pairs submitted and waited for in order, closed-loop or paced.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::time::{Duration, Instant};

use super::callbacks::on_chunk;
use testkit::os_transport::{ost_buffer_info_t, ost_device_info_t, task_sync_t, urma_jetty_info_t};
use testkit::OsTransportLib;
use urma_sys as u;

pub(super) struct Io {
    pub(super) ji: urma_jetty_info_t,
    pub(super) src: ost_buffer_info_t,
    pub(super) dsts: Vec<(ost_buffer_info_t, ost_buffer_info_t, ost_device_info_t)>,
}

pub(super) struct Pending {
    ss: *mut task_sync_t,
    rs: *mut task_sync_t,
}

/// The request driver of a one-process cell: submits send + recv pairs and waits for them in
/// order.
pub struct Driver<'a> {
    pub(super) lib: &'a OsTransportLib,
    pub(super) h: *mut c_void,
    pub(super) io: Io,
    pub(super) len: u32,
    pub(super) ring: VecDeque<Pending>,
    pub(super) next: u64,
}

/// `os_transport_recv` of `len` bytes for client key `ck` into `host`/`dev`, with the bench's
/// chunk callback; returns the recv sync.
pub(crate) fn post_recv(
    lib: &OsTransportLib,
    h: *mut c_void,
    mut host: ost_buffer_info_t,
    mut dev: ost_device_info_t,
    len: u32,
    ck: u64,
) -> Result<*mut task_sync_t, String> {
    let mut rs: *mut task_sync_t = std::ptr::null_mut();
    // SAFETY: valid pointers for the call; buffers and endpoints outlive the request.
    let r = unsafe {
        (lib.os_transport_recv)(h, &mut host, &mut dev, len, ck, &mut rs, Some(on_chunk))
    };
    if r != 0 || rs.is_null() {
        return Err(format!("os_transport_recv({ck}) returned {r:#x}"));
    }
    Ok(rs)
}

/// `os_transport_send` of `len` bytes from `src` to `remote` (server key `sk`, client key
/// `ck`); returns the send sync.
pub(crate) fn post_send(
    lib: &OsTransportLib,
    h: *mut c_void,
    ji: &mut urma_jetty_info_t,
    mut src: ost_buffer_info_t,
    mut remote: ost_buffer_info_t,
    len: u32,
    (sk, ck): (u64, u64),
) -> Result<*mut task_sync_t, String> {
    let mut ss: *mut task_sync_t = std::ptr::null_mut();
    let mut st: u::urma_status_t = 0;
    // SAFETY: as for post_recv.
    let r = unsafe {
        (lib.os_transport_send)(h, ji, &mut src, &mut remote, len, sk, ck, &mut ss, &mut st)
    };
    if r != 0 || ss.is_null() {
        return Err(format!(
            "os_transport_send({sk}) returned {r:#x} status {st}"
        ));
    }
    Ok(ss)
}

/// `wait_and_free_sync` on a sync returned by [`post_recv`] or [`post_send`] (consumed here);
/// an error unless it returned 0 with a successful status.
pub(crate) fn wait_sync(
    lib: &OsTransportLib,
    h: *mut c_void,
    what: &str,
    s: *mut task_sync_t,
) -> Result<(), String> {
    let mut st: u::urma_status_t = 0;
    // SAFETY: s is a live sync returned by send/recv, consumed exactly once here.
    let r = unsafe { (lib.wait_and_free_sync)(h, s, &mut st) };
    if r != 0 || st != u::URMA_SUCCESS {
        return Err(format!("wait on {what} sync returned {r:#x} status {st}"));
    }
    Ok(())
}

/// The keys of request `k`: client key (even) and server key (odd), below 2^20 (identity
/// transport encoding) and unique among 2^18 requests in flight.
pub(crate) fn keys(k: u64) -> (u64, u64) {
    let ck = 2 * (k % (1 << 18)) + 2;
    (ck + 1, ck)
}

impl Driver<'_> {
    fn submit(&mut self) -> Result<(), String> {
        let k = self.next;
        self.next += 1;
        let (sk, ck) = keys(k);
        let d = (k % self.io.dsts.len() as u64) as usize;
        let (remote, host, dev) = self.io.dsts[d];
        let rs = post_recv(self.lib, self.h, host, dev, self.len, ck)?;
        let ss = post_send(
            self.lib,
            self.h,
            &mut self.io.ji,
            self.io.src,
            remote,
            self.len,
            (sk, ck),
        )?;
        self.ring.push_back(Pending { ss, rs });
        Ok(())
    }

    fn complete_one(&mut self) -> Result<(), String> {
        let p = self.ring.pop_front().ok_or("nothing in flight")?;
        wait_sync(self.lib, self.h, "send", p.ss)?;
        wait_sync(self.lib, self.h, "recv", p.rs)
    }

    /// Submits until `depth` pairs are in flight.
    pub fn fill(&mut self, depth: usize) -> Result<(), String> {
        while self.ring.len() < depth {
            self.submit()?;
        }
        Ok(())
    }

    /// Waits for every pair in flight.
    pub fn drain(&mut self) -> Result<(), String> {
        while !self.ring.is_empty() {
            self.complete_one()?;
        }
        Ok(())
    }

    /// One completion followed by one submission (closed loop at `depth`).
    pub fn step(&mut self) -> Result<(), String> {
        self.complete_one()?;
        self.submit()
    }
}

impl Driver<'_> {
    /// Paced load: pair `i` is due at `start + i / rate`. Every pair that is due is submitted
    /// (at most `max_inflight` in flight), then the oldest is waited for; with nothing in flight
    /// the driver sleeps until the next pair is due. When the library falls more than
    /// `max_inflight` intervals behind, the excess offered load is dropped (the achieved rate
    /// shows it). Returns the pairs completed before `window` ended.
    pub fn paced(
        &mut self,
        rate: u64,
        window: Duration,
        max_inflight: usize,
    ) -> Result<u64, String> {
        let interval = Duration::from_nanos(1_000_000_000 / rate.max(1));
        let lag_cap = interval * max_inflight as u32;
        let t0 = Instant::now();
        let mut due = t0;
        let mut done = 0u64;
        loop {
            let now = Instant::now();
            if now.duration_since(t0) >= window {
                return Ok(done);
            }
            if now > due + lag_cap {
                due = now - lag_cap;
            }
            while due <= now && self.ring.len() < max_inflight {
                self.submit()?;
                due += interval;
            }
            if self.ring.is_empty() {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            } else {
                self.complete_one()?;
                done += 1;
            }
        }
    }
}
