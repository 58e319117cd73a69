//! Process-wide object registry.
//!
//! Every C object the loopback hands out (`urma_context_t`, `urma_jfc_t`, ...) is a `Box` of the
//! real C type, leaked to C. Its private state is an `Arc<...>` stored in [`Registry::objs`] under
//! the object's address. The `Arc` also owns the C allocation ([`CBox`]), which is freed only when
//! the last `Arc` goes away, so a thread still working with an object that another thread deletes
//! never touches freed memory.
//!
//! Lock order: `REGISTRY` (RwLock) is a leaf for lookups: it is released before any per-object lock
//! is taken, except in delete paths, which take it for writing and then only read atomics.
//! Lookups are served from a per-thread cache while no object was created or deleted since
//! (see [`get`]), so the hot paths (posts and polls) normally take no lock here at all.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use ranked_lock::{rank, RwLock};

use urma_datapath::trace_line::Names;

pub use crate::cobj::{CBox, Ctx};
pub use crate::objects::*;
use crate::queues::{Jfc, Jfce};
use crate::util::{lock, rlock, wlock, Line};

/// Hasher for the registry's integer keys (object addresses and ids), which the process
/// chooses, not an adversary: one folded 64×64→128-bit multiply instead of SipHash. The fold
/// mixes the high product bits into the low ones, so 16-byte-aligned addresses still spread over
/// the buckets (hashbrown indexes buckets by the low bits).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let m = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15u128;
        (m as u64) ^ ((m >> 64) as u64)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = self.0.rotate_left(32) ^ u64::from(v);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = self.0.rotate_left(32) ^ v;
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A map keyed by object address or id.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The registry proper.
#[derive(Default)]
pub struct Registry {
    pub objs: IdMap<usize, Obj>,
    pub jetty_by_id: IdMap<u32, Arc<Jetty>>,
    pub jfr_by_id: IdMap<u32, Arc<Jfr>>,
    /// Registered segments by token id (then matched on VA).
    pub segs_by_token_id: IdMap<u32, Vec<Arc<Seg>>>,
}

pub static REGISTRY: RwLock<Option<Registry>, { rank::REGISTRY }> = RwLock::new(None);

/// Runs `f` with the registry read-locked.
pub fn with_reg<R>(f: impl FnOnce(&Registry) -> R) -> R {
    {
        let g = rlock(&REGISTRY);
        if let Some(r) = g.as_ref() {
            return f(r);
        }
    }
    let mut g = wlock(&REGISTRY);
    let r = g.get_or_insert_with(Registry::default);
    f(r)
}

/// Runs `f` with the registry write-locked.
pub fn with_reg_mut<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    let mut g = wlock(&REGISTRY);
    let r = g.get_or_insert_with(Registry::default);
    let out = f(r);
    // Invalidate every thread's handle cache before the lock is released.
    EPOCH.fetch_add(1, Ordering::Release);
    out
}

/// Looks up a handle: first in the calling thread's [`HandleCache`] (valid while [`EPOCH`] is
/// unchanged), then in the registry under its read lock.
pub fn get(ptr: *const std::ffi::c_void) -> Option<Obj> {
    cached(&CACHE, ptr, Some)
}

/// A thread's handle cache of values of type `V`.
type CacheKey<V> = std::thread::LocalKey<std::cell::RefCell<HandleCache<V>>>;

/// Looks `key` up under the registry's read lock, makes the cache's value of the object found
/// (`None`: not one of the kinds this cache holds) and remembers it in `cache` (unless the cache
/// is borrowed right now).
fn lookup_and_remember<V: Clone>(
    cache: &'static CacheKey<V>,
    key: usize,
    make: impl FnOnce(Obj) -> Option<V>,
) -> Option<V> {
    // The epoch read under the read lock names exactly the registry state the lookup saw.
    let (found, epoch) = with_reg(|r| (r.objs.get(&key).cloned(), EPOCH.load(Ordering::Acquire)));
    let v = make(found?)?;
    let _ = cache.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.remember(epoch, key, v.clone());
        }
    });
    Some(v)
}

/// Bumped (with the write lock held) by every registry change. A thread's cached lookups are valid
/// only for the epoch they were made in, so a deleted or replaced handle is never served from a
/// cache after its deletion returned. Lookups of the same objects by several threads (the posting
/// threads and the poller of one application) then share no written cache line: the registry's
/// `RwLock` word is written by every read lock, and it bounced between the cores on every post and
/// poll of the benchmark's no-copy mode.
static EPOCH: Line<AtomicU64> = Line(AtomicU64::new(0));

/// Entries of a thread's handle cache (a hot path uses a JFC, a JFS or jetty, a target jetty and two
/// segments).
const CACHE_WAYS: usize = 8;

/// A thread's most recent successful lookups, all made in `epoch`. Holding an `Obj` keeps its
/// `Arc` alive: an object deleted meanwhile is freed when the thread next looks anything up (the
/// epoch changed) or exits, never while it may still be in use.
struct HandleCache<V = Obj> {
    epoch: u64,
    keys: [usize; CACHE_WAYS],
    objs: [Option<V>; CACHE_WAYS],
    next: usize,
}

