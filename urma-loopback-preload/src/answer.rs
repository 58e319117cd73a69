//! Answering the two commands the core sends on a device's character device (see
//! `urma_sys::uburma`): decoding the attribute array by type, checking every size and count
//! against the rendering before anything is written, then filling the caller's fields.
//!
//! A command is refused as a whole ([`Refused`]) — nothing written — when the header or any
//! attribute is not what the core sends: an argument array that is empty, not whole attributes,
//! larger than the core's limit or at address 0; an attribute type the command does not have, or
//! given twice; a field size other than the field's; an element count of 0, or above 1 for a
//! plain field, or above the array's length; a stride smaller than the field; a field at address
//! 0 or whose extent overflows the address space; a missing input; a device name without its
//! terminating NUL, or naming another device than the one opened. Any other command is
//! [`Refused::Unsupported`].
//!
//! The field addresses themselves cannot be checked in user space: like the kernel's copies they
//! are taken as the caller's memory (the core points them into one structure on its stack or
//! heap).

use std::ffi::{c_int, CStr};
use std::mem::size_of;
use std::ptr;

use urma_sys::uburma::{
    query_device_out, urma_cmd_attr_t, urma_cmd_hdr_t, EID_INFO_SIZE, GET_EID_LIST_IN_MAX_EID_CNT,
    GET_EID_LIST_OUT_EID_CNT, GET_EID_LIST_OUT_EID_LIST, QUERY_DEVICE_IN_DEV_NAME,
    URMA_CMD_GET_EID_LIST, URMA_CMD_MAX_ARGS_SIZE, URMA_CMD_OUT_TYPE_INIT, URMA_CMD_QUERY_DEV_ATTR,
};
use urma_sys::{urma_device_attr_t, urma_eid_info_t, URMA_MAX_DEV_NAME, URMA_MAX_EID_CNT};

/// Why a command was not answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A command other than the two (`ENOTTY`, as for an ioctl the device does not know).
    Unsupported,
    /// The header or an attribute is not what the command takes (`EINVAL`).
    Malformed(&'static str),
    /// The header is at address 0 (`EFAULT`).
    Fault,
    /// The device named is not the one opened, or the plugin does not know it (`ENODEV`).
    NoDevice,
}

impl Refused {
    /// The `errno` the ioctl fails with.
    pub fn errno(self) -> c_int {
        match self {
            Refused::Unsupported => libc::ENOTTY,
            Refused::Malformed(_) => libc::EINVAL,
            Refused::Fault => libc::EFAULT,
            Refused::NoDevice => libc::ENODEV,
        }
    }
}

/// What answers for a device: the plugin's two functions (`urma_loopback_ctl::plugin`).
pub trait Device {
    /// The attributes of device `name`, `None` if it is not one of the provider's.
    fn attributes(&self, name: &CStr) -> Option<urma_device_attr_t>;
    /// The EIDs of device `name` written to the start of `list`, and how many; `None` if it is
    /// not one of the provider's.
    fn eids(&self, name: &CStr, list: &mut [urma_eid_info_t]) -> Option<usize>;
}

/// The most attributes a command can carry.
const MAX_ATTRS: usize = URMA_CMD_MAX_ARGS_SIZE as usize / size_of::<urma_cmd_attr_t>();

/// The attributes of a command, copied out of the caller's array.
struct Attrs {
    items: [urma_cmd_attr_t; MAX_ATTRS],
    len: usize,
}

impl Attrs {
    fn as_slice(&self) -> &[urma_cmd_attr_t] {
        &self.items[..self.len]
    }

    /// The attribute of type `type_`; an error if it is there twice.
    fn find(&self, type_: u8) -> Result<Option<&urma_cmd_attr_t>, Refused> {
        let mut it = self.as_slice().iter().filter(|a| a.type_ == type_);
        let first = it.next();
        if it.next().is_some() {
            return Err(Refused::Malformed("an attribute type given twice"));
        }
        Ok(first)
    }
}

