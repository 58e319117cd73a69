//! `legacy-c/`, the C99 reference implementation of os_transport 1.0, as a shared library.
//!
//! Every flavour compiles the same sources with the same warnings and defines (`-std=c99 -Wall
//! -Wextra -Werror -pthread -fPIC -fvisibility=hidden -D_POSIX_C_SOURCE=200809L`, include dirs
//! `<repo>/include`, the URMA headers and `legacy-c/src`) and links them with the same compiler
//! (SONAME `libos_transport.so.1`, `-Wl,-z,defs`, `-lurma -lpthread`, plus `$LDFLAGS`, the
//! distribution's hardening flags in an RPM build) into its own directory, so flavours and cargo
//! profiles never overwrite each other.

use std::path::{Path, PathBuf};

/// The sources, relative to `legacy-c/`.
pub const SOURCES: &[&str] = &[
    "src/os_transport.c",
    "src/ost_log.c",
    "src/ost_thread_pool.c",
    "src/ost_urma.c",
    "src/os_transport_inject.c",
];
const HEADERS: &[&str] = &["src/ost_log.h", "src/ost_thread_pool.h", "src/ost_urma.h"];
/// File names of the library: the real file, the SONAME link, the development link.
pub const REAL_NAME: &str = "libos_transport.so.1.0.0";
pub const SONAME: &str = "libos_transport.so.1";
pub const DEV_NAME: &str = "libos_transport.so";

/// How the library is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// The optimisation and debug info of the calling cargo profile (`-O0 -g` in a debug build):
    /// the library the tests and the conformance harness load.
    Profile,
    /// `-O2 -g`, as a distribution builds it: the benchmark's reference.
    O2,
    /// `-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined` (compile and link): the
    /// sanitizer run of the behavioural suite.
    Asan,
    /// The profile's flags with `OS_TRANSPORT_WITH_INJECT=1` (and `-lrt`): the inject flavour,
    /// which adds the seven inject points and the ten `os_transport_inject_*` exports
    /// (docs/inject.md).
    Inject,
    /// The profile's flags with clang's `-fsanitize-coverage=inline-8bit-counters,pc-table`
    /// (compile only): the coverage-instrumented reference of `make fuzz-compat`, whose module
    /// constructor hands its counters to the fuzzer's `__sanitizer_cov_8bit_counters_init`. Those
    /// two hooks are defined by the program that loads the library, so this flavour is linked
    /// without `-z defs`. The caller's compiler must be clang (`base.compiler("clang")`).
    Fuzz,
}

impl Flavour {
    /// The directory (below the caller's output directory) this flavour is built into.
    pub fn dir_name(self) -> &'static str {
        match self {
            Flavour::Profile => "legacy",
            Flavour::O2 => "legacy-O2",
            Flavour::Asan => "legacy-asan",
            Flavour::Inject => "legacy-inject",
            Flavour::Fuzz => "legacy-fuzz",
        }
    }

    fn sanitizer_flags(self) -> &'static [&'static str] {
        match self {
            Flavour::Asan => &["-fsanitize=address,undefined"],
            _ => &[],
        }
    }
}

/// Where the sources and the URMA headers and link library are.
pub struct Inputs {
    /// The repository root (holding `include/` and `legacy-c/`).
    pub repo: PathBuf,
    /// URMA include directory (`DEP_URMA_INCLUDE`, see [`crate::urma::select_include_dir`]).
    pub urma_include: PathBuf,
    /// Directory to link `-lurma` from (`DEP_URMA_LINK_DIR`, see [`crate::urma::select_link_dir`]).
    pub urma_link_dir: PathBuf,
}

impl Inputs {
    /// Inside the build script of a package depending on `urma-sys` (`links = "urma"`): the
    /// directories it publishes, `DEP_URMA_INCLUDE` and `DEP_URMA_LINK_DIR`. Also prints the
    /// `cargo:rerun-if-changed` lines of the sources and the `rerun-if-env-changed` lines.
    pub fn from_build_script(repo: PathBuf) -> Inputs {
        for f in input_files(&repo) {
            println!("cargo:rerun-if-changed={}", f.display());
        }
        let dep = |var: &str| {
            println!("cargo:rerun-if-env-changed={var}");
            PathBuf::from(std::env::var_os(var).unwrap_or_else(|| {
                panic!("{var}: urma-sys (links = \"urma\") publishes it to its dependents")
            }))
        };
        println!("cargo:rerun-if-env-changed=LDFLAGS");
        Inputs {
            urma_include: dep("DEP_URMA_INCLUDE"),
            urma_link_dir: dep("DEP_URMA_LINK_DIR"),
            repo,
        }
    }
}

