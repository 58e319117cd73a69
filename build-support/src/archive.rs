//! `libos_transport.a`: the library as a static archive that a C or C++ build links the way it
//! linked the C upstream's static target, with nothing of Rust visible to the linker.
//!
//! rustc's `staticlib` is the crate with its whole Rust runtime (std, core, alloc, gimli, ...):
//! some 1,800 global symbols, among them `rust_eh_personality`, which a second Rust archive of
//! another Rust version also defines (the link fails), and LLVM bitcode sections that the
//! linker plugin of an older LLVM cannot read (`ranlib` then drops most of the index). [`build`]
//! makes it into one relocatable object whose only global symbols are the public names of its
//! [`Flavour`]: the ten API functions ([`API`]), and in the inject flavour also the ten
//! `os_transport_inject_*` functions ([`INJECT_API`]):
//!
//! 1. `cargo rustc -p os-transport --lib --crate-type staticlib` (not in the crate's
//!    `crate-type`, so ordinary builds do not pay for it; `--features inject` for the inject
//!    flavour), with `--print native-static-libs`: the system libraries the archive needs,
//!    written to [`NATIVE_LIBS_FILE`];
//! 2. `ld -r --force-group-allocation -u <each public name>`: the members the names reach, as
//!    one object without section groups (a kept `DW.ref.rust_eh_personality` group would win the
//!    linker's de-duplication against another Rust archive's and leave it unresolved);
//! 3. `objcopy --remove-section=.llvmbc --remove-section=.llvmcmd --keep-global-symbols=<names>`:
//!    no bitcode, every other symbol local;
//! 4. `ar rcsD`: the archive of that one object.
//!
//! The binutils are the target's: `<arch>-linux-gnu-ld` (and `-objcopy`, `-ar`) when the target
//! is named and that tool is on `PATH` (the aarch64 cross binutils), else `ld`, `objcopy`, `ar`.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::checked;

/// The ten functions of `os_transport.h`: the archive's only global symbols.
pub const API: [&str; 10] = [
    "os_transport_cancel_tasks",
    "os_transport_destroy",
    "os_transport_init",
    "os_transport_log_reg",
    "os_transport_recv",
    "os_transport_reg_jfc",
    "os_transport_send",
    "os_transport_wake_up_task",
    "wait_and_free_sync",
    "wait_and_free_sync_timeout",
];

/// The ten functions of `os_transport_inject.h` that the inject flavour adds (docs/inject.md).
pub const INJECT_API: [&str; 10] = [
    "os_transport_inject_clear",
    "os_transport_inject_clear_all",
    "os_transport_inject_cleanup",
    "os_transport_inject_execute",
    "os_transport_inject_get_count",
    "os_transport_inject_init",
    "os_transport_inject_set_frequency",
    "os_transport_inject_set_print",
    "os_transport_inject_set_return_error",
    "os_transport_inject_set_sleep",
];

/// Which library the archive holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// The default library (`mlcachedirect-static`): [`API`] global.
    Default,
    /// The inject flavour, cargo feature `inject` (`mlcachedirect-inject`): [`API`] and
    /// [`INJECT_API`] global.
    Inject,
}

impl Flavour {
    /// The cargo features of the library in this flavour.
    pub fn features(self) -> Option<&'static str> {
        match self {
            Flavour::Default => None,
            Flavour::Inject => Some("inject"),
        }
    }

    /// The archive's global symbols: the public names of this flavour.
    pub fn globals(self) -> BTreeSet<&'static str> {
        let extra: &[&str] = match self {
            Flavour::Default => &[],
            Flavour::Inject => &INJECT_API,
        };
        API.iter().chain(extra).copied().collect()
    }
}

/// The archive's file name.
pub const ARCHIVE: &str = "libos_transport.a";
/// Beside the archive: rustc's `native-static-libs` line (`-lurma -lgcc_s ...`), what a link of
/// the archive needs besides it.
pub const NATIVE_LIBS_FILE: &str = "native-static-libs";

/// A built archive.
#[derive(Clone, Debug)]
pub struct Archive {
    /// `<dest>/libos_transport.a`.
    pub path: PathBuf,
    /// The system libraries a link of it needs, as rustc prints them (`-lurma`, `-lgcc_s`, ...).
    pub native_libs: Vec<String>,
}

/// Builds `<dest>/libos_transport.a` of `flavour` and `<dest>/native-static-libs`: `cargo` (the
/// command, with whatever comes before the subcommand, such as a toolchain) runs `rustc` with
/// `cargo_args` (`--release`, `--offline`, `--target-dir ...`), the flavour's features and
/// `--target <target>` when given; then the steps of the module documentation with the target's
/// binutils. Panics with the tool's output when a step fails or the result has other global
/// symbols than [`Flavour::globals`].
pub fn build(
    mut cargo: Command,
    cargo_args: &[impl AsRef<OsStr>],
    target: Option<&str>,
    flavour: Flavour,
    dest: &Path,
) -> Archive {
    cargo.args([
        "rustc",
        "-p",
        "os-transport",
        "--lib",
        "--crate-type",
        "staticlib",
    ]);
    cargo.args(["--message-format", "json-render-diagnostics"]);
    cargo.args(cargo_args);
    if let Some(f) = flavour.features() {
        cargo.args(["--features", f]);
    }
    if let Some(t) = target {
        cargo.args(["--target", t]);
    }
    cargo.args(["--", "--print", "native-static-libs"]);
    let out = checked(&mut cargo);
    let raw = raw_archive(&String::from_utf8_lossy(&out.stdout)).unwrap_or_else(|| {
        panic!(
            "cargo built no {ARCHIVE} ({cargo:?}); its messages:\n{}",
            text(&out)
        )
    });
    let native_libs = native_libs(&String::from_utf8_lossy(&out.stderr)).unwrap_or_else(|| {
        panic!(
            "rustc printed no native-static-libs ({cargo:?}):\n{}",
            text(&out)
        )
    });
    std::fs::create_dir_all(dest).unwrap_or_else(|e| panic!("create {}: {e}", dest.display()));
    let path = localise(&raw, target, flavour, dest);
    std::fs::write(dest.join(NATIVE_LIBS_FILE), native_libs.join(" ") + "\n")
        .unwrap_or_else(|e| panic!("write {}: {e}", dest.join(NATIVE_LIBS_FILE).display()));
    Archive { path, native_libs }
}

