#!/usr/bin/env python3
"""The cuda target on a GPU, measured against its own alternatives and
PyTorch eager in one run (median latency of relax-run --bench; kernel times
of relax-run --profile):

  latency    the exported models (GPT-2 with a KV cache, BERT, CNN) at small
             batches: the default (CUDA graphs replayed, cuBLAS) beside
             RELAX_CUDA_GRAPH=0 (every kernel launched from the host) and
             --no-cublas (every matmul generated); ratios above 1 mean the
             alternative is slower;
  bandwidth  memory-bound kernels (a fused elementwise chain, a row
             softmax, a row sum) over 256 MiB tensors: GB/s of their
             buffers' bytes and the share of the device's peak (its memory
             clock and bus width), beside PyTorch eager on the same GPU
             where torch with CUDA is installed;
  matmul     f32 products of several sizes: cuBLAS, the generated kernels
             (--no-cublas), and torch.matmul.

    /usr/bin/python3 bench/bench_cuda.py --bin build/bin [--runs 50]

Needs a CUDA driver and a GPU; without one it says so and exits 0. The two
halves can run on two machines (a GPU machine without the compiler):

    bench_cuda.py --bin build/bin --build-only DIR     # relax-build: packages into DIR
    bench_cuda.py --bin DIR2 --packages DIR            # relax-run alone, on the GPU
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
CASES = [("gpt2_tiny", "b1_s1_p7"), ("gpt2_tiny", "b1_s7_p0"), ("gpt2_tiny", "b2_s64_p3"),
         ("bert_tiny", "b1_s64"), ("cnn_tiny", "b1_32x32")]


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    try:
        return json.loads(r.stdout), r.stderr
    except json.JSONDecodeError:
        return None, r.stderr.strip() or r.stdout.strip()


def latency(rrun, pkg, args, runs, env=None):
    rep, err = run_json([rrun, pkg, *args, "--bench", str(runs), "--json"], env)
    if not rep or not rep.get("ok", True) or "bench" not in rep:
        return None, (rep or {}).get("error", err)
    return rep["bench"]["median_ms"], None


def model(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def vi(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def bandwidth_models():
    """Memory-bound graphs over x: f32[rows, 4096]."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    x, y = vi("x", ["rows", 4096]), vi("y", ["rows", 4096])
    return {
        "elementwise": model("ew", [helper.make_node("Mul", ["x", "two"], ["a"]),
                                    helper.make_node("Add", ["a", "one"], ["b"]),
                                    helper.make_node("Relu", ["b"], ["y"])], [x], [y], [two, one]),
        "softmax": model("sm", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [x], [y]),
        "row-sum": model("rs", [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], [x],
                         [vi("y", ["rows", 1])], [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]),
    }


