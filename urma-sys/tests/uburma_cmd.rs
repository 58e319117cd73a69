//! `urma_sys::uburma` (the two uburma commands a provider-made device meets) against the genuine
//! headers: with `UMDK_SRC=<UMDK source tree>`, a C probe built with the core's `urma_cmd.h` and
//! its private `urma_cmd_tlv.h` prints every value the module renders (the ioctl number, the two
//! command numbers, the header and attribute layouts with the order of the attribute's bit field,
//! the attribute types, and for each output type of the device query the offset, size, element
//! count and stride of the field the core sends it for), and the two sets must be equal. A table
//! with one entry shifted is reported as exactly that entry (negative control). Natively only;
//! skipped with a message without `UMDK_SRC`.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use urma_sys::uburma::{self, urma_cmd_attr_t, urma_cmd_hdr_t, DevAttrField};
use urma_sys::{urma_eid_info_t, URMA_MAX_DEV_NAME, URMA_MAX_EID_CNT};

mod common;
#[path = "../../testkit/src/paths.rs"]
mod paths;
#[path = "../../testkit/src/target.rs"]
mod target;

type Facts = BTreeMap<String, String>;

/// The facts of the Rust rendering, with `table` as the device query's output fields.
fn rust_facts(table: &[DevAttrField]) -> Facts {
    let mut f = Facts::new();
    let mut put = |k: String, v: String| {
        f.insert(k, v);
    };
    put("const URMA_CMD".into(), uburma::URMA_CMD.to_string());
    put(
        "const URMA_CMD_GET_EID_LIST".into(),
        uburma::URMA_CMD_GET_EID_LIST.to_string(),
    );
    put(
        "const URMA_CMD_QUERY_DEV_ATTR".into(),
        uburma::URMA_CMD_QUERY_DEV_ATTR.to_string(),
    );
    put(
        "const URMA_CMD_OUT_TYPE_INIT".into(),
        uburma::URMA_CMD_OUT_TYPE_INIT.to_string(),
    );
    put(
        "const URMA_CMD_MAX_ARGS_SIZE".into(),
        uburma::URMA_CMD_MAX_ARGS_SIZE.to_string(),
    );
    put(
        "const GET_EID_LIST_IN_MAX_EID_CNT".into(),
        uburma::GET_EID_LIST_IN_MAX_EID_CNT.to_string(),
    );
    put(
        "const GET_EID_LIST_OUT_EID_CNT".into(),
        uburma::GET_EID_LIST_OUT_EID_CNT.to_string(),
    );
    put(
        "const GET_EID_LIST_OUT_EID_LIST".into(),
        uburma::GET_EID_LIST_OUT_EID_LIST.to_string(),
    );
    put(
        "const QUERY_DEVICE_IN_DEV_NAME".into(),
        uburma::QUERY_DEVICE_IN_DEV_NAME.to_string(),
    );
    put(
        "const QUERY_DEVICE_OUT_NUM".into(),
        (usize::from(uburma::URMA_CMD_OUT_TYPE_INIT) + table.len()).to_string(),
    );
    put(
        "const URMA_MAX_DEV_NAME".into(),
        URMA_MAX_DEV_NAME.to_string(),
    );
    put(
        "const URMA_MAX_EID_CNT".into(),
        URMA_MAX_EID_CNT.to_string(),
    );
    put(
        "size urma_eid_info_t".into(),
        size_of::<urma_eid_info_t>().to_string(),
    );
    put(
        "size urma_cmd_hdr_t".into(),
        size_of::<urma_cmd_hdr_t>().to_string(),
    );
    put(
        "size urma_cmd_attr_t".into(),
        size_of::<urma_cmd_attr_t>().to_string(),
    );
    for (k, v) in [
        (
            "urma_cmd_hdr_t.command",
            offset_of!(urma_cmd_hdr_t, command),
        ),
        (
            "urma_cmd_hdr_t.args_len",
            offset_of!(urma_cmd_hdr_t, args_len),
        ),
        (
            "urma_cmd_hdr_t.args_addr",
            offset_of!(urma_cmd_hdr_t, args_addr),
        ),
        ("urma_cmd_attr_t.type", offset_of!(urma_cmd_attr_t, type_)),
        ("urma_cmd_attr_t.flag", offset_of!(urma_cmd_attr_t, flag)),
        (
            "urma_cmd_attr_t.field_size",
            offset_of!(urma_cmd_attr_t, field_size),
        ),
        (
            "urma_cmd_attr_t.attr_data",
            offset_of!(urma_cmd_attr_t, attr_data),
        ),
        ("urma_cmd_attr_t.data", offset_of!(urma_cmd_attr_t, data)),
    ] {
        put(format!("offset {k}"), v.to_string());
    }
    // el_num 5, el_size 7: where the bit field puts them.
    put(
        "attr_data el_num=5 el_size=7".into(),
        urma_cmd_attr_t::new(0, 0, 5, 7, 0).attr_data.to_string(),
    );
    for e in table {
        put(
            format!("out {}", e.name),
            format!(
                "type {} offset {} size {} count {} stride {}",
                e.type_, e.offset, e.size, e.count, e.stride
            ),
        );
    }
    f
}

