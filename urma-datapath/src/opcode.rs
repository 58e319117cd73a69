//! The URMA work-request opcodes, one row each: what the loopback provider (its in-process data
//! path, the requester and the responder between processes, CR generation) and the
//! interposition layer (its trace) need to know about an opcode, in one table, as rdma-core's
//! rxe keeps `rxe_wr_opcode_info[]`.
//!
//! Code that acts on a WR looks its opcode up once ([`info`]) and then matches on the row's
//! [`Class`] or reads its fields; no other module lists opcodes. docs/loopback.md, "Adding an
//! opcode", says what a new row needs.
//!
//! [`info`] is an index into a constant array (no search, no allocation): the data path calls
//! it once per WR.

use urma_sys as u;

/// What a WR does: the data paths match on this, never on the raw opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// One-sided write: the local `src` SGEs into the target's `dst` SGEs (WRITE).
    Write,
    /// A write that also consumes a recv WR of the target jetty / JFR, whose recv CR carries the
    /// immediate (WRITE_IMM).
    WriteImm,
    /// One-sided read: the target's `src` SGEs into the local `dst` SGEs (READ).
    Read,
    /// Two-sided: the local `src` SGEs into the buffers of a recv WR of the target jetty / JFR
    /// (SEND, SEND_IMM).
    Send,
    /// Moves nothing and completes successfully (NOP).
    Nop,
    /// A URMA opcode the provider does not emulate: the post accepts it, its CR has
    /// `URMA_CR_UNSUPPORTED_OPCODE_ERR`.
    Unsupported,
}

/// Which member of the `urma_jfs_wr_t` union a WR of the opcode carries, as far as the provider
/// and the layer read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `rw`: `src` and `dst` SGE lists and `notify_data`.
    Rw,
    /// `send`: the `src` SGE list and `imm_data`.
    Send,
    /// Nothing is read beyond the common fields.
    None,
}

/// Which SGE list of a WR addresses the target's (imported) memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remote {
    /// `src` is remote, `dst` local (READ).
    Src,
    /// `dst` is remote, `src` local (WRITE, WRITE_IMM).
    Dst,
    /// Every SGE is local (SEND: the target's memory is its recv WR's).
    None,
}

/// One opcode's row.
#[derive(Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The `urma_opcode_t` value.
    pub opcode: u32,
    /// The trace's name (`op` of a `post_send` line).
    pub name: &'static str,
    pub class: Class,
    /// The union member whose SGE lists (and immediate) the WR carries.
    pub layout: Layout,
    /// The WR carries an immediate that reaches the receiver (`notify_data` of WRITE_IMM,
    /// `imm_data` of SEND_IMM): traced as `imm`, and the recv CR's `imm_data`.
    pub imm: bool,
    /// The post fails (`URMA_EINVAL`) without a target jetty (`tjetty`).
    pub needs_tjetty: bool,
    /// The list that addresses the target's memory.
    pub remote: Remote,
    /// The access (`URMA_ACCESS_READ` / `URMA_ACCESS_WRITE`) the target segment must grant to
    /// the remote list; 0 without one.
    pub remote_access: u32,
    /// Two-sided opcodes (a recv WR of the target is consumed): the opcode of the recv CR.
    pub recv_cr: Option<u32>,
}

impl OpInfo {
    /// Whether a WR of this opcode consumes a recv WR at its target.
    #[inline]
    pub fn two_sided(&self) -> bool {
        self.recv_cr.is_some()
    }

    /// The local list and the remote one (see [`Remote`]) of a WR's `src` and `dst` lists.
    #[inline]
    pub fn split<'a, T: ?Sized>(&self, src: &'a T, dst: &'a T) -> (&'a T, Option<&'a T>) {
        match self.remote {
            Remote::Src => (dst, Some(src)),
            Remote::Dst => (src, Some(dst)),
            Remote::None => (src, None),
        }
    }
}

/// A row of an opcode that moves no data (NOP, and the opcodes the provider does not emulate).
const fn moves_nothing(opcode: u32, name: &'static str, class: Class) -> OpInfo {
    OpInfo {
        opcode,
        name,
        class,
        layout: Layout::None,
        imm: false,
        needs_tjetty: false,
        remote: Remote::None,
        remote_access: 0,
        recv_cr: None,
    }
}

/// A row of an opcode the provider does not emulate.
const fn unsupported(opcode: u32, name: &'static str) -> OpInfo {
    moves_nothing(opcode, name, Class::Unsupported)
}

const WRITE: OpInfo = OpInfo {
    opcode: u::URMA_OPC_WRITE,
    name: "WRITE",
    class: Class::Write,
    layout: Layout::Rw,
    imm: false,
    needs_tjetty: false,
    remote: Remote::Dst,
    remote_access: u::URMA_ACCESS_WRITE,
    recv_cr: None,
};

const SEND: OpInfo = OpInfo {
    opcode: u::URMA_OPC_SEND,
    name: "SEND",
    class: Class::Send,
    layout: Layout::Send,
    imm: false,
    needs_tjetty: true,
    remote: Remote::None,
    remote_access: 0,
    recv_cr: Some(u::URMA_CR_OPC_SEND),
};

