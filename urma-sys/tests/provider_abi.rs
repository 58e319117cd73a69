//! The provider interface against measured facts: `tests/data/urma_provider_abi_<arch>.json`,
//! measured on the genuine UMDK headers (`urma_provider.h`, and the core-private `urma_private.h`
//! for `urma_sysfs_dev_t`, `urma_driver_t` and `struct ub_list`) for x86_64 and aarch64.
//!
//! Facts: the size and alignment of each structure, the offset and size of each field, the
//! constants, and the prototype of every function-pointer slot, of the registration functions
//! and of the function-pointer typedef, and the tags of the opaque types (a C probe decides these
//! with `__builtin_types_compatible_p` against the prototype text recorded in the JSON).
//!
//! Always:
//! * the Rust rendering (bindgen bindings of the bundled `urma_provider.h`, and the pinned
//!   `urma_sys::provider::sysfs_dev::v0_0_3`) of the architecture the tests are built for, by
//!   `size_of` / `align_of` / `offset_of!`, against that architecture's JSON;
//! * the bundled header, through a C probe, against the JSON's public facts; from an x86_64
//!   host also for aarch64: the probe cross-compiled (`.cargo/aarch64-linker`) and run under
//!   qemu (`.cargo/target-runner`), as the aarch64 ABI facts were measured, and the layout
//!   assertions of the committed aarch64 bindings against the aarch64 JSON (skipped with a
//!   message when the cross compiler or qemu is missing);
//! * `abi/provider_static_check.c` (the public facts as `_Static_assert`s, which build.rs
//!   compiles against real UMDK headers) is generated from the JSONs and passes on the bundled
//!   header; the bundled header compiles cleanly as C99, GNU11 and GNU++17;
//! * negative controls: a shifted copy of the facts, and the bundled header with one field
//!   widened and one slot's parameter retyped, are reported as exactly those differences (and
//!   fail the static check).
//!
//! With `UMDK_SRC=<UMDK source tree>` also the genuine headers, natively and for aarch64 (a
//! missing qemu is then an error when the cross compiler exists), against the JSON and the Rust
//! rendering, and a perturbed copy of the genuine private header as a negative control. With
//! `URMA_SYS_BLESS=1` as well, the JSONs are written from the genuine probe instead of compared
//! (the prototype text comes from the bundled header and must be compatible with the genuine
//! one).

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use urma_sys::provider::sysfs_dev::{v0_0_3, Layout};
use urma_sys::provider::{
    urma_match_entry_t, urma_ops_t, urma_provider_attr_t, urma_provider_ops_t, urma_tp_attr_mask_t,
    URMA_SYSFS_DEV_FLAG_DRIVER_CREATED,
};

mod common;
#[path = "../../testkit/src/paths.rs"]
mod paths;
#[path = "../../testkit/src/target.rs"]
mod target;

/// `key = value` facts, keys `size T`, `align T`, `field T.f` (`offset O size S`), `const N`,
/// `slot T.f`, `function F`, `typedef T`, `tag T` (`compatible`).
type Facts = BTreeMap<String, String>;

const COMPATIBLE: &str = "compatible";

// ---------------------------------------------------------------------------------------------
// The Rust rendering

