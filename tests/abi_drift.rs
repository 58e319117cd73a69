//! ABI drift check: cbindgen generates the prototypes of the Rust exports, one C translation unit
//! includes them after include/os_transport.h (conflicting prototypes do not compile), and the same
//! program prints every public struct's size and offsets for comparison with the Rust types.
mod common;

use common::{cc, repo, run, scratch};
use os_transport::abi::*;
use std::mem::{offset_of, size_of};
use std::process::Command;

const PROBE: &str = r#"
#include "os_transport.h"
#include "generated.h"
#include <stddef.h>
#include <stdio.h>
#define S(t) printf(#t " size %zu\n", sizeof(t))
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))
#define C(m) printf(#m " %llu\n", (unsigned long long)(m))
int main(void) {
    /* Name every export (unevaluated): a missing declaration is a compile error; a generated
       declaration that conflicts with the header's already failed at the #include. */
    size_t n = sizeof(&os_transport_log_reg) + sizeof(&os_transport_init) + sizeof(&os_transport_reg_jfc)
             + sizeof(&os_transport_send) + sizeof(&os_transport_recv) + sizeof(&os_transport_wake_up_task)
             + sizeof(&wait_and_free_sync) + sizeof(&wait_and_free_sync_timeout)
             + sizeof(&os_transport_cancel_tasks) + sizeof(&os_transport_destroy);
    printf("exports %zu\n", n / sizeof(void (*)(void)));
    S(os_transport_user_data_t);
    S(ost_buffer_info_t); O(ost_buffer_info_t, addr); O(ost_buffer_info_t, tseg);
    S(ost_device_info_t); O(ost_device_info_t, jfr); O(ost_device_info_t, jetty); O(ost_device_info_t, dst);
    S(jetty_mode_t);
    S(urma_jetty_info_t); O(urma_jetty_info_t, jfs); O(urma_jetty_info_t, jetty); O(urma_jetty_info_t, tjetty);
    O(urma_jetty_info_t, jetty_mode);
    S(os_transport_cfg_t); O(os_transport_cfg_t, urma_event_mode); O(os_transport_cfg_t, reserved1);
    O(os_transport_cfg_t, worker_thread_num); O(os_transport_cfg_t, jfce); O(os_transport_cfg_t, jfc);
    O(os_transport_cfg_t, recv_queue_capacity); O(os_transport_cfg_t, reserved2);
    C(DEFAULT_CHUNK_SIZE); C(REQUEST_ID_BITS); C(REQUEST_ID_EFFECTIVE_BITS); C(CHUNK_TYPE_BITS); C(CHUNK_ID_BITS);
    C(OS_TRANSPORT_MAX_CHUNK_ID); C(OS_TRANSPORT_MAX_CHUNK_NUM); C(OS_TRANSPORT_VERSION);
    C(JETTY_MODE_SIMPLEX); C(JETTY_MODE_DUPLEX);
    { os_transport_user_data_t u; u.user_ctx = 0; u.bs.chunk_type = 1; printf("ud_type %llu\n", (unsigned long long)u.user_ctx); }
    { os_transport_user_data_t u; u.user_ctx = 0; u.bs.chunk_id = 7; u.bs.request_id = 0x123456789AULL;
      printf("ud_id_rid %llu\n", (unsigned long long)u.user_ctx); }
    return 0;
}
"#;

fn generate(dir: &std::path::Path) -> String {
    let cfg = cbindgen::Config::from_file(repo().join("cbindgen.toml")).expect("cbindgen.toml");
    let out = dir.join("generated.h");
    cbindgen::Builder::new()
        .with_crate(repo())
        .with_config(cfg)
        .generate()
        .expect("cbindgen generate")
        .write_to_file(&out);
    std::fs::read_to_string(out).unwrap()
}