/// The C probe printing the same facts from the genuine headers.
fn probe_source(table: &[DevAttrField]) -> String {
    let mut s = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"urma_cmd_tlv.h\"\n\n\
         #define FIELD(f) offsetof(urma_device_attr_t, f), sizeof(((urma_device_attr_t *)0)->f)\n\
         int main(void)\n{\n    urma_cmd_attr_t a = {0};\n",
    );
    let consts = [
        ("URMA_CMD", "(unsigned long long)URMA_CMD", "%llu"),
        ("URMA_CMD_GET_EID_LIST", "(int)URMA_CMD_GET_EID_LIST", "%d"),
        (
            "URMA_CMD_QUERY_DEV_ATTR",
            "(int)URMA_CMD_QUERY_DEV_ATTR",
            "%d",
        ),
        (
            "URMA_CMD_OUT_TYPE_INIT",
            "(int)URMA_CMD_OUT_TYPE_INIT",
            "%d",
        ),
        (
            "URMA_CMD_MAX_ARGS_SIZE",
            "(int)URMA_CMD_MAX_ARGS_SIZE",
            "%d",
        ),
        (
            "GET_EID_LIST_IN_MAX_EID_CNT",
            "(int)GET_EID_LIST_IN_MAX_EID_CNT",
            "%d",
        ),
        (
            "GET_EID_LIST_OUT_EID_CNT",
            "(int)GET_EID_LIST_OUT_EID_CNT",
            "%d",
        ),
        (
            "GET_EID_LIST_OUT_EID_LIST",
            "(int)GET_EID_LIST_OUT_EID_LIST",
            "%d",
        ),
        (
            "QUERY_DEVICE_IN_DEV_NAME",
            "(int)QUERY_DEVICE_IN_DEV_NAME",
            "%d",
        ),
        ("QUERY_DEVICE_OUT_NUM", "(int)QUERY_DEVICE_OUT_NUM", "%d"),
        ("URMA_MAX_DEV_NAME", "(int)URMA_MAX_DEV_NAME", "%d"),
        ("URMA_MAX_EID_CNT", "(int)URMA_MAX_EID_CNT", "%d"),
    ];
    for (name, expr, fmt) in consts {
        s += &format!("    printf(\"const {name}\\t{fmt}\\n\", {expr});\n");
    }
    for t in ["urma_eid_info_t", "urma_cmd_hdr_t", "urma_cmd_attr_t"] {
        s += &format!("    printf(\"size {t}\\t%zu\\n\", sizeof({t}));\n");
    }
    for (t, f) in [
        ("urma_cmd_hdr_t", "command"),
        ("urma_cmd_hdr_t", "args_len"),
        ("urma_cmd_hdr_t", "args_addr"),
        ("urma_cmd_attr_t", "type"),
        ("urma_cmd_attr_t", "flag"),
        ("urma_cmd_attr_t", "field_size"),
        ("urma_cmd_attr_t", "attr_data"),
        ("urma_cmd_attr_t", "data"),
    ] {
        s += &format!("    printf(\"offset {t}.{f}\\t%zu\\n\", offsetof({t}, {f}));\n");
    }
    s += "    a.attr_data.bs.el_num = 5;\n    a.attr_data.bs.el_size = 7;\n";
    s += "    printf(\"attr_data el_num=5 el_size=7\\t%u\\n\", a.attr_data.value);\n";
    for e in table {
        let (count, stride) = match e.c_field.split_once("[0].") {
            Some((array, _)) => (
                format!(
                    "sizeof(((urma_device_attr_t *)0)->{array}) / \
                     sizeof(((urma_device_attr_t *)0)->{array}[0])"
                ),
                format!("sizeof(((urma_device_attr_t *)0)->{array}[0])"),
            ),
            None => ("(size_t)1".to_string(), "(size_t)0".to_string()),
        };
        s += &format!(
            "    printf(\"out {name}\\ttype %d offset %zu size %zu count %zu stride %zu\\n\", \
             (int){name}, FIELD({field}), {count}, {stride});\n",
            name = e.name,
            field = e.c_field,
        );
    }
    s += "    return 0;\n}\n";
    s
}

