//! The commands the URMA core sends to a device's character device (`/dev/uburma/<dev>`, the
//! kernel's uburma driver), as far as a device a provider made itself meets them: the EID list
//! ([`URMA_CMD_GET_EID_LIST`]) and the device attributes ([`URMA_CMD_QUERY_DEV_ATTR`]).
//!
//! Each is one `ioctl(fd, URMA_CMD, &hdr)` with a [`urma_cmd_hdr_t`] whose `args_addr` points
//! to an array of [`urma_cmd_attr_t`] (`args_len` bytes): one attribute per field, input types
//! below [`URMA_CMD_OUT_TYPE_INIT`], output types from it, each with the address of the caller's
//! field (`data`), its size (`field_size`) and, for a field of each element of an array of
//! structures, the element count and stride (`el_num`, `el_size`; 1 and 0 for a plain field).
//!
//! Our rendering of the core's `urma_cmd.h` (installed) and `urma_cmd_tlv.h` (private to the
//! core), core 0.0.3; `tests/uburma_cmd.rs` checks every value here against the genuine headers
//! when `UMDK_SRC` is set. [`QUERY_DEVICE_OUT`] maps each output type of the query to its field
//! of [`urma_device_attr_t`], so an answer can be filled by type.

use std::mem::{offset_of, size_of};

use crate::{urma_device_attr_t, urma_device_cap_t, urma_eid_info_t, urma_port_attr};

/// The ioctl group of the uburma device (`URMA_CMD_MAGIC`, `'U'`).
pub const URMA_CMD_MAGIC: u8 = b'U';

/// `_IOWR(URMA_CMD_MAGIC, 1, urma_cmd_hdr_t)`: read and write (3 << 30), the header's size
/// (16) << 16, the group << 8, number 1.
pub const URMA_CMD: u64 =
    (3 << 30) | ((size_of::<urma_cmd_hdr_t>() as u64) << 16) | ((URMA_CMD_MAGIC as u64) << 8) | 1;

/// `URMA_CMD_GET_EID_LIST` of `enum urma_cmd`.
pub const URMA_CMD_GET_EID_LIST: u32 = 37;
/// `URMA_CMD_QUERY_DEV_ATTR` of `enum urma_cmd`.
pub const URMA_CMD_QUERY_DEV_ATTR: u32 = 40;

/// The first output attribute type.
pub const URMA_CMD_OUT_TYPE_INIT: u8 = 0x80;
/// The largest argument array the core's ioctl helpers build, in bytes.
pub const URMA_CMD_MAX_ARGS_SIZE: u32 = 4096;

/// The command header (`urma_cmd_hdr_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct urma_cmd_hdr_t {
    pub command: u32,
    /// Bytes of the attribute array.
    pub args_len: u32,
    /// Address of the attribute array.
    pub args_addr: u64,
}

/// One attribute (`urma_cmd_attr_t`): `attr_data` is the bit field `el_num:12 | el_size:12 |
/// reserved:8`, lowest bits first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct urma_cmd_attr_t {
    pub type_: u8,
    pub flag: u8,
    pub field_size: u16,
    pub attr_data: u32,
    /// Address of the caller's field (of its first element's field for an array).
    pub data: u64,
}

impl urma_cmd_attr_t {
    /// An attribute as the core's helpers make one.
    pub fn new(type_: u8, field_size: u16, el_num: u16, el_size: u16, data: u64) -> Self {
        urma_cmd_attr_t {
            type_,
            flag: 0,
            field_size,
            attr_data: (u32::from(el_num) & 0xfff) | ((u32::from(el_size) & 0xfff) << 12),
            data,
        }
    }

    /// Element count (1 for a plain field).
    pub fn el_num(&self) -> u32 {
        self.attr_data & 0xfff
    }

    /// Element stride in bytes (0 for a plain field).
    pub fn el_size(&self) -> u32 {
        (self.attr_data >> 12) & 0xfff
    }
}

/// `GET_EID_LIST_IN_MAX_EID_CNT` (`uint32_t`).
pub const GET_EID_LIST_IN_MAX_EID_CNT: u8 = 0;
/// `GET_EID_LIST_OUT_EID_CNT` (`uint32_t`).
pub const GET_EID_LIST_OUT_EID_CNT: u8 = 0x80;
/// `GET_EID_LIST_OUT_EID_LIST`: `urma_eid_info_t[URMA_MAX_EID_CNT]` as one field.
pub const GET_EID_LIST_OUT_EID_LIST: u8 = 0x81;

/// `QUERY_DEVICE_IN_DEV_NAME` (`char[URMA_MAX_DEV_NAME]`).
pub const QUERY_DEVICE_IN_DEV_NAME: u8 = 0;

