//! The genuine UMDK URMA core (`liburma.so.0`, its `liburma_common.so.0`) and UMDK's programs
//! `urma_sample` and `urma_perftest`: the one way the tests and the xtask get them.
//!
//! [`get`] takes, in this order:
//!
//! 1. **the system UMDK** when `liburma.so.0` is installed (openEuler's `umdk-urma-lib`:
//!    `/usr/lib64`, or a multiarch library directory); the programs are taken from `PATH` if
//!    they are there. Nothing is written below `/usr`: the core is used through a link in a
//!    directory of its own below `out` ([`Umdk::with_plugin_dir_in`]), whose `urma/` is the
//!    plugin directory (the core looks for its plugins beside the path the loader opened, links
//!    not resolved);
//! 2. else **a build from `$UMDK_SRC`** (a UMDK source tree, the directory holding `src/urma`)
//!    with cmake and make into `<out>/build` ([`BUILD_TARGETS`]), done again only when the tree's
//!    content or the recipe changed (a fingerprint is kept beside the build); the plugin
//!    directory is `urma/` beside the built core;
//! 3. else neither: an `Err` saying so, for the caller to skip (or fail, in CI).
//!
//! Concurrent callers (a test and the xtask) build one at a time: the build holds a lock on
//! `<out>/build.lock`. A failing build panics with the tool's output.

use crate::checked;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The core's file name, as programs load it.
pub const CORE: &str = "liburma.so.0";
/// The library the core and `urma_perftest` need.
pub const COMMON: &str = "liburma_common.so.0";
/// The plugin directory's name, beside the core.
pub const PLUGIN_DIR: &str = "urma";
/// The system library directories holding an installed core (the multiarch one is
/// `/usr/lib/<arch>-linux-gnu`).
pub const SYSTEM_LIB_DIR: &str = "/usr/lib64";
/// The make targets of a build from source.
pub const BUILD_TARGETS: &[&str] = &["urma", "urma_sample", "urma_perftest"];
/// The cmake options of a build from source: the URMA part only, without the hardware provider.
pub const CMAKE_OPTIONS: &[&str] = &[
    "-DBUILD_ALL=disable",
    "-DBUILD_URMA=enable",
    "-DBUILD_UDMA=disable",
];

/// Where the core came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Installed in this library directory.
    System(PathBuf),
    /// Built from this UMDK source tree.
    Source(PathBuf),
}

/// A genuine core ready to run programs over.
#[derive(Clone, Debug)]
pub struct Umdk {
    pub origin: Origin,
    /// The directory of the `liburma.so.0` programs load (first on `LD_LIBRARY_PATH`).
    pub core_dir: PathBuf,
    /// The directory of `liburma_common.so.0`.
    pub common_dir: PathBuf,
    /// The core's plugin directory, `<core_dir>/urma` (exists).
    pub plugin_dir: PathBuf,
    /// `urma_sample`, if there is one.
    pub sample: Option<PathBuf>,
    /// `urma_perftest`, if there is one.
    pub perftest: Option<PathBuf>,
}

impl Umdk {
    /// `<core_dir>/liburma.so.0`.
    pub fn core(&self) -> PathBuf {
        self.core_dir.join(CORE)
    }

    /// `<common_dir>/liburma_common.so.0`.
    pub fn common(&self) -> PathBuf {
        self.common_dir.join(COMMON)
    }

    /// The directories programs need on `LD_LIBRARY_PATH`, the core's first.
    pub fn library_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.core_dir.clone()];
        if self.common_dir != self.core_dir {
            dirs.push(self.common_dir.clone());
        }
        dirs
    }

    /// The same core seen from `dir`: `dir/liburma.so.0` a link to this core, `dir/urma/` its
    /// (empty, or as left) plugin directory. Programs loading the core from `dir` load the
    /// plugins of `dir/urma` only, so callers with plugins of their own do not share them.
    pub fn with_plugin_dir_in(&self, dir: &Path) -> Result<Umdk, String> {
        let target = std::fs::canonicalize(self.core())
            .map_err(|e| format!("{}: {e}", self.core().display()))?;
        let plugin_dir = dir.join(PLUGIN_DIR);
        std::fs::create_dir_all(&plugin_dir)
            .map_err(|e| format!("create {}: {e}", plugin_dir.display()))?;
        let link = dir.join(CORE);
        if std::fs::read_link(&link).ok().as_deref() != Some(target.as_path()) {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link)
                .map_err(|e| format!("link {} to {}: {e}", link.display(), target.display()))?;
        }
        Ok(Umdk {
            core_dir: dir.to_path_buf(),
            plugin_dir,
            ..self.clone()
        })
    }
}

