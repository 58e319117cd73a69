//! The loopback's cross-process message format: one definition for the provider
//! (`urma-loopback/src/peer/`, `xproc.rs`) and for the tests that play a malicious peer
//! (`urma-loopback/tests/security.rs`). docs/loopback.md, "Multiple processes", describes the
//! protocol; "Security model" says what each field is trusted for.
//!
//! Every message starts with a fixed [`Hdr`] ([`HDR_LEN`] bytes, little-endian), followed by
//! `ndst` [`Piece`]s ([`PIECE_LEN`] bytes each) and `len` payload bytes (a WRITE, WRITE_IMM,
//! SEND or SEND_IMM request; a READ's acknowledgement).

/// The first message of a connection: the requester names its uasid (`src_uasid`) and the
/// protocol version (`a` = [`VERSION`]). The owner checks both against the connection's
/// credentials before anything else is read, and answers with one [`K_ACK`] (status 0).
pub const K_HELLO: u32 = 5;
/// Import of a segment: `a` token id, `b` VA, `c` length; `token`/`token_given` the token.
pub const K_IMPORT_SEG: u32 = 1;
/// Import of a jetty (`target_kind` 1) or JFR (2), `target_id`; `token`/`token_given`.
pub const K_IMPORT_JETTY: u32 = 2;
/// A work request (`opcode`, `flags`, `imm`, `len` payload bytes, `ndst` remote pieces; the
/// target jetty or JFR of a two-sided opcode with its token).
pub const K_DATA: u32 = 3;
/// The owner's answer to one request, in request order (`status`, `len`; `flags`
/// [`ACK_CLOSING`] when the owner closes the connection after it).
pub const K_ACK: u32 = 4;
/// `flags` of a [`K_ACK`]: the request was refused by a token check (or named no such object)
/// and the owner closes the connection after this acknowledgement. The requester sends nothing
/// more on it; its next request opens a new connection.
pub const ACK_CLOSING: u32 = 1;
/// The owner is closing an idle connection: the requester sends nothing more on it, shuts its
/// side down once the acknowledgements of what it already sent have arrived, and opens a new
/// connection for its next request.
pub const K_BYE: u32 = 6;

/// The protocol version a [`K_HELLO`] carries; an owner refuses any other (3: refusals close
/// the connection, [`ACK_CLOSING`]).
pub const VERSION: u64 = 3;

/// `target_kind` of a [`K_DATA`] or [`K_IMPORT_JETTY`] message.
pub const TARGET_NONE: u32 = 0;
pub const TARGET_JETTY: u32 = 1;
pub const TARGET_JFR: u32 = 2;

/// Import answers: accepted, or refused. A refusal does not say whether the object is unknown
/// or the token wrong.
pub const IMPORT_OK: u32 = 0;
pub const IMPORT_REFUSED: u32 = 1;

/// The fixed message header.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Hdr {
    pub kind: u32,
    /// Acknowledgement: CR status (data) or [`IMPORT_OK`] / [`IMPORT_REFUSED`] (imports).
    pub status: u32,
    pub opcode: u32,
    pub flags: u32,
    /// The requester's uasid: read only from [`K_HELLO`]; the owner names a request's sender
    /// by the connection it arrived on.
    pub src_uasid: u32,
    /// The requester's sending queue (JFS or jetty id), as the requester states it.
    pub src_id: u32,
    pub src_jetty: u32,
    /// [`TARGET_NONE`], [`TARGET_JETTY`] or [`TARGET_JFR`].
    pub target_kind: u32,
    pub target_id: u32,
    pub token: u32,
    pub token_given: u32,
    /// Number of [`Piece`]s following the header.
    pub ndst: u32,
    pub imm: u64,
    /// Payload bytes following the pieces (a READ request: bytes asked for).
    pub len: u64,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// Twelve 32-bit fields, then five 64-bit ones.
