#!/usr/bin/env python3
"""relax-build and relax-run from the command line.

Builds small models with Debian's python3-onnx and checks: relax-build
writes MODEL.cpu.rpkg (or -o), exits 2 listing unsupported ops and 1 for
broken input, never leaving a file behind; relax-run reads .npy and .pb
inputs, writes outputs as DIR/<sanitised name>.npy with the right values,
compares with --test-data (exit 0 / 1), refuses a damaged package and an
input whose shape breaks the signature, naming the input and the dim;
--json, --bench and --profile work.

    tests/tools/test_relax_build_run.py --bin build/bin
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run, save

W = np.arange(40, dtype=np.float32).reshape(8, 5) / 40 - 0.3


def mlp():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("out/put:0", TensorProto.FLOAT, ["batch", 5])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["out/put:0"], name="act")]
    g = helper.make_graph(nodes, "mlp", [x], [y], [nh.from_array(W, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def unsupported():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("FancyOp", ["x"], ["y"], name="fancy_1", domain="com.example")]
    g = helper.make_graph(nodes, "u", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


def write_pb(arr, name, path):
    with open(path, "wb") as f:
        f.write(nh.from_array(arr, name).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build = os.path.join(args.bin, "relax-build")
    rrun = os.path.join(args.bin, "relax-run")

    # Every tool: --version with the support compiled in, --help with examples and exit statuses.
    for tool in ("relax-build", "relax-run", "relax-import", "relax-inspect", "relax-opt"):
        r = run(os.path.join(args.bin, tool), "--version")
        check(r.returncode == 0 and r.stdout.startswith(tool + " ") and "cpu: " in r.stdout
              and "vulkan: " in r.stdout and "cuda: " in r.stdout, f"{tool} --version: {r.stdout}{r.stderr}")
        r = run(os.path.join(args.bin, tool), "--help")
        check(r.returncode == 0 and "Examples:" in r.stdout and "Exit status" in r.stdout,
              f"{tool} --help: {r.stdout[-600:]}")
        r = run(os.path.join(args.bin, tool), "--no-such-flag")
        check(r.returncode != 0 and r.stdout == "" and r.stderr, f"{tool} --no-such-flag: {r.returncode} {r.stderr}")

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "mlp.onnx")
        save(mlp(), model)

        # Build: default output name, --json.
        r = run(build, model, "--target", "cpu", "--json")
        check(r.returncode == 0, f"relax-build mlp: exit {r.returncode}: {r.stderr}")
        pkg = os.path.join(tmp, "mlp.cpu.rpkg")
        check(os.path.exists(pkg), "relax-build writes MODEL.cpu.rpkg by default")
        rep = json.loads(r.stdout) if r.stdout.strip() else {}
        check(rep.get("ok") is True and rep.get("package") == pkg, f"relax-build --json: {rep}")

        # --print-after prints the IR after that pass on stderr; an unknown
        # pass is an error (exit 1) that writes nothing.
        pa = os.path.join(tmp, "pa.rpkg")
        r = run(build, model, "-o", pa, "--print-after=legalize,fuse-ops")
        check(r.returncode == 0, f"relax-build --print-after: exit {r.returncode}: {r.stderr}")
        check("# IR after legalize" in r.stderr and "# IR after fuse-ops" in r.stderr and "call_tir(" in r.stderr,
              f"--print-after: no IR after legalize and fuse-ops on stderr: {r.stderr[:300]}")
        r = run(build, model, "-o", os.path.join(tmp, "bad.rpkg"), "--print-after=no-such-pass")
        check(r.returncode == 1 and "unknown pass 'no-such-pass'" in r.stderr,
              f"--print-after with an unknown pass: exit {r.returncode}: {r.stderr}")
        check(not os.path.exists(os.path.join(tmp, "bad.rpkg")), "--print-after error still wrote a package")

        # Run on .npy input at two batch sizes; outputs land as sanitised names.
        for batch in (1, 6):
            x = (np.arange(batch * 8, dtype=np.float32).reshape(batch, 8) / 10 - 1.5)
            np.save(os.path.join(tmp, "x.npy"), x)
            out = os.path.join(tmp, f"out{batch}")
            r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out)
            check(r.returncode == 0, f"relax-run batch {batch}: exit {r.returncode}: {r.stderr}")
            path = os.path.join(out, "out_put_0.npy")
            check(os.path.exists(path), f"relax-run writes {path}")
            if os.path.exists(path):
                got = np.load(path)
                want = np.maximum(x @ W, 0)
                check(got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6),
                      f"batch {batch}: wrong values {got} vs {want}")

        # --test-data: a match exits 0, a wrong expected value exits 1.
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        x = np.ones((3, 8), np.float32)
        write_pb(x, "x", os.path.join(data, "input_0.pb"))
        write_pb(np.maximum(x @ W, 0), "out/put:0", os.path.join(data, "output_0.pb"))
        r = run(rrun, pkg, "--test-data", data, "--json")
        check(r.returncode == 0, f"--test-data match: exit {r.returncode}: {r.stdout} {r.stderr}")
        rep = json.loads(r.stdout) if r.stdout.strip() else {}
        check(rep.get("ok") is True and rep["outputs"][0]["match"] is True, f"--test-data --json: {rep}")
        write_pb(np.maximum(x @ W, 0) + 0.5, "out/put:0", os.path.join(data, "output_0.pb"))
        r = run(rrun, pkg, "--test-data", data)
        check(r.returncode == 1 and "MISMATCH" in r.stdout, f"--test-data mismatch: exit {r.returncode}: {r.stdout}")

        # .pb input and --bench.
        r = run(rrun, pkg, "--input", "x=" + os.path.join(data, "input_0.pb"), "--bench", "5")
        check(r.returncode == 0 and "median latency" in r.stdout, f"--bench: {r.stdout} {r.stderr}")
        # --profile of a cpu package: its kernels and library calls by time, with their bytes, over
        # the --bench runs (the two warm ones, not the first).
        r = run(rrun, pkg, "--input", "x=" + os.path.join(data, "input_0.pb"), "--bench", "2", "--profile", "--json")
        rows = json.loads(r.stdout).get("profile", []) if r.returncode == 0 else []
        check(rows and all(k["calls"] == 2 and k["ms"] >= 0 and k["bytes"] > 0 for k in rows),
              f"--profile on cpu: {r.stdout} {r.stderr}")
        # ... against this machine's measured peaks, and a library GEMM with its FLOPs (3 x 8 by 8 x 5, 2 runs).
        peak = json.loads(r.stdout).get("cpu_peak", {}) if r.returncode == 0 else {}
        check(peak.get("fma_gflops_per_core", 0) > 0 and peak.get("copy_gbps", 0) > 0 and peak.get("isa"),
              f"--profile's cpu_peak: {peak}")
        gemm = [k for k in rows if k["kernel"].startswith("blas.matmul")]
        check(len(gemm) == 1 and gemm[0].get("flops") == 2 * 2 * 3 * 8 * 5 and gemm[0].get("gflops", 0) > 0 and
              "flops_share" in gemm[0], f"--profile's GEMM row and its FLOPs: {gemm or rows}")

        # A wrong input shape names the input and the dim.
        np.save(os.path.join(tmp, "bad.npy"), np.ones((2, 7), np.float32))
        r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "bad.npy"))
        check(r.returncode == 1 and "input 'x'" in r.stderr and "dim 1 is 7, expected 8" in r.stderr,
              f"wrong input shape: exit {r.returncode}: {r.stderr}")
        r = run(rrun, pkg, "--input", "y=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "--input y: the model has no input of that name (its inputs: 'x')" in r.stderr,
              f"unknown input: {r.stderr}")

        # The package keeps the model's own names: an ONNX input "input.1"
        # (the IR's parameter input_1) is --input input.1 and named so in
        # errors; the IR's name is refused, listing the real ones.
        dotted = mlp()
        dotted.graph.input[0].name = "input.1"
        dotted.graph.node[0].input[0] = "input.1"
        save(dotted, os.path.join(tmp, "dotted.onnx"))
        dpkg = os.path.join(tmp, "dotted.rpkg")
        r = run(build, os.path.join(tmp, "dotted.onnx"), "-o", dpkg)
        check(r.returncode == 0, f"relax-build dotted: {r.stderr}")
        r = run(rrun, dpkg, "--input", "input.1=" + os.path.join(tmp, "x.npy"), "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["outputs"][0]["name"] == "out/put:0",
              f"--input input.1: exit {r.returncode}: {r.stderr}")
        r = run(rrun, dpkg, "--input", "input_1=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "--input input_1: the model has no input of that name (its inputs: 'input.1')"
              in r.stderr, f"the IR's name: {r.stderr}")
        r = run(rrun, dpkg, "--input", "input.1=" + os.path.join(tmp, "bad.npy"))
        check(r.returncode == 1 and "input 'input.1'" in r.stderr, f"wrong shape names input.1: {r.stderr}")

        # --bound: a dim outside its declared range is refused, naming it.
        bounded = os.path.join(tmp, "bounded.rpkg")
        r = run(build, model, "--bound", "batch=1..4", "-o", bounded)
        check(r.returncode == 0, f"relax-build --bound: {r.stderr}")
        np.save(os.path.join(tmp, "x6.npy"), np.ones((6, 8), np.float32))
        r = run(rrun, bounded, "--input", "x=" + os.path.join(tmp, "x6.npy"))
        check(r.returncode == 1 and "dim 0 (batch) is 6, outside the bounds of batch [1, 4]" in r.stderr,
              f"--bound violation: exit {r.returncode}: {r.stderr}")
        r = run(build, model, "--bound", "batch=oops", "-o", bounded + "2")
        check(r.returncode == 1 and "NAME=LO..HI" in r.stderr, f"bad --bound: {r.stderr}")

        # --max-memory: a run whose tensors would pass it fails naming the
        # tensor and the bytes; under it the same run succeeds; a bad size
        # is a usage error.
        np.save(os.path.join(tmp, "xbig.npy"), np.ones((100000, 8), np.float32))
        r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "xbig.npy"), "--max-memory", "1M")
        check(r.returncode == 1 and "f32[100000, 5]" in r.stderr and "2000000 bytes" in r.stderr
              and "past the cap of 1048576" in r.stderr, f"--max-memory 1M: exit {r.returncode}: {r.stderr}")
        r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "xbig.npy"), "--max-memory", "64M")
        check(r.returncode == 0, f"--max-memory 64M: exit {r.returncode}: {r.stderr}")
        r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "x.npy"), "--max-memory", "lots")
        check(r.returncode == 2 and "--max-memory" in r.stderr, f"--max-memory lots: {r.stderr}")

        # A damaged package is refused.
        blob = bytearray(open(pkg, "rb").read())
        blob[len(blob) // 2] ^= 0x40
        bad_pkg = os.path.join(tmp, "bad.rpkg")
        open(bad_pkg, "wb").write(bytes(blob))
        r = run(rrun, bad_pkg, "--input", "x=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "checksum" in r.stderr, f"damaged package: {r.stderr}")
        open(bad_pkg, "wb").write(b"not a package at all, just some bytes" * 4)
        r = run(rrun, bad_pkg, "--input", "x=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "not a relax package" in r.stderr, f"foreign file: {r.stderr}")

        # Unsupported ops: exit 2, listed, nothing written.
        u = os.path.join(tmp, "u.onnx")
        save(unsupported(), u)
        r = run(build, u, "-o", os.path.join(tmp, "u.rpkg"))
        check(r.returncode == 2 and "FancyOp" in r.stderr and "fancy_1" in r.stderr,
              f"unsupported: exit {r.returncode}: {r.stderr}")
        check(not os.path.exists(os.path.join(tmp, "u.rpkg")), "nothing written for an unsupported model")

        # Broken input: exit 1, nothing written.
        broken = os.path.join(tmp, "broken.onnx")
        open(broken, "wb").write(b"\x08\x07garbage")
        r = run(build, broken, "-o", os.path.join(tmp, "broken.rpkg"))
        check(r.returncode == 1 and "broken.onnx" in r.stderr, f"broken model: exit {r.returncode}: {r.stderr}")
        check(not os.path.exists(os.path.join(tmp, "broken.rpkg")), "nothing written for a broken model")
        leftovers = [f for f in os.listdir(tmp) if ".tmp" in f]
        check(not leftovers, f"temporary files left behind: {leftovers}")

        # A sequence in and out: relax-run reads and compares SequenceProto
        # files in --test-data, names each tensor name[k], refuses --input.
        seq_model = os.path.join(tmp, "seq.onnx")
        save(sequence_model(), seq_model)
        seq_pkg = os.path.join(tmp, "seq.rpkg")
        r = run(build, seq_model, "-o", seq_pkg)
        check(r.returncode == 0, f"relax-build of a sequence model: exit {r.returncode}: {r.stderr}")
        sdata = os.path.join(tmp, "seqdata")
        os.makedirs(sdata)
        parts = [np.arange(4, dtype=np.float32) + k for k in range(3)]
        x = np.full(4, 10, np.float32)
        write_seq(parts, os.path.join(sdata, "input_0.pb"))
        write_pb(x, "x", os.path.join(sdata, "input_1.pb"))
        write_seq(parts[:1] + [x] + parts[1:], os.path.join(sdata, "output_0.pb"))
        write_pb(np.float32(sum(p.mean() for p in parts)) + x, "n", os.path.join(sdata, "output_1.pb"))
        r = run(rrun, seq_pkg, "--test-data", sdata)
        check(r.returncode == 0 and "inserted: a sequence of 4 tensors" in r.stdout and "inserted[3]: match" in r.stdout,
              f"relax-run --test-data with sequences: exit {r.returncode}: {r.stdout} {r.stderr}")
        write_seq(parts + [x], os.path.join(sdata, "output_0.pb"))  # the wrong place
        r = run(rrun, seq_pkg, "--test-data", sdata)
        check(r.returncode == 1 and "inserted[1]: MISMATCH" in r.stdout,
              f"a wrong sequence element: exit {r.returncode}: {r.stdout} {r.stderr}")
        np.save(os.path.join(tmp, "p.npy"), parts[0])
        r = run(rrun, seq_pkg, "--input", "parts=" + os.path.join(tmp, "p.npy"), "--input",
                "x=" + os.path.join(tmp, "p.npy"))
        check(r.returncode == 1 and "a sequence input is read from --test-data" in r.stderr,
              f"--input for a sequence: exit {r.returncode}: {r.stderr}")

    return finish("relax-build / relax-run")


def sequence_model():
    """parts (a sequence of f32[4]) and x: x inserted at position 1, and the
    sum of the first three parts' means plus x."""
    seq_type = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [4]))
    parts = helper.make_value_info("parts", seq_type)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    out = helper.make_value_info("inserted", seq_type)
    n = helper.make_tensor_value_info("n", TensorProto.FLOAT, [4])
    one = helper.make_tensor("one", TensorProto.INT64, [], [1])
    nodes = [helper.make_node("SequenceInsert", ["parts", "x", "one"], ["inserted"]),
             helper.make_node("ConcatFromSequence", ["parts"], ["all"], axis=0, new_axis=1),
             helper.make_node("ReduceMean", ["all"], ["means"], axes=[1], keepdims=0),
             helper.make_node("ReduceSum", ["means"], ["total"], keepdims=0),
             helper.make_node("Add", ["total", "x"], ["n"])]
    g = helper.make_graph(nodes, "s", [parts, x], [out, n], [one])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])


def write_seq(arrs, path):
    seq = onnx.SequenceProto()
    seq.elem_type = onnx.SequenceProto.TENSOR
    for a in arrs:
        seq.tensor_values.append(nh.from_array(a))
    with open(path, "wb") as f:
        f.write(seq.SerializeToString())


if __name__ == "__main__":
    sys.exit(main())