/// The genuine core, with `out` (e.g. `<target>/umdk`) for what is built or linked here; `Err`
/// with the reason when there is none to take (no system UMDK, no `$UMDK_SRC`, or no cmake or
/// make to build it). Panics when a build fails.
pub fn get(out: &Path) -> Result<Umdk, String> {
    if let Some(dir) = system_lib_dir() {
        let sys = Umdk {
            origin: Origin::System(dir.clone()),
            core_dir: dir.clone(),
            common_dir: dir.clone(),
            plugin_dir: dir.join(PLUGIN_DIR),
            sample: in_path("urma_sample"),
            perftest: in_path("urma_perftest"),
        };
        return sys.with_plugin_dir_in(&out.join("sys"));
    }
    let Some(src) = std::env::var_os("UMDK_SRC").filter(|v| !v.is_empty()) else {
        return Err(format!(
            "no UMDK URMA core: none installed ({SYSTEM_LIB_DIR}/{CORE}) and UMDK_SRC (a UMDK \
             source tree) not set"
        ));
    };
    let src = PathBuf::from(src);
    if !src.join("src/urma/CMakeLists.txt").is_file() {
        return Err(format!(
            "UMDK_SRC={}: no src/urma/CMakeLists.txt (UMDK_SRC names the directory holding src/urma)",
            src.display()
        ));
    }
    for tool in ["cmake", "make"] {
        let works = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !works {
            return Err(format!(
                "no {tool}: cannot build the UMDK URMA core from UMDK_SRC={} (packaging/deps.sh \
                 installs it)",
                src.display()
            ));
        }
    }
    Ok(build(&src, out))
}

/// The library directory of an installed core, if any.
fn system_lib_dir() -> Option<PathBuf> {
    let multiarch = format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH);
    [PathBuf::from(SYSTEM_LIB_DIR), PathBuf::from(multiarch)]
        .into_iter()
        .find(|d| d.join(CORE).exists())
}

/// `name` in a directory of `PATH`, if it is there.
fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Where a build of [`build`] puts its results, below its build directory.
fn built(src: &Path, build: &Path) -> Umdk {
    let core_dir = build.join("urma/lib/urma/core");
    Umdk {
        origin: Origin::Source(src.to_path_buf()),
        plugin_dir: core_dir.join(PLUGIN_DIR),
        core_dir,
        common_dir: build.join("urma/common"),
        sample: Some(build.join("urma/examples/urma_sample")),
        perftest: Some(build.join("urma/tools/urma_perftest/urma_perftest")),
    }
}

