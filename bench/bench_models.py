#!/usr/bin/env python3
"""First performance baseline on cpu: median latency of relax-run --bench
against ONNX Runtime (npm onnxruntime-node) on the same models, inputs and
thread count, measured in one run; prints the ratio relax / ORT (below 1 is
faster than ORT).

    (cd bench && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-save onnxruntime-node)
    /usr/bin/python3 bench/bench_models.py --bin build/bin [--runs 50] [--threads 1]

The models and inputs are the exported ones of tests/models (data/<model>/<case>).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from bench_corpus import input_names, ort_inputs  # the same input files for ort_bench.js

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
CASES = [("gpt2_tiny", "b1_s7_p0"), ("gpt2_tiny", "b1_s1_p7"), ("gpt2_tiny", "b2_s64_p3"),
         ("bert_tiny", "b1_s64"), ("cnn_tiny", "b1_32x32"), ("cnn_tiny", "b3_16x24")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    env = dict(os.environ, RELAX_NUM_THREADS=str(args.threads))
    print(f"threads {args.threads}, median of {args.runs} runs each\n")
    print(f"{'model':<12} {'case':<12} {'relax ms':>10} {'ORT ms':>10} {'relax/ORT':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for model, case in CASES:
            onnx_path = os.path.join(MODELS, model + ".onnx")
            if model not in built:
                pkg = os.path.join(tmp, model + ".rpkg")
                subprocess.run([os.path.join(args.bin, "relax-build"), onnx_path, "-o", pkg], check=True,
                               capture_output=True)
                built[model] = pkg
            case_dir = os.path.join(MODELS, "data", model, case)
            r = subprocess.run([os.path.join(args.bin, "relax-run"), built[model], "--test-data", case_dir,
                                "--atol", "1e-5", "--bench", str(args.runs), "--threads", str(args.threads), "--json"],
                               capture_output=True, text=True, env=env)
            rep = json.loads(r.stdout)
            if not rep.get("ok"):
                print(f"{model:<12} {case:<12} relax-run failed: {rep.get('error', rep.get('outputs'))}")
                continue
            relax_ms = rep["bench"]["median_ms"]
            spec, why = ort_inputs(case_dir, input_names(onnx_path), tmp)
            if not spec:
                print(f"{model:<12} {case:<12} {relax_ms:>10.3f}  ONNX Runtime cannot take the inputs: {why}")
                continue
            o = subprocess.run(["node", os.path.join(HERE, "ort_bench.js"), onnx_path, spec, str(args.runs),
                                str(args.threads)], capture_output=True, text=True, cwd=HERE)
            if o.returncode != 0:
                print(f"{model:<12} {case:<12} {relax_ms:>10.3f}  ONNX Runtime failed: {o.stderr.strip()}")
                continue
            ort_ms = json.loads(o.stdout)["median_ms"]
            print(f"{model:<12} {case:<12} {relax_ms:>10.3f} {ort_ms:>10.3f} {relax_ms / ort_ms:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