impl<V: Clone> HandleCache<V> {
    const EMPTY: HandleCache<V> = HandleCache {
        epoch: u64::MAX,
        keys: [0; CACHE_WAYS],
        objs: [const { None }; CACHE_WAYS],
        next: 0,
    };

    fn find(&self, epoch: u64, key: usize) -> Option<V> {
        self.find_ref(epoch, key).cloned()
    }

    fn find_ref(&self, epoch: u64, key: usize) -> Option<&V> {
        if self.epoch != epoch {
            return None;
        }
        let i = self.keys.iter().position(|&k| k == key)?;
        self.objs[i].as_ref()
    }

    fn remember(&mut self, epoch: u64, key: usize, o: V) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.keys = [0; CACHE_WAYS];
            self.objs = [const { None }; CACHE_WAYS];
            self.next = 0;
        }
        if self.keys.contains(&key) {
            return;
        }
        self.keys[self.next] = key;
        self.objs[self.next] = Some(o);
        self.next = (self.next + 1) % CACHE_WAYS;
    }
}

thread_local! {
    /// Lookups through [`get`] (cloned out).
    static CACHE: std::cell::RefCell<HandleCache> = const { std::cell::RefCell::new(HandleCache::EMPTY) };
    /// Lookups through [`with_obj`] (borrowed in place: JFCs, JFSs, JFRs and jetties on the
    /// post and poll paths).
    static QUEUES: std::cell::RefCell<HandleCache> = const { std::cell::RefCell::new(HandleCache::EMPTY) };
    /// Lookups through [`get_any_seg`]: the thread's own references to segments.
    static SEGS: std::cell::RefCell<HandleCache<SegRef>> = const { std::cell::RefCell::new(HandleCache::EMPTY) };
    /// Lookups through [`get_tjetty_ref`]: the thread's own references to target jetties.
    static TJETTIES: std::cell::RefCell<HandleCache<TJettyRef>> = const { std::cell::RefCell::new(HandleCache::EMPTY) };
}

/// Looks up a handle through the thread's `cache`: a clone of the value it holds for the handle
/// in this epoch, or one made by `make` from the registry's object (and remembered).
fn cached<V: Clone>(
    cache: &'static CacheKey<V>,
    ptr: *const std::ffi::c_void,
    make: impl FnOnce(Obj) -> Option<V>,
) -> Option<V> {
    if ptr.is_null() {
        return None;
    }
    let key = ptr as usize;
    let epoch = EPOCH.load(Ordering::Acquire);
    let hit = cache
        .try_with(|c| c.try_borrow().ok().and_then(|c| c.find(epoch, key)))
        .ok()
        .flatten();
    if hit.is_some() {
        return hit;
    }
    lookup_and_remember(cache, key, make)
}

/// Looks up a `urma_target_jetty_t *` as the thread's own reference.
pub fn get_tjetty_ref(p: *const urma_sys::urma_target_jetty_t) -> Option<TJettyRef> {
    cached(&TJETTIES, p as *const std::ffi::c_void, |o| match o {
        Obj::TJetty(t) => Some(Arc::new(t)),
        _ => None,
    })
}

macro_rules! getter {
    ($fn:ident, $var:ident, $t:ty, $ct:ty) => {
        /// Looks up a handle of this kind; `None` for NULL, unknown, deleted or wrong-kind handles.
        pub fn $fn(p: *const $ct) -> Option<Arc<$t>> {
            match get(p as *const std::ffi::c_void) {
                Some(Obj::$var(o)) => Some(o),
                _ => None,
            }
        }
    };
}
/// Runs `f` on the object behind `ptr` (`None`: NULL, unknown or deleted). When the calling
/// thread's queue cache ([`QUEUES`], a [`HandleCache`] of its own) holds it, `f` borrows it there
/// without cloning its `Arc` (an atomic read-modify-write on a line that the other threads using
/// the object write too). That cache cannot change while `f` runs (a nested `with_obj` takes the
/// slow path); the lookups `f` makes through [`get`] use the other cache and still fill it.
pub fn with_obj<R>(ptr: *const std::ffi::c_void, f: impl FnOnce(Option<&Obj>) -> R) -> R {
    if ptr.is_null() {
        return f(None);
    }
    let key = ptr as usize;
    let epoch = EPOCH.load(Ordering::Acquire);
    let mut f = Some(f);
    let hit = QUEUES.try_with(|c| {
        let c = c.try_borrow().ok()?;
        let o = c.find_ref(epoch, key)?;
        let f = f.take()?;
        Some(f(Some(o)))
    });
    if let Ok(Some(r)) = hit {
        return r;
    }
    let found = lookup_and_remember(&QUEUES, key, Some);
    let f = f
        .take()
        .expect("f runs once: the cached path returned if it ran");
    f(found.as_ref())
}

