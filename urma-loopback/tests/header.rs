//! The C header of the control API (`include/urma_loopback.h`) against its Rust definition, the
//! control plane crate `urma-loopback-ctl`: a C probe compiled from the header prints the size of
//! `urma_loopback_counters_t`, the offset of every field the Rust struct names, and the value of
//! every `URMA_LOOPBACK_*` constant; the prototypes are checked at compile time with
//! `__builtin_types_compatible_p` against the C types of the Rust binding's function pointers.
//! A field, constant or prototype that drifts on either side fails this test.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use urma_loopback_ctl::{Counters, CONSTANTS, SYMBOLS};

use testkit::target;

/// C function-pointer type of each binding in `urma_loopback_ctl::Api`, in `SYMBOLS` order.
const PROTOTYPES: [&str; 16] = [
    "void (*)(void)",
    "int (*)(urma_loopback_counters_t *)",
    "int (*)(int, uint64_t, int)",
    "int (*)(uint64_t, uint32_t)",
    "int (*)(uint64_t, int)",
    "void (*)(bool)",
    "uint64_t (*)(int, uint64_t, uint32_t)",
    "void (*)(uint32_t)",
    "void (*)(bool)",
    "void (*)(uint32_t)",
    "void (*)(uint32_t)",
    "int (*)(const char *)",
    "int (*)(const char *)",
    "void (*)(bool)",
    "char *(*)(size_t *)",
    "void (*)(void *)",
];

/// The Rust function-pointer types of the binding, spelled out so that this table and
/// [`PROTOTYPES`] are checked against the binding at compile time.
#[allow(clippy::type_complexity)]
fn _binding_types(a: &urma_loopback_ctl::Api) {
    use std::ffi::{c_char, c_int, c_void};
    let _: (
        unsafe extern "C" fn(),
        unsafe extern "C" fn(*mut Counters) -> c_int,
        unsafe extern "C" fn(c_int, u64, c_int) -> c_int,
        unsafe extern "C" fn(u64, u32) -> c_int,
        unsafe extern "C" fn(u64, c_int) -> c_int,
        unsafe extern "C" fn(bool),
        unsafe extern "C" fn(c_int, u64, u32) -> u64,
        unsafe extern "C" fn(u32),
    ) = (
        a.reset,
        a.get_counters,
        a.fail_post,
        a.fail_completion,
        a.cr_action,
        a.hold_crs,
        a.release_crs,
        a.set_cr_delay,
    );
    let _: (
        unsafe extern "C" fn(bool),
        unsafe extern "C" fn(u32),
        unsafe extern "C" fn(u32),
        unsafe extern "C" fn(*const c_char) -> c_int,
        unsafe extern "C" fn(*const c_char) -> c_int,
        unsafe extern "C" fn(bool),
        unsafe extern "C" fn(*mut usize) -> *mut c_char,
        unsafe extern "C" fn(*mut c_void),
    ) = (
        a.set_nocopy,
        a.set_delete_timeout,
        a.set_rnr_timeout,
        a.apply_knobs,
        a.trace_open,
        a.trace_capture,
        a.trace_take,
        a.free,
    );
}

fn probe_source() -> String {
    let mut c =
        String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"urma_loopback.h\"\n\n");
    for (name, proto) in SYMBOLS.iter().zip(PROTOTYPES) {
        writeln!(
            c,
            "_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {proto}), \
             \"prototype of {name}\");"
        )
        .unwrap();
    }
    c.push_str("\nint main(void)\n{\n");
    c.push_str("    printf(\"size %zu\\n\", sizeof(urma_loopback_counters_t));\n");
    for (field, _) in Counters::FIELDS {
        writeln!(
            c,
            "    printf(\"field {field} %zu\\n\", offsetof(urma_loopback_counters_t, {field}));"
        )
        .unwrap();
    }
    for (name, _) in CONSTANTS {
        writeln!(c, "    printf(\"const {name} %d\\n\", (int)({name}));").unwrap();
    }
    c.push_str("    return 0;\n}\n");
    c
}

fn expected() -> String {
    let mut e = format!("size {}\n", std::mem::size_of::<Counters>());
    for (field, off) in Counters::FIELDS {
        writeln!(e, "field {field} {off}").unwrap();
    }
    for (name, v) in CONSTANTS {
        writeln!(e, "const {name} {v}").unwrap();
    }
    e
}

#[test]
fn urma_loopback_h_matches_the_control_plane_crate() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loopback-header-probe");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, probe_source()).unwrap();
    let out = Command::new(testkit::cc())
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg(format!("-I{}", manifest.join("include").display()))
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "the header probe does not compile (a field, constant or prototype drifted):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = target::command(&exe).output().expect("run the probe");
    assert!(run.status.success(), "probe failed");
    assert_eq!(String::from_utf8_lossy(&run.stdout), expected());
}

#[test]
fn the_probe_notices_a_missing_field() {
    // Negative control: a Rust field that the header does not have must not compile in C.
    let src = probe_source().replace(
        "offsetof(urma_loopback_counters_t, send_wrs)",
        "offsetof(urma_loopback_counters_t, send_wrs_not_in_the_header)",
    );
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loopback-header-probe-neg");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("probe.c"), src).unwrap();
    let st = Command::new(testkit::cc())
        .args(["-std=gnu11", "-fsyntax-only"])
        .arg(dir.join("probe.c"))
        .arg(format!("-I{}", manifest.join("include").display()))
        .output()
        .expect("run the C compiler");
    assert!(
        !st.status.success(),
        "a field missing from the header compiled"
    );
}