const ROWS: [OpInfo; 17] = [
    WRITE,
    OpInfo {
        opcode: u::URMA_OPC_WRITE_IMM,
        name: "WRITE_IMM",
        class: Class::WriteImm,
        imm: true,
        needs_tjetty: true,
        recv_cr: Some(u::URMA_CR_OPC_WRITE_WITH_IMM),
        ..WRITE
    },
    unsupported(u::URMA_OPC_WRITE_NOTIFY, "WRITE_NOTIFY"),
    OpInfo {
        opcode: u::URMA_OPC_READ,
        name: "READ",
        class: Class::Read,
        remote: Remote::Src,
        remote_access: u::URMA_ACCESS_READ,
        ..WRITE
    },
    unsupported(u::URMA_OPC_CAS, "CAS"),
    unsupported(u::URMA_OPC_SWAP, "SWAP"),
    unsupported(u::URMA_OPC_FADD, "FADD"),
    unsupported(u::URMA_OPC_FSUB, "FSUB"),
    unsupported(u::URMA_OPC_FAND, "FAND"),
    unsupported(u::URMA_OPC_FOR, "FOR"),
    unsupported(u::URMA_OPC_FXOR, "FXOR"),
    SEND,
    OpInfo {
        opcode: u::URMA_OPC_SEND_IMM,
        name: "SEND_IMM",
        imm: true,
        recv_cr: Some(u::URMA_CR_OPC_SEND_WITH_IMM),
        ..SEND
    },
    unsupported(u::URMA_OPC_SEND_INVALIDATE, "SEND_INVALIDATE"),
    moves_nothing(u::URMA_OPC_NOP, "NOP", Class::Nop),
    unsupported(u::URMA_OPC_WRITE_ATOMIC, "WRITE_ATOMIC"),
    unsupported(u::URMA_OPC_FLUSH_DMA, "FLUSH_DMA"),
];

/// Every opcode the provider accepts, in opcode order.
pub static TABLE: [OpInfo; ROWS.len()] = ROWS;

/// Marks an opcode without a row in [`INDEX`].
const NONE: u8 = u8::MAX;

/// Opcode → row of [`TABLE`] ([`NONE`]: no row), for every value below `URMA_OPC_LAST`.
static INDEX: [u8; u::URMA_OPC_LAST as usize] = index();

/// Builds [`INDEX`]; a row whose opcode is out of range or repeated stops the build.
const fn index() -> [u8; u::URMA_OPC_LAST as usize] {
    let mut ix = [NONE; u::URMA_OPC_LAST as usize];
    let mut i = 0;
    while i < ROWS.len() {
        let op = ROWS[i].opcode as usize;
        assert!(op < ix.len(), "an opcode at or beyond URMA_OPC_LAST");
        assert!(ix[op] == NONE, "an opcode with two rows");
        ix[op] = i as u8;
        i += 1;
    }
    ix
}

/// The row of `opcode`, or `None` for a value that is no URMA opcode (the post refuses it).
#[inline]
pub fn info(opcode: u32) -> Option<&'static OpInfo> {
    let row = *INDEX.get(opcode as usize)?;
    TABLE.get(usize::from(row))
}

/// The trace's name of an opcode: its row's, `UNKNOWN` without one.
#[inline]
pub fn name(opcode: u32) -> &'static str {
    info(opcode).map_or("UNKNOWN", |i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_opcode_and_nothing_else_is() {
        for row in &TABLE {
            assert_eq!(info(row.opcode), Some(row));
        }
        let found = (0..1024).filter_map(info).count();
        assert_eq!(found, TABLE.len());
        assert_eq!(info(u32::MAX), None);
        assert_eq!(info(u::URMA_OPC_LAST), None);
        assert_eq!(name(u::URMA_OPC_SEND_IMM), "SEND_IMM");
        assert_eq!(name(0xff), "UNKNOWN");
    }

    #[test]
    fn the_rows_agree_with_their_class() {
        for r in &TABLE {
            let c = r.class;
            let moves_data = matches!(
                c,
                Class::Write | Class::WriteImm | Class::Read | Class::Send
            );
            assert_eq!(
                r.two_sided(),
                matches!(c, Class::WriteImm | Class::Send),
                "{}",
                r.name
            );
            assert_eq!(r.needs_tjetty, r.two_sided(), "{}", r.name);
            assert_eq!(r.layout == Layout::None, !moves_data, "{}", r.name);
            assert_eq!(r.remote != Remote::None, r.remote_access != 0, "{}", r.name);
            assert_eq!(
                r.remote == Remote::None,
                matches!(c, Class::Send | Class::Nop | Class::Unsupported),
                "{}",
                r.name
            );
            assert!(!r.imm || r.two_sided(), "{}", r.name);
        }
    }

    #[test]
    fn the_recv_cr_of_each_two_sided_opcode() {
        let cr = |op| info(op).and_then(|i| i.recv_cr);
        assert_eq!(cr(u::URMA_OPC_SEND), Some(u::URMA_CR_OPC_SEND));
        assert_eq!(cr(u::URMA_OPC_SEND_IMM), Some(u::URMA_CR_OPC_SEND_WITH_IMM));
        assert_eq!(
            cr(u::URMA_OPC_WRITE_IMM),
            Some(u::URMA_CR_OPC_WRITE_WITH_IMM)
        );
        let two_sided: Vec<_> = TABLE
            .iter()
            .filter(|r| r.two_sided())
            .map(|r| r.name)
            .collect();
        assert_eq!(two_sided, ["WRITE_IMM", "SEND", "SEND_IMM"]);
    }

    #[test]
    fn split_names_the_local_list_first() {
        let (s, d) = ("src", "dst");
        assert_eq!(
            info(u::URMA_OPC_READ).unwrap().split(s, d),
            ("dst", Some("src"))
        );
        assert_eq!(
            info(u::URMA_OPC_WRITE).unwrap().split(s, d),
            ("src", Some("dst"))
        );
        assert_eq!(info(u::URMA_OPC_SEND).unwrap().split(s, d), ("src", None));
    }
}
