//! The header probe: a control API's C header against its Rust definition in the control-plane
//! crate. A C program compiled from the header prints the size of the counters struct, the
//! offset of every field the Rust struct names and the value of every constant; the prototypes
//! are checked at compile time with `__builtin_types_compatible_p` against the C types the Rust
//! binding lists beside each function pointer (`Api::PROTOTYPES`). A field, constant or prototype
//! that drifts on either side fails the probe. Used by `urma-loopback/tests/header.rs`
//! (`urma_loopback.h`) and `urma-interpose/tests/header.rs` (`urma_interpose.h`).

use std::ffi::c_int;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cc, target};

/// What one header must declare.
pub struct HeaderProbe<'a> {
    /// The directory of the header.
    pub include: PathBuf,
    /// The header's file name (`urma_loopback.h`).
    pub header: &'a str,
    /// The C name of the counters struct and the Rust struct's size and field table.
    pub counters: (&'a str, usize, &'a [(&'a str, usize)]),
    /// The `#define`s and their values.
    pub constants: &'a [(&'a str, c_int)],
    /// Every function with the C type of a pointer to it.
    pub prototypes: &'a [(&'a str, &'a str)],
}

impl HeaderProbe<'_> {
    /// The probe's C source.
    pub fn source(&self) -> String {
        let (st, _, fields) = self.counters;
        let mut c = format!(
            "#include <stdio.h>\n#include <stddef.h>\n#include \"{}\"\n\n",
            self.header
        );
        for (name, proto) in self.prototypes {
            writeln!(
                c,
                "_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {proto}), \
                 \"prototype of {name}\");"
            )
            .unwrap();
        }
        c.push_str("\nint main(void)\n{\n");
        writeln!(c, "    printf(\"size %zu\\n\", sizeof({st}));").unwrap();
        for (field, _) in fields {
            writeln!(
                c,
                "    printf(\"field {field} %zu\\n\", offsetof({st}, {field}));"
            )
            .unwrap();
        }
        for (name, _) in self.constants {
            writeln!(c, "    printf(\"const {name} %d\\n\", (int)({name}));").unwrap();
        }
        c.push_str("    return 0;\n}\n");
        c
    }

    /// What the probe must print: the Rust side's view.
    pub fn expected(&self) -> String {
        let (_, size, fields) = self.counters;
        let mut e = format!("size {size}\n");
        for (field, off) in fields {
            writeln!(e, "field {field} {off}").unwrap();
        }
        for (name, v) in self.constants {
            writeln!(e, "const {name} {v}").unwrap();
        }
        e
    }

    fn compile(&self, src: &str, dir: &Path, args: &[&str]) -> std::process::Output {
        std::fs::create_dir_all(dir).unwrap();
        let file = dir.join("probe.c");
        std::fs::write(&file, src).unwrap();
        Command::new(cc())
            .args(["-std=gnu11", "-Wall", "-Werror"])
            .args(args)
            .arg(&file)
            .arg(format!("-I{}", self.include.display()))
            .output()
            .expect("run the C compiler")
    }

    /// Compiles and runs the probe in `dir`; panics, saying what drifted, unless the header and
    /// the Rust definition agree.
    pub fn check(&self, dir: &Path) {
        let exe = dir.join("probe");
        let out = self.compile(&self.source(), dir, &["-o", exe.to_str().expect("path")]);
        assert!(
            out.status.success(),
            "the {} probe does not compile (a field, constant or prototype drifted):\n{}",
            self.header,
            String::from_utf8_lossy(&out.stderr)
        );
        let run = target::command(&exe).output().expect("run the probe");
        assert!(run.status.success(), "probe failed");
        assert_eq!(String::from_utf8_lossy(&run.stdout), self.expected());
    }

    /// Negative control, in `dir`: a probe that names a counter the header does not have, and
    /// one that states a wrong prototype, must both fail to compile (so the probe is not blind).
    pub fn notices_drift(&self, dir: &Path) {
        let (st, _, fields) = self.counters;
        let (field, _) = fields.first().expect("a counters struct with fields");
        let (name, proto) = self.prototypes.first().expect("a function");
        for (what, from, to) in [
            (
                "a field missing from the header",
                format!("offsetof({st}, {field})"),
                format!("offsetof({st}, {field}_not_in_the_header)"),
            ),
            (
                "a wrong prototype",
                format!("__typeof__(&{name}), {proto})"),
                format!("__typeof__(&{name}), long double (*)(void))"),
            ),
        ] {
            let src = self.source().replace(&from, &to);
            assert_ne!(src, self.source(), "{what}: nothing to replace");
            let out = self.compile(&src, dir, &["-fsyntax-only"]);
            assert!(!out.status.success(), "{what} compiled");
        }
    }
}

/// The two tests of a header probe, for a control API whose binding (`$api`: `PROTOTYPES`),
/// counters (`$counters`: `FIELDS`) and constants are defined in the control-plane crate, and
/// whose header `$header` (with the counters struct `$cstruct`) is in the calling crate's
/// `include/`.
#[macro_export]
macro_rules! header_probe_tests {
    ($header:literal, $cstruct:literal, $counters:ty, $constants:expr, $api:ty) => {
        fn probe() -> $crate::header_probe::HeaderProbe<'static> {
            $crate::header_probe::HeaderProbe {
                include: std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include"),
                header: $header,
                counters: (
                    $cstruct,
                    std::mem::size_of::<$counters>(),
                    <$counters>::FIELDS,
                ),
                constants: &$constants,
                prototypes: <$api>::PROTOTYPES,
            }
        }

        fn probe_dir(what: &str) -> std::path::PathBuf {
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("{}-{what}", $header))
        }

        #[test]
        fn the_header_matches_the_control_plane_crate() {
            probe().check(&probe_dir("probe"));
        }

        #[test]
        fn the_probe_notices_a_missing_field_and_a_wrong_prototype() {
            probe().notices_drift(&probe_dir("negative"));
        }
    };
}
