//! Integration tests of the loopback provider through the real URMA API.
//! Run with `LD_LIBRARY_PATH=<target-dir>/debug`.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::target;

const T: Duration = Duration::from_secs(5);

/// loopback0 is a UB device and refuses what the URMA core refuses for one before a provider
/// sees it: a jetty with a receive queue of its own, a queue whose transport mode is none of RM,
/// RC and UM. Over the genuine core the same calls fail in the core.
#[test]
fn a_ub_device_refuses_an_unshared_jetty_and_a_queue_without_transport_mode() {
    let _g = serial();
    // SAFETY: fixture context; every config is a local the calls only read; the objects made
    // are deleted before the test ends.
    unsafe {
        let jfc = jfc(16, std::ptr::null_mut());
        let mut rc = jfr_cfg(jfc, 8);
        let mut c: u::urma_jetty_cfg_t = Default::default();
        c.jfs_cfg.depth = 16;
        c.jfs_cfg.jfc = jfc;
        c.jfs_cfg.max_sge = 1;
        c.jfs_cfg.trans_mode = u::URMA_TM_RM;
        c.__bindgen_anon_1.jfr_cfg = &mut rc;
        assert!(
            u::urma_create_jetty(lb().ctx, &mut c).is_null(),
            "unshared jetty"
        );

        let mut sc: u::urma_jfs_cfg_t = Default::default();
        sc.depth = 16;
        sc.jfc = jfc;
        sc.max_sge = 1;
        assert!(
            u::urma_create_jfs(lb().ctx, &mut sc).is_null(),
            "JFS, mode 0"
        );
        rc.trans_mode = 0;
        assert!(
            u::urma_create_jfr(lb().ctx, &mut rc).is_null(),
            "JFR, mode 0"
        );

        // The same configurations with a mode and a shared JFR are accepted.
        sc.trans_mode = u::URMA_TM_RC;
        let s = u::urma_create_jfs(lb().ctx, &mut sc);
        assert!(!s.is_null());
        let j = jetty(jfc, 8);
        assert_eq!(delete_jetty(j), 0);
        assert_eq!(u::urma_delete_jfs(s), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

#[test]
fn device_context_and_queries() {
    let _g = serial();
    let lb = lb();
    // SAFETY: every out-pointer is a live local; the device list is dereferenced only after the
    // loopback reported 1 entry (it allocates 2 slots, the 2nd a NULL terminator) and is freed
    // once; `dev.name` is a NUL-terminated char array inside the process-lifetime device; the
    // eid list is read after cnt == 1 and freed once; `logf` is a `'static` fn; every handle
    // passed is live (`lb`) or deliberately stale/NULL, which the loopback rejects by lookup.
    unsafe {
        let mut n = 0;
        let list = u::urma_get_device_list(&mut n);
        assert_eq!(n, 1);
        assert_eq!(*list, lb.dev);
        assert!((*list.add(1)).is_null());
        u::urma_free_device_list(list);
        let name = std::ffi::CStr::from_ptr((*lb.dev).name.as_ptr());
        assert_eq!(name.to_str().unwrap(), "loopback0");
        let mut cnt = 0u32;
        let eids = u::urma_get_eid_list(lb.dev, &mut cnt);
        assert_eq!(cnt, 1);
        assert_eq!((*eids).eid_index, 0);
        u::urma_free_eid_list(eids);
        let mut attr: u::urma_device_attr_t = Default::default();
        assert_eq!(u::urma_query_device(lb.dev, &mut attr), 0);
        assert!(attr.dev_cap.max_jfc_depth >= 65536);
        assert!(attr.dev_cap.max_jfs_sge >= 1 && attr.dev_cap.max_jfr_sge >= 1);
        assert_eq!(attr.port_cnt, 1);
        assert!(u::urma_get_device_by_name(c"nope".as_ptr() as *mut _).is_null());
        assert!(u::urma_create_context(lb.dev, 1).is_null());
        let ctx = u::urma_create_context(lb.dev, 0);
        assert!(!ctx.is_null());
        assert_eq!(u::urma_delete_context(ctx), 0);
        assert_eq!(u::urma_delete_context(ctx), u::URMA_EINVAL);
        extern "C" fn logf(_l: i32, _m: *mut std::ffi::c_char) {}
        assert_eq!(u::urma_register_log_func(Some(logf)), 0);
        assert_eq!(u::urma_register_log_func(None), u::URMA_EINVAL);
        // token ids
        let t = u::urma_alloc_token_id(lb.ctx);
        assert!(!t.is_null());
        assert_eq!(u::urma_free_token_id(t), 0);
        assert_eq!(u::urma_free_token_id(t), u::URMA_EINVAL);
    }
}

#[test]
fn write_and_poll() {
    let _g = serial();
    let p = Pair::new(64, 16);
    let mut src = Seg::rw(8192);
    src.buf
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 7) as u8);
    let dst = Seg::rw(8192);
    let rdst = dst.import(TOKEN);
    assert!(!rdst.is_null());
    let mut s = sge(src.addr() + 100, 4000, src.tseg);
    let mut d = sge(dst.addr() + 10, 4000, rdst);
    let mut wr = rw_wr(
        u::URMA_OPC_WRITE,
        &mut s,
        &mut d,
        p.tjetty,
        0x1122_3344_5566_7788,
        true,
    );
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let crs = poll_n(p.sjfc, 1, T);
    assert_eq!(crs.len(), 1);
    let cr = crs[0];
    assert_eq!(cr.status, u::URMA_CR_SUCCESS);
    assert_eq!(cr.user_ctx, 0x1122_3344_5566_7788);
    assert_eq!(s_r(&cr), 0);
    assert_eq!(cr.opcode, u::URMA_CR_OPC_SEND);
    assert_eq!(cr.completion_len, 4000);
    // SAFETY: `p.jfs` is a live JFS owned by `p` (deleted only in `Pair::drop`); the loopback
    // allocates it with the real urma_jfs_t layout.
    assert_eq!(cr.local_id, unsafe { (*p.jfs).jfs_id.id });
    assert_eq!(cr.user_data, p.jfs as usize);
    assert_eq!(&dst.buf[10..4010], &src.buf[100..4100]);
    assert!(dst.buf[..10].iter().all(|&b| b == 0) && dst.buf[4010..].iter().all(|&b| b == 0));
    assert!(poll(p.rjfc, 4).is_empty(), "plain WRITE makes no target CR");
    // Without complete_enable: no CR.
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 1, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert!(poll(p.sjfc, 4).is_empty());
    let c = counters();
    assert_eq!(c.send_wrs, 2);
    assert_eq!(c.bytes_copied, 8000);
    // SAFETY: `rdst` was imported above (non-NULL asserted), is unimported exactly once and not
    // used afterwards; no WR referencing it is still pending (its CRs were polled).
    unsafe { u::urma_unimport_seg(rdst) };
}

#[test]
fn send_imm_consumes_recv_bit_exact() {
    let _g = serial();
    let p = Pair::new(64, 16);
    assert_eq!(p.post_recv(0xFEED_FACE_CAFE_BEEF, None), 0);
    let imm_v = 0x0ABC_DE00_0001_2345u64;
    let mut wr = send_wr(
        u::URMA_OPC_SEND_IMM,
        None,
        p.tjetty,
        0x0ABC_DE00_0001_2345 | (7 << 61),
        imm_v,
        true,
    );
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let r = poll_n(p.rjfc, 1, T);
    assert_eq!(r.len(), 1);
    let cr = r[0];
    assert_eq!(cr.status, 0);
    assert_eq!(s_r(&cr), 1);
    assert_eq!(jetty_bit(&cr), 1);
    assert_eq!(cr.opcode, u::URMA_CR_OPC_SEND_WITH_IMM);
    assert_eq!(imm(&cr), imm_v);
    assert_eq!(cr.user_ctx, 0xFEED_FACE_CAFE_BEEF);
    assert_eq!(cr.completion_len, 0);
    // SAFETY: `p.rjetty` and `p.jfs` are live objects owned by `p` (freed only in `Pair::drop`),
    // allocated by the loopback with the real C layouts; only plain fields are read.
    unsafe {
        assert_eq!(cr.local_id, (*p.rjetty).jetty_id.id);
        assert_eq!(cr.remote_id.id, (*p.jfs).jfs_id.id);
        assert_eq!(cr.remote_id.eid.raw, (*p.jfs).jfs_id.eid.raw);
    }
    assert_eq!(cr.user_data, p.rjetty as usize);
    let s = poll_n(p.sjfc, 1, T);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].user_ctx, 0x0ABC_DE00_0001_2345 | (7 << 61));
    assert_eq!(s_r(&s[0]), 0);

    // SEND with payload lands in the recv buffer; WRITE_IMM lands at rw.dst.
    let mut src = Seg::rw(256);
    src.buf.fill(0xAB);
    let rbuf = Seg::rw(256);
    assert_eq!(p.post_recv(5, Some((&rbuf, 256))), 0);
    let mut ss = sge(src.addr(), 100, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut ss), p.tjetty, 9, 0, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let r = poll_n(p.rjfc, 1, T);
    assert_eq!(r[0].opcode, u::URMA_CR_OPC_SEND);
    assert_eq!(r[0].completion_len, 100);
    assert_eq!(r[0].user_ctx, 5);
    assert!(rbuf.buf[..100].iter().all(|&b| b == 0xAB) && rbuf.buf[100] == 0);

    let dst = Seg::rw(256);
    let rdst = dst.import(TOKEN);
    assert_eq!(p.post_recv(6, None), 0);
    let mut s2 = sge(src.addr(), 64, src.tseg);
    let mut d2 = sge(dst.addr(), 64, rdst);
    let mut wr = rw_wr(u::URMA_OPC_WRITE_IMM, &mut s2, &mut d2, p.tjetty, 10, false);
    wr.__bindgen_anon_1.rw.notify_data = 0x77;
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let r = poll_n(p.rjfc, 1, T);
    assert_eq!(r[0].opcode, u::URMA_CR_OPC_WRITE_WITH_IMM);
    assert_eq!(imm(&r[0]), 0x77);
    assert_eq!(r[0].user_ctx, 6);
    assert_eq!(r[0].completion_len, 64);
    assert!(dst.buf[..64].iter().all(|&b| b == 0xAB));
    // SAFETY: `rdst` was imported above, is unimported exactly once and not used afterwards; the
    // WRITE_IMM that referenced it has completed (its CR was polled).
    unsafe { u::urma_unimport_seg(rdst) };
}

