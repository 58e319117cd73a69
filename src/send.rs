//! `os_transport_send` (contract §1.4, §3) and the send worker task.

use crate::abi::{task_sync_t, Out, ERR};
use crate::chunk::chunk_count;
use crate::inject::{as_return, as_status, fault, Point};
use crate::instance::Instance;
use crate::log::{debug, error};
use crate::post;
use crate::request::{self, token, Job, SendCtx};
use crate::urma::{Buffer, SendQueue, TargetJetty};
use crate::user_data::{enc, key_valid, UserData, SENTINEL_CHUNK_ID};
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

/// The arguments of `os_transport_send`, the caller's URMA objects as handles (`len` may still be
/// out of range).
pub struct SendArgs {
    /// `jetty_info->jfs`, else `jetty_info->jetty`
    pub queue: Option<SendQueue>,
    /// `jetty_info->tjetty`
    pub tjetty: Option<TargetJetty>,
    /// `local_src`
    pub src: Buffer,
    /// `remote_dst`
    pub dst: Buffer,
    /// `len` (not 0)
    pub len: u32,
    /// `server_key`
    pub sk: u64,
    /// `client_key`
    pub ck: u64,
}

/// `os_transport_send` with a validated instance, its out-parameters already reset: registers the
/// request, stores its sync in `ret` and posts the WRITE of chunk 0 (a failure also goes to
/// `status`).
pub fn send(
    inst: &Instance,
    a: SendArgs,
    mut ret: Out<'_, *mut task_sync_t>,
    status: Option<Out<'_, urma_status_t>>,
) -> u32 {
    let SendArgs {
        queue,
        tjetty,
        src,
        dst,
        len,
        sk,
        ck,
    } = a;
    if !key_valid(sk) || !key_valid(ck) {
        error!(
            "os_transport_send: server_key {:#x} or client_key {:#x} exceeds 40 bits",
            sk, ck
        );
        return ERR;
    }
    if let Some(v) = fault(Point::SendBegin) {
        return as_return(v);
    }
    let Some(n) = chunk_count(len) else {
        error!("os_transport_send: len {} needs more than 7 chunks", len);
        return ERR;
    };
    if fault(Point::TaskGroupAlloc).is_some() {
        return ERR;
    }
    let ctx = SendCtx {
        queue,
        tjetty,
        src,
        dst,
        len,
        enc_ck: enc(ck),
    };
    let Ok((idx, gen)) = request::register(&inst.reqs, &inst.pool, inst.seq, sk, n, Job::Send(ctx))
    else {
        return ERR;
    };
    // Set before the first post, like legacy.
    ret.set(token(idx, gen) as *mut task_sync_t);
    debug!(
        1,
        "send {:#x}: {} bytes in {} chunks to client {:#x}", sk, len, n, ck
    );
    let st = match fault(Point::SendFirstChunk) {
        Some(v) => as_status(v),
        None => post::write_chunk(&ctx, sk, n, 0),
    };
    if st != URMA_SUCCESS {
        error!(
            "os_transport_send {:#x}: first WRITE failed, status {}",
            sk, st
        );
        if let Some(mut status) = status {
            status.set(st);
        }
        if let Some(mut r) = inst.reqs.locked(sk, idx, gen) {
            r.record_status(st); // divergence D8: the first-chunk status is also reported by wait
            r.fail();
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
