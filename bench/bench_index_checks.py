#!/usr/bin/env python3
"""What the run-time index checks of gathers and scatters cost, on the
real-model corpus (tests/corpus), cpu: each model built twice, with the
checks (the default) and with --no-index-checks, and both packages timed
side by side in one process by relax-bench-ab (bench/bench_ab.cc) on the
model's largest reference case: rounds of back-to-back runs, each side
loaded several times, the median of the rounds' ratios with / without
(above 1 the checks cost time). Then the geometric mean over the models.

The machine's speed drifts (a shared host) and where a package lands in
memory moves its time by about a percent, so beside each ratio the bench
prints the null ratio: the package with the checks against a second build
of itself, measured the same way. A ratio inside the null's spread is no
cost that this machine can show.

`--profile` adds, per model, the extra time of the kernels that hold the
checks (they run inside the gather's own kernel, as its prelude) as a
share of all kernel time: (kernel time with - without) / all kernel time,
from relax-run --profile, best of 3.

    /usr/bin/python3 bench/bench_index_checks.py --bin build/bin [--rounds 400] [--runs 20] [--threads 2]
        [--only gpt2_hf,bert_hf_op17] [--profile]
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "corpus")

# Corpus models whose gathers or scatters read indices computed at run time
# (token ids, positions, buckets, detections), where the checks run.
MODELS = ["gpt2_hf", "gpt2_hf_past", "bert_hf_op14", "bert_hf_op17", "t5_encoder", "t5_decoder",
          "text_classifier", "gru_tagger", "swin_tiny", "yolo_nms"]


def largest_case(model):
    root = os.path.join(CORPUS, "data", model)

    def size(case):
        d = os.path.join(root, case)
        return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("input"))
    return os.path.join(root, max(sorted(os.listdir(root)), key=size))


def ab_ratio(args, a, b, case):
    """relax-bench-ab's median ratio b / a and its quartiles."""
    r = subprocess.run([os.path.join(args.bin, "relax-bench-ab"), a, b, "--test-data", case, "--rounds",
                        str(args.rounds), "--runs", str(args.runs), "--threads", str(args.threads)],
                       capture_output=True, text=True)
    m = re.search(r"B / A: median ([\d.]+) .*quartiles ([\d.]+) to ([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        sys.exit(f"relax-bench-ab {a} {b}: failed: {r.stderr.strip()}")
    return tuple(float(x) for x in m.groups())


def kernel_ms(args, pkg, case):
    """{kernel: total ms} from relax-run --profile, the library calls left out."""
    r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data", case, "--bench", str(args.runs),
                        "--threads", str(args.threads), "--profile", "--atol", "1e-4"], capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines() + r.stderr.splitlines():
        m = re.match(r"\s*([\d.]+) ms\s+[\d.]+%.*\s(relax_k_\S+)$", line)
        if m:
            out[m.group(2)] = float(m.group(1))
    return out


def check_share(args, pkgs, case):
    """The checked kernels' extra time as a share of all kernel time (best of 3 profiles each)."""
    with_, without = [kernel_ms(args, pkgs["with"], case) for _ in range(3)], \
        [kernel_ms(args, pkgs["without"], case) for _ in range(3)]
    best = lambda runs, k: min(r.get(k, math.inf) for r in runs)  # noqa: E731
    total = sum(best(with_, k) for k in with_[0])
    extra = sum(best(with_, k) - best(without, k) for k in with_[0] if k in without[0])
    return 100.0 * extra / total if total else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", help="comma-separated corpus models (default: those with run-time indices)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    models = args.only.split(",") if args.only else MODELS
    ratios, nulls = [], []
    print(f"{'model':<16} {'with/without':>12} {'quartiles':>15}  {'null':>7} {'quartiles':>15}"
          + ("  checked kernels' extra" if args.profile else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            case = largest_case(m)
            pkgs = {}
            for tag, extra in (("with", []), ("again", []), ("without", ["--no-index-checks"])):
                pkgs[tag] = os.path.join(tmp, f"{m}.{tag}.rpkg")
                b = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(CORPUS, m + ".onnx"),
                                    "-o", pkgs[tag], *extra], capture_output=True, text=True)
                if b.returncode != 0:
                    sys.exit(f"{m}: relax-build failed: {b.stderr.strip()}")
            r, r25, r75 = ab_ratio(args, pkgs["without"], pkgs["with"], case)
            n, n25, n75 = ab_ratio(args, pkgs["again"], pkgs["with"], case)
            ratios.append(r)
            nulls.append(n)
            extra = f"  {check_share(args, pkgs, case):+.2f}% of kernel time" if args.profile else ""
            print(f"{m:<16} {r:12.4f} {r25:7.4f}-{r75:.4f}  {n:7.4f} {n25:7.4f}-{n75:.4f}{extra}", flush=True)
    gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))  # noqa: E731
    print(f"geometric mean over {len(ratios)} models: with/without {gm(ratios):.4f}, null {gm(nulls):.4f}")


if __name__ == "__main__":
    main()
