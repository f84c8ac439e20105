#!/usr/bin/env python3
"""The cuda target where there is no GPU (CI): relax-build --target cuda
writes PTX for --arch through LLVM's NVPTX, with libdevice's math linked in
(no unresolved calls), checked by ptxas where the CUDA toolkit is installed
(its register and spill figures shown by relax-inspect); relax-inspect
--extract writes the module, which ptxas assembles again; a ptxas that
rejects the module fails the build with its message; a bad --arch is
refused. Without a CUDA driver relax-run refuses a cuda package saying
why, and the GPU part is reported as skipped; with one, the exported GPT-2,
BERT and CNN run at every shape against PyTorch's outputs.

Exit status: 0 when every check passed, GPU runs included; 77 (CTest's
SKIP_RETURN_CODE) when every other check passed but the GPU runs did not
happen (no GPU or CUDA driver, or no libdevice for the models); 1 when a
check failed, whether or not the GPU part ran.

    tests/tools/test_cuda_build.py --bin build/bin
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run, save

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")


def find_ptxas():
    """As the compiler looks for it (backends/cuda/ptxas.h)."""
    forced = os.environ.get("RELAX_PTXAS")
    if forced == "none":
        return None
    if forced and os.access(forced, os.X_OK):
        return forced
    for p in (shutil.which("ptxas"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"),
              "/usr/local/cuda/bin/ptxas"):
        if p and os.access(p, os.X_OK):
            return p
    return None


def find_libdevice():
    """As the compiler looks for it (backends/cuda/codegen.h)."""
    if os.environ.get("RELAX_CUDA_HOME") == "none":
        return None
    for home in (os.environ.get(v) for v in ("RELAX_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")):
        if home and os.path.exists(os.path.join(home, "nvvm", "libdevice", "libdevice.10.bc")):
            return home
    return "/usr/local/cuda" if os.path.exists("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc") else None


def mlp():
    """Matmuls, adds and relus over a symbolic batch: no math function, so
    it builds for cuda without CUDA's libdevice."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])
    w = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 7 - 3) / 10
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [x], [y], [nh.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def small_conv():
    """A 2x2 convolution over a 3x3 plane: the thread's output row, an index
    bit, selects a row offset of 0 or 3 in the input, which LLVM 16's NVPTX
    turned into a bit-field extract that dropped the 3 (before the repair in
    backends/cuda/codegen.cc)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])
    w = np.ones((1, 1, 2, 2), dtype=np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"])], "small_conv", [x], [y],
                          [nh.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def wrapping_bfe(ptx):
    """bfe.u64 fields reaching past bit 63: zeros where the and-of-sra that
    LLVM selected them for has the sign."""
    return [m.group(0) for m in re.finditer(r"bfe\.u64\s+%rd\d+,\s*%rd\d+,\s*(\d+),\s*(\d+);", ptx)
            if int(m.group(1)) + int(m.group(2)) > 64]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build = os.path.join(args.bin, "relax-build")
    inspect = os.path.join(args.bin, "relax-inspect")
    rrun = os.path.join(args.bin, "relax-run")
    ptxas = find_ptxas()
    print(f"ptxas: {ptxas or 'not installed: modules not checked'}")
    libdevice = find_libdevice()
    print(f"libdevice: {libdevice or 'not installed: only models without math functions build'}")
    gpt2 = os.path.join(MODELS, "gpt2_tiny.onnx")
    gpu_skipped = None  # why the GPU runs did not happen, if they did not

    with tempfile.TemporaryDirectory() as tmp:
        # Without the CUDA toolkit, a model with math functions is refused by name, writing nothing.
        none = os.path.join(tmp, "none.rpkg")
        r = subprocess.run([build, gpt2, "--target", "cuda", "-o", none], capture_output=True, text=True,
                           env=dict(os.environ, RELAX_CUDA_HOME="none"))
        check(r.returncode == 1 and "libdevice" in r.stderr and "CUDA_HOME" in r.stderr and not os.path.exists(none),
              f"no libdevice: exit {r.returncode}: {r.stderr[-500:]}")
        # The rest on GPT-2 where the toolkit is there, else on a model without math.
        model = gpt2
        if not libdevice:
            model = os.path.join(tmp, "mlp.onnx")
            save(mlp(), model)
        pkg = os.path.join(tmp, "model.cuda.rpkg")
        r = run(build, model, "--target", "cuda", "-o", pkg)
        check(r.returncode == 0 and os.path.exists(pkg), f"--target cuda: exit {r.returncode}: {r.stderr[-1500:]}")
        check("warning" not in r.stderr, f"--target cuda printed warnings: {r.stderr[-800:]}")

        # The generated matmuls (--no-cublas), for the checks of tiles below.
        gen = os.path.join(tmp, "model.nocublas.cuda.rpkg")
        r = run(build, model, "--target", "cuda", "--no-cublas", "-o", gen)
        check(r.returncode == 0 and os.path.exists(gen), f"--no-cublas: exit {r.returncode}: {r.stderr[-1500:]}")

        # The PTX: the arch asked for, one entry per stage, nothing left unresolved.
        for arch in ("sm_80", "sm_90"):
            r = run(build, model, "--target", "cuda", "--no-cublas", "--arch", arch, "--emit", "kernels")
            check(r.returncode == 0 and f".target {arch}" in r.stdout and ".entry relax_k_" in r.stdout,
                  f"--emit kernels --arch {arch}: {r.stdout[:400]}{r.stderr[-500:]}")
            check(".extern .func" not in r.stdout, f"{arch}: the PTX calls functions it does not define")
        # Reductions (softmax, layer norm, the generated matmuls) also as a
        # block per row, combined by warp shuffles.
        if libdevice:
            check(re.search(r"\.entry relax_k_\w+_rows", r.stdout) and "shfl.sync.bfly.b32" in r.stdout,
                  "no block-per-row kernel with warp shuffles in the PTX")
        # Matmul stages also as shared-memory tiles: block memory and barriers.
        check(re.search(r"\.shared \.align 16 \.b8 relax_k_\w+_shared_", r.stdout) and "bar.sync" in r.stdout
              and re.search(r"\.entry relax_k_\w*matmul", r.stdout), "no shared-memory tiles in the PTX")
        # No bit-field extract fills an arithmetic shift's sign with zeros.
        conv = os.path.join(tmp, "small_conv.onnx")
        save(small_conv(), conv)
        r = run(build, conv, "--target", "cuda", "--arch", "sm_90", "--emit", "kernels")
        check(r.returncode == 0 and ".entry relax_k_conv" in r.stdout, f"small conv: {r.stderr[-500:]}")
        check(not wrapping_bfe(r.stdout) and "bfe.s64" in r.stdout,
              f"small conv: bfe.u64 past bit 63: {wrapping_bfe(r.stdout)}")
        for bad in ("sm_20x", "compute_80", "foo"):
            r = run(build, model, "--target", "cuda", "--arch", bad, "-o", os.path.join(tmp, "bad.rpkg"))
            check(r.returncode == 1 and "--arch" in r.stderr and not os.path.exists(os.path.join(tmp, "bad.rpkg")),
                  f"--arch {bad}: exit {r.returncode}: {r.stderr}")

        # relax-inspect: the arch and ptxas's figures; --extract.
        r = run(inspect, pkg, "--json")
        info = json.loads(r.stdout) if r.returncode == 0 else {}
        cuda = info.get("cuda", {})
        check(cuda.get("arch") == "sm_80", f"relax-inspect --json cuda: {cuda}")
        if ptxas:
            r = run(inspect, gen, "--json")
            kernels = ((json.loads(r.stdout) if r.returncode == 0 else {}).get("cuda", {}).get("ptxas") or {}).get(
                "kernels", {})
            check(any(k.endswith("_shared") for k in kernels) and any(k.endswith("_plain") for k in kernels),
                  f"no shared-tile or untiled variant checked by ptxas: {list(kernels)}")
            check(len(kernels) >= info.get("kernels", 1) and all(k["registers"] > 0 for k in kernels.values()),
                  f"ptxas figures for every kernel: {kernels}")
            r = run(inspect, pkg)
            check(re.search(r"checked by ptxas \d+\.\d+", r.stdout) and " registers, " in r.stdout,
                  f"relax-inspect text: {r.stdout}")
        ext = os.path.join(tmp, "ext")
        r = run(inspect, pkg, "--extract", ext)
        check(r.returncode == 0 and os.path.exists(os.path.join(ext, "kernels.ptx"))
              and os.path.exists(os.path.join(ext, "kernels.cuda.json")), f"--extract: {r.stdout}{r.stderr}")
        if ptxas and os.path.exists(os.path.join(ext, "kernels.ptx")):
            r = subprocess.run([ptxas, "--gpu-name", "sm_80", os.path.join(ext, "kernels.ptx"), "-o",
                                os.path.join(tmp, "k.cubin")], capture_output=True, text=True)
            check(r.returncode == 0, f"ptxas on the extracted module: {r.stderr}")

        # Without ptxas the build still works and says the module is unchecked.
        env = dict(os.environ, RELAX_PTXAS="none")
        p2 = os.path.join(tmp, "unchecked.rpkg")
        r = subprocess.run([build, model, "--target", "cuda", "-o", p2], capture_output=True, text=True, env=env)
        check(r.returncode == 0, f"RELAX_PTXAS=none: {r.stderr}")
        r = run(inspect, p2)
        check("not checked by ptxas" in r.stdout, f"unchecked module: {r.stdout}")
        # A ptxas that rejects the module fails the build, with its message, and writes nothing.
        fake = os.path.join(tmp, "ptxas")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\ncase \"$1\" in --version) echo 'V1.2.3'; exit 0;; esac\n"
                    "echo \"ptxas fatal   : Unresolved extern function 'mystery'\"; exit 255\n")
        os.chmod(fake, 0o755)
        p3 = os.path.join(tmp, "rejected.rpkg")
        r = subprocess.run([build, model, "--target", "cuda", "-o", p3], capture_output=True, text=True,
                           env=dict(os.environ, RELAX_PTXAS=fake))
        check(r.returncode == 1 and "ptxas rejected" in r.stderr and "mystery" in r.stderr and not os.path.exists(p3),
              f"rejected by ptxas: exit {r.returncode}: {r.stderr}")

        # cuBLAS and CUDA graphs in the IR: matmuls big enough call cuBLAS with
        # one workspace (the size cuBLAS wants on the arch) that every call
        # shares; runs of launches become regions the runtime captures.
        def emitted(*extra):
            r = run(build, model, "--target", "cuda", "--emit", "relax", *extra)
            check(r.returncode == 0, f"--emit relax {extra}: {r.stderr[-500:]}")
            return r.stdout
        ir = emitted()
        check('call_library_dps("cublas.matmul"' in ir, "no cuBLAS call in the cuda IR")
        check(re.findall(r"alloc_storage\(shape\((\d+)\)", ir).count(str(4 << 20)) == 1,
              "the cuBLAS workspace (4 MiB on sm_80) is not one shared storage")
        check(str(32 << 20) in emitted("--arch", "sm_90"), "sm_90: no 32 MiB cuBLAS workspace")
        regions = re.findall(r'call_builtin\("cuda.graph_run", \(cuda_graph_\d+, "@main/\d+"\)', ir)
        check(len(regions) >= 1, "no CUDA graph region in the cuda IR")
        gen_ir = emitted("--no-cublas")
        check("cublas.matmul" not in gen_ir and re.search(r"call_tir_dps\(@\w*matmul", gen_ir),
              "--no-cublas still calls cuBLAS")
        check("cuda.graph_run" not in emitted("--no-cuda-graph"), "--no-cuda-graph still has regions")
        print(f"cuda IR: {ir.count('cublas.matmul')} cuBLAS calls, {len(regions)} CUDA graph regions")
        r = run(inspect, pkg, "--json")
        rep = json.loads(r.stdout) if r.returncode == 0 else {}
        check(rep.get("cuda_graph_regions") == len(regions) and rep.get("libraries") == ["cublas.matmul"]
              and rep.get("library_calls", 0) >= 1, f"relax-inspect: regions and library calls: {r.stdout[-400:]}")
        # relax-inspect --dot boxes each region, and draws the same edges as without regions.
        p_nog = os.path.join(tmp, "model.nograph.cuda.rpkg")
        r = run(build, model, "--target", "cuda", "--no-cuda-graph", "-o", p_nog)
        dot, dot_nog = run(inspect, pkg, "--dot").stdout, run(inspect, p_nog, "--dot").stdout
        check(dot.count("subgraph cluster_") == len(regions) and 'label="CUDA graph @main/0"' in dot
              and dot.count(" -> ") == dot_nog.count(" -> ") > 0,
              f"--dot with regions: {dot.count('subgraph cluster_')} boxes, {dot.count(' -> ')} edges "
              f"(without regions: {dot_nog.count(' -> ')})")

        # The rewrite into regions keeps the program's meaning: with
        # add_traits="capture" the cpu target rewrites too (the regions then run
        # directly), and the exported models still match PyTorch.
        rewritten = 0
        for m in ("gpt2_tiny", "bert_tiny", "cnn_tiny"):
            rel = os.path.join(tmp, m + ".relax")
            r = run(os.path.join(args.bin, "relax-import"), os.path.join(MODELS, m + ".onnx"), "-o", rel)
            check(r.returncode == 0, f"relax-import {m}: {r.stderr[-300:]}")
            with open(rel) as f:
                text = f.read()
            with open(rel, "w") as f:
                f.write(text.replace("module_attrs {", 'module_attrs {add_traits="capture", ', 1))
            r = run(build, rel, "--target", "cpu", "--emit", "relax")
            n = r.stdout.count('call_builtin("cuda.graph_run"')
            # cnn_tiny's cpu program has one kernel launch left between its
            # library calls (its flatten is read in place by the product,
            # passes/fold_matmul_views.cc): nothing to capture there.
            check(n >= 1 or m == "cnn_tiny", f"{m} on cpu with add_traits=capture: no region")
            rewritten += n
            cpkg = os.path.join(tmp, m + ".graphs.cpu.rpkg")
            r = run(build, rel, "--target", "cpu", "-o", cpkg)
            check(r.returncode == 0, f"{m}: {r.stderr[-500:]}")
            data = os.path.join(MODELS, "data", m)
            for case in sorted(os.listdir(data)):
                r = run(rrun, cpkg, "--test-data", os.path.join(data, case), "--atol", "1e-5")
                check(r.returncode == 0, f"{m} {case}, regions run directly on cpu: {r.stdout[-400:]}{r.stderr[-400:]}")
        check(rewritten >= 2, f"regions on cpu: only {rewritten} in the 3 exported models")
        print(f"regions on cpu: {rewritten} in the 3 exported models, every case matches")

        # relax-run: without a driver, a clear refusal naming why; with a GPU,
        # the exported models run at every shape against PyTorch's outputs.
        r = run(rrun, pkg, "--test-data", os.path.join(MODELS, "data", "gpt2_tiny", "b1_s7_p0"))
        no_gpu = any(s in r.stderr for s in ("no CUDA driver", "sees no device", "failed to initialise"))
        if no_gpu:
            check(r.returncode == 1 and "cannot run a cuda package" in r.stderr, f"relax-run without a GPU: {r.stderr}")
            gpu_skipped = r.stderr.strip().split("cannot run a cuda package: ")[-1] or "no usable CUDA driver"
            print("GPU runs: skipped: " + gpu_skipped)
        elif not libdevice:
            gpu_skipped = "the exported models need CUDA's libdevice, which is not installed"
            print("GPU runs: skipped: " + gpu_skipped)
        else:
            ran = 0
            for model in ("gpt2_tiny", "bert_tiny", "cnn_tiny"):
                p = os.path.join(tmp, model + ".cuda.rpkg")
                r = run(build, os.path.join(MODELS, model + ".onnx"), "--target", "cuda", "-o", p)
                check(r.returncode == 0, f"{model}: {r.stderr[-500:]}")
                data = os.path.join(MODELS, "data", model)
                regions = json.loads(run(inspect, p, "--json").stdout or "{}").get("cuda_graph_regions", 0)
                p_gen = os.path.join(tmp, model + ".nocublas.cuda.rpkg")
                r = run(build, os.path.join(MODELS, model + ".onnx"), "--target", "cuda", "--no-cublas", "-o", p_gen)
                check(r.returncode == 0, f"{model} --no-cublas: {r.stderr[-500:]}")
                for case in sorted(os.listdir(data)):
                    # The runtime's choice, never and always shared-memory
                    # tiles; CUDA graphs off; every matmul generated.
                    for pk, env in ((p, {}), (p, {"RELAX_CUDA_SHARED": "0"}), (p, {"RELAX_CUDA_SHARED": "1"}),
                                    (p, {"RELAX_CUDA_GRAPH": "0"}), (p_gen, {})):
                        r = subprocess.run([rrun, pk, "--test-data", os.path.join(data, case), "--atol", "1e-4",
                                            "--bench", "2", "--json"], capture_output=True, text=True,
                                           env=dict(os.environ, RELAX_CUDA_GRAPH_VERBOSE="1", **env))
                        what = f"{model} {case} on the GPU ({os.path.basename(pk)}, {env})"
                        check(r.returncode == 0, f"{what}: {r.stdout[-500:]}{r.stderr[-500:]}")
                        ran += 1
                        if r.returncode != 0 or pk != p:
                            continue
                        # Three runs of one binding: each region captured once,
                        # or twice where it reads a KV cache the pool hands out
                        # again (as ctest cuda-runtime shows on the fake
                        # driver), and launched as a graph every run.
                        g = json.loads(r.stdout).get("cuda_graphs", {})
                        if env.get("RELAX_CUDA_GRAPH") == "0":
                            check(g.get("captures") == 0 and g.get("direct") == 3 * regions, f"{what}: graphs off: {g}")
                        else:
                            check(g.get("failed") == 0 and regions <= g.get("captures", 0) <= 2 * regions
                                  and g.get("replays") == 3 * regions and g.get("direct") == 0,
                                  f"{what}: graphs: {g} for {regions} regions; {r.stderr[-800:]}")
            print(f"GPU runs: {ran} cases of the exported models")

    status = finish("cuda build")
    if status == 0 and gpu_skipped:
        # Every check that needs no GPU passed; CTest reports the test as
        # skipped rather than passed, since the GPU part did not run.
        print(f"cuda build: skipped (exit 77): no GPU check ran: {gpu_skipped}")
        return 77
    return status


if __name__ == "__main__":
    sys.exit(main())