#[test]
fn receiver_not_ready_and_recv_queue_full() {
    let _g = serial();
    // RNR timeout 0: a message finding no recv WR fails at once (no parking).
    // SAFETY: control function with its dlsym-resolved C prototype, plain value.
    unsafe { (ctl().set_rnr_timeout)(0) };
    let p = Pair::new(64, 4);
    // No recv WR: the send CR carries RNR even without complete_enable.
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 33, 1, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let s = poll_n(p.sjfc, 1, T);
    assert_eq!(s[0].status, u::URMA_CR_RNR_RETRY_CNT_EXC_ERR);
    assert_eq!(s[0].user_ctx, 33);
    assert!(poll(p.rjfc, 4).is_empty());
    let c = counters();
    assert_eq!((c.rnr_errors, c.rnr_parked, c.rnr_expired), (1, 0, 0));
    // Depth 4: a chain of 5 fails at the 5th with ENOMEM and *bad_wr = 5th.
    let mut wrs: Vec<u::urma_jfr_wr_t> = (0..5)
        .map(|i| u::urma_jfr_wr_t {
            user_ctx: i,
            ..Default::default()
        })
        .collect();
    for i in 0..4 {
        let next: *mut u::urma_jfr_wr_t = &mut wrs[i + 1];
        wrs[i].next = next;
    }
    let mut bad = std::ptr::null_mut();
    // SAFETY: `wrs` is a Vec of 5 initialised recv WRs whose `next` links point into the same Vec
    // (not reallocated since) with the last `next` NULL; all outlive the call, and `bad` is a
    // local out-pointer; `p.rjetty` is live.
    let r = unsafe { u::urma_post_jetty_recv_wr(p.rjetty, wrs.as_mut_ptr(), &mut bad) };
    assert_eq!(r, u::URMA_ENOMEM);
    assert_eq!(bad, &mut wrs[4] as *mut _);
    assert_eq!(p.post_recv(99, None), u::URMA_ENOMEM);
}

