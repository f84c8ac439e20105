#!/usr/bin/env python3
"""scripts/check_layers.py on the source tree (no include against the layer
order) and on small trees that break the order, which it must refuse.

    test_check_layers.py --source-dir DIR
"""
import argparse
import os
import subprocess
import sys
import tempfile


def run(script, root):
    r = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


TARGETS = "relax_target(cpu RELAX_ENABLE_CPU)\nrelax_target(vulkan RELAX_ENABLE_VULKAN)\nrelax_target(cuda RELAX_ENABLE_CUDA)\n"


def tree(root, files):
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    script = os.path.join(args.source_dir, "scripts", "check_layers.py")
    failures = []

    code, out = run(script, args.source_dir)
    print(out)
    if code != 0:
        failures.append("the source tree has includes against the layer order")
    for folder in ("ir", "passes", "backends/vm", "backends/llvm", "tools/driver"):
        if f" {folder} -> " not in out:
            failures.append(f"the include graph does not list {folder}")

    bad_trees = {
        "upward (passes -> backends)": {
            "passes/p.cc": '#include "backends/vm/lower.h"\n',
            "backends/vm/lower.h": "",
        },
        "sibling targets (cuda -> cpu)": {
            "backends/CMakeLists.txt": TARGETS,
            "backends/cuda/c.cc": '#include "backends/cpu/codegen.h"\n',
            "backends/cpu/codegen.h": "",
        },
        "a target below the one it builds on (cpu -> cpu_v2)": {
            "backends/CMakeLists.txt": TARGETS + "relax_target(cpu_v2 RELAX_ENABLE_CPU cpu)\n",
            "backends/cpu/c.cc": '#include "backends/cpu_v2/t.h"\n',
            "backends/cpu_v2/t.h": "",
        },
        "runtime -> ir": {"runtime/r.cc": '#include "ir/expr.h"\n', "ir/expr.h": ""},
        "a folder in no layer": {"backends/common/x.cc": ""},
    }
    for what, files in bad_trees.items():
        with tempfile.TemporaryDirectory() as d:
            tree(d, files)
            code, out = run(script, d)
            if code != 1 or "error" not in out:
                failures.append(f"{what}: not refused (exit {code}):\n{out}")
    good = {"backends/cuda/c.cc": '#include "backends/llvm/codegen.h"\n#include <vector>\n',
            "backends/llvm/codegen.h": '#include "ir/tir.h"\n', "ir/tir.h": "",
            # a target built on another (relax_target's BASE) includes it
            "backends/CMakeLists.txt": TARGETS + "relax_target(cpu_v2 RELAX_ENABLE_CPU cpu)\n",
            "backends/cpu_v2/t.cc": '#include "backends/cpu/codegen.h"\n', "backends/cpu/codegen.h": ""}
    with tempfile.TemporaryDirectory() as d:
        tree(d, good)
        code, out = run(script, d)
        if code != 0:
            failures.append(f"a tree that keeps the order was refused:\n{out}")

    for f in failures:
        print("FAIL:", f)
    print("check_layers:", "all checks passed" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