macro_rules! with_getter {
    ($fn:ident, $var:ident, $t:ty, $ct:ty) => {
        /// Runs `f` on a handle of this kind (see [`with_obj`]); `None` for NULL, unknown,
        /// deleted or wrong-kind handles.
        pub fn $fn<R>(p: *const $ct, f: impl FnOnce(Option<&Arc<$t>>) -> R) -> R {
            with_obj(p as *const std::ffi::c_void, |o| match o {
                Some(Obj::$var(x)) => f(Some(x)),
                _ => f(None),
            })
        }
    };
}
with_getter!(with_jfc, Jfc, Jfc, urma_sys::urma_jfc_t);
with_getter!(with_jfs, Jfs, Jfs, urma_sys::urma_jfs_t);
with_getter!(with_jfr, Jfr, Jfr, urma_sys::urma_jfr_t);
with_getter!(with_jetty, Jetty, Jetty, urma_sys::urma_jetty_t);

getter!(lookup_ctx, Ctx, Ctx, urma_sys::urma_context_t);

/// Looks up a context; `None` for NULL, unknown or deleted handles. In the plugin face it also
/// gives the context its EID back: the genuine core zeroes `urma_context_t.eid` after the
/// provider made the context (it reads EIDs of driver-created devices from nowhere), and the
/// applications publish that field to their peers. Every call on a context after its creation
/// passes here first, so the field holds the EID from the first object created on it.
pub fn get_ctx(p: *const urma_sys::urma_context_t) -> Option<Arc<Ctx>> {
    let c = lookup_ctx(p)?;
    #[cfg(feature = "plugin")]
    // SAFETY: the context is alive (in the registry) and is the loopback's allocation; the
    // application does not write it, the core wrote it once after create_context returned.
    unsafe {
        let cp = c.c.ptr();
        if (*cp).eid.raw != c.eid.raw {
            (*cp).eid = c.eid;
        }
    }
    Some(c)
}
getter!(get_jfce, Jfce, Jfce, urma_sys::urma_jfce_t);
getter!(get_jfc, Jfc, Jfc, urma_sys::urma_jfc_t);
getter!(get_jfs, Jfs, Jfs, urma_sys::urma_jfs_t);
getter!(get_jfr, Jfr, Jfr, urma_sys::urma_jfr_t);
getter!(get_jetty, Jetty, Jetty, urma_sys::urma_jetty_t);
getter!(get_tjetty, TJetty, TJetty, urma_sys::urma_target_jetty_t);
getter!(get_token_id, TokenId, TokenIdObj, urma_sys::urma_token_id_t);

/// Looks up a `urma_target_seg_t *` of either kind, as the thread's own reference.
pub fn get_any_seg(p: *const urma_sys::urma_target_seg_t) -> Option<SegRef> {
    cached(&SEGS, p as *const std::ffi::c_void, |o| match o {
        Obj::Seg(s) => Some(Arc::new(AnySeg::Local(s))),
        Obj::ISeg(s) => Some(Arc::new(AnySeg::Imported(s))),
        _ => None,
    })
}

/// Inserts an object.
pub fn insert(key: usize, o: Obj) {
    with_reg_mut(|r| {
        r.objs.insert(key, o);
    });
}

/// Removes an object, returning it.
pub fn remove(key: usize) -> Option<Obj> {
    with_reg_mut(|r| r.objs.remove(&key))
}

/// Counts live objects of each kind.
pub fn live_counts() -> [u64; KIND_COUNT] {
    let mut out = [0u64; KIND_COUNT];
    with_reg(|r| {
        for o in r.objs.values() {
            if let Some(k) = o.kind() {
                out[k as usize] += 1;
            }
        }
    });
    out
}

// ---- numeric ids (never reused within a process) and symbolic names (reset by ctl reset) ----

static NEXT_ID: [AtomicU32; KIND_COUNT] = [const { AtomicU32::new(1) }; KIND_COUNT];
static NAMES: Names = Names::new();

/// Allocates a numeric id for a kind (1, 2, ...; never reused).
pub fn next_id(k: Kind) -> u32 {
    NEXT_ID[k as usize].fetch_add(1, Ordering::Relaxed)
}

/// Allocates the symbolic name of a new object: `<prefix><n>`, n counting from 1 in creation
/// order since process start or the last `urma_loopback_reset()`.
pub fn next_name(k: Kind) -> String {
    NAMES.next(k)
}

/// Restarts symbolic numbering.
pub fn reset_names() {
    NAMES.reset()
}

/// Global init state (urma_init / urma_uninit).
pub static INIT_COUNT: AtomicU64 = AtomicU64::new(0);
/// Whether `urma_init` has been called (and not undone by `urma_uninit`).
pub fn initialized() -> bool {
    INIT_COUNT.load(Ordering::Acquire) > 0
}

/// uasid given to `urma_init` (0 by default).
pub static UASID: AtomicU32 = AtomicU32::new(0);

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Obj>();
    let _ = lock::<u8, { ranked_lock::rank::LOG_FUNC }>;
}
