#!/usr/bin/env python3
"""Imports the exported models of this folder (see export_models.py) and
checks that the symbolic shapes survive: every output's shape is written in
terms of the named input dims, nothing unknown. Then the imported IR goes
through relax-opt (parse, verify, O1, verify) to show it is well formed.

    tests/models/test_import_models.py --bin build/bin
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

EXPECTED = {
    "gpt2_tiny": {
        "inputs": [["batch_size", "sequence_length"]] + [["batch_size", 4, "past_sequence_length", 16]] * 4,
        "outputs": [["batch_size", "sequence_length", 100]]
        + [["batch_size", 4, "past_sequence_length + sequence_length", 16]] * 4,
    },
    "bert_tiny": {
        "inputs": [["batch_size", "sequence_length"]] * 2,
        "outputs": [["batch_size", "sequence_length", 64]],
    },
    "cnn_tiny": {
        "inputs": [["batch", 3, "height", "width"]],
        "outputs": [["batch", 10]],
    },
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding relax-import and relax-opt")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="relax_models_")  # removed when main returns or raises
    out_dir = tmp.name
    failures = 0
    for name, want in EXPECTED.items():
        ir = os.path.join(out_dir, name + ".relax")
        p = subprocess.run([os.path.join(args.bin, "relax-import"), os.path.join(HERE, name + ".onnx"), "-o", ir,
                            "--json"], capture_output=True, text=True, timeout=300)
        problems = []
        if p.returncode != 0:
            problems.append(f"relax-import exit {p.returncode}: {p.stderr.strip()}")
        else:
            s = json.loads(p.stdout)
            got_in = [i["shape"] for i in s["inputs"]]
            got_out = [o["shape"] for o in s["outputs"]]
            if got_in != want["inputs"]:
                problems.append(f"inputs {got_in} != {want['inputs']}")
            if got_out != want["outputs"]:
                problems.append(f"outputs {got_out} != {want['outputs']}")
            with open(ir) as f:
                text = f.read()
            if "ndim=" in text or "match_cast" in text:
                problems.append("the IR holds an unknown dim or a run-time shape")
            q = subprocess.run([os.path.join(args.bin, "relax-opt"), ir, "--passes=O1", "--verify-each", "-o",
                                os.path.join(out_dir, name + ".o1.relax")], capture_output=True, text=True,
                               timeout=300)
            if q.returncode != 0:
                problems.append(f"relax-opt --passes=O1 failed: {q.stderr.strip()[:2000]}")
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        for pr in problems:
            print("     ", pr)
        failures += bool(problems)
    print(f"models: {len(EXPECTED) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
