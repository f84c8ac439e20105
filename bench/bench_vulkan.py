#!/usr/bin/env python3
"""The Vulkan target's data path and schedules, measured against their own
alternatives in one run (median latency of relax-run --bench):

  vulkan     the default: device-resident tensors, one command buffer per
             run, register tiles (--tile 4x4), the runtime's choice between
             a thread and a workgroup per row;
  copies     RELAX_VULKAN_HOST_MEMORY=1: every tensor copied to the device
             and back around each kernel call (what a device without
             mappable memory gets; close to the first data path);
  no-tile    built with --tile 1x1: one output per thread;
  thread-rows  RELAX_VULKAN_ROWS=0: never a workgroup per row;
  shared     RELAX_VULKAN_SHARED=1: matmul and conv always tiled through
             shared memory (the default takes them on a GPU when their
             blocks fill, never on a CPU device such as lavapipe);
  no-shared  RELAX_VULKAN_SHARED=0: never;
  cpu        the same model built for cpu (a reference on the same cores:
             on a machine without a GPU, Vulkan is lavapipe, itself a CPU).

Ratios above 1 mean the alternative is slower than the default.

    /usr/bin/python3 bench/bench_vulkan.py --bin build/bin [--runs 20]

On a machine with a GPU, --device N picks it (relax-run --list-devices).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "tests", "models")
CASES = [("gpt2_tiny", "b1_s1_p7"), ("gpt2_tiny", "b1_s7_p0"), ("gpt2_tiny", "b2_s64_p3"),
         ("bert_tiny", "b1_s64"), ("cnn_tiny", "b1_32x32"), ("cnn_tiny", "b3_16x24")]


def latency(rrun, pkg, case_dir, runs, extra=(), env=None):
    r = subprocess.run([rrun, pkg, "--test-data", case_dir, "--atol", "1e-5", "--bench", str(runs), "--json", *extra],
                       capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    try:
        rep = json.loads(r.stdout)
    except json.JSONDecodeError:
        return None, r.stderr.strip()
    if not rep.get("ok"):
        return None, rep.get("error", "outputs do not match")
    return rep["bench"]["median_ms"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--device", default="0")
    args = ap.parse_args()
    rbuild, rrun = os.path.join(args.bin, "relax-build"), os.path.join(args.bin, "relax-run")
    dev = ["--device", args.device]
    print(f"median of {args.runs} runs; ratios are alternative / vulkan\n")
    cols = ["vulkan ms", "copies", "no-tile", "thread-rows", "shared", "no-shared", "cpu ms", "cpu/vulkan"]
    print(f"{'model':<10} {'case':<10} " + " ".join(f"{c:>11}" for c in cols))
    with tempfile.TemporaryDirectory() as tmp:
        pkgs = {}
        for model in sorted({m for m, _ in CASES}):
            onnx_path = os.path.join(MODELS, model + ".onnx")
            for name, extra in [("vulkan", ["--target", "vulkan"]), ("no-tile", ["--target", "vulkan", "--tile", "1x1"]),
                                ("cpu", ["--target", "cpu"])]:
                pkg = os.path.join(tmp, f"{model}.{name}.rpkg")
                subprocess.run([rbuild, onnx_path, *extra, "-o", pkg], check=True, capture_output=True)
                pkgs[model, name] = pkg
        for model, case in CASES:
            d = os.path.join(MODELS, "data", model, case)
            base, err = latency(rrun, pkgs[model, "vulkan"], d, args.runs, dev)
            if base is None:
                print(f"{model:<10} {case:<10} vulkan failed: {err}")
                continue
            copies, _ = latency(rrun, pkgs[model, "vulkan"], d, args.runs, dev, {"RELAX_VULKAN_HOST_MEMORY": "1"})
            notile, _ = latency(rrun, pkgs[model, "no-tile"], d, args.runs, dev)
            rows0, _ = latency(rrun, pkgs[model, "vulkan"], d, args.runs, dev, {"RELAX_VULKAN_ROWS": "0"})
            shared1, _ = latency(rrun, pkgs[model, "vulkan"], d, args.runs, dev, {"RELAX_VULKAN_SHARED": "1"})
            shared0, _ = latency(rrun, pkgs[model, "vulkan"], d, args.runs, dev, {"RELAX_VULKAN_SHARED": "0"})
            cpu, _ = latency(rrun, pkgs[model, "cpu"], d, args.runs)

            def ratio(x):
                return f"{x / base:>11.2f}" if x else f"{'failed':>11}"

            cpu_s = f"{cpu:>11.3f}" if cpu else f"{'failed':>11}"
            cpu_r = f"{cpu / base:>11.3f}" if cpu else f"{'':>11}"
            print(f"{model:<10} {case:<10} {base:>11.3f} {ratio(copies)} {ratio(notile)} {ratio(rows0)} {ratio(shared1)} {ratio(shared0)} {cpu_s} {cpu_r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
