//! Building and posting work requests through liburma (contract §3.2, §4.1). WRs and SGEs live on the
//! stack: posting allocates nothing.

use crate::chunk;
use crate::inject::{as_status, fault, Point};
use crate::request::SendCtx;
use crate::urma::{RecvQueue, SendQueue, TargetJetty, TargetSeg};
use crate::user_data::UserData;
use std::ptr::null_mut;
use urma_sys::flags::JFS_WR_FLAG_COMPLETE_ENABLE;
use urma_sys::{
    urma_jfr_wr_t, urma_jfs_wr_t, urma_post_jetty_recv_wr, urma_post_jetty_send_wr,
    urma_post_jfr_wr, urma_post_jfs_wr, urma_rw_wr_t, urma_send_wr_t, urma_sg_t, urma_sge_t,
    urma_status_t, URMA_FAIL, URMA_OPC_SEND_IMM, URMA_OPC_WRITE,
};

fn blank_wr() -> urma_jfs_wr_t {
    // SAFETY: urma_jfs_wr_t is a plain C struct (integers, pointers, unions of those); all-zero is valid.
    let mut wr: urma_jfs_wr_t = unsafe { std::mem::zeroed() };
    wr.flag.value = JFS_WR_FLAG_COMPLETE_ENABLE; // complete_enable = 1, inline_flag = 0, rest 0
    wr.next = null_mut();
    wr
}

fn post_send(ctx: &SendCtx, wr: &mut urma_jfs_wr_t) -> urma_status_t {
    if let Some(v) = fault(Point::UrmaWrite) {
        return as_status(v);
    }
    let mut bad: *mut urma_jfs_wr_t = null_mut();
    match ctx.queue {
        // SAFETY: the handle names the application's JFS, alive while the request is in flight
        // (`urma::Jfs::new`); wr and bad are valid for the call.
        Some(SendQueue::Jfs(q)) => unsafe { urma_post_jfs_wr(q.as_ptr(), wr, &mut bad) },
        // SAFETY: as above, for the application's jetty.
        Some(SendQueue::Jetty(j)) => unsafe { urma_post_jetty_send_wr(j.as_ptr(), wr, &mut bad) },
        None => URMA_FAIL,
    }
}

/// Posts the WRITE of chunk `k` of an `n`-chunk send with id `sk`.
pub fn write_chunk(ctx: &SendCtx, sk: u64, n: u8, k: u8) -> urma_status_t {
    let c = chunk::chunk(ctx.src.addr, ctx.dst.addr, ctx.len, k);
    let mut src = urma_sge_t {
        addr: c.src,
        len: c.len,
        tseg: TargetSeg::ptr_or_null(ctx.src.tseg),
        user_tseg: null_mut(),
    };
    let mut dst = urma_sge_t {
        addr: c.dst,
        len: c.len,
        tseg: TargetSeg::ptr_or_null(ctx.dst.tseg),
        user_tseg: null_mut(),
    };
    let mut wr = blank_wr();
    wr.opcode = URMA_OPC_WRITE;
    wr.tjetty = TargetJetty::ptr_or_null(ctx.tjetty);
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
    wr.tjetty = TargetJetty::ptr_or_null(ctx.tjetty);
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
pub fn recv_wr(q: RecvQueue, tseg: Option<TargetSeg>, user_ctx: u64) -> urma_status_t {
    if let Some(v) = fault(Point::UrmaRecv) {
        return as_status(v);
    }
    let mut sge = urma_sge_t {
        addr: 0,
        len: 0,
        tseg: TargetSeg::ptr_or_null(tseg),
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
        // SAFETY: the handle names the application's jetty, alive while it receives through the
        // library (`urma::Jetty::new`); wr and bad are valid for the call.
        RecvQueue::Jetty(j) => unsafe { urma_post_jetty_recv_wr(j.as_ptr(), &mut wr, &mut bad) },
        // SAFETY: as above, for the application's JFR.
        RecvQueue::Jfr(f) => unsafe { urma_post_jfr_wr(f.as_ptr(), &mut wr, &mut bad) },
    }
}
