#!/usr/bin/env python3
"""Golden tests: IR text in, relax-opt, IR text (or an error) out.

Each case is a file tests/golden/<group>/<name>.relax, or
tests/golden/<group>/<family>/<name>.relax (e.g. legalize/quant/), whose
header carries its run line and, for error cases, the messages it must
produce. The folders only sort the cases (by the pass they test, then by op
family); the passes run are those of the RUN line:

    # RUN: --passes=dead-code-elimination
    # ERROR: in @main, binding lv1: variable 'x' is used before its definition

A case without ERROR lines must succeed, and its output must equal
<name>.out beside it. A case with ERROR lines must exit with status 1 and
print each ERROR text on stderr. `--update` rewrites the .out files from the
current output (review the diff before committing).

    tests/golden/run.py --relax-opt build/bin/relax-opt [--update] [CASE.relax ...]
"""
import argparse
import difflib
import glob
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def header(path):
    run, errors = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# RUN:"):
                run += shlex.split(line[len("# RUN:"):])
            elif line.startswith("# ERROR:"):
                errors.append(line[len("# ERROR:"):].strip())
    return run, errors


def check(relax_opt, path, update):
    run, errors = header(path)
    proc = subprocess.run([relax_opt, path] + run, capture_output=True, text=True, timeout=120)
    name = os.path.relpath(path, HERE)
    if errors:
        if proc.returncode != 1:
            return f"{name}: expected exit status 1, got {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        missing = [e for e in errors if e not in proc.stderr]
        if missing:
            return f"{name}: stderr lacks:\n  " + "\n  ".join(missing) + f"\nstderr was:\n{proc.stderr}"
        return None
    if proc.returncode != 0:
        return f"{name}: relax-opt failed with status {proc.returncode}:\n{proc.stderr}"
    expected_path = os.path.splitext(path)[0] + ".out"
    if update:
        with open(expected_path, "w", encoding="utf-8") as f:
            f.write(proc.stdout)
        return None
    if not os.path.exists(expected_path):
        return f"{name}: no expected output {os.path.relpath(expected_path, HERE)} (run with --update)"
    with open(expected_path, encoding="utf-8") as f:
        expected = f.read()
    if proc.stdout != expected:
        diff = difflib.unified_diff(expected.splitlines(True), proc.stdout.splitlines(True),
                                    "expected", "actual")
        return f"{name}: output differs from the expected:\n" + "".join(diff)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relax-opt", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the expected .out files")
    ap.add_argument("cases", nargs="*", help="case files (default: all)")
    args = ap.parse_args()
    cases = args.cases or sorted(glob.glob(os.path.join(HERE, "**", "*.relax"), recursive=True))
    failures = [msg for c in cases if (msg := check(args.relax_opt, c, args.update))]
    for msg in failures:
        print(msg, file=sys.stderr)
    print(f"golden: {len(cases) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
