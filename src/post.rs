//! Building and posting work requests through liburma (contract §3.2, §4.1). WRs and SGEs live on the
//! stack: posting allocates nothing.

use crate::chunk;
use crate::request::SendCtx;
use crate::user_data::UserData;
use std::ptr::null_mut;
use urma_sys::flags::JFS_WR_FLAG_COMPLETE_ENABLE;
use urma_sys::{
    urma_jetty_t, urma_jfr_t, urma_jfr_wr_t, urma_jfs_t, urma_jfs_wr_t, urma_post_jetty_recv_wr,
    urma_post_jetty_send_wr, urma_post_jfr_wr, urma_post_jfs_wr, urma_rw_wr_t, urma_send_wr_t,
    urma_sg_t, urma_sge_t, urma_status_t, urma_target_seg_t, URMA_FAIL, URMA_OPC_SEND_IMM,
    URMA_OPC_WRITE,
};

/// A receive queue: the jetty (preferred) or the JFR of a recv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvQueue {
    /// nothing recorded yet
    None,
    /// `urma_jetty_t *`
    Jetty(usize),
    /// `urma_jfr_t *`
    Jfr(usize),
}

const TAG_SHIFT: u32 = 62;
const ADDR_MASK: u64 = (1 << TAG_SHIFT) - 1;

impl RecvQueue {
    /// One-word form for lock-free readers: tag in the top 2 bits, address below. 0 (also for an
    /// address that does not fit, which no user-space pointer has) means "ask the lock".
    pub fn encode(self) -> u64 {
        let (tag, a) = match self {
            RecvQueue::None => return 0,
            RecvQueue::Jetty(a) => (1u64, a as u64),
            RecvQueue::Jfr(a) => (2u64, a as u64),
        };
        if a & !ADDR_MASK != 0 {
            0
        } else {
            (tag << TAG_SHIFT) | a
        }
    }

    /// Inverse of [`RecvQueue::encode`]; `None` for 0.
    pub fn decode(v: u64) -> Option<RecvQueue> {
        let a = (v & ADDR_MASK) as usize;
        match v >> TAG_SHIFT {
            1 => Some(RecvQueue::Jetty(a)),
            2 => Some(RecvQueue::Jfr(a)),
            _ => None,
        }
    }
}

fn blank_wr() -> urma_jfs_wr_t {
    // SAFETY: urma_jfs_wr_t is a plain C struct (integers, pointers, unions of those); all-zero is valid.
    let mut wr: urma_jfs_wr_t = unsafe { std::mem::zeroed() };
    wr.flag.value = JFS_WR_FLAG_COMPLETE_ENABLE; // complete_enable = 1, inline_flag = 0, rest 0
    wr.next = null_mut();
    wr
}

fn post_send(ctx: &SendCtx, wr: &mut urma_jfs_wr_t) -> urma_status_t {
    let mut bad: *mut urma_jfs_wr_t = null_mut();
    if !ctx.jfs.is_null() {
        // SAFETY: jfs is the application's live JFS (API contract); wr and bad are valid for the call.
        unsafe { urma_post_jfs_wr(ctx.jfs.cast::<urma_jfs_t>(), wr, &mut bad) }
    } else if !ctx.jetty.is_null() {
        // SAFETY: as above, for the application's jetty.
        unsafe { urma_post_jetty_send_wr(ctx.jetty.cast::<urma_jetty_t>(), wr, &mut bad) }
    } else {
        URMA_FAIL
    }
}

/// Posts the WRITE of chunk `k` of an `n`-chunk send with id `sk`.
pub fn write_chunk(ctx: &SendCtx, sk: u64, n: u8, k: u8) -> urma_status_t {
    let c = chunk::chunk(ctx.src, ctx.dst, ctx.len, k);
    let mut src = urma_sge_t {
        addr: c.src,
        len: c.len,
        tseg: ctx.src_tseg.cast::<urma_target_seg_t>(),
        user_tseg: null_mut(),
    };
    let mut dst = urma_sge_t {
        addr: c.dst,
        len: c.len,
        tseg: ctx.dst_tseg.cast::<urma_target_seg_t>(),
        user_tseg: null_mut(),
    };
    let mut wr = blank_wr();
    wr.opcode = URMA_OPC_WRITE;
    wr.tjetty = ctx.tjetty.cast();
    wr.user_ctx = UserData::new(sk, u8::from(k + 1 == n), k).raw();
    wr.__bindgen_anon_1.rw = urma_rw_wr_t {
        src: urma_sg_t {
            sge: &mut src,
            num_sge: 1,
        },
        dst: urma_sg_t {
            sge: &mut dst,
            num_sge: 1,
        },
        target_hint: 0,
        notify_data: 0,
    };
    post_send(ctx, &mut wr)
}

/// Posts a zero-length SEND_IMM with the given `user_ctx` and immediate.
pub fn send_imm(ctx: &SendCtx, user_ctx: u64, imm: u64) -> urma_status_t {
    let mut wr = blank_wr();
    wr.opcode = URMA_OPC_SEND_IMM;
    wr.tjetty = ctx.tjetty.cast();
    wr.user_ctx = user_ctx;
    wr.__bindgen_anon_1.send = urma_send_wr_t {
        src: urma_sg_t {
            sge: null_mut(),
            num_sge: 0,
        },
        target_hint: 0,
        imm_data: imm,
        tseg: null_mut(),
    };
    post_send(ctx, &mut wr)
}

/// Posts one zero-length recv WR `{addr 0, len 0, tseg}` with `user_ctx`.
pub fn recv_wr(q: RecvQueue, tseg: *mut urma_target_seg_t, user_ctx: u64) -> urma_status_t {
    let mut sge = urma_sge_t {
        addr: 0,
        len: 0,
        tseg,
        user_tseg: null_mut(),
    };
    let mut wr = urma_jfr_wr_t {
        src: urma_sg_t {
            sge: &mut sge,
            num_sge: 1,
        },
        user_ctx,
        next: null_mut(),
    };
    let mut bad: *mut urma_jfr_wr_t = null_mut();
    match q {
        // SAFETY: the queue is the application's live jetty (API contract); wr/bad valid for the call.
        RecvQueue::Jetty(j) => unsafe {
            urma_post_jetty_recv_wr(j as *mut urma_jetty_t, &mut wr, &mut bad)
        },
        // SAFETY: as above, for the application's JFR.
        RecvQueue::Jfr(f) => unsafe { urma_post_jfr_wr(f as *mut urma_jfr_t, &mut wr, &mut bad) },
        RecvQueue::None => URMA_FAIL,
    }
}

#[cfg(test)]
mod tests {
    use super::RecvQueue;

    #[test]
    fn recv_queue_word_round_trips_or_defers_to_the_lock() {
        for q in [
            RecvQueue::Jetty(0x7f00_1234_5670),
            RecvQueue::Jfr(0x5555_0000_0008),
            RecvQueue::Jfr(8),
        ] {
            assert_eq!(RecvQueue::decode(q.encode()), Some(q));
        }
        assert_eq!(RecvQueue::None.encode(), 0);
        assert_eq!(RecvQueue::decode(0), None);
        assert_eq!(
            RecvQueue::Jetty(usize::MAX).encode(),
            0,
            "does not fit: readers lock"
        );
        assert_ne!(RecvQueue::Jetty(16).encode(), RecvQueue::Jfr(16).encode());
    }
}
