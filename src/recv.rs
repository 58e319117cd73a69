//! `os_transport_recv` (contract §1.5, §4): registration, recv-queue prefill and re-post.

use crate::abi::{notify_callback_t, task_sync_t, Out, ERR};
use crate::chunk::chunk_count;
use crate::instance::Instance;
use crate::log::{debug, error, warning};
use crate::post;
use crate::request::{self, token, Job};
use crate::urma::{RecvQueue, TargetSeg};
use crate::user_data::{key_valid, UserData};
use ranked_lock::lock;
use urma_sys::{urma_status_t, URMA_ENOMEM, URMA_FAIL, URMA_SUCCESS};

/// Decoded immediate that receive task `i` of `n` waits for (§4.2).
pub fn expected_key(ck: u64, n: u8, i: u8) -> u64 {
    UserData::new(ck, u8::from(i + 1 == n), i).raw()
}

/// Prefills `recv_queue_capacity × 4` recv WRs when the recv's queue differs from the recorded one.
/// The queue is the jetty, or (divergence D6) the JFR when there is no jetty.
fn prefill(inst: &Instance, target: RecvQueue, tseg: Option<TargetSeg>, ck: u64) -> urma_status_t {
    if inst.recvq_word.load() == Some(target) {
        return URMA_SUCCESS;
    }
    let mut q = lock(&inst.recvq);
    if *q == Some(target) {
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
        *q = Some(target);
        inst.recvq_word.store(target);
        debug!(
            1,
            "recv {:#x}: prefilled {} recv WRs (status {})", ck, posted, st
        );
    }
    st
}

/// Re-posts one recv WR `{0, 0, NULL}`, user_ctx 0, on the recorded queue (§4.1).
pub fn repost(inst: &Instance) -> urma_status_t {
    let q = inst.recvq_word.load().or_else(|| *lock(&inst.recvq));
    let st = match q {
        Some(q) => post::recv_wr(q, None, 0),
        None => URMA_FAIL,
    };
    if st != URMA_SUCCESS {
        warning!("re-post of a recv WR failed, status {}", st);
    }
    st
}

/// The arguments of `os_transport_recv`, the caller's URMA objects as handles (`len` may still be
/// out of range).
pub struct RecvArgs {
    /// `host_src->tseg` (goes into the prefilled recv WRs)
    pub tseg: Option<TargetSeg>,
    /// `device_dst->jetty`, else (divergence D6) `device_dst->jfr`
    pub queue: RecvQueue,
    /// `len` (not 0)
    pub len: u32,
    /// `client_key`
    pub ck: u64,
    /// `notify_callback` (not NULL)
    pub cb: notify_callback_t,
}

/// `os_transport_recv` with a validated instance, `ret` already reset: registers the receive,
/// prefills the recv WRs, arms it and stores its sync in `ret`.
pub fn recv(inst: &Instance, a: RecvArgs, mut ret: Out<'_, *mut task_sync_t>) -> u32 {
    let RecvArgs { len, ck, .. } = a;
    if !key_valid(ck) {
        error!("os_transport_recv: client_key {:#x} exceeds 40 bits", ck);
        return ERR;
    }
    let Some(n) = chunk_count(len) else {
        error!("os_transport_recv: len {} needs more than 7 chunks", len);
        return ERR;
    };
    let Ok((idx, gen)) =
        request::register(&inst.reqs, &inst.pool, inst.seq, ck, n, Job::Recv(a.cb))
    else {
        return ERR;
    };
    let st = prefill(inst, a.queue, a.tseg, ck);
    if st != URMA_SUCCESS && st != URMA_ENOMEM {
        error!(
            "os_transport_recv {:#x}: recv prefill failed, status {}",
            ck, st
        );
        // Legacy leaks the request here (§10 #4); we release it.
        if let Some(mut r) = inst.reqs.locked(ck, idx, gen) {
            r.fail();
            r.release();
        }
        return ERR;
    }
    request::arm(&inst.reqs, &inst.pool, ck, idx, gen);
    ret.set(token(idx, gen) as *mut task_sync_t);
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
