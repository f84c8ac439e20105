#!/usr/bin/env python3
"""Exports the bench corpus at deployed sizes (issue 44): the models people
run, at the sizes they run them, with random seeded weights (speed does not
depend on the values; the outputs are still checked against PyTorch's).
They are large (ResNet-50 100 MB, GPT-2-small 500 MB), so they are made at
bench time into a folder outside the repository, never committed:

    /usr/bin/python3 bench/export_deployed.py [--out DIR] [NAME...]
    /usr/bin/python3 bench/bench_corpus.py --bin build/bin --corpus DIR

DIR (default build/bench-deployed) gets NAME.onnx, data/NAME/CASE/
input_K.pb and output_K.pb (PyTorch's outputs, the reference), and
manifest.json: per model its cases and the tolerance its outputs are
checked to (float accumulation order over thousands of terms). Needs
Debian's python3-torch and python3-torchvision (installed by hand, as for
tests/corpus).

  resnet50            torchvision ResNet-50, 224x224, batch 1 and 2
  mobilenetv3_large   torchvision MobileNetV3-Large, 224x224
  efficientnet_b0     torchvision EfficientNet-B0, 224x224
  vit_b16             torchvision ViT-B/16, 224x224
  gpt2_small          GPT-2-small-sized decoder (12 layers, d 768, vocab 50257) with KV cache:
                      one token at past 127 and 1023, a 128-token prompt at past 0
  t5_small_decoder    T5-small-sized decoder (6 layers, d 512, d_ff 2048, vocab 32128) with past,
                      one token at past 63 over an encoder output of 128
  whisper_base_encoder Whisper-base-sized encoder (6 layers, d 512, 80 mels) on 30 s (3000 frames)
  bert_base           BERT-base (12 layers, d 768) at sequence 128
  yolov8n             a YOLOv8n-like detector (C2f, SPPF, decoupled DFL head) at 640x640
  crnn                a CRNN (7 convs, two bidirectional LSTMs of 256) on a 32x320 text line
  resnet50_fp16       resnet50 with fp16 weights and activations (inputs and outputs fp32); the
                      reference is ONNX Runtime's, graph optimisations off
  bert_base_fp16      bert_base likewise
  resnet50_qdq        resnet50 quantized static QDQ, as quantize_static(QuantFormat.QDQ) writes it:
                      u8 activations calibrated on the cases, int8 weights per output channel;
                      the reference is ONNX Runtime's, graph optimisations off (the spec's semantics)

The fp16 and QDQ twins need node and npm's onnxruntime-node (--ort-node, default bench/node_modules).
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "corpus"))
from export_corpus import BertModel, GPT2LMHead, GPT2WithPast, PreNormBlock  # noqa: E402
from export_vision import BidirectionalLSTM, T5DecoderWithPast, randomize_norms  # noqa: E402
from export_contrib import ort_outputs  # noqa: E402


# ---- A Whisper-base-sized encoder: conv stem, sinusoid positions, pre-norm blocks with a 4x MLP -----

class WideBlock(PreNormBlock):
    def __init__(self, d_model, heads):
        super().__init__(d_model, heads)
        self.fc1, self.fc2 = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)


class WhisperBaseEncoder(nn.Module):
    def __init__(self, mels=80, d_model=512, heads=8, layers=6, frames=3000):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.register_buffer("embed_positions", torch.randn(frames // 2, d_model) * 0.1)
        self.layers = nn.Sequential(*[WideBlock(d_model, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d_model)

    def forward(self, input_features):
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        return self.ln(self.layers(x + self.embed_positions[:x.shape[1]]))


# ---- A YOLOv8n-like detector, as ultralytics writes the blocks ------------------------------------

class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(c1, c2, k, s, k // 2, bias=False), nn.BatchNorm2d(c2)

    def forward(self, x):
        return F.silu(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c, shortcut):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 3), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=False):
        super().__init__()
        self.c = c2 // 2
        self.cv1, self.cv2 = Conv(c1, 2 * self.c, 1), Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        self.cv1, self.cv2 = Conv(c1, c1 // 2, 1), Conv(c1 // 2 * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Detect(nn.Module):
    """Decoupled head; boxes by distribution focal loss bins, decoded against the anchor grid."""

    def __init__(self, nc, ch, reg_max=16):
        super().__init__()
        self.nc, self.reg_max, self.strides = nc, reg_max, (8, 16, 32)
        c2, c3 = max(16, ch[0] // 4, reg_max * 4), max(ch[0], min(nc, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1))
                                 for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for x in ch)
        self.register_buffer("bins", torch.arange(reg_max, dtype=torch.float).view(1, reg_max, 1, 1))

    def forward(self, xs):
        b = xs[0].shape[0]
        outs, anchors, strides = [], [], []
        for i, x in enumerate(xs):
            h, w = x.shape[2:]
            outs.append(torch.cat((self.cv2[i](x), self.cv3[i](x)), 1).view(b, 4 * self.reg_max + self.nc, -1))
            sy, sx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
            anchors.append(torch.stack((sx, sy), -1).view(-1, 2))
            strides.append(torch.full((h * w, 1), float(self.strides[i])))
        y = torch.cat(outs, 2)
        box, cls = y.split((4 * self.reg_max, self.nc), 1)
        a = box.shape[2]
        dist = F.conv2d(box.view(b, 4, self.reg_max, a).transpose(2, 1).softmax(1), self.bins).view(b, 4, a)
        anchor, stride = torch.cat(anchors).transpose(0, 1).unsqueeze(0), torch.cat(strides).transpose(0, 1)
        lt, rb = dist.chunk(2, 1)
        x1y1, x2y2 = anchor - lt, anchor + rb
        dbox = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * stride
        return torch.cat((dbox, cls.sigmoid()), 1)


class YOLOv8n(nn.Module):
    def __init__(self, nc=80):
        super().__init__()
        self.b0 = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2), C2f(32, 32, 1, True), Conv(32, 64, 3, 2),
                                C2f(64, 64, 2, True))  # P3
        self.b1 = nn.Sequential(Conv(64, 128, 3, 2), C2f(128, 128, 2, True))  # P4
        self.b2 = nn.Sequential(Conv(128, 256, 3, 2), C2f(256, 256, 1, True), SPPF(256, 256))  # P5
        self.h1, self.h2 = C2f(384, 128), C2f(192, 64)
        self.d1, self.h3 = Conv(64, 64, 3, 2), C2f(192, 128)
        self.d2, self.h4 = Conv(128, 128, 3, 2), C2f(384, 256)
        self.detect = Detect(nc, (64, 128, 256))

    def forward(self, images):
        p3 = self.b0(images)
        p4 = self.b1(p3)
        p5 = self.b2(p4)
        up = lambda t: F.interpolate(t, scale_factor=2.0, mode="nearest")  # noqa: E731
        t4 = self.h1(torch.cat((up(p5), p4), 1))
        o3 = self.h2(torch.cat((up(t4), p3), 1))
        o4 = self.h3(torch.cat((self.d1(o3), t4), 1))
        o5 = self.h4(torch.cat((self.d2(o4), p5), 1))
        return self.detect([o3, o4, o5])


# ---- A CRNN at its published size: seven convs to height 1, two BiLSTMs of 256 ---------------------

class CRNNFull(nn.Module):
    def __init__(self, classes=37, hidden=256):
        super().__init__()
        nm = [64, 128, 256, 256, 512, 512, 512]
        layers, cin = [], 1
        for i, c in enumerate(nm):
            k, p = (2, 0) if i == 6 else (3, 1)
            layers += [nn.Conv2d(cin, c, k, 1, p)] + ([nn.BatchNorm2d(c)] if i in (4, 5) else []) + [nn.ReLU(True)]
            cin = c
            if i in (0, 1):
                layers.append(nn.MaxPool2d(2, 2))
            elif i in (3, 5):
                layers.append(nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        self.cnn = nn.Sequential(*layers)
        self.rnn = nn.Sequential(BidirectionalLSTM(512, hidden, hidden), BidirectionalLSTM(hidden, hidden, classes))

    def forward(self, x):
        conv = self.cnn(x).squeeze(2).permute(2, 0, 1)
        return F.log_softmax(self.rnn(conv), dim=2)


# ---- fp16 twins: the fp32 export's floats as fp16, casts at the inputs and outputs ----------------

def to_fp16(model):
    """Every float initializer, constant and cast as fp16, the graph's float
    inputs cast to fp16 on entry and its outputs back to fp32 on exit (as
    onnxconverter-common's keep_io_types does); constants past fp16's range
    (masks of finfo(float32).min) saturate to +-65504."""
    g = model.graph
    half = lambda a: np.clip(a, -65504, 65504).astype(np.float16)  # noqa: E731
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(half(numpy_helper.to_array(t)), t.name))
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(half(numpy_helper.to_array(a.t)), a.t.name))
    del g.value_info[:]
    nodes = []
    for i in g.input:
        if i.type.tensor_type.elem_type == TensorProto.FLOAT:
            nodes.append(onnx.helper.make_node("Cast", [i.name], [i.name + "_fp16"], to=TensorProto.FLOAT16))
            for n in g.node:
                n.input[:] = [i.name + "_fp16" if x == i.name else x for x in n.input]
    for o in g.output:
        if o.type.tensor_type.elem_type == TensorProto.FLOAT:
            for n in g.node:
                n.output[:] = [o.name + "_fp16" if x == o.name else x for x in n.output]
                n.input[:] = [o.name + "_fp16" if x == o.name else x for x in n.input]
            g.node.append(onnx.helper.make_node("Cast", [o.name + "_fp16"], [o.name], to=TensorProto.FLOAT))
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    return model


# ---- the int8 twin: static QDQ, calibrated on the model's own cases ------------------------------

def to_qdq(model, calibrate):
    """QuantizeLinear -> DequantizeLinear (u8, the calibrated range with 0
    in it) on the activation input of every Conv, Gemm and MatMul, and their
    constant weights as int8 symmetric per output channel through
    DequantizeLinear, biases left f32. calibrate(model, tensors) returns
    each tensor's (min, max) over the cases."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    targets = [n for n in g.node if n.op_type in ("Conv", "Gemm", "MatMul") and n.input[1] in inits]
    ranges = calibrate(model, sorted({n.input[0] for n in targets}))
    pre, done, out = [], {}, []

    def qdq(x):
        if x not in done:
            lo, hi = min(ranges[x][0], 0.0), max(ranges[x][1], 0.0)
            scale = np.float32(max(hi - lo, 1e-8) / 255.0)
            g.initializer.extend([numpy_helper.from_array(np.array(scale, np.float32), x + "_s"),
                                  numpy_helper.from_array(np.array(np.uint8(np.clip(np.round(-lo / scale), 0, 255)),
                                                                   np.uint8), x + "_z")])
            out.append(onnx.helper.make_node("QuantizeLinear", [x, x + "_s", x + "_z"], [x + "_q"]))
            out.append(onnx.helper.make_node("DequantizeLinear", [x + "_q", x + "_s", x + "_z"], [x + "_dq"]))
            done[x] = x + "_dq"
        return done[x]

    for n in g.node:
        if n in targets:
            w = numpy_helper.to_array(inits[n.input[1]])
            # the output channel's axis: Conv's 0, Gemm's 0 with transB else 1, MatMul's 1
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            axis = 0 if n.op_type == "Conv" or (n.op_type == "Gemm" and trans_b) else 1
            wt = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
            ws = np.maximum(np.abs(wt).max(axis=1), 1e-8).astype(np.float32) / 127.0
            shape = [1] * w.ndim
            shape[axis] = -1
            wq = np.clip(np.round(w / ws.reshape(shape)), -127, 127).astype(np.int8)
            base = n.input[1]
            g.initializer.extend([numpy_helper.from_array(wq, base + "_wq"), numpy_helper.from_array(ws, base + "_ws"),
                                  numpy_helper.from_array(np.zeros(ws.shape, np.int8), base + "_wz")])
            pre.append(onnx.helper.make_node("DequantizeLinear", [base + "_wq", base + "_ws", base + "_wz"],
                                             [base + "_wdq"], axis=axis))
            n.input[0] = qdq(n.input[0])
            n.input[1] = base + "_wdq"
        out.append(n)
    used = {i for n in out + pre for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)
    del g.node[:]
    g.node.extend(pre + out)
    return model


def ort_ranges(node_modules, case_dirs):
    """calibrate() for to_qdq: the tensors' ranges over the cases' inputs, by ONNX Runtime."""
    def calibrate(model, tensors):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        m.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in tensors)
        ranges = {}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "calibrate.onnx")
            onnx.save(m, path)
            names = [i.name for i in m.graph.input]
            for d in case_dirs:
                ins = [numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"input_{k}.pb")))
                       for k in range(len(names))]
                outs = ort_outputs(node_modules, path, ins, names)[len(model.graph.output):]
                for t, a in zip(tensors, outs):
                    lo, hi = ranges.get(t, (0.0, 0.0))
                    ranges[t] = (min(lo, float(a.min())), max(hi, float(a.max())))
        return ranges
    return calibrate


