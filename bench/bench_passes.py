#!/usr/bin/env python3
"""What the -O2 passes buy on cpu, measured in one run, on the models of
tests/models (GPT-2 with KV cache: prefill and decode; BERT; a CNN):

  - kernels: tensor-program and library calls the main function makes per
    run (what fusion removes), at -O0 and -O2;
  - activation memory at the case's shapes: the bytes the planned storage
    takes against the unplanned total (every intermediate its own
    allocation) and against the peak of a runtime pool that frees each
    tensor at its last use (what the Relax paper compares with), for the
    -O2 package built with upper bounds (--bound) on the symbolic dims;
  - latency: median of relax-run --bench at -O0 and -O2, same inputs,
    same thread count, and the ratio -O0 / -O2 (above 1: -O2 is faster).

    /usr/bin/python3 bench/bench_passes.py --bin build/bin [--runs 50] [--threads 1]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
CASES = [("gpt2_tiny", "b1_s7_p0", "prefill"), ("gpt2_tiny", "b1_s1_p7", "decode"),
         ("gpt2_tiny", "b2_s64_p3", "prefill"), ("bert_tiny", "b1_s64", ""), ("bert_tiny", "b2_s7", ""),
         ("cnn_tiny", "b1_32x32", ""), ("cnn_tiny", "b3_16x24", "")]
# Upper bounds of the symbolic dims, for the planned build.
BOUNDS = {
    "gpt2_tiny": ["batch_size=1..4", "sequence_length=1..64", "past_sequence_length=0..64"],
    "bert_tiny": ["batch=1..4", "sequence=1..64"],
    "cnn_tiny": ["batch=1..4", "height=1..32", "width=1..32"],
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[:400]}")
    return r.stdout


def input_shapes(case_dir):
    shapes = {}
    for k in range(100):
        p = os.path.join(case_dir, f"input_{k}.pb")
        if not os.path.exists(p):
            break
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        shapes[t.name] = list(t.dims)
    return shapes


def bindings(manifest_inputs, shapes):
    """NAME=V for each symbolic dim of the inputs, from the case's shapes."""
    out = {}
    for inp in manifest_inputs:
        dims = shapes.get(inp["name"])
        for d, v in zip(inp.get("shape", []), dims or []):
            if isinstance(d, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", d):
                out[d] = v
    return [f"{k}={v}" for k, v in sorted(out.items())]


def kernel_calls(bin_dir, model_path, level):
    """Kernel and library calls in @main after the passes of -O<level>."""
    text = run([os.path.join(bin_dir, "relax-build"), model_path, f"-O{level}", "--emit", "relax"])
    main = text[text.index("fn @main"):]
    main = main[:main.index("\n}\n")]
    return len(re.findall(r"\bcall_(?:tir|library)\(", main))


def median_ms(bin_dir, pkg, case_dir, runs, threads, env):
    out = run([os.path.join(bin_dir, "relax-run"), pkg, "--test-data", case_dir, "--atol", "1e-5", "--bench",
               str(runs), "--threads", str(threads), "--json"], env=env)
    rep = json.loads(out)
    if not rep.get("ok"):
        raise RuntimeError(f"{pkg} on {case_dir}: outputs differ: {rep.get('outputs')}")
    return rep["bench"]["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    env = dict(os.environ, RELAX_NUM_THREADS=str(args.threads))
    b = args.bin
    print(f"threads {args.threads}, median of {args.runs} runs each; memory in KiB of activations\n")
    print(f"{'model':<10} {'case':<18} {'kern O0':>7} {'kern O2':>7} {'planned':>9} {'unplanned':>9} "
          f"{'pool peak':>9} {'plan/unpl':>9} {'plan/pool':>9} {'O0 ms':>8} {'O2 ms':>8} {'O0/O2':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        pkgs, calls = {}, {}
        for model, case, what in CASES:
            onnx_path = os.path.join(MODELS, model + ".onnx")
            if model not in pkgs:
                p0, p2 = os.path.join(tmp, model + ".O0.rpkg"), os.path.join(tmp, model + ".O2.rpkg")
                run([os.path.join(b, "relax-build"), onnx_path, "-O0", "-o", p0])
                bounds = [x for bd in BOUNDS[model] for x in ("--bound", bd)]
                run([os.path.join(b, "relax-build"), onnx_path, "-O2", "-o", p2] + bounds)
                pkgs[model] = (p0, p2)
                calls[model] = (kernel_calls(b, onnx_path, 0), kernel_calls(b, onnx_path, 2))
            p0, p2 = pkgs[model]
            case_dir = os.path.join(MODELS, "data", model, case)
            planned = unplanned = pool = None
            inspect = os.path.join(b, "relax-inspect")
            if os.path.exists(inspect):
                info = json.loads(run([inspect, p2, "--json"]))
                bind = bindings(info["inputs"], input_shapes(case_dir))
                mem = json.loads(run([inspect, p2, "--json"] + [x for v in bind for x in ("--bind", v)]))["memory"]
                planned, unplanned = mem["planned_bytes"], mem["unplanned_bytes"]
                pool = mem.get("pool_peak_bytes")
            t0 = median_ms(b, p0, case_dir, args.runs, args.threads, env)
            t2 = median_ms(b, p2, case_dir, args.runs, args.threads, env)
            label = case + (f" {what}" if what else "")
            def kib(n):
                return f"{n / 1024:.1f}" if n is not None else "-"

            def ratio(a, c):
                return f"{a / c:.2f}" if a is not None and c else "-"

            print(f"{model:<10} {label:<18} {calls[model][0]:>7} {calls[model][1]:>7} {kib(planned):>9} "
                  f"{kib(unplanned):>9} {kib(pool):>9} {ratio(planned, unplanned):>9} {ratio(planned, pool):>9} "
                  f"{t0:>8.3f} {t2:>8.3f} {t0 / t2:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
