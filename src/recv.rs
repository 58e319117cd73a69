//! `os_transport_recv` (contract §1.5, §4): registration, recv-queue prefill and re-post.

use crate::abi::{notify_callback_t, ost_buffer_info_t, ost_device_info_t, task_sync_t, ERR};
use crate::chunk::chunk_count;
use crate::instance::{self, apply_locked, register, settle, Instance};
use crate::log::{debug, error, warning};
use crate::post::{self, RecvQueue};
use crate::sync::{table, token, Kind};
use crate::user_data::{key_valid, UserData};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use urma_sys::{urma_status_t, urma_target_seg_t, URMA_ENOMEM, URMA_FAIL, URMA_SUCCESS};

/// Decoded immediate that receive task `i` of `n` waits for (§4.2).
pub fn expected_key(ck: u64, n: u8, i: u8) -> u64 {
    UserData::new(ck, u8::from(i + 1 == n), i).raw()
}

/// Prefills `recv_queue_capacity × 4` recv WRs when the recv's queue differs from the recorded one.
/// The queue is the jetty, or (divergence D6) the JFR when there is no jetty.
fn prefill(
    inst: &Instance,
    target: RecvQueue,
    tseg: *mut urma_target_seg_t,
    ck: u64,
) -> urma_status_t {
    if RecvQueue::decode(inst.recvq_word.load(Ordering::Acquire)) == Some(target) {
        return URMA_SUCCESS;
    }
    let mut q = inst.recvq.lock().unwrap_or_else(|e| e.into_inner());
    if *q == target {
        return URMA_SUCCESS;
    }
    let count = inst.recv_cap.wrapping_mul(4);
    let mut st = URMA_SUCCESS;
    let mut posted = 0u32;
    for _ in 0..count {
        st = post::recv_wr(target, tseg, ck);
        if st != URMA_SUCCESS {
            break;
        }
        posted += 1;
    }
    if st == URMA_SUCCESS || st == URMA_ENOMEM {
        *q = target;
        inst.recvq_word.store(target.encode(), Ordering::Release);
        debug!(
            1,
            "recv {:#x}: prefilled {} recv WRs (status {})", ck, posted, st
        );
    }
    st
}

/// Re-posts one recv WR `{0, 0, NULL}`, user_ctx 0, on the recorded queue (§4.1).
pub fn repost(inst: &Instance) -> urma_status_t {
    let q = RecvQueue::decode(inst.recvq_word.load(Ordering::Acquire))
        .unwrap_or_else(|| *inst.recvq.lock().unwrap_or_else(|e| e.into_inner()));
    let st = if q == RecvQueue::None {
        URMA_FAIL
    } else {
        post::recv_wr(q, std::ptr::null_mut(), 0)
    };
    if st != URMA_SUCCESS {
        warning!("re-post of a recv WR failed, status {}", st);
    }
    st
}

/// `os_transport_recv`.
///
/// # Safety
/// Pointer arguments are NULL or valid for their types (C caller contract).
pub unsafe fn recv(
    handle: *mut c_void,
    host_src: *mut ost_buffer_info_t,
    device_dst: *mut ost_device_info_t,
    len: u32,
    ck: u64,
    ret: *mut *mut task_sync_t,
    cb: notify_callback_t,
) -> u32 {
    if !ret.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *ret = std::ptr::null_mut() };
    }
    if handle.is_null()
        || host_src.is_null()
        || device_dst.is_null()
        || ret.is_null()
        || cb.is_none()
        || len == 0
    {
        error!("os_transport_recv: invalid argument (NULL pointer or len 0)");
        return ERR;
    }
    // SAFETY: non-NULL pointers to caller-owned structs (checked above).
    let (src, dev) = unsafe { (*host_src, *device_dst) };
    if dev.jetty.is_null() && dev.jfr.is_null() {
        error!("os_transport_recv: device_dst has neither jetty nor jfr");
        return ERR;
    }
    let Some(inst) = instance::get(handle) else {
        error!("os_transport_recv: not initialized or bad handle");
        return ERR;
    };
    if !key_valid(ck) {
        error!("os_transport_recv: client_key {:#x} exceeds 40 bits", ck);
        return ERR;
    }
    let Some(n) = chunk_count(len) else {
        error!("os_transport_recv: len {} needs more than 7 chunks", len);
        return ERR;
    };
    let Ok((idx, gen)) = register(&inst, Kind::Recv, ck, n, |r| {
        r.pending = ((1u16 << n) - 1) as u8;
        r.cb = cb;
        r.arming = true;
    }) else {
        return ERR;
    };
    let target = if dev.jetty.is_null() {
        RecvQueue::Jfr(dev.jfr as usize)
    } else {
        RecvQueue::Jetty(dev.jetty as usize)
    };
    let st = prefill(&inst, target, src.tseg, ck);
    if st != URMA_SUCCESS && st != URMA_ENOMEM {
        error!(
            "os_transport_recv {:#x}: recv prefill failed, status {}",
            ck, st
        );
        // Legacy leaks the request here (§10 #4); we release it.
        let mut t = inst.reqs(ck);
        let slot = table().slot(idx);
        let mut r = slot.lock();
        if r.live && r.gen == gen {
            r.fail();
            r.released = true;
            let c = settle(idx, slot, &mut r);
            drop(r);
            apply_locked(&mut t, &c);
            drop(t);
            c.wake(slot);
        }
        return ERR;
    }
    instance::arm(&inst, ck, idx, gen);
    // SAFETY: valid out-pointer (checked above).
    unsafe { *ret = token(idx, gen) as *mut task_sync_t };
    debug!(
        1,
        "recv {:#x}: {} bytes in {} chunks registered", ck, len, n
    );
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_keys() {
        assert_eq!(expected_key(0xABCDE12345, 1, 0), 0x1000_00AB_CDE1_2345);
        assert_eq!(expected_key(5, 3, 0), 5);
        assert_eq!(expected_key(5, 3, 1), 5 | 1 << 61);
        assert_eq!(expected_key(5, 3, 2), 5 | 1 << 60 | 2 << 61);
    }
}
