//! Symbolic names of the URMA objects seen through the layer, and the segment table used to
//! write SGE addresses as offsets.
//!
//! Names follow the loopback's scheme (`docs/loopback.md`): `<kind><n>`, n counting per kind in
//! creation order since process start or `urma_interpose_reset`: `jfc`, `jfs`, `jfr`, `jetty`,
//! `tjetty` (imported jetty or JFR), `seg` (registered segment), `iseg` (imported segment). An
//! imported segment that is a registration of this process is traced under the registered
//! segment's name and base (as the loopback does); a foreign one under its own `iseg<n>`.
//! Ids (jetty / JFS / JFR, one id space) name the `local` and `remote` fields of CRs; an id the
//! layer did not create is `unknown`.

use std::collections::HashMap;

use urma_datapath::trace_line::{Kind, Names};

use ranked_lock::{rank, RwLock};

/// A segment as SGEs name it: its name and the address offsets are taken from.
#[derive(Clone)]
pub struct SegName {
    pub name: String,
    pub base: u64,
}

/// A JFC: its name and its JFCE (0 when none).
#[derive(Clone)]
pub struct JfcInfo {
    pub name: String,
    pub jfce: usize,
}

#[derive(Default)]
pub struct Objects {
    /// jetty / JFS / JFR id -> name.
    qid: HashMap<u32, String>,
    /// JFS or jetty handle -> (send queue name, id).
    sq: HashMap<usize, (String, u32)>,
    /// JFR or jetty handle -> receive queue name (a jetty sharing a JFR posts to the JFR's).
    rq: HashMap<usize, String>,
    jfc: HashMap<usize, JfcInfo>,
    tjetty: HashMap<usize, String>,
    /// Target segment handle (registered or imported) -> name and base.
    seg: HashMap<usize, SegName>,
    /// Registered segments by (va, token id), to name imports of them.
    by_va: HashMap<(u64, u32), SegName>,
}

static OBJECTS: RwLock<Option<Objects>, { rank::INTERPOSE_OBJECTS }> = RwLock::new(None);
/// The name counters (the trace's, as the loopback's).
static NAMES: Names = Names::new();

fn with<R>(f: impl FnOnce(&mut Objects) -> R) -> R {
    f(ranked_lock::write(&OBJECTS).get_or_insert_with(Objects::default))
}

fn read<R>(f: impl FnOnce(&Objects) -> R) -> Option<R> {
    ranked_lock::read(&OBJECTS).as_ref().map(f)
}

/// Restarts the numbering (objects keep their names).
pub fn reset_names() {
    NAMES.reset()
}

pub fn add_jfc(h: usize, jfce: usize) {
    with(|o| {
        let name = NAMES.next(Kind::Jfc);
        o.jfc.insert(h, JfcInfo { name, jfce });
    });
}

pub fn jfc(h: usize) -> Option<JfcInfo> {
    read(|o| o.jfc.get(&h).cloned()).flatten()
}

/// The JFCs attached to `jfce`.
pub fn jfcs_of(jfce: usize) -> Vec<usize> {
    read(|o| {
        o.jfc
            .iter()
            .filter(|(_, j)| j.jfce == jfce)
            .map(|(h, _)| *h)
            .collect()
    })
    .unwrap_or_default()
}

/// A JFS (send queue only).
pub fn add_jfs(h: usize, id: u32) {
    with(|o| {
        let name = NAMES.next(Kind::Jfs);
        o.qid.insert(id, name.clone());
        o.sq.insert(h, (name, id));
    });
}

/// A JFR (receive queue only).
pub fn add_jfr(h: usize, id: u32) {
    with(|o| {
        let name = NAMES.next(Kind::Jfr);
        o.qid.insert(id, name.clone());
        o.rq.insert(h, name);
    });
}

/// A jetty; `shared_jfr`: the JFR whose receive queue it uses (share_jfr), if any.
pub fn add_jetty(h: usize, id: u32, shared_jfr: Option<usize>) {
    with(|o| {
        let name = NAMES.next(Kind::Jetty);
        o.qid.insert(id, name.clone());
        o.sq.insert(h, (name.clone(), id));
        let rq = shared_jfr
            .and_then(|j| o.rq.get(&j).cloned())
            .unwrap_or(name);
        o.rq.insert(h, rq);
    });
}

pub fn add_tjetty(h: usize) {
    with(|o| {
        let name = NAMES.next(Kind::TJetty);
        o.tjetty.insert(h, name);
    });
}

pub fn add_seg(h: usize, va: u64, token_id: u32) {
    with(|o| {
        let s = SegName {
            name: NAMES.next(Kind::Seg),
            base: va,
        };
        o.by_va.insert((va, token_id), s.clone());
        o.seg.insert(h, s);
    });
}

pub fn add_iseg(h: usize, va: u64, token_id: u32) {
    with(|o| {
        let own = NAMES.next(Kind::ISeg);
        let s = o.by_va.get(&(va, token_id)).cloned().unwrap_or(SegName {
            name: own,
            base: va,
        });
        o.seg.insert(h, s);
    });
}

/// Forgets a deleted / unregistered / unimported handle (handles may be reused).
pub fn forget(h: usize) {
    with(|o| {
        o.jfc.remove(&h);
        o.tjetty.remove(&h);
        if let Some((_, id)) = o.sq.remove(&h) {
            o.qid.remove(&id);
        }
        o.rq.remove(&h);
        if let Some(s) = o.seg.remove(&h) {
            o.by_va
                .retain(|_, v| !(v.name == s.name && v.base == s.base));
        }
    });
}

/// Forgets a JFR: its receive queue and its id.
pub fn forget_jfr(h: usize, id: u32) {
    with(|o| {
        o.rq.remove(&h);
        o.qid.remove(&id);
    });
}

pub fn sq(h: usize) -> Option<(String, u32)> {
    read(|o| o.sq.get(&h).cloned()).flatten()
}

pub fn rq(h: usize) -> Option<String> {
    read(|o| o.rq.get(&h).cloned()).flatten()
}

pub fn tjetty(h: usize) -> Option<String> {
    read(|o| o.tjetty.get(&h).cloned()).flatten()
}

pub fn seg(h: usize) -> Option<SegName> {
    read(|o| o.seg.get(&h).cloned()).flatten()
}

/// Name of a jetty / JFS / JFR id.
pub fn qname(id: u32) -> String {
    read(|o| o.qid.get(&id).cloned())
        .flatten()
        .unwrap_or_else(|| "unknown".into())
}
