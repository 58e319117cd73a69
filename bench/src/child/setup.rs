//! What a cell sets up before it measures: the watchdog, the loopback endpoints and the library instance.

use std::ffi::c_void;
use std::time::Duration;

use super::callbacks::on_log;
use super::cfg::CellCfg;
use testkit::os_transport::os_transport_cfg_t;
use testkit::{EndpointCfg, EndpointPair, Loopback, OsTransportLib, RecvKind, SendKind};

pub(crate) fn watchdog(limit: Duration) {
    std::thread::Builder::new()
        .name("bench-watchdog".into())
        .spawn(move || {
            std::thread::sleep(limit);
            println!("ERROR watchdog: the cell did not finish within {limit:?} (library hang?)");
            std::process::exit(3);
        })
        .expect("spawn watchdog");
}

/// The byte every source buffer is filled with (copy-mode cells check the destinations hold it).
pub(crate) const SRC_BYTE: u8 = 0xA5;

/// The endpoints of a cell: a JFS sender and a jetty receiver with deep queues.
pub(crate) fn endpoints(lb: &Loopback, event: bool) -> EndpointPair {
    EndpointPair::new(
        lb,
        &EndpointCfg {
            send: SendKind::Jfs,
            recv: RecvKind::Jetty,
            jfc_depth: 16384,
            sq_depth: 4096,
            rq_depth: 4096,
            event_mode: event,
            ..EndpointCfg::default()
        },
    )
}

/// Registers the log callback (level INFO hides DEBUG, as in a production application) and
/// initialises an instance on the receiver's JFC with `cfg.workers` workers.
pub(crate) fn init_lib(
    lib: &OsTransportLib,
    lb: &Loopback,
    pair: &EndpointPair,
    cfg: &CellCfg,
) -> Result<*mut c_void, String> {
    // SAFETY: valid callback.
    unsafe { (lib.os_transport_log_reg)(0, Some(on_log)) };
    let mut ocfg = os_transport_cfg_t {
        urma_event_mode: cfg.event,
        worker_thread_num: cfg.workers,
        recv_queue_capacity: 256,
        ..Default::default()
    };
    ocfg.jfc = pair.receiver.cq.jfc;
    ocfg.jfce = pair.receiver.cq.jfce;
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid context, config and out-pointer.
    let r = unsafe { (lib.os_transport_init)(lb.ctx, &mut ocfg, &mut h) };
    if r != 0 || h.is_null() {
        return Err(format!("os_transport_init returned {r:#x}"));
    }
    Ok(h)
}
