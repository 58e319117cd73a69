//! Two processes on one host share `loopback0`: the test process and a copy of this test binary
//! re-executed as a child (`child_process_entry` with `XPROC_ROLE` set). They exchange their ids
//! over the child's stdin/stdout, as applications exchange them out of band.
#![allow(clippy::field_reassign_with_default)]

mod common;
use common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The bound of every wait for the other process (scaled under an emulator).
fn t() -> Duration {
    Duration::from_secs(10) * testkit::target::slowdown()
}
/// The documented bound for a dead peer's outstanding WRs to fail (natively; scaled under an
/// emulator like every wall-clock deadline of the tests).
fn death_bound() -> Duration {
    Duration::from_millis(100) * testkit::target::slowdown()
}

fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// A child process running one role of this binary.
struct Peer {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Peer {
    fn spawn(role: &str, knobs: &str) -> Peer {
        // Through the target runner when the tests run under an emulator.
        let mut child = testkit::target::command(std::env::current_exe().unwrap())
            .args(["--exact", "child_process_entry", "--nocapture"])
            .env("XPROC_ROLE", role)
            .env("URMA_LOOPBACK_KNOBS", knobs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the child test process");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(rest) = l.strip_prefix("XPROC ") {
                    if tx.send(rest.to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        Peer { child, lines }
    }

    fn say(&mut self, line: &str) {
        let i = self.child.stdin.as_mut().unwrap();
        writeln!(i, "{line}").unwrap();
        i.flush().unwrap();
    }

    /// The child's next message, as numbers (bounded wait).
    fn hear(&self) -> Vec<u64> {
        let l = self
            .lines
            .recv_timeout(t())
            .expect("the child answered in time");
        l.split_whitespace().map(|w| w.parse().unwrap()).collect()
    }

    fn finish(mut self) {
        drop(self.child.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "the child failed: {st}");
    }
}

fn say_out(v: &[u64]) {
    let s: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    println!("XPROC {}", s.join(" "));
}

fn hear_in() -> Vec<u64> {
    let mut l = String::new();
    std::io::stdin().read_line(&mut l).unwrap();
    l.split_whitespace().map(|w| w.parse().unwrap()).collect()
}

/// What a process publishes about its segment: ubva (uasid, va), length, token id.
fn seg_info(s: &Seg) -> [u64; 4] {
    // SAFETY: s.tseg is a live registered segment handle.
    let g = unsafe { (*s.tseg).seg };
    [
        u64::from(g.ubva.uasid),
        g.ubva.va,
        g.len,
        u64::from(g.token_id),
    ]
}

fn import_seg_from(info: &[u64], token: u32) -> *mut u::urma_target_seg_t {
    let mut g = u::urma_seg_t::default();
    g.ubva.eid = testkit_eid();
    g.ubva.uasid = info[0] as u32;
    g.ubva.va = info[1];
    g.len = info[2];
    g.token_id = info[3] as u32;
    g.attr.value = u::URMA_TOKEN_PLAIN_TEXT;
    let mut t = u::urma_token_t { token };
    // SAFETY: g and t are locals alive for the call; the loopback copies them.
    unsafe { u::urma_import_seg(lb().ctx, &mut g, &mut t, 0, Default::default()) }
}

fn testkit_eid() -> u::urma_eid_t {
    // SAFETY: lb().ctx is the live fixture context.
    unsafe { (*lb().ctx).eid }
}

fn import_jetty_from(uasid: u64, id: u64, token: u32) -> *mut u::urma_target_jetty_t {
    let mut r: u::urma_rjetty_t = Default::default();
    r.jetty_id.eid = testkit_eid();
    r.jetty_id.uasid = uasid as u32;
    r.jetty_id.id = id as u32;
    r.type_ = u::URMA_JETTY;
    r.trans_mode = u::URMA_TM_RM;
    let mut t = u::urma_token_t { token };
    // SAFETY: r and t are locals alive for the call.
    unsafe { u::urma_import_jetty(lb().ctx, &mut r, &mut t) }
}

/// Posts a one-SGE WRITE or READ `(opcode, bytes, user_ctx)` with a send CR, from the SGE
/// `from` (address, segment handle) to `to`; returns the post status.
fn post_rw(
    jfs: *mut u::urma_jfs_t,
    (op, len, ctx): (u32, u32, u64),
    from: (u64, *mut u::urma_target_seg_t),
    to: (u64, *mut u::urma_target_seg_t),
) -> i32 {
    let mut s = sge(from.0, len, from.1);
    let mut d = sge(to.0, len, to.1);
    let mut wr = rw_wr(op, &mut s, &mut d, std::ptr::null_mut(), ctx, true);
    post(jfs, &mut wr).0
}

/// A JFC (depth 64) and a JFS completing to it, on the fixture context.
fn send_queue() -> (*mut u::urma_jfc_t, *mut u::urma_jfs_t) {
    // SAFETY: the fixture context is live; the helpers check every handle they create.
    unsafe {
        let c = jfc(64, std::ptr::null_mut());
        (c, jfs(c))
    }
}

fn my_uasid() -> u64 {
    // SAFETY: lb().ctx is the live fixture context.
    u64::from(unsafe { (*lb().ctx).uasid })
}

/// Entry of the child processes (does nothing unless started by a test below with
/// `XPROC_ROLE`).
#[test]
fn child_process_entry() {
    match std::env::var("XPROC_ROLE").as_deref() {
        Ok("sender") => sender_child(),
        Ok("target") => target_child(),
        Ok("sink") => sink_child(),
        Ok("rnr") => rnr_child(),
        Ok("dies") => dying_sender_child(),
        _ => {}
    }
}

/// Imports the parent's segment and jetty, then WRITE, SEND_IMM, WRITE_IMM, SEND to them.
fn sender_child() {
    let _g = serial();
    let p = hear_in(); // parent: seg info (4), jetty uasid, jetty id
    let (seg, juasid, jid) = (&p[0..4], p[4], p[5]);
    assert!(
        import_seg_from(seg, TOKEN ^ 1).is_null(),
        "a wrong token is refused by the owner"
    );
    assert!(import_jetty_from(juasid, jid, TOKEN ^ 1).is_null());
    assert!(
        import_jetty_from(juasid, jid + 1000, TOKEN).is_null(),
        "no such jetty in that process"
    );
    let rseg = import_seg_from(seg, TOKEN);
    assert!(!rseg.is_null());
    let tj = import_jetty_from(juasid, jid, TOKEN);
    assert!(!tj.is_null());
    let mut src = Seg::rw(16384);
    src.buf
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = pattern(i));
    // SAFETY: the fixture context is live; the handles are checked by the helpers.
    let (jfc, jfs) = unsafe {
        let c = jfc(64, std::ptr::null_mut());
        (c, jfs(c))
    };
    let base = seg[1];
    // WRITE 4000 bytes at +100.
    let w = (u::URMA_OPC_WRITE, 4000, 1);
    assert_eq!(
        post_rw(jfs, w, (src.addr(), src.tseg), (base + 100, rseg)),
        0
    );
    // SEND_IMM 100 bytes from src+4000.
    let mut s2 = sge(src.addr() + 4000, 100, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, Some(&mut s2), tj, 2, 0xabc, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    // WRITE_IMM 512 bytes at +8192 with notify data.
    let mut s3 = sge(src.addr() + 5000, 512, src.tseg);
    let mut d3 = sge(base + 8192, 512, rseg);
    let mut wr = rw_wr(u::URMA_OPC_WRITE_IMM, &mut s3, &mut d3, tj, 3, true);
    wr.__bindgen_anon_1.rw.notify_data = 0x77;
    assert_eq!(post(jfs, &mut wr).0, 0);
    // SEND 50 bytes.
    let mut s4 = sge(src.addr() + 6000, 50, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut s4), tj, 4, 0, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    // WRITE past the end of the remote segment: the owner refuses it.
    let w = (u::URMA_OPC_WRITE, 64, 5);
    let end = (base + seg[2] - 32, rseg);
    assert_eq!(post_rw(jfs, w, (src.addr(), src.tseg), end), 0);
    // READ 256 bytes back from +100 (what the WRITE put there).
    let w = (u::URMA_OPC_READ, 256, 6);
    let to = (src.addr() + 8192, src.tseg);
    assert_eq!(post_rw(jfs, w, (base + 100, rseg), to), 0);

    let crs = poll_n(jfc, 6, t());
    let got: Vec<(u64, u32, u32)> = crs
        .iter()
        .map(|c| (c.user_ctx, c.status, c.completion_len))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, u::URMA_CR_SUCCESS, 4000),
            (2, u::URMA_CR_SUCCESS, 100),
            (3, u::URMA_CR_SUCCESS, 512),
            (4, u::URMA_CR_SUCCESS, 50),
            (5, u::URMA_CR_REM_ACCESS_ABORT_ERR, 0),
            (6, u::URMA_CR_SUCCESS, 256),
        ],
        "send CRs in post order, with the owner's statuses"
    );
    assert!(
        src.buf[8192..8192 + 256]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern(i)),
        "READ brought the written bytes back"
    );
    // SAFETY: the jfs handle is live.
    say_out(&[my_uasid(), u64::from(unsafe { (*jfs).jfs_id.id })]);
    let _ = hear_in(); // wait until the parent checked, then leave (stdin closes)
                       // SAFETY: handles created above, deleted once.
    unsafe {
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(u::urma_unimport_seg(rseg), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

#[test]
fn two_processes_write_send_imm_write_imm_send_with_crs_on_both_sides() {
    two_processes(false);
}

#[test]
fn two_processes_event_mode_wakes_the_owner_for_another_process_s_message() {
    two_processes(true);
}

/// The owner's recv CRs: polled with a bound, or in event mode (rearm, wait, ack, poll).
fn owner_crs(cq: &testkit::Cq, n: usize) -> Vec<u::urma_cr_t> {
    if cq.jfce.is_null() {
        return cq.poll_n(n, t());
    }
    let end = Instant::now() + t();
    let mut crs = Vec::new();
    while crs.len() < n && Instant::now() < end {
        // SAFETY: live JFC/JFCE handles of the fixture context; `got` has room for one JFC.
        unsafe {
            assert_eq!(u::urma_rearm_jfc(cq.jfc, false), 0);
            let mut got = [std::ptr::null_mut(); 1];
            let k = u::urma_wait_jfc(cq.jfce, 1, 5000, got.as_mut_ptr());
            assert_eq!(k, 1, "an event for a CR of another process's message");
            assert_eq!(got[0], cq.jfc);
            let mut one = 1u32;
            u::urma_ack_jfc(got.as_mut_ptr(), &mut one, 1);
        }
        crs.extend(cq.poll(n - crs.len()));
    }
    crs
}

fn two_processes(event_mode: bool) {
    let _g = serial();
    let cq = testkit::Cq::new(lb(), 64, event_mode);
    let rjfc = cq.jfc;
    // SAFETY: the fixture context is live; every handle is checked by the helpers.
    let rjetty = unsafe { jetty(rjfc, 16) };
    let dst = Seg::rw(64 * 1024);
    let rbufs: Vec<Seg> = (0..3).map(|_| Seg::rw(1024)).collect();
    for (k, b) in rbufs.iter().enumerate() {
        assert_eq!(post_jetty_recv(rjetty, 100 + k as u64, Some((b, 1024))), 0);
    }
    // SAFETY: a control call with a plain value.
    unsafe { (ctl().trace_capture)(true) };
    let mut child = Peer::spawn("sender", "");
    let mut msg = seg_info(&dst).to_vec();
    // SAFETY: rjetty is live.
    let jid = unsafe { (*rjetty).jetty_id };
    assert_eq!(u64::from(jid.uasid), my_uasid());
    msg.extend([u64::from(jid.uasid), u64::from(jid.id)]);
    child.say(
        &msg.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" "),
    );
    let who = child.hear(); // child uasid, child jfs id
    assert_ne!(who[0], my_uasid(), "each process has its own uasid");
    let crs = owner_crs(&cq, 3);
    assert_eq!(crs.len(), 3, "three recv CRs in this process");
    let kinds: Vec<(u32, u64, u64, u32)> = crs
        .iter()
        .map(|c| (c.opcode, c.user_ctx, imm(c), c.completion_len))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (u::URMA_CR_OPC_SEND_WITH_IMM, 100, 0xabc, 100),
            (u::URMA_CR_OPC_WRITE_WITH_IMM, 101, 0x77, 512),
            (u::URMA_CR_OPC_SEND, 102, 0, 50),
        ]
    );
    for c in &crs {
        assert_eq!(c.status, u::URMA_CR_SUCCESS);
        assert_eq!(s_r(c), 1);
        assert_eq!(jetty_bit(c), 1);
        assert_eq!(c.local_id, jid.id);
        assert_eq!(
            (u64::from(c.remote_id.uasid), u64::from(c.remote_id.id)),
            (who[0], who[1]),
            "remote_id names the sending process and its JFS"
        );
    }
    let d = &dst.buf;
    assert!((0..4000).all(|i| d[100 + i] == pattern(i)), "WRITE landed");
    assert!(
        (0..512).all(|i| d[8192 + i] == pattern(5000 + i)),
        "WRITE_IMM landed"
    );
    assert!(d[..100].iter().all(|&b| b == 0) && d[4100..8192].iter().all(|&b| b == 0));
    let r: Vec<&[u8]> = rbufs.iter().map(|b| &b.buf[..]).collect();
    assert!(
        (0..100).all(|i| r[0][i] == pattern(4000 + i)),
        "SEND_IMM payload"
    );
    assert!(
        r[1].iter().all(|&b| b == 0),
        "WRITE_IMM consumed a recv WR, no data in it"
    );
    assert!(
        (0..50).all(|i| r[2][i] == pattern(6000 + i)),
        "SEND payload"
    );
    assert!(
        poll(rjfc, 4).is_empty(),
        "no CR for WRITE/READ at the target"
    );
    let c = counters();
    assert_eq!(
        c.bytes_copied,
        4000 + 100 + 512 + 50,
        "the bytes written into this process's registered memory (the READ counts in the child)"
    );
    let lines = trace_take();
    let cr_lines: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"ev\":\"cr\""))
        .collect();
    assert_eq!(cr_lines.len(), 3, "{lines:?}");
    let sender = format!("\"remote\":\"uasid{}:{}\"", who[0], who[1]);
    assert!(
        cr_lines.iter().all(|l| l.contains(&sender)),
        "a sender in another process is named by uasid and id: {cr_lines:?}"
    );
    child.say("0");
    child.finish();
    // SAFETY: handles created above, deleted once.
    unsafe {
        assert_eq!(delete_jetty(rjetty), 0);
        assert_eq!(u::urma_delete_jfc(rjfc), 0);
        if event_mode {
            assert_eq!(u::urma_delete_jfce(cq.jfce), 0);
        }
    }
}