struct RustType {
    /// The C type name (`urma_ops_t`, `struct ub_list`).
    c: &'static str,
    /// Declared in the core-private header, rendered in Rust only.
    private: bool,
    size: usize,
    align: usize,
    /// (name, offset, size) in declaration order.
    fields: Vec<(&'static str, usize, usize)>,
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! rust_type {
    ($c:literal, $private:literal, $r:ty { $($f:ident),+ $(,)? }) => {{
        let u = MaybeUninit::<$r>::uninit();
        let base = u.as_ptr();
        RustType {
            c: $c,
            private: $private,
            size: size_of::<$r>(),
            align: align_of::<$r>(),
            fields: vec![$((
                stringify!($f),
                offset_of!($r, $f),
                // SAFETY: addr_of! computes the field's address inside `u` without reading it.
                size_of_pointee(unsafe { std::ptr::addr_of!((*base).$f) }),
            )),+],
        }
    }};
}

fn rust_types() -> Vec<RustType> {
    vec![
        rust_type!(
            "urma_match_entry_t",
            false,
            urma_match_entry_t {
                vendor_id,
                device_id
            }
        ),
        rust_type!(
            "urma_provider_attr_t",
            false,
            urma_provider_attr_t {
                version,
                transport_type
            }
        ),
        rust_type!("urma_tp_attr_mask_t", false, urma_tp_attr_mask_t { value }),
        rust_type!(
            "urma_provider_ops_t",
            false,
            urma_provider_ops_t {
                name,
                attr,
                match_table,
                init,
                uninit,
                query_device,
                create_context,
                delete_context,
                get_uasid,
            }
        ),
        rust_type!(
            "urma_ops_t",
            false,
            urma_ops_t {
                name,
                create_jfc,
                modify_jfc,
                delete_jfc,
                delete_jfc_batch,
                alloc_jfc,
                set_jfc_opt,
                active_jfc,
                get_jfc_opt,
                deactive_jfc,
                free_jfc,
                create_jfs,
                modify_jfs,
                query_jfs,
                flush_jfs,
                delete_jfs,
                delete_jfs_batch,
                alloc_jfs,
                set_jfs_opt,
                active_jfs,
                get_jfs_opt,
                deactive_jfs,
                free_jfs,
                create_jfr,
                modify_jfr,
                query_jfr,
                delete_jfr,
                delete_jfr_batch,
                import_jfr,
                unimport_jfr,
                advise_jfr,
                unadvise_jfr,
                advise_jfr_async,
                alloc_jfr,
                set_jfr_opt,
                active_jfr,
                get_jfr_opt,
                deactive_jfr,
                free_jfr,
                create_jetty,
                modify_jetty,
                query_jetty,
                flush_jetty,
                delete_jetty,
                delete_jetty_batch,
                import_jetty,
                unimport_jetty,
                advise_jetty,
                unadvise_jetty,
                advise_jetty_async,
                bind_jetty,
                unbind_jetty,
                alloc_jetty,
                set_jetty_opt,
                active_jetty,
                get_jetty_opt,
                deactive_jetty,
                free_jetty,
                create_jetty_grp,
                delete_jetty_grp,
                create_jfce,
                delete_jfce,
                get_tpn,
                modify_tp,
                get_tp_list,
                set_tp_attr,
                get_tp_attr,
                import_jetty_ex,
                import_jfr_ex,
                bind_jetty_ex,
                alloc_token_id,
                alloc_token_id_ex,
                free_token_id,
                register_seg,
                unregister_seg,
                import_seg,
                unimport_seg,
                get_async_event,
                ack_async_event,
                user_ctl,
                post_jfs_wr,
                post_jfr_wr,
                post_jetty_send_wr,
                post_jetty_recv_wr,
                poll_jfc,
                rearm_jfc,
                wait_jfc,
                ack_jfc,
                import_jetty_async,
                unimport_jetty_async,
                bind_jetty_async,
                unbind_jetty_async,
                create_notifier,
                delete_notifier,
                wait_notify,
                ack_notify,
                get_eid_by_ip,
                get_ip_by_eid,
                get_smac,
                get_dmac,
            }
        ),
        rust_type!("struct ub_list", true, v0_0_3::ub_list { prev, next }),
        rust_type!("urma_driver_t", true, v0_0_3::urma_driver_t { ops, node }),
        rust_type!(
            "urma_sysfs_dev_t",
            true,
            v0_0_3::urma_sysfs_dev_t {
                dev_name,
                sysfs_path,
                driver_name,
                transport_type,
                driver,
                urma_device,
                dev_attr,
                device_id,
                vendor_id,
                node,
                flag,
                time_created,
            }
        ),
    ]
}

/// (name, private, value)
fn rust_constants() -> Vec<(&'static str, bool, u64)> {
    vec![
        (
            "URMA_SYSFS_DEV_FLAG_DRIVER_CREATED",
            false,
            URMA_SYSFS_DEV_FLAG_DRIVER_CREATED.into(),
        ),
        (
            "URMA_MAX_SYSFS_PATH",
            true,
            v0_0_3::URMA_MAX_SYSFS_PATH as u64,
        ),
    ]
}

fn rust_facts() -> Facts {
    let mut facts = Facts::new();
    for t in rust_types() {
        facts.insert(format!("size {}", t.c), t.size.to_string());
        facts.insert(format!("align {}", t.c), t.align.to_string());
        for (f, offset, size) in &t.fields {
            facts.insert(
                format!("field {}.{f}", t.c),
                format!("offset {offset} size {size}"),
            );
        }
    }
    for (name, _, value) in rust_constants() {
        facts.insert(format!("const {name}"), value.to_string());
    }
    facts
}

// ---------------------------------------------------------------------------------------------
// Prototypes and tags (C only)

/// The prototype text checked for compatibility, by fact key (`slot urma_ops_t.create_jfc` ->
/// `urma_jfc_t *(*)(urma_context_t *ctx, urma_jfc_cfg_t *cfg)`; `tag urma_tp_cfg_t` ->
/// `struct urma_tp_cfg`).
#[derive(Debug, Default, PartialEq)]
struct Declarations(BTreeMap<String, String>);

/// The JSON sections of [`Declarations`], by key prefix.
const DECLARATION_SECTIONS: [(&str, &str); 4] = [
    ("slot", "slots"),
    ("function", "functions"),
    ("typedef", "typedefs"),
    ("tag", "opaque_types"),
];

impl Declarations {
    fn from_json(json: &Value) -> Self {
        let mut d = BTreeMap::new();
        for (prefix, section) in DECLARATION_SECTIONS {
            for (name, text) in json[section].as_object().into_iter().flatten() {
                let text = text.as_str().expect("prototype text");
                d.insert(format!("{prefix} {name}"), text.to_string());
            }
        }
        Declarations(d)
    }

    /// What `urma_provider.h` declares: the function-pointer members of its structures, its
    /// functions, its function-pointer typedefs and its typedefs of incomplete types.
    fn from_header(text: &str) -> Self {
        let mut d = BTreeMap::new();
        for s in header_statements(text) {
            if let Some(owner) = s.owner {
                if let Some((name, ty)) = function_pointer(&s.text) {
                    d.insert(format!("slot {owner}.{name}"), ty);
                }
            } else if let Some(rest) = s.text.strip_prefix("typedef ") {
                if let Some((name, ty)) = function_pointer(rest) {
                    d.insert(format!("typedef {name}"), ty);
                } else if let [kind @ ("struct" | "union"), tag, name] =
                    rest.split(' ').collect::<Vec<_>>()[..]
                {
                    d.insert(format!("tag {name}"), format!("{kind} {tag}"));
                }
            } else if let Some((head, args)) = s.text.split_once('(') {
                let (ret, name) = head.rsplit_once(' ').expect("function declaration");
                let ptr = format!("{ret} (*)({args}");
                d.insert(format!("function {name}"), ptr);
            }
        }
        Declarations(d)
    }

    /// The C expression deciding each fact.
    fn checks(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|(key, text)| {
                let (prefix, name) = key.split_once(' ').expect("key");
                let subject = match prefix {
                    "slot" => {
                        let (owner, field) = name.split_once('.').expect("slot key");
                        format!("__typeof__((({owner} *)0)->{field})")
                    }
                    "function" => format!("__typeof__(&{name})"),
                    _ => name.to_string(),
                };
                (
                    key.clone(),
                    format!("__builtin_types_compatible_p({subject}, {text})"),
                )
            })
            .collect()
    }

    fn expected(&self) -> Facts {
        self.0
            .keys()
            .map(|k| (k.clone(), COMPATIBLE.to_string()))
            .collect()
    }

    fn section(&self, prefix: &str) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_string(), v.clone())))
            .collect()
    }
}

