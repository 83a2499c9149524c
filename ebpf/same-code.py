#!/usr/bin/env python3
"""Check that two BPF objects hold the same code: a refactor of the C source changed nothing
the kernel loads.

    ebpf/same-code.py OLD.o NEW.o        exit 0 if the same, 1 (with the differences) if not

Compared, and required identical:
  * the section headers (name, type, flags, size, link, info, alignment; not file offsets),
    the .BTF sections' sizes excepted;
  * the bytes of every section but .BTF and .BTF.ext (and their relocations): every
    program's instructions, the maps (.maps), .rodata, .data, .bss, license, .text, the
    relocations of each program (.rel*), the symbol and string tables;
  * the disassembly (llvm-objdump -d --no-show-raw-insn) and relocations (llvm-readelf -r),
    which say the same as the bytes but readably when they differ;
  * the BTF types, with names (bpftool btf dump file ... format raw): same ids, same types;
  * in .BTF.ext, each section's func_info (instruction, BTF type) and CO-RE relocations
    (instruction, type, access string, kind).
Allowed to differ: .BTF's string table and .BTF.ext's line_info (file names, line numbers
and the source lines' text), and so the two sections' sizes.

Tools: llvm-objdump-19, llvm-readelf-19, llvm-objcopy-19 (LLVM_SUFFIX= to change), bpftool.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

SUFFIX = os.environ.get("LLVM_SUFFIX", "-19")
BTF_SECTIONS = {".BTF", ".BTF.ext", ".rel.BTF", ".rel.BTF.ext"}


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def sections(obj):
    """Section headers of obj as {name: (type, flags, size, link, info, align)}, in order."""
    out = {}
    for line in run("llvm-readelf" + SUFFIX, "-S", "--wide", obj).splitlines():
        line = line.strip()
        if not line.startswith("["):
            continue
        idx_end = line.index("]")
        if line[1:idx_end].strip() in ("Nr", "0"):
            continue  # the heading, the null section
        f = line[idx_end + 1:].split()
        # Name Type Address Off Size ES [Flg] Lk Inf Al (no flags: 9 fields)
        if len(f) == 9:
            f.insert(6, "")
        name, typ, _addr, _off, size, es, flg, lk, inf, al = f
        out[name] = (typ, flg, int(size, 16), es, lk, inf, al)
    return out


def dump(obj, name, tmp):
    path = os.path.join(tmp, "sec")
    run("llvm-objcopy" + SUFFIX, "--dump-section", f"{name}={path}", obj, os.path.join(tmp, "o"))
    with open(path, "rb") as f:
        return f.read()


def btf_strings(btf):
    _magic, _ver, _flags, hdr_len, _toff, _tlen, soff, slen = struct.unpack_from("<HBBIIIII", btf)
    return btf[hdr_len + soff:hdr_len + soff + slen]


def cstr(strs, off):
    end = strs.index(b"\0", off)
    return strs[off:end].decode("utf-8", "replace")


def btf_ext(ext, strs):
    """func_info and core_relo of .BTF.ext, with string offsets resolved: {kind: [records]}."""
    magic, _ver, _flags, hdr_len = struct.unpack_from("<HBBI", ext)
    assert magic == 0xEB9F, "not a .BTF.ext section"
    fi_off, fi_len, _li_off, _li_len = struct.unpack_from("<IIII", ext, 8)
    core_off = core_len = 0
    if hdr_len >= 32:
        core_off, core_len = struct.unpack_from("<II", ext, 24)
    result = {}
    for kind, off, length in (("func_info", fi_off, fi_len), ("core_relo", core_off, core_len)):
        recs = []
        if length:
            p = hdr_len + off
            end = p + length
            rec_size = struct.unpack_from("<I", ext, p)[0]
            p += 4
            while p < end:
                sec_off, n = struct.unpack_from("<II", ext, p)
                p += 8
                sec = cstr(strs, sec_off)
                for _ in range(n):
                    if kind == "func_info":
                        insn, type_id = struct.unpack_from("<II", ext, p)
                        recs.append((sec, insn, type_id))
                    else:
                        insn, type_id, acc, k = struct.unpack_from("<IIII", ext, p)
                        recs.append((sec, insn, type_id, cstr(strs, acc), k))
                    p += rec_size
        result[kind] = recs
    return result


def btf_types(obj):
    """The BTF types of obj: (list of types by id, ref) where ref(id) names a type the way a
    reference to it is compared: named types by kind and name, anonymous ones by what they
    are (recursively), so that two objects whose types differ only in their order (their
    ids) compare equal."""
    types = json.loads(run("bpftool", "-j", "btf", "dump", "file", obj, "format", "raw"))["types"]
    by_id = {t["id"]: t for t in types}
    memo = {}

    def ref(i):
        if i == 0:
            return "void"
        t = by_id[i]
        if t["name"] != "(anon)":
            return f'{t["kind"]} {t["name"]}'
        if i not in memo:
            memo[i] = desc(t)
        return memo[i]

    def canon(v):
        if isinstance(v, dict):
            return {k: (ref(x) if k.endswith("type_id") else canon(x))
                    for k, x in v.items() if k != "id"}
        if isinstance(v, list):
            return [canon(x) for x in v]
        return v

    def desc(t):
        return json.dumps(canon(t), sort_keys=True)

    return [desc(t) for t in types], ref


def diff(what, a, b, failures):
    if a == b:
        return
    failures.append(what)
    if isinstance(a, str) and isinstance(b, str):
        import difflib

        lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "old", "new",
                                          lineterm="", n=1))
        print(f"--- {what} differs:\n" + "\n".join(lines[:40]))
    else:
        print(f"--- {what} differs")


def main():
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    old, new = sys.argv[1:]
    failures = []
    so, sn = sections(old), sections(new)
    diff("section list", list(so), list(sn), failures)
    for name in so:
        if name in sn and name not in BTF_SECTIONS:
            diff(f"section header {name}", so[name], sn[name], failures)
    with tempfile.TemporaryDirectory() as tmp:
        compared = 0
        for name in so:
            if name in BTF_SECTIONS or name not in sn or so[name][0] == "NOBITS":
                continue
            diff(f"bytes of {name}", dump(old, name, tmp), dump(new, name, tmp), failures)
            compared += 1
        bo, bn = dump(old, ".BTF", tmp), dump(new, ".BTF", tmp)
        eo, en = dump(old, ".BTF.ext", tmp), dump(new, ".BTF.ext", tmp)
    diff("disassembly", run("llvm-objdump" + SUFFIX, "-d", "--no-show-raw-insn", old).split("\n", 2)[2],
         run("llvm-objdump" + SUFFIX, "-d", "--no-show-raw-insn", new).split("\n", 2)[2], failures)
    def rel(o):
        blocks = run("llvm-readelf" + SUFFIX, "-r", o).split("\n\n")
        blocks = [re.sub(r" at offset 0x[0-9a-f]+", "", b) for b in blocks if ".rel.BTF" not in b]
        return "\n\n".join(blocks)

    diff("relocations", rel(old), rel(new), failures)
    (to, ref_o), (tn, ref_n) = btf_types(old), btf_types(new)
    diff("BTF types", "\n".join(sorted(to)), "\n".join(sorted(tn)), failures)
    btf_order = "same ids" if to == tn else "same types in another order"
    # func_info and CO-RE relocations: type ids compared as the types they name
    xo, xn = btf_ext(eo, btf_strings(bo)), btf_ext(en, btf_strings(bn))
    for kind in ("func_info", "core_relo"):
        named = lambda recs, ref: "\n".join(str((r[0], r[1], ref(r[2])) + r[3:]) for r in recs)
        diff(f".BTF.ext {kind}", named(xo[kind], ref_o), named(xn[kind], ref_n), failures)
    if failures:
        print(f"{new}: NOT the same code as {old} ({len(failures)} differences)")
        return 1
    print(f"{new}: same code as {old} ({compared} sections byte-identical, "
          f"{len(tn)} BTF types equal ({btf_order}), {len(xn['func_info'])} func_info and "
          f"{len(xn['core_relo'])} CO-RE relocations equal; "
          f".BTF {len(bo)} -> {len(bn)} bytes, .BTF.ext {len(eo)} -> {len(en)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