/// Answers the command `hdr` points to, for the device `dev` (the name the descriptor was opened
/// for), from `device`.
///
/// # Safety
/// `hdr` is 0 or the address of a command header; its `args_addr` is 0 or the address of
/// `args_len` readable bytes; each field address of an attribute that passes the checks above is
/// the caller's memory of the extent the attribute describes (what the core's ioctl helpers
/// send).
pub unsafe fn answer(
    hdr: *const urma_cmd_hdr_t,
    dev: &CStr,
    device: &dyn Device,
) -> Result<(), Refused> {
    if hdr.is_null() {
        return Err(Refused::Fault);
    }
    // SAFETY: non-null, and the caller's header per the contract; it may be unaligned.
    let hdr = unsafe { ptr::read_unaligned(hdr) };
    if hdr.command != URMA_CMD_GET_EID_LIST && hdr.command != URMA_CMD_QUERY_DEV_ATTR {
        return Err(Refused::Unsupported);
    }
    // SAFETY: forwarded contract.
    let attrs = unsafe { read_attrs(&hdr) }?;
    if hdr.command == URMA_CMD_QUERY_DEV_ATTR {
        // SAFETY: forwarded contract.
        unsafe { query_device(&attrs, dev, device) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { eid_list(&attrs, dev, device) }
    }
}

/// The attribute array of `hdr`, after checking its size and address.
///
/// # Safety
/// As [`answer`] for `args_addr` and `args_len`.
unsafe fn read_attrs(hdr: &urma_cmd_hdr_t) -> Result<Attrs, Refused> {
    let unit = size_of::<urma_cmd_attr_t>();
    let len = hdr.args_len as usize;
    if len == 0 || len % unit != 0 {
        return Err(Refused::Malformed(
            "args_len is not a whole number of attributes",
        ));
    }
    if hdr.args_len > URMA_CMD_MAX_ARGS_SIZE {
        return Err(Refused::Malformed("args_len above the core's limit"));
    }
    if hdr.args_addr == 0 {
        return Err(Refused::Malformed("args_addr is 0"));
    }
    let mut attrs = Attrs {
        items: [urma_cmd_attr_t::default(); MAX_ATTRS],
        len: len / unit,
    };
    let src = hdr.args_addr as usize as *const urma_cmd_attr_t;
    for (i, slot) in attrs.items[..attrs.len].iter_mut().enumerate() {
        // SAFETY: i < args_len / 16, inside the caller's array per the contract; unaligned read.
        *slot = unsafe { ptr::read_unaligned(src.add(i)) };
    }
    Ok(attrs)
}

/// The extent in bytes an attribute's field occupies from its address, checked: element count
/// 1..=`max_count` (1 for a plain field), stride at least the field for more than one element,
/// a non-zero address and no overflow.
fn extent(a: &urma_cmd_attr_t, max_count: usize) -> Result<usize, Refused> {
    let n = a.el_num() as usize;
    if n == 0 {
        return Err(Refused::Malformed("an element count of 0"));
    }
    if n > max_count {
        return Err(Refused::Malformed("more elements than the field has"));
    }
    let size = usize::from(a.field_size);
    let stride = a.el_size() as usize;
    if n > 1 && stride < size {
        return Err(Refused::Malformed(
            "elements overlapping (stride below size)",
        ));
    }
    if a.data == 0 {
        return Err(Refused::Malformed("a field at address 0"));
    }
    let span = (n - 1) * stride + size;
    usize::try_from(a.data)
        .ok()
        .and_then(|d| d.checked_add(span))
        .ok_or(Refused::Malformed("a field beyond the address space"))?;
    Ok(span)
}

/// `URMA_CMD_QUERY_DEV_ATTR`.
///
/// # Safety
/// As [`answer`].
unsafe fn query_device(attrs: &Attrs, dev: &CStr, device: &dyn Device) -> Result<(), Refused> {
    // Every attribute checked before anything is written.
    for a in attrs.as_slice() {
        if a.type_ < URMA_CMD_OUT_TYPE_INIT {
            if a.type_ != QUERY_DEVICE_IN_DEV_NAME {
                return Err(Refused::Malformed("an input type the query does not have"));
            }
            continue;
        }
        let f = query_device_out(a.type_)
            .ok_or(Refused::Malformed("an output type the query does not have"))?;
        if usize::from(a.field_size) != f.size {
            return Err(Refused::Malformed("a field size other than the field's"));
        }
        extent(a, f.count)?;
        attrs.find(a.type_)?;
    }
    let name = attrs
        .find(QUERY_DEVICE_IN_DEV_NAME)?
        .ok_or(Refused::Malformed("no device name"))?;
    if u32::from(name.field_size) != URMA_MAX_DEV_NAME || name.el_num() != 1 {
        return Err(Refused::Malformed("a device name field of another size"));
    }
    extent(name, 1)?;
    let mut buf = [0u8; URMA_MAX_DEV_NAME as usize];
    // SAFETY: the checked extent of the caller's name field (64 bytes at a non-zero address).
    unsafe {
        ptr::copy_nonoverlapping(name.data as usize as *const u8, buf.as_mut_ptr(), buf.len())
    };
    let asked = CStr::from_bytes_until_nul(&buf)
        .map_err(|_| Refused::Malformed("a device name without NUL"))?;
    if asked != dev {
        return Err(Refused::NoDevice);
    }
    let attr = device.attributes(dev).ok_or(Refused::NoDevice)?;
    // SAFETY: reading the bytes of a plain C structure we own.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            ptr::from_ref(&attr).cast::<u8>(),
            size_of::<urma_device_attr_t>(),
        )
    };
    for a in attrs
        .as_slice()
        .iter()
        .filter(|a| a.type_ >= URMA_CMD_OUT_TYPE_INIT)
    {
        let f = query_device_out(a.type_).ok_or(Refused::Malformed("checked above"))?;
        for k in 0..a.el_num() as usize {
            let from = &bytes[f.offset + k * f.stride..][..f.size];
            let to = a.data as usize + k * a.el_size() as usize;
            // SAFETY: inside the checked extent of the caller's field; the source is our own
            // structure, so the two do not overlap.
            unsafe { ptr::copy_nonoverlapping(from.as_ptr(), to as *mut u8, f.size) };
        }
    }
    Ok(())
}

