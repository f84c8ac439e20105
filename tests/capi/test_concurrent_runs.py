#!/usr/bin/env python3
"""relax_model_run from many threads on one loaded model.

Builds the dynamic-batch, dynamic-sequence models of tests/models
(gpt2_tiny with its KV cache: batch, sequence and past length vary; bert_tiny:
batch and sequence vary) for the cpu, then runs relax-concurrent-runs: each
package loaded once through the C API, 8 threads, 10,000 runs in all, each
thread on a different case than its neighbours at any moment. Every output
must be bitwise what its case gave run alone, and every run must succeed.

    tests/capi/test_concurrent_runs.py --bin build/bin [--threads 8] [--runs 10000]
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--runs", type=int, default=10000)
    args = ap.parse_args()
    specs = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("gpt2_tiny", "bert_tiny"):
            pkg = os.path.join(tmp, model + ".rpkg")
            r = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(MODELS, model + ".onnx"), "-o", pkg],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL: relax-build {model}: {r.stderr}")
                return 1
            data = os.path.join(MODELS, "data", model)
            cases = sorted(os.path.join(data, c) for c in os.listdir(data))
            specs.append(pkg + "=" + ",".join(cases))
        cmd = [os.path.join(args.bin, "relax-concurrent-runs"), "--threads", str(args.threads), "--runs",
               str(args.runs)] + specs
        r = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode != 0:
            print(f"FAIL: relax-concurrent-runs exit {r.returncode}")
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