/// Registers a jetty with no recv WR and a segment, publishes them and waits to be killed.
fn target_child() {
    let _g = serial();
    // SAFETY: the fixture context is live.
    let (c, j) = unsafe {
        let c = jfc(64, std::ptr::null_mut());
        (c, jetty(c, 16))
    };
    let s = Seg::rw(4096);
    let mut m = seg_info(&s).to_vec();
    // SAFETY: j is live.
    m.push(u64::from(unsafe { (*j).jetty_id.id }));
    say_out(&m);
    let _ = hear_in(); // blocks until killed
    let _ = (c, s);
}

#[test]
fn a_killed_peer_fails_outstanding_wrs_within_the_bound() {
    let _g = serial();
    let mut child = Peer::spawn("target", "rnr_timeout_ms=60000");
    let m = child.hear();
    let (seg, jid) = (&m[0..4], m[4]);
    let rseg = import_seg_from(seg, TOKEN);
    let tj = import_jetty_from(seg[0], jid, TOKEN);
    assert!(!rseg.is_null() && !tj.is_null());
    let (jfc, jfs) = send_queue();
    let src = Seg::rw(4096);
    // A SEND the target keeps waiting for a recv WR (its RNR timeout is 60 s).
    let mut s = sge(src.addr(), 64, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut s), tj, 1, 0, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    assert!(poll(jfc, 1).is_empty(), "outstanding at the peer");
    child.child.kill().unwrap(); // SIGKILL
    let t0 = Instant::now();
    let crs = poll_n(jfc, 1, t());
    let took = t0.elapsed();
    child.child.wait().unwrap();
    assert_eq!(crs.len(), 1);
    assert_eq!(crs[0].user_ctx, 1);
    assert_eq!(crs[0].status, u::URMA_CR_ACK_TIMEOUT_ERR);
    println!("peer death to error CR: {took:?}");
    assert!(took < death_bound(), "took {took:?}");
    // Later WRs to the dead process fail at once, WRITE and SEND alike.
    let w = (u::URMA_OPC_WRITE, 64, 2);
    assert_eq!(post_rw(jfs, w, (src.addr(), src.tseg), (seg[1], rseg)), 0);
    let mut s3 = sge(src.addr(), 8, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, Some(&mut s3), tj, 3, 9, false);
    assert_eq!(post(jfs, &mut wr).0, 0);
    let crs = poll_n(jfc, 2, t());
    let got: Vec<(u64, u32)> = crs.iter().map(|c| (c.user_ctx, c.status)).collect();
    assert_eq!(
        got,
        vec![
            (2, u::URMA_CR_ACK_TIMEOUT_ERR),
            (3, u::URMA_CR_ACK_TIMEOUT_ERR)
        ]
    );
    assert!(
        import_seg_from(seg, TOKEN).is_null(),
        "nothing to import from a dead process"
    );
    // SAFETY: handles created above, released once.
    unsafe {
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(u::urma_unimport_seg(rseg), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

const BULK: usize = 32 << 20;
const CHUNK: usize = 2 << 20;

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Registers a large segment, publishes it, and answers with the checksum of its contents.
fn sink_child() {
    let _g = serial();
    let s = Seg::rw(BULK);
    say_out(&seg_info(&s));
    let _ = hear_in(); // the parent's writes completed
    say_out(&[fnv(&s.buf)]);
    let _ = hear_in();
}

#[test]
fn cross_process_write_bandwidth() {
    let _g = serial();
    let mut child = Peer::spawn("sink", "");
    let seg = child.hear();
    let rseg = import_seg_from(&seg, TOKEN);
    assert!(!rseg.is_null());
    let (jfc, jfs) = send_queue();
    let mut src = Seg::rw(BULK);
    src.buf
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = pattern(i / 3));
    let t0 = Instant::now();
    for k in 0..BULK / CHUNK {
        let off = (k * CHUNK) as u64;
        let w = (u::URMA_OPC_WRITE, CHUNK as u32, k as u64);
        let from = (src.addr() + off, src.tseg);
        assert_eq!(post_rw(jfs, w, from, (seg[1] + off, rseg)), 0);
    }
    let crs = poll_n(jfc, BULK / CHUNK, t());
    let took = t0.elapsed();
    assert_eq!(crs.len(), BULK / CHUNK);
    assert!(crs.iter().all(|c| c.status == u::URMA_CR_SUCCESS));
    println!(
        "cross-process WRITE: {} MiB in {:?} = {:.0} MiB/s",
        BULK >> 20,
        took,
        (BULK >> 20) as f64 / took.as_secs_f64()
    );
    child.say("0");
    assert_eq!(child.hear(), vec![fnv(&src.buf)], "every byte landed");
    child.say("0");
    child.finish();
    // SAFETY: handles created above, released once.
    unsafe {
        assert_eq!(u::urma_unimport_seg(rseg), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

/// Two SEND_IMMs to the parent's jetty, the second after the parent says so; prints each status.
fn rnr_child() {
    let _g = serial();
    let j = hear_in(); // jetty uasid, id
    let tj = import_jetty_from(j[0], j[1], TOKEN);
    assert!(!tj.is_null());
    let (jfc, jfs) = send_queue();
    let src = Seg::rw(64);
    for k in 1..=2u64 {
        if k == 2 {
            let _ = hear_in();
        }
        let mut s = sge(src.addr(), 16, src.tseg);
        let mut wr = send_wr(u::URMA_OPC_SEND_IMM, Some(&mut s), tj, k, 5, true);
        assert_eq!(post(jfs, &mut wr).0, 0);
        let crs = poll_n(jfc, 1, t());
        assert_eq!(crs.len(), 1);
        say_out(&[u64::from(crs[0].status)]);
    }
    let _ = hear_in();
    // SAFETY: handles created above, released once.
    unsafe {
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

#[test]
fn receiver_not_ready_across_processes_waits_for_the_owner_s_recv_wr() {
    let _g = serial();
    // SAFETY: a control call with a plain value.
    unsafe { (ctl().set_rnr_timeout)(10_000) };
    // SAFETY: the fixture context is live.
    let (rjfc, rjetty) = unsafe {
        let c = jfc(64, std::ptr::null_mut());
        (c, jetty(c, 16))
    };
    let rbuf = Seg::rw(64);
    let mut child = Peer::spawn("rnr", "");
    // SAFETY: rjetty is live.
    let jid = unsafe { (*rjetty).jetty_id };
    child.say(&format!("{} {}", jid.uasid, jid.id));
    // The message waits at this process for a recv WR (bounded poll of the counter).
    let end = Instant::now() + t();
    while counters().rnr_parked == 0 && Instant::now() < end {
        std::thread::yield_now();
    }
    assert_eq!(counters().rnr_parked, 1, "the SEND_IMM waits for a recv WR");
    assert!(poll(rjfc, 1).is_empty());
    assert_eq!(post_jetty_recv(rjetty, 77, Some((&rbuf, 64))), 0);
    let crs = poll_n(rjfc, 1, t());
    assert_eq!(crs.len(), 1);
    assert_eq!(
        (crs[0].user_ctx, imm(&crs[0]), crs[0].completion_len),
        (77, 5, 16)
    );
    assert_eq!(child.hear(), vec![u64::from(u::URMA_CR_SUCCESS)]);
    assert_eq!(counters().rnr_delivered_late, 1);
    // With the RNR timeout 0 the owner refuses at once.
    // SAFETY: a control call with a plain value.
    unsafe { (ctl().set_rnr_timeout)(0) };
    child.say("0");
    assert_eq!(
        child.hear(),
        vec![u64::from(u::URMA_CR_RNR_RETRY_CNT_EXC_ERR)]
    );
    assert!(poll(rjfc, 1).is_empty(), "no recv CR for a refused message");
    assert_eq!(counters().rnr_errors, 1);
    child.say("0");
    child.finish();
    // SAFETY: handles created above, deleted once.
    unsafe {
        assert_eq!(delete_jetty(rjetty), 0);
        assert_eq!(u::urma_delete_jfc(rjfc), 0);
    }
}

#[test]
fn knobs_of_the_posting_process_apply_to_wrs_towards_another_process() {
    let _g = serial();
    let mut child = Peer::spawn("target", "");
    let m = child.hear();
    let rseg = import_seg_from(&m[0..4], TOKEN);
    assert!(!rseg.is_null());
    // SAFETY: control calls with plain values: the 2nd send WR completes with an injected
    // status (nothing is sent), the 4th generated CR is dropped.
    unsafe {
        assert_eq!((ctl().fail_completion)(2, u::URMA_CR_LOC_OPERATION_ERR), 0);
        assert_eq!((ctl().cr_action)(4, 1), 0);
    }
    let (jfc, jfs) = send_queue();
    let src = Seg::rw(4096);
    for k in 1..=5u64 {
        let to = (m[1] + 1024 * (k - 1) % m[2], rseg);
        let w = (u::URMA_OPC_WRITE, 1024, k);
        assert_eq!(post_rw(jfs, w, (src.addr(), src.tseg), to), 0);
    }
    let crs = poll_n(jfc, 4, t());
    let got: Vec<(u64, u32)> = crs.iter().map(|c| (c.user_ctx, c.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, u::URMA_CR_SUCCESS),
            (2, u::URMA_CR_LOC_OPERATION_ERR),
            (3, u::URMA_CR_SUCCESS),
            (5, u::URMA_CR_SUCCESS),
        ],
        "the injected status completes in post order among acknowledged WRs; CR 4 dropped"
    );
    let c = counters();
    assert_eq!((c.crs_generated, c.crs_dropped), (5, 1));
    child.child.kill().unwrap();
    child.child.wait().unwrap();
    // SAFETY: handles created above, released once.
    unsafe {
        assert_eq!(u::urma_unimport_seg(rseg), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}

/// Sends one SEND_IMM to the parent's jetty, says so, and waits to be killed.
fn dying_sender_child() {
    let _g = serial();
    let j = hear_in();
    let tj = import_jetty_from(j[0], j[1], TOKEN);
    assert!(!tj.is_null());
    let (_jfc, jfs) = send_queue();
    let src = Seg::rw(64);
    let mut s = sge(src.addr(), 16, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, Some(&mut s), tj, 1, 5, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    say_out(&[1]);
    let _ = hear_in(); // blocks until killed
}

#[test]
fn an_owner_drops_a_waiting_message_of_a_killed_sender_and_keeps_its_recv_wr() {
    let _g = serial();
    // SAFETY: a control call with a plain value.
    unsafe { (ctl().set_rnr_timeout)(10_000) };
    // SAFETY: the fixture context is live.
    let (rjfc, rjetty, sjfc, jfs) = unsafe {
        let c = jfc(64, std::ptr::null_mut());
        let sc = jfc(64, std::ptr::null_mut());
        (c, jetty(c, 16), sc, jfs(sc))
    };
    let rbuf = Seg::rw(64);
    let mut child = Peer::spawn("dies", "");
    // SAFETY: rjetty is live.
    let jid = unsafe { (*rjetty).jetty_id };
    child.say(&format!("{} {}", jid.uasid, jid.id));
    assert_eq!(child.hear(), vec![1]);
    let end = Instant::now() + t();
    while counters().rnr_parked == 0 && Instant::now() < end {
        std::thread::yield_now();
    }
    assert_eq!(
        counters().rnr_parked,
        1,
        "the SEND_IMM waits for a recv WR here"
    );
    child.child.kill().unwrap();
    child.child.wait().unwrap();
    // The recv WR posted now is not given to the dead sender's message...
    assert_eq!(post_jetty_recv(rjetty, 77, Some((&rbuf, 64))), 0);
    // ...so this process's own SEND consumes it.
    // SAFETY: rjetty is a live jetty of the fixture context.
    let tj = unsafe { import_jetty(rjetty, TOKEN) };
    assert!(!tj.is_null());
    let mut s = sge(rbuf.addr() + 32, 8, rbuf.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND_IMM, Some(&mut s), tj, 9, 6, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    let crs = poll_n(rjfc, 1, t());
    assert_eq!(crs.len(), 1);
    assert_eq!(
        (crs[0].user_ctx, imm(&crs[0]), crs[0].completion_len),
        (77, 6, 8),
        "the recv WR stayed posted for this process's message"
    );
    assert_eq!(poll_n(sjfc, 1, t()).len(), 1);
    // SAFETY: handles created above, deleted once.
    unsafe {
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(u::urma_delete_jfs(jfs), 0);
        assert_eq!(delete_jetty(rjetty), 0);
        assert_eq!(u::urma_delete_jfc(rjfc), 0);
        assert_eq!(u::urma_delete_jfc(sjfc), 0);
    }
}

#[test]
fn four_threads_write_to_another_process_without_losing_or_reordering_a_cr() {
    const THREADS: u64 = 4;
    const PER: u64 = 2000;
    let _g = serial();
    let mut child = Peer::spawn("target", "");
    let m = child.hear();
    let rseg = testkit::SendPtr(import_seg_from(&m[0..4], TOKEN));
    assert!(!rseg.0.is_null());
    // SAFETY: the fixture context is live.
    let jfc = testkit::SendPtr(unsafe { jfc(1 << 16, std::ptr::null_mut()) });
    let src = Seg::rw(4096);
    let (base, len) = (m[1], m[2]);
    let queues: Vec<usize> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (src, rseg, jfc) = (&src, &rseg, &jfc);
                sc.spawn(move || {
                    // SAFETY: the fixture context and the shared JFC are live.
                    let q = unsafe { jfs(jfc.0) };
                    for i in 0..PER {
                        let off = (i * 64) % len;
                        let w = (u::URMA_OPC_WRITE, 64, (t << 32) | i);
                        let to = (base + off, rseg.0);
                        assert_eq!(post_rw(q, w, (src.addr(), src.tseg), to), 0);
                    }
                    q as usize
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let crs = poll_n(jfc.0, (THREADS * PER) as usize, t());
    assert_eq!(crs.len() as u64, THREADS * PER, "no CR lost");
    let mut next = [0u64; THREADS as usize];
    for c in &crs {
        assert_eq!(c.status, u::URMA_CR_SUCCESS);
        let (t, i) = ((c.user_ctx >> 32) as usize, c.user_ctx & 0xffff_ffff);
        assert_eq!(i, next[t], "thread {t}: CRs in post order, none duplicated");
        next[t] += 1;
    }
    assert!(poll(jfc.0, 1).is_empty());
    child.child.kill().unwrap();
    child.child.wait().unwrap();
    // SAFETY: handles created above, released once.
    unsafe {
        for q in queues {
            assert_eq!(u::urma_delete_jfs(q as *mut u::urma_jfs_t), 0);
        }
        assert_eq!(u::urma_unimport_seg(rseg.0), 0);
        assert_eq!(u::urma_delete_jfc(jfc.0), 0);
    }
}

#[test]
fn deleting_a_jfs_waits_for_its_wrs_at_another_process() {
    let _g = serial();
    let mut child = Peer::spawn("target", "rnr_timeout_ms=100");
    let m = child.hear();
    let tj = import_jetty_from(m[0], m[4], TOKEN);
    assert!(!tj.is_null());
    let (jfc, jfs) = send_queue();
    let src = Seg::rw(64);
    let mut s = sge(src.addr(), 16, src.tseg);
    let mut wr = send_wr(u::URMA_OPC_SEND, Some(&mut s), tj, 1, 0, true);
    assert_eq!(post(jfs, &mut wr).0, 0);
    // The target has no recv WR: its RNR timeout (100 ms) answers, before the delete returns.
    // SAFETY: jfs is live and deleted once.
    assert_eq!(unsafe { u::urma_delete_jfs(jfs) }, 0);
    let crs = poll(jfc, 2);
    assert_eq!(crs.len(), 1, "the CR came before the delete returned");
    assert_eq!(
        (crs[0].user_ctx, crs[0].status),
        (1, u::URMA_CR_RNR_RETRY_CNT_EXC_ERR)
    );
    child.child.kill().unwrap();
    child.child.wait().unwrap();
    // SAFETY: handles created above, released once.
    unsafe {
        assert_eq!(u::urma_unimport_jetty(tj), 0);
        assert_eq!(u::urma_delete_jfc(jfc), 0);
    }
}
