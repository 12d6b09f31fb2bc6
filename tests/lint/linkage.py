#!/usr/bin/env python3
"""linkage.py: keeps isostack-client fit to be loaded into someone else's
process. Why: the Slurm SPANK plugin will be a .so inside slurmstepd, and the
CNI plugin a binary on every node; a global symbol of ours without the iso_
prefix can clash with slurmstepd's own or another plugin's, and a library of
the server's (SQLite, libmicrohttpd, libibmad...) has no business there.
Nothing in the compiler stops either, so two checks do:

  linkage.py exports SO
      every symbol SO defines in its dynamic symbol table starts with iso_
      (SO is tests/lint's probe: isostack-client and isostack-core linked
      whole into one shared module, so everything either could export);
  linkage.py needed FILE [--ninja build.ninja --target NAME] --forbid LIB...
                      [--forbid-loaded LIB...]
      no NEEDED entry of FILE (readelf -d) names a forbidden library and,
      with --ninja, neither does the link line meson wrote for NAME (what the
      target declares it needs, before --as-needed drops what goes unused).
      A --forbid-loaded library is only checked in NEEDED: one that a library
      FILE links declares for code FILE does not use (Lua, for isostack-core's
      admission policies) may be on the link line, never loaded.

Exit 0 when clean, 1 with one line a problem, 2 when a tool fails.
  linkage.py --self-test   the parsers against made-up tool output
"""

import argparse
import re
import subprocess
import sys

# Defined by the toolchain in every shared object, not by our code.
LINKER_SYMBOLS = {"_init", "_fini", "_edata", "_end", "__bss_start"}
# The linker's bounds of a section S (__start_S, __stop_S: coverage counters in
# the fuzzing build) are not ours either.
LINKER_PREFIXES = ("__start_", "__stop_")
# AddressSanitizer's one-definition-rule indicator of an exported global g is
# __odr_asan.g: it is g's to judge.
ASAN_ODR = "__odr_asan."


def run(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"linkage: {' '.join(cmd)} failed: {e}")
        sys.exit(2)


def exported(nm_output):
    """Names of the defined symbols in `nm -D --defined-only` output."""
    names = []
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) == 3:
            names.append(parts[2].split("@")[0])
    return names


def bad_exports(names):
    names = {n[len(ASAN_ODR):] if n.startswith(ASAN_ODR) else n for n in names}
    return sorted(n for n in names if not n.startswith("iso_") and n not in LINKER_SYMBOLS and
                  not n.startswith(LINKER_PREFIXES))


def needed(readelf_output):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf_output)


def link_args(ninja_text, target):
    """The LINK_ARGS meson wrote for the build statement of target."""
    lines = ninja_text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"build {target}:"):
            for follow in lines[i + 1:]:
                if not follow.startswith(" "):
                    break
                m = re.match(r"\s+LINK_ARGS = (.*)", follow)
                if m:
                    return m.group(1).split()
            return []
    return None


def names_lib(token, lib):
    """Whether a NEEDED entry or a link argument names library lib."""
    base = token.rsplit("/", 1)[-1]
    return base == f"-l{lib}" or base.startswith(f"lib{lib}.") or base.startswith(f"lib{lib}-")


def check_exports(path):
    bad = bad_exports(exported(run(["nm", "-D", "--defined-only", path])))
    for n in bad:
        print(f"{path}: exports {n}, which lacks the iso_ prefix (hide it: static, a "
              "private header, or out of ISO_PUBLIC_BEGIN/END)")
    if bad:
        print(f"linkage: {len(bad)} exported symbol(s) without the iso_ prefix")
        return 1
    print(f"linkage: every symbol {path} exports starts with iso_")
    return 0