#[test]
fn bad_handles_never_crash() {
    let _g = serial();
    if urma_loopback_ctl::plugin::loaded().is_some() {
        // Over the genuine core a handle reaches the provider only after the core dereferenced
        // it (`<object>->urma_ctx->ops`): this robustness is the standalone face's own.
        println!(
            "bad_handles_never_crash: the loopback runs as a plugin of the genuine core, skipped"
        );
        return;
    }
    let p = Pair::new(16, 4);
    let bogus = 0x1000usize as *mut std::ffi::c_void;
    // SAFETY: `bogus`, NULL and deleted handles are only passed to liburma, which looks every
    // handle up in its registry before any dereference (that is what this test checks) and
    // never writes through it; all WR/CR/cfg/attr/out pointers are live locals sized for the
    // counts passed; the only dereference here (`(*p.rjetty).remote_jetty`) is of a live jetty
    // owned by `p`; `s`, `d`, `s0`, `d0`, `w1` and `w2` outlive the post that links them.
    unsafe {
        let mut bad = std::ptr::null_mut();
        let mut wr: u::urma_jfs_wr_t = Default::default();
        assert_eq!(
            u::urma_post_jfs_wr(bogus as *mut _, &mut wr, &mut bad),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_post_jfs_wr(std::ptr::null_mut(), &mut wr, &mut bad),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_post_jfs_wr(p.jfs, std::ptr::null_mut(), &mut bad),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_post_jfs_wr(p.jfs, &mut wr, std::ptr::null_mut()),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_post_jetty_send_wr(bogus as *mut _, &mut wr, &mut bad),
            u::URMA_EINVAL
        );
        let mut rwr: u::urma_jfr_wr_t = Default::default();
        let mut rbad = std::ptr::null_mut();
        assert_eq!(
            u::urma_post_jfr_wr(bogus as *mut _, &mut rwr, &mut rbad),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_post_jetty_recv_wr(bogus as *mut _, &mut rwr, &mut rbad),
            u::URMA_EINVAL
        );
        let mut cr = [u::urma_cr_t::default(); 2];
        assert_eq!(u::urma_poll_jfc(bogus as *mut _, 2, cr.as_mut_ptr()), -1);
        assert_eq!(u::urma_poll_jfc(p.sjfc, -1, cr.as_mut_ptr()), -1);
        assert_eq!(u::urma_rearm_jfc(bogus as *mut _, false), u::URMA_EINVAL);
        let mut out = [std::ptr::null_mut(); 1];
        assert_eq!(
            u::urma_wait_jfc(bogus as *mut _, 1, 0, out.as_mut_ptr()),
            -1
        );
        let mut jfcs = [bogus as *mut u::urma_jfc_t];
        let mut nev = [1u32];
        u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
        assert_eq!(u::urma_delete_jfc(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_delete_jfs(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_delete_jfr(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_delete_jetty(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_delete_jfce(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_unregister_seg(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_unimport_seg(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_unimport_jetty(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(u::urma_unimport_jfr(bogus as *mut _), u::URMA_EINVAL);
        assert_eq!(
            u::urma_advise_jetty(bogus as *mut _, p.tjetty),
            u::URMA_EINVAL
        );
        assert_eq!(
            u::urma_bind_jetty(p.rjetty, bogus as *mut _),
            u::URMA_EINVAL
        );
        assert_eq!(u::urma_unbind_jetty(bogus as *mut _), u::URMA_EINVAL);
        assert!(u::urma_create_jfc(bogus as *mut _, std::ptr::null_mut()).is_null());
        let mut c: u::urma_jfs_cfg_t = Default::default();
        c.depth = 4;
        c.jfc = bogus as *mut _;
        assert!(
            u::urma_create_jfs(lb().ctx, &mut c).is_null(),
            "unknown jfc in cfg"
        );
        let mut sc: u::urma_seg_cfg_t = Default::default();
        sc.va = 0x1000;
        assert!(
            u::urma_register_seg(lb().ctx, &mut sc).is_null(),
            "zero length"
        );
        let mut attr: u::urma_jfs_attr_t = Default::default();
        let mut cfg: u::urma_jfs_cfg_t = Default::default();
        assert_eq!(
            u::urma_query_jfs(bogus as *mut _, &mut cfg, &mut attr),
            u::URMA_EINVAL
        );
        assert_eq!(u::urma_query_jfs(p.jfs, &mut cfg, &mut attr), 0);
        assert_eq!(cfg.depth, 256);
        // A deleted object is an unknown handle.
        let j = jfc(4, std::ptr::null_mut());
        assert_eq!(u::urma_delete_jfc(j), 0);
        assert_eq!(u::urma_poll_jfc(j, 1, cr.as_mut_ptr()), -1);
        assert_eq!(u::urma_delete_jfc(j), u::URMA_EINVAL);
        // JFC still used by a JFS cannot be deleted.
        assert_eq!(u::urma_delete_jfc(p.sjfc), u::URMA_FAIL);
        // advise / bind round trips.
        assert_eq!(u::urma_advise_jfr(p.jfs, p.tjetty), 0);
        assert_eq!(u::urma_unadvise_jfr(p.jfs, p.tjetty), 0);
        assert_eq!(u::urma_bind_jetty(p.rjetty, p.tjetty), 0);
        assert_eq!((*p.rjetty).remote_jetty, p.tjetty);
        assert_eq!(u::urma_unbind_jetty(p.rjetty), 0);
        // Unknown tseg inside a WR: EINVAL and *bad_wr = that WR (second of a chain).
        let src = Seg::rw(64);
        let mut s = sge(src.addr(), 8, src.tseg);
        let mut d = sge(src.addr(), 8, bogus as *mut _);
        let mut s0 = sge(src.addr(), 8, src.tseg);
        let mut d0 = sge(src.addr(), 8, src.import(TOKEN));
        let mut w2 = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 2, true);
        let mut w1 = rw_wr(u::URMA_OPC_WRITE, &mut s0, &mut d0, p.tjetty, 1, true);
        w1.next = &mut w2;
        let (r, bad) = post(p.jfs, &mut w1);
        assert_eq!(r, u::URMA_EINVAL);
        assert_eq!(bad, &mut w2 as *mut _);
        assert_eq!(
            poll_n(p.sjfc, 1, T)[0].user_ctx,
            1,
            "the first WR was executed"
        );
        u::urma_unimport_seg(d0.tseg);
    }
}

#[test]
fn wrong_token_and_out_of_bounds() {
    let _g = serial();
    let p = Pair::new(16, 4);
    let src = Seg::rw(4096);
    let dst = Seg::rw(4096);
    assert!(dst.import(TOKEN ^ 1).is_null(), "wrong token");
    // SAFETY: `p.rjetty` is a live jetty owned by `p`; import_jetty only reads its jetty_id.
    unsafe {
        assert!(
            import_jetty(p.rjetty, TOKEN ^ 1).is_null(),
            "wrong jetty token"
        );
    }
    let rdst = dst.import(TOKEN);
    // Remote out of bounds.
    let mut s = sge(src.addr(), 64, src.tseg);
    let mut d = sge(dst.addr() + 4090, 64, rdst);
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 1, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(
        poll_n(p.sjfc, 1, T)[0].status,
        u::URMA_CR_REM_ACCESS_ABORT_ERR
    );
    // Local out of bounds.
    let mut s = sge(src.addr() + 4090, 64, src.tseg);
    let mut d = sge(dst.addr(), 64, rdst);
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 2, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(poll_n(p.sjfc, 1, T)[0].status, u::URMA_CR_LOC_ACCESS_ERR);
    // No remote write access on the target segment.
    let ro = Seg::new(4096, u::URMA_ACCESS_READ);
    let rro = ro.import(TOKEN);
    let mut s = sge(src.addr(), 64, src.tseg);
    let mut d = sge(ro.addr(), 64, rro);
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 3, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(
        poll_n(p.sjfc, 1, T)[0].status,
        u::URMA_CR_REM_ACCESS_ABORT_ERR
    );
    // Target segment unregistered after import.
    let gone = Seg::rw(128);
    let rgone = gone.import(TOKEN);
    let gone_addr = gone.addr();
    drop(gone);
    let mut s = sge(src.addr(), 64, src.tseg);
    let mut d = sge(gone_addr, 64, rgone);
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 4, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(
        poll_n(p.sjfc, 1, T)[0].status,
        u::URMA_CR_REM_ACCESS_ABORT_ERR
    );
    assert!(dst.buf.iter().all(|&b| b == 0));
    // SAFETY: each imported handle is unimported exactly once and never used again; all WRs
    // naming them have completed (every CR was polled). `rgone` outlived its registered
    // segment: the import is still a registry entry of its own until unimported here.
    unsafe {
        u::urma_unimport_seg(rdst);
        u::urma_unimport_seg(rro);
        u::urma_unimport_seg(rgone);
    }
}

/// RNR retry model: a SEND_IMM / SEND / WRITE_IMM finding no recv WR is parked (FIFO per
/// receive queue) and delivered by later recv posts, with the same CRs (recv CR first) and trace
/// lines as an immediate delivery.
#[test]
fn rnr_parked_messages_are_delivered_late_in_order() {
    let _g = serial();
    // SAFETY: control function with its dlsym-resolved C prototype, plain value.
    unsafe { (ctl().set_rnr_timeout)(5000) };
    let p = Pair::new(64, 8);
    let mut src = Seg::rw(256);
    src.buf.fill(0xC3);
    let rbuf = Seg::rw(256);
    let dst = Seg::rw(256);
    let rdst = dst.import(TOKEN);
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().trace_capture)(true) };
    // Three messages, no recv WR posted: all parked, no CR anywhere yet.
    for i in 1..=2u64 {
        let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 10 + i, 100 + i, true);
        assert_eq!(post(p.jfs, &mut wr).0, 0);
    }
    let mut ss = sge(src.addr(), 40, src.tseg);
    let mut dd = sge(dst.addr(), 40, rdst);
    let mut wr = rw_wr(u::URMA_OPC_WRITE_IMM, &mut ss, &mut dd, p.tjetty, 13, true);
    wr.__bindgen_anon_1.rw.notify_data = 103;
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert!(poll(p.sjfc, 8).is_empty() && poll(p.rjfc, 8).is_empty());
    assert!(
        dst.buf.iter().all(|&b| b == 0),
        "WRITE_IMM data moves on delivery"
    );
    let c = counters();
    assert_eq!(
        (c.rnr_parked, c.rnr_errors, c.rnr_delivered_late),
        (3, 0, 0)
    );
    // One recv WR: the oldest parked message is delivered, recv CR then send CR.
    assert_eq!(p.post_recv(1, None), 0);
    let r = poll(p.rjfc, 8);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].status, r[0].user_ctx, imm(&r[0])), (0, 1, 101));
    assert_eq!(r[0].opcode, u::URMA_CR_OPC_SEND_WITH_IMM);
    let s = poll(p.sjfc, 8);
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].status, s[0].user_ctx), (0, 11));
    // A new message queues behind the parked ones (per-queue order), even once a WR exists.
    let mut ps = sge(src.addr(), 64, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut ps), p.tjetty, 14, 0, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert!(poll(p.sjfc, 8).is_empty());
    assert_eq!(p.post_recv(2, None), 0);
    assert_eq!(p.post_recv(3, None), 0);
    assert_eq!(p.post_recv(4, Some((&rbuf, 256))), 0);
    let r = poll(p.rjfc, 8);
    let got: Vec<(u64, u64, u32)> = r
        .iter()
        .map(|c| (c.user_ctx, imm(c), c.completion_len))
        .collect();
    assert_eq!(got, vec![(2, 102, 0), (3, 103, 40), (4, 0, 64)]);
    assert_eq!(r[1].opcode, u::URMA_CR_OPC_WRITE_WITH_IMM);
    assert_eq!(r[2].opcode, u::URMA_CR_OPC_SEND);
    let s = poll(p.sjfc, 8);
    let got: Vec<(u32, u64)> = s.iter().map(|c| (c.status, c.user_ctx)).collect();
    assert_eq!(got, vec![(0, 12), (0, 13), (0, 14)]);
    assert!(dst.buf[..40].iter().all(|&b| b == 0xC3) && dst.buf[40] == 0);
    assert!(rbuf.buf[..64].iter().all(|&b| b == 0xC3) && rbuf.buf[64] == 0);
    // Nothing parked any more: the next recv WR is simply queued.
    assert_eq!(p.post_recv(5, None), 0);
    assert!(poll(p.rjfc, 8).is_empty());
    let c = counters();
    assert_eq!(
        (
            c.rnr_parked,
            c.rnr_delivered_late,
            c.rnr_expired,
            c.rnr_errors
        ),
        (4, 4, 0, 0)
    );
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().trace_capture)(false) };
    // Trace: each post_recv that delivers is followed by the recv CR then the send CR, exactly
    // like a post_send followed by its CRs in an immediate delivery.
    let lines = trace_take();
    let ev = |l: &str| l.split('"').nth(3).unwrap_or("").to_string();
    let i = lines
        .iter()
        .position(|l| l.contains("\"ev\":\"post_recv\"") && l.contains("0x0000000000000001"))
        .expect("first post_recv traced");
    assert_eq!(ev(&lines[i + 1]), "cr", "{lines:#?}");
    assert!(lines[i + 1].contains("\"s_r\":1"), "{}", lines[i + 1]);
    assert_eq!(ev(&lines[i + 2]), "cr");
    assert!(lines[i + 2].contains("\"s_r\":0"), "{}", lines[i + 2]);
    assert!(
        lines[..i].iter().all(|l| !l.contains("\"ev\":\"cr\"")),
        "no CR while parked: {lines:#?}"
    );
    // SAFETY: `rdst` was imported above, is unimported exactly once and not used afterwards;
    // the WRITE_IMM naming it has completed (its CRs were polled).
    unsafe { u::urma_unimport_seg(rdst) };
}

