#!/usr/bin/env python3
"""relax against ONNX Runtime on the real-model corpus (tests/corpus), cpu,
at 1 and 2 threads, measured side by side in one run: the median latency of
`relax-run --bench` and of ONNX Runtime (npm onnxruntime-node, all graph
optimisations, bench/ort_bench.js) on the same model and inputs (each
model's largest reference case), and their ratio (below 1: relax is faster).
Prints a table and the geometric mean of the ratios per thread count.

The machine's speed drifts (a shared host: the same package measures 0.37
and 0.62 ms minutes apart), so each cell takes --rounds rounds, relax and
ORT back to back in each, and its ratio is the median over the rounds of
each round's relax/ORT: two medians taken seconds apart see the same
machine, where each side's lowest median over the rounds may come from a
fast spell the other side never saw. The ms columns are each side's
median over the rounds.

    (cd bench && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-save onnxruntime-node)
    /usr/bin/python3 bench/bench_corpus.py --bin build/bin [--runs 30] [--rounds 3] [--threads 1,2]
        [--only resnet_small,vit] [--json FILE] [--corpus DIR]

--corpus DIR measures another corpus in the same layout (NAME.onnx,
data/NAME/CASE/): the deployed sizes of bench/export_deployed.py, whose
manifest.json lists each model's cases (each measured) and tolerance.

A model ONNX Runtime cannot run, or whose inputs it cannot take (sequences),
is listed with the reason and left out of the means. ONNX Runtime's figures
include what a session.run costs from Node; the script prints that floor (a
one-node model's median) first, so small models can be read against it.
"""
import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "corpus")
sys.path.insert(0, CORPUS)
from test_corpus import EXPECTED  # noqa: E402  (a model's own tolerance, as the corpus test checks it)
ORT_TYPES = {np.float32: "float32", np.int64: "int64", np.int32: "int32", np.bool_: "bool", np.float64: "float64",
             np.uint8: "uint8", np.int8: "int8", np.float16: "float16"}


def largest_case(model, corpus=CORPUS):
    root = os.path.join(corpus, "data", model)
    sizes = {}
    for case in os.listdir(root):
        d = os.path.join(root, case)
        sizes[case] = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("input_"))
    return max(sorted(sizes), key=lambda c: sizes[c])