fn probe() -> std::collections::HashMap<String, u64> {
    let dir = scratch("drift");
    let decls = generate(&dir);
    for f in [
        "os_transport_send",
        "wait_and_free_sync_timeout",
        "os_transport_log_reg",
        "os_transport_recv",
    ] {
        assert!(decls.contains(f), "cbindgen output lacks {f}:\n{decls}");
    }
    std::fs::write(dir.join("probe.c"), PROBE).unwrap();
    let exe = dir.join("probe");
    run(Command::new(cc())
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic-errors",
            "-Wno-error=pedantic",
        ])
        .arg("-I")
        .arg(&dir)
        .arg("-I")
        .arg(repo().join("include"))
        .arg("-I")
        .arg(urma_sys::bundled_include_dir())
        .arg(dir.join("probe.c"))
        .arg("-o")
        .arg(&exe));
    let out = run(&mut compat_tests::target::command(&exe));
    out.lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (
                k.trim_end_matches(" size").to_string()
                    + if l.contains(" size ") { "#size" } else { "" },
                v.parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn generated_prototypes_compile_with_the_header_and_layouts_match() {
    let c = probe();
    let get = |k: &str| *c.get(k).unwrap_or_else(|| panic!("probe lacks {k}: {c:?}"));
    let sz = |t: &str| get(&format!("{t}#size")) as usize;
    assert_eq!(
        sz("os_transport_user_data_t"),
        size_of::<os_transport_user_data_t>()
    );
    assert_eq!(sz("ost_buffer_info_t"), size_of::<ost_buffer_info_t>());
    assert_eq!(
        get("ost_buffer_info_t.addr") as usize,
        offset_of!(ost_buffer_info_t, addr)
    );
    assert_eq!(
        get("ost_buffer_info_t.tseg") as usize,
        offset_of!(ost_buffer_info_t, tseg)
    );
    assert_eq!(sz("ost_device_info_t"), size_of::<ost_device_info_t>());
    assert_eq!(
        get("ost_device_info_t.jfr") as usize,
        offset_of!(ost_device_info_t, jfr)
    );
    assert_eq!(
        get("ost_device_info_t.jetty") as usize,
        offset_of!(ost_device_info_t, jetty)
    );
    assert_eq!(
        get("ost_device_info_t.dst") as usize,
        offset_of!(ost_device_info_t, dst)
    );
    assert_eq!(sz("jetty_mode_t"), size_of::<jetty_mode_t>());
    assert_eq!(sz("urma_jetty_info_t"), size_of::<urma_jetty_info_t>());
    assert_eq!(
        get("urma_jetty_info_t.jfs") as usize,
        offset_of!(urma_jetty_info_t, jfs)
    );
    assert_eq!(
        get("urma_jetty_info_t.jetty") as usize,
        offset_of!(urma_jetty_info_t, jetty)
    );
    assert_eq!(
        get("urma_jetty_info_t.tjetty") as usize,
        offset_of!(urma_jetty_info_t, tjetty)
    );
    assert_eq!(
        get("urma_jetty_info_t.jetty_mode") as usize,
        offset_of!(urma_jetty_info_t, jetty_mode)
    );
    assert_eq!(sz("os_transport_cfg_t"), size_of::<os_transport_cfg_t>());
    assert_eq!(
        get("os_transport_cfg_t.urma_event_mode") as usize,
        offset_of!(os_transport_cfg_t, urma_event_mode)
    );
    assert_eq!(
        get("os_transport_cfg_t.reserved1") as usize,
        offset_of!(os_transport_cfg_t, reserved1)
    );
    assert_eq!(
        get("os_transport_cfg_t.worker_thread_num") as usize,
        offset_of!(os_transport_cfg_t, worker_thread_num)
    );
    assert_eq!(
        get("os_transport_cfg_t.jfce") as usize,
        offset_of!(os_transport_cfg_t, jfce)
    );
    assert_eq!(
        get("os_transport_cfg_t.jfc") as usize,
        offset_of!(os_transport_cfg_t, jfc)
    );
    assert_eq!(
        get("os_transport_cfg_t.recv_queue_capacity") as usize,
        offset_of!(os_transport_cfg_t, recv_queue_capacity)
    );
    assert_eq!(
        get("os_transport_cfg_t.reserved2") as usize,
        offset_of!(os_transport_cfg_t, reserved2)
    );
    assert_eq!(get("DEFAULT_CHUNK_SIZE"), u64::from(DEFAULT_CHUNK_SIZE));
    assert_eq!(get("REQUEST_ID_BITS"), u64::from(REQUEST_ID_BITS));
    assert_eq!(
        get("REQUEST_ID_EFFECTIVE_BITS"),
        u64::from(REQUEST_ID_EFFECTIVE_BITS)
    );
    assert_eq!(get("CHUNK_TYPE_BITS"), u64::from(CHUNK_TYPE_BITS));
    assert_eq!(get("CHUNK_ID_BITS"), u64::from(CHUNK_ID_BITS));
    assert_eq!(get("OS_TRANSPORT_MAX_CHUNK_ID"), OS_TRANSPORT_MAX_CHUNK_ID);
    assert_eq!(
        get("OS_TRANSPORT_MAX_CHUNK_NUM"),
        u64::from(OS_TRANSPORT_MAX_CHUNK_NUM)
    );
    assert_eq!(get("OS_TRANSPORT_VERSION"), u64::from(OS_TRANSPORT_VERSION));
    assert_eq!(get("JETTY_MODE_SIMPLEX"), u64::from(JETTY_MODE_SIMPLEX));
    assert_eq!(get("JETTY_MODE_DUPLEX"), u64::from(JETTY_MODE_DUPLEX));
}

#[test]
fn c_bitfields_agree_with_the_rust_user_data_layout() {
    use os_transport::user_data::UserData;
    let c = probe();
    assert_eq!(c["ud_type"], UserData::new(0, 1, 0).raw());
    assert_eq!(c["ud_id_rid"], UserData::new(0x123456789A, 0, 7).raw());
    assert_eq!(c["exports"], 10);
}

#[test]
fn mismatching_prototype_is_detected() {
    // Negative control: a deliberately wrong declaration next to the header must not compile.
    let dir = scratch("drift-neg");
    std::fs::write(
        dir.join("neg.c"),
        "#include \"os_transport.h\"\nuint32_t os_transport_destroy(void *handle, int extra);\nint main(void){return 0;}\n",
    )
    .unwrap();
    let st = Command::new(cc())
        .args(["-std=c99", "-c", "-o"])
        .arg(dir.join("neg.o"))
        .arg("-I")
        .arg(repo().join("include"))
        .arg("-I")
        .arg(urma_sys::bundled_include_dir())
        .arg(dir.join("neg.c"))
        .output()
        .unwrap();
    assert!(
        !st.status.success(),
        "a conflicting prototype must fail to compile"
    );
}
