//! The endpoint information one process tells another so that it can send to it
//! ([`EndpointInfo`]: the receiver's uasid, receive jetty and destination segment, one JSON line),
//! and the import of what it names. `compat --split` and the benchmark's two-process cell
//! exchange it over TCP; the tokens are the fixture's ([`TOKEN`]).

use serde_json::{json, Value};
use urma_sys as u;

use crate::fixture::{import_receiver, import_seg_desc, ImportedSeg, Loopback, RecvKind, TOKEN};

/// The receiver's endpoint information, as sent to the sender: its context's uasid, its receive
/// jetty's id and its destination segment.
#[derive(Clone, Copy)]
pub struct EndpointInfo {
    pub uasid: u32,
    pub jetty: u::urma_jetty_id_t,
    pub seg: u::urma_seg_t,
}

/// An EID as JSON: its 16 bytes as an array of numbers.
pub fn eid_json(e: &u::urma_eid_t) -> Value {
    // SAFETY: every bit pattern of the union is a valid byte array.
    json!(unsafe { e.raw }.to_vec())
}

/// Parses [`eid_json`]'s form.
pub fn eid_from(v: &Value) -> Option<u::urma_eid_t> {
    let a = v.as_array()?;
    let mut raw = [0u8; 16];
    if a.len() != 16 {
        return None;
    }
    for (r, x) in raw.iter_mut().zip(a) {
        *r = u8::try_from(x.as_u64()?).ok()?;
    }
    Some(u::urma_eid_t { raw })
}

impl EndpointInfo {
    /// The JSON line sent over TCP.
    pub fn to_json(&self) -> Value {
        let s = &self.seg;
        let (seg_eid, seg_uasid, seg_va) = (s.ubva.eid, s.ubva.uasid, s.ubva.va);
        json!({
            "uasid": self.uasid,
            "jetty": {"eid": eid_json(&self.jetty.eid), "uasid": self.jetty.uasid, "id": self.jetty.id},
            "seg": {"eid": eid_json(&seg_eid), "uasid": seg_uasid, "va": seg_va, "len": s.len,
                    "token_id": s.token_id},
        })
    }

    /// Imports what the receiver published into this process: its jetty (by id, with the
    /// fixture's token) and its destination segment (remote read + write). `Err` names what the
    /// provider refused; nothing stays imported then.
    pub fn import(
        &self,
        lb: &Loopback,
    ) -> Result<(*mut u::urma_target_jetty_t, ImportedSeg), &'static str> {
        let tjetty = import_receiver(lb, RecvKind::Jetty, self.jetty);
        if tjetty.is_null() {
            return Err("the import of the other process's jetty was refused");
        }
        let flag =
            (u::URMA_ACCESS_READ | u::URMA_ACCESS_WRITE) << u::flags::IMPORT_SEG_FLAG_ACCESS_SHIFT;
        let tseg = import_seg_desc(lb, self.seg, Some(TOKEN), flag);
        if tseg.is_null() {
            // SAFETY: imported above, released once.
            unsafe { u::urma_unimport_jetty(tjetty) };
            return Err("the import of the other process's segment was refused");
        }
        let seg = ImportedSeg {
            tseg,
            addr: self.seg.ubva.va,
            len: self.seg.len as usize,
        };
        Ok((tjetty, seg))
    }

    /// Parses [`EndpointInfo::to_json`]'s form.
    pub fn from_json(v: &Value) -> Option<EndpointInfo> {
        let j = v.get("jetty")?;
        let s = v.get("seg")?;
        let u32f = |o: &Value, k: &str| o.get(k)?.as_u64().and_then(|x| u32::try_from(x).ok());
        let jetty = u::urma_jetty_id_t {
            eid: eid_from(j.get("eid")?)?,
            uasid: u32f(j, "uasid")?,
            id: u32f(j, "id")?,
        };
        let mut seg: u::urma_seg_t = Default::default();
        seg.ubva.eid = eid_from(s.get("eid")?)?;
        seg.ubva.uasid = u32f(s, "uasid")?;
        seg.ubva.va = s.get("va")?.as_u64()?;
        seg.len = s.get("len")?.as_u64()?;
        seg.token_id = u32f(s, "token_id")?;
        Some(EndpointInfo {
            uasid: u32f(v, "uasid")?,
            jetty,
            seg,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_information_round_trips() {
        let mut seg: u::urma_seg_t = Default::default();
        seg.ubva.eid = u::urma_eid_t {
            raw: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1],
        };
        seg.ubva.uasid = 7;
        seg.ubva.va = 0x7f00_1234_5000;
        seg.len = 14 << 20;
        seg.token_id = 42;
        let info = EndpointInfo {
            uasid: 7,
            jetty: u::urma_jetty_id_t {
                eid: seg.ubva.eid,
                uasid: 7,
                id: 3,
            },
            seg,
        };
        let back = EndpointInfo::from_json(&info.to_json()).expect("parse");
        assert_eq!(back.uasid, 7);
        assert_eq!((back.jetty.uasid, back.jetty.id), (7, 3));
        // SAFETY: byte view of the union.
        assert_eq!(unsafe { back.jetty.eid.raw }, unsafe { info.jetty.eid.raw });
        let (va, uasid, len, tid) = (
            back.seg.ubva.va,
            back.seg.ubva.uasid,
            back.seg.len,
            back.seg.token_id,
        );
        assert_eq!((va, uasid, len, tid), (0x7f00_1234_5000, 7, 14 << 20, 42));
        assert!(EndpointInfo::from_json(&json!({"uasid": 1})).is_none());
    }
}
