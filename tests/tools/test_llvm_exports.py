#!/usr/bin/env python3
"""No binary of the build exports a definition of LLVM's own symbols.

Every program that opens a Vulkan device has Mesa's lavapipe, and with it
LLVM 15, in its process next to our LLVM 16. A definition of an LLVM symbol
in an executable's dynamic symbol table (a template our code instantiates:
the vtable of PassModel<Function, SROAPass>, SmallVectorImpl<...>::operator=)
interposes on the same name inside LLVM 15, and its shader compiler then
calls into LLVM 16 with LLVM 15's objects: relax-vulkan-tests died with
SIGSEGV in lavapipe's SROA at its first dispatch. The layers including
LLVM's headers are built with hidden visibility (relax_uses_llvm); this
checks every executable and shared object in bin/ and lib/.

Allowed: symbols versioned @LLVM_16 (copy relocations of libLLVM-16's own
data, which an LLVM 15 reference, versioned @LLVM_15, does not bind to), and
llvm::Any's type identities, which LLVM declares public on purpose
(LLVM_EXTERNAL_VISIBILITY: one address per type in the process) and which
hold neither code nor a layout.

    test_llvm_exports.py --bin BUILD/bin
"""
import argparse
import os
import subprocess
import sys


def exported_llvm(path):
    """The dynamic symbols `path` defines whose demangled name is LLVM's."""
    r = subprocess.run(["nm", "-D", "--defined-only", "-C", path], capture_output=True, text=True)
    if r.returncode != 0:
        return None  # not an ELF file with a dynamic table (a script)
    bad = []
    for line in r.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) < 3:
            continue
        name = parts[2]
        if "@LLVM_" in name or "llvm::Any::" in name:
            continue
        if "llvm::" in name.split("(")[0] or name.startswith(("vtable for llvm::", "typeinfo for llvm::",
                                                              "typeinfo name for llvm::")):
            bad.append(name)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    dirs = [args.bin, os.path.join(os.path.dirname(os.path.abspath(args.bin)), "lib")]
    checked, failures = 0, 0
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            with open(p, "rb") as fh:
                if fh.read(4) != b"\x7fELF":
                    continue
            bad = exported_llvm(p)
            if bad is None:
                continue
            checked += 1
            if bad:
                failures += 1
                print(f"FAIL {p}: exports {len(bad)} of LLVM's symbols, e.g.")
                for name in bad[:5]:
                    print(f"    {name}")
    print(f"{checked} binaries checked, {failures} export LLVM's symbols")
    if checked == 0:
        print("FAIL: no binary found under", dirs)
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
