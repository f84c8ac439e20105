#!/usr/bin/env python3
"""Checks that no #include runs against the layer order (docs/architecture.md).

    scripts/check_layers.py [SOURCE_DIR]        # exit 0: clean; 1: violations listed

The layers, bottom up; a folder may include its own headers and those of
any folder in a lower layer, never a sibling's in its own layer (the
targets know nothing of each other) nor a higher one. The targets are
those backends/CMakeLists.txt lists (relax_target(NAME OPTION [BASE...])):
each backends/NAME is a layer above backends/llvm, and one built on other
targets (BASE: it links them) stands above them.
Prints the include graph by folder, then every violation as
`file:line: folder -> included folder`.
"""
import os
import re
import sys

LAYERS = [
    ["runtime"],
    ["runtime/capi"],  # the C API over the runtime, for embedding
    ["ir"],  # ir and ir/ops: one library
    ["frontends/onnx", "passes/analysis", "passes/legalize"],
    ["passes"],
    ["backends"],  # target.h: the interface every target implements
    ["backends/vm"],
    ["backends/gpu"],
    ["backends/llvm"],
    "TARGETS",  # backends/NAME for each relax_target line, by what they build on
    ["backends/registry"],  # backends/registry.cc: lists the targets
    ["tools/driver"],
    ["tools"],
]
TARGET_LINE = re.compile(r"^\s*relax_target\(\s*(\w+)\s+\w+((?:\s+\w+)*)\s*\)", re.M)


def target_layers(root):
    """The targets' folders as layers: those built on no other first, then
    each above every target it builds on."""
    path = os.path.join(root, "backends", "CMakeLists.txt")
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    bases = {m.group(1): m.group(2).split() for m in TARGET_LINE.finditer(text)}
    depth = {}

    def level(t, seen=()):
        if t not in depth:
            if t in seen:
                raise SystemExit(f"check_layers: targets build on each other in a cycle: {' -> '.join(seen + (t,))}")
            depth[t] = 1 + max((level(b, seen + (t,)) for b in bases[t] if b in bases), default=-1)
        return depth[t]

    layers = {}
    for t in bases:
        layers.setdefault(level(t), []).append(f"backends/{t}")
    return [layers[k] for k in sorted(layers)]
# Folders that are one layer with their parent (one library).
SAME = {"ir/ops": "ir"}
# Files that are their own layer in a shared folder.
FILE_LAYER = {"backends/registry.cc": "backends/registry"}

RANK = {}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    if path in FILE_LAYER:
        return FILE_LAYER[path]
    d = os.path.dirname(path)
    return SAME.get(d, d)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    layers = []
    for layer in LAYERS:
        layers += target_layers(root) if layer == "TARGETS" else [layer]
    RANK.update({folder: i for i, layer in enumerate(layers) for folder in layer})
    edges, bad, unknown = {}, [], []
    for top in ("runtime", "ir", "frontends", "passes", "backends", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                src = folder_of(path)
                if src not in RANK:
                    unknown.append(path)
                    continue
                with open(os.path.join(root, path), encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m or not os.path.exists(os.path.join(root, m.group(1))):
                            continue  # generated headers, system headers
                        dst = folder_of(m.group(1))
                        if dst == src:
                            continue
                        edges.setdefault(src, set()).add(dst)
                        if dst not in RANK or RANK[dst] >= RANK[src]:
                            bad.append(f"{path}:{n}: {src} -> {dst}")
    print("include graph by folder (layer: folder -> folders it includes):")
    for src in sorted(edges, key=lambda s: (RANK[s], s)):
        print(f"  {RANK[src]:2} {src} -> {', '.join(sorted(edges[src], key=lambda d: (RANK.get(d, 99), d)))}")
    for path in unknown:
        print(f"{path}: error: its folder is in no layer (scripts/check_layers.py LAYERS)")
    for b in bad:
        print(f"{b}: error: includes against the layer order")
    if bad or unknown:
        print(f"check_layers: {len(bad)} include(s) against the layer order, {len(unknown)} file(s) outside the layers")
        return 1
    print("check_layers: no include runs against the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