/// A parked message that gets no recv WR fails after the RNR timeout with
/// `URMA_CR_RNR_RETRY_CNT_EXC_ERR` at the sender (no recv CR), seen by a thread that only polls
/// the sender's JFC; a recv WR posted after the expiry is simply queued.
#[test]
fn rnr_parked_message_expires_after_the_timeout() {
    let _g = serial();
    let spec = std::ffi::CString::new("rnr_timeout_ms=150").unwrap();
    // SAFETY: `spec` is a NUL-terminated CString alive for the call; apply_knobs only reads it.
    assert_eq!(unsafe { (ctl().apply_knobs)(spec.as_ptr()) }, 1);
    let p = Pair::new(64, 8);
    let t0 = Instant::now();
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 21, 1, false);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 22, 2, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    // Only the sender's JFC is polled, from another thread.
    let sjfc = p.sjfc as usize;
    let h = std::thread::spawn(move || poll_n(sjfc as *mut u::urma_jfc_t, 2, T));
    let s = h.join().unwrap();
    let el = t0.elapsed();
    assert_eq!(s.len(), 2, "both expired within {T:?}");
    assert!(
        el >= Duration::from_millis(150),
        "expired too early: {el:?}"
    );
    assert!(el < Duration::from_millis(2000), "expired too late: {el:?}");
    let got: Vec<(u32, u64, u32)> = s
        .iter()
        .map(|c| (c.status, c.user_ctx, c.completion_len))
        .collect();
    let rnr = u::URMA_CR_RNR_RETRY_CNT_EXC_ERR;
    assert_eq!(got, vec![(rnr, 21, 0), (rnr, 22, 0)]);
    assert!(
        poll(p.rjfc, 8).is_empty(),
        "no recv CR for an expired message"
    );
    // A later recv WR is queued, not matched with the expired messages.
    assert_eq!(p.post_recv(7, None), 0);
    assert!(poll(p.rjfc, 8).is_empty());
    let c = counters();
    assert_eq!(
        (
            c.rnr_parked,
            c.rnr_expired,
            c.rnr_errors,
            c.rnr_delivered_late
        ),
        (2, 2, 2, 0)
    );
    // ... and consumed by the next send, at once.
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 23, 3, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(poll(p.rjfc, 8).len(), 1);
    assert_eq!(poll(p.sjfc, 8)[0].status, 0);
    // Reset drops parked messages without CRs.
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, 24, 4, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(counters().rnr_parked, 2 + 1);
    // SAFETY: loopback control function without arguments.
    unsafe { (ctl().reset)() };
    assert_eq!(p.post_recv(8, None), 0);
    assert!(poll(p.rjfc, 8).is_empty() && poll(p.sjfc, 8).is_empty());
}