def check_needed(path, forbid, forbid_loaded, ninja, target):
    problems = []
    for lib in needed(run(["readelf", "-d", path])):
        for f in forbid + forbid_loaded:
            if names_lib(lib, f):
                problems.append(f"{path}: NEEDED {lib}")
    if ninja:
        with open(ninja, encoding="utf-8") as fh:
            args = link_args(fh.read(), target)
        if args is None:
            problems.append(f"{ninja}: no build statement for {target}")
        for a in args or []:
            for f in forbid:
                if names_lib(a, f):
                    problems.append(f"{target}: links {a} ({ninja})")
    for p in problems:
        print(p)
    if problems:
        print(f"linkage: {len(problems)} use(s) of a forbidden library "
              f"({', '.join(forbid + forbid_loaded)}; the server's belong to isostack-server, "
              "meson.build)")
        return 1
    print(f"linkage: {path} needs none of {', '.join(forbid + forbid_loaded)}")
    return 0


def self_test():
    failed = 0
    cases = 0

    def expect(name, got, want):
        nonlocal failed, cases
        cases += 1
        if got != want:
            failed += 1
            print(f"self-test {name}: want {want!r}, got {got!r}")

    nm = ("0000000000001139 T iso_client_new\n                 w __gmon_start__\n"
          "0000000000004010 B __bss_start\n0000000000001200 T canon_put\n"
          "0000000000001300 T iso_log@@ISO_1\n0000000000004020 D tn_tenant_of\n"
          "0000000000004030 B __odr_asan.iso_gpu_sim_ops\n0000000000004040 B __odr_asan.vpool\n"
          "0000000000004050 D __start___sancov_cntrs\n0000000000004060 D __stop___sancov_pcs\n")
    expect("exports", bad_exports(exported(nm)), ["canon_put", "tn_tenant_of", "vpool"])
    expect("exports clean", bad_exports(exported("0000000000001139 T iso_x\n")), [])
    elf = (" 0x0000000000000001 (NEEDED)             Shared library: [libsqlite3.so.0]\n"
           " 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]\n"
           " 0x000000000000000e (SONAME)             Library soname: [libx.so.1]\n")
    expect("needed", needed(elf), ["libsqlite3.so.0", "libc.so.6"])
    ninja = ("build a.p/m.c.o: c_COMPILER ../m.c\n DEPFILE = x\n\n"
             "build isostack-agent: c_LINKER a.p/m.c.o | /usr/lib/libmicrohttpd.so\n"
             " LINK_ARGS = -Wl,--as-needed libisostack-client.a /usr/lib/x/libmicrohttpd.so -lsqlite3\n"
             "\nbuild other: c_LINKER o.o\n LINK_ARGS = -lfoo\n")
    expect("link args", link_args(ninja, "isostack-agent"),
           ["-Wl,--as-needed", "libisostack-client.a", "/usr/lib/x/libmicrohttpd.so", "-lsqlite3"])
    expect("link args missing", link_args(ninja, "nosuch"), None)
    expect("names -l", names_lib("-lsqlite3", "sqlite3"), True)
    expect("names path", names_lib("/usr/lib/x/libmicrohttpd.so", "microhttpd"), True)
    expect("names soname", names_lib("liblua5.4.so.0", "lua5.4"), True)
    expect("names ibmad not ibumad", names_lib("libibumad.so.3", "ibmad"), False)
    expect("names our archive", names_lib("libisostack-client.a", "isostack"), True)
    expect("names other", names_lib("libcurl-gnutls.so.4", "sqlite3"), False)
    print(f"self-test: {cases - failed} of {cases} cases as expected")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--self-test", action="store_true")
    sub = ap.add_subparsers(dest="cmd")
    e = sub.add_parser("exports")
    e.add_argument("path")
    n = sub.add_parser("needed")
    n.add_argument("path")
    n.add_argument("--forbid", nargs="+", required=True)
    n.add_argument("--forbid-loaded", nargs="+", default=[])
    n.add_argument("--ninja")
    n.add_argument("--target")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.cmd == "exports":
        return check_exports(args.path)
    if args.cmd == "needed":
        if args.ninja and not args.target:
            ap.error("--ninja needs --target")
        return check_needed(args.path, args.forbid, args.forbid_loaded, args.ninja, args.target)
    ap.error("exports, needed or --self-test")
    return 2


if __name__ == "__main__":
    sys.exit(main())
