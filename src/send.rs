//! `os_transport_send` (contract §1.4, §3) and the send worker task.

use crate::abi::{ost_buffer_info_t, task_sync_t, urma_jetty_info_t, ERR};
use crate::chunk::chunk_count;
use crate::instance::{self, apply_locked, register, settle};
use crate::log::{debug, error};
use crate::post;
use crate::sync::{table, token, Kind, SendCtx};
use crate::user_data::{enc, key_valid, UserData, SENTINEL_CHUNK_ID};
use std::ffi::c_void;
use urma_sys::{urma_status_t, URMA_SUCCESS};

/// Server (`user_ctx`) and client (`imm_data`) contexts of send task `k` of `n` (§3.2).
pub fn task_contexts(sk: u64, enc_ck: u64, n: u8, k: u8) -> (UserData, UserData) {
    let server = UserData::new(sk, u8::from(k + 1 >= n - 1), SENTINEL_CHUNK_ID);
    let client = UserData::new(enc_ck, u8::from(k == n - 1), k);
    (server, client)
}

/// Send task `k`: SEND_IMM notifying chunk k, then the WRITE of chunk k+1 if there is one.
pub fn run_task(ctx: &SendCtx, sk: u64, n: u8, k: u8) -> urma_status_t {
    let (server, client) = task_contexts(sk, ctx.enc_ck, n, k);
    let st = post::send_imm(ctx, server.raw(), client.raw());
    if st != URMA_SUCCESS {
        error!(
            "request {:#x}: SEND_IMM of chunk {} failed, status {}",
            sk, k, st
        );
        return st;
    }
    if k + 1 < n {
        let st = post::write_chunk(ctx, sk, n, k + 1);
        if st != URMA_SUCCESS {
            error!(
                "request {:#x}: WRITE of chunk {} failed, status {}",
                sk,
                k + 1,
                st
            );
        }
        return st;
    }
    URMA_SUCCESS
}

/// `os_transport_send`.
///
/// # Safety
/// Pointer arguments are NULL or valid for their types (C caller contract).
#[allow(clippy::too_many_arguments)]
pub unsafe fn send(
    handle: *mut c_void,
    jetty_info: *mut urma_jetty_info_t,
    local_src: *mut ost_buffer_info_t,
    remote_dst: *mut ost_buffer_info_t,
    len: u32,
    sk: u64,
    ck: u64,
    ret: *mut *mut task_sync_t,
    status: *mut urma_status_t,
) -> u32 {
    if !ret.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *ret = std::ptr::null_mut() };
    }
    if !status.is_null() {
        // SAFETY: valid out-pointer.
        unsafe { *status = URMA_SUCCESS };
    }
    if handle.is_null()
        || jetty_info.is_null()
        || local_src.is_null()
        || remote_dst.is_null()
        || ret.is_null()
        || len == 0
    {
        error!("os_transport_send: invalid argument (NULL pointer or len 0)");
        return ERR;
    }
    let Some(inst) = instance::get(handle) else {
        error!("os_transport_send: not initialized or bad handle");
        return ERR;
    };
    if !key_valid(sk) || !key_valid(ck) {
        error!(
            "os_transport_send: server_key {:#x} or client_key {:#x} exceeds 40 bits",
            sk, ck
        );
        return ERR;
    }
    let Some(n) = chunk_count(len) else {
        error!("os_transport_send: len {} needs more than 7 chunks", len);
        return ERR;
    };
    // SAFETY: non-NULL pointers to caller-owned structs (checked above).
    let (ji, src, dst) = unsafe { (*jetty_info, *local_src, *remote_dst) };
    let ctx = SendCtx {
        jfs: ji.jfs.cast(),
        jetty: ji.jetty.cast(),
        tjetty: ji.tjetty.cast(),
        src: src.addr,
        src_tseg: src.tseg.cast(),
        dst: dst.addr,
        dst_tseg: dst.tseg.cast(),
        len,
        enc_ck: enc(ck),
    };
    let Ok((idx, gen)) = register(&inst, Kind::Send, sk, n, |r| r.send = ctx) else {
        return ERR;
    };
    // SAFETY: valid out-pointer (checked above). Set before the first post, like legacy.
    unsafe { *ret = token(idx, gen) as *mut task_sync_t };
    debug!(
        1,
        "send {:#x}: {} bytes in {} chunks to client {:#x}", sk, len, n, ck
    );
    let st = post::write_chunk(&ctx, sk, n, 0);
    if st != URMA_SUCCESS {
        error!(
            "os_transport_send {:#x}: first WRITE failed, status {}",
            sk, st
        );
        if !status.is_null() {
            // SAFETY: valid out-pointer.
            unsafe { *status = st };
        }
        let mut t = inst.reqs(sk);
        let slot = table().slot(idx);
        let mut r = slot.lock();
        if r.live && r.gen == gen {
            r.record_status(st); // divergence D8: the first-chunk status is also reported by wait
            r.fail();
            let c = settle(idx, slot, &mut r);
            drop(r);
            apply_locked(&mut t, &c);
            drop(t);
            c.wake(slot);
        }
        return ERR;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: u8) -> Vec<(u64, u64)> {
        let sk = 0x123456789A;
        let e = enc(0xABCDE12345);
        (0..n)
            .map(|k| task_contexts(sk, e, n, k))
            .map(|(s, c)| (s.raw(), c.raw()))
            .collect()
    }

    #[test]
    fn n2_matches_recorded_trace() {
        let v = seq(2);
        assert_eq!(v[0], (0xF00000123456789A, 0x0ABCDE0000012345));
        assert_eq!(v[1].1, 0x3ABCDE0000012345);
        assert_eq!(
            UserData::from_raw(v[1].0),
            UserData::new(0x123456789A, 1, 7)
        );
    }

    #[test]
    fn n3_and_n7_types() {
        let v = seq(3);
        let ty = |x: u64| UserData::from_raw(x).chunk_type;
        assert_eq!([ty(v[0].0), ty(v[1].0), ty(v[2].0)], [0, 1, 1]);
        assert_eq!([ty(v[0].1), ty(v[1].1), ty(v[2].1)], [0, 0, 1]);
        let v = seq(7);
        for (k, (s, c)) in v.iter().enumerate() {
            assert_eq!(
                UserData::from_raw(*s),
                UserData::new(0x123456789A, u8::from(k >= 5), 7)
            );
            assert_eq!(
                UserData::from_raw(*c),
                UserData::new(enc(0xABCDE12345), u8::from(k == 6), k as u8)
            );
        }
    }

    #[test]
    fn d1_single_chunk_notifies_as_last() {
        let v = seq(1);
        assert_eq!(
            UserData::from_raw(v[0].1),
            UserData::new(enc(0xABCDE12345), 1, 0)
        );
        assert_eq!(UserData::from_raw(v[0].0).chunk_id, 7);
    }
}