#[test]
fn event_mode_wait_rearm_ack_and_delete() {
    let _g = serial();
    // The second SEND_IMM below must fail at once (RNR timeout 0), not wait for a recv WR.
    // SAFETY: control function with its dlsym-resolved C prototype, plain value.
    unsafe { (ctl().set_rnr_timeout)(0) };
    // SAFETY: every object (jfce, JFCs, JFS, jetties, imports) is created here, asserted or known
    // non-NULL, used only while alive and deleted once at the end (stale uses are deliberate
    // handle-validation checks); `out`, `jfcs`, `nev`, WRs and out-pointers are live locals
    // sized for the counts passed; the spawned thread gets the handles as integers and is
    // joined before any of them is deleted, and liburma is thread-safe; `(*jfce).fd` and
    // `(*rjfc).comp_events_acked` are read from live objects with the real C layouts.
    unsafe {
        let jfce = u::urma_create_jfce(lb().ctx);
        assert!(!jfce.is_null());
        assert!((*jfce).fd >= 0);
        let rjfc = jfc(16, jfce);
        let sjfc = jfc(16, std::ptr::null_mut());
        let jfs = jfs(sjfc);
        let rj = jetty(rjfc, 8);
        let tj = import_jetty(rj, TOKEN);
        let mut out = [std::ptr::null_mut(); 4];
        // timeout 0: immediate.
        assert_eq!(u::urma_wait_jfc(jfce, 4, 0, out.as_mut_ptr()), 0);
        // timeout N: waits about N ms.
        let t0 = Instant::now();
        assert_eq!(u::urma_wait_jfc(jfce, 4, 60, out.as_mut_ptr()), 0);
        assert!(t0.elapsed() >= Duration::from_millis(55));
        // Not armed: a CR raises no event.
        let post_send = |uc: u64| {
            let mut b = std::ptr::null_mut();
            let mut rw = u::urma_jfr_wr_t {
                user_ctx: uc,
                ..Default::default()
            };
            assert_eq!(u::urma_post_jetty_recv_wr(rj, &mut rw, &mut b), 0);
            let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, tj, uc, uc, false);
            assert_eq!(post(jfs, &mut wr).0, 0);
        };
        post_send(1);
        assert_eq!(u::urma_wait_jfc(jfce, 4, 0, out.as_mut_ptr()), 0);
        assert_eq!(poll(rjfc, 4).len(), 1);
        // Armed: one event, woken from another thread while waiting forever (-1).
        assert_eq!(u::urma_rearm_jfc(rjfc, false), 0);
        let tj_addr = tj as usize;
        let jfs_addr = jfs as usize;
        let rj_addr = rj as usize;
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            let (rj, tj, jfs) = (
                rj_addr as *mut u::urma_jetty_t,
                tj_addr as *mut _,
                jfs_addr as *mut u::urma_jfs_t,
            );
            let mut b = std::ptr::null_mut();
            let mut rw = u::urma_jfr_wr_t {
                user_ctx: 2,
                ..Default::default()
            };
            assert_eq!(u::urma_post_jetty_recv_wr(rj, &mut rw, &mut b), 0);
            let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, tj, 2, 2, false);
            assert_eq!(post(jfs, &mut wr).0, 0);
            assert_eq!(post(jfs, &mut wr).0, u::URMA_SUCCESS); // second: RNR on the sender only
        });
        assert_eq!(u::urma_wait_jfc(jfce, 4, -1, out.as_mut_ptr()), 1);
        assert_eq!(out[0], rjfc);
        h.join().unwrap();
        assert_eq!(poll(rjfc, 4).len(), 1);
        // Only one event per arm.
        post_send(3);
        assert_eq!(u::urma_wait_jfc(jfce, 4, 0, out.as_mut_ptr()), 0);
        // Rearm with CRs already queued fires at once.
        assert_eq!(u::urma_rearm_jfc(rjfc, false), 0);
        assert_eq!(u::urma_wait_jfc(jfce, 4, 0, out.as_mut_ptr()), 1);
        assert_eq!(poll(rjfc, 4).len(), 1);
        // Two events reported, none acked: delete is bounded.
        assert_eq!(counters().events_reported, 2);
        (ctl().set_delete_timeout)(50);
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(delete_jetty(rj), 0);
        let t0 = Instant::now();
        assert_eq!(u::urma_delete_jfc(rjfc), u::URMA_EAGAIN);
        assert!(t0.elapsed() >= Duration::from_millis(45));
        let mut jfcs = [rjfc];
        let mut nev = [1u32];
        u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
        assert_eq!((*rjfc).comp_events_acked, 1);
        assert_eq!(u::urma_delete_jfc(rjfc), u::URMA_EAGAIN);
        u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
        assert_eq!(u::urma_delete_jfc(rjfc), 0);
        // non_blocking flag: EAGAIN at once.
        let mut c: u::urma_jfc_cfg_t = Default::default();
        c.depth = 4;
        c.jfce = jfce;
        c.flag.value = flags::JFC_FLAG_NON_BLOCKING;
        let nb = u::urma_create_jfc(lb().ctx, &mut c);
        let rj2 = jetty(nb, 4);
        let tj2 = import_jetty(rj2, TOKEN);
        assert_eq!(u::urma_rearm_jfc(nb, false), 0);
        let mut b = std::ptr::null_mut();
        let mut rw = u::urma_jfr_wr_t::default();
        assert_eq!(u::urma_post_jetty_recv_wr(rj2, &mut rw, &mut b), 0);
        let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, tj2, 1, 1, false);
        assert_eq!(post(jfs, &mut wr).0, 0);
        assert_eq!(u::urma_wait_jfc(jfce, 4, 1000, out.as_mut_ptr()), 1);
        u::urma_unimport_jetty(tj2);
        delete_jetty(rj2);
        // "At once": before the delete timeout a blocking delete would wait, made long here so
        // that the bound follows from it and not from the host's speed.
        (ctl().set_delete_timeout)(10_000);
        let t0 = Instant::now();
        assert_eq!(u::urma_delete_jfc(nb), u::URMA_EAGAIN);
        assert!(t0.elapsed() < Duration::from_millis(10_000));
        (ctl().set_delete_timeout)(50);
        let mut jfcs = [nb];
        u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
        assert_eq!(u::urma_delete_jfc(nb), 0);
        assert_eq!(u::urma_delete_jfce(jfce), u::URMA_SUCCESS);
        u::urma_delete_jfs(jfs);
        u::urma_delete_jfc(sjfc);
    }
}

fn send_n(p: &Pair, n: u64, first_ctx: u64) {
    for i in 0..n {
        assert_eq!(p.post_recv(1000 + first_ctx + i, None), 0);
        let mut wr = send_wr(
            u::URMA_OPC_SEND_IMM,
            None,
            p.tjetty,
            first_ctx + i,
            first_ctx + i,
            true,
        );
        assert_eq!(post(p.jfs, &mut wr).0, 0);
    }
}

#[test]
fn knobs_fail_post_and_fail_completion() {
    let _g = serial();
    let p = Pair::new(64, 16);
    // SAFETY: loopback control functions resolved by dlsym with these exact C prototypes
    // (urma_loopback.h), taking only integers.
    unsafe {
        assert_eq!((ctl().fail_post)(1, 2, u::URMA_FAIL), 0);
        assert_eq!((ctl().fail_completion)(3, u::URMA_CR_WR_FLUSH_ERR), 0);
        assert_eq!((ctl().fail_post)(2, 1, u::URMA_ENOMEM), 0);
    }
    assert_eq!(p.post_recv(1, None), u::URMA_ENOMEM, "1st recv WR fails");
    for i in 0..4 {
        assert_eq!(p.post_recv(1, None), 0);
        let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, i, i, true);
        let (r, bad) = post(p.jfs, &mut wr);
        if i == 1 {
            assert_eq!(r, u::URMA_FAIL);
            assert_eq!(bad, &mut wr as *mut _);
        } else {
            assert_eq!(r, 0);
        }
    }
    let s = poll_n(p.sjfc, 3, T);
    let st: Vec<(u64, u32)> = s.iter().map(|c| (c.user_ctx, c.status)).collect();
    assert_eq!(st, vec![(0, 0), (2, u::URMA_CR_WR_FLUSH_ERR), (3, 0)]);
    assert_eq!(
        poll_n(p.rjfc, 2, T).len(),
        2,
        "failed completion consumed no recv WR"
    );
}

#[test]
fn knob_spec_post_status_is_a_signed_int() {
    let _g = serial();
    let p = Pair::new(64, 16);
    let apply = |spec: &str| {
        let c = std::ffi::CString::new(spec).unwrap();
        // SAFETY: `c` is a NUL-terminated CString alive for the call; apply_knobs only reads it.
        unsafe { (ctl().apply_knobs)(c.as_ptr()) }
    };
    // Out of int's range: rejected, not truncated (0xffffffff would otherwise become -1).
    assert_eq!(apply("fail_post=1:0xffffffff"), -1);
    assert_eq!(apply("fail_recv_post=1:-2147483649"), -1);
    // The status a post call returns is an int: a negative one is injected as written.
    assert_eq!(apply("fail_post=2:-1, fail_recv_post=1:-7"), 2);
    assert_eq!(
        p.post_recv(1, None),
        -7,
        "1st recv WR fails with the spec's status"
    );
    assert_eq!(p.post_recv(2, None), 0);
    for i in 0..2 {
        let mut wr = send_wr(u::URMA_OPC_SEND_IMM, None, p.tjetty, i, i, true);
        let (r, _) = post(p.jfs, &mut wr);
        assert_eq!(r, if i == 1 { -1 } else { 0 }, "send WR {}", i + 1);
    }
    assert_eq!(poll_n(p.sjfc, 1, T).len(), 1);
    assert_eq!(poll_n(p.rjfc, 1, T).len(), 1);
}