/// An output field of the device query: its type, where it is in [`urma_device_attr_t`], and
/// for the fields of the port array, the element count and stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevAttrField {
    /// The attribute type.
    pub type_: u8,
    /// The type's name in `urma_cmd_tlv.h`.
    pub name: &'static str,
    /// The field's path below `urma_device_attr_t` in C (the first element's, for an array).
    pub c_field: &'static str,
    /// Offset of the field (of the first element's field) in `urma_device_attr_t`.
    pub offset: usize,
    /// Size of the field.
    pub size: usize,
    /// Elements: 1, or the port array's length.
    pub count: usize,
    /// Stride between the elements (0 for a plain field).
    pub stride: usize,
}

macro_rules! cap {
    ($type_:expr, $name:literal, $f:ident) => {
        cap!($type_, $name, $f, $f)
    };
    ($type_:expr, $name:literal, $f:ident, $c:ident) => {
        DevAttrField {
            type_: $type_,
            name: $name,
            c_field: concat!("dev_cap.", stringify!($c)),
            offset: offset_of!(urma_device_attr_t, dev_cap) + offset_of!(urma_device_cap_t, $f),
            size: size_of_field(|c: &urma_device_cap_t| &c.$f),
            count: 1,
            stride: 0,
        }
    };
}

macro_rules! top {
    ($type_:expr, $name:literal, $f:ident) => {
        DevAttrField {
            type_: $type_,
            name: $name,
            c_field: stringify!($f),
            offset: offset_of!(urma_device_attr_t, $f),
            size: size_of_field(|a: &urma_device_attr_t| &a.$f),
            count: 1,
            stride: 0,
        }
    };
}

macro_rules! port {
    ($type_:expr, $name:literal, $f:ident) => {
        DevAttrField {
            type_: $type_,
            name: $name,
            c_field: concat!("port_attr[0].", stringify!($f)),
            offset: offset_of!(urma_device_attr_t, port_attr) + offset_of!(urma_port_attr, $f),
            size: size_of_field(|p: &urma_port_attr| &p.$f),
            count: PORT_COUNT,
            stride: size_of::<urma_port_attr>(),
        }
    };
}

/// The length of `urma_device_attr_t.port_attr` (`URMA_MAX_PORT_CNT`).
pub const PORT_COUNT: usize =
    size_of_field(|a: &urma_device_attr_t| &a.port_attr) / size_of::<urma_port_attr>();

