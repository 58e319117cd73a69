//! Link policy: with no real liburma on the machine, `-lurma` resolves to the
//! link-only stub `$OUT_DIR/link/liburma.so` (SONAME liburma.so.0). Binaries
//! get `NEEDED liburma.so.0`, the loader never picks the stub, and a stub
//! function that does get run aborts with a clear message.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../testkit/src/paths.rs"]
mod paths;
#[path = "../../testkit/src/target.rs"]
mod target;

use target::run;

const STUB_MESSAGE: &str =
    "liburma link stub called: this library is for linking only; put a real \
liburma.so.0 (UMDK or the mlcachedirect loopback) on the loader path";

fn link_dir() -> PathBuf {
    PathBuf::from(env!("URMA_SYS_LINK_DIR"))
}

fn using_stub() -> bool {
    if env!("URMA_SYS_LINK_STUB") != "1" {
        println!(
            "linking against a real liburma in {}: link stub not in use",
            link_dir().display()
        );
        return false;
    }
    true
}

fn functions() -> Vec<String> {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("stub/liburma_link_stub.c"),
    )
    .expect("read stub source");
    src.lines()
        .filter_map(|l| {
            l.strip_prefix("URMA_LINK_STUB(")?
                .strip_suffix(')')
                .map(str::to_string)
        })
        .collect()
}

fn work_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("urma-sys-link-test");
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

#[test]
fn stub_source_defines_the_functions_of_the_headers() {
    let header = |name: &str| {
        std::fs::read_to_string(
            Path::new(urma_sys::bundled_include_dir())
                .join("ub/umdk/urma")
                .join(name),
        )
        .unwrap_or_else(|e| panic!("read {name}: {e}"))
    };
    let (api, provider) = (header("urma_api.h"), header("urma_provider.h"));
    let names = functions();
    let in_api = names.iter().filter(|n| api.contains(&format!("{n}(")));
    let in_provider = names
        .iter()
        .filter(|n| provider.contains(&format!("int {n}(")));
    assert_eq!(
        (in_api.count(), in_provider.count(), names.len()),
        (49, 3, 52),
        "the stub defines the 49 functions of urma_api.h and the 3 registration functions of \
         urma_provider.h: {names:?}"
    );
}

#[test]
fn stub_is_an_import_library_only() {
    if !using_stub() {
        return;
    }
    let dir = link_dir();
    let lib = dir.join("liburma.so");
    assert!(lib.is_file(), "{} missing", lib.display());
    assert!(
        !dir.join("liburma.so.0").exists(),
        "a liburma.so.0 next to the stub would let the loader pick it"
    );
    let dynamic = run(Command::new("readelf").arg("-d").arg(&lib));
    assert!(
        dynamic.contains("Library soname: [liburma.so.0]"),
        "{dynamic}"
    );
    let syms = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&lib));
    for n in functions() {
        assert!(
            syms.lines().any(|l| l.ends_with(&format!(" T {n}"))),
            "{n} not exported by the stub"
        );
    }
}

#[test]
fn consumer_needs_liburma_so_0_and_the_stub_aborts_if_loaded() {
    if !using_stub() {
        return;
    }
    let work = work_dir();
    let src = work.join("consumer.c");
    std::fs::write(
        &src,
        "#include <ub/umdk/urma/urma_api.h>\nint main(void) { return urma_init(NULL) == URMA_SUCCESS ? 0 : 1; }\n",
    )
    .expect("write");
    let exe = work.join(format!("consumer-{}", std::process::id()));
    run(Command::new(paths::cc())
        .arg(format!("-I{}", urma_sys::include_dir()))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", link_dir().display()))
        .arg("-lurma"));
    let dynamic = run(Command::new("readelf").arg("-d").arg(&exe));
    assert!(
        dynamic.contains("Shared library: [liburma.so.0]"),
        "{dynamic}"
    );

    // The stub directory on the loader path does not satisfy liburma.so.0.
    let out = target::command(&exe)
        .env("LD_LIBRARY_PATH", link_dir())
        .output()
        .expect("run consumer");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("liburma.so.0"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Forced onto the loader path under the SONAME, the stub aborts loudly.
    let forced = work.join(format!("forced-{}", std::process::id()));
    std::fs::create_dir_all(&forced).expect("mkdir");
    let link = forced.join("liburma.so.0");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(link_dir().join("liburma.so"), &link).expect("symlink");
    let out = target::command(&exe)
        .env("LD_LIBRARY_PATH", &forced)
        .output()
        .expect("run consumer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(
        stderr.contains(&format!("urma_init: {STUB_MESSAGE}")),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&forced);
    let _ = std::fs::remove_file(&exe);
}
