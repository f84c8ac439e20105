#!/usr/bin/env python3
"""The cpu kernels built for each x86-64 level, run where the host can.

The machines this project runs on change generation from day to day (Zen 3
with AVX2 only; AVX-512 with VNNI; AVX-512 with BF16, VBMI, IFMA). A model
is built with --cpu x86-64-v2, x86-64-v3, x86-64-v4 and host; each package
whose level the host has runs every stored case of the corpus model and must
match it; a package for a level the host lacks must be refused by name,
never run into an illegal instruction: checked on every host by making the
runtime take AVX-512 as absent ($RELAX_CPU_WITHOUT), as a Zen 3 lacks it.

    test_cpu_levels.py --bin build/bin
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "corpus")
# A CNN (direct and im2col convolutions, pools) and a transformer (GEMMs,
# softmax, layer norm, gathers), each at batch 1 and 2 or more.
MODELS = ["resnet_small", "bert_hf_op17"]
# What each level needs beyond the one below (the x86-64 psABI levels).
LEVELS = {
    "x86-64-v2": {"sse4_1", "sse4_2", "ssse3", "popcnt", "cx16"},
    "x86-64-v3": {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"},
    "x86-64-v4": {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}


def host_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    flags = host_flags()
    has = {}
    below = True
    for level, need in LEVELS.items():
        below = below and need <= flags
        has[level] = below
    has["host"] = True
    print("host:", ", ".join(f"{lv} {'yes' if h else 'no'}" for lv, h in has.items()))
    failures = []
    with tempfile.TemporaryDirectory(prefix="relax_cpu_levels_") as tmp:
        for model in MODELS:
            cases = sorted(os.listdir(os.path.join(CORPUS, "data", model)))
            for level in has:
                pkg = os.path.join(tmp, f"{model}.{level}.rpkg")
                b = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(CORPUS, model + ".onnx"),
                                    "--cpu", level, "-o", pkg], capture_output=True, text=True)
                if b.returncode != 0:
                    failures.append(f"{model} --cpu {level}: build failed: {b.stderr.strip()[-400:]}")
                    continue
                for case in cases:
                    r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data",
                                        os.path.join(CORPUS, "data", model, case)], capture_output=True, text=True)
                    if has[level]:
                        good = r.returncode == 0
                        what = "right" if good else f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
                    else:
                        # Refused at load, naming what the CPU lacks; a signal would be a crash.
                        good = r.returncode == 1 and "error" in r.stderr
                        what = ("refused: " + r.stderr.strip().splitlines()[-1][:200]) if good else \
                            f"not refused cleanly: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
                    print(f"{model:14} {level:10} {case:10} {what}")
                    if not good:
                        failures.append(f"{model} --cpu {level} {case}: {what}")
        # Where AVX-512 is absent: the v4 package refused by name, the v3 one runs.
        model, case = MODELS[0], sorted(os.listdir(os.path.join(CORPUS, "data", MODELS[0])))[0]
        env = dict(os.environ, RELAX_CPU_WITHOUT="avx512f,avx512bw,avx512cd,avx512dq,avx512vl")
        for level, runs in (("x86-64-v4", False), ("x86-64-v3", has["x86-64-v3"])):
            pkg = os.path.join(tmp, f"{model}.{level}.rpkg")
            r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data",
                                os.path.join(CORPUS, "data", model, case)], capture_output=True, text=True, env=env)
            if runs:
                good, what = r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
            else:
                good = r.returncode == 1 and "built for --cpu x86-64-v4" in r.stderr and "avx512f" in r.stderr
                what = r.stderr.strip()[-300:]
            print(f"without AVX-512: {model} {level}: {'runs' if runs else 'refused'}: {what[:200]}")
            if not good:
                failures.append(f"without AVX-512, {model} --cpu {level}: {what}")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
