#!/usr/bin/env python3
"""Memory planning end to end, and relax-inspect.

Builds a small dynamic-batch MLP with Debian's python3-onnx at -O0, at -O2
and at -O2 with --bound, and checks: relax-inspect lists the inputs with
their symbolic dims, the kernels and the memory figures; the plan's figures
are what the tensors' sizes say (unplanned = sum of the activations at the
bound batch); at -O0 there is no plan (planned == pool); with bounds the
planned storage over a sweep of batch sizes is below the caching pool's
footprint; the planned packages compute the right values at several batch
sizes; an input beyond the bound is refused naming the dim; relax-inspect
refuses unknown dims, values beyond the bounds and a damaged package.

    tests/tools/test_relax_inspect.py --bin build/bin
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run

rng = np.random.default_rng(5)
W1 = rng.standard_normal((8, 16)).astype(np.float32)
W2 = rng.standard_normal((16, 16)).astype(np.float32)
W3 = rng.standard_normal((16, 5)).astype(np.float32)


def mlp():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 5])
    nodes = [helper.make_node("Gemm", ["x", "w1t"], ["h1"], name="mm1", transB=1),
             helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
             helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="mm2"),
             helper.make_node("Tanh", ["h2"], ["r2"], name="tanh2"),
             helper.make_node("MatMul", ["r2", "w3"], ["h3"], name="mm3"),
             helper.make_node("Sigmoid", ["h3"], ["y"], name="out")]
    inits = [nh.from_array(np.ascontiguousarray(W1.T), "w1t"), nh.from_array(W2, "w2"), nh.from_array(W3, "w3")]
    g = helper.make_graph(nodes, "mlp", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference(x):
    r1 = np.maximum(x @ W1, 0)
    r2 = np.tanh(r1 @ W2)
    return 1 / (1 + np.exp(-(r2 @ W3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build = os.path.join(args.bin, "relax-build")
    rrun = os.path.join(args.bin, "relax-run")
    inspect = os.path.join(args.bin, "relax-inspect")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "mlp.onnx")
        with open(model, "wb") as f:
            f.write(mlp().SerializeToString())
        pkgs = {}
        for name, flags in [("o0", ["-O0"]), ("o2", ["-O2"]), ("bound", ["-O2", "--bound", "batch=1..16"]),
                            ("load", ["-O2", "--no-fold"])]:
            pkgs[name] = os.path.join(tmp, name + ".rpkg")
            r = run(build, model, "-o", pkgs[name], *flags)
            check(r.returncode == 0, f"relax-build {flags}: exit {r.returncode}: {r.stderr}")

        def inspect_json(pkg, *binds):
            r = run(inspect, pkg, "--json", *[a for b in binds for a in ("--bind", b)])
            check(r.returncode == 0, f"relax-inspect {pkg} {binds}: exit {r.returncode}: {r.stderr}")
            return json.loads(r.stdout) if r.returncode == 0 else {}

        # The planned IR: explicit storage, destination-passing calls.
        r = run(build, model, "--emit", "relax", "-o", "-", "--bound", "batch=1..16")
        check("alloc_storage(shape(1024))" in r.stdout and "call_library_dps" in r.stdout,
              f"-O2 --bound: no storage planned at the bound (16 x 16 f32 = 1024 bytes): {r.stdout[:1500]}")

        # Figures at batch = 4. Activations h1, r1, h2, r2 (b x 16 f32) and h3
        # (b x 5); y is the output.
        unplanned = 4 * (16 * 4 * 4) + 4 * 5 * 4
        j0 = inspect_json(pkgs["o0"], "batch=4")
        m0 = j0.get("memory", {})
        # -O0 also transposes Gemm's weight (8 x 16 f32) and packs w2 (16 x 16 f32,
        # in 32-column panels: gemm.matmul_pack) on every call.
        check(m0.get("unplanned_bytes") == unplanned + 8 * 16 * 4 + 16 * 32 * 4,
              f"-O0 unplanned bytes: {m0}, expected {unplanned}")
        check(m0.get("planned_bytes") == m0.get("pool_bytes") and m0.get("storages") == 0,
              f"-O0 has no plan, so planned == pool: {m0}")
        check(m0.get("output_bytes") == 4 * 5 * 4, f"-O0 output bytes: {m0}")
        check(j0.get("kernels", 0) >= 3 and j0.get("kernel_calls", 0) >= 3, f"-O0 kernels: {j0.get('kernels')}")
        check([i.get("shape") for i in j0.get("inputs", [])] == [["batch", 8]], f"inputs: {j0.get('inputs')}")

        j2 = inspect_json(pkgs["o2"], "batch=4")
        m2 = j2.get("memory", {})
        # -O2 fuses the relu and the tanh into the products before them (library epilogues): h1 and h2 go.
        unplanned = 4 * (16 * 4 * 2) + 4 * 5 * 4
        check(m2.get("unplanned_bytes") == unplanned, f"-O2 unplanned bytes: {m2}, expected {unplanned}")
        check(m2.get("storages", 0) >= 2 and m2.get("planned_tensors") == m2.get("tensors"),
              f"-O2 plans every activation: {m2}")
        check(0 < m2.get("planned_bytes", 0) < unplanned, f"-O2 planned below unplanned: {m2}")

        jb = inspect_json(pkgs["bound"], "batch=1..16")
        mb = jb.get("memory", {})
        check(mb.get("calls") == 16, f"a sweep of 16 batch sizes is 16 calls: {mb}")
        check(mb.get("planned_bytes") == 2 * 1024, f"bound plan: two storages of 16 x 16 f32: {mb}")
        check(mb.get("planned_bytes", 1 << 40) < mb.get("pool_bytes", 0),
              f"bound plan below the pool over the sweep: {mb}")
        check(jb.get("bounds") == {"batch": [1, 16]}, f"bounds in the package: {jb.get('bounds')}")
        # A dim not given takes its upper bound.
        check(inspect_json(pkgs["bound"]).get("memory", {}).get("bind") == {"batch": "16"}, "default: the bound")

        # Gemm's transposed weight and the packing of w1 and w2 for the product
        # (gemm.matmul_pack: 32-column panels) are weight-only computations: at
        # -O2 they are folded into weights at build time, with --no-fold
        # computed at load (w1 transposed, then packed: 8 x 32; w2: 16 x 32).
        jl = inspect_json(pkgs["load"], "batch=4")
        check([l.get("shape") for l in jl.get("lifted", [])] == [[8 * 32], [16 * 32]],
              f"--no-fold: two weight transforms at load: {jl.get('lifted')}")
        check(j2.get("lifted") == [] and j2.get("kernels", 0) < jl.get("kernels", 0),
              f"-O2 folds the transform (no lifted, fewer kernels): {j2.get('kernels')} vs {jl.get('kernels')}")
        check(j0.get("kernel_calls", 0) > j2.get("kernel_calls", 0), "-O0 transposes the weight on every call")

        # The planned packages compute the right values at several sizes.
        for name in ("o2", "bound", "load", "o0"):
            for b in (1, 3, 16):
                x = rng.standard_normal((b, 8)).astype(np.float32)
                np.save(os.path.join(tmp, "x.npy"), x)
                out = os.path.join(tmp, "out")
                r = run(rrun, pkgs[name], "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out)
                check(r.returncode == 0, f"relax-run {name} batch {b}: exit {r.returncode}: {r.stderr}")
                if r.returncode == 0:
                    y = np.load(os.path.join(out, "y.npy"))
                    check(np.allclose(y, reference(x), rtol=1e-5, atol=1e-5), f"{name} batch {b}: wrong values")
        np.save(os.path.join(tmp, "x.npy"), np.ones((17, 8), np.float32))
        r = run(rrun, pkgs["bound"], "--input", "x=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "batch" in r.stderr and "16" in r.stderr,
              f"batch 17 beyond the bound 16: exit {r.returncode}: {r.stderr}")

        # Text output, and refusals.
        r = run(inspect, pkgs["o2"], "--bind", "batch=2")
        check(r.returncode == 0 and "x: f32[batch, 8]" in r.stdout and "planned:" in r.stdout
              and "kernels:" in r.stdout, f"relax-inspect text: {r.stdout}{r.stderr}")
        r = run(inspect, pkgs["o2"])
        check(r.returncode == 0 and "give --bind for batch" in r.stdout, f"no binding: {r.stdout}{r.stderr}")
        r = run(inspect, pkgs["o2"], "--bind", "nosuch=3")
        check(r.returncode == 1 and "nosuch" in r.stderr, f"unknown dim: exit {r.returncode}: {r.stderr}")
        r = run(inspect, pkgs["bound"], "--bind", "batch=40")
        check(r.returncode == 1 and "1..16" in r.stderr, f"beyond the bound: exit {r.returncode}: {r.stderr}")
        r = run(inspect, pkgs["o2"], "--bind", "batch=x")
        check(r.returncode == 1 and "--bind" in r.stderr, f"bad --bind: exit {r.returncode}: {r.stderr}")
        data = bytearray(open(pkgs["o2"], "rb").read())
        data[len(data) // 2] ^= 0xFF
        bad = os.path.join(tmp, "bad.rpkg")
        open(bad, "wb").write(bytes(data))
        r = run(inspect, bad)
        check(r.returncode == 1 and "bad.rpkg" in r.stderr, f"damaged package: exit {r.returncode}: {r.stderr}")

        # The graph: one box per kernel, edges with symbolic shapes; IR text too; rendered by Graphviz.
        r = run(inspect, pkgs["o2"], "--dot")
        check(r.returncode == 0 and r.stdout.startswith('digraph "o2.rpkg"'), f"--dot: {r.stdout[:200]}{r.stderr}")
        boxes = re.findall(r"^  n\d+ \[label=\"([^\"]*)\"", r.stdout, re.M)
        edges = re.findall(r"^  n\d+ -> n\d+ \[label=\" ([^\"]*)\"", r.stdout, re.M)
        kernels = inspect_json(pkgs["o2"]).get("kernel_calls", -1)
        compiled = [b for b in boxes if not b.startswith(("library ", "input ")) and b != "y"]
        check(len(compiled) == kernels and len(boxes) == kernels + 3 + 2,
              f"--dot: boxes {boxes} for {kernels} kernel calls, 3 library matmuls, an input and an output")
        check("input x" in boxes and "y" in boxes, f"--dot: inputs and outputs by name: {boxes}")
        check("f32[batch, 8]" in edges and "f32[batch, 5]" in edges, f"--dot: edge shapes: {edges}")
        relax_text = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mlp.relax")
        r = run(inspect, relax_text, "--dot")
        # (the first layer's bias and relu are the first product's epilogue: b1 goes into it)
        check(r.returncode == 0 and "fused_add_softmax" in r.stdout and "f32[batch, 256]" in r.stdout
              and re.search(r"n2 -> n\d+ \[label=\" f32\[256\]\"\]", r.stdout),
              f"--dot on IR text: {r.stdout[:300]}{r.stderr}")
        if shutil.which("dot"):
            svg, png = os.path.join(tmp, "g.svg"), os.path.join(tmp, "g.png")
            r = run(inspect, pkgs["o2"], "--svg", svg, "--png", png)
            check(r.returncode == 0, f"--svg/--png: {r.stderr}")
            check(os.path.exists(svg) and "<svg" in open(svg).read() and "batch" in open(svg).read(), "--svg output")
            check(os.path.exists(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "--png output")
            check(not [f for f in os.listdir(tmp) if "tmp" in f], f"temporary files left: {os.listdir(tmp)}")
        else:
            print("graphviz's dot is not installed: --svg/--png not rendered (scripts/setup.sh installs it)")
            r = run(inspect, pkgs["o2"], "--svg", os.path.join(tmp, "g.svg"))
            check(r.returncode == 1 and "graphviz" in r.stderr.lower(), f"--svg without dot: {r.stderr}")
        r = run(inspect, bad, "--dot")
        check(r.returncode == 1 and "bad.rpkg" in r.stderr, f"--dot of a damaged package: {r.stderr}")

    return finish("relax-inspect and memory planning")


if __name__ == "__main__":
    sys.exit(main())
