//! The scenario context: one run of one scenario against one library (or, for the interop
//! matrix, a sender library and a receiver library), over fresh loopback endpoints, recording
//! every step in a [`Recorder`].
//!
//! Every API call is made from the scenario thread, in program order, and recorded with its
//! arguments given symbolically (`H` for the handle, `S<n>` for the n-th sync handed out,
//! `src+off`, `dst+off`, `NULL`, ...), its return value and its out-parameters. CRs reach the
//! library through two application-style pollers (poll mode, or event mode through a JFCE):
//! send-side CRs are handed to `os_transport_wake_up_task` as they come; receive-side CRs are
//! either handed over as they come (`Delivery::Pass`) or held and then delivered by the
//! scenario in a chosen order, one at a time, waiting for the resulting `notify_callback`
//! (`Delivery::Held`), which makes the trace deterministic.
//!
//! One job per file: the context and its life (this file), the API calls (`calls`), the pollers
//! and the delivery of held CRs (`pollers`), the vocabulary of a run (`types`) and the wait for
//! idle workers (`workers`).

mod calls;
mod pollers;
mod types;
mod workers;

pub use types::{cr_key, cr_line, r32, Delivery, Lib, Order, SendVia, Setup, Side};
pub use workers::wait_workers_idle;

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use super::aspect::{note_line, Aspect};
use super::backend;
use super::record::{self, Recorder};
use crate::fixture::{Buffer, EndpointCfg, EndpointPair, ImportedSeg, Loopback, Poller};
use crate::lib_under_test::{os_transport_cfg_t, task_sync_t, OsTransportLib};

const PATTERN_LEN: usize = 15 * 1024 * 1024 + 7;

fn pattern() -> &'static [u8] {
    static P: OnceLock<Vec<u8>> = OnceLock::new();
    P.get_or_init(|| {
        let mut v = vec![0u8; PATTERN_LEN];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for b in v.iter_mut() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            *b = (s >> 24) as u8;
        }
        v
    })
}

/// The scenario context.
pub struct ScenarioRun {
    pub rec: Arc<Recorder>,
    pub slib: &'static Lib,
    pub rlib: &'static Lib,
    pub hs: *mut c_void,
    pub hr: *mut c_void,
    pub setup: Setup,
    pub pair: EndpointPair,
    pub src: Buffer,
    pub dst: Buffer,
    pub rdst: ImportedSeg,
    send_poller: Option<Poller>,
    recv_poller: Option<Poller>,
    syncs: Vec<(String, *mut task_sync_t)>,
    nsync: u32,
    finished: bool,
    /// Pass mode: the send poller waits for the receive poller (below). Off when the receiver
    /// is another process (`compat --split`): its CRs never reach this process's pollers.
    pub pace: bool,
}

impl ScenarioRun {
    /// Resets the loopback, starts the trace capture and creates endpoints and buffers.
    /// `slib` sends, `rlib` receives (the same library outside the interop matrix).
    pub fn new(slib: &'static Lib, rlib: &'static Lib, setup: Setup) -> ScenarioRun {
        let lb = Loopback::get();
        backend::get().start();
        let rec = Recorder::new();
        record::set_current(Some(rec.clone()));
        let pair = EndpointPair::new(
            lb,
            &EndpointCfg {
                recv: setup.recv_kind,
                event_mode: setup.event_mode,
                ..Default::default()
            },
        );
        let mut src = Buffer::new(lb, setup.buf_len + 4096);
        let dst = Buffer::new(lb, setup.buf_len + 4096);
        let rdst = dst.import(lb);
        // A backend without a no-copy mode (hardware) moves and checks the payload instead.
        let mut setup = setup;
        setup.nocopy = setup.nocopy && backend::get().set_nocopy(true);
        if !setup.nocopy {
            let p = pattern();
            for (i, c) in src.as_mut_slice().chunks_mut(PATTERN_LEN).enumerate() {
                let n = c.len();
                c.copy_from_slice(&p[..n]);
                c[0] = i as u8;
            }
        }
        ScenarioRun {
            rec,
            slib,
            rlib,
            hs: null_mut(),
            hr: null_mut(),
            setup,
            pair,
            src,
            dst,
            rdst,
            send_poller: None,
            recv_poller: None,
            syncs: Vec::new(),
            nsync: 0,
            finished: false,
            pace: true,
        }
    }

    fn single(&self) -> bool {
        std::ptr::eq(self.slib, self.rlib)
    }

    fn lib(&self, side: Side) -> &'static OsTransportLib {
        match side {
            Side::Send => &self.slib.lib,
            Side::Recv => &self.rlib.lib,
        }
    }

    /// The live handle used for `side`.
    pub fn handle(&self, side: Side) -> *mut c_void {
        match side {
            Side::Send => self.hs,
            Side::Recv => self.hr,
        }
    }

    fn hname(&self, h: *mut c_void) -> String {
        if h.is_null() {
            "NULL".into()
        } else if h == self.hs || h == self.hr {
            if self.single() {
                "H".into()
            } else if h == self.hs {
                "Hs".into()
            } else {
                "Hr".into()
            }
        } else {
            "H?".into()
        }
    }

    fn side_tag(&self, side: Side) -> &'static str {
        if self.single() {
            ""
        } else if side == Side::Send {
            "[send-lib] "
        } else {
            "[recv-lib] "
        }
    }

    /// A library configuration for this context's endpoints.
    pub fn cfg(&self, workers: u32, capacity: u32) -> os_transport_cfg_t {
        let mut c = os_transport_cfg_t::default();
        c.worker_thread_num = workers;
        c.recv_queue_capacity = capacity;
        c.urma_event_mode = self.setup.event_mode;
        c.jfc = self.pair.receiver.cq.jfc;
        c.jfce = self.pair.receiver.cq.jfce;
        c
    }

    /// Ends the run: stops the pollers, destroys live handles, closes the URMA trace capture
    /// and returns the raw trace.
    pub fn finish(mut self) -> Vec<Value> {
        self.finish_inner();
        self.rec.events()
    }

    fn finish_inner(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.stop_pollers();
        if self.single() {
            if !self.hs.is_null() {
                self.destroy(Side::Send);
            }
        } else {
            if !self.hs.is_null() {
                self.destroy(Side::Send);
            }
            if !self.hr.is_null() {
                self.destroy(Side::Recv);
            }
        }
        let at_poll = backend::get().cr_at_poll();
        for l in backend::get().take() {
            match serde_json::from_str::<Value>(&l) {
                Ok(v) if at_poll => self
                    .rec
                    .push(json!({"k": "urma", "raw": v, "at_poll": true})),
                Ok(v) => self.rec.push(json!({"k": "urma", "raw": v})),
                Err(_) => self.rec.note(note_line(
                    Aspect::Wire,
                    &format!("unparsable loopback trace line: {l}"),
                )),
            }
        }
        if self.setup.nocopy {
            backend::get().set_nocopy(false);
        }
        record::set_current(None);
    }
}

impl Drop for ScenarioRun {
    fn drop(&mut self) {
        self.finish_inner();
    }
}
