#!/usr/bin/env python3
"""Public models, measured but never committed: each imported, built per
target, run at one or more input shapes and compared with ONNX Runtime
(graph optimisations off) on the same random inputs.

    tests/corpus/survey.py --bin build/bin --models DIR [--targets cpu,vulkan] [--only NAME] [--json FILE]

DIR holds the .onnx files of MODELS below under their file names; where
each comes from (repository, commit, path) is listed beside it so that the
figures can be reproduced. Needs numpy and onnx (Debian's python3-numpy and
python3-onnx), node and npm's onnxruntime-node (ORT_NODE_PATH or
/tmp/ort/node_modules); the tests never run this.

Per model it prints: imported, the outputs' dims (named or not), the
match_casts left in @main, and per target built and, per shape, the largest
absolute error and the largest relative to the reference output's range.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (source, build options, [run: {input: shape or value}])
# A shape entry is a list of ints; a value entry is ("value", array).
MODELS = {
    # snakers4/silero-vad@806dcba, src/silero_vad/data/: a VAD with an STFT
    # as a conv, LSTMCell and the sample-rate branch in If (torch.onnx and spox)
    "silero_vad_op18_ifless": ("snakers4/silero-vad@806dcba:src/silero_vad/data/silero_vad_op18_ifless.onnx", [], [
        {"input": [1, 576], "state": [2, 1, 128], "sr": ("value", np.array(16000, np.int64))},
        {"input": [3, 576], "state": [2, 3, 128], "sr": ("value", np.array(16000, np.int64))},
    ]),
    # Its decoder squeezes the time axis when it is 1 (`if x.shape[-1] == 1`
    # in an If whose branches differ in rank), as it is for the 576-sample
    # chunks (512 and 64 of context) the model is run on: --dim folds that.
    "silero_vad_16k_op15": ("snakers4/silero-vad@806dcba:src/silero_vad/data/silero_vad_16k_op15.onnx",
                            ["--dim", "sequence=576"], [
        {"input": [1, 576], "state": [2, 1, 128], "sr": ("value", np.array(16000, np.int64))},
        {"input": [2, 576], "state": [2, 2, 128], "sr": ("value", np.array(16000, np.int64))},
    ]),
    "silero_vad_half": ("snakers4/silero-vad@806dcba:src/silero_vad/data/silero_vad_half.onnx", ["--dim", "sequence=576"], [
        {"input": [1, 576], "state": [2, 1, 128]},
    ]),
    # spox's export declares no dim names: --shape names them.
    "silero_vad": ("snakers4/silero-vad@806dcba:src/silero_vad/data/silero_vad.onnx",
                   ["--shape", "input=batch,576", "--shape", "state=2,batch,128"], [
        {"input": [1, 576], "state": [2, 1, 128], "sr": ("value", np.array(16000, np.int64))},
    ]),
    "silero_vad_openvino_16k": ("snakers4/silero-vad@806dcba:src/silero_vad/data/silero_vad_openvino_16k.onnx", [], [
        {"input": [1, 576], "state": [2, 1, 128]},
    ]),
    # PaddlePaddle/Paddle2ONNX (paddle2onnx exports, opset 10 and 11)
    "PP_OCR_v2_cls": ("PaddlePaddle/Paddle2ONNX@15cc81f:hardwares/rk/ocr/PP-OCRv2/weights/onnx/PP_OCR_v2_cls.onnx",
                      [], [{"x": [6, 3, 32, 960]}]),
    "PP_OCR_v2_det": ("PaddlePaddle/Paddle2ONNX@49b2375:hardwares/rk/python/ocr/PP_OCR_V2/weights/onnx/PP_OCR_v2_det.onnx",
                      [], [{"x": [1, 3, 960, 960]}]),
    "picodet_s_320_coco": ("PaddlePaddle/Paddle2ONNX@200e32c:hardwares/rk/detection/picodet/weights/onnx/picodet_s_320_coco.onnx",
                           [], [{"image": [1, 3, 320, 320]}]),
    "picodet_xs_416_coco_lcnet_sim": (
        "PaddlePaddle/Paddle2ONNX@5ea2d29:model_zoo/rk3588/detection/picodet/weights/onnx/picodet_xs_416_coco_lcnet_sim.onnx",
        [], [{"image": [1, 3, 416, 416]}]),
    # Kazuhito00/PaddleOCR-ONNX-Sample@HEAD, ppocr_onnx/model/: paddle2onnx
    # exports with dynamic batch, height and width (p2o.DynamicDimension.K);
    # the recogniser ends in a bidirectional LSTM over the text line
    "kz_ch_PP-OCRv3_det_infer": ("Kazuhito00/PaddleOCR-ONNX-Sample:ppocr_onnx/model/det_model/ch_PP-OCRv3_det_infer.onnx",
                                 [], [{"x": [1, 3, 320, 480]}, {"x": [2, 3, 256, 256]}]),
    "kz_ch_ppocr_mobile_v2.0_det_infer": (
        "Kazuhito00/PaddleOCR-ONNX-Sample:ppocr_onnx/model/det_model/ch_ppocr_mobile_v2.0_det_infer.onnx",
        [], [{"x": [1, 3, 224, 320]}]),
    "kz_ch_ppocr_mobile_v2.0_cls_infer": (
        "Kazuhito00/PaddleOCR-ONNX-Sample:ppocr_onnx/model/cls_model/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        [], [{"x": [4, 3, 48, 192]}, {"x": [1, 3, 48, 96]}]),
    "kz_en_number_mobile_v2.0_rec_infer": (
        "Kazuhito00/PaddleOCR-ONNX-Sample:ppocr_onnx/model/rec_model/en_number_mobile_v2.0_rec_infer.onnx",
        [], [{"x": [1, 3, 32, 320]}, {"x": [3, 3, 32, 100]}]),
    # google/magika@HEAD (tf2onnx 1.16.1 of a Keras model, opset 13 and 15):
    # file-type classification of byte values 0..256 (256 pads)
    "magika_standard_v2_1": ("google/magika:assets/models/standard_v2_1/model.onnx", [], [
        {"bytes": ("ints", [1, 4096], 257)}, {"bytes": ("ints", [4, 4096], 257)}]),
    "magika_fast_v2_1": ("google/magika:assets/models/fast_v2_1/model.onnx", [], [
        {"bytes": ("ints", [2, 1024], 257)}]),
    "magika_standard_v3_3": ("google/magika:assets/models/standard_v3_3/model.onnx", [], [
        {"bytes": ("ints", [1, 2048], 257)}, {"bytes": ("ints", [3, 2048], 257)}]),
    # microsoft/onnxjs@6ab9849, test/data: torch 1.1 at opset 10 and torch 1.6
    # at opset 11, weights listed as graph inputs (IR 4 and 6)
    "super_resolution_10": ("microsoft/onnxjs@6ab9849:test/data/super_resolution/super-resolution-10.onnx", [], [
        {"input": [1, 1, 224, 224]}, {"input": [2, 1, 224, 224]}]),
    "msra_190729": ("microsoft/onnxjs@6ab9849:test/data/teams_model/msra_190729.onnx", [], [
        {"bgrm": [1, 4, 160, 256]}, {"bgrm": [2, 4, 96, 128]}]),
    # microsoft/onnxruntime-inference-examples@HEAD: torch 1.2 at opset 9,
    # and CNTK 2.5.1 at opset 8 (weights as graph inputs)
    "ultraface_rfb_320": ("microsoft/onnxruntime-inference-examples:mobile/examples/Xamarin/Models/Ultraface.version-RFB-320.onnx",
                          [], [{"input": [1, 3, 240, 320]}]),
    "mnist_ort": ("microsoft/onnxruntime-inference-examples:c_cxx/MNIST/mnist.onnx", [], [{"Input3": [1, 1, 28, 28]}]),
    # webonnx/wonnx@HEAD: CNTK's MNIST after an optimiser (Gemm)
    "opt_mnist": ("webonnx/wonnx:data/models/opt-mnist.onnx", [], [{"Input3": [1, 1, 28, 28]}]),
    # alrevuelta/cONNXr@HEAD: quantised by onnx.quantize 0.1.0 (opset 10,
    # ConvInteger, MatMulInteger)
    "quantized_model": ("alrevuelta/cONNXr:scripts/quantized_model.onnx", [], [{"Input3": [1, 1, 28, 28]}]),
}

NP_OF = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}
ORT_TYPE = {np.float32: "float32", np.uint8: "uint8", np.int8: "int8", np.int32: "int32", np.int64: "int64",
            np.bool_: "bool", np.float16: "float16", np.float64: "float64"}


def run(cmd, timeout=1200):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def graph_inputs(model):
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def make_inputs(model, spec, rng):
    out = {}
    for i in graph_inputs(model):
        dt = NP_OF[i.type.tensor_type.elem_type]
        s = spec.get(i.name)
        if isinstance(s, tuple) and s[0] == "value":
            out[i.name] = s[1].astype(dt)
            continue
        if isinstance(s, tuple) and s[0] == "ints":
            out[i.name] = rng.integers(0, s[2], s[1]).astype(dt)
            continue
        shape = s if s is not None else [d.dim_value for d in i.type.tensor_type.shape.dim]
        if np.issubdtype(dt, np.floating):
            out[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            out[i.name] = rng.integers(0, 2, shape).astype(dt)
        else:
            out[i.name] = rng.integers(0, 16, shape).astype(dt)
    return out


def ort_outputs(model_path, inputs, tmp):
    os.makedirs(tmp, exist_ok=True)
    desc = []
    for k, (name, a) in enumerate(inputs.items()):
        f = os.path.join(tmp, f"ort_in_{k}.bin")
        np.ascontiguousarray(a).tofile(f)
        desc.append({"name": name, "dtype": ORT_TYPE[a.dtype.type], "shape": list(a.shape), "file": f})
    with open(os.path.join(tmp, "ort_inputs.json"), "w") as f:
        json.dump(desc, f)
    out_dir = os.path.join(tmp, "ort_out")
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, NODE_PATH=os.environ.get("ORT_NODE_PATH", "/tmp/ort/node_modules"))
    p = subprocess.run(["node", os.path.join(HERE, "ort_reference.js"), model_path, os.path.join(tmp, "ort_inputs.json"),
                        out_dir], capture_output=True, text=True, env=env, timeout=1200)
    if p.returncode != 0:
        raise RuntimeError("onnxruntime: " + p.stderr.strip()[-300:])
    outs = []
    for k, d in enumerate(json.load(open(os.path.join(out_dir, "outputs.json")))):
        dt = {v: k for k, v in ORT_TYPE.items()}[d["dtype"]]
        outs.append((d["name"], np.fromfile(os.path.join(out_dir, f"output_{k}.bin"), dt).reshape(d["shape"])))
    return outs


def write_case(case_dir, inputs, outputs):
    os.makedirs(case_dir, exist_ok=True)
    for k, (name, a) in enumerate(inputs.items()):
        with open(os.path.join(case_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())
    for k, (name, a) in enumerate(outputs):
        with open(os.path.join(case_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())


def errors(out_dir, outputs):
    """The largest |relax - ort|, and the largest over the reference's
    range (misleading for an output that is nearly constant: a detector's
    probability map of a noise image), across outputs."""
    worst, worst_abs = 0.0, 0.0
    for name, ref in outputs:
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy")
        if not os.path.exists(path):
            path = os.path.join(out_dir, name + ".npy")
        got = np.load(path)
        if got.shape != ref.shape:
            return float("inf"), float("inf")
        if ref.size == 0:
            continue
        r, g = ref.astype(np.float64), got.astype(np.float64)
        span = max(float(np.max(r) - np.min(r)), float(np.max(np.abs(r))), 1e-6)
        worst_abs = max(worst_abs, float(np.max(np.abs(r - g))))
        worst = max(worst, float(np.max(np.abs(r - g))) / span)
    return worst_abs, worst


def named_dims(sig):
    names = {d for i in sig["inputs"] for d in (i.get("shape") or []) if isinstance(d, str)}
    ok = True
    for o in sig["outputs"]:
        for d in o.get("shape") or [None]:
            if isinstance(d, int):
                continue
            if d is None or not set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d)) - {"min", "max"} <= names:
                ok = False
    return ok


def survey(args, name, tmp):
    source, build_opts, runs = MODELS[name]
    path = os.path.join(args.models, name + ".onnx")
    row = {"model": name, "source": source}
    if not os.path.exists(path):
        row["error"] = "absent"
        return row
    model = onnx.load(path)
    row["opset"] = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    row["producer"] = (model.producer_name + " " + model.producer_version).strip()
    ir = os.path.join(tmp, name + ".relax")
    t0 = time.monotonic()
    p = run([os.path.join(args.bin, "relax-import"), path, "-o", ir, "--json"] + build_opts)
    row["import_s"] = round(time.monotonic() - t0, 1)
    row["import"] = p.returncode == 0
    if not row["import"]:
        row["error"] = p.stderr.strip()[-600:]
        return row
    sig = json.loads(p.stdout)
    row["outputs"] = [o.get("shape") for o in sig["outputs"]]
    row["named"] = named_dims(sig)
    with open(ir) as f:
        row["match_casts"] = f.read().split("fn @main", 1)[-1].count("match_cast(")
    rng = np.random.default_rng(0)
    cases = []
    for k, spec in enumerate(runs):
        inputs = make_inputs(model, spec, rng)
        try:
            outputs = ort_outputs(path, inputs, os.path.join(tmp, f"{name}_ort{k}"))
        except (RuntimeError, OSError) as e:
            row.setdefault("ort_errors", []).append(str(e))
            continue
        case = os.path.join(tmp, f"{name}_case{k}")
        write_case(case, inputs, outputs)
        cases.append((spec, case, outputs))
    for target in args.targets:
        pkg = os.path.join(tmp, f"{name}.{target}.rpkg")
        t0 = time.monotonic()
        b = run([os.path.join(args.bin, "relax-build"), path, "--target", target, "-o", pkg] + build_opts)
        res = {"built": b.returncode == 0, "build_s": round(time.monotonic() - t0, 1), "runs": []}
        row[target] = res
        if not res["built"]:
            res["error"] = b.stderr.strip()[-600:]
            continue
        for spec, case, outputs in cases:
            out_dir = case + "_" + target
            r = run([os.path.join(args.bin, "relax-run"), pkg, "--output-dir", out_dir] +
                    [a for k, f in enumerate(sorted(os.listdir(case))) if f.startswith("input_")
                     for a in ("--input", f"{graph_inputs(model)[int(f[6:-3])].name}={os.path.join(case, f)}")])
            shape = {k: (v if not isinstance(v, tuple) else v[1] if v[0] == "ints" else "value") for k, v in spec.items()}
            if r.returncode != 0:
                res["runs"].append({"shape": shape, "error": (r.stderr.strip() or r.stdout.strip())[-400:]})
                continue
            abs_err, rel_err = errors(out_dir, outputs)
            res["runs"].append({"shape": shape, "abs_err": abs_err, "rel_err": rel_err})
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--targets", default="cpu")
    ap.add_argument("--only")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.targets = [t for t in args.targets.split(",") if t]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            if args.only and not re.search(args.only, name):
                continue
            row = survey(args, name, tmp)
            rows.append(row)
            head = f"{name:<30} opset {row.get('opset', '-'):<3} import {'yes' if row.get('import') else 'NO':<3}"
            if row.get("import"):
                head += f" named {'yes' if row['named'] else 'no':<3} match_casts {row['match_casts']:<3}"
            print(head, flush=True)
            if "error" in row:
                print("    " + row["error"].replace("\n", "\n    "))
            for e in row.get("ort_errors", []):
                print("    " + e)
            for t in args.targets:
                if t not in row:
                    continue
                res = row[t]
                if not res["built"]:
                    print(f"    {t}: build failed ({res['build_s']} s): " + res["error"].replace("\n", "\n      "))
                    continue
                for r in res["runs"]:
                    what = (f"max abs err {r['abs_err']:.2e} ({r['rel_err']:.2e} of the range)" if "rel_err" in r
                            else "run failed: " + r["error"])
                    print(f"    {t} (built in {res['build_s']} s) {r['shape']}: {what}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
