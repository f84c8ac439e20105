#!/usr/bin/env python3
"""End to end on a target (cpu, or vulkan: lavapipe in CI): each exported
model (see export_models.py) is built once with relax-build and run with
relax-run at several shapes (sequence lengths 1, 7 and 64; batch 1 to 3;
image sizes), and every output is compared with PyTorch's
(data/<model>/<case>/, written by export_models.py).

Tolerance: rtol 1e-3 (ONNX's) and atol 1e-5, because float32 sums over
64..256 terms in another order differ from PyTorch's by a few 1e-6 near 0.

    tests/models/test_run_models.py --bin build/bin [--target vulkan] [-O 0|1|2]
    tests/models/test_run_models.py --bin build/bin --target all --except cpu,vulkan,cuda

--target all: every target this build has (relax-build --list-targets),
but those --except names (covered by tests of their own): each is built,
and run where it has a device (a host target; a GPU target whose kind
relax-run --list-devices lists). Exit 77 when no target is left to try:
so a target added in its own folder is built and run in CI with no change
to the tests.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["gpt2_tiny", "bert_tiny", "cnn_tiny"]


def targets(bin_dir, skip):
    """(name, runs here) for every target of the build but `skip`."""
    r = subprocess.run([os.path.join(bin_dir, "relax-build"), "--list-targets", "--json"], capture_output=True,
                       text=True, check=True)
    listed = subprocess.run([os.path.join(bin_dir, "relax-run"), "--list-devices", "--json"], capture_output=True,
                            text=True)
    devices = json.loads(listed.stdout or "{}")
    out = []
    for t in json.loads(r.stdout):
        if t["name"] in skip:
            continue
        gpu = t["traits"].split()[0] == "gpu"
        out.append((t["name"], not gpu or bool(devices.get(t["name"]))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--except", dest="skip", default="")
    ap.add_argument("-O", dest="opt", default="2")
    args = ap.parse_args()
    if args.target != "all":
        return run_target(args, args.target, True)
    todo = targets(args.bin, set(args.skip.split(",")))
    if not todo:
        print(f"no target but {args.skip} in this build: nothing to try")
        return 77
    failures = 0
    for name, runs in todo:
        print(f"target {name}: {'built and run' if runs else 'built only (no device here)'}")
        failures += run_target(args, name, runs)
    return 1 if failures else 0


def run_target(args, target, runs):
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for m in MODELS:
            pkg = os.path.join(tmp, m + ".rpkg")
            r = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(HERE, m + ".onnx"), "--target",
                                target, f"-O{args.opt}", "-o", pkg], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {m}: relax-build exited {r.returncode}: {r.stderr.strip()}")
                failures += 1
                continue
            cases = sorted(os.listdir(os.path.join(HERE, "data", m))) if runs else []
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
    print(f"all models match PyTorch at every shape on {target} at -O{args.opt}" if runs else
          f"all models build for {target} at -O{args.opt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
