#!/usr/bin/env python3
"""Generate the committed ABI tables of urma-sys from the URMA ABI JSON.

Usage: tools/gen_abi_table.py  (reads tests/data/urma_abi_{x86_64,aarch64}.json)

Writes
  tests/data/abi_table.rsevery size, alignment, field offset/size, bitfield
                         position/width, constant value, enum underlying type
                         and function prototype of the JSON, each with the Rust
                         expression that measures it on the bindings and the C
                         expression the probe in tests/abi_layout.rs measures.
  abi/abi_static_check.c _Static_assert()s of the same facts (except bitfield
                         positions, which C cannot test at compile time) that
                         build.rs compiles against real UMDK headers. Facts
                         that differ between the architectures are checked
                         per architecture (`#if defined(__x86_64__)` ...).

Both JSON files must hold the same set of facts (the table of Rust and C
expressions is the same on every architecture; only the expected values differ).

Rust paths through anonymous unions (`__bindgen_anon_N`) are resolved by reading
src/bindings_x86_64.rs (the field names are the same in every architecture's
bindings), so run this after regenerating the bindings.
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
DATA = os.path.join(CRATE, "tests", "data")
# Architecture -> the compiler's predefined macro for it.
ARCHES = {"x86_64": "__x86_64__", "aarch64": "__aarch64__"}


def rust_name(ctype):
    return ctype.replace("struct ", "").replace("union ", "").strip()


class Bindings:
    """Just enough of src/bindings_<arch>.rs: struct/union fields and type aliases."""

    def __init__(self, text):
        self.fields = {}
        self.alias = {}
        for m in re.finditer(r"pub (?:struct|union) (\w+) \{(.*?)\n\}", text, re.S):
            flds = {}
            for fm in re.finditer(r"pub (\w+): ([^,]+),", m.group(2)):
                flds[fm.group(1)] = fm.group(2).strip()
            self.fields[m.group(1)] = flds
        for m in re.finditer(r"pub type (\w+) = (\w+);", text):
            self.alias[m.group(1)] = m.group(2)
        for m in re.finditer(r"pub use self::(\w+) as (\w+);", text):
            self.alias[m.group(2)] = m.group(1)

    def resolve(self, ty):
        while ty in self.alias:
            ty = self.alias[ty]
        return ty

    def find(self, ty, name):
        """Rust path (list) of member `name` in `ty`, looking into anon unions."""
        ty = self.resolve(ty)
        flds = self.fields.get(ty)
        if flds is None:
            return None
        for cand in (name, name + "_"):  # bindgen appends _ to Rust keywords
            if cand in flds:
                return [cand], flds[cand]
        for f, fty in flds.items():
            if f.startswith("__bindgen_anon_"):
                sub = self.find(fty, name)
                if sub is not None:
                    return [f] + sub[0], sub[1]
        return None

    def path(self, ty, cpath):
        out = []
        for part in cpath.split("."):
            found = self.find(ty, part)
            if found is None:
                raise SystemExit(f"cannot resolve {ty}.{cpath} ({part}) in src/bindings_x86_64.rs")
            out += found[0]
            ty = found[1]
        return ".".join(out)


C_TO_RUST = {
    "int": "::std::os::raw::c_int",
    "char": "::std::os::raw::c_char",
    "bool": "bool",
    "uint32_t": "u32",
    "uint64_t": "u64",
    "void": "::std::os::raw::c_void",
}


def rust_param_type(ctype):
    ctype = ctype.strip()
    stars = ctype.count("*")
    base = ctype.replace("*", "").strip()
    base = C_TO_RUST.get(base, base)
    return "*mut " * stars + base


def parse_proto(name, proto):
    m = re.fullmatch(r"(.*?)\b" + name + r"\((.*)\)", proto)
    ret, args = m.group(1).strip(), m.group(2).strip()
    params = []
    if args != "void":
        for a in args.split(","):
            a = a.strip()
            arr = a.endswith("[]")
            if arr:
                a = a[:-2].strip()
            am = re.fullmatch(r"(.*?)(\w+)", a)
            ty = am.group(1).strip()
            if arr:
                ty += " *"
            params.append(rust_param_type(ty))
    rret = "" if ret == "void" else " -> " + rust_param_type(ret)
    return f'unsafe extern "C" fn({", ".join(params)}){rret}', ret + " (*)(" + args + ")"


def rs_str(s):
    return json.dumps(s)


def main():
    per_arch = {}
    for arch in ARCHES:
        with open(os.path.join(DATA, f"urma_abi_{arch}.json")) as f:
            per_arch[arch] = json.load(f)
    abi = per_arch["x86_64"]
    for arch, a in per_arch.items():
        for part in ("types", "bitfields", "enum_types", "enums", "functions"):
            if a[part].keys() != abi[part].keys():
                raise SystemExit(f"{arch}: `{part}` names differ from x86_64")
        for t, v in a["types"].items():
            if v.get("fields", {}).keys() != abi["types"][t].get("fields", {}).keys():
                raise SystemExit(f"{arch}: fields of {t} differ from x86_64")
    with open(os.path.join(CRATE, "src", "bindings_x86_64.rs")) as f:
        b = Bindings(f.read())
    # C checks of facts that differ between architectures: arch -> lines.
    arch_cs = {arch: [] for arch in ARCHES}

    def check(cs_line):
        """cs_line(abi) -> the _Static_assert line for that architecture's facts."""
        lines = {arch: cs_line(a) for arch, a in per_arch.items()}
        if len(set(lines.values())) == 1:
            cs.append(lines["x86_64"])
        else:
            for arch, line in lines.items():
                arch_cs[arch].append(line)

    rs = [
        "// @generated by urma-sys/tools/gen_abi_table.py from tests/data/urma_abi_*.json and",
        "// src/bindings_x86_64.rs. Do not edit: rerun the script. Used by tests/abi_layout.rs,",
        "// which defines the macros. One entry per ABI fact:",
        "// (fact key, what the C probe measures, what the Rust bindings measure).",
        "",
        "fn abi_table() -> Vec<Fact> {",
        "    vec![",
    ]
    cs = [
        "/* @generated by urma-sys/tools/gen_abi_table.py from tests/data/urma_abi_*.json.",
        " * Do not edit: rerun the script.",
        " *",
        " * Compile-time check (no libclang needed) that the URMA headers in use have",
        " * the layout, constants and prototypes the committed bindings encode.",
        " * build.rs compiles it when real UMDK headers are used without regenerated",
        " * bindings. Bitfield positions are checked by `cargo test -p urma-sys` only.",
        " * Facts that differ between x86_64 and aarch64 (the handle structs that",
        " * embed pthread_mutex_t) are checked in the per-architecture block at the end.",
        " */",
        "#include <stddef.h>",
        "#include <ub/umdk/urma/urma_api.h>",
        "",
        "#define URMA_ABI_CHECK(cond, what) _Static_assert(cond, \"URMA ABI mismatch: \" what)",
        "",
    ]

    for t, v in abi["types"].items():
        r = rust_name(t)
        rs.append(f"        size!({rs_str(t)}, {r}),")
        rs.append(f"        align!({rs_str(t)}, {r}),")
        check(lambda a: f'URMA_ABI_CHECK(sizeof({t}) == {a["types"][t]["size"]}, "sizeof({t}) == {a["types"][t]["size"]}");')
        check(lambda a: f'URMA_ABI_CHECK(_Alignof({t}) == {a["types"][t]["align"]}, "_Alignof({t}) == {a["types"][t]["align"]}");')
        for fpath in v.get("fields", {}):
            rp = b.path(r, fpath)
            rs.append(f"        field!({rs_str(t)}, {rs_str(fpath)}, {r}, {rp}),")

            def fv(a):
                return a["types"][t]["fields"][fpath]

            check(
                lambda a: f'URMA_ABI_CHECK(offsetof({t}, {fpath}) == {fv(a)["offset"]}, "offsetof({t}, {fpath}) == {fv(a)["offset"]}");'
            )
            check(
                lambda a: f'URMA_ABI_CHECK(sizeof((({t} *)0)->{fpath}) == {fv(a)["size"]}, "sizeof({t}.{fpath}) == {fv(a)["size"]}");'
            )
    for key, bf in abi["bitfields"].items():
        t = bf["container_type"]
        r = rust_name(t)
        member = bf["access"].split(".")[-1]
        vty = {1: "u8", 4: "u32", 8: "u64"}[bf["container_size"]]
        rs.append(f"        bit!({rs_str(t)}, {rs_str(bf['access'])}, {r}, {vty}, set_{member}),")
    for t, e in abi["enum_types"].items():
        if "size" not in e:
            continue
        rs.append(f"        enum_type!({rs_str(t)}, {t}),")
        check(lambda a: f'URMA_ABI_CHECK(sizeof({t}) == {a["enum_types"][t]["size"]}, "sizeof({t}) == {a["enum_types"][t]["size"]}");')

        def under(a):
            u = a["enum_types"][t]["underlying"]
            return f'URMA_ABI_CHECK(_Generic(({t})0, int: 1, unsigned int: 2, default: 0) == {1 if u == "int" else 2}, "{t} is {u}");'

        check(under)
    for name in abi["enums"]:
        rs.append(f"        constant!({name}),")

        def const(a):
            val = a["enums"][name]
            lit = f"{val}LL" if val >= 0 else f"({val}LL)"
            return f'URMA_ABI_CHECK((long long)({name}) == {lit}, "{name} == {val}");'

        check(const)
    for name, proto in abi["functions"].items():
        rty, cptr = parse_proto(name, proto)
        rs.append(f"        function!({name}, {rs_str(proto)}, {rty}),")
        check(
            lambda a: f'URMA_ABI_CHECK(__builtin_types_compatible_p(__typeof__(&{name}), {parse_proto(name, a["functions"][name])[1]}), "{a["functions"][name]}");'
        )
    rs += ["    ]", "}", ""]
    first = True
    for arch, macro in ARCHES.items():
        cs.append(f'#{"if" if first else "elif"} defined({macro})')
        cs.append(f"/* {arch} */")
        cs += arch_cs[arch]
        first = False
    cs.append("#else")
    cs.append('#error "URMA ABI facts exist for x86_64 and aarch64 only"')
    cs.append("#endif")
    cs.append("")
    with open(os.path.join(CRATE, "tests", "data", "abi_table.rs"), "w") as f:
        f.write("\n".join(rs))
    with open(os.path.join(CRATE, "abi", "abi_static_check.c"), "w") as f:
        f.write("\n".join(cs))


if __name__ == "__main__":
    main()
