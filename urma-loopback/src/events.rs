//! Asynchronous events (`urma_get_async_event`): the per-process queue of events waiting for
//! their context's owner. Below the queues (a JFC overflow queues an event), so it knows
//! contexts by their registry key only.

use ranked_lock::{rank, Mutex};
use std::collections::VecDeque;

use crate::util::lock;

/// One queued event.
pub struct AsyncEv {
    /// Registry key (C address) of the context.
    pub ctx: usize,
    pub ty: u32,
    /// The element (a JFC's C address for `URMA_EVENT_JFC_ERR`).
    pub element: usize,
}

static ASYNC: Mutex<VecDeque<AsyncEv>, { rank::ASYNC_EVENTS }> = Mutex::new(VecDeque::new());

/// Queues an async event of the context with registry key `ctx` (used on JFC overflow).
pub fn queue(ctx: usize, ty: u32, element: usize) {
    lock(&ASYNC).push_back(AsyncEv { ctx, ty, element });
}

/// Takes the oldest queued event of the context with registry key `ctx`.
pub fn take(ctx: usize) -> Option<AsyncEv> {
    let mut q = lock(&ASYNC);
    let pos = q.iter().position(|e| e.ctx == ctx);
    pos.and_then(|i| q.remove(i))
}

/// Drops the queued events of a deleted context.
pub fn forget_context(ctx: usize) {
    lock(&ASYNC).retain(|e| e.ctx != ctx);
}