# ---- the list ------------------------------------------------------------------------------------

def images(b, h, w, c=3):
    return (torch.randn(b, c, h, w),)


def gpt2_case(model_layers, heads, b, s, p, vocab):
    ids = torch.randint(0, vocab, (b, s))
    return (f"b{b}_s{s}_p{p}", (ids, *[torch.randn(b, heads, p, 64) for _ in range(2 * model_layers)]))


def models():
    torch.manual_seed(0)
    vision = {"images": {0: "batch"}, "logits": {0: "batch"}}
    tv = torchvision.models
    for name, make, seed in (("resnet50", tv.resnet50, 0), ("mobilenetv3_large", tv.mobilenet_v3_large, 1),
                             ("efficientnet_b0", tv.efficientnet_b0, 2), ("vit_b16", tv.vit_b_16, 3)):
        torch.manual_seed(seed)
        m = randomize_norms(make(weights=None), seed).eval()
        cases = [("b1", images(1, 224, 224))] + ([("b2", images(2, 224, 224))] if name == "resnet50" else [])
        # ViT's nn.MultiheadAttention takes a fused fast path under no_grad
        # that does not export; traced with gradients on, it exports as ops.
        yield dict(name=name, model=m, cases=cases, opset=17, inputs=["images"], outputs=["logits"], axes=vision,
                   atol=5e-3, rtol=1e-3, trace_with_grad=name == "vit_b16")
    torch.manual_seed(10)
    layers, heads, vocab = 12, 12, 50257
    gpt2 = GPT2WithPast(GPT2LMHead(vocab=vocab, hidden=768, heads=heads, layers=layers, max_positions=1152)).eval()
    past_names = [f"past_{k}.{i}" for i in range(layers) for k in ("key", "value")]
    present_names = [f"present_{k}.{i}" for i in range(layers) for k in ("key", "value")]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"},
            **{n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names},
            **{n: {0: "batch_size", 2: "total_sequence_length"} for n in present_names}}
    yield dict(name="gpt2_small", model=gpt2, opset=17, inputs=["input_ids", *past_names],
               outputs=["logits", *present_names], axes=axes, atol=2e-3, rtol=1e-3,
               cases=[gpt2_case(layers, heads, 1, s, p, vocab) for s, p in ((1, 127), (1, 1023), (128, 0))])
    torch.manual_seed(11)
    t5 = T5DecoderWithPast(vocab=32128, d_model=512, heads=8, layers=6, d_ff=2048).eval()
    t5_past = [f"past_key_values.{i}.{w}.{k}" for i in range(6) for w in ("decoder", "encoder") for k in ("key", "value")]
    b, s, p, enc = 1, 1, 63, 128
    t5_args = (torch.randint(0, 32128, (b, s)), torch.ones(b, enc, dtype=torch.long),
               *[torch.randn(b, 8, p if w == "decoder" else enc, 64) * 0.5
                 for i in range(6) for w in ("decoder", "encoder") for k in ("key", "value")])
    yield dict(name="t5_small_decoder", model=t5, opset=17, inputs=["input_ids", "encoder_attention_mask", *t5_past],
               outputs=["logits", *[f"present.{i}.decoder.{k}" for i in range(6) for k in ("key", "value")]],
               axes={"input_ids": {0: "batch", 1: "seq"}, "encoder_attention_mask": {0: "batch", 1: "enc"},
                     **{n: {0: "batch", 2: "past" if ".decoder." in n else "enc"} for n in t5_past}},
               atol=2e-3, rtol=1e-3, cases=[(f"b{b}_s{s}_p{p}", t5_args)])
    torch.manual_seed(12)
    yield dict(name="whisper_base_encoder", model=WhisperBaseEncoder().eval(), opset=17, inputs=["input_features"],
               outputs=["last_hidden_state"], axes={"input_features": {0: "batch"}}, atol=2e-3, rtol=1e-3,
               cases=[("b1_30s", (torch.randn(1, 80, 3000),))])
    torch.manual_seed(13)
    bert = BertModel(vocab=30522, hidden=768, heads=12, layers=12, max_positions=512).eval()
    seq = {0: "batch_size", 1: "sequence_length"}
    mask = torch.ones(1, 128, dtype=torch.long)
    mask[0, 120:] = 0
    bert_case = ("b1_s128", (torch.randint(0, 30522, (1, 128)), mask, torch.zeros(1, 128, dtype=torch.long)))
    bert_spec = dict(model=bert, opset=17, inputs=["input_ids", "attention_mask", "token_type_ids"],
                     outputs=["last_hidden_state", "pooler_output"],
                     axes={"input_ids": seq, "attention_mask": seq, "token_type_ids": seq}, atol=2e-3, rtol=1e-3,
                     cases=[bert_case])
    yield dict(name="bert_base", **bert_spec)
    torch.manual_seed(14)
    yield dict(name="yolov8n", model=randomize_norms(YOLOv8n(), 14).eval(), opset=17, inputs=["images"],
               outputs=["output0"], axes={"images": {0: "batch"}}, atol=2e-2, rtol=1e-3,
               cases=[("b1_640", images(1, 640, 640))])
    torch.manual_seed(15)
    yield dict(name="crnn", model=randomize_norms(CRNNFull(), 15).eval(), opset=17, inputs=["image"],
               outputs=["log_probs"], axes={"image": {0: "batch", 3: "width"}}, atol=1e-3, rtol=1e-3,
               cases=[("b1_32x320", images(1, 32, 320, c=1))])
    # With these random weights ResNet-50's logits span +-800, where fp16's step is 0.5.
    yield dict(name="resnet50_fp16", twin="resnet50", atol=1.0, rtol=2e-2)
    yield dict(name="bert_base_fp16", twin="bert_base", atol=0.05, rtol=2e-2)
    # Logits of +-800: ONNX Runtime with its graph optimisations on is 5.6 from itself with them off.
    yield dict(name="resnet50_qdq", twin="resnet50", quantize=True, atol=8.0, rtol=1e-2)