/// The core and both programs built from `src` into `<out>/build`, unless that build is of the
/// same source and recipe already.
fn build(src: &Path, out: &Path) -> Umdk {
    std::fs::create_dir_all(out).unwrap_or_else(|e| panic!("create {}: {e}", out.display()));
    let _lock = Lock::take(&out.join("build.lock"));
    let dir = out.join("build");
    let umdk = built(src, &dir);
    let stamp_file = dir.join("umdk-source.stamp");
    let stamp = stamp(src);
    let outputs = [umdk.core(), umdk.common()]
        .into_iter()
        .chain(umdk.sample.clone())
        .chain(umdk.perftest.clone());
    let complete = outputs.into_iter().all(|p| p.exists());
    let previous = std::fs::read_to_string(&stamp_file).ok();
    if !(complete && previous.as_deref() == Some(stamp.as_str())) {
        // Another tree (or none recorded): cmake refuses a build directory of another source.
        let same_tree = previous
            .as_deref()
            .and_then(|s| s.lines().next())
            .is_some_and(|l| l == stamp.lines().next().unwrap_or_default());
        if !same_tree {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = std::fs::remove_file(&stamp_file);
        let started = std::time::Instant::now();
        if !dir.join("CMakeCache.txt").exists() {
            checked(
                Command::new("cmake")
                    .arg("-S")
                    .arg(src.join("src"))
                    .arg("-B")
                    .arg(&dir)
                    .args(CMAKE_OPTIONS),
            );
        }
        checked(
            Command::new("make")
                .arg("-C")
                .arg(&dir)
                .arg("-j2")
                .args(BUILD_TARGETS),
        );
        std::fs::write(&stamp_file, &stamp)
            .unwrap_or_else(|e| panic!("write {}: {e}", stamp_file.display()));
        eprintln!(
            "umdk: built the URMA core, urma_sample and urma_perftest from {} in {:.1?}",
            src.display(),
            started.elapsed()
        );
    }
    std::fs::create_dir_all(&umdk.plugin_dir)
        .unwrap_or_else(|e| panic!("create {}: {e}", umdk.plugin_dir.display()));
    umdk
}

/// What a build is of: the tree (first line), the recipe, and a fingerprint of the content of
/// every file below `<src>/src` (FNV-1a over the sorted relative paths and contents).
fn stamp(src: &Path) -> String {
    let mut files = Vec::new();
    collect_files(&src.join("src"), &mut files);
    files.sort();
    let mut h = Fnv::new();
    for f in &files {
        h.add(f.as_os_str().as_bytes());
        h.add(&[0]);
        match std::fs::read(f) {
            Ok(content) => h.add(&content),
            Err(e) => h.add(e.to_string().as_bytes()),
        }
    }
    format!(
        "source {}\nrecipe cmake {} ; make {}\nfiles {} fnv1a64 {:016x}\n",
        src.display(),
        CMAKE_OPTIONS.join(" "),
        BUILD_TARGETS.join(" "),
        files.len(),
        h.0
    )
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => collect_files(&p, files),
            Ok(_) => files.push(p),
            Err(_) => {}
        }
    }
}

/// 64-bit FNV-1a: a fingerprint stable across Rust versions (unlike `DefaultHasher`).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// An exclusive `flock` on a file, released when dropped (or when the process dies).
struct Lock(std::fs::File);

impl Lock {
    fn take(path: &Path) -> Lock {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; it blocks until the lock is free.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(
            rc,
            0,
            "flock {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        Lock(f)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking the descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_the_content_and_the_layout_is_the_build_trees() {
        let dir = std::env::temp_dir().join(format!("ost-umdk-stamp-{}", std::process::id()));
        let src = dir.join("tree");
        std::fs::create_dir_all(src.join("src/urma")).expect("mkdir");
        std::fs::write(src.join("src/urma/a.c"), "int a;\n").expect("write");
        let one = stamp(&src);
        assert_eq!(one, stamp(&src), "same content, same stamp");
        std::fs::write(src.join("src/urma/a.c"), "int b;\n").expect("write");
        let two = stamp(&src);
        assert_ne!(one, two, "changed content, changed stamp");
        assert_eq!(one.lines().next(), two.lines().next(), "same tree line");

        let u = built(&src, &dir.join("build"));
        assert_eq!(u.plugin_dir, u.core_dir.join("urma"));
        assert!(u.core().ends_with("build/urma/lib/urma/core/liburma.so.0"));
        assert!(u
            .common()
            .ends_with("build/urma/common/liburma_common.so.0"));

        // A private view of a core: a link to it and an empty plugin directory.
        std::fs::create_dir_all(&u.core_dir).expect("mkdir");
        std::fs::write(u.core_dir.join("liburma.so.0.0.3"), "").expect("write");
        std::os::unix::fs::symlink("liburma.so.0.0.3", u.core()).expect("link");
        let view = u.with_plugin_dir_in(&dir.join("view")).expect("view");
        assert_eq!(view.core(), dir.join("view/liburma.so.0"));
        assert!(view.plugin_dir.is_dir());
        assert_eq!(
            std::fs::canonicalize(view.core()).expect("resolves"),
            std::fs::canonicalize(u.core_dir.join("liburma.so.0.0.3")).expect("real")
        );
        assert_eq!(
            view.library_dirs(),
            vec![view.core_dir.clone(), u.common_dir.clone()]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
