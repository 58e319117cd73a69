//! The provider in every URMA process of a host (docs/loopback.md, "Security model", the plugin
//! part): the installed plugin is inert until a process asks for it, leaves nothing of its own
//! behind a process that ends without `urma_uninit`, and a privileged process (setuid root, so
//! `AT_SECURE`) ignores every `URMA_LOOPBACK*` variable, in both faces.
//!
//! Each case runs a *role* process, the program `test-bins/plugin_safety_role.rs`, that loads a
//! URMA library by path (`dlopen`, global: a setuid process ignores `LD_LIBRARY_PATH`), calls
//! `urma_init`, lists the devices and reports what it sees, then ends with or without
//! `urma_uninit` (`_exit`, as a crash would). The role is a program of its own because it must
//! link no URMA library: this test binary does (through testkit), and a setuid copy of it could
//! not find `liburma.so.0` (GNU ld keeps it needed; rust-lld drops it). Everything the roles run (the role, the
//! standalone `liburma.so.0`, the genuine core with the plugin in its `urma/`) is copied into a
//! directory of root that every user can reach, on a file system that honours setuid.
//!
//! * The genuine-core cases need a genuine core (the system's, or `UMDK_SRC`) and the plugin
//!   (`URMA_LOOPBACK_PLUGIN`, set by `cargo xtask test-umdk`); without them they say so and pass.
//! * The setuid cases need root (to make a setuid-root copy, run by the unprivileged `nobody`);
//!   without root they say so and pass, unless `URMA_SECURITY_REQUIRED` is set (as `make test`
//!   sets it as root).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ost_build_support::umdk;
use testkit::loopback_ctl::plugin;
use testkit::{paths, target};

#[path = "../test-bins/plugin_safety_env.rs"]
mod role_env;
use role_env::{COMMON, DEVICE, LIB, UNINIT};

/// What a role reported.
#[derive(Debug)]
struct Seen {
    devices: Vec<String>,
    eids: u32,
    threads: usize,
    euid: u32,
    secure: bool,
    /// The library has the control API (reads `URMA_LOOPBACK_TRACE`).
    ctl: bool,
}

fn parse(out: &str) -> Seen {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("PS "))
        .unwrap_or_else(|| panic!("no report from the role:\n{out}"));
    let field = |k: &str| {
        line.split(' ')
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    Seen {
        devices: field("devices")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        eids: field("eids").parse().expect("eids"),
        threads: field("threads").parse().expect("threads"),
        euid: field("euid").parse().expect("euid"),
        secure: field("secure") != "0",
        ctl: field("ctl") != "0",
    }
}

// ------------------------------------------------------------------------------ the stage

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn required() -> bool {
    std::env::var_os("URMA_SECURITY_REQUIRED").is_some()
}

