#!/usr/bin/env python3
"""What the -O2 passes buy on cpu, measured in one run, on the models of
tests/models (GPT-2 with KV cache: prefill and decode; BERT; a CNN):

  - kernels: tensor-program and library calls the main function makes per
    run (what fusion removes), at -O0 and -O2;
  - latency: median of relax-run --bench at -O0 and -O2, same inputs,
    same thread count, and the ratio -O0 / -O2 (above 1: -O2 is faster);
  - activation memory over a workload (relax-inspect --bind NAME=LO..HI:
    one call per size, in a row, pools kept between calls, as a server
    keeps them): the -O2 plan built with upper bounds for the workload
    (--bound: constant storage shared by every size), the -O2 plan without
    bounds (symbolic sizes), and a caching pool allocator with no plan
    that frees each tensor after its last use (what the Relax paper
    compares with), on the same -O2 tensors. Outputs are the caller's and
    count in none.

    /usr/bin/python3 bench/bench_passes.py --bin build/bin [--runs 50] [--threads 1]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
CASES = [("gpt2_tiny", "b1_s7_p0", "prefill"), ("gpt2_tiny", "b1_s1_p7", "decode"),
         ("gpt2_tiny", "b2_s64_p3", "prefill"), ("bert_tiny", "b1_s64", ""), ("bert_tiny", "b2_s7", ""),
         ("cnn_tiny", "b1_32x32", ""), ("cnn_tiny", "b3_16x24", "")]
# Upper bounds of the symbolic dims for the latency cases' -O2 build.
BOUNDS = {
    "gpt2_tiny": ["batch_size=1..4", "sequence_length=1..64", "past_sequence_length=0..64"],
    "bert_tiny": ["batch_size=1..4", "sequence_length=1..64"],
    "cnn_tiny": ["batch=1..4", "height=1..32", "width=1..32"],
}
# Memory workloads: (model, label, the --bound of its build, the sweep).
WORKLOADS = [
    ("gpt2_tiny", "prefill s=1..64", ["batch_size=1..1", "sequence_length=1..64", "past_sequence_length=0..0"],
     ["batch_size=1", "sequence_length=1..64", "past_sequence_length=0"]),
    ("gpt2_tiny", "decode p=0..126", ["batch_size=1..1", "sequence_length=1..1", "past_sequence_length=0..126"],
     ["batch_size=1", "sequence_length=1", "past_sequence_length=0..126"]),
    ("bert_tiny", "s=1..64", ["batch_size=1..1", "sequence_length=1..64"], ["batch_size=1", "sequence_length=1..64"]),
    ("cnn_tiny", "hw=8..32", ["batch=1..1", "height=8..32", "width=8..32"], ["batch=1", "height=8..32", "width=8..32"]),
]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[:400]}")
    return r.stdout


def kernel_calls(bin_dir, model_path, level):
    """Kernel and library calls in @main after the passes of -O<level>."""
    text = run([os.path.join(bin_dir, "relax-build"), model_path, f"-O{level}", "--emit", "relax"])
    main = text[text.index("fn @main"):]
    main = main[:main.index("\n}\n")]
    return len(re.findall(r"\bcall_(?:tir|library)(?:_dps)?\(", main))


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
    print(f"threads {args.threads}, median of {args.runs} runs each\n")
    print(f"{'model':<10} {'case':<18} {'calls O0':>8} {'calls O2':>8} {'O0 ms':>8} {'O2 ms':>8} {'O0/O2':>6}")
    build = os.path.join(b, "relax-build")
    with tempfile.TemporaryDirectory() as tmp:
        pkgs, calls = {}, {}
        for model, case, what in CASES:
            onnx_path = os.path.join(MODELS, model + ".onnx")
            if model not in pkgs:
                p0, p2 = os.path.join(tmp, model + ".O0.rpkg"), os.path.join(tmp, model + ".O2.rpkg")
                run([build, onnx_path, "-O0", "-o", p0])
                bounds = [x for bd in BOUNDS[model] for x in ("--bound", bd)]
                run([build, onnx_path, "-O2", "-o", p2] + bounds)
                pkgs[model] = (p0, p2)
                calls[model] = (kernel_calls(b, onnx_path, 0), kernel_calls(b, onnx_path, 2))
            p0, p2 = pkgs[model]
            case_dir = os.path.join(MODELS, "data", model, case)
            t0 = median_ms(b, p0, case_dir, args.runs, args.threads, env)
            t2 = median_ms(b, p2, case_dir, args.runs, args.threads, env)
            label = case + (f" {what}" if what else "")
            print(f"{model:<10} {label:<18} {calls[model][0]:>8} {calls[model][1]:>8} "
                  f"{t0:>8.3f} {t2:>8.3f} {t0 / t2:>6.2f}")

        inspect = os.path.join(b, "relax-inspect")
        if not os.path.exists(inspect):
            print("\nno relax-inspect: no memory figures")
            return 0
        print("\nactivation memory over a workload, KiB (saving = 1 - planned / pool)\n")
        print(f"{'model':<10} {'workload':<18} {'calls':>5} {'plan bound':>10} {'plan sym':>9} {'pool':>9} "
              f"{'no reuse':>9} {'saving':>7}")
        for model, label, bounds, sweep in WORKLOADS:
            onnx_path = os.path.join(MODELS, model + ".onnx")
            pb, ps = os.path.join(tmp, model + ".bound.rpkg"), os.path.join(tmp, model + ".sym.rpkg")
            run([build, onnx_path, "-O2", "-o", pb] + [x for bd in bounds for x in ("--bound", bd)])
            run([build, onnx_path, "-O2", "-o", ps])
            binds = [x for v in sweep for x in ("--bind", v)]
            mb = json.loads(run([inspect, pb, "--json"] + binds))["memory"]
            msym = json.loads(run([inspect, ps, "--json"] + binds))["memory"]
            pool = mb["pool_bytes"]
            print(f"{model:<10} {label:<18} {mb['calls']:>5} {mb['planned_bytes'] / 1024:>10.1f} "
                  f"{msym['planned_bytes'] / 1024:>9.1f} {pool / 1024:>9.1f} {mb['unplanned_bytes'] / 1024:>9.1f} "
                  f"{1 - mb['planned_bytes'] / pool:>7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