/// Steps 2 to 4 on the raw staticlib `raw` of `flavour`: `<dest>/libos_transport.a`, checked
/// with [`defined_globals`].
pub fn localise(raw: &Path, target: Option<&str>, flavour: Flavour, dest: &Path) -> PathBuf {
    let names = flavour.globals();
    let keep = dest.join("api-symbols.txt");
    let list: String = names.iter().map(|n| format!("{n}\n")).collect();
    std::fs::write(&keep, list).unwrap_or_else(|e| panic!("write {}: {e}", keep.display()));
    let joined = dest.join("os_transport-joined.o");
    let object = dest.join("os_transport.o");
    let archive = dest.join(ARCHIVE);
    let mut ld = Command::new(tool(target, "ld"));
    ld.args(["-r", "--force-group-allocation"]);
    for name in &names {
        ld.args(["-u", name]);
    }
    checked(ld.arg("-o").arg(&joined).arg(raw));
    checked(
        Command::new(tool(target, "objcopy"))
            .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
            .arg(format!("--keep-global-symbols={}", keep.display()))
            .arg(&joined)
            .arg(&object),
    );
    let _ = std::fs::remove_file(&archive);
    checked(
        Command::new(tool(target, "ar"))
            .arg("rcsD")
            .arg(&archive)
            .arg(&object),
    );
    for f in [&keep, &joined, &object] {
        let _ = std::fs::remove_file(f);
    }
    let globals = defined_globals(&archive);
    let want: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        globals,
        want,
        "{}: the global symbols are not the public names of the {flavour:?} flavour",
        archive.display()
    );
    archive
}

/// The global and weak symbols an ELF object or archive defines, read with `readelf -sW` (which,
/// unlike `nm`, loads no linker plugin).
pub fn defined_globals(file: &Path) -> BTreeSet<String> {
    let out = checked(Command::new("readelf").arg("-sW").arg(file));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            // Num: Value Size Type Bind Vis Ndx Name
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && matches!(f[4], "GLOBAL" | "WEAK") && f[6] != "UND")
                .then(|| f[7].to_string())
        })
        .collect()
}

/// `<arch>-linux-gnu-<name>` of `target`'s architecture when it is on `PATH`, else `name`.
fn tool(target: Option<&str>, name: &str) -> String {
    let prefixed = target
        .and_then(|t| t.split('-').next())
        .map(|arch| format!("{arch}-linux-gnu-{name}"));
    let on_path = |p: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    prefixed
        .filter(|p| on_path(p))
        .unwrap_or_else(|| name.to_string())
}

/// The `libos_transport.a` among cargo's JSON artifact messages.
fn raw_archive(json: &str) -> Option<PathBuf> {
    let suffix = format!("/{ARCHIVE}\"");
    json.lines()
        .filter(|l| l.contains("\"compiler-artifact\""))
        .find_map(|l| {
            let end = l.find(&suffix)? + suffix.len() - 1;
            let start = l[..end].rfind('"')? + 1;
            Some(PathBuf::from(&l[start..end]))
        })
}

/// The libraries of rustc's `note: native-static-libs: -lurma -lgcc_s ...`.
fn native_libs(stderr: &str) -> Option<Vec<String>> {
    let line = stderr
        .lines()
        .find_map(|l| l.split_once("native-static-libs:"))?
        .1;
    Some(line.split_whitespace().map(str::to_string).collect())
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_and_the_libraries_are_read_from_cargos_messages() {
        let json = "{\"reason\":\"compiler-artifact\",\"target\":{\"name\":\"os_transport\"},\
                    \"filenames\":[\"/t/release/libos_transport.a\"],\"fresh\":true}\n\
                    {\"reason\":\"build-finished\",\"success\":true}\n";
        assert_eq!(
            raw_archive(json),
            Some(PathBuf::from("/t/release/libos_transport.a"))
        );
        assert_eq!(raw_archive("{\"reason\":\"build-finished\"}"), None);
        let stderr = "note: link against the following native artifacts\n\n\
                      note: native-static-libs: -lurma -lgcc_s -lc\n";
        assert_eq!(
            native_libs(stderr),
            Some(vec!["-lurma".into(), "-lgcc_s".into(), "-lc".into()])
        );
    }

    #[test]
    fn the_inject_flavour_keeps_the_api_and_its_ten_functions_global() {
        assert_eq!(Flavour::Default.globals(), API.into_iter().collect());
        let inject = Flavour::Inject.globals();
        assert_eq!(inject.len(), 20);
        assert!(API.iter().all(|n| inject.contains(n)));
        assert!(INJECT_API
            .iter()
            .all(|n| n.starts_with("os_transport_inject_") && inject.contains(n)));
        assert_eq!(Flavour::Default.features(), None);
        assert_eq!(Flavour::Inject.features(), Some("inject"));
    }
}