/// The size of the field `f` selects (never called: only its type is used).
const fn size_of_field<S, F>(_f: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

const O: u8 = URMA_CMD_OUT_TYPE_INIT;

/// The output types of `URMA_CMD_QUERY_DEV_ATTR` in type order (`QUERY_DEVICE_OUT_GUID` = 0x80
/// up to `QUERY_DEVICE_OUT_DEV_CAP_PRIORITY_INFO`), each with its field.
pub static QUERY_DEVICE_OUT: [DevAttrField; 51] = [
    top!(O, "QUERY_DEVICE_OUT_GUID", guid),
    cap!(O + 1, "QUERY_DEVICE_OUT_DEV_CAP_FEATURE", feature),
    cap!(O + 2, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFC", max_jfc),
    cap!(O + 3, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFS", max_jfs),
    cap!(O + 4, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFR", max_jfr),
    cap!(O + 5, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JETTY", max_jetty),
    cap!(
        O + 6,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JETTY_GRP",
        max_jetty_grp
    ),
    cap!(
        O + 7,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JETTY_IN_JETTY_GRP",
        max_jetty_in_jetty_grp
    ),
    cap!(
        O + 8,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFC_DEPTH",
        max_jfc_depth
    ),
    cap!(
        O + 9,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFS_DEPTH",
        max_jfs_depth
    ),
    cap!(
        O + 10,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFR_DEPTH",
        max_jfr_depth
    ),
    cap!(
        O + 11,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFS_INLINE_LEN",
        max_jfs_inline_len
    ),
    cap!(O + 12, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFS_SGE", max_jfs_sge),
    cap!(
        O + 13,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFS_RSGE",
        max_jfs_rsge
    ),
    cap!(O + 14, "QUERY_DEVICE_OUT_DEV_CAP_MAX_JFR_SGE", max_jfr_sge),
    cap!(
        O + 15,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_MSG_SIZE",
        max_msg_size
    ),
    cap!(
        O + 16,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_READ_SIZE",
        max_read_size
    ),
    cap!(
        O + 17,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_WRITE_SIZE",
        max_write_size
    ),
    cap!(
        O + 18,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_CAS_SIZE",
        max_cas_size
    ),
    cap!(
        O + 19,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_SWAP_SIZE",
        max_swap_size
    ),
    cap!(
        O + 20,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_FETCH_AND_ADD_SIZE",
        max_fetch_and_add_size
    ),
    cap!(
        O + 21,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_FETCH_AND_SUB_SIZE",
        max_fetch_and_sub_size
    ),
    cap!(
        O + 22,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_FETCH_AND_AND_SIZE",
        max_fetch_and_and_size
    ),
    cap!(
        O + 23,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_FETCH_AND_OR_SIZE",
        max_fetch_and_or_size
    ),
    cap!(
        O + 24,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_FETCH_AND_XOR_SIZE",
        max_fetch_and_xor_size
    ),
    cap!(O + 25, "QUERY_DEVICE_OUT_DEV_CAP_ATOMIC_FEAT", atomic_feat),
    cap!(O + 26, "QUERY_DEVICE_OUT_DEV_CAP_TRANS_MODE", trans_mode),
    cap!(O + 27, "QUERY_DEVICE_OUT_DEV_CAP_RESERVED", reserved),
    cap!(
        O + 28,
        "QUERY_DEVICE_OUT_DEV_CAP_CONGESTION_CTRL_ALG",
        congestion_ctrl_alg
    ),
    cap!(O + 29, "QUERY_DEVICE_OUT_DEV_CAP_CEQ_CNT", ceq_cnt),
    cap!(
        O + 30,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_TP_IN_TPG",
        max_tp_in_tpg
    ),
    cap!(O + 31, "QUERY_DEVICE_OUT_DEV_CAP_MAX_EID_CNT", max_eid_cnt),
    cap!(
        O + 32,
        "QUERY_DEVICE_OUT_DEV_CAP_PAGE_SIZE_CAP",
        page_size_cap
    ),
    cap!(O + 33, "QUERY_DEVICE_OUT_DEV_CAP_MAX_OOR_CNT", max_oor_cnt),
    cap!(O + 34, "QUERY_DEVICE_OUT_DEV_CAP_MN", mn),
    cap!(
        O + 35,
        "QUERY_DEVICE_OUT_DEV_CAP_MAX_NETADDR_CN",
        max_netaddr_cnt
    ),
    top!(O + 36, "QUERY_DEVICE_OUT_PORT_CNT", port_cnt),
    port!(O + 37, "QUERY_DEVICE_OUT_PORT_ATTR_MAX_MTU", max_mtu),
    port!(O + 38, "QUERY_DEVICE_OUT_PORT_ATTR_STATE", state),
    port!(
        O + 39,
        "QUERY_DEVICE_OUT_PORT_ATTR_ACTIVE_WIDTH",
        active_width
    ),
    port!(
        O + 40,
        "QUERY_DEVICE_OUT_PORT_ATTR_ACTIVE_SPEED",
        active_speed
    ),
    port!(O + 41, "QUERY_DEVICE_OUT_PORT_ATTR_ACTIVE_MTU", active_mtu),
    top!(
        O + 42,
        "QUERY_DEVICE_OUT_RESERVED_JETTY_ID_MIN",
        reserved_jetty_id_min
    ),
    top!(
        O + 43,
        "QUERY_DEVICE_OUT_RESERVED_JETTY_ID_MAX",
        reserved_jetty_id_max
    ),
    cap!(
        O + 44,
        "QUERY_DEVICE_OUT_DEV_CAP_RM_ORDER_CAP",
        rm_order_cap
    ),
    cap!(
        O + 45,
        "QUERY_DEVICE_OUT_DEV_CAP_RC_ORDER_CAP",
        rc_order_cap
    ),
    cap!(O + 46, "QUERY_DEVICE_OUT_DEV_CAP_RM_TP_CAP", rm_tp_cap),
    cap!(O + 47, "QUERY_DEVICE_OUT_DEV_CAP_RC_TP_CAP", rc_tp_cap),
    cap!(O + 48, "QUERY_DEVICE_OUT_DEV_CAP_UM_TP_CAP", um_tp_cap),
    cap!(O + 49, "QUERY_DEVICE_OUT_DEV_CAP_TP_FEATURE", tp_feature),
    cap!(
        O + 50,
        "QUERY_DEVICE_OUT_DEV_CAP_PRIORITY_INFO",
        priority_info
    ),
];

/// The field of output type `type_` of the device query.
pub fn query_device_out(type_: u8) -> Option<&'static DevAttrField> {
    let i = type_.checked_sub(URMA_CMD_OUT_TYPE_INIT)?;
    QUERY_DEVICE_OUT.get(usize::from(i))
}

/// The size of one EID list entry (`urma_eid_info_t`).
pub const EID_INFO_SIZE: usize = size_of::<urma_eid_info_t>();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_table_is_in_type_order_and_inside_the_attributes() {
        for (i, f) in QUERY_DEVICE_OUT.iter().enumerate() {
            assert_eq!(usize::from(f.type_), 0x80 + i, "{}", f.name);
            assert_eq!(query_device_out(f.type_), Some(f));
            let end = f.offset + (f.count - 1) * f.stride + f.size;
            assert!(end <= size_of::<urma_device_attr_t>(), "{}", f.name);
        }
        assert_eq!(query_device_out(0x80 + 51), None);
        assert_eq!(query_device_out(0x7f), None);
        assert_eq!(URMA_CMD, 0xC010_5501);
        let a = urma_cmd_attr_t::new(0x85, 4, 8, 20, 1);
        assert_eq!((a.el_num(), a.el_size()), (8, 20));
        assert_eq!(PORT_COUNT, 8);
    }
}