def torch_eager(kind, x, runs):
    """Median ms of PyTorch eager on the GPU, or None without torch+CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    t = torch.from_numpy(x).cuda()
    fn = {"elementwise": lambda: torch.relu(t * 2 + 1), "softmax": lambda: torch.softmax(t, -1),
          "row-sum": lambda: t.sum(-1, keepdim=True)}[kind]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


MATMULS = [(1, 4096, 4096), (16, 4096, 4096), (512, 1024, 1024), (4096, 4096, 4096)]


def build_all(rbuild, out):
    """Every package the bench runs, into `out` (relax-build only)."""
    def build(src, name, extra=()):
        subprocess.run([rbuild, src, "--target", "cuda", *extra, "-o", os.path.join(out, name)], check=True,
                       capture_output=True)

    for m in sorted({m for m, _ in CASES}):
        build(os.path.join(MODELS, m + ".onnx"), f"{m}.default.rpkg")
        build(os.path.join(MODELS, m + ".onnx"), f"{m}.no-cublas.rpkg", ["--no-cublas"])
    for kind, mdl in bandwidth_models().items():
        onnx.save(mdl, os.path.join(out, kind + ".onnx"))
        build(os.path.join(out, kind + ".onnx"), kind + ".rpkg")
    for mm, k, n in MATMULS:
        # b is an input, not a weight: the packages stay small enough to carry.
        path = os.path.join(out, f"mm{mm}.onnx")
        onnx.save(model("mm", [helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", [mm, k]), vi("b", [k, n])],
                        [vi("y", [mm, n])]), path)
        build(path, f"mm{mm}.default.rpkg")
        build(path, f"mm{mm}.no-cublas.rpkg", ["--no-cublas"])


def run_all(rrun, pkgs, tmp, runs):
    """The three tables from the packages in `pkgs` (relax-run only)."""
    pkg = lambda name: os.path.join(pkgs, name)  # noqa: E731
    r = subprocess.run([rrun, pkg("gpt2_tiny.default.rpkg"), "--test-data",
                        os.path.join(MODELS, "data", "gpt2_tiny", CASES[0][1])], capture_output=True, text=True)
    if "cannot run a cuda package" in r.stderr:
        print("no GPU: " + r.stderr.strip().split("cannot run a cuda package: ")[-1])
        return 0

    print(f"== latency: median of {runs} runs; ratios are alternative / default\n")
    print(f"{'model':<10} {'case':<10} {'default ms':>11} {'no graphs':>11} {'no cublas':>11}")
    for m, case in CASES:
        data = ["--test-data", os.path.join(MODELS, "data", m, case), "--atol", "1e-4"]
        base, err = latency(rrun, pkg(f"{m}.default.rpkg"), data, runs)
        if base is None:
            print(f"{m:<10} {case:<10} failed: {err}")
            continue
        nog, _ = latency(rrun, pkg(f"{m}.default.rpkg"), data, runs, {"RELAX_CUDA_GRAPH": "0"})
        nob, _ = latency(rrun, pkg(f"{m}.no-cublas.rpkg"), data, runs)
        ratio = lambda v: f"{v / base:>11.2f}" if v else f"{'failed':>11}"  # noqa: E731
        print(f"{m:<10} {case:<10} {base:>11.3f} {ratio(nog)} {ratio(nob)}")

    print("\n== bandwidth: x f32[16384, 4096] (256 MiB); kernel time from relax-run --profile\n")
    x = np.random.default_rng(0).standard_normal((16384, 4096), dtype=np.float32)
    xpath = os.path.join(tmp, "x.npy")
    np.save(xpath, x)
    for kind in bandwidth_models():
        rep, err = run_json([rrun, pkg(kind + ".rpkg"), "--input", f"x={xpath}", "--bench", str(runs), "--profile",
                             "--json"])
        if not rep or "profile" not in rep:
            print(f"{kind:<12} failed: {err}")
            continue
        ks = [k for k in rep["profile"] if not k["kernel"].startswith("cublas")]
        ms = sum(k["ms"] for k in ks) / (runs + 1)
        best = max(ks, key=lambda k: k["ms"])
        share = f"{100 * best['peak_share']:.0f}% of peak" if "peak_share" in best else "peak unknown"
        te = torch_eager(kind, x, runs)
        vs = f"; torch eager {te:.3f} ms, relax/torch {ms / te:.2f}" if te else "; torch eager: not installed"
        print(f"{kind:<12} {ms:.3f} ms per run, {best['gbps']:.0f} GB/s ({share}) in {best['kernel']}{vs}")

    print("\n== matmul: f32, y = a @ b; kernel time from relax-run --profile\n")
    for mm, k, n in MATMULS:
        apath, bpath = os.path.join(tmp, "a.npy"), os.path.join(tmp, "b.npy")
        np.save(apath, np.random.default_rng(2).standard_normal((mm, k), dtype=np.float32))
        np.save(bpath, np.random.default_rng(1).standard_normal((k, n), dtype=np.float32))
        cells = []
        for variant in ("default", "no-cublas"):
            # The cuBLAS package has no generated kernel to profile: its
            # median latency (one call, inputs copied in, output out) is
            # what it costs. The generated one is timed by --profile.
            prof = ["--profile"] if variant == "no-cublas" else []
            rep, err = run_json([rrun, pkg(f"mm{mm}.{variant}.rpkg"), "--input", f"a={apath}", "--input",
                                 f"b={bpath}", "--bench", str(runs), *prof, "--json"])
            if rep and "profile" in rep:
                ms = sum(x["ms"] for x in rep["profile"]) / (runs + 1)
            else:
                ms = rep["bench"]["median_ms"] if rep and "bench" in rep else None
            cells.append(f"{ms:.3f} ms ({2 * mm * k * n / ms / 1e6:.0f} GFLOP/s)" if ms else f"failed: {err}")
        print(f"{mm}x{k} @ {k}x{n}: cuBLAS (latency) {cells[0]}, generated (kernel time) {cells[1]}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding relax-build and relax-run")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--build-only", metavar="DIR", help="build every package into DIR and stop")
    ap.add_argument("--packages", metavar="DIR", help="run the packages --build-only wrote (no relax-build needed)")
    args = ap.parse_args()
    rbuild, rrun = os.path.join(args.bin, "relax-build"), os.path.join(args.bin, "relax-run")
    if args.build_only:
        os.makedirs(args.build_only, exist_ok=True)
        build_all(rbuild, args.build_only)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        pkgs = args.packages
        if not pkgs:
            pkgs = os.path.join(tmp, "pkgs")
            os.makedirs(pkgs)
            build_all(rbuild, pkgs)
        return run_all(rrun, pkgs, tmp, args.runs)


if __name__ == "__main__":
    sys.exit(main())
