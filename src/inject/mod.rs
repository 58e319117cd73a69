//! The seven inject points of the inject flavour (cargo feature `inject`; docs/inject.md): where
//! the original library evaluates `os_transport.<point>`, the equivalent step of this pipeline
//! asks [`fault`], which passes the point in the host's registry (`os-transport-inject`): a sleep
//! delays the caller there, an error makes the step fail with the injected value. Without the
//! feature [`fault`] is `None`, known at compile time: the default library has no trace of the
//! points and exports only its ten functions.

#[cfg(feature = "inject")]
mod ffi;

/// An inject point: the step of the pipeline it stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// `os_transport_send` after its argument and key checks, before the chunk split.
    SendBegin,
    /// `os_transport_recv` after its argument and key checks, before anything is set up.
    RecvBegin,
    /// The registration of a request (send or recv), before it takes a slot.
    TaskGroupAlloc,
    /// In place of the post of chunk 0's WRITE in `os_transport_send`.
    SendFirstChunk,
    /// Before every WRITE and SEND_IMM post.
    UrmaWrite,
    /// Before every recv WR post (the prefill of `os_transport_recv`, the re-post of a wake-up).
    UrmaRecv,
    /// In place of the application's `notify_callback` for one received chunk.
    NotifyCallback,
}

impl Point {
    /// The point's name in the registry.
    #[cfg_attr(not(feature = "inject"), allow(dead_code))]
    pub const fn name(self) -> &'static str {
        match self {
            Point::SendBegin => "os_transport.send.begin",
            Point::RecvBegin => "os_transport.recv.begin",
            Point::TaskGroupAlloc => "os_transport.task_group.alloc",
            Point::SendFirstChunk => "os_transport.send.first_chunk",
            Point::UrmaWrite => "os_transport.urma.write",
            Point::UrmaRecv => "os_transport.urma.recv",
            Point::NotifyCallback => "os_transport.notify_callback",
        }
    }

    /// The original evaluates these through its return macro, which logs where it returned.
    #[cfg(feature = "inject")]
    const fn logs_injected_at(self) -> bool {
        !matches!(self, Point::SendFirstChunk | Point::NotifyCallback)
    }
}

/// Passes `p`: the injected error value when an error fires, `None` otherwise (also after an
/// injected sleep, which happens here).
#[cfg(feature = "inject")]
#[track_caller]
pub fn fault(p: Point) -> Option<i32> {
    let v = os_transport_inject::execute(p.name().as_bytes())?;
    if p.logs_injected_at() {
        let at = std::panic::Location::caller();
        eprintln!(
            "[OS_TRANSPORT_INJECT] Injected at {}:{} ({}), ret={}",
            at.file(),
            at.line(),
            p.name(),
            v
        );
    }
    Some(v)
}

/// Without the feature: never.
#[cfg(not(feature = "inject"))]
#[inline(always)]
pub fn fault(_: Point) -> Option<i32> {
    None
}

/// An injected value as a URMA status. An injected 0 reports success in the original while the
/// step did nothing (the request stalls or skips the callback); here it fails the step like any
/// other error, with URMA_FAIL (ledger: injected 0).
pub fn as_status(v: i32) -> urma_sys::urma_status_t {
    if v == 0 {
        urma_sys::URMA_FAIL
    } else {
        v as urma_sys::urma_status_t
    }
}

/// An injected value as the return of `os_transport_send` / `os_transport_recv`. An injected 0
/// returns "success" with a NULL handle in the original; here it is ERR (ledger: injected 0).
pub fn as_return(v: i32) -> u32 {
    if v == 0 {
        crate::abi::ERR
    } else {
        v as u32
    }
}
