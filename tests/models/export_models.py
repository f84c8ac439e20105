#!/usr/bin/env python3
"""Exports the small models the import and end-to-end tests use.

Run with Debian's python3 and python3-torch (not installed by the set-up
script: the exported .onnx files are committed beside this script, so the
tests do not need torch):

    /usr/bin/python3 tests/models/export_models.py

Each model has dynamic axes with names, so that shape computations
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...) appear as PyTorch
exports them. Weights are random but seeded; sizes are tiny.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, hidden, heads, causal):
        super().__init__()
        self.heads, self.head_dim, self.causal = heads, hidden // heads, causal
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def split(self, t):
        b, s = t.size(0), t.size(1)
        return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, mask=None, past_k=None, past_v=None):
        b, s = x.size(0), x.size(1)
        q, k, v = self.qkv(x).split(x.size(-1), dim=-1)
        q, k, v = self.split(q), self.split(k), self.split(v)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        if self.causal:
            total = k.size(2)
            past = total - s
            i = torch.arange(s).unsqueeze(1) + past
            j = torch.arange(total).unsqueeze(0)
            scores = scores.masked_fill(j > i, -1e4)
        if mask is not None:
            scores = scores + (1.0 - mask[:, None, None, :].to(scores.dtype)) * -1e4
        y = F.softmax(scores, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, s, -1)
        return self.out(y), k, v


class Block(nn.Module):
    def __init__(self, hidden, heads, causal):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x, mask=None, past_k=None, past_v=None):
        a, k, v = self.attn(self.ln1(x), mask, past_k, past_v)
        x = x + a
        return x + self.mlp(self.ln2(x)), k, v


class GPT2(nn.Module):
    """A GPT-2 style decoder with a KV cache."""

    def __init__(self, vocab=100, hidden=64, heads=4, layers=2, max_pos=128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, True) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, *past):
        past_len = past[0].size(2)
        pos = torch.arange(input_ids.size(1)) + past_len
        x = self.wte(input_ids) + self.wpe(pos)[None]
        presents = []
        for i, blk in enumerate(self.blocks):
            x, k, v = blk(x, None, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.head(self.ln(x)), *presents)


class Bert(nn.Module):
    """A BERT style encoder with an attention mask."""

    def __init__(self, vocab=100, hidden=64, heads=4, layers=2, max_pos=128):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, False) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1))
        x = self.ln(self.wte(input_ids) + self.wpe(pos)[None])
        for blk in self.blocks:
            x, _, _ = blk(x, attention_mask)
        return x


class CNN(nn.Module):
    """A small CNN with batch norm, pooling and a classifier."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.b1(self.c1(x))), 2)
        x = F.relu(self.b2(self.c2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def export(model, args, names_in, names_out, axes, path):
    model.eval()
    torch.onnx.export(model, args, os.path.join(HERE, path), input_names=names_in, output_names=names_out,
                      dynamic_axes=axes, opset_version=17, do_constant_folding=True)
    print("wrote", path)


def write_case(model, args, names_in, name, case):
    """Runs the PyTorch module on `args` and writes input_K.pb / output_K.pb
    (ONNX TensorProto, as the backend test data) under data/<name>/<case>/."""
    import onnx.numpy_helper as nh
    with torch.no_grad():
        outs = model(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    d = os.path.join(HERE, "data", name, case)
    os.makedirs(d, exist_ok=True)
    for k, (a, n) in enumerate(zip(args, names_in)):
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(nh.from_array(a.numpy(), n).SerializeToString())
    for k, o in enumerate(outs):
        with open(os.path.join(d, f"output_{k}.pb"), "wb") as f:
            f.write(nh.from_array(o.numpy(), f"output_{k}").SerializeToString())


def write_reference_data(gpt, bert, cnn, layers):
    """Reference outputs from PyTorch at several shapes, for the end-to-end
    model tests (tests/models/test_run_models.py): one package must serve all."""
    torch.manual_seed(1)
    past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    for batch, seq, past in [(1, 1, 7), (1, 7, 0), (2, 64, 3)]:
        ids = torch.randint(0, 100, (batch, seq))
        pkv = [torch.randn(batch, 4, past, 16) for _ in range(2 * layers)]
        write_case(gpt, (ids, *pkv), ["input_ids", *past_names], "gpt2_tiny", f"b{batch}_s{seq}_p{past}")
    for batch, seq in [(1, 1), (2, 7), (1, 64)]:
        ids = torch.randint(0, 100, (batch, seq))
        mask = torch.ones(batch, seq, dtype=torch.int64)
        mask[:, seq // 2 + 1:] = 0
        write_case(bert, (ids, mask), ["input_ids", "attention_mask"], "bert_tiny", f"b{batch}_s{seq}")
    for batch, h, w in [(1, 32, 32), (3, 16, 24), (2, 8, 8)]:
        write_case(cnn, (torch.randn(batch, 3, h, w),), ["image"], "cnn_tiny", f"b{batch}_{h}x{w}")


def main():
    layers = 2
    gpt = GPT2(layers=layers)
    past = [torch.randn(1, 4, 3, 16) for _ in range(2 * layers)]
    past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    for n in past_names:
        axes[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in present_names:
        axes[n] = {0: "batch_size", 2: "past_sequence_length + sequence_length"}
    export(gpt, (torch.randint(0, 100, (1, 5)), *past), ["input_ids", *past_names], ["logits", *present_names],
           axes, "gpt2_tiny.onnx")

    bert = Bert()
    export(bert, (torch.randint(0, 100, (2, 7)), torch.ones(2, 7, dtype=torch.int64)),
           ["input_ids", "attention_mask"], ["last_hidden_state"],
           {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "sequence_length"},
            "last_hidden_state": {0: "batch_size", 1: "sequence_length"}}, "bert_tiny.onnx")

    cnn = CNN()
    export(cnn, (torch.randn(2, 3, 32, 32),), ["image"], ["logits"],
           {"image": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}, "cnn_tiny.onnx")

    write_reference_data(gpt, bert, cnn, layers)


if __name__ == "__main__":
    main()
