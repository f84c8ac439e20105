#!/usr/bin/env python3
"""The longest functions of the C++ sources, by lines from the signature to
the closing brace (lambdas inside count with the function).

    scripts/function_lengths.py [--root DIR] [--under passes,backends] [--top N]
    scripts/function_lengths.py --check 150 [--allow FILE]

A function is a definition at namespace or class scope: a line ending in
'{' (or a signature whose '{' ends a later line) whose text has a '(' and
is not a control statement, struct, class, namespace, enum or lambda.
--check N fails (exit 1) on every function over N lines in the folders
given that the allowance file does not list at its length or more, and
on a listed one that is no longer over N lines (the list only shrinks).
"""
import argparse
import os
import re
import sys

NOT_FUNCTION = re.compile(r"^\s*(if|for|while|switch|do|else|try|catch|return|namespace|struct|class|enum|union|"
                          r"extern|template\s*<[^>]*>\s*(struct|class))\b")


def functions(path):
    """(name, first line, lines) of each top-level function of a file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out, start, sig, name = [], None, "", None
    scopes = []  # for each open brace: whether it opened a function
    in_block_comment = False
    for n, raw in enumerate(lines, 1):
        line = raw
        if in_block_comment:
            if "*/" not in line:
                continue
            line, in_block_comment = line.split("*/", 1)[1], False
        line = re.sub(r"/\*.*?\*/", "", line)
        if "/*" in line:
            line, in_block_comment = line.split("/*", 1)[0], True
        line = re.sub(r"//.*", "", line)
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
        stripped = line.strip()
        in_function = any(scopes)
        if not in_function:
            if stripped and not stripped.startswith("#"):
                sig = (sig + " " + stripped) if sig else stripped
                if sig.endswith(";") or sig.endswith("}"):
                    sig = ""
        for ch in line:
            if ch == "{":
                opens_fn = False
                if not any(scopes):
                    s = sig.split("{")[0]
                    if "(" in s and not NOT_FUNCTION.match(s) and "=" not in s.split("(")[0]:
                        opens_fn = True
                        m = re.search(r"([~\w:]+(?:operator\S*)?)\s*\(", s)
                        name = m.group(1) if m else s[:40]
                        # the signature may start lines above
                        k = n
                        while k > 1 and lines[k - 2].strip() and not lines[k - 2].strip().endswith((";", "}", "{")) \
                                and not lines[k - 2].strip().startswith(("//", "#")):
                            k -= 1
                        start = k
                    sig = ""
                scopes.append(opens_fn)
            elif ch == "}":
                if scopes:
                    was_fn = scopes.pop()
                    if was_fn:
                        out.append((name, start, n - start + 1))
                if not any(scopes):
                    sig = ""
    return out


def scan(root, unders):
    found = []
    for under in unders:
        for dirpath, _, files in os.walk(os.path.join(root, under)):
            for f in sorted(files):
                if f.endswith((".cc", ".h")):
                    path = os.path.join(dirpath, f)
                    rel = os.path.relpath(path, root)
                    for name, line, length in functions(path):
                        found.append((length, rel, line, name))
    return sorted(found, reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--under", default="passes,backends")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--check", type=int)
    ap.add_argument("--allow")
    args = ap.parse_args()
    found = scan(args.root, args.under.split(","))
    if args.check is None:
        for length, rel, line, name in found[: args.top]:
            print(f"{length:5} {rel}:{line} {name}")
        return 0
    allowed = {}
    if args.allow:
        with open(args.allow) as f:
            for row in f:
                row = row.split("#")[0].split()
                if len(row) == 3:
                    allowed[(row[1], row[2])] = int(row[0])
    long = [(length, rel, line, name) for length, rel, line, name in found if length > args.check]
    bad = [x for x in long if allowed.get((x[1], x[3]), 0) < x[0]]
    for length, rel, line, name in long:
        tag = "FAIL" if (length, rel, line, name) in bad else "allowed"
        print(f"{tag:8} {length:5} {rel}:{line} {name} (limit {args.check}, allowed {allowed.get((rel, name), 0)})")
    # An allowance no longer needed fails too: the list only shrinks (and a
    # listed function the scan cannot find means the scan is broken).
    still = {(rel, name) for _, rel, _, name in long}
    stale = [key for key in sorted(allowed) if key not in still]
    for key in stale:
        print(f"FAIL     {key[0]} {key[1]}: not over {args.check} lines now; remove it from {args.allow}")
    print(f"functions over {args.check} lines under {args.under}: {len(long)} ({len(bad)} not allowed, "
          f"{len(stale)} allowances to remove)")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
