//! C programs and small C libraries: the one compile line for every one of them that a test, the
//! conformance harness, a build script or the xtask builds (legacy-c itself is [`crate::legacy`]).
//!
//! A [`Build`] names its sources, include directories, defines, the libraries it links and its
//! output; everything else comes from its [`Flavour`] and is the same for every program:
//! `-std=gnu11 -Wall -Wextra -Werror -pthread`, the flavour's optimisation, debug and sanitizer
//! flags (given to the compile and to the link), then the libraries (`-L<dir> -los_transport`,
//! `-L<dir> -l:liburma.so.0`) and `-ldl -lpthread`. [`Build::urma_program`] adds what every
//! program on the C URMA fixture needs: `tests/c/urma_fixture.c` and the include directories
//! `include/`, the URMA headers, `urma-loopback/include/` and `tests/c/`.
//!
//! Which compiler runs is [`Compiler`]: by default `$CC`, else `cc`, so that a test running
//! under the aarch64 target runner (which sets `CC` to the cross compiler, see
//! `.cargo/target-runner`) builds aarch64 programs; a target triple (the `cc` crate's compiler
//! for it), a command or a build script's `cc::Tool` otherwise. [`Flavour::Fuzzer`] defaults to
//! `$CLANG`, else `clang`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How a program is compiled; the flags go to the compile and to the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `-O1 -g`: test programs and the conformance harness's C runner.
    Plain,
    /// `-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined`.
    Asan,
    /// `-O1 -g -fsanitize=fuzzer,address -rdynamic`: a libFuzzer target (needs clang).
    Fuzzer,
    /// `-O1 -g -fno-omit-frame-pointer -fno-inline`: for memcheck and Helgrind, whose reports
    /// then name every frame.
    Valgrind,
}

impl Flavour {
    /// The flavour's flags, compile and link.
    pub fn flags(self) -> &'static [&'static str] {
        match self {
            Flavour::Plain => &["-O1", "-g"],
            Flavour::Asan => &[
                "-O1",
                "-g",
                "-fno-omit-frame-pointer",
                "-fsanitize=address,undefined",
            ],
            Flavour::Fuzzer => &["-O1", "-g", "-fsanitize=fuzzer,address", "-rdynamic"],
            Flavour::Valgrind => &["-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline"],
        }
    }
}

/// The flags of every build, before the flavour's.
pub const COMMON_FLAGS: &[&str] = &["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-pthread"];

/// The C compiler a [`Build`] runs.
#[derive(Clone, Debug)]
pub enum Compiler {
    /// `$CC`, else `cc` (`$CLANG`, else `clang`, for [`Flavour::Fuzzer`]): the compiler of the
    /// platform the caller runs on; under the aarch64 target runner, the cross compiler.
    Running,
    /// The `cc` crate's compiler for a target triple (from x86_64 for
    /// `aarch64-unknown-linux-gnu`: `aarch64-linux-gnu-gcc`; `CC_<triple>` and `CC` override).
    Triple(String),
    /// This command (`$REL_CC`, ...).
    Command(OsString),
    /// A build script's compiler (`cc::Build::new().get_compiler()`).
    Tool(cc::Tool),
}

/// A library a program links.
#[derive(Clone, Debug)]
pub enum Lib {
    /// `-L<dir> -los_transport`: the `libos_transport.so` in `dir` (link by the SONAME
    /// `libos_transport.so.1`, which the loader resolves at run time).
    OsTransport(PathBuf),
    /// `-L<dir> -l:liburma.so.0`: the `liburma.so.0` in `dir` (the loopback, or a test double).
    Urma(PathBuf),
    /// A static archive by path, then the libraries it needs as given (`-lgcc_s`, ...).
    Archive(PathBuf, Vec<String>),
}

/// What a build writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// An executable.
    Program,
    /// A shared library (`-fPIC -shared`), with this SONAME when given.
    Shared(Option<String>),
    /// An object file (`-c`) of the one source.
    Object,
}

/// The language of a build's sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    /// C (`-std=gnu11`): `$CC`, else `cc`.
    C,
    /// C++ (`-std=gnu++17`): `$CXX`, else `c++`; C parts come in as objects ([`Output::Object`]).
    Cxx,
}