#[test]
fn knobs_drop_dup_hold_delay() {
    let _g = serial();
    let p = Pair::new(64, 64);
    // SAFETY: loopback control function resolved by dlsym with this exact C prototype
    // (urma_loopback.h), taking only integers.
    unsafe {
        assert_eq!((ctl().cr_action)(1, 1), 0); // drop the 1st CR (recv CR of WR 0)
        assert_eq!((ctl().cr_action)(4, 2), 0); // duplicate the 4th (send CR of WR 1)
    }
    send_n(&p, 2, 0);
    let r = poll_n(p.rjfc, 1, T);
    assert_eq!(r.iter().map(|c| c.user_ctx).collect::<Vec<_>>(), vec![1001]);
    let s = poll_n(p.sjfc, 3, T);
    assert_eq!(
        s.iter().map(|c| c.user_ctx).collect::<Vec<_>>(),
        vec![0, 1, 1]
    );
    let c = counters();
    assert_eq!(
        (c.crs_dropped, c.crs_duplicated, c.crs_generated),
        (1, 1, 4)
    );
    // Hold and release reversed.
    // SAFETY: loopback control function resolved by dlsym with this exact C prototype
    // (urma_loopback.h), boolean argument.
    unsafe { (ctl().hold_crs)(true) };
    send_n(&p, 3, 10);
    assert!(poll(p.sjfc, 8).is_empty());
    assert_eq!(counters().crs_held, 6);
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().hold_crs)(false) };
    // SAFETY: control function with its dlsym-resolved C prototype, integer arguments.
    assert_eq!(unsafe { (ctl().release_crs)(1, 0, 0) }, 6);
    let s = poll(p.sjfc, 8);
    assert_eq!(
        s.iter().map(|c| c.user_ctx).collect::<Vec<_>>(),
        vec![12, 11, 10]
    );
    assert_eq!(
        poll(p.rjfc, 8)
            .iter()
            .map(|c| c.user_ctx)
            .collect::<Vec<_>>(),
        vec![1012, 1011, 1010]
    );
    // Hold, release after a delay.
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().hold_crs)(true) };
    send_n(&p, 1, 20);
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().hold_crs)(false) };
    // SAFETY: control function with its dlsym-resolved C prototype, integer arguments.
    unsafe { (ctl().release_crs)(0, 0, 50) };
    assert!(poll(p.sjfc, 8).is_empty());
    assert_eq!(poll_n(p.sjfc, 1, T)[0].user_ctx, 20);
    poll_n(p.rjfc, 1, T);
    // Per-CR delay keeps order.
    // SAFETY: control function with its dlsym-resolved C prototype, integer argument.
    unsafe { (ctl().set_cr_delay)(40) };
    let t0 = Instant::now();
    send_n(&p, 3, 30);
    assert!(poll(p.sjfc, 8).is_empty());
    let s = poll_n(p.sjfc, 3, T);
    assert!(t0.elapsed() >= Duration::from_millis(35));
    assert_eq!(
        s.iter().map(|c| c.user_ctx).collect::<Vec<_>>(),
        vec![30, 31, 32]
    );
    poll_n(p.rjfc, 3, T);
    // SAFETY: control function with its dlsym-resolved C prototype, integer argument.
    unsafe { (ctl().set_cr_delay)(0) };
}

