#!/usr/bin/env python3
"""RNN, GRU and LSTM on vulkan, against the cpu target.

On a GPU the recurrences run their time loop on the host, one step's
kernels per iteration (passes/legalize/quant.cc); the cpu target keeps the
one-program form that the ONNX conformance cases check. Every form is
built for both targets and compared: the three directions, both layouts,
sequence lengths (one of them 0), steps and batch symbolic or constant,
initial states, clip, peepholes, input_forget and GRU's
linear_before_reset; and one LSTM of hidden size
128 over 40 steps, whose one-program form lavapipe refused (it ends a loop
after 65,535 iterations in one invocation).

    tests/tools/test_vulkan_recurrent.py --bin build/bin
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx.numpy_helper as nh
from onnx import TensorProto, helper

from tool_check import check, finish, run, save


def recurrent(rng, op, direction, layout, seq_lens, lbr=0, peep=0, clip=0, init=0, forget=0, S=5, N=3, I=4, H=6,
              named=False):
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    D = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((N, S, I) if layout else (S, N, I)).astype(np.float32)
    arr = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)
    inits = [nh.from_array(arr(D, G * H, I), "W"), nh.from_array(arr(D, G * H, H), "R"),
             nh.from_array(arr(D, 2 * G * H), "B")]
    ins = ["X", "W", "R", "B", ""]
    if seq_lens:
        inits.append(nh.from_array(np.array([S, 2, 0][:N], np.int32), "L"))
        ins[4] = "L"
    state = (N, D, H) if layout else (D, N, H)
    ins += ["", ""] if op == "LSTM" else [""]
    if init:
        inits.append(nh.from_array(arr(*state), "h0"))
        ins[5] = "h0"
        if op == "LSTM":
            inits.append(nh.from_array(arr(*state), "c0"))
            ins[6] = "c0"
    if peep:
        inits.append(nh.from_array(arr(D, 3 * H), "P"))
        ins.append("P")
    while ins[-1] == "":
        ins.pop()
    attrs = dict(hidden_size=H, direction=direction, layout=layout)
    if clip:
        attrs["clip"] = 0.7
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    if forget:
        attrs["input_forget"] = 1
    outs = ["Y", "Yh"] + (["Yc"] if op == "LSTM" else [])
    g = helper.make_graph([helper.make_node(op, ins, outs, **attrs)], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                         (["batch", "steps"] if layout else ["steps", "batch"]) + [I]
                                                         if named else list(x.shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), x, outs


def cases():
    out = []
    for op in ("LSTM", "GRU", "RNN"):
        for k, direction in enumerate(("forward", "reverse", "bidirectional")):
            for layout in (0, 1):
                f = dict(seq_lens=(k + layout) % 2, init=layout, clip=1 - layout, named=(k + layout + 1) % 2 == 1)
                if op == "LSTM":
                    f.update(peep=layout, forget=1 - layout)
                if op == "GRU":
                    f.update(lbr=(k + layout + 1) % 2)
                out.append((op, direction, layout, f))
    out.append(("LSTM", "forward", 0, dict(seq_lens=0, S=40, N=1, I=32, H=128, named=True)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args = ap.parse_args()
    build, rrun = os.path.join(args.bin, "relax-build"), os.path.join(args.bin, "relax-run")
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        for k, (op, direction, layout, f) in enumerate(cases()):
            what = f"{op} {direction} layout={layout} {f}"
            model, x, outs = recurrent(rng, op, direction, layout, **f)
            path = os.path.join(tmp, f"m{k}.onnx")
            save(model, path)
            np.save(os.path.join(tmp, f"x{k}.npy"), x)
            got = {}
            for target in ("cpu", "vulkan"):
                pkg = os.path.join(tmp, f"m{k}.{target}.rpkg")
                r = run(build, path, "--target", target, "-o", pkg)
                if r.returncode != 0:
                    check(False, f"{what}: relax-build --target {target}: {r.stderr[-400:]}")
                    continue
                od = os.path.join(tmp, f"o{k}_{target}")
                r = run(rrun, pkg, "--input", "X=" + os.path.join(tmp, f"x{k}.npy"), "--output-dir", od)
                if r.returncode != 0:
                    check(False, f"{what}: relax-run on {target}: {r.stderr[-400:]}")
                    continue
                got[target] = [np.load(os.path.join(od, o + ".npy")) for o in outs]
            if len(got) == 2:
                err = max(float(np.max(np.abs(a - b))) for a, b in zip(got["cpu"], got["vulkan"]))
                check(all(a.shape == b.shape for a, b in zip(got["cpu"], got["vulkan"])) and err < 1e-4,
                      f"{what}: vulkan differs from cpu by {err}")
    return finish("recurrent layers on vulkan")


if __name__ == "__main__":
    sys.exit(main())