#[test]
fn the_rendering_is_the_genuine_headers() {
    let Some(root) = std::env::var_os("UMDK_SRC").filter(|v| !v.is_empty()) else {
        println!(
            "UMDK_SRC not set: skipped the comparison of urma_sys::uburma with the genuine headers"
        );
        return;
    };
    if target::emulated() {
        println!(
            "under emulation: skipped the comparison of urma_sys::uburma with the genuine headers"
        );
        return;
    }
    let core = PathBuf::from(root).join("src/urma/lib/urma/core");
    let tlv_h = core.join("urma_cmd_tlv.h");
    assert!(
        tlv_h.is_file(),
        "UMDK_SRC: no {} (UMDK_SRC names the directory holding src/urma)",
        tlv_h.display()
    );
    let dir = paths::profile_dir().join("urma-sys-uburma-cmd");
    std::fs::create_dir_all(&dir).expect("probe dir");
    let src = dir.join("probe.c");
    let exe = dir.join(format!("probe-{}", std::process::id()));
    std::fs::write(&src, probe_source(&uburma::QUERY_DEVICE_OUT)).expect("write probe");
    let mut cc = Command::new(paths::cc());
    cc.args(["-std=gnu11", "-Wall", "-Wextra"])
        .arg(format!("-I{}", core.join("include").display()))
        .arg(format!("-I{}", core.display()))
        .arg(format!(
            "-I{}",
            core.join("../../../common/include").display()
        ));
    target::run(cc.arg("-o").arg(&exe).arg(&src));
    let genuine = common::tab_separated_facts(&target::run(&mut Command::new(&exe)));
    let _ = std::fs::remove_file(&exe);

    let ours = rust_facts(&uburma::QUERY_DEVICE_OUT);
    let d = common::differences(&ours, &genuine);
    assert!(
        d.is_empty(),
        "urma_sys::uburma (left) vs the genuine headers (right): {} difference(s):\n{}",
        d.len(),
        d.join("\n")
    );
    println!(
        "urma_sys::uburma == the genuine urma_cmd.h / urma_cmd_tlv.h: {} facts",
        ours.len()
    );

    // Negative control: one output field moved by 4 bytes is that one difference.
    let mut shifted = uburma::QUERY_DEVICE_OUT;
    shifted[2].offset += 4;
    let d = common::differences(&rust_facts(&shifted), &genuine);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].starts_with("out QUERY_DEVICE_OUT_DEV_CAP_MAX_JFC:"),
        "{d:?}"
    );
}
