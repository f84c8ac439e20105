#!/usr/bin/env python3
"""End to end on a target (cpu, or vulkan: lavapipe in CI): each exported
model (see export_models.py) is built once with relax-build and run with
relax-run at several shapes (sequence lengths 1, 7 and 64; batch 1 to 3;
image sizes), and every output is compared with PyTorch's
(data/<model>/<case>/, written by export_models.py).

Tolerance: rtol 1e-3 (ONNX's) and atol 1e-5, because float32 sums over
64..256 terms in another order differ from PyTorch's by a few 1e-6 near 0.

    tests/models/test_run_models.py --bin build/bin [--target vulkan] [-O 0|1|2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["gpt2_tiny", "bert_tiny", "cnn_tiny"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("-O", dest="opt", default="2")
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in MODELS:
            pkg = os.path.join(tmp, m + ".rpkg")
            r = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(HERE, m + ".onnx"), "--target",
                                args.target, f"-O{args.opt}", "-o", pkg], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {m}: relax-build exited {r.returncode}: {r.stderr.strip()}")
                failures += 1
                continue
            cases = sorted(os.listdir(os.path.join(HERE, "data", m)))
            for case in cases:
                d = os.path.join(HERE, "data", m, case)
                r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data", d, "--atol", "1e-5",
                                    "--json"], capture_output=True, text=True)
                try:
                    rep = json.loads(r.stdout)
                except json.JSONDecodeError:
                    rep = {"ok": False, "error": r.stderr.strip()}
                ok = r.returncode == 0 and rep.get("ok")
                worst = max((o.get("max_abs_error", 0) for o in rep.get("outputs", [])), default=0)
                print(f"{'ok  ' if ok else 'FAIL'} {m} {case}: max abs error {worst:.3g}"
                      + ("" if ok else f"  {rep.get('error', '')} {[o.get('detail') for o in rep.get('outputs', [])]}"))
                failures += 0 if ok else 1
    if failures:
        print(f"{failures} failures")
        return 1
    print(f"all models match PyTorch at every shape on {args.target} at -O{args.opt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