#[test]
fn knobs_nocopy_spec_and_trace() {
    let _g = serial();
    let p = Pair::new(64, 16);
    let mut src = Seg::rw(1024);
    src.buf.fill(0x5A);
    let dst = Seg::rw(1024);
    let rdst = dst.import(TOKEN);
    let spec = std::ffi::CString::new("nocopy=1, fail_cr=2:11").unwrap();
    // SAFETY: `spec` is a NUL-terminated CString alive for the call; apply_knobs only reads it.
    assert_eq!(unsafe { (ctl().apply_knobs)(spec.as_ptr()) }, 2);
    let bad = std::ffi::CString::new("bogus=1").unwrap();
    // SAFETY: `bad` is a NUL-terminated CString alive for the call; apply_knobs only reads it.
    assert_eq!(unsafe { (ctl().apply_knobs)(bad.as_ptr()) }, -1);
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().trace_capture)(true) };
    let mut s = sge(src.addr() + 16, 512, src.tseg);
    let mut d = sge(dst.addr() + 32, 512, rdst);
    let mut wr = rw_wr(u::URMA_OPC_WRITE, &mut s, &mut d, p.tjetty, 0xAA, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let crs = poll_n(p.sjfc, 2, T);
    assert_eq!(crs[1].status, 11);
    // SAFETY: control function with its dlsym-resolved C prototype, boolean argument.
    unsafe { (ctl().trace_capture)(false) };
    assert!(
        dst.buf.iter().all(|&b| b == 0),
        "no-copy mode copies nothing"
    );
    let c = counters();
    assert_eq!((c.bytes_copied, c.bytes_transferred), (0, 512));
    let lines = trace_take();
    assert_eq!(lines.len(), 6, "{lines:#?}");
    assert!(
        lines[0].starts_with("{\"ev\":\"post_send\",\"q\":\"jfs"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\"op\":\"WRITE\""));
    assert!(lines[0].contains("\"user_ctx\":\"0x00000000000000aa\""));
    assert!(lines[0].contains("\"off\":16,\"len\":512"), "{}", lines[0]);
    assert!(lines[0].contains("\"off\":32,\"len\":512"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("{\"ev\":\"cr\",\"jfc\":\"jfc"),
        "{}",
        lines[1]
    );
    assert!(lines[3].contains("\"status\":11"));
    assert!(lines[4].starts_with("{\"ev\":\"poll\""));
    // No raw addresses in the trace.
    let addr = format!("{}", src.addr());
    assert!(lines.iter().all(|l| !l.contains(&addr)));
    // SAFETY: `rdst` was imported above, is unimported exactly once and not used afterwards;
    // both WRITEs naming it have completed (their CRs were polled).
    unsafe { u::urma_unimport_seg(rdst) };
}

#[test]
fn four_threads_100k_wrs_no_cr_lost_or_duplicated() {
    let _g = serial();
    const THREADS: u64 = 4;
    const PER: u64 = 25_000;
    let p = Arc::new(Pair::new(1024, 16));
    let src = Arc::new(Seg::rw(4096));
    let dst = Seg::rw(4096 * THREADS as usize);
    let rdst = dst.import(TOKEN) as usize;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let p = p.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = HashSet::new();
            let mut buf = vec![u::urma_cr_t::default(); 64];
            let end = Instant::now() + Duration::from_secs(20) * target::slowdown();
            while (seen.len() as u64) < THREADS * PER && Instant::now() < end {
                // SAFETY: `buf` holds 64 initialised CRs, so liburma may write up to 64 entries;
                // `p.sjfc` stays alive through the Arc<Pair> this thread holds.
                let n = unsafe { u::urma_poll_jfc(p.sjfc, 64, buf.as_mut_ptr()) };
                assert!(n >= 0);
                for cr in &buf[..n as usize] {
                    assert_eq!(cr.status, 0);
                    assert!(seen.insert(cr.user_ctx), "duplicate CR {}", cr.user_ctx);
                }
                if n == 0 {
                    if done.load(std::sync::atomic::Ordering::Acquire)
                        && (seen.len() as u64) < THREADS * PER
                    {
                        std::thread::yield_now();
                    }
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
            seen.len() as u64
        })
    };
    let t0 = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let p = p.clone();
            let src = src.clone();
            let daddr = dst.addr() + t * 4096;
            std::thread::spawn(move || {
                for i in 0..PER {
                    let mut s = sge(src.addr(), 64, src.tseg);
                    let mut d = sge(daddr, 64, rdst as *mut _);
                    let mut wr = rw_wr(
                        u::URMA_OPC_WRITE,
                        &mut s,
                        &mut d,
                        p.tjetty,
                        (t << 32) | i,
                        true,
                    );
                    assert_eq!(post(p.jfs, &mut wr).0, 0);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    let seen = poller.join().unwrap();
    eprintln!("100k WRs posted+polled in {:?}", t0.elapsed());
    assert_eq!(seen, THREADS * PER);
    let c = counters();
    assert_eq!(c.send_wrs, THREADS * PER);
    assert_eq!(c.crs_generated, THREADS * PER);
    assert_eq!(c.crs_polled, THREADS * PER);
    // SAFETY: `rdst` is the import made above (carried as an integer for Send), unimported
    // exactly once after all worker threads were joined and all their CRs polled.
    unsafe { u::urma_unimport_seg(rdst as *mut _) };
}

/// Completion-synchronous posts, in no-copy and in copy mode: each post runs its WRs on its own
/// thread under its queue's runner lock, so posts to different JFSs run at once (here all
/// sending an 8-byte message to one receive queue and completing to one JFC). Each queue's send
/// CRs, and the recv CRs of its messages, keep its post order; nothing is lost or duplicated;
/// every message is copied in copy mode and none in no-copy mode; a delete after the posts sees
/// none of them still running.
#[test]
fn nocopy_posts_to_several_queues_at_once_keep_each_queue_in_order() {
    posts_to_several_queues_at_once_keep_each_queue_in_order(false);
}

#[test]
fn copy_mode_posts_to_several_queues_at_once_keep_each_queue_in_order() {
    posts_to_several_queues_at_once_keep_each_queue_in_order(true);
}

fn posts_to_several_queues_at_once_keep_each_queue_in_order(copy: bool) {
    let _g = serial();
    const THREADS: u64 = 4;
    const CHAINS: u64 = 250; // two WRs per post
    const N: u64 = THREADS * CHAINS * 2;
    const MSG: u32 = 8;
    apply_spec(if copy { "nocopy=0" } else { "nocopy=1" });
    let p = Arc::new(Pair::new(2 * N as u32, N as u32));
    let mut m = Seg::rw(MSG as usize);
    m.buf.copy_from_slice(b"lanes!\x01\x02");
    let msg = Arc::new(m);
    let inbox = Seg::rw(MSG as usize);
    for i in 0..N {
        assert_eq!(p.post_recv(i, Some((&inbox, MSG))), 0);
    }
    // SAFETY: `p.sjfc` is live (owned by `p`); each JFS is deleted below, before `p`.
    let queues: Vec<usize> = (0..THREADS)
        .map(|_| unsafe { jfs(p.sjfc) } as usize)
        .collect();
    let posters: Vec<_> = queues
        .iter()
        .enumerate()
        .map(|(t, &q)| {
            let p = p.clone();
            let msg = msg.clone();
            std::thread::spawn(move || {
                let ctx = |i: u64| ((t as u64) << 32) | i;
                for c in 0..CHAINS {
                    let mut s1 = sge(msg.addr(), MSG, msg.tseg);
                    let mut s2 = sge(msg.addr(), MSG, msg.tseg);
                    let mut w1 = send_wr(
                        u::URMA_OPC_SEND_IMM,
                        Some(&mut s1),
                        p.tjetty,
                        ctx(2 * c),
                        ctx(2 * c),
                        true,
                    );
                    let mut w2 = send_wr(
                        u::URMA_OPC_SEND_IMM,
                        Some(&mut s2),
                        p.tjetty,
                        ctx(2 * c + 1),
                        ctx(2 * c + 1),
                        true,
                    );
                    w1.next = &mut w2;
                    assert_eq!(post(q as *mut u::urma_jfs_t, &mut w1).0, 0);
                }
            })
        })
        .collect();
    for t in posters {
        t.join().unwrap();
    }
    let sent = poll(p.sjfc, 2 * N as usize);
    let recvd = poll(p.rjfc, 2 * N as usize);
    assert_eq!(
        (sent.len() as u64, recvd.len() as u64),
        (N, N),
        "every CR once"
    );
    let mut next_sent = vec![0u64; THREADS as usize];
    let mut next_recvd = vec![0u64; THREADS as usize];
    for cr in &sent {
        assert_eq!(cr.status, u::URMA_CR_SUCCESS);
        let t = (cr.user_ctx >> 32) as usize;
        assert_eq!(
            cr.user_ctx & 0xffff_ffff,
            next_sent[t],
            "send CRs of queue {t} in post order"
        );
        next_sent[t] += 1;
    }
    let mut consumed = HashSet::new();
    for cr in &recvd {
        assert_eq!(cr.status, u::URMA_CR_SUCCESS);
        assert!(
            consumed.insert(cr.user_ctx),
            "recv WR {} consumed twice",
            cr.user_ctx
        );
        let t = (imm(cr) >> 32) as usize;
        assert_eq!(
            imm(cr) & 0xffff_ffff,
            next_recvd[t],
            "messages of queue {t} in post order"
        );
        next_recvd[t] += 1;
    }
    let c = counters();
    assert_eq!((c.send_wrs, c.crs_generated, c.rnr_errors), (N, 2 * N, 0));
    let bytes = N * u64::from(MSG);
    assert_eq!(
        (c.bytes_transferred, c.bytes_copied),
        (bytes, if copy { bytes } else { 0 }),
        "every message transferred, and copied in copy mode only"
    );
    let expected: &[u8] = if copy { &msg.buf } else { &[0; MSG as usize] };
    assert_eq!(
        inbox.buf, expected,
        "the receive buffer holds the message in copy mode only"
    );
    for q in queues {
        // SAFETY: created above, deleted once; its posts returned and its CRs were polled.
        assert_eq!(unsafe { u::urma_delete_jfs(q as *mut u::urma_jfs_t) }, 0);
    }
}

/// The poller-side fast paths (an empty poll skips the JFC lock, a push skips the event lock while
/// nothing is armed) must not lose an event: an application that rearms, drains and then waits
/// always wakes up for a CR pushed by another thread at any point of that sequence.
#[test]
fn event_mode_never_misses_a_cr_pushed_concurrently() {
    let _g = serial();
    const THREADS: u64 = 2;
    const PER: u64 = 20_000;
    // SAFETY: every object is created here, checked non-NULL and deleted once at the end, after
    // the posting threads (which get the handles as integers) were joined; buffers passed to
    // liburma are live locals sized for the counts passed.
    unsafe {
        let jfce = u::urma_create_jfce(lb().ctx);
        assert!(!jfce.is_null());
        let sjfc = jfc(1024, jfce);
        let rjfc = jfc(16, std::ptr::null_mut());
        let jfs = jfs(sjfc);
        let rj = jetty(rjfc, 8);
        let tj = import_jetty(rj, TOKEN);
        let src = Seg::rw(64);
        let dst = Seg::rw(64);
        let rdst = dst.import(TOKEN);
        let (jfs_a, tj_a, rdst_a, src_a, src_t, dst_a) = (
            jfs as usize,
            tj as usize,
            rdst as usize,
            src.addr(),
            src.tseg as usize,
            dst.addr(),
        );
        let posters: Vec<_> = (0..THREADS)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..PER {
                        let mut s = sge(src_a, 64, src_t as *mut _);
                        let mut d = sge(dst_a, 64, rdst_a as *mut _);
                        let mut wr = rw_wr(
                            u::URMA_OPC_WRITE,
                            &mut s,
                            &mut d,
                            tj_a as *mut _,
                            (t << 32) | i,
                            true,
                        );
                        assert_eq!(post(jfs_a as *mut _, &mut wr).0, 0);
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut seen = 0u64;
        let mut waits = 0u64;
        let mut buf = vec![u::urma_cr_t::default(); 64];
        let mut out = [std::ptr::null_mut(); 4];
        while seen < THREADS * PER {
            assert_eq!(u::urma_rearm_jfc(sjfc, false), 0);
            loop {
                let n = u::urma_poll_jfc(sjfc, 64, buf.as_mut_ptr());
                assert!(n >= 0);
                if n == 0 {
                    break;
                }
                seen += n as u64;
            }
            if seen == THREADS * PER {
                break;
            }
            // Armed and drained: the next CR must raise an event well within 5 s.
            let got = u::urma_wait_jfc(jfce, 4, 5000, out.as_mut_ptr());
            assert_eq!(
                got,
                1,
                "event missed with {seen} of {} CRs seen",
                THREADS * PER
            );
            let mut jfcs = [sjfc];
            let mut nev = [1u32];
            u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
            waits += 1;
        }
        for p in posters {
            p.join().unwrap();
        }
        assert_eq!(seen, THREADS * PER);
        assert!(waits > 0, "the loop slept at least once");
        // The last arm may have fired after the final drain: ack whatever was reported.
        let c = counters();
        let pending = c.events_reported - c.events_acked;
        if pending > 0 {
            let mut jfcs = [sjfc];
            let mut nev = [pending as u32];
            assert_eq!(
                u::urma_wait_jfc(jfce, 4, 0, out.as_mut_ptr()) as u64,
                pending
            );
            u::urma_ack_jfc(jfcs.as_mut_ptr(), nev.as_mut_ptr(), 1);
        }
        u::urma_unimport_seg(rdst);
        u::urma_unimport_jetty(tj);
        delete_jetty(rj);
        u::urma_delete_jfs(jfs);
        assert_eq!(u::urma_delete_jfc(sjfc), 0);
        assert_eq!(u::urma_delete_jfc(rjfc), 0);
        assert_eq!(u::urma_delete_jfce(jfce), u::URMA_SUCCESS);
    }
}

/// Restores completion-synchronous posts when a test that switched to `async_post=1` ends
/// (the mode is process-wide and kept by `urma_loopback_reset`).
struct AsyncPosts;

impl AsyncPosts {
    fn on() -> AsyncPosts {
        apply_spec("async_post=1");
        AsyncPosts
    }
}

impl Drop for AsyncPosts {
    fn drop(&mut self) {
        apply_spec("async_post=0");
    }
}

fn apply_spec(spec: &str) {
    let spec = std::ffi::CString::new(spec).unwrap();
    // SAFETY: `spec` is a NUL-terminated CString alive for the call; apply_knobs only reads it.
    assert_eq!(unsafe { (ctl().apply_knobs)(spec.as_ptr()) }, 1);
}

#[test]
fn async_posts_complete_on_the_dma_engine_in_post_order() {
    let _g = serial();
    let _async = AsyncPosts::on();
    let p = Pair::new(256, 16);
    const N: usize = 64;
    const PIECE: usize = 16 * 1024;
    let mut src = Seg::rw(N * PIECE);
    src.buf
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i % 251) as u8);
    let dst = Seg::rw(N * PIECE);
    let rdst = dst.import(TOKEN);
    assert!(!rdst.is_null());
    let mut s: Vec<u::urma_sge_t> = (0..N)
        .map(|i| sge(src.addr() + (i * PIECE) as u64, PIECE as u32, src.tseg))
        .collect();
    let mut d: Vec<u::urma_sge_t> = (0..N)
        .map(|i| sge(dst.addr() + (i * PIECE) as u64, PIECE as u32, rdst))
        .collect();
    let mut wrs: Vec<u::urma_jfs_wr_t> = s
        .iter_mut()
        .zip(d.iter_mut())
        .enumerate()
        .map(|(i, (s, d))| rw_wr(u::URMA_OPC_WRITE, s, d, p.tjetty, 0x100 + i as u64, true))
        .collect();
    for i in (0..N - 1).rev() {
        let next: *mut u::urma_jfs_wr_t = &mut wrs[i + 1];
        wrs[i].next = next;
    }
    // One chain, one batch for the engine; the post returns once it is queued.
    assert_eq!(post(p.jfs, &mut wrs[0]).0, 0);
    // Any other export waits for the engine: the counters see every byte, a non-blocking poll
    // right after the post returns every CR, in post order, with the data in place.
    let c = counters();
    assert_eq!(c.send_wrs, N as u64);
    assert_eq!(c.bytes_copied, (N * PIECE) as u64);
    let crs = poll(p.sjfc, 2 * N);
    assert_eq!(crs.len(), N);
    for (i, cr) in crs.iter().enumerate() {
        assert_eq!(cr.status, u::URMA_CR_SUCCESS);
        assert_eq!(cr.user_ctx, 0x100 + i as u64, "CRs in post order");
        assert_eq!(cr.completion_len, PIECE as u32);
    }
    assert!(dst.buf == src.buf);
    // A SEND posted without a recv WR parks on the engine (RNR) and is delivered by the next
    // recv post, exactly as with completion-synchronous posts.
    let mut one = sge(src.addr(), 64, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut one), p.tjetty, 0x77, 0, true);
    assert_eq!(post(p.jfs, &mut wr).0, 0);
    let rbuf = Seg::rw(64);
    assert_eq!(p.post_recv(0x88, Some((&rbuf, 64))), 0);
    let rc = poll(p.rjfc, 4);
    assert_eq!(rc.len(), 1);
    assert_eq!(rc[0].user_ctx, 0x88);
    assert_eq!(counters().rnr_delivered_late, 1);
    assert_eq!(&rbuf.buf[..], &src.buf[..64]);
    let sc = poll(p.sjfc, 4);
    assert_eq!(sc.len(), 1);
    assert_eq!(sc[0].user_ctx, 0x77);
    // SAFETY: `rdst` was imported above (non-NULL asserted), is unimported exactly once and not
    // used afterwards; its WRs completed (their CRs were polled).
    unsafe { u::urma_unimport_seg(rdst) };
}

/// The suite runs in both modes of the provider (`make test` runs it a second time with
/// `URMA_LOOPBACK_DIR` naming a regular file): joined to the host (the default, cross-process
/// capable, uasid = the process's slot, never 0) and in-process only (the directory is
/// unusable, the process keeps the uasid it asked for at `urma_init`, 0 here). Every other
/// test of this file must behave alike in both.
#[test]
fn host_membership_follows_the_directory() {
    let _g = serial();
    // SAFETY: lb().ctx is the live fixture context.
    let uasid = unsafe { (*lb().ctx).uasid };
    let unusable = std::env::var_os("URMA_LOOPBACK_DIR")
        .map(std::path::PathBuf::from)
        .is_some_and(|d| d.exists() && !d.is_dir());
    if unusable {
        assert_eq!(
            uasid, 0,
            "an unusable directory leaves the process in-process only"
        );
    } else {
        assert_ne!(uasid, 0, "a usable directory gives the process a host slot");
    }
}