def input_names(onnx_path):
    m = onnx.load(onnx_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return [i.name for i in m.graph.input if i.name not in inits]


def ort_inputs(case_dir, names, tmp):
    """The case's inputs as raw files and a spec for ort_bench.js, or a reason it cannot take them."""
    out = []
    for k in range(100):
        p = os.path.join(case_dir, f"input_{k}.pb")
        if not os.path.exists(p):
            break
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        if k >= len(names) or not t.ByteSize():
            return None, f"input {k} is not a tensor"
        name = t.name or names[k]
        a = nh.to_array(t)
        if a.dtype.type not in ORT_TYPES:
            return None, f"input {name} has dtype {a.dtype}"
        path = os.path.join(tmp, f"in_{k}.bin")
        (a.view(np.uint16) if a.dtype == np.float16 else a).tofile(path)
        out.append({"name": name, "dtype": ORT_TYPES[a.dtype.type], "shape": list(a.shape), "file": path})
    spec = os.path.join(tmp, "inputs.json")
    with open(spec, "w") as f:
        json.dump(out, f)
    return spec, None


def relax_ms(args, pkg, case_dir, threads, atol=1e-3, rtol=1e-3):
    r = subprocess.run([os.path.join(args.bin, "relax-run"), pkg, "--test-data", case_dir, "--atol", str(atol), "--rtol",
                        str(rtol), "--bench", str(args.runs), "--threads", str(threads), "--json"], capture_output=True,
                       text=True)
    try:
        rep = json.loads(r.stdout)
    except json.JSONDecodeError:
        why = (r.stderr.strip() or r.stdout.strip())[-200:]
        if r.returncode < 0:
            why = f"relax-run killed by signal {-r.returncode} ({signal.Signals(-r.returncode).name}) " + why
        return None, why or f"relax-run exited with {r.returncode}"
    if "bench" not in rep:
        return None, str(rep.get("error", "no timing"))[-200:]
    return rep["bench"]["median_ms"], None if rep.get("ok") else "outputs differ from the reference"


def ort_ms(args, onnx_path, spec, threads):
    env = dict(os.environ)
    if args.node_path:
        env["NODE_PATH"] = args.node_path
    o = subprocess.run(["node", os.path.join(HERE, "ort_bench.js"), onnx_path, spec, str(args.runs), str(threads)],
                       capture_output=True, text=True, cwd=HERE, env=env)
    if o.returncode != 0:
        return None, o.stderr.strip().splitlines()[-1][:200] if o.stderr.strip() else "failed"
    return json.loads(o.stdout)["median_ms"], None


def ort_floor(args, threads):
    """ORT's median on a one-node model: what a run costs through onnxruntime-node before any work."""
    from onnx import TensorProto, helper
    with tempfile.TemporaryDirectory() as tmp:
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "floor",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        path = os.path.join(tmp, "floor.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        np.zeros(1, np.float32).tofile(os.path.join(tmp, "x.bin"))
        spec = os.path.join(tmp, "inputs.json")
        with open(spec, "w") as f:
            json.dump([{"name": "x", "dtype": "float32", "shape": [1], "file": os.path.join(tmp, "x.bin")}], f)
        ms, _ = ort_ms(args, path, spec, threads)
        return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="the folder holding relax-build and relax-run")
    ap.add_argument("--runs", type=int, default=30, help="runs per median")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per cell, relax and ORT back to back in each; the ratio is the median of the rounds' ratios")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--only", help="models, comma-separated (default: every corpus model)")
    ap.add_argument("--node-path", default=os.environ.get("NODE_PATH"),
                    help="where onnxruntime-node is installed, if not in bench/node_modules")
    ap.add_argument("--json", help="write every measurement to this file")
    ap.add_argument("--corpus", default=CORPUS, help="the corpus folder (default tests/corpus)")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    corpus = args.corpus
    mpath = os.path.join(corpus, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else None
    models = args.only.split(",") if args.only else sorted(
        f[:-5] for f in os.listdir(corpus) if f.endswith(".onnx"))
    # (model, case, atol, rtol) per row: every case the manifest lists, else
    # each model's largest case at the corpus test's tolerance.
    work = []
    for model in models:
        if manifest is not None:
            spec = manifest[model]
            work += [(model, case, spec["atol"], spec["rtol"]) for case in spec["cases"]]
        else:
            work.append((model, largest_case(model, corpus), max(1e-3, EXPECTED.get(model, {}).get("atol", 0)), 1e-3))
    rows = []
    floor = ort_floor(args, threads[0])
    if floor:
        print(f"ONNX Runtime's floor here: {floor:.3f} ms per run of a one-node model (Identity of 1 float): "
              "the cost of a session.run from Node, included in every ORT figure below")
    head = f"{'model':<20} {'case':<14}" + "".join(f" {'relax ms':>9} {'ORT ms':>8} {'ratio':>6} " for _ in threads)
    print(f"{args.rounds} rounds of a median of {args.runs} runs each side: ms the median round, ratio the median of "
          f"the rounds' relax/ORT; threads " + ", ".join(map(str, threads)) + " (column groups, left to right)\n")
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for model, case, atol, rtol in work:
            onnx_path = os.path.join(corpus, model + ".onnx")
            case_dir = os.path.join(corpus, "data", model, case)
            row = {"model": model, "case": case, "threads": {}}
            pkg = os.path.join(tmp, model + ".rpkg")
            if model not in built:
                built[model] = subprocess.run([os.path.join(args.bin, "relax-build"), onnx_path, "-o", pkg],
                                              capture_output=True, text=True)
            b = built[model]
            spec, why = ort_inputs(case_dir, input_names(onnx_path), tmp)
            line = f"{model:<20} {case:<14}"
            for t in threads:
                cell = {"relax_rounds": [], "ort_rounds": []}
                if b.returncode != 0:
                    cell["relax_error"] = "build failed: " + b.stderr.strip()[-200:]
                if not spec:
                    cell["ort_error"] = why
                for _ in range(max(1, args.rounds)):
                    if "relax_error" not in cell:
                        ms, err = relax_ms(args, pkg, case_dir, t, atol, rtol)
                        if err:
                            cell["relax_error"] = err
                        if ms:
                            cell["relax_rounds"].append(ms)
                    if "ort_error" not in cell:
                        ms, err = ort_ms(args, onnx_path, spec, t)
                        if err:
                            cell["ort_error"] = err
                        else:
                            cell["ort_rounds"].append(ms)
                for side in ("relax", "ort"):
                    if cell[side + "_rounds"]:
                        cell[side + "_ms"] = statistics.median(cell[side + "_rounds"])
                paired = [a / b for a, b in zip(cell["relax_rounds"], cell["ort_rounds"])]
                ok = cell.get("relax_ms") and cell.get("ort_ms") and "relax_error" not in cell
                if ok:
                    cell["ratio"] = statistics.median(paired)
                fmt = lambda v: f"{v:>9.3f}" if v else f"{'-':>9}"  # noqa: E731
                line += f" {fmt(cell.get('relax_ms'))} {fmt(cell.get('ort_ms'))[1:]} " + (
                    f"{cell['ratio']:>6.2f} " if ok else f"{'-':>6} ")
                row["threads"][t] = cell
            rows.append(row)
            notes = {e for c in row["threads"].values() for e in (c.get("relax_error"), c.get("ort_error")) if e}
            print(line + ("  " + "; ".join(sorted(notes)) if notes else ""), flush=True)
    print()
    for t in threads:
        ratios = [r["threads"][t]["ratio"] for r in rows if "ratio" in r["threads"][t]]
        if ratios:
            gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            faster = sum(1 for x in ratios if x <= 1.0)
            print(f"threads {t}: geometric mean relax/ORT {gm:.2f} over {len(ratios)} rows; "
                  f"{faster} at or below 1.0, worst {max(ratios):.2f} ({max(rows, key=lambda r: r['threads'][t].get('ratio', 0))['model']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    failed = sorted({f"{r['model']} ({t} threads)" for r in rows for t, c in r["threads"].items() if "relax_error" in c})
    if failed:
        print("relax failed on: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