/// One C program or shared library: see the module documentation.
#[derive(Clone, Debug)]
pub struct Build {
    pub flavour: Flavour,
    pub language: Language,
    pub compiler: Compiler,
    pub sources: Vec<PathBuf>,
    pub includes: Vec<PathBuf>,
    /// `-D<name>=<value>`, the value as written (quote a string yourself).
    pub defines: Vec<(String, String)>,
    pub libs: Vec<Lib>,
    pub kind: Output,
    pub output: PathBuf,
}

impl Build {
    /// An executable `output` in `flavour`, with no sources yet, built by [`Compiler::Running`].
    pub fn new(flavour: Flavour, output: impl Into<PathBuf>) -> Build {
        Build {
            flavour,
            language: Language::C,
            compiler: Compiler::Running,
            sources: Vec::new(),
            includes: Vec::new(),
            defines: Vec::new(),
            libs: Vec::new(),
            kind: Output::Program,
            output: output.into(),
        }
    }

    /// A program on the repository's C URMA fixture: `main` (and further [`Build::source`]s) with
    /// `<repo>/tests/c/urma_fixture.c`, the include directories `<repo>/include`,
    /// `<repo>/urma-sys/include` (the bundled URMA headers; [`Build::urma_include`] replaces it),
    /// `<repo>/urma-loopback/include` and `<repo>/tests/c`.
    pub fn urma_program(
        repo: &Path,
        flavour: Flavour,
        main: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
    ) -> Build {
        let mut b = Build::new(flavour, output);
        b.sources = vec![main.into(), repo.join("tests/c/urma_fixture.c")];
        b.includes = [
            "include",
            "urma-sys/include",
            "urma-loopback/include",
            "tests/c",
        ]
        .iter()
        .map(|d| repo.join(d))
        .collect();
        b
    }

    pub fn compiler(mut self, compiler: Compiler) -> Build {
        self.compiler = compiler;
        self
    }

    pub fn source(mut self, file: impl Into<PathBuf>) -> Build {
        self.sources.push(file.into());
        self
    }

    pub fn include(mut self, dir: impl Into<PathBuf>) -> Build {
        self.includes.push(dir.into());
        self
    }

    /// Uses `dir` for the URMA headers instead of the bundled `urma-sys/include` (the second
    /// include directory of [`Build::urma_program`]); adds it for other builds.
    pub fn urma_include(mut self, dir: impl Into<PathBuf>) -> Build {
        let dir = dir.into();
        match self
            .includes
            .iter_mut()
            .find(|d| d.ends_with("urma-sys/include"))
        {
            Some(d) => *d = dir,
            None => self.includes.push(dir),
        }
        self
    }

    pub fn define(mut self, name: &str, value: impl Into<String>) -> Build {
        self.defines.push((name.to_string(), value.into()));
        self
    }

    pub fn lib(mut self, lib: Lib) -> Build {
        self.libs.push(lib);
        self
    }

    /// Compiles the first source only, into an object file, instead of linking a program.
    pub fn object(mut self) -> Build {
        self.kind = Output::Object;
        self.sources.truncate(1);
        self
    }

    /// A C++ build: the C++ compiler and standard; C sources must be given as objects.
    pub fn cxx(mut self) -> Build {
        self.language = Language::Cxx;
        self
    }

    /// Builds a shared library (`-fPIC -shared`) instead of a program, with `soname` if given.
    pub fn shared(mut self, soname: Option<&str>) -> Build {
        self.kind = Output::Shared(soname.map(str::to_string));
        self
    }