/// Whether every directory from `/` to `dir` lets others through and its file system honours
/// setuid.
fn usable_for_setuid(dir: &Path) -> bool {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: an all-zero statvfs is a valid value for statvfs to overwrite.
    let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live structure.
    if unsafe { libc::statvfs(c.as_ptr(), &mut v) } != 0 || v.f_flag & libc::ST_NOSUID != 0 {
        return false;
    }
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// A fresh directory of this run (mode 0755), where every user can reach it and setuid works:
/// under the build tree, else `/var/tmp` or `/tmp`. `None` when there is no such place.
fn stage_dir() -> Option<PathBuf> {
    let name = format!("plugin-safety-{}", std::process::id());
    let target = paths::target_dir();
    let dir = [target.as_path(), Path::new("/var/tmp"), Path::new("/tmp")]
        .into_iter()
        .find(|d| usable_for_setuid(d))?
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("stage dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    Some(dir)
}

/// Copies the real file behind `from` into `dir` under its own name (the plugin reads the
/// core's version from it) and links `name` to it when the names differ; returns `dir/name`.
fn copy_real(from: &Path, dir: &Path, name: &str) -> PathBuf {
    let real = std::fs::canonicalize(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    let file = real.file_name().expect("a file name");
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::copy(&real, dir.join(file)).unwrap_or_else(|e| panic!("copy {}: {e}", real.display()));
    let at = dir.join(name);
    if file != name {
        std::os::unix::fs::symlink(file, &at).expect("link");
    }
    at
}

/// The libraries and the binary the roles run, in the stage directory.
struct Stage {
    dir: PathBuf,
    /// The role program (setuid root once [`Stage::setuid`] ran).
    exe: PathBuf,
    /// The standalone loopback `liburma.so.0`.
    standalone: PathBuf,
    /// The genuine core (its `urma/` holding the plugin) and its `liburma_common.so.0`.
    genuine: Option<(PathBuf, PathBuf)>,
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Stage {
    fn new(dir: PathBuf, genuine: Option<(umdk::Umdk, PathBuf)>) -> Stage {
        let exe = copy_real(
            Path::new(env!("CARGO_BIN_EXE_plugin_safety_role")),
            &dir.join("bin"),
            "plugin_safety_role",
        );
        let standalone = copy_real(
            &target::loopback_lib(),
            &dir.join("standalone"),
            "liburma.so.0",
        );
        let genuine = genuine.map(|(u, plugin_file)| {
            let lib = dir.join("umdk");
            let core = copy_real(&u.core(), &lib, "liburma.so.0");
            let common = copy_real(&u.common(), &dir.join("umdk-common"), "liburma_common.so.0");
            let plugins = lib.join("urma");
            std::fs::create_dir_all(&plugins).expect("plugin dir");
            std::fs::copy(&plugin_file, plugins.join(plugin::FILE_NAME)).expect("copy the plugin");
            (core, common)
        });
        let all = Stage {
            dir,
            exe,
            standalone,
            genuine,
        };
        let _ = Command::new("chmod")
            .arg("-R")
            .arg("a+rX")
            .arg(&all.dir)
            .status();
        all
    }

    /// Makes the binary's copy setuid root.
    fn setuid(&self) {
        std::fs::set_permissions(&self.exe, std::fs::Permissions::from_mode(0o4755))
            .expect("chmod");
    }

    /// A fresh directory of this stage (mode 0777 unless `private`: 0755 of root).
    fn fresh(&self, name: &str, open: bool) -> PathBuf {
        let d = self.dir.join("run").join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        let mode = if open { 0o777 } else { 0o755 };
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).expect("chmod");
        d
    }

    /// A role over `lib` (with the core's `common`), with `env`, as `uid` if given.
    fn role(
        &self,
        lib: &Path,
        common: Option<&Path>,
        env: &[(&str, &Path)],
        uid: Option<u32>,
    ) -> Seen {
        let mut c = target::command(&self.exe);
        c.env(LIB, lib)
            .env_remove("LD_PRELOAD")
            .env_remove(plugin::ENABLE_VAR)
            .env_remove("URMA_LOOPBACK_TRACE")
            .env_remove("URMA_LOOPBACK_KNOBS")
            .env_remove("URMA_LOOPBACK_DIR")
            .env_remove(UNINIT);
        if let Some(p) = common {
            c.env(COMMON, p);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        if let Some(u) = uid {
            c.uid(u).gid(u);
        }
        parse(&target::run(&mut c))
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

// ------------------------------------------------------------------------------ the cases

/// With the plugin installed and not enabled: no loopback0, no thread, nothing in `TMPDIR`, no
/// registry directory, with or without `urma_uninit`. Enabled: loopback0 with its EID (read by
/// the core from the plugin's sysfs files, no helper), and after several processes that ended
/// without `urma_uninit` nothing of theirs is left: `TMPDIR` empty, the registry directory
/// holding only the user's one device directory.
fn inert_until_asked(s: &Stage, core: &Path, common: &Path) {
    let tmp = s.fresh("tmp", true);
    let reg = s.dir.join("run").join("registry");
    let _ = std::fs::remove_dir_all(&reg);
    for uninit in [false, true] {
        let mut env = vec![
            ("TMPDIR", tmp.as_path()),
            ("URMA_LOOPBACK_DIR", reg.as_path()),
        ];
        if uninit {
            env.push((UNINIT, Path::new("1")));
        }
        let seen = s.role(core, Some(common), &env, None);
        assert!(
            !seen.devices.iter().any(|d| d == DEVICE),
            "not enabled, yet the device list is {:?}",
            seen.devices
        );
        assert_eq!(seen.threads, 1, "not enabled: threads after urma_init");
        assert_eq!(entries(&tmp), Vec::<String>::new(), "not enabled: TMPDIR");
        assert!(!reg.exists(), "not enabled: {} was made", reg.display());
    }
    println!("not enabled: no {DEVICE}, one thread, nothing in TMPDIR, no registry directory");

    let on = Path::new("1");
    for _ in 0..3 {
        let env = [
            ("TMPDIR", tmp.as_path()),
            ("URMA_LOOPBACK_DIR", reg.as_path()),
            (plugin::ENABLE_VAR, on),
        ];
        let seen = s.role(core, Some(common), &env, None);
        assert!(
            seen.devices.iter().any(|d| d == DEVICE),
            "enabled, yet the device list is {:?}",
            seen.devices
        );
        assert_eq!(
            seen.eids, 1,
            "the EID of {DEVICE} through the core's sysfs reading"
        );
    }
    assert_eq!(
        entries(&tmp),
        Vec::<String>::new(),
        "enabled, ended without urma_uninit: TMPDIR"
    );
    assert_eq!(
        entries(&reg),
        vec![DEVICE.to_string()],
        "enabled, 3 processes ended without urma_uninit: the registry directory"
    );
    println!(
        "enabled: {DEVICE} with 1 EID; 3 processes ended without urma_uninit left nothing in \
         TMPDIR and one shared {DEVICE}/ in the registry directory"
    );
}

/// A setuid-root copy run by `nobody`, over `lib`: `URMA_LOOPBACK_TRACE` naming a new file in a
/// directory only root may write creates nothing, naming an existing root-only file leaves it
/// as it was; `URMA_LOOPBACK_KNOBS` and `URMA_LOOPBACK_DIR` are ignored alike (one reading
/// function). `enable` also sets `URMA_LOOPBACK=1`, which a privileged process ignores too.
/// The same run as root without setuid writes the trace (the variables work: the check can
/// fail).
fn privileged_ignores_the_variables(s: &Stage, face: &str, lib: &Path, common: Option<&Path>) {
    let nobody = 65534;
    let dir = s.fresh(&format!("secure-{face}"), false);
    let reg = dir.join("registry");
    let new = dir.join("created-by-trace");
    let precious = dir.join("root-only");
    std::fs::write(&precious, "root's secret\n").expect("write");
    std::fs::set_permissions(&precious, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let on = Path::new("1");
    let knobs = Path::new("fail_post=1:4096,drop_cr=1");
    for trace in [&new, &precious] {
        let env = [
            ("URMA_LOOPBACK_TRACE", trace.as_path()),
            ("URMA_LOOPBACK_KNOBS", knobs),
            ("URMA_LOOPBACK_DIR", reg.as_path()),
            (plugin::ENABLE_VAR, on),
        ];
        let seen = s.role(lib, common, &env, Some(nobody));
        assert!(
            seen.euid == 0 && seen.secure,
            "{face}: the setuid copy did not run privileged ({seen:?})"
        );
        if common.is_some() {
            assert!(
                !seen.devices.iter().any(|d| d == DEVICE),
                "{face}: a privileged process enabled the plugin through the environment"
            );
        }
        assert!(
            !new.exists(),
            "{face}: a privileged process created {}",
            new.display()
        );
        let m = std::fs::metadata(&precious).expect("still there");
        assert_eq!(
            (
                std::fs::read_to_string(&precious)
                    .unwrap_or_default()
                    .as_str(),
                m.mode() & 0o777
            ),
            ("root's secret\n", 0o600),
            "{face}: a privileged process changed {}",
            precious.display()
        );
        assert!(
            !reg.exists(),
            "{face}: a privileged process made {}",
            reg.display()
        );
    }
    // The control: the same variables in an unprivileged run (root, no setuid bit involved).
    let env = [
        ("URMA_LOOPBACK_TRACE", new.as_path()),
        ("URMA_LOOPBACK_DIR", reg.as_path()),
        (plugin::ENABLE_VAR, on),
    ];
    let plain = copy_real(&s.exe, &dir.join("plain"), "plugin_safety_role");
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut c = target::command(&plain);
    c.env(LIB, lib).env_remove("LD_PRELOAD");
    if let Some(p) = common {
        c.env(COMMON, p);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let seen = parse(&target::run(&mut c));
    assert!(!seen.secure, "the control ran privileged");
    if seen.ctl {
        let m = std::fs::metadata(&new).expect("the unprivileged run opens the trace file");
        assert_eq!(m.mode() & 0o777, 0o600, "the trace file's mode");
        println!("{face}: unprivileged, the same variables give the trace file (mode 0600)");
    } else {
        assert!(
            !new.exists(),
            "{face}: built without the control API, yet a trace file"
        );
        println!("{face}: built without the control API (no trace file at all)");
    }
    println!(
        "{face}: a setuid-root copy run by nobody ignores URMA_LOOPBACK_TRACE/KNOBS/DIR{}: \
         nothing created, the root-only file untouched",
        if common.is_some() {
            " and URMA_LOOPBACK=1"
        } else {
            ""
        }
    );
}

fn main() {
    if target::emulated() {
        println!("plugin_safety: under emulation: skipped");
        return;
    }
    let genuine = match target::plugin_under_test() {
        None => {
            println!(
                "plugin_safety: URMA_LOOPBACK_PLUGIN not set: the genuine-core cases are skipped \
                 (cargo xtask test-umdk builds the plugin and runs them)"
            );
            None
        }
        Some(p) => match umdk::get(&paths::target_dir().join("umdk")) {
            Ok(u) => Some((u, p)),
            Err(why) => {
                println!("plugin_safety: {why}: the genuine-core cases are skipped");
                None
            }
        },
    };
    let Some(dir) = stage_dir() else {
        assert!(
            !required(),
            "plugin_safety: no directory that all users reach on a file system honouring setuid"
        );
        println!("plugin_safety: no directory that all users reach with setuid: skipped");
        return;
    };
    let has_genuine = genuine.is_some();
    let stage = Stage::new(dir, genuine);
    if let Some((core, common)) = &stage.genuine {
        inert_until_asked(&stage, core, common);
    }
    if !is_root() {
        assert!(
            !required(),
            "plugin_safety must run as root (URMA_SECURITY_REQUIRED is set)"
        );
        println!("plugin_safety: not root: the setuid cases are skipped");
        return;
    }
    stage.setuid();
    privileged_ignores_the_variables(&stage, "standalone", &stage.standalone, None);
    if let Some((core, common)) = &stage.genuine {
        privileged_ignores_the_variables(&stage, "plugin", core, Some(common));
    }
    println!(
        "plugin_safety: ok ({})",
        if has_genuine {
            "both faces"
        } else {
            "the standalone face"
        }
    );
}
