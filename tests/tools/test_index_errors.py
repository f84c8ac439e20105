#!/usr/bin/env python3
"""An index out of range stops the run with an error naming the node, the
index and the axis, as ONNX Runtime does, on every target that runs here:
Gather, GatherElements, GatherND, ScatterElements and ScatterND whose
indices are model inputs, built at -O0 and -O2 for cpu and (with a Vulkan
device) vulkan, and for cuda where relax-build has it (built, not run: CI
has no GPU). The same packages give numpy's values for indices in range,
negative ones included, so the checks cost no right answer.

    tests/tools/test_index_errors.py --bin build/bin
    tests/tools/test_index_errors.py --bin build/bin --keep DIR        # cuda packages and cases, for a GPU
    tests/tools/test_index_errors.py --bin BIN --packages DIR          # there: relax-run alone runs them
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_check import check, finish, run, save  # noqa: E402

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def model(op, inputs, out_shape, **attrs):
    """One node `op` named after its output 'y'; inputs: (name, elem type, shape)."""
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], name="node_" + op, **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", F, out_shape)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def scatter_elements(x, i, u, axis):
    out = x.copy()
    for idx in np.ndindex(*i.shape):
        at = list(idx)
        at[axis] = i[idx]
        out[tuple(at)] = u[idx]
    return out


def scatter_nd(x, i, u):
    out = x.copy()
    for k in range(i.shape[0]):
        out[tuple(i[k])] = u[k]
    return out


X = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
# (name, model, fixed inputs, good indices, expected output, bad indices, (index, axis, size) named)
CASES = [
    ("Gather", model("Gather", [("x", F, [3, 4]), ("i", I64, ["n"])], [3, "n"], axis=1), {"x": X},
     np.array([0, 3, -4, -1], np.int64), lambda i: np.take(X, i, axis=1),
     np.array([1, 4, 0], np.int64), (4, 1, 4)),
    ("Gather", model("Gather", [("x", F, [3, 4]), ("i", I64, ["n"])], [3, "n"], axis=1), {"x": X},
     np.array([2], np.int64), lambda i: np.take(X, i, axis=1),
     np.array([-5], np.int64), (-5, 1, 4)),
    ("GatherElements", model("GatherElements", [("x", F, [3, 4]), ("i", I32, [3, 2])], [3, 2], axis=0),
     {"x": X}, np.array([[0, 2], [-1, 1], [2, -3]], np.int32), lambda i: np.take_along_axis(X[:, :2], i % 3, axis=0),
     np.array([[0, 2], [1, 3], [2, 0]], np.int32), (3, 0, 3)),
    ("GatherND", model("GatherND", [("x", F, [3, 4]), ("i", I64, ["k", 2])], ["k"]), {"x": X},
     np.array([[0, 1], [2, -1], [-3, 3]], np.int64), lambda i: X[tuple((i % [3, 4]).T)],
     np.array([[0, 1], [1, 9]], np.int64), (9, 1, 4)),
    ("ScatterElements",
     model("ScatterElements", [("x", F, [3, 4]), ("i", I64, [3, 2]), ("u", F, [3, 2])], [3, 4], axis=1),
     {"x": X, "u": -np.arange(6, dtype=np.float32).reshape(3, 2) - 1},
     np.array([[0, 3], [-1, 1], [2, -4]], np.int64),
     lambda i: scatter_elements(X, i % 4, -np.arange(6, dtype=np.float32).reshape(3, 2) - 1, 1),
     np.array([[0, 3], [1, 1], [2, -7]], np.int64), (-7, 1, 4)),
    ("ScatterND", model("ScatterND", [("x", F, [3, 4]), ("i", I64, ["k", 1]), ("u", F, ["k", 4])], [3, 4]),
     {"x": X, "u": np.full((2, 4), -1, np.float32)},
     np.array([[2], [-3]], np.int64), lambda i: scatter_nd(X, i % 3, np.full((2, 4), -1, np.float32)),
     np.array([[2], [3]], np.int64), (3, 0, 3)),
]


def run_case(relax_run, what, pkg, inputs, good, want, bad, expect, tmp):
    """Runs `pkg` on the inputs with the good indices (numpy's values) and
    the bad ones (the error `expect`)."""
    files = []
    for name, value in {**inputs, "i": good}.items():
        files += ["--input", f"{name}={os.path.join(tmp, name + '.npy')}"]
        np.save(os.path.join(tmp, name + ".npy"), value)
    out = os.path.join(tmp, "out")
    r = run(relax_run, pkg, *files, "--output-dir", out)
    check(r.returncode == 0, f"{what}: indices in range refused: {r.stderr.strip()}")
    if r.returncode == 0:
        got = np.load(os.path.join(out, "y.npy"))
        check(np.array_equal(got, want), f"{what}: {got.tolist()} != {want.tolist()}")
    np.save(os.path.join(tmp, "i.npy"), bad)
    r = run(relax_run, pkg, *files)
    msg = r.stderr.strip()
    check(r.returncode == 1, f"{what}: an index out of range ran (exit {r.returncode}): {msg}")
    check(expect in msg, f"{what}: the error should say \"{expect}\", got: {msg}")


def keep_cuda(build, out_dir):
    """Builds the cases' cuda packages into out_dir with what running them needs."""
    os.makedirs(out_dir, exist_ok=True)
    cases = []
    for k, (op, m, fixed, good, want, bad, (index, axis, size)) in enumerate(CASES):
        path = os.path.join(out_dir, f"{op}_{k}.onnx")
        save(m, path)
        pkg = f"{op}_{k}.cuda.rpkg"
        b = run(build, path, "--target", "cuda", "--arch", "sm_90", "-o", os.path.join(out_dir, pkg))
        check(b.returncode == 0, f"{op}: the cuda build failed: {b.stderr.strip()}")
        arrays = {"good": good, "want": want(good), "bad": bad, **{"fixed_" + n: v for n, v in fixed.items()}}
        np.savez(os.path.join(out_dir, f"{op}_{k}.npz"), **arrays)
        cases.append({"package": pkg, "arrays": f"{op}_{k}.npz", "fixed": sorted(fixed),
                      "expect": f"{op} 'y': index {index} is out of range for axis {axis} of size {size}"})
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    return finish(f"index errors: {len(cases)} cuda packages kept in {out_dir}")


def run_kept(relax_run, pkg_dir):
    """Runs the packages keep_cuda wrote (on a machine with the runtime alone)."""
    with open(os.path.join(pkg_dir, "cases.json")) as f:
        cases = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            a = np.load(os.path.join(pkg_dir, c["arrays"]))
            run_case(relax_run, c["package"], os.path.join(pkg_dir, c["package"]),
                     {n: a["fixed_" + n] for n in c["fixed"]}, a["good"], a["want"], a["bad"], c["expect"], tmp)
    return finish(f"index errors: {len(cases)} kept packages")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--keep", help="only build the cuda packages into this folder, for --packages on a GPU machine")
    ap.add_argument("--packages", help="only run the packages --keep wrote (relax-run alone)")
    args = ap.parse_args()
    build, relax_run = os.path.join(args.bin, "relax-build"), os.path.join(args.bin, "relax-run")
    if args.keep:
        return keep_cuda(build, args.keep)
    if args.packages:
        return run_kept(relax_run, args.packages)
    targets = [("cpu", 0), ("cpu", 2)]
    if run(relax_run, "--list-devices").returncode == 0:
        targets += [("vulkan", 0), ("vulkan", 2)]
    else:
        print("no Vulkan device: the vulkan packages are not run")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (op, m, fixed, good, want, bad, (index, axis, size)) in enumerate(CASES):
            path = os.path.join(tmp, f"{op}_{k}.onnx")
            save(m, path)
            cuda = run(build, path, "--target", "cuda", "-o", os.path.join(tmp, f"{op}_{k}.cuda.rpkg"))
            check(cuda.returncode == 0 or "has no cuda target" in cuda.stderr,
                  f"{op}: the cuda build failed: {cuda.stderr.strip()}")
            for target, level in targets:
                what = f"{op} #{k} on {target} at -O{level}"
                pkg = os.path.join(tmp, f"{op}_{k}.{target}.O{level}.rpkg")
                b = run(build, path, "--target", target, f"-O{level}", "-o", pkg)
                check(b.returncode == 0, f"{what}: build failed: {b.stderr.strip()}")
                if b.returncode != 0:
                    continue
                expect = f"{op} 'y': index {index} is out of range for axis {axis} of size {size}"
                run_case(relax_run, what, pkg, fixed, good, want(good), bad, expect, tmp)
    return finish("index errors")


if __name__ == "__main__":
    sys.exit(main())
