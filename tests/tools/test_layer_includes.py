#!/usr/bin/env python3
"""The build enforces the layers: each library sees only the headers of its
own folders and of the layers it links (cmake/RelaxLayers.cmake
relax_header_tree), so an include that runs up the order or across
siblings fails to compile, even of header-only code, while one down the
order compiles. Each case compiles one line with the include folders the
library's own sources get (build/layer-includes/LIB.txt, written by CMake).

    test_layer_includes.py --cxx C++ --includes DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile

# (library, header, compiles?)
CASES = [
    ("relax_runtime", "runtime/tensor.h", True),
    ("relax_runtime", "ir/dtype.h", False),            # up: the IR is above the runtime
    ("relax_ir", "runtime/tensor.h", True),
    ("relax_ir", "ir/ops/common.h", True),              # its own subfolder
    ("relax_ir", "passes/pass.h", False),               # up
    ("relax_ir", "ir/target_traits.h", True),
    ("relax_legalize", "passes/legalize/te.h", True),
    ("relax_legalize", "passes/analysis/op_pattern.h", False),  # a sibling
    ("relax_legalize", "passes/pass.h", False),         # up: passes/ is above its legalisers
    ("relax_passes", "passes/legalize/legalize.h", True),
    ("relax_passes", "backends/target.h", False),       # up
    ("relax_vm", "backends/gpu/schedule.h", False),     # a sibling
    ("relax_vulkan", "backends/gpu/schedule.h", True),
    ("relax_vulkan", "backends/cuda/codegen.h", False),  # another target
    ("relax_target", "tools/driver/build.h", False),    # up
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--includes", required=True)
    args = ap.parse_args()
    failures, ran = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for lib, header, ok in CASES:
            listing = os.path.join(args.includes, lib + ".txt")
            if not os.path.exists(listing):
                print(f"{lib}: not built in this configuration; {header} not tried")
                continue
            with open(listing) as f:
                dirs = [d for d in f.read().split("\n") if d.strip()]
            src = os.path.join(tmp, "probe.cc")
            with open(src, "w") as f:
                f.write(f'#include "{header}"\n')
            cmd = [args.cxx, "-std=c++20", "-fsyntax-only"] + [f"-I{d}" for d in dirs] + [src]
            r = subprocess.run(cmd, capture_output=True, text=True)
            ran += 1
            compiled = r.returncode == 0
            missing = f"{header}: No such file" in r.stderr
            if ok and not compiled:
                failures.append(f"{lib} cannot include {header}, which lies below it:\n{r.stderr[-600:]}")
            elif not ok and compiled:
                failures.append(f"{lib} includes {header}, above it or beside it, and it compiles")
            elif not ok and not missing:
                failures.append(f"{lib} including {header} failed for another reason than its absence:\n"
                                f"{r.stderr[-600:]}")
            else:
                print(f"{lib}: #include \"{header}\" {'compiles' if ok else 'fails: not in its include folders'}")
    for f in failures:
        print("FAIL:", f)
    print(f"layer includes: {ran} cases, {len(failures)} failure(s)")
    return 1 if failures or ran < 8 else 0


if __name__ == "__main__":
    sys.exit(main())