    /// The compiler command with every argument, as [`Build::compile`] runs it.
    pub fn command(&self) -> Command {
        let cxx = self.language == Language::Cxx;
        let mut cmd = match &self.compiler {
            Compiler::Running => Command::new(running_compiler(self.flavour, cxx)),
            Compiler::Triple(t) => crate::compiler_for(Some(t))
                .cpp(cxx)
                .get_compiler()
                .to_command(),
            Compiler::Command(c) => Command::new(c),
            Compiler::Tool(t) => t.to_command(),
        };
        if cxx {
            cmd.arg("-std=gnu++17").args(&COMMON_FLAGS[1..]);
        } else {
            cmd.args(COMMON_FLAGS);
        }
        cmd.args(self.flavour.flags());
        match &self.kind {
            Output::Shared(soname) => {
                cmd.args(["-fPIC", "-shared"]);
                if let Some(s) = soname {
                    cmd.arg(format!("-Wl,-soname,{s}"));
                }
            }
            Output::Object => {
                cmd.arg("-c");
            }
            Output::Program => {}
        }
        for d in &self.includes {
            cmd.arg(format!("-I{}", d.display()));
        }
        for (name, value) in &self.defines {
            cmd.arg(format!("-D{name}={value}"));
        }
        cmd.args(&self.sources).arg("-o").arg(&self.output);
        if self.kind == Output::Object {
            return cmd;
        }
        for lib in &self.libs {
            let (dir, name) = match lib {
                Lib::OsTransport(d) => (d, "-los_transport"),
                Lib::Urma(d) => (d, "-l:liburma.so.0"),
                Lib::Archive(path, needs) => {
                    cmd.arg(path).args(needs);
                    continue;
                }
            };
            cmd.arg(format!("-L{}", dir.display())).arg(name);
        }
        cmd.args(["-ldl", "-lpthread"]);
        cmd
    }

    /// Compiles and links into [`Build::output`] (its directory is created) and returns it; the
    /// error has the command line and the compiler's messages.
    pub fn compile(&self) -> Result<PathBuf, String> {
        if let Some(dir) = self.output.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        }
        let mut cmd = self.command();
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{cmd:?} failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(self.output.clone())
    }

    /// [`Build::compile`], panicking with its error (tests, build scripts, the xtask).
    pub fn run(&self) -> PathBuf {
        self.compile().unwrap_or_else(|e| panic!("{e}"))
    }
}

/// The compiler of [`Compiler::Running`] for `flavour` (the C++ one when `cxx`).
fn running_compiler(flavour: Flavour, cxx: bool) -> OsString {
    let (var, default) = match (flavour, cxx) {
        (Flavour::Fuzzer, _) => ("CLANG", "clang"),
        (_, true) => ("CXX", "c++"),
        _ => ("CC", "cc"),
    };
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(b: &Build) -> Vec<String> {
        b.command()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_fixture_program_has_the_fixture_the_headers_and_its_libraries_last() {
        let b = Build::urma_program(Path::new("/r"), Flavour::Asan, "/r/m.c", "/o/m")
            .compiler(Compiler::Command("gcc".into()))
            .define("X", "\"y\"")
            .lib(Lib::OsTransport("/l".into()))
            .lib(Lib::Urma("/u".into()));
        let a = args(&b);
        assert_eq!(b.command().get_program(), "gcc");
        assert_eq!(&a[..5], COMMON_FLAGS);
        assert!(a.contains(&"-fsanitize=address,undefined".to_string()));
        for want in [
            "-I/r/include",
            "-I/r/urma-sys/include",
            "-I/r/urma-loopback/include",
            "-I/r/tests/c",
            "-DX=\"y\"",
            "/r/m.c",
            "/r/tests/c/urma_fixture.c",
        ] {
            assert!(a.contains(&want.to_string()), "{want} missing: {a:?}");
        }
        let tail: Vec<&str> = a[a.len() - 8..].iter().map(String::as_str).collect();
        let want = [
            "-o",
            "/o/m",
            "-L/l",
            "-los_transport",
            "-L/u",
            "-l:liburma.so.0",
            "-ldl",
            "-lpthread",
        ];
        assert_eq!(tail, want);
    }

    #[test]
    fn a_shared_library_has_its_soname_and_the_urma_headers_can_be_replaced() {
        let b = Build::urma_program(Path::new("/r"), Flavour::Plain, "m.c", "o.so")
            .urma_include("/sys/include")
            .shared(Some("liburma.so.0"));
        let a = args(&b);
        for want in [
            "-fPIC",
            "-shared",
            "-Wl,-soname,liburma.so.0",
            "-I/sys/include",
        ] {
            assert!(a.contains(&want.to_string()), "{want} missing: {a:?}");
        }
        assert!(!a.contains(&"-I/r/urma-sys/include".to_string()));
    }
}
