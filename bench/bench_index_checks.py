#!/usr/bin/env python3
"""What the run-time index checks of gathers and scatters cost, on the
real-model corpus (tests/corpus), cpu: each model built twice, with the
checks (the default) and with --no-index-checks, and both packages run by
the same relax-run on the model's largest reference case, measured side by
side: --rounds rounds of `relax-run --bench RUNS`, the two packages back to
back in each round. Prints per model each side's best median over the
rounds, their ratio (with / without: above 1 the checks cost time) and the
median of the rounds' ratios, then the geometric mean of the ratios.

The machine's speed drifts (a shared host), so a single small model's
ratio moves by a few percent either way between runs; the geometric mean
over the models is the figure. `--profile` adds, per model, the share of
kernel time the check programs (relax_k_check_indices*) took.

    /usr/bin/python3 bench/bench_index_checks.py --bin build/bin [--rounds 15] [--runs 200] [--threads 2]
        [--only gpt2_hf,bert_hf_op17] [--profile]
"""
import argparse
import json
import math
import os
import re
import statistics
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


def median_ms(args, pkg, case):
    r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data", case, "--bench", str(args.runs),
                        "--threads", str(args.threads), "--json", "--atol", "1e-4"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{pkg}: relax-run failed: {r.stderr.strip()}")
    return json.loads(r.stdout)["bench"]["median_ms"]


def check_share(args, pkg, case):
    """The share of kernel time the check programs took (relax-run --profile)."""
    r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data", case, "--bench", str(args.runs),
                        "--threads", str(args.threads), "--profile", "--atol", "1e-4"], capture_output=True, text=True)
    share = 0.0
    for line in r.stdout.splitlines() + r.stderr.splitlines():
        m = re.match(r"\s*[\d.]+ ms\s+([\d.]+)%.*relax_k_check_indices", line)
        if m:
            share += float(m.group(1))
    return share


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", help="comma-separated corpus models (default: those with run-time indices)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    models = args.only.split(",") if args.only else MODELS
    ratios = []
    print(f"{'model':<16} {'with ms':>9} {'without ms':>11} {'ratio':>7} {'median ratio':>13}"
          + ("  check kernels" if args.profile else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            case = largest_case(m)
            pkgs = {}
            for tag, extra in (("with", []), ("without", ["--no-index-checks"])):
                pkgs[tag] = os.path.join(tmp, f"{m}.{tag}.rpkg")
                b = subprocess.run([os.path.join(args.bin, "relax-build"), os.path.join(CORPUS, m + ".onnx"),
                                    "-o", pkgs[tag], *extra], capture_output=True, text=True)
                if b.returncode != 0:
                    sys.exit(f"{m}: relax-build failed: {b.stderr.strip()}")
            a, b, rs = [], [], []
            for _ in range(args.rounds):
                x, y = median_ms(args, pkgs["with"], case), median_ms(args, pkgs["without"], case)
                a.append(x)
                b.append(y)
                rs.append(x / y)
            ratio = min(a) / min(b)
            ratios.append(ratio)
            extra = f"  {check_share(args, pkgs['with'], case):.2f}% of kernel time" if args.profile else ""
            print(f"{m:<16} {min(a):9.4f} {min(b):11.4f} {ratio:7.3f} {statistics.median(rs):13.3f}{extra}",
                  flush=True)
    print(f"geometric mean of with/without over {len(ratios)} models: "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.4f}")


if __name__ == "__main__":
    main()