struct Statement {
    /// The typedef name of the structure the statement is a member of.
    owner: Option<String>,
    /// Whitespace collapsed, comments and preprocessor lines removed.
    text: String,
}

/// The declarations of a header, split at `;`, with the members of `typedef struct {..} name;`
/// attributed to `name` (one level of structures; what `urma_provider.h` uses).
fn header_statements(text: &str) -> Vec<Statement> {
    let mut code = String::new();
    let mut in_cplusplus = false;
    for line in strip_comments(text).lines() {
        let t = line.trim();
        if t.starts_with("#ifdef __cplusplus") {
            in_cplusplus = true;
        } else if in_cplusplus && t.starts_with("#endif") {
            in_cplusplus = false;
        } else if !in_cplusplus && !t.starts_with('#') {
            code.push_str(t);
            code.push(' ');
        }
    }
    let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let (mut members, mut in_struct, mut closing) = (Vec::new(), false, false);
    let mut buf = String::new();
    for c in code.chars() {
        match c {
            '{' => {
                in_struct = true;
                buf.clear();
            }
            '}' => {
                in_struct = false;
                closing = true;
                buf.clear();
            }
            ';' => {
                let text = collapse(&buf);
                buf.clear();
                if in_struct {
                    members.push(text);
                } else if closing {
                    closing = false;
                    out.extend(members.drain(..).map(|m| Statement {
                        owner: Some(text.clone()),
                        text: m,
                    }));
                } else {
                    out.push(Statement { owner: None, text });
                }
            }
            _ => buf.push(c),
        }
    }
    out
}

fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment");
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// `("create_jfc", "urma_jfc_t *(*)(urma_context_t *ctx, ...)")` from
/// `urma_jfc_t *(*create_jfc)(urma_context_t *ctx, ...)`.
fn function_pointer(decl: &str) -> Option<(String, String)> {
    let (ret, rest) = decl.split_once("(*")?;
    let (name, args) = rest.split_once(')')?;
    Some((name.trim().to_string(), format!("{ret}(*){args}")))
}

fn bundled_provider_header() -> String {
    let path = Path::new(urma_sys::bundled_include_dir()).join("ub/umdk/urma/urma_provider.h");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// The JSON

fn json_path(arch: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/urma_provider_abi_{arch}.json"))
}

fn json(arch: &str) -> Value {
    let path = json_path(arch);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (measure it: UMDK_SRC=<UMDK tree> URMA_SYS_BLESS=1 cargo test -p urma-sys \
             --test provider_abi)",
            path.display()
        )
    });
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(v["arch"].as_str(), Some(arch), "{}", path.display());
    v
}

/// The JSON's facts; without the private ones if `public_only`.
fn json_facts(json: &Value, public_only: bool) -> Facts {
    let mut facts = Facts::new();
    let private = |v: &Value| v["private"].as_bool().expect("private");
    for (t, v) in json["types"].as_object().expect("types") {
        if public_only && private(v) {
            continue;
        }
        facts.insert(format!("size {t}"), v["size"].to_string());
        facts.insert(format!("align {t}"), v["align"].to_string());
        for (f, fv) in v["fields"].as_object().expect("fields") {
            facts.insert(
                format!("field {t}.{f}"),
                format!("offset {} size {}", fv["offset"], fv["size"]),
            );
        }
    }
    for (n, v) in json["constants"].as_object().expect("constants") {
        if !(public_only && private(v)) {
            facts.insert(format!("const {n}"), v["value"].to_string());
        }
    }
    facts.extend(Declarations::from_json(json).expected());
    facts
}

fn number(value: &str, word: &str) -> u64 {
    let mut it = value.split(' ');
    while let Some(w) = it.next() {
        if w == word {
            return it.next().and_then(|n| n.parse().ok()).expect("number");
        }
    }
    panic!("no `{word}` in {value:?}")
}

/// The JSON text for `measured` (genuine probe facts), one field per line in offset order.
fn render_json(
    arch: &str,
    compiler: &str,
    core_version: &str,
    measured: &Facts,
    decls: &Declarations,
) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let mut s = String::from("{\n");
    s += &format!(
        " \"schema\": {},\n",
        q(&format!(
            "URMA provider interface ABI facts for {arch} (LP64, GCC, glibc): sizes and offsets in \
             bytes; `private` types and constants are in the core's urma_private.h / ub_list.h, \
             which the SDK does not install"
        ))
    );
    s += &format!(" \"arch\": {},\n", q(arch));
    s += &format!(" \"compiler\": {},\n", q(compiler));
    s += " \"umdk\": {\n";
    s += &format!("  \"core_version\": {},\n", q(core_version));
    s += &format!(
        "  \"headers\": {}\n }},\n",
        q("src/urma/lib/urma/core/include/urma_provider.h, src/urma/lib/urma/core/urma_private.h, \
           src/urma/common/include/ub_list.h of the UMDK source tree")
    );
    s += " \"types\": {\n";
    let types = rust_types();
    for (i, t) in types.iter().enumerate() {
        let get = |key: String| {
            measured
                .get(&key)
                .unwrap_or_else(|| panic!("{key} not measured"))
        };
        s += &format!(
            "  {}: {{\"size\": {}, \"align\": {}, \"private\": {}, \"fields\": {{\n",
            q(t.c),
            get(format!("size {}", t.c)),
            get(format!("align {}", t.c)),
            t.private
        );
        let mut fields: Vec<(u64, &str, u64)> = t
            .fields
            .iter()
            .map(|(f, _, _)| {
                let v = get(format!("field {}.{f}", t.c));
                (number(v, "offset"), *f, number(v, "size"))
            })
            .collect();
        fields.sort();
        for (j, (offset, f, size)) in fields.iter().enumerate() {
            let comma = if j + 1 < fields.len() { "," } else { "" };
            s += &format!(
                "   {}: {{\"offset\": {offset}, \"size\": {size}}}{comma}\n",
                q(f)
            );
        }
        s += if i + 1 < types.len() {
            "  }},\n"
        } else {
            "  }}\n"
        };
    }
    s += " },\n \"constants\": {\n";
    let constants = rust_constants();
    for (i, (n, private, _)) in constants.iter().enumerate() {
        let comma = if i + 1 < constants.len() { "," } else { "" };
        s += &format!(
            "  {}: {{\"value\": {}, \"private\": {private}}}{comma}\n",
            q(n),
            measured[&format!("const {n}")]
        );
    }
    s += " }";
    for (prefix, section) in DECLARATION_SECTIONS {
        s += &format!(",\n {}: {{\n", q(section));
        let entries = decls.section(&format!("{prefix} "));
        let n = entries.len();
        for (i, (name, text)) in entries.iter().enumerate() {
            let comma = if i + 1 < n { "," } else { "" };
            s += &format!("  {}: {}{comma}\n", q(name), q(text));
        }
        s += " }";
    }
    s += "\n}\n";
    s
}

