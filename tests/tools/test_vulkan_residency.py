#!/usr/bin/env python3
"""The Vulkan data path (runtime/vulkan_exec.cc), measured through relax-run.

- Device-resident tensors: GPT-2 tiny on lavapipe runs with one command
  buffer per run, copies in only its inputs (weights and intermediates live
  in device memory the host maps) and copies nothing out.
- The copying path (RELAX_VULKAN_HOST_MEMORY=1: what a device without
  mappable memory gets; =staged: through staging buffers, as on a discrete
  GPU) gives the same answers.
- Kernel outputs read by host builtins in the middle of a graph (NonZero,
  a data-dependent If) are waited for: answers match numpy.
- A tensor beyond lavapipe's 128 MiB storage-buffer range (a static
  135 MiB input, as a large FC weight) is bound in chunks: a Gather reads
  rows on both sides of the chunk boundary right.
- Matmuls tiled through shared memory (RELAX_VULKAN_SHARED=1; lavapipe
  never picks them by itself) give the expected answers at every sequence
  length, and =0 turns them off.
- relax-run --profile times every kernel; relax-build --emit kernels prints
  the GLSL (vulkan) or LLVM IR (cpu).

    tests/tools/test_vulkan_residency.py --bin build/bin
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tool_check import check, finish, run, save

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "models")


def run_json(rrun, *args, env=None):
    r = subprocess.run([rrun, *args, "--json"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    try:
        return r.returncode, json.loads(r.stdout)
    except json.JSONDecodeError:
        return r.returncode, {"error": r.stderr}


def host_builtin_model(path):
    """y = NonZero(Relu(x) - 1) as float + 1; z = If(sum(x) > 0, x * 2, x * 3)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Sub", ["r", "one"], ["s"]),
        helper.make_node("NonZero", ["s"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["nzf", "one"], ["y"]),
        helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        helper.make_node("Greater", ["sum", "zero"], ["cond"]),
        helper.make_node("If", ["cond"], ["z"],
                         then_branch=helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                                                       [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)]),
                         else_branch=helper.make_graph([helper.make_node("Mul", ["x", "three"], ["e"])], "else", [],
                                                       [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in [("one", 1.0), ("zero", 0.0), ("two", 2.0), ("three", 3.0)]]
    g = helper.make_graph(nodes, "host_builtins", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, None]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 5])], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    rbuild, rrun = os.path.join(args.bin, "relax-build"), os.path.join(args.bin, "relax-run")
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "gpt2.rpkg")
        r = run(rbuild, os.path.join(MODELS, "gpt2_tiny.onnx"), "--target", "vulkan", "-o", pkg)
        check(r.returncode == 0, f"relax-build gpt2_tiny --target vulkan: {r.stderr}")
        case = os.path.join(MODELS, "data", "gpt2_tiny", "b2_s64_p3")
        input_bytes = sum(numpy_helper.to_array(onnx.load_tensor(f)).nbytes
                          for f in glob.glob(os.path.join(case, "test_data_set_0", "input_*.pb")) or
                          glob.glob(os.path.join(case, "input_*.pb")))
        weight_bytes = os.path.getsize(os.path.join(MODELS, "gpt2_tiny.onnx")) // 2  # well below the weights' size

        rc, rep = run_json(rrun, pkg, "--test-data", case, "--atol", "1e-5", "--bench", "2")
        vk = rep.get("vulkan", {})
        check(rc == 0 and rep.get("ok"), f"gpt2 on vulkan: exit {rc}: {rep}")
        check(vk.get("runs") == 3 and vk.get("submits") == 1, f"one command buffer per run: {vk}")
        check(input_bytes > 0 and vk.get("bytes_uploaded") == input_bytes,
              f"only the inputs ({input_bytes} bytes) are copied in: {vk}")
        check(vk.get("bytes_downloaded") == 0, f"outputs stay where the host maps them: {vk}")
        check(vk.get("resident_bytes", 0) > weight_bytes, f"weights are resident: {vk}")
        check(0 < vk.get("barriers", 0) < vk.get("dispatches", 0),
              f"barriers only where the data flow needs them: {vk}")

        for mode in ["1", "staged"]:  # copies through mapped buffers; through staging (a discrete GPU's way)
            rc, rep2 = run_json(rrun, pkg, "--test-data", case, "--atol", "1e-5",
                                env={"RELAX_VULKAN_HOST_MEMORY": mode})
            vk2 = rep2.get("vulkan", {})
            check(rc == 0 and rep2.get("ok"), f"gpt2 on vulkan, host memory {mode}: exit {rc}: {rep2}")
            check(vk2.get("resident_bytes") == 0 and vk2.get("bytes_uploaded", 0) > weight_bytes + input_bytes
                  and vk2.get("bytes_downloaded", 0) > 0, f"host memory {mode}: everything is copied: {vk2}")

        for c in sorted(glob.glob(os.path.join(MODELS, "data", "gpt2_tiny", "*"))):
            for force in ["1", "0"]:
                rc, rep5 = run_json(rrun, pkg, "--test-data", c, "--atol", "1e-5", env={"RELAX_VULKAN_SHARED": force})
                n = rep5.get("vulkan", {}).get("shared_dispatches", -1)
                check(rc == 0 and rep5.get("ok"), f"gpt2 {os.path.basename(c)}, RELAX_VULKAN_SHARED={force}: {rep5}")
                check(n > 0 if force == "1" else n == 0,
                      f"RELAX_VULKAN_SHARED={force}: {n} dispatches through shared memory")

        rc, rep3 = run_json(rrun, pkg, "--test-data", case, "--atol", "1e-5", "--profile")
        prof = rep3.get("profile", [])
        check(rc == 0 and rep3.get("ok"), f"--profile run: exit {rc}: {rep3}")
        check(prof and sum(p["calls"] for p in prof) == rep3.get("vulkan", {}).get("kernel_calls")
              and all(p["ms"] >= 0 for p in prof), f"--profile times every kernel call: {prof}")
        check(prof == sorted(prof, key=lambda p: -p["ms"]), "--profile lists the slowest first")

        # A table of 33,000 x 1,024 f32 (135 MiB) gathered across its chunks.
        rows, width = 33000, 1024
        big = os.path.join(tmp, "big.onnx")
        g = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["y"], axis=0)], "big",
                              [helper.make_tensor_value_info("table", TensorProto.FLOAT, [rows, width]),
                               helper.make_tensor_value_info("idx", TensorProto.INT64, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", width])])
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), big)
        bp = os.path.join(tmp, "big.rpkg")
        r = run(rbuild, big, "--target", "vulkan", "-o", bp)
        check(r.returncode == 0, f"relax-build big table: {r.stderr}")
        r = run(rbuild, big, "--target", "vulkan", "--emit", "kernels")
        check("float ld_b_" in r.stdout, "--emit kernels: the big table is read through its chunks' loader")
        table = np.arange(rows * width, dtype=np.float32).reshape(rows, width) % 65521
        per_chunk = (1 << 27) // 4 // width  # rows in the first 128 MiB chunk
        idx = np.array([0, per_chunk - 1, per_chunk, rows - 1, 7], np.int64)
        np.save(os.path.join(tmp, "table.npy"), table)
        np.save(os.path.join(tmp, "idx.npy"), idx)
        out = os.path.join(tmp, "out_big")
        rc, rep6 = run_json(rrun, bp, "--input", "table=" + os.path.join(tmp, "table.npy"),
                            "--input", "idx=" + os.path.join(tmp, "idx.npy"), "--output-dir", out)
        check(rc == 0, f"gather from a 135 MiB table on vulkan: exit {rc}: {rep6}")
        if rc == 0:
            y = np.load(os.path.join(out, "y.npy"))
            check(np.array_equal(y, table[idx]), "gather across the 128 MiB chunk boundary")
        del table

        # Kernel outputs read on the host mid-graph.
        onnx_path = os.path.join(tmp, "host.onnx")
        host_builtin_model(onnx_path)
        for target in ["vulkan"]:
            hp = os.path.join(tmp, f"host.{target}.rpkg")
            r = run(rbuild, onnx_path, "--target", target, "-o", hp)
            check(r.returncode == 0, f"relax-build host builtins ({target}): {r.stderr}")
            for sign in [1.0, -1.0]:
                x = (np.arange(15, dtype=np.float32).reshape(3, 5) - 4.0) * sign
                np.save(os.path.join(tmp, "x.npy"), x)
                out = os.path.join(tmp, f"out_{target}_{sign}")
                for env in [{}, {"RELAX_VULKAN_HOST_MEMORY": "1"}, {"RELAX_VULKAN_HOST_MEMORY": "staged"}]:
                    rc, rep4 = run_json(rrun, hp, "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out,
                                        env=env)
                    check(rc == 0, f"host builtins ({target}, x sign {sign}, {env}): exit {rc}: {rep4}")
                    if rc != 0:
                        continue
                    y = np.load(os.path.join(out, "y.npy"))
                    z = np.load(os.path.join(out, "z.npy"))
                    want_y = np.array(np.nonzero(np.maximum(x, 0) - 1), np.float32) + 1
                    want_z = x * (2 if x.sum() > 0 else 3)
                    check(y.shape == want_y.shape and np.array_equal(y, want_y), f"NonZero after kernels: {y} vs {want_y}")
                    check(np.allclose(z, want_z), f"If on a kernel's result: {z} vs {want_z}")

        r = run(rbuild, os.path.join(MODELS, "gpt2_tiny.onnx"), "--target", "vulkan", "--emit", "kernels")
        check(r.returncode == 0 and r.stdout.count("#version 450") >= 10 and "void main()" in r.stdout,
              f"--emit kernels (vulkan) prints GLSL: {r.stderr[:300]}")
        # Register tiles: 4x4 by default (the copies' accumulators acc_<r>_<c>), none with --tile 1x1.
        check(" b_acc_3_3" in r.stdout, "--emit kernels (vulkan): matmuls carry 4x4 register tiles")
        check("(shared-memory tiles)" in r.stdout and "shared float b_sh0" in r.stdout and "barrier();" in r.stdout,
              "--emit kernels (vulkan): the matmuls' shared-memory variants are printed")
        r = run(rbuild, os.path.join(MODELS, "gpt2_tiny.onnx"), "--target", "vulkan", "--tile", "1x1", "--emit", "kernels")
        check(r.returncode == 0 and "#version 450" in r.stdout and "acc_3_3" not in r.stdout,
              f"--tile 1x1: no register tiles: {r.stderr[:300]}")
        r = run(rbuild, os.path.join(MODELS, "gpt2_tiny.onnx"), "--target", "vulkan", "--tile", "9x1", "-o",
                os.path.join(tmp, "bad.rpkg"))
        check(r.returncode == 1 and "--tile" in r.stderr and not os.path.exists(os.path.join(tmp, "bad.rpkg")),
              f"--tile 9x1 is refused: exit {r.returncode}: {r.stderr[:300]}")
        r = run(rbuild, os.path.join(MODELS, "gpt2_tiny.onnx"), "--emit", "kernels")
        check(r.returncode == 0 and "define " in r.stdout, f"--emit kernels (cpu) prints LLVM IR: {r.stderr[:300]}")
    return finish("vulkan residency")


if __name__ == "__main__":
    sys.exit(main())
