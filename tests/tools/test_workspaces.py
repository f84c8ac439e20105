#!/usr/bin/env python3
"""Workspace lifting end to end.

An LSTM with symbolic batch and sequence length (Debian's python3-onnx)
keeps its per-row state (hidden, cell, gates, the recurrent sums) in a
workspace of shape (batch, ...); its input projection (every step's W x,
one BLAS product) and W and R transposed are graph tensors. At -O0 the
kernel allocates the workspace on every call, unseen by the graph; at -O2
lift-workspaces makes it outputs the call drops, static-plan-memory plans
them, and the transposed weights are folded into the package. Checks: the
-O2 IR has no workspace left in the program and plans storage for it;
relax-inspect's activations at -O2 are the -O0 ones plus exactly the
workspace bytes, less the folded transposes; with --bound the
workspace is planned at the bound and the sweep's planned footprint is
below the pool's; every variant computes what a numpy LSTM computes at
several batch sizes and lengths.

Library workspaces: 2-D f32 convolutions go to gemm.conv2d (im2col +
SGEMM), whose im2col matrix is an output the graph allocates. For strides,
asymmetric padding, dilation, groups, a 1x1 kernel (no workspace) and
symbolic image sizes: the call and its workspace are in the IR, the
workspace is planned, and the values match a numpy convolution. Their
weights are constants, so they go to gemm.conv2d_packed over weights
packed once (gemm.conv2d_pack, folded at build time): layout 1 (the
GEMM's) keeps the im2col workspace; layout 0, for those the direct kernel
takes (runtime/conv_direct.h conv2d_direct_pays, for the target CPU: a
512-channel 3x3 layer is built for x86-64-v3 and for the host), needs
none.

    tests/tools/test_workspaces.py --bin build/bin
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run, save

H, I = 8, 5
rng = np.random.default_rng(11)
W = (rng.standard_normal((1, 4 * H, I)) * 0.5).astype(np.float32)
R = (rng.standard_normal((1, 4 * H, H)) * 0.5).astype(np.float32)
B = (rng.standard_normal((1, 8 * H)) * 0.1).astype(np.float32)


def lstm_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", I])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 1, "batch", H])
    yh = helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [1, "batch", H])
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h"], name="lstm", hidden_size=H)]
    inits = [nh.from_array(W, "W"), nh.from_array(R, "R"), nh.from_array(B, "B")]
    g = helper.make_graph(nodes, "lstm", [x], [y, yh], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def reference(x):
    sig = lambda v: 1 / (1 + np.exp(-v))
    seq, batch, _ = x.shape
    h = np.zeros((batch, H), np.float64)
    c = np.zeros((batch, H), np.float64)
    ys = []
    for t in range(seq):
        g = x[t] @ W[0].T + h @ R[0].T + B[0, :4 * H] + B[0, 4 * H:]
        i, o, f, cand = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        c = sig(f) * c + sig(i) * np.tanh(cand)
        h = sig(o) * np.tanh(c)
        ys.append(h)
    return np.stack(ys)[:, None], h[None]


def conv_model(c, o, k, strides, pads, dilations, groups, hw):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, *hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = (rng.standard_normal((o, c // groups, k, k)) * 0.3).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=strides, pads=pads,
                            dilations=dilations, group=groups)
    g = helper.make_graph([node], "conv", [x], [y], [nh.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w


def conv_reference(x, w, strides, pads, dilations, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dilations[0], j * dilations[1]
                patch = xp[:, g * cg:(g + 1) * cg, r0:r0 + strides[0] * (oh - 1) + 1:strides[0],
                           c0:c0 + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return y


def check_conv_library(tmp, build, rrun):
    # (channels, outputs, kernel, strides, pads, dilations, groups, dims, shapes run)
    cases = [
        (8, 16, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1, ["h", "w"], [(1, 9, 9), (2, 5, 12)]),
        (6, 8, 3, [2, 1], [0, 1, 2, 0], [2, 1], 1, [11, 10], [(1, 11, 10), (3, 11, 10)]),
        (8, 8, 3, [1, 2], [1, 1, 1, 1], [1, 1], 2, ["h", "w"], [(1, 7, 7), (2, 6, 9)]),
        (6, 6, 3, [2, 1], [0, 1, 2, 0], [2, 1], 1, [11, 10], [(1, 11, 10), (3, 11, 10)]),
        (4, 12, 1, [1, 1], [0, 0, 0, 0], [1, 1], 1, ["h", "w"], [(2, 5, 6)]),
        # A reduction of 512 * 9 = 4608: for a CPU without AVX-512 im2col +
        # GEMM, with its workspace; with it (the host's, where it has it)
        # the direct kernel.
        (512, 8, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1, ["h", "w"], [(1, 5, 6)], ["--cpu", "x86-64-v3"]),
        (512, 8, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1, ["h", "w"], [(1, 5, 6)]),
    ]
    for c, o, k, strides, pads, dil, groups, hw, runs, *cpu in cases:
        cpu = cpu[0] if cpu else []
        what = f"conv c{c} o{o} k{k} s{strides} p{pads} d{dil} g{groups} {' '.join(cpu)}"
        model, w = conv_model(c, o, k, strides, pads, dil, groups, hw)
        path = os.path.join(tmp, "conv.onnx")
        save(model, path)
        r = run(build, path, "--emit", "relax", "-o", "-", *cpu)
        # the direct kernel's packed layout, no workspace, as
        # runtime/conv_direct.h conv2d_direct_pays chooses for the target CPU
        avx512 = re.search(r'traits="[^"]*vector=512', r.stdout) is not None
        og, K, wide = o // groups, c // groups * k * k, k > 1
        if og < 4:
            direct = False
        elif og < 8:
            direct = wide and K < 4096
        elif avx512 and strides[1] in (1, 2):
            direct = wide or strides != [1, 1] or K >= 128
        elif not wide and strides != [1, 1]:
            direct = K <= 128 and og <= 128
        else:
            direct = wide and K < 4096
        no_workspace = k == 1 or direct
        layout = "0)" if direct else "1)"
        check(r.returncode == 0 and '"gemm.conv2d_packed"' in r.stdout and f'"gemm.conv2d_pack", (const("w"' in r.stdout,
              f"{what}: not the library over packed weights: {r.stdout}")
        check(f", {layout}), out=" in r.stdout, f"{what}: expected layout {layout[0]}: {r.stdout}")
        planned_ws = "conv_all_buf1" in r.stdout and "alloc_tensor(storage" in r.stdout
        check(planned_ws != no_workspace,
              f"{what}: workspace planned: {planned_ws}, expected {not no_workspace}: {r.stdout}")
        pkg = os.path.join(tmp, "conv.rpkg")
        r = run(build, path, "-o", pkg, *cpu)
        check(r.returncode == 0, f"{what}: relax-build: {r.stderr}")
        for shape in runs:
            x = rng.standard_normal((shape[0], c, shape[1], shape[2])).astype(np.float32)
            np.save(os.path.join(tmp, "x.npy"), x)
            out = os.path.join(tmp, "out")
            r = run(rrun, pkg, "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out)
            check(r.returncode == 0, f"{what} at {shape}: relax-run: {r.stderr}")
            if r.returncode == 0:
                want = conv_reference(x.astype(np.float64), w.astype(np.float64), strides, pads, dil, groups)
                got = np.load(os.path.join(out, "y.npy"))
                check(got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4),
                      f"{what} at {shape}: wrong values (shape {got.shape} vs {want.shape})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build = os.path.join(args.bin, "relax-build")
    rrun = os.path.join(args.bin, "relax-run")
    inspect = os.path.join(args.bin, "relax-inspect")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "lstm.onnx")
        save(lstm_model(), model)
        pkgs = {}
        for name, flags in [("o0", ["-O0"]), ("o2", ["-O2"]),
                            ("bound", ["-O2", "--bound", "batch=1..8", "--bound", "seq=1..8"])]:
            pkgs[name] = os.path.join(tmp, name + ".rpkg")
            r = run(build, model, "-o", pkgs[name], *flags)
            check(r.returncode == 0, f"relax-build {flags}: exit {r.returncode}: {r.stderr}")

        # The IR: at -O2 the program's workspace (h, gates, c, the recurrent
        # sums) is four more outputs, and the call writes them into planned storage.
        r = run(build, model, "-O2", "--emit", "relax", "-o", "-")
        ir = r.stdout
        check(r.returncode == 0 and "workspaces=4" in ir, f"-O2: the LSTM program's workspace is lifted: {ir[:2000]}")
        check("alloc h_state" not in ir and "alloc gates" not in ir, "-O2: no workspace allocated in the program")
        check("alloc_tensor(storage" in ir and "call_tir_dps(@lstm" in ir, f"-O2: the workspace is planned: {ir[:2000]}")
        r = run(build, model, "-O0", "--emit", "relax", "-o", "-")
        check(r.returncode == 0 and "alloc h_state" in r.stdout and "workspaces=" not in r.stdout,
              "-O0: the kernel allocates its workspace itself")

        def inspect_json(pkg, *binds):
            r = run(inspect, pkg, "--json", *[a for b in binds for a in ("--bind", b)])
            check(r.returncode == 0, f"relax-inspect {pkg} {binds}: exit {r.returncode}: {r.stderr}")
            return json.loads(r.stdout).get("memory", {}) if r.returncode == 0 else {}

        # At batch 3, length 5: the workspace is 3 x (8 + 32 + 8 + 32) f32;
        # W and R transposed, (5 + 8) x 32 f32, are activations at -O0 only.
        ws = 3 * (H + 4 * H + H + 4 * H) * 4
        folded = (I + H) * 4 * H * 4
        m0 = inspect_json(pkgs["o0"], "batch=3", "seq=5")
        m2 = inspect_json(pkgs["o2"], "batch=3", "seq=5")
        check(m2.get("unplanned_bytes") == m0.get("unplanned_bytes", -1) + ws - folded,
              f"-O2 activations = -O0's + the workspace ({ws} bytes) - the folded weights ({folded}): {m0} vs {m2}")
        check(m2.get("planned_tensors") == m2.get("tensors") and m2.get("tensors", 0) >= 3,
              f"-O2 plans every activation, the workspace included: {m2}")
        check(m2.get("output_bytes") == m0.get("output_bytes"), f"the outputs are the same: {m0} vs {m2}")

        mb = inspect_json(pkgs["bound"], "batch=1..8", "seq=5")
        # The workspace, the unused Y_c (1 x batch x 8) and the projection
        # (seq x batch x 32), all live at once, at the bounds.
        check(mb.get("planned_bytes") == (8 * (H + 4 * H + H + 4 * H + H) + 8 * 8 * 4 * H) * 4,
              f"--bound batch=1..8 seq=1..8: the workspace (Y_c, the projection) planned at the bounds: {mb}")
        check(mb.get("planned_bytes", 1 << 40) < mb.get("pool_bytes", 0), f"bound plan below the pool: {mb}")

        # The right values, at several batch sizes and lengths.
        for name in ("o0", "o2", "bound"):
            for seq, batch in ((1, 1), (5, 3), (7, 8)):
                x = rng.standard_normal((seq, batch, I)).astype(np.float32)
                np.save(os.path.join(tmp, "x.npy"), x)
                out = os.path.join(tmp, "out")
                r = run(rrun, pkgs[name], "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out)
                check(r.returncode == 0, f"relax-run {name} seq {seq} batch {batch}: exit {r.returncode}: {r.stderr}")
                if r.returncode == 0:
                    y, yh = reference(x.astype(np.float64))
                    got_y, got_yh = np.load(os.path.join(out, "y.npy")), np.load(os.path.join(out, "y_h.npy"))
                    check(got_y.shape == y.shape and np.allclose(got_y, y, rtol=1e-4, atol=1e-5),
                          f"{name} seq {seq} batch {batch}: wrong y")
                    check(got_yh.shape == yh.shape and np.allclose(got_yh, yh, rtol=1e-4, atol=1e-5),
                          f"{name} seq {seq} batch {batch}: wrong y_h")
        np.save(os.path.join(tmp, "x.npy"), np.ones((2, 9, I), np.float32))
        r = run(rrun, pkgs["bound"], "--input", "x=" + os.path.join(tmp, "x.npy"))
        check(r.returncode == 1 and "batch" in r.stderr, f"batch 9 beyond the bound: exit {r.returncode}: {r.stderr}")

        check_conv_library(tmp, build, rrun)

    return finish("workspace lifting")


if __name__ == "__main__":
    sys.exit(main())