/// The files a build depends on (for `cargo:rerun-if-changed`).
pub fn input_files(repo: &Path) -> Vec<PathBuf> {
    let legacy = repo.join("legacy-c");
    SOURCES
        .iter()
        .chain(HEADERS)
        .map(|f| legacy.join(f))
        .chain([
            repo.join("include/os_transport.h"),
            repo.join("include/os_transport_inject.h"),
        ])
        .collect()
}

/// Builds `flavour` into `<out>/<flavour dir>/` with the compiler settings of `base` (a build
/// script's `cc::Build::new()`, or [`crate::compiler_for`] outside one) and returns that
/// directory, which holds `libos_transport.so.1.0.0`, `libos_transport.so.1` and
/// `libos_transport.so`. The library is replaced atomically.
pub fn build(base: &cc::Build, flavour: Flavour, inputs: &Inputs, out: &Path) -> PathBuf {
    let dir = out.join(flavour.dir_name());
    let obj = dir.join("obj");
    std::fs::create_dir_all(&obj).unwrap_or_else(|e| panic!("create {}: {e}", obj.display()));
    let legacy = inputs.repo.join("legacy-c");

    let mut b = base.clone();
    b.out_dir(&obj)
        .cargo_metadata(false)
        .pic(true)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .flag("-std=c99")
        .flag("-pthread")
        .flag("-fvisibility=hidden")
        .define("_POSIX_C_SOURCE", "200809L")
        .include(inputs.repo.join("include"))
        .include(&inputs.urma_include)
        .include(legacy.join("src"));
    match flavour {
        Flavour::Profile => {}
        Flavour::Fuzz => {
            b.flag("-fsanitize-coverage=inline-8bit-counters,pc-table");
        }
        Flavour::Inject => {
            b.define("OS_TRANSPORT_WITH_INJECT", "1");
        }
        Flavour::O2 => {
            b.opt_level(2).debug(true);
        }
        Flavour::Asan => {
            b.opt_level(1).debug(true).flag("-fno-omit-frame-pointer");
        }
    }
    for f in flavour.sanitizer_flags() {
        b.flag(f);
    }
    for f in SOURCES {
        b.file(legacy.join(f));
    }
    let objects = b.compile_intermediates();

    let tmp = dir.join(format!("{REAL_NAME}.tmp"));
    let mut cmd = b.get_compiler().to_command();
    cmd.args(&objects)
        .args(flavour.sanitizer_flags())
        .arg("-shared")
        .arg("-pthread")
        .arg(format!("-Wl,-soname,{SONAME}"))
        .args((flavour != Flavour::Fuzz).then_some("-Wl,-z,defs"))
        .arg("-o")
        .arg(&tmp)
        .arg(format!("-L{}", inputs.urma_link_dir.display()))
        .arg("-lurma")
        .args((flavour == Flavour::Inject).then_some("-lrt"))
        .arg("-lpthread");
    // The `cc` crate passes CFLAGS to the compile step only; the link step takes LDFLAGS here.
    if let Ok(ldflags) = std::env::var("LDFLAGS") {
        cmd.args(ldflags.split_whitespace());
    }
    crate::run(&mut cmd, &format!("linking {REAL_NAME} ({flavour:?})"));
    std::fs::rename(&tmp, dir.join(REAL_NAME))
        .unwrap_or_else(|e| panic!("install {}: {e}", dir.join(REAL_NAME).display()));
    symlink_replace(REAL_NAME, &dir.join(SONAME));
    symlink_replace(SONAME, &dir.join(DEV_NAME));
    dir
}

/// Creates or atomically replaces `link` with a relative symlink to `target`.
pub fn symlink_replace(target: &str, link: &Path) {
    let name = link.file_name().expect("link name").to_string_lossy();
    let tmp = link.with_file_name(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .unwrap_or_else(|e| panic!("symlink {} -> {target}: {e}", tmp.display()));
    std::fs::rename(&tmp, link)
        .unwrap_or_else(|e| panic!("rename {} to {}: {e}", tmp.display(), link.display()));
}