def save_pb(a, path):
    onnx.save_tensor(numpy_helper.from_array(a), path)


def export(m, out, manifest, node_modules):
    path = os.path.join(out, m["name"] + ".onnx")
    if "twin" in m:  # the fp32 model's file and cases, converted
        src = os.path.join(out, "data", m["twin"])
        cases = manifest[m["twin"]]["cases"]
        fp32 = onnx.load(os.path.join(out, m["twin"] + ".onnx"))
        if m.get("quantize"):
            onnx.save(to_qdq(fp32, ort_ranges(node_modules, [os.path.join(src, c) for c in cases])), path)
        else:
            onnx.save(to_fp16(fp32), path)
        for case in cases:
            d = os.path.join(out, "data", m["name"], case)
            os.makedirs(d, exist_ok=True)
            names = [i.name for i in fp32.graph.input if i.name not in {t.name for t in fp32.graph.initializer}]
            ins = []
            for k in range(len(names)):
                with open(os.path.join(src, case, f"input_{k}.pb"), "rb") as a, \
                        open(os.path.join(d, f"input_{k}.pb"), "wb") as b:
                    b.write(a.read())
                ins.append(numpy_helper.to_array(onnx.load_tensor(os.path.join(d, f"input_{k}.pb"))))
            # The reference: ONNX Runtime on the converted model as written
            # (graph optimisations off), each op in its own precision.
            for k, a in enumerate(ort_outputs(node_modules, path, ins, names)):
                save_pb(a, os.path.join(d, f"output_{k}.pb"))
    else:
        first = m["cases"][0][1]
        with torch.set_grad_enabled(m.get("trace_with_grad", False)):
            torch.onnx.export(m["model"], first, path, opset_version=m["opset"], input_names=m["inputs"],
                              output_names=m["outputs"], dynamic_axes=m["axes"])
        cases = []
        for case, args in m["cases"]:
            d = os.path.join(out, "data", m["name"], case)
            os.makedirs(d, exist_ok=True)
            with torch.no_grad():
                outs = m["model"](*args)
            for k, t in enumerate(args):
                save_pb(t.numpy(), os.path.join(d, f"input_{k}.pb"))
            for k, t in enumerate(outs if isinstance(outs, tuple) else (outs,)):
                save_pb(t.numpy(), os.path.join(d, f"output_{k}.pb"))
            cases.append(case)
    manifest[m["name"]] = {"cases": cases, "atol": m["atol"], "rtol": m["rtol"]}
    print(f"{m['name']}: {os.path.getsize(path) / 2**20:.0f} MiB, cases {', '.join(cases)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "build", "bench-deployed"))
    ap.add_argument("--ort-node", default=os.path.join(HERE, "node_modules"),
                    help="a node_modules folder holding onnxruntime-node (for the QDQ twin)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mpath = os.path.join(args.out, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else {}
    for m in models():
        if not args.names or m["name"] in args.names:
            export(m, args.out, manifest, os.path.abspath(args.ort_node))
            with open(mpath, "w") as f:
                json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
