#!/usr/bin/env python3
"""relax-build's batch mode: a zoo of models built from one command.

The zoo: every light model and every pytorch-converted case of the ONNX
backend test data (../shared/onnx-backend-tests, or Debian's
libonnx-testdata without the light models), plus broken files: a truncated
model, one with an unsupported op, one that is not ONNX. Checks:
  - the report has the right status for each model (ok, unsupported with
    the op and node, error), signatures with symbolic dims, sizes, kernel
    counts, and a summary that adds up; the exit code is 1 (some failed),
    2 (only unsupported), 0 (all built);
  - every package built runs and matches the expected outputs;
  - a second run skips what is up to date, --force rebuilds, a changed
    model is rebuilt, a model that no longer builds loses its package;
  - a build killed mid-way (SIGSEGV) is reported as a crash, a hung one as
    a timeout, the others finish, and no package or temporary file is left
    for either; SIGINT stops the batch and leaves nothing half-written;
  - --shard K/N slices are disjoint and cover the zoo, and
    --merge-reports joins them into the same counts;
  - one line per model on a pipe, nothing with --quiet, the report on
    stdout with --json.

    tests/tools/test_relax_build_batch.py --bin build/bin
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run, save

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "onnx-backend-tests"))
DEBIAN = "/usr/include/onnx/backend/test/data"


def data_root():
    if os.path.isdir(SHARED):
        return SHARED, "onnx-backend-tests (ONNX 1.23, ../shared)"
    return DEBIAN, "libonnx-testdata (ONNX 1.12, Debian)"


def unsupported_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="fine"),
                           helper.make_node("FooBar", ["h"], ["y"], name="weird_node")], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def slow_model(n=2000):
    """A model that takes a while to build: a long chain of distinct ops
    over a symbolic dim, each with its own weight."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])
    nodes, inits, prev = [], [], "x"
    ops = ["Sin", "Cos", "Tanh", "Sigmoid", "Exp"]
    for i in range(n):
        inits.append(nh.from_array(np.full((64, 64), 1.0 / (i + 64), dtype=np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"], name=f"mm{i}"))
        nodes.append(helper.make_node(ops[i % len(ops)], [f"m{i}"], [f"a{i}"], name=f"act{i}"))
        prev = f"a{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    g = helper.make_graph(nodes, "slow", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def build_zoo(root, zoo):
    """Links the test data's models into zoo/; returns {model path: expected status}."""
    expect = {}
    light = os.path.join(root, "light")
    if os.path.isdir(light):
        os.makedirs(os.path.join(zoo, "light"))
        for f in sorted(os.listdir(light)):
            if f.endswith(".onnx"):
                dst = os.path.join(zoo, "light", f)
                os.symlink(os.path.join(light, f), dst)
                expect[dst] = "ok"
    conv = os.path.join(root, "pytorch-converted")
    biggest = None
    for case in sorted(os.listdir(conv)):
        src = os.path.join(conv, case, "model.onnx")
        if not os.path.exists(src):
            continue
        os.makedirs(os.path.join(zoo, "pytorch-converted", case))
        dst = os.path.join(zoo, "pytorch-converted", case, "model.onnx")
        os.symlink(src, dst)
        expect[dst] = "ok"
        if biggest is None or os.path.getsize(src) > os.path.getsize(biggest):
            biggest = src
    broken = os.path.join(zoo, "broken")
    os.makedirs(broken)
    with open(biggest, "rb") as f:
        data = f.read()
    with open(os.path.join(broken, "truncated.onnx"), "wb") as f:
        f.write(data[:len(data) // 2])
    expect[os.path.join(broken, "truncated.onnx")] = "error"
    save(unsupported_model(), os.path.join(broken, "unsupported.onnx"))
    expect[os.path.join(broken, "unsupported.onnx")] = "unsupported"
    with open(os.path.join(broken, "not_onnx.onnx"), "w") as f:
        f.write("this is not an ONNX model\n")
    expect[os.path.join(broken, "not_onnx.onnx")] = "error"
    return expect


def package_of(zoo, out, model):
    rel = os.path.relpath(model, zoo)
    return os.path.join(out, os.path.splitext(rel)[0] + ".cpu.rpkg")


def leftovers(folder):
    """Temporary files (.NAME.tmp-XXXXXX) under folder."""
    found = []
    for d, _, files in os.walk(folder):
        found += [os.path.join(d, f) for f in files if ".tmp-" in f]
    return found


def run_light(rrun, pkg, onnx_path, tmp):
    """Runs a light model on the input the test data expects (arange(n) / n)
    and compares with its output_0.pb."""
    m = onnx.load(onnx_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    data = os.path.join(tmp, os.path.basename(pkg) + ".data")
    os.makedirs(data, exist_ok=True)
    k = 0
    for inp in m.graph.input:
        if inp.name in inits:
            continue
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        n = int(np.prod(shape))
        arr = (np.arange(n, dtype=np.float64) / n).astype(np.float32).reshape(shape)
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(nh.from_array(arr, inp.name).SerializeToString())
        k += 1
    expected = os.path.splitext(os.path.realpath(onnx_path))[0] + "_output_0.pb"
    shutil.copy(expected, os.path.join(data, "output_0.pb"))
    return run(rrun, pkg, "--test-data", data, "--rtol", "1e-3", "--atol", "1e-5")


def find_child(model_name, timeout=30):
    """The pid of the relax-build child building `model_name`, or None."""
    end = time.time() + timeout
    while time.time() < end:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if len(args) > 3 and args[0].endswith(b"relax-build") and args[1].endswith(model_name.encode()) \
                    and b"--json" in args:
                return int(pid)
        time.sleep(0.005)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build = os.path.join(args.bin, "relax-build")
    rrun = os.path.join(args.bin, "relax-run")
    root, which = data_root()
    print(f"test data: {which}")

    with tempfile.TemporaryDirectory() as tmp:
        # The builds' temporary directory: each child gets its own inside,
        # removed once it is reaped, however it ended.
        build_tmp = os.path.join(tmp, "TMPDIR")
        os.makedirs(build_tmp)
        os.environ["TMPDIR"] = build_tmp
        zoo = os.path.join(tmp, "zoo")
        out = os.path.join(tmp, "out")
        expect = build_zoo(root, zoo)
        report_path = os.path.join(tmp, "report.json")

        # ---- The whole zoo: statuses, report, exit code 1.
        t0 = time.time()
        r = run(build, zoo, "--target", "cpu", "-o", out, "--jobs", "2", "--report", report_path, timeout=1800)
        print(f"batch of {len(expect)} models: {time.time() - t0:.1f} s, exit {r.returncode}")
        check(r.returncode == 1, f"zoo with broken models: exit {r.returncode}, want 1\n{r.stderr[-2000:]}")
        with open(report_path) as f:
            rep = json.load(f)
        entries = {m["model"]: m for m in rep["models"]}
        check(set(entries) == set(expect), f"report models: {sorted(set(entries) ^ set(expect))[:10]}")
        for model, want in expect.items():
            e = entries.get(model, {})
            check(e.get("status") == want, f"{model}: status {e.get('status')} ({e.get('message', '')[:200]}), want {want}")
        s = rep["summary"]
        counts = {st: sum(1 for v in expect.values() if v == st) for st in ("ok", "unsupported", "error")}
        check(s["total"] == len(expect) and s["ok"] == counts["ok"] and s["unsupported"] == 1 and s["error"] == 2
              and s["crash"] == 0 and s["timeout"] == 0 and s["exit_code"] == 1, f"summary: {s}")
        check(rep["relax_build"]["target"] == "cpu" and rep["relax_build"]["jobs"] == 2, f"header: {rep['relax_build']}")
        # Unsupported: the op and the node; errors: a message naming the problem.
        u = entries.get(os.path.join(zoo, "broken", "unsupported.onnx"), {})
        check(any(x.get("op") == "FooBar" and "weird_node" in x.get("nodes", []) for x in u.get("unsupported", [])),
              f"unsupported entry: {u}")
        t = entries.get(os.path.join(zoo, "broken", "truncated.onnx"), {})
        check("not a valid ONNX model" in t.get("message", ""), f"truncated: {t.get('message')}")
        # Good entries: signature, package size (the file's), kernels, time.
        for model, want in expect.items():
            e = entries.get(model, {})
            pkg = package_of(zoo, out, model)
            if want == "ok":
                check(e.get("package") == pkg and os.path.exists(pkg), f"{model}: package {e.get('package')} / {pkg}")
                check(os.path.exists(pkg) and e.get("package_bytes") == os.path.getsize(pkg), f"{model}: package_bytes")
                check(isinstance(e.get("kernels"), int) and e.get("seconds", 0) > 0, f"{model}: kernels/seconds {e}")
                check(e.get("inputs") and all("name" in i and "dtype" in i for i in e["inputs"]) and e.get("outputs"),
                      f"{model}: signature {e.get('inputs')} -> {e.get('outputs')}")
            else:
                check(not os.path.exists(pkg), f"{model}: a package was written for a failed model")
        check(leftovers(out) == [], f"temporary files left: {leftovers(out)}")
        # The summary table on stderr and one line per model (not a terminal).
        check(re.search(r"not built:", r.stderr) and re.search(r"unsupported +\d+", r.stderr), "summary table on stderr")
        lines = [l for l in r.stderr.splitlines() if re.match(rf"\[ *\d+/{len(expect)}\] ", l)]
        check(len(lines) == len(expect), f"{len(lines)} progress lines for {len(expect)} models")

        # ---- Every package built runs and matches the expected outputs.
        ran = 0
        for model, want in sorted(expect.items()):
            if want != "ok":
                continue
            pkg = package_of(zoo, out, model)
            if "/light/" in model:
                rr = run_light(rrun, pkg, model, tmp)
            else:
                rr = run(rrun, pkg, "--test-data", os.path.join(os.path.dirname(os.path.realpath(model)),
                                                                "test_data_set_0"))
            check(rr.returncode == 0, f"{model}: relax-run exit {rr.returncode}: {rr.stderr[-500:]}")
            ran += rr.returncode == 0
        print(f"packages run and matched: {ran} of {counts['ok']}")

        # ---- Up to date: nothing rebuilt; --force rebuilds; exit 2 with only unsupported.
        # Six models of distinct bytes, copied under distinct names: in
        # Debian's data they are all model.onnx (two in one -o folder would
        # collide), and some cases share one model (a changed model must
        # differ). The smallest: they are built a dozen times over (the
        # whole networks of light/ would make that a minute).
        gooddir = os.path.join(tmp, "good")
        os.makedirs(gooddir)
        good, contents = [], set()
        for m in sorted((m for m, w in expect.items() if w == "ok"), key=lambda m: (os.path.getsize(m), m)):
            with open(m, "rb") as f:
                data = f.read()
            if data in contents:
                continue
            contents.add(data)
            good.append(os.path.join(gooddir, f"g{len(good)}.onnx"))
            with open(good[-1], "wb") as f:
                f.write(data)
            if len(good) == 6:
                break
        r = run(build, *good, os.path.join(zoo, "broken", "unsupported.onnx"), "-o", os.path.join(tmp, "o2"),
                "--json")
        check(r.returncode == 2, f"good + unsupported: exit {r.returncode}, want 2")
        rep2 = json.loads(r.stdout)
        check(rep2["summary"]["ok"] == len(good) and rep2["summary"]["up_to_date"] == 0, f"first run: {rep2['summary']}")
        r = run(build, *good, "-o", os.path.join(tmp, "o2"), "--json")
        rep3 = json.loads(r.stdout) if r.returncode == 0 else {"summary": {}}
        check(r.returncode == 0 and rep3["summary"].get("up_to_date") == len(good),
              f"second run: exit {r.returncode}, {rep3['summary']}")
        r = run(build, *good, "-o", os.path.join(tmp, "o2"), "--json", "--force")
        rep4 = json.loads(r.stdout) if r.returncode == 0 else {"summary": {}}
        check(r.returncode == 0 and rep4["summary"].get("up_to_date") == 0, f"--force: {rep4['summary']}")
        # Other options are another build: not up to date.
        r = run(build, *good, "-o", os.path.join(tmp, "o2"), "--json", "-O", "1")
        rep5 = json.loads(r.stdout) if r.returncode == 0 else {"summary": {}}
        check(r.returncode == 0 and rep5["summary"].get("up_to_date") == 0, f"-O1 after -O2: {rep5['summary']}")

        # A changed model is rebuilt; one that no longer builds loses its package.
        mine = os.path.join(tmp, "mine")
        os.makedirs(mine)
        a = os.path.join(mine, "a.onnx")
        shutil.copy(os.path.realpath(good[0]), a)
        r = run(build, a, "-o", os.path.join(tmp, "o3") + "/", "--json")
        os.utime(a)  # a new time, the same bytes: still up to date
        r = run(build, a, "-o", os.path.join(tmp, "o3") + "/", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["summary"]["up_to_date"] == 1, "touched model rebuilt")
        shutil.copy(os.path.realpath(good[1]), a)
        r = run(build, a, "-o", os.path.join(tmp, "o3") + "/", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["summary"]["up_to_date"] == 0, "changed model not rebuilt")
        with open(a, "wb") as f:
            f.write(b"garbage")
        r = run(build, a, "-o", os.path.join(tmp, "o3") + "/", "--json")
        check(r.returncode == 1 and not os.path.exists(os.path.join(tmp, "o3", "a.cpu.rpkg")),
              "a model that no longer builds kept its old package")

        # ---- A crash and a timeout: the others finish, nothing is left behind.
        crashzoo = os.path.join(tmp, "crashzoo")
        os.makedirs(crashzoo)
        save(slow_model(), os.path.join(crashzoo, "slow.onnx"))
        for m in good[:3]:
            shutil.copy(m, os.path.join(crashzoo, os.path.basename(m)))
        cout = os.path.join(tmp, "crashout")
        crashed = False
        for attempt in range(3):
            p = subprocess.Popen([build, crashzoo, "-o", cout, "--jobs", "2", "--json", "--force"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            pid = find_child("slow.onnx")
            if pid:
                os.kill(pid, signal.SIGSEGV)
            so, se = p.communicate(timeout=600)
            rep6 = json.loads(so)
            ent = {os.path.basename(m["model"]): m for m in rep6["models"]}
            if ent["slow.onnx"]["status"] == "ok":
                continue  # it finished before it was found: try again
            crashed = True
            check(p.returncode == 1 and ent["slow.onnx"]["status"] == "crash"
                  and "signal 11" in ent["slow.onnx"]["message"], f"killed build: {ent['slow.onnx']}")
            check(all(m["status"] == "ok" for n, m in ent.items() if n != "slow.onnx"), f"others: {ent}")
            check(not os.path.exists(os.path.join(cout, "slow.cpu.rpkg")) and leftovers(cout) == [],
                  f"crash left files: {os.listdir(cout)}")
            break
        check(crashed, "could not catch the slow build to kill it")
        r = run(build, crashzoo, "-o", cout, "--jobs", "2", "--json", "--force", "--timeout", "0.3")
        rep7 = json.loads(r.stdout)
        ent = {os.path.basename(m["model"]): m for m in rep7["models"]}
        check(r.returncode == 1 and ent["slow.onnx"]["status"] == "timeout", f"timeout: {ent['slow.onnx']}")
        check(not os.path.exists(os.path.join(cout, "slow.cpu.rpkg")) and leftovers(cout) == [],
              f"timeout left files: {os.listdir(cout)}")
        # SIGINT: the batch stops its builds, says so, exits 130, leaves no temporary file.
        p = subprocess.Popen([build, crashzoo, "-o", cout, "--jobs", "1", "--force"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # With one job the others may build first: on a slow machine that
        # takes more than find_child's default half minute.
        if find_child("slow.onnx", timeout=600) is not None:
            p.send_signal(signal.SIGINT)
        so, se = p.communicate(timeout=600)
        check(p.returncode == 130 and "interrupted" in se and leftovers(cout) == [],
              f"SIGINT: exit {p.returncode}, {se[-300:]}, {leftovers(cout)}")
        check(os.listdir(build_tmp) == [], f"builds left in $TMPDIR: {os.listdir(build_tmp)}")

        # ---- Shards: disjoint, covering; merged, the same counts as the whole.
        parts, seen = [], []
        for k in (1, 2, 3):
            part = os.path.join(tmp, f"part{k}.json")
            r = run(build, zoo, "-o", out, "--shard", f"{k}/3", "--report", part, "--quiet", timeout=1800)
            check(r.stderr == "", f"--quiet printed: {r.stderr[:300]}")
            with open(part) as f:
                names = [m["model"] for m in json.load(f)["models"]]
            seen += names
            parts.append(part)
        check(sorted(seen) == sorted(expect), f"shards: {len(seen)} models, want {len(expect)}, each once")
        r = run(build, "--merge-reports", *parts)
        merged = json.loads(r.stdout)
        ms = merged["summary"]
        check(r.returncode == 1 and ms["total"] == len(expect) and ms["ok"] == counts["ok"] and ms["error"] == 2
              and ms["unsupported"] == 1, f"merged: exit {r.returncode}, {ms}")
        r = run(build, "--merge-reports", os.path.join(zoo, "broken", "not_onnx.onnx"))
        check(r.returncode == 1 and "not a relax-build report" in r.stderr, f"merge of a non-report: {r.stderr}")
        for bad in (["--shard", "0/3"], ["--shard", "4/3"], ["--shard", "x"]):
            r = run(build, zoo, "-o", out, *bad)
            check(r.returncode == 1 and "--shard" in r.stderr, f"{bad}: exit {r.returncode}")
        r = run(build, os.path.join(tmp, "missing.onnx"), zoo, "-o", out)
        check(r.returncode == 1 and "missing.onnx: no such file" in r.stderr, f"missing input: {r.stderr}")

    return finish("relax-build batch")


if __name__ == "__main__":
    sys.exit(main())