/// `URMA_CMD_GET_EID_LIST`.
///
/// # Safety
/// As [`answer`].
unsafe fn eid_list(attrs: &Attrs, dev: &CStr, device: &dyn Device) -> Result<(), Refused> {
    for a in attrs.as_slice() {
        match a.type_ {
            GET_EID_LIST_IN_MAX_EID_CNT | GET_EID_LIST_OUT_EID_CNT => {
                if usize::from(a.field_size) != size_of::<u32>() {
                    return Err(Refused::Malformed("a count field of another size"));
                }
            }
            GET_EID_LIST_OUT_EID_LIST => {
                let size = usize::from(a.field_size);
                if size == 0 || size % EID_INFO_SIZE != 0 {
                    return Err(Refused::Malformed(
                        "an EID list field that is not whole entries",
                    ));
                }
            }
            _ => return Err(Refused::Malformed("a type the EID list does not have")),
        }
        extent(a, 1)?;
        attrs.find(a.type_)?;
    }
    let need = |t| {
        attrs
            .find(t)
            .and_then(|a| a.copied().ok_or(Refused::Malformed("a missing attribute")))
    };
    let (max_a, cnt_a, list_a) = (
        need(GET_EID_LIST_IN_MAX_EID_CNT)?,
        need(GET_EID_LIST_OUT_EID_CNT)?,
        need(GET_EID_LIST_OUT_EID_LIST)?,
    );
    // SAFETY: the checked extent of the caller's 4-byte input.
    let max = unsafe { ptr::read_unaligned(max_a.data as usize as *const u32) };
    let room = usize::from(list_a.field_size) / EID_INFO_SIZE;
    let n = (max as usize).min(room).min(URMA_MAX_EID_CNT as usize);
    // SAFETY: all-zero bytes are a valid urma_eid_info_t (bytes and an integer).
    let mut list = vec![unsafe { std::mem::zeroed::<urma_eid_info_t>() }; n];
    let got = device.eids(dev, &mut list).ok_or(Refused::NoDevice)?.min(n);
    // SAFETY: `got` entries fit the caller's list field (n <= its entries); the count is its
    // checked 4-byte output; our buffer does not overlap the caller's memory.
    unsafe {
        ptr::copy_nonoverlapping(
            list.as_ptr().cast::<u8>(),
            list_a.data as usize as *mut u8,
            got * EID_INFO_SIZE,
        );
        ptr::write_unaligned(cnt_a.data as usize as *mut u32, got as u32);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use urma_sys::uburma::{QUERY_DEVICE_OUT, URMA_CMD_OUT_TYPE_INIT as OUT};

    /// A device `loopback0` with distinct values in every field, and two EIDs.
    struct Fake;

    fn fake_attr() -> urma_device_attr_t {
        let mut a = urma_device_attr_t::default();
        // SAFETY: filling the bytes of a plain C structure with a pattern (every bit pattern is
        // valid for its integers, byte arrays and unions of integers).
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                ptr::from_mut(&mut a).cast::<u8>(),
                size_of::<urma_device_attr_t>(),
            )
        };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        a
    }

    fn eid(i: u8) -> urma_eid_info_t {
        // SAFETY: all-zero bytes are valid.
        let mut e: urma_eid_info_t = unsafe { std::mem::zeroed() };
        e.eid.raw = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i];
        e.eid_index = u32::from(i);
        e
    }

    impl Device for Fake {
        fn attributes(&self, name: &CStr) -> Option<urma_device_attr_t> {
            (name == c"loopback0").then(fake_attr)
        }
        fn eids(&self, name: &CStr, list: &mut [urma_eid_info_t]) -> Option<usize> {
            if name != c"loopback0" {
                return None;
            }
            let n = list.len().min(2);
            for (i, e) in list[..n].iter_mut().enumerate() {
                *e = eid(i as u8 + 1);
            }
            Some(n)
        }
    }

    /// The query's argument as the core makes it (`urma_cmd_query_device_attr_t`).
    #[repr(C)]
    struct QueryArg {
        dev_name: [u8; 64],
        attr: urma_device_attr_t,
    }

    fn bytes_of<T>(v: &T) -> &[u8] {
        // SAFETY: the bytes of a live value, for comparison.
        unsafe { std::slice::from_raw_parts(ptr::from_ref(v).cast::<u8>(), size_of::<T>()) }
    }

    /// The query's 52 attributes over `arg`, as the core's helper builds them.
    fn query_attrs(arg: &mut QueryArg) -> Vec<urma_cmd_attr_t> {
        let base = ptr::from_mut(&mut arg.attr) as u64;
        let mut v = vec![urma_cmd_attr_t::new(
            QUERY_DEVICE_IN_DEV_NAME,
            64,
            1,
            0,
            arg.dev_name.as_ptr() as u64,
        )];
        for f in &QUERY_DEVICE_OUT {
            let (n, s) = if f.count > 1 {
                (f.count as u16, f.stride as u16)
            } else {
                (1, 0)
            };
            v.push(urma_cmd_attr_t::new(
                f.type_,
                f.size as u16,
                n,
                s,
                base + f.offset as u64,
            ));
        }
        v
    }

    fn query_arg(name: &[u8]) -> Box<QueryArg> {
        // SAFETY: all-zero bytes are valid for both fields (as the core's `= {0}`).
        let mut arg: Box<QueryArg> = Box::new(unsafe { std::mem::zeroed() });
        arg.dev_name[..name.len()].copy_from_slice(name);
        arg
    }

    fn send(command: u32, attrs: &[urma_cmd_attr_t]) -> Result<(), Refused> {
        let hdr = urma_cmd_hdr_t {
            command,
            args_len: std::mem::size_of_val(attrs) as u32,
            args_addr: attrs.as_ptr() as u64,
        };
        // SAFETY: every address in the attributes points into live test buffers of the
        // described extents (or is one of the malformed values, refused before use).
        unsafe { answer(&hdr, c"loopback0", &Fake) }
    }

    #[test]
    fn the_query_is_answered_field_by_field_as_the_core_copies_it() {
        let mut arg = query_arg(b"loopback0");
        let attrs = query_attrs(&mut arg);
        assert_eq!(attrs.len(), 52);
        assert_eq!(send(URMA_CMD_QUERY_DEV_ATTR, &attrs), Ok(()));
        let want = fake_attr();
        for f in &QUERY_DEVICE_OUT {
            for k in 0..f.count {
                let at = f.offset + k * f.stride;
                assert_eq!(
                    bytes_of(&arg.attr)[at..at + f.size],
                    bytes_of(&want)[at..at + f.size],
                    "{} element {k}",
                    f.name
                );
            }
        }
        assert_eq!(arg.attr.dev_cap.max_jfc, want.dev_cap.max_jfc);
        assert_eq!(
            arg.attr.port_attr[7].active_mtu,
            want.port_attr[7].active_mtu
        );
    }

    /// The query with `change` applied to its attributes is refused for `why`, and nothing of
    /// the answer is written.
    fn refused(change: impl FnOnce(&mut Vec<urma_cmd_attr_t>), why: Refused) {
        let mut arg = query_arg(b"loopback0");
        let mut attrs = query_attrs(&mut arg);
        change(&mut attrs);
        assert_eq!(send(URMA_CMD_QUERY_DEV_ATTR, &attrs), Err(why));
        assert!(
            bytes_of(&arg.attr).iter().all(|&b| b == 0),
            "written despite {why:?}"
        );
    }

    #[test]
    fn a_malformed_query_is_refused_before_anything_is_written() {
        let m = Refused::Malformed;
        let at = |t: u8| {
            move |v: &mut Vec<urma_cmd_attr_t>| v.iter().position(|a| a.type_ == t).unwrap()
        };
        let max_jfc = OUT + 2;
        let mtu = OUT + 37;
        refused(
            |v| {
                let i = at(max_jfc)(v);
                v[i].field_size = 8;
            },
            m("a field size other than the field's"),
        );
        refused(
            |v| {
                let i = at(max_jfc)(v);
                v[i].attr_data = 0;
            },
            m("an element count of 0"),
        );
        refused(
            |v| {
                let i = at(max_jfc)(v);
                v[i].attr_data = 2 | (4 << 12);
            },
            m("more elements than the field has"),
        );
        refused(
            |v| {
                let i = at(mtu)(v);
                v[i].attr_data = 9 | (20 << 12);
            },
            m("more elements than the field has"),
        );
        refused(
            |v| {
                let i = at(mtu)(v);
                v[i].attr_data = 8 | (2 << 12);
            },
            m("elements overlapping (stride below size)"),
        );
        refused(
            |v| {
                let i = at(max_jfc)(v);
                v[i].data = 0;
            },
            m("a field at address 0"),
        );
        refused(
            |v| {
                let i = at(mtu)(v);
                v[i].data = u64::MAX - 100;
            },
            m("a field beyond the address space"),
        );
        refused(
            |v| v.push(urma_cmd_attr_t::new(OUT + 51, 4, 1, 0, 8)),
            m("an output type the query does not have"),
        );
        refused(
            |v| v.push(urma_cmd_attr_t::new(1, 4, 1, 0, 8)),
            m("an input type the query does not have"),
        );
        refused(
            |v| {
                let dup = v[5];
                v.push(dup);
            },
            m("an attribute type given twice"),
        );
        refused(|v| v.retain(|a| a.type_ != 0), m("no device name"));
        refused(
            |v| v[0].field_size = 32,
            m("a device name field of another size"),
        );
    }

    #[test]
    fn a_name_without_nul_or_of_another_device_is_refused() {
        let mut arg = query_arg(&[b'x'; 64]);
        let attrs = query_attrs(&mut arg);
        assert_eq!(
            send(URMA_CMD_QUERY_DEV_ATTR, &attrs),
            Err(Refused::Malformed("a device name without NUL"))
        );
        let mut arg = query_arg(b"loopback1");
        let attrs = query_attrs(&mut arg);
        assert_eq!(
            send(URMA_CMD_QUERY_DEV_ATTR, &attrs),
            Err(Refused::NoDevice)
        );
        assert!(bytes_of(&arg.attr).iter().all(|&b| b == 0));
    }

    #[test]
    fn a_bad_header_or_another_command_is_refused() {
        let mut arg = query_arg(b"loopback0");
        let attrs = query_attrs(&mut arg);
        let m = Refused::Malformed;
        let with = |len: u32, addr: u64, command: u32| {
            let hdr = urma_cmd_hdr_t {
                command,
                args_len: len,
                args_addr: addr,
            };
            // SAFETY: the lengths are at most the live array's, or refused before use.
            unsafe { answer(&hdr, c"loopback0", &Fake) }
        };
        let addr = attrs.as_ptr() as u64;
        assert_eq!(
            with(0, addr, URMA_CMD_QUERY_DEV_ATTR),
            Err(m("args_len is not a whole number of attributes"))
        );
        assert_eq!(
            with(17, addr, URMA_CMD_QUERY_DEV_ATTR),
            Err(m("args_len is not a whole number of attributes"))
        );
        assert_eq!(
            with(4096 + 16, addr, URMA_CMD_QUERY_DEV_ATTR),
            Err(m("args_len above the core's limit"))
        );
        assert_eq!(
            with(16, 0, URMA_CMD_QUERY_DEV_ATTR),
            Err(m("args_addr is 0"))
        );
        assert_eq!(with(832, addr, 1), Err(Refused::Unsupported));
        assert_eq!(with(832, addr, 41), Err(Refused::Unsupported));
        // SAFETY: a null header is refused before use.
        let null = unsafe { answer(ptr::null(), c"loopback0", &Fake) };
        assert_eq!(null, Err(Refused::Fault));
        assert_eq!(Refused::Unsupported.errno(), libc::ENOTTY);
        assert_eq!(m("x").errno(), libc::EINVAL);
    }

    /// The EID-list argument as the core makes it (`urma_cmd_get_eid_list_t`).
    #[repr(C)]
    struct EidArg {
        max: u32,
        cnt: u32,
        list: [urma_eid_info_t; 1024],
    }

    fn eid_arg(max: u32) -> (Box<EidArg>, Vec<urma_cmd_attr_t>) {
        // SAFETY: all-zero bytes are valid (as the core's calloc).
        let mut arg: Box<EidArg> = Box::new(unsafe { std::mem::zeroed() });
        arg.max = max;
        arg.cnt = 77;
        let attrs = vec![
            urma_cmd_attr_t::new(
                GET_EID_LIST_IN_MAX_EID_CNT,
                4,
                1,
                0,
                ptr::from_ref(&arg.max) as u64,
            ),
            urma_cmd_attr_t::new(
                GET_EID_LIST_OUT_EID_CNT,
                4,
                1,
                0,
                ptr::from_ref(&arg.cnt) as u64,
            ),
            urma_cmd_attr_t::new(
                GET_EID_LIST_OUT_EID_LIST,
                (1024 * EID_INFO_SIZE) as u16,
                1,
                0,
                arg.list.as_ptr() as u64,
            ),
        ];
        (arg, attrs)
    }

    #[test]
    fn the_eid_list_is_answered_up_to_the_callers_maximum() {
        let (arg, attrs) = eid_arg(4);
        assert_eq!(send(URMA_CMD_GET_EID_LIST, &attrs), Ok(()));
        assert_eq!(arg.cnt, 2);
        assert_eq!(arg.list[0].eid_index, 1);
        // SAFETY: every view of the EID union is plain bytes.
        assert_eq!(unsafe { arg.list[1].eid.raw[15] }, 2);
        assert_eq!(arg.list[2].eid_index, 0, "nothing beyond the count");
        let (arg, attrs) = eid_arg(1);
        assert_eq!(send(URMA_CMD_GET_EID_LIST, &attrs), Ok(()));
        assert_eq!(
            (arg.cnt, arg.list[0].eid_index, arg.list[1].eid_index),
            (1, 1, 0)
        );
    }

    #[test]
    fn a_malformed_eid_list_is_refused_before_anything_is_written() {
        let m = Refused::Malformed;
        type Change = Box<dyn Fn(&mut Vec<urma_cmd_attr_t>)>;
        let cases: Vec<(Change, Refused)> = vec![
            (
                Box::new(|v| v[0].field_size = 8),
                m("a count field of another size"),
            ),
            (
                Box::new(|v| v[1].field_size = 2),
                m("a count field of another size"),
            ),
            (
                Box::new(|v| v[2].field_size = 25),
                m("an EID list field that is not whole entries"),
            ),
            (
                Box::new(|v| v[2].attr_data = 2),
                m("more elements than the field has"),
            ),
            (Box::new(|v| v[1].data = 0), m("a field at address 0")),
            (
                Box::new(|v| {
                    v.remove(1);
                }),
                m("a missing attribute"),
            ),
            (
                Box::new(|v| v.push(urma_cmd_attr_t::new(0x82, 4, 1, 0, 8))),
                m("a type the EID list does not have"),
            ),
            (
                Box::new(|v| {
                    let d = v[0];
                    v.push(d);
                }),
                m("an attribute type given twice"),
            ),
        ];
        for (change, why) in cases {
            let (arg, mut attrs) = eid_arg(4);
            change(&mut attrs);
            assert_eq!(send(URMA_CMD_GET_EID_LIST, &attrs), Err(why));
            assert_eq!(arg.cnt, 77, "count written despite {why:?}");
            assert_eq!(arg.list[0].eid_index, 0, "list written despite {why:?}");
        }
    }
}
