//! The cross-process transport: host membership (a slot and its uasid), one Unix-domain stream
//! socket per process, and connections between processes of the same user.
//!
//! * **Membership**: `$URMA_LOOPBACK_DIR` (default `/dev/shm/urma-loopback-<uid>`) is opened
//!   once, without following a link, and checked through its descriptor (a directory of this
//!   user, mode 0700 or narrower); every later name in it (`<n>.slot`, `<n>.sock`) is reached
//!   through that descriptor, so re-pointing the path afterwards changes nothing. A process owns
//!   slot `n` while it holds a POSIX write lock (`F_SETLK`) on `<n>.slot`. The kernel drops the
//!   lock when the process dies, however it dies, and a forked child does not inherit it, so a
//!   stale slot is simply taken over. `n` is the process's uasid; its socket is `<n>.sock`. A
//!   process that cannot join never talks to another process.
//! * **Admission**: both ends read the other's credentials from the kernel (`SO_PEERCRED`) before
//!   anything else crosses: another user's process is refused. The requester checks that the
//!   socket's owner is the process that holds slot `n`; its first message ([`K_HELLO`]) names its
//!   own uasid, which the owner checks the same way, so the sender named in a CR comes from the
//!   connection, never from a request. A pid that reads as 0 (a process of another pid
//!   namespace) proves nothing and is refused at both ends.
//! * **Connections**: a requester connects to an owner at its first import from it. It writes
//!   requests (header, descriptors, payload); the owner's thread for that connection
//!   (`urma-lb-rx`, see [`crate::xproc`]) answers each with one acknowledgement, in order. The
//!   requester's reader thread (`urma-lb-ack`) pops the oldest outstanding request's completion
//!   for every acknowledgement. An owner closes a connection idle for the idle timeout with
//!   [`K_BYE`]: the requester sends nothing more on it and opens a new one for its next request,
//!   after the old one's acknowledgements have arrived (so requests keep their order).
//! * **Limits** ([`crate::knobs::limits`]): connecting, every message body and every
//!   acknowledgement are bounded by time; an owner serves a bounded number of connections, at
//!   most [`PER_PEER`] of one process, which must say HELLO within a short deadline.
//! * **Refusals** ([`Incoming::gate`], [`Incoming::refused`]): a requesting process whose token
//!   checks were refused waits, before each later check, for a back-off that grows with its
//!   refusals, and an owner refusing many checks paces all of them.
//!   No lock is held across socket I/O but the connection's own writer lock.
//! * **Peer death**: the kernel closes a dead process's sockets, so the reader sees end-of-file
//!   (or a reset) at once and completes every outstanding request with "peer gone"; later
//!   requests to that process complete the same way without being sent.
//!
//! This module knows nothing of WRs or objects: a request's completion is a closure.
//!
//! One job per file: socket I/O with deadlines and credentials (`io`), membership (`member`), the
//! owner side's admission, pool shares and refusal pacing (`admission`), the requester side's
//! connections (`conn`); joining the host, which starts the owner side, is here.

mod admission;
mod conn;
mod io;
mod member;

use std::os::unix::net::UnixListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::util::{lock, log_alert};

use admission::{accept_loop, forget_requesters};
use conn::forget_peers;
use member::{Me, MAX_SLOT, ME, MY_PID, MY_UASID};
pub use urma_datapath::message::{
    Hdr, Piece, ACK_CLOSING, HDR_LEN, IMPORT_OK, IMPORT_REFUSED, K_ACK, K_BYE, K_DATA, K_HELLO,
    K_IMPORT_JETTY, K_IMPORT_SEG, PIECE_LEN, TARGET_JETTY, TARGET_JFR, TARGET_NONE, VERSION,
};

pub use admission::{Incoming, Serve, REFUSALS};
pub use conn::{peer, Done, Peer};
pub use io::{deadline, discard, hung_up, read_exact, read_raw, write_hdr, write_raw, Got};
pub use member::{dir_path, my_uasid, Dir};

/// Joins the host (at most once per process; again in a forked child): claims a slot, binds the
/// socket and starts the thread that accepts connections, each admitted one served by `serve` on
/// a thread of its own. `want` != 0 asks for that uasid. Returns the uasid, or `None` when the
/// process stays in-process only (the directory is unusable, no free slot, the wanted uasid is
/// taken); that is reported through [`log_alert`].
pub fn join(want: u32, serve: Serve) -> Option<u32> {
    let mut me = lock(&ME);
    let pid = std::process::id();
    if let Some(m) = me.as_ref() {
        if m.pid == pid {
            return Some(m.uasid);
        }
    }
    // A forked child: the parent's slot, socket and connections are the parent's, and so are
    // the requesters it served (their connection counts and back-off).
    forget_peers();
    forget_requesters();
    let refuse = |why: String| {
        log_alert(&format!(
            "multi-process mode off, this process reaches no other: {why}"
        ));
        None
    };
    let dir = match Dir::open(dir_path()) {
        Ok(d) => Arc::new(d),
        Err(e) => return refuse(e),
    };
    let claimed = if want != 0 {
        dir.claim(want).map(|f| (want, f))
    } else {
        (1..=MAX_SLOT).find_map(|n| dir.claim(n).map(|f| (n, f)))
    };
    let Some((uasid, slot)) = claimed else {
        return refuse(if want != 0 {
            format!("uasid {want} is taken in {}", dir.shown.display())
        } else {
            format!("no free slot in {}", dir.shown.display())
        });
    };
    let name = format!("{uasid}.sock");
    dir.unlink(&name);
    let listener = match UnixListener::bind(dir.via_fd(&name)) {
        Ok(l) => l,
        Err(e) => return refuse(format!("socket {}/{name}: {e}", dir.shown.display())),
    };
    let d2 = dir.clone();
    let spawned = std::thread::Builder::new()
        .name("urma-lb-accept".into())
        .spawn(move || accept_loop(listener, d2, uasid, serve));
    if let Err(e) = spawned {
        return refuse(format!("no thread to accept connections: {e}"));
    }
    *me = Some(Me {
        pid,
        uasid,
        dir,
        _slot: slot,
    });
    MY_PID.store(pid, Ordering::Release);
    MY_UASID.store(uasid, Ordering::Release);
    Some(uasid)
}