pub const HDR_LEN: usize = 12 * 4 + 5 * 8;

impl Hdr {
    fn words32(&self) -> [u32; 12] {
        [
            self.kind,
            self.status,
            self.opcode,
            self.flags,
            self.src_uasid,
            self.src_id,
            self.src_jetty,
            self.target_kind,
            self.target_id,
            self.token,
            self.token_given,
            self.ndst,
        ]
    }

    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut o = [0u8; HDR_LEN];
        let (narrow, wide) = o.split_at_mut(48);
        for (dst, v) in narrow.chunks_exact_mut(4).zip(self.words32()) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        let w64 = [self.imm, self.len, self.a, self.b, self.c];
        for (dst, v) in wide.chunks_exact_mut(8).zip(w64) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        o
    }

    pub fn decode(b: &[u8; HDR_LEN]) -> Hdr {
        let mut n = b[..48]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let mut w = b[48..].chunks_exact(8).map(|c| {
            let mut x = [0u8; 8];
            x.copy_from_slice(c);
            u64::from_le_bytes(x)
        });
        let mut n32 = || n.next().unwrap_or(0);
        let mut n64 = || w.next().unwrap_or(0);
        Hdr {
            kind: n32(),
            status: n32(),
            opcode: n32(),
            flags: n32(),
            src_uasid: n32(),
            src_id: n32(),
            src_jetty: n32(),
            target_kind: n32(),
            target_id: n32(),
            token: n32(),
            token_given: n32(),
            ndst: n32(),
            imm: n64(),
            len: n64(),
            a: n64(),
            b: n64(),
            c: n64(),
        }
    }
}

/// A remote address range of a request: the owner's segment (by token id) and the token the
/// requester imported it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub token_id: u32,
    pub token: u32,
    pub addr: u64,
    pub len: u64,
}

pub const PIECE_LEN: usize = 24;

impl Piece {
    pub fn encode_into(&self, o: &mut Vec<u8>) {
        o.extend_from_slice(&self.token_id.to_le_bytes());
        o.extend_from_slice(&self.token.to_le_bytes());
        o.extend_from_slice(&self.addr.to_le_bytes());
        o.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Decodes the first [`PIECE_LEN`] bytes of `b` (`None` when `b` is shorter).
    pub fn decode(b: &[u8]) -> Option<Piece> {
        let b: &[u8; PIECE_LEN] = b.get(..PIECE_LEN)?.try_into().ok()?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        Some(Piece {
            token_id: u32_at(0),
            token: u32_at(4),
            addr: u64_at(8),
            len: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_piece_round_trip_at_their_documented_offsets() {
        let h = Hdr {
            kind: K_DATA,
            status: 9,
            opcode: 3,
            flags: 0x20,
            src_uasid: 7,
            src_id: 11,
            src_jetty: 1,
            target_kind: TARGET_JFR,
            target_id: 5,
            token: 0xdead_beef,
            token_given: 1,
            ndst: 2,
            imm: u64::MAX - 1,
            len: 1 << 40,
            a: 1,
            b: 2,
            c: 3,
        };
        let e = h.encode();
        assert_eq!(Hdr::decode(&e), h);
        assert_eq!(&e[0..4], &K_DATA.to_le_bytes());
        assert_eq!(&e[36..40], &0xdead_beef_u32.to_le_bytes());
        assert_eq!(&e[48..56], &(u64::MAX - 1).to_le_bytes());
        assert_eq!(&e[80..88], &3u64.to_le_bytes());
        let p = Piece {
            token_id: 4,
            token: 0x1234_5678,
            addr: 0x7fff_0000_1000,
            len: 4096,
        };
        let mut v = Vec::new();
        p.encode_into(&mut v);
        assert_eq!(v.len(), PIECE_LEN);
        assert_eq!(Piece::decode(&v), Some(p));
        assert_eq!(Piece::decode(&v[..PIECE_LEN - 1]), None);
    }
}