// ---------------------------------------------------------------------------------------------
// The C probe

#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// The architecture the tests run as (under qemu too, with `CC` and the runner from
    /// `.cargo/target-runner`).
    Native,
    /// aarch64 from an x86_64 host: `.cargo/aarch64-linker`, run by `.cargo/target-runner`.
    Aarch64,
}

impl Target {
    fn arch(self) -> &'static str {
        match self {
            Target::Native => std::env::consts::ARCH,
            Target::Aarch64 => "aarch64",
        }
    }
}

fn work_dir() -> PathBuf {
    let dir = paths::profile_dir().join("urma-sys-provider-abi");
    std::fs::create_dir_all(&dir).expect("create probe dir");
    dir
}

/// The probe source: one line per fact, `key<TAB>value`.
fn probe_source(
    include: &str,
    types: &[RustType],
    constants: &[&str],
    checks: &[(String, String)],
) -> String {
    let mut s = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include {include}\n\nint main(void)\n{{\n"
    );
    let mut line = |l: String| {
        s.push_str("    ");
        s.push_str(&l);
        s.push('\n');
    };
    for t in types {
        let c = t.c;
        line(format!("printf(\"size {c}\\t%zu\\n\", sizeof({c}));"));
        line(format!("printf(\"align {c}\\t%zu\\n\", _Alignof({c}));"));
        for (f, _, _) in &t.fields {
            line(format!(
                "printf(\"field {c}.{f}\\toffset %zu size %zu\\n\", offsetof({c}, {f}), sizeof((({c} *)0)->{f}));"
            ));
        }
    }
    for n in constants {
        line(format!(
            "printf(\"const {n}\\t%llu\\n\", (unsigned long long)({n}));"
        ));
    }
    for (key, expr) in checks {
        line(format!(
            "printf(\"{key}\\t%s\\n\", ({expr}) ? \"{COMPATIBLE}\" : \"INCOMPATIBLE\");"
        ));
    }
    s.push_str("    return 0;\n}\n");
    s
}

/// Builds and runs a probe; `name` distinguishes the probes of one test run.
fn run_probe(
    name: &str,
    source: &str,
    includes: &[PathBuf],
    werror: bool,
    target: Target,
) -> Facts {
    let dir = work_dir();
    let src = dir.join(format!("{name}.c"));
    let exe = dir.join(format!("{name}-{}", std::process::id()));
    std::fs::write(&src, source).expect("write probe");
    let compiler = match target {
        Target::Native => PathBuf::from(paths::cc()),
        Target::Aarch64 => paths::repo().join(".cargo/aarch64-linker"),
    };
    let mut cc = Command::new(compiler);
    cc.args(["-std=gnu11", "-Wall", "-Wextra"]);
    if werror {
        cc.arg("-Werror");
    }
    for dir in includes {
        cc.arg(format!("-I{}", dir.display()));
    }
    target::run(cc.arg("-o").arg(&exe).arg(&src));
    let out = match target {
        Target::Native => target::run(&mut target::command(&exe)),
        Target::Aarch64 => {
            target::run(Command::new(paths::repo().join(".cargo/target-runner")).arg(&exe))
        }
    };
    let _ = std::fs::remove_file(&exe);
    common::tab_separated_facts(&out)
}

/// The bundled header set in `include_dir` (the public facts only).
fn bundled_probe(name: &str, include_dir: &Path, decls: &Declarations, target: Target) -> Facts {
    let types: Vec<RustType> = rust_types().into_iter().filter(|t| !t.private).collect();
    let constants: Vec<&str> = rust_constants()
        .into_iter()
        .filter(|c| !c.1)
        .map(|c| c.0)
        .collect();
    let source = probe_source(
        "<ub/umdk/urma/urma_provider.h>",
        &types,
        &constants,
        &decls.checks(),
    );
    run_probe(name, &source, &[include_dir.to_path_buf()], true, target)
}

/// The compiler of `target`, as the JSON records it.
fn compiler_version(target: Target) -> String {
    let (cc, note) = match target {
        Target::Native => (paths::cc(), ""),
        Target::Aarch64 => (
            "aarch64-linux-gnu-gcc".to_string(),
            ", probe run under qemu-aarch64",
        ),
    };
    let out = target::run(Command::new(&cc).arg("--version"));
    format!("{}{note}", out.lines().next().unwrap_or(&cc))
}

/// Why the aarch64 probe cannot run from this host, if it cannot: (reason, cross compiler found).
fn aarch64_unavailable() -> Option<(String, bool)> {
    if std::env::consts::ARCH != "x86_64" || target::emulated() {
        return Some((
            format!(
                "the tests run as {}: aarch64 is checked natively here, not from an x86_64 host",
                std::env::consts::ARCH
            ),
            false,
        ));
    }
    let works = |cmd: &str| {
        Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works("aarch64-linux-gnu-gcc") {
        return Some((
            "no aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu libc6-dev-arm64-cross; \
             packaging/deps.sh group aarch64)"
                .to_string(),
            false,
        ));
    }
    if !works("qemu-aarch64") && !works("qemu-aarch64-static") {
        return Some((
            "no qemu-aarch64 (Debian: qemu-user-static; packaging/deps.sh group aarch64)"
                .to_string(),
            true,
        ));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The genuine UMDK headers

struct Umdk {
    root: PathBuf,
}

impl Umdk {
    /// `UMDK_SRC`, the UMDK source tree, if set.
    fn from_env() -> Option<Self> {
        let root = PathBuf::from(std::env::var_os("UMDK_SRC").filter(|v| !v.is_empty())?);
        let umdk = Umdk { root };
        let private = umdk.core().join("urma_private.h");
        assert!(
            private.is_file(),
            "UMDK_SRC={}: no {} (UMDK_SRC names the UMDK source tree, the directory holding src/urma)",
            umdk.root.display(),
            private.display()
        );
        Some(umdk)
    }

    fn core(&self) -> PathBuf {
        self.root.join("src/urma/lib/urma/core")
    }

    fn include_dirs(&self) -> Vec<PathBuf> {
        vec![
            self.core().join("include"),
            self.core(),
            self.root.join("src/urma/common/include"),
        ]
    }

    /// The core library's version (`PROJECT_VERSION` of the core's CMakeLists.txt).
    fn core_version(&self) -> String {
        let path = self.core().join("CMakeLists.txt");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.lines()
            .find_map(|l| {
                let rest = l.trim().strip_prefix("set(PROJECT_VERSION ")?;
                Some(rest.trim_end_matches(')').trim_matches('"').to_string())
            })
            .unwrap_or_else(|| panic!("{}: no set(PROJECT_VERSION ...)", path.display()))
    }

    /// A directory holding the genuine public headers as the SDK installs them
    /// (`ub/umdk/urma/<header>`, links to the source tree's), for what includes them so.
    fn installed_layout(&self) -> PathBuf {
        let dir = work_dir().join(format!("umdk-installed-{}", std::process::id()));
        let headers = dir.join("ub/umdk/urma");
        std::fs::create_dir_all(&headers).expect("mkdir");
        for entry in std::fs::read_dir(self.core().join("include")).expect("core/include") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "h") {
                let link = headers.join(path.file_name().expect("name"));
                let _ = std::fs::remove_file(&link);
                std::os::unix::fs::symlink(&path, &link).expect("symlink");
            }
        }
        dir
    }

    /// Every fact, private ones included, measured on the genuine headers (with `first_include`
    /// searched before them, for the negative control).
    fn probe(
        &self,
        name: &str,
        decls: &Declarations,
        target: Target,
        first_include: Option<&Path>,
    ) -> Facts {
        let constants: Vec<&str> = rust_constants().into_iter().map(|c| c.0).collect();
        let source = probe_source(
            "\"urma_private.h\"",
            &rust_types(),
            &constants,
            &decls.checks(),
        );
        let mut includes: Vec<PathBuf> = first_include.map(Path::to_path_buf).into_iter().collect();
        includes.extend(self.include_dirs());
        // The genuine headers are not ours to keep warning-free.
        run_probe(name, &source, &includes, false, target)
    }
}

fn bless() -> bool {
    std::env::var_os("URMA_SYS_BLESS").is_some_and(|v| v == "1")
}

// ---------------------------------------------------------------------------------------------
// Comparing

fn assert_same(left_name: &str, left: &Facts, right_name: &str, right: &Facts) {
    let d = common::differences(left, right);
    assert!(
        d.is_empty(),
        "{left_name} (left) vs {right_name} (right): {} difference(s):\n{}",
        d.len(),
        d.join("\n")
    );
    println!("{left_name} == {right_name}: {} facts", left.len());
}

/// The subset of `facts` whose keys start with one of `prefixes`.
fn only(facts: &Facts, prefixes: &[&str]) -> Facts {
    facts
        .iter()
        .filter(|(k, _)| prefixes.iter().any(|p| k.starts_with(p)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

const LAYOUT_KINDS: [&str; 4] = ["size ", "align ", "field ", "const "];

/// The layout assertions bindgen wrote into the committed `src/bindings_<arch>.rs` for the public
/// provider types: `size T`, `align T`, `offset T.f`.
fn bindgen_layout(arch: &str) -> Facts {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("src/bindings_{arch}.rs"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let tags: BTreeMap<&str, &str> = rust_types()
        .iter()
        .filter(|t| !t.private)
        .map(|t| (t.c.trim_end_matches("_t"), t.c))
        .collect();
    let mut facts = Facts::new();
    // ["Offset of field: urma_ops::create_jfc"] [::std::mem::offset_of!(urma_ops, create_jfc) - 8usize];
    for piece in flat.split("[\"").skip(1) {
        let Some((label, rest)) = piece.split_once("\"]") else {
            continue;
        };
        let Some(value) = rest
            .split(" - ")
            .nth(1)
            .and_then(|v| v.split("usize").next())
        else {
            continue;
        };
        let (kind, subject) = if let Some(s) = label.strip_prefix("Size of ") {
            ("size", s)
        } else if let Some(s) = label.strip_prefix("Alignment of ") {
            ("align", s)
        } else if let Some(s) = label.strip_prefix("Offset of field: ") {
            ("offset", s)
        } else {
            continue;
        };
        let (tag, field) = match subject.split_once("::") {
            Some((t, f)) => (t, Some(f)),
            None => (subject, None),
        };
        if let Some(c) = tags.get(tag) {
            let key = match field {
                Some(f) => format!("{kind} {c}.{f}"),
                None => format!("{kind} {c}"),
            };
            facts.insert(key, value.to_string());
        }
    }
    facts
}

/// [`bindgen_layout`]'s view of the public facts of a JSON: sizes, alignments and offsets.
fn as_bindgen_layout(facts: &Facts) -> Facts {
    let mut out = Facts::new();
    for (k, v) in facts {
        if let Some(field) = k.strip_prefix("field ") {
            out.insert(format!("offset {field}"), number(v, "offset").to_string());
        } else if k.starts_with("size ") || k.starts_with("align ") {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// abi/provider_static_check.c

fn static_check_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/provider_static_check.c")
}

/// One `_Static_assert` line per public fact of `json`, by fact key.
fn static_assertions(json: &Value) -> BTreeMap<String, String> {
    let check = |cond: &str, what: &str| format!("URMA_PROVIDER_CHECK({cond}, \"{what}\");");
    let same = |cond: String| check(&cond, &cond);
    let mut out = BTreeMap::new();
    for (key, value) in json_facts(json, true) {
        let (kind, subject) = key.split_once(' ').expect("key");
        let line = match kind {
            "size" => same(format!("sizeof({subject}) == {value}")),
            "align" => same(format!("_Alignof({subject}) == {value}")),
            "field" => {
                let (t, f) = subject.split_once('.').expect("field key");
                let (offset, size) = (number(&value, "offset"), number(&value, "size"));
                let size_check = check(
                    &format!("sizeof((({t} *)0)->{f}) == {size}"),
                    &format!("sizeof({t}.{f}) == {size}"),
                );
                format!(
                    "{}\n{size_check}",
                    same(format!("offsetof({t}, {f}) == {offset}"))
                )
            }
            "const" => same(format!("({subject}) == {value}")),
            _ => continue,
        };
        out.insert(key, line);
    }
    let decls = Declarations::from_json(json);
    for (key, expr) in decls.checks() {
        let line = check(&expr, &format!("{key}: {}", decls.0[&key]));
        out.insert(key, line);
    }
    out
}

/// The text of `abi/provider_static_check.c`, from both JSONs: the facts they share, then those
/// that differ in a per-architecture block.
fn static_check_source() -> String {
    let x86 = static_assertions(&json("x86_64"));
    let arm = static_assertions(&json("aarch64"));
    let only = |facts: &BTreeMap<String, String>, other: &BTreeMap<String, String>| -> String {
        facts
            .iter()
            .filter(|(k, v)| other.get(*k) != Some(*v))
            .map(|(_, v)| format!("{v}\n"))
            .collect()
    };
    let shared: String = x86
        .iter()
        .filter(|(k, v)| arm.get(*k) == Some(*v))
        .map(|(_, v)| format!("{v}\n"))
        .collect();
    format!(
        "/* @generated by urma-sys/tests/provider_abi.rs from tests/data/urma_provider_abi_*.json.\n\
         \x20* Do not edit: URMA_SYS_BLESS=1 cargo test -p urma-sys --test provider_abi rewrites it.\n\
         \x20*\n\
         \x20* Compile-time check (no libclang needed) that the urma_provider.h in use has the layout,\n\
         \x20* constants and prototypes the committed bindings encode: build.rs compiles it beside\n\
         \x20* abi_static_check.c when real UMDK headers are used without regenerated bindings. The\n\
         \x20* core-private urma_sysfs_dev_t is not in the installed headers and is not checked here.\n\
         \x20*/\n\
         #include <stddef.h>\n\
         #include <ub/umdk/urma/urma_provider.h>\n\n\
         #define URMA_PROVIDER_CHECK(cond, what) _Static_assert(cond, \"URMA provider ABI mismatch: \" what)\n\n\
         {shared}\n\
         #if defined(__x86_64__)\n{}#elif defined(__aarch64__)\n{}#else\n\
         #error \"URMA provider ABI facts exist for x86_64 and aarch64 only\"\n#endif\n",
        only(&x86, &arm),
        only(&arm, &x86),
    )
}

/// Compiles `abi/provider_static_check.c` against `include_dir`; the compiler's output on failure.
fn compile_static_check(include_dir: &Path, std: &str) -> Result<(), String> {
    let out = Command::new(paths::cc())
        .args([std, "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg(format!("-I{}", include_dir.display()))
        .arg(static_check_path())
        .output()
        .expect("run the C compiler");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn rust_rendering_matches_the_measured_facts() {
    let arch = std::env::consts::ARCH;
    let json = json(arch);
    let expected = only(&json_facts(&json, false), &LAYOUT_KINDS);
    assert_same(
        &format!("Rust rendering ({arch})"),
        &rust_facts(),
        &format!("tests/data/urma_provider_abi_{arch}.json"),
        &expected,
    );
    let ops_slots = rust_types()
        .iter()
        .find(|t| t.c == "urma_ops_t")
        .map(|t| t.fields.len() - 1);
    assert_eq!(ops_slots, Some(99), "urma_ops_t: 99 slots after the name");
}

#[test]
fn json_core_version_has_a_known_sysfs_dev_layout() {
    for arch in ["x86_64", "aarch64"] {
        let json = json(arch);
        let version = json["umdk"]["core_version"]
            .as_str()
            .expect("umdk.core_version");
        let layout = Layout::for_core_version(version)
            .unwrap_or_else(|e| panic!("{}: {e}", json_path(arch).display()));
        assert_eq!(
            json["types"]["urma_sysfs_dev_t"]["size"].as_u64(),
            Some(layout.size() as u64),
            "{arch}: urma_sysfs_dev_t of core {version}"
        );
    }
}

#[test]
fn both_architectures_have_the_same_facts_measured() {
    let keys = |arch| {
        json_facts(&json(arch), false)
            .into_keys()
            .collect::<Vec<_>>()
    };
    assert_eq!(keys("x86_64"), keys("aarch64"));
}

/// Every declaration of the bundled header is in the JSON (so it was checked against the genuine
/// header when the JSON was measured), and nothing else is.
#[test]
fn every_declaration_of_the_bundled_header_is_measured() {
    let header: Vec<String> = Declarations::from_header(&bundled_provider_header())
        .0
        .into_keys()
        .collect();
    let measured: Vec<String> = Declarations::from_json(&json(std::env::consts::ARCH))
        .0
        .into_keys()
        .collect();
    assert_eq!(header, measured);
    let count = |p: &str| header.iter().filter(|k| k.starts_with(p)).count();
    assert_eq!(
        (
            count("slot urma_ops_t."),
            count("slot urma_provider_ops_t."),
            count("function "),
            count("typedef "),
            count("tag ")
        ),
        (99, 6, 3, 1, 11)
    );
}

#[test]
fn bundled_header_matches_the_measured_facts() {
    let arch = std::env::consts::ARCH;
    let json = json(arch);
    let c = bundled_probe(
        "bundled",
        Path::new(urma_sys::bundled_include_dir()),
        &Declarations::from_json(&json),
        Target::Native,
    );
    assert_same(
        &format!("bundled urma_provider.h, C probe ({arch})"),
        &c,
        &format!("public facts of tests/data/urma_provider_abi_{arch}.json"),
        &json_facts(&json, true),
    );
}

#[test]
fn aarch64_bundled_header_and_bindings_match_the_measured_facts() {
    if let Some((why, _)) = aarch64_unavailable() {
        println!("skipped the aarch64 check from this host: {why}");
        return;
    }
    let json = json("aarch64");
    let expected = json_facts(&json, true);
    let c = bundled_probe(
        "bundled-aarch64",
        Path::new(urma_sys::bundled_include_dir()),
        &Declarations::from_json(&json),
        Target::Aarch64,
    );
    assert_same(
        "bundled urma_provider.h, C probe (aarch64, qemu)",
        &c,
        "public facts of tests/data/urma_provider_abi_aarch64.json",
        &expected,
    );
    assert_same(
        "layout assertions of src/bindings_aarch64.rs",
        &bindgen_layout("aarch64"),
        "public facts of tests/data/urma_provider_abi_aarch64.json",
        &as_bindgen_layout(&only(&expected, &["size ", "align ", "field "])),
    );
}

#[test]
fn genuine_headers_match_the_measured_facts_and_the_rust_rendering() {
    let Some(umdk) = Umdk::from_env() else {
        println!(
            "UMDK_SRC not set: skipped the comparison with the genuine UMDK headers (the Rust \
             rendering and the bundled header are checked against the committed facts)"
        );
        return;
    };
    let version = umdk.core_version();
    let header_decls = Declarations::from_header(&bundled_provider_header());
    let mut targets = vec![Target::Native];
    match aarch64_unavailable() {
        None => targets.push(Target::Aarch64),
        Some((why, true)) => panic!("UMDK_SRC is set and aarch64-linux-gnu-gcc exists, but {why}"),
        Some((why, false)) => println!("skipped the genuine aarch64 comparison: {why}"),
    }
    for target in targets {
        let arch = target.arch();
        let name = format!("genuine-{arch}");
        if bless() {
            let measured = umdk.probe(&name, &header_decls, target, None);
            let incompatible: Vec<&String> = measured
                .iter()
                .filter(|(_, v)| *v == "INCOMPATIBLE")
                .map(|(k, _)| k)
                .collect();
            assert!(
                incompatible.is_empty(),
                "the bundled urma_provider.h disagrees with the genuine header: {incompatible:?}"
            );
            let text = render_json(
                arch,
                &compiler_version(target),
                &version,
                &measured,
                &header_decls,
            );
            std::fs::write(json_path(arch), text).expect("write JSON");
            println!(
                "wrote {} from {}",
                json_path(arch).display(),
                umdk.root.display()
            );
            continue;
        }
        let json = json(arch);
        assert_eq!(
            json["umdk"]["core_version"].as_str(),
            Some(version.as_str()),
            "{}: measured on another core version than UMDK_SRC's; remeasure with URMA_SYS_BLESS=1 \
             (and pin its urma_sysfs_dev_t in urma_sys::provider::sysfs_dev)",
            json_path(arch).display()
        );
        let measured = umdk.probe(&name, &Declarations::from_json(&json), target, None);
        assert_same(
            &format!("genuine UMDK headers, C probe ({arch})"),
            &measured,
            &format!("tests/data/urma_provider_abi_{arch}.json"),
            &json_facts(&json, false),
        );
        if target == Target::Native {
            let installed = umdk.installed_layout();
            compile_static_check(&installed, "-std=gnu11").unwrap_or_else(|e| {
                panic!("abi/provider_static_check.c fails on the genuine headers:\n{e}")
            });
            let _ = std::fs::remove_dir_all(&installed);
            println!("abi/provider_static_check.c passes on the genuine headers");
            assert_same(
                &format!("Rust rendering ({arch})"),
                &rust_facts(),
                &format!("genuine UMDK headers ({arch})"),
                &only(&measured, &LAYOUT_KINDS),
            );
        }
    }
    Layout::for_core_version(&version).unwrap_or_else(|e| panic!("UMDK_SRC: {e}"));
}

/// The committed `abi/provider_static_check.c` is what the JSONs give, and passes on the
/// bundled header in C99 and GNU11.
#[test]
fn static_check_is_fresh_and_passes_on_the_bundled_header() {
    let fresh = static_check_source();
    if bless() {
        std::fs::write(static_check_path(), &fresh).expect("write static check");
        println!("wrote {}", static_check_path().display());
    }
    let committed = std::fs::read_to_string(static_check_path()).unwrap_or_default();
    assert!(
        committed == fresh,
        "abi/provider_static_check.c is stale: URMA_SYS_BLESS=1 cargo test -p urma-sys --test \
         provider_abi rewrites it"
    );
    for std in ["-std=c99", "-std=gnu11"] {
        compile_static_check(Path::new(urma_sys::bundled_include_dir()), std)
            .unwrap_or_else(|e| panic!("abi/provider_static_check.c ({std}):\n{e}"));
    }
}

/// The bundled `urma_provider.h` compiles cleanly as C99 (pedantic), GNU11 and GNU++17, like the
/// rest of the header set.
#[test]
fn bundled_provider_header_compiles_cleanly() {
    let dir = work_dir();
    let (c, cpp) = (
        dir.join("include_provider.c"),
        dir.join("include_provider.cpp"),
    );
    let source = "#include <ub/umdk/urma/urma_provider.h>\nint main(void) { return 0; }\n";
    std::fs::write(&c, source).expect("write");
    std::fs::write(&cpp, source.replace("(void)", "()")).expect("write");
    let include = format!("-I{}", urma_sys::bundled_include_dir());
    let warnings = ["-Wall", "-Wextra", "-Werror", "-fsyntax-only"];
    for std in ["-std=c99", "-std=gnu11"] {
        let pedantic = if std == "-std=c99" {
            "-pedantic-errors"
        } else {
            "-pedantic"
        };
        target::run(
            Command::new(paths::cc())
                .args([std, pedantic])
                .args(warnings)
                .arg(&include)
                .arg(&c),
        );
    }
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    target::run(
        Command::new(cxx)
            .arg("-std=gnu++17")
            .args(warnings)
            .arg(&include)
            .arg(&cpp),
    );
}

// ---- negative controls ----------------------------------------------------------------------

/// The comparison reports a shifted slot, and only it.
#[test]
fn negative_control_a_shifted_fact_is_reported() {
    let expected = only(
        &json_facts(&json(std::env::consts::ARCH), false),
        &LAYOUT_KINDS,
    );
    let mut shifted = expected.clone();
    let key = "field urma_ops_t.poll_jfc".to_string();
    let offset = number(&shifted[&key], "offset");
    shifted.insert(key.clone(), format!("offset {} size 8", offset + 8));
    let d = common::differences(&rust_facts(), &shifted);
    println!(
        "negative control (facts with poll_jfc moved by 8 bytes):\n{}",
        d.join("\n")
    );
    assert_eq!(
        d,
        vec![format!(
            "{key}: offset {offset} size 8 | offset {} size 8",
            offset + 8
        )]
    );
}

/// A copy of the bundled header with `urma_match_entry_t.vendor_id` widened to 32 bits and
/// `poll_jfc`'s `cr_cnt` made unsigned is reported as exactly those differences.
#[test]
fn negative_control_a_perturbed_bundled_header_is_reported() {
    let copy = work_dir().join(format!("perturbed-include-{}", std::process::id()));
    let header_dir = copy.join("ub/umdk/urma");
    std::fs::create_dir_all(&header_dir).expect("mkdir");
    let bundled = Path::new(urma_sys::bundled_include_dir()).join("ub/umdk/urma");
    for entry in std::fs::read_dir(&bundled).expect("bundled headers") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), header_dir.join(entry.file_name())).expect("copy header");
    }
    let provider = header_dir.join("urma_provider.h");
    let text = std::fs::read_to_string(&provider).expect("read");
    let perturbed = replace_once(&text, "    uint16_t vendor_id;", "    uint32_t vendor_id;");
    let perturbed = replace_once(
        &perturbed,
        "int (*poll_jfc)(urma_jfc_t *jfc, int cr_cnt,",
        "int (*poll_jfc)(urma_jfc_t *jfc, unsigned int cr_cnt,",
    );
    std::fs::write(&provider, perturbed).expect("write");

    let json = json(std::env::consts::ARCH);
    let c = bundled_probe(
        "perturbed",
        &copy,
        &Declarations::from_json(&json),
        Target::Native,
    );
    let static_check = compile_static_check(&copy, "-std=gnu11");
    let _ = std::fs::remove_dir_all(&copy);
    let errors = static_check.expect_err("the static check passed on the perturbed header");
    let failed: Vec<&str> = errors
        .lines()
        .filter(|l| l.contains("error: static assertion failed"))
        .filter_map(|l| l.split("URMA provider ABI mismatch: ").nth(1))
        .map(|what| what.trim_end_matches('"'))
        .collect();
    println!(
        "negative control (abi/provider_static_check.c on it):\n{}",
        failed.join("\n")
    );
    for what in [
        "sizeof(urma_match_entry_t) == 4",
        "offsetof(urma_match_entry_t, device_id) == 2",
        "slot urma_ops_t.poll_jfc",
    ] {
        assert!(
            failed.iter().any(|f| f.contains(what)),
            "{what} not reported:\n{errors}"
        );
    }
    let d = common::differences(&c, &json_facts(&json, true));
    println!(
        "negative control (bundled header, vendor_id widened, poll_jfc retyped):\n{}",
        d.join("\n")
    );
    let keys: Vec<&str> = d
        .iter()
        .map(|l| l.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(
        keys,
        [
            "align urma_match_entry_t",
            "field urma_match_entry_t.device_id",
            "field urma_match_entry_t.vendor_id",
            "size urma_match_entry_t",
            "slot urma_ops_t.poll_jfc",
        ]
    );
}

/// With `UMDK_SRC`: a copy of the genuine `urma_private.h` with `urma_sysfs_dev_t.flag` widened
/// to 64 bits, searched first, is reported as exactly that difference.
#[test]
fn negative_control_a_perturbed_genuine_private_header_is_reported() {
    let Some(umdk) = Umdk::from_env() else {
        println!("UMDK_SRC not set: skipped the negative control on the genuine private header");
        return;
    };
    let dir = work_dir().join(format!("perturbed-private-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let text = std::fs::read_to_string(umdk.core().join("urma_private.h")).expect("read");
    std::fs::write(
        dir.join("urma_private.h"),
        replace_once(&text, "    uint32_t flag;", "    uint64_t flag;"),
    )
    .expect("write");
    let json = json(std::env::consts::ARCH);
    let measured = umdk.probe(
        "genuine-perturbed",
        &Declarations::from_json(&json),
        Target::Native,
        Some(&dir),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let d = common::differences(&measured, &json_facts(&json, false));
    println!(
        "negative control (genuine urma_private.h, flag widened):\n{}",
        d.join("\n")
    );
    assert_eq!(
        d,
        ["field urma_sysfs_dev_t.flag: offset 928 size 8 | offset 928 size 4"]
    );
}

fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} must occur once");
    text.replacen(from, to, 1)
}
