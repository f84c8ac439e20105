#!/usr/bin/env python3
"""Exports the real-model corpus: models written the way real code writes
them (Hugging Face's GPT-2 and BERT, ...), exported by torch.onnx as users
export them, with named dynamic axes. Each model lands in this folder as
NAME.onnx with reference outputs under data/NAME/CASE/ (input_K.pb,
output_K.pb, computed by PyTorch), so that the tests need no torch.

Run with Debian's python3-torch (installed by hand; never by the set-up
script):

    /usr/bin/python3 tests/corpus/export_corpus.py [NAME...]

Weights are random but seeded; sizes are small (each file < 2 MB).
"""
import math
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- Hugging Face GPT-2, as modeling_gpt2.py writes it -------------------------------------

class Conv1D(nn.Module):
    """GPT-2's transposed linear layer: y = x @ W + b with W (in, out)."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.weight.size(-1),)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
            1, 1, max_positions, max_positions), persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.heads, self.head_dim = heads, hidden // heads
        self.c_attn, self.c_proj = Conv1D(3 * hidden, hidden), Conv1D(hidden, hidden)

    def split_heads(self, t):
        new_shape = t.size()[:-1] + (self.heads, self.head_dim)
        return t.view(new_shape).permute(0, 2, 1, 3)

    def merge_heads(self, t):
        t = t.permute(0, 2, 1, 3).contiguous()
        return t.view(t.size()[:-2] + (self.heads * self.head_dim,))

    def forward(self, x, layer_past=None):
        q, k, v = self.c_attn(x).split(x.size(-1), dim=2)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        present = (k, v)
        w = torch.matmul(q, k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        query_length, key_length = q.size(-2), k.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length:key_length, :key_length]
        mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
        w = torch.where(causal_mask, w, mask_value)
        w = F.softmax(w, dim=-1)
        y = self.merge_heads(torch.matmul(w, v))
        return self.c_proj(y), present


class GPT2MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc, self.c_proj = Conv1D(4 * hidden, hidden), Conv1D(hidden, 4 * hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, max_positions):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.attn, self.mlp = GPT2Attention(hidden, heads, max_positions), GPT2MLP(hidden)

    def forward(self, x, layer_past=None):
        a, present = self.attn(self.ln_1(x), layer_past)
        x = x + a
        return x + self.mlp(self.ln_2(x)), present


class GPT2LMHead(nn.Module):
    def __init__(self, vocab=96, hidden=32, heads=4, layers=2, max_positions=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, hidden), nn.Embedding(max_positions, hidden)
        self.h = nn.ModuleList([GPT2Block(hidden, heads, max_positions) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, input_ids, attention_mask=None, past=None):
        input_shape = input_ids.size()
        past_length = 0 if past is None else past[0][0].size(-2)
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        x = self.wte(input_ids) + self.wpe(position_ids)
        presents = []
        for i, block in enumerate(self.h):
            x, present = block(x, None if past is None else past[i])
            presents.append(present)
        return (self.lm_head(self.ln_f(x)), *[t for p in presents for t in p])


class GPT2WithPast(nn.Module):
    """input_ids and a flat list of past keys and values, as ORT's GPT-2
    export lays them out."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, *flat_past):
        past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(len(flat_past) // 2)]
        return self.inner(input_ids, past=past)


# ---- Hugging Face BERT, as modeling_bert.py writes it --------------------------------------

class BertEmbeddings(nn.Module):
    def __init__(self, vocab, hidden, max_positions, type_vocab=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(max_positions, hidden)
        self.token_type_embeddings = nn.Embedding(type_vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(max_positions).expand((1, -1)), persistent=False)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, 0:seq_length]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(position_ids)
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def transpose_for_scores(self, x):
        new_shape = x.size()[:-1] + (self.heads, self.head_dim)
        return x.view(new_shape).permute(0, 2, 1, 3)

    def forward(self, x, extended_mask):
        q = self.transpose_for_scores(self.query(x))
        k = self.transpose_for_scores(self.key(x))
        v = self.transpose_for_scores(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + extended_mask
        ctx = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (self.heads * self.head_dim,))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.attn_out, self.ln1 = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate, self.output = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, extended_mask):
        x = self.ln1(x + self.attn_out(self.attention(x, extended_mask)))
        return self.ln2(x + self.output(F.gelu(self.intermediate(x))))


class BertModel(nn.Module):
    def __init__(self, vocab=100, hidden=32, heads=4, layers=2, max_positions=64):
        super().__init__()
        self.embeddings = BertEmbeddings(vocab, hidden, max_positions)
        self.layers = nn.ModuleList([BertLayer(hidden, heads) for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        extended = attention_mask[:, None, None, :].to(torch.float32)
        extended = (1.0 - extended) * torch.finfo(torch.float32).min
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, extended)
        return x, torch.tanh(self.pooler(x[:, 0]))


# ---- T5's encoder, with relative position buckets (modeling_t5.py) ------------------------

class T5Attention(nn.Module):
    def __init__(self, d_model, heads, has_bias, buckets=32, max_distance=128):
        super().__init__()
        self.heads, self.d_kv, self.buckets, self.max_distance = heads, d_model // heads, buckets, max_distance
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))
        self.relative_attention_bias = nn.Embedding(buckets, heads) if has_bias else None

    def bucket(self, relative_position):
        num_buckets = self.buckets // 2  # bidirectional
        ret = (relative_position > 0).to(torch.long) * num_buckets
        n = torch.abs(relative_position)
        max_exact = num_buckets // 2
        is_small = n < max_exact
        large = max_exact + (torch.log(n.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return ret + torch.where(is_small, n, large)

    def compute_bias(self, q_len, k_len):
        context = torch.arange(q_len, dtype=torch.long)[:, None]
        memory = torch.arange(k_len, dtype=torch.long)[None, :]
        values = self.relative_attention_bias(self.bucket(memory - context))
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, x, mask, position_bias=None):
        b, s = x.shape[:2]
        shape = lambda t: t.view(b, -1, self.heads, self.d_kv).transpose(1, 2)  # noqa: E731
        q, k, v = shape(self.q(x)), shape(self.k(x)), shape(self.v(x))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            position_bias = self.compute_bias(s, s) + mask
        w = F.softmax(scores + position_bias, dim=-1)
        y = torch.matmul(w, v).transpose(1, 2).contiguous().view(b, -1, self.heads * self.d_kv)
        return self.o(y), position_bias


class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d)), eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class T5Encoder(nn.Module):
    def __init__(self, vocab=120, d_model=32, heads=4, layers=2, d_ff=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.attn = nn.ModuleList([T5Attention(d_model, heads, i == 0) for i in range(layers)])
        self.ln_attn = nn.ModuleList([T5LayerNorm(d_model) for _ in range(layers)])
        self.ff = nn.ModuleList([nn.Sequential(nn.Linear(d_model, d_ff, bias=False), nn.ReLU(),
                                               nn.Linear(d_ff, d_model, bias=False)) for _ in range(layers)])
        self.ln_ff = nn.ModuleList([T5LayerNorm(d_model) for _ in range(layers)])
        self.final = T5LayerNorm(d_model)

    def forward(self, input_ids, attention_mask):
        x = self.embed(input_ids)
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        bias = None
        for attn, ln_a, ff, ln_f in zip(self.attn, self.ln_attn, self.ff, self.ln_ff):
            y, bias = attn(ln_a(x), mask, bias)
            x = x + y
            x = x + ff(ln_f(x))
        return self.final(x)


# ---- A pre-norm encoder block, as Whisper's and ViT's modeling code write it --------------

class PreNormBlock(nn.Module):
    def __init__(self, d_model, heads):
        super().__init__()
        self.heads, self.d = heads, d_model // heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.fc1, self.fc2 = nn.Linear(d_model, 2 * d_model), nn.Linear(2 * d_model, d_model)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, self.d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        w = (q @ k.transpose(-2, -1)) * self.d ** -0.5
        y = (w.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


# ---- A Whisper-like encoder: conv stem, sliced sinusoidal positions ----------------------

class WhisperEncoder(nn.Module):
    def __init__(self, mels=16, d_model=32, heads=4, layers=2, max_frames=64):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d_model, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)
        self.register_buffer("embed_positions", torch.randn(max_frames, d_model) * 0.1)
        self.layers = nn.Sequential(*[PreNormBlock(d_model, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d_model)

    def forward(self, input_features):
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        x = x + self.embed_positions[:x.shape[1]]
        return self.ln(self.layers(x))


# ---- ViT: patches by a strided conv, a class token, learned positions ---------------------

class ViT(nn.Module):
    def __init__(self, image=32, patch=8, d_model=32, heads=4, layers=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, d_model, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d_model) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d_model) * 0.1)
        self.encoder = nn.Sequential(*[PreNormBlock(d_model, heads) for _ in range(layers)])
        self.head = nn.Linear(d_model, classes)

    def forward(self, pixel_values):
        x = self.patch(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.encoder(x)[:, 0])


# ---- Recurrent models ----------------------------------------------------------------------

class GRUTagger(nn.Module):
    def __init__(self, vocab=50, d=16, hidden=24, tags=7):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        y, h = self.gru(self.embed(tokens))
        return self.out(y).log_softmax(-1), h


class LSTMForecaster(nn.Module):
    def __init__(self, features=6, hidden=20):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=1, batch_first=False)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, h0, c0):
        y, (h, c) = self.lstm(x, (h0, c0))
        return self.head(y[-1]), h, c


# ---- A detection head: scores, TopK, boxes gathered, NMS -------------------------------------

class DetectHead(nn.Module):
    def __init__(self, channels=8, anchors=3, classes=4):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.ReLU())
        self.cls = nn.Conv2d(channels, anchors * classes, 1)
        self.box = nn.Conv2d(channels, anchors * 4, 1)
        self.classes = classes

    def forward(self, images):
        f = self.body(images)
        b = images.shape[0]
        scores = self.cls(f).permute(0, 2, 3, 1).reshape(b, -1, self.classes).sigmoid()
        boxes = self.box(f).permute(0, 2, 3, 1).reshape(b, -1, 4)
        # boxes as (y1, x1, y2, x2) with y2 > y1, x2 > x1
        boxes = torch.cat([boxes[..., :2], boxes[..., :2] + boxes[..., 2:].abs() + 0.1], dim=-1)
        best, _ = scores.max(-1)
        k = min(16, best.shape[1])
        top, idx = best.topk(k, dim=1)
        return top, torch.gather(boxes, 1, idx.unsqueeze(-1).expand(-1, -1, 4))


# ---- the corpus ----------------------------------------------------------------------------

def gpt2_cases(past_layers):
    """(name, inputs) per case: batch, sequence and past lengths vary."""
    out = []
    for b, s, p in ([1, 1, 5], [2, 7, 3], [1, 16, 0]) if past_layers else ([1, 1, 0], [2, 7, 0], [3, 20, 0]):
        ids = torch.randint(0, 96, (b, s))
        past = [torch.randn(b, 4, p, 8) for _ in range(2 * past_layers)]
        out.append((f"b{b}_s{s}_p{p}" if past_layers else f"b{b}_s{s}", (ids, *past)))
    return out


def bert_cases():
    out = []
    for b, s in ([1, 5], [2, 16], [3, 33]):
        mask = torch.ones(b, s, dtype=torch.long)
        mask[0, s - 1:] = 0
        out.append((f"b{b}_s{s}", (torch.randint(0, 100, (b, s)), mask, torch.randint(0, 2, (b, s)))))
    return out


def seq_cases(make, shapes):
    return [(f"b{b}_s{s}", make(b, s)) for b, s in shapes]


def models():
    torch.manual_seed(0)
    gpt2 = GPT2LMHead().eval()
    past_names = [f"past_{k}.{i}" for i in range(2) for k in ("key", "value")]
    present_names = [f"present_{k}.{i}" for i in range(2) for k in ("key", "value")]
    past_axes = {n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names}
    present_axes = {n: {0: "batch_size", 2: "total_sequence_length"} for n in present_names}
    ids_axes = {"input_ids": {0: "batch_size", 1: "sequence_length"}}
    logits_axes = {"logits": {0: "batch_size", 1: "sequence_length"}}
    yield dict(name="gpt2_hf", model=gpt2, cases=gpt2_cases(0), opset=17, inputs=["input_ids"],
               outputs=["logits", *present_names], axes={**ids_axes, **logits_axes, **present_axes})
    yield dict(name="gpt2_hf_past", model=GPT2WithPast(gpt2), cases=gpt2_cases(2), opset=17,
               inputs=["input_ids", *past_names], outputs=["logits", *present_names],
               axes={**ids_axes, **logits_axes, **past_axes, **present_axes})
    torch.manual_seed(1)
    bert = BertModel().eval()
    seq = {0: "batch_size", 1: "sequence_length"}
    for opset in (14, 17):
        yield dict(name=f"bert_hf_op{opset}", model=bert, cases=bert_cases(), opset=opset,
                   inputs=["input_ids", "attention_mask", "token_type_ids"],
                   outputs=["last_hidden_state", "pooler_output"],
                   axes={"input_ids": seq, "attention_mask": seq, "token_type_ids": seq,
                         "last_hidden_state": seq, "pooler_output": {0: "batch_size"}})
    torch.manual_seed(2)

    def t5_inputs(b, s):
        mask = torch.ones(b, s, dtype=torch.long)
        mask[-1, s // 2:] = 0
        return torch.randint(0, 120, (b, s)), mask
    yield dict(name="t5_encoder", model=T5Encoder().eval(), cases=seq_cases(t5_inputs, [(1, 4), (2, 13), (1, 40)]),
               opset=17, inputs=["input_ids", "attention_mask"], outputs=["last_hidden_state"],
               axes={"input_ids": seq, "attention_mask": seq, "last_hidden_state": seq})
    torch.manual_seed(3)
    yield dict(name="whisper_encoder", model=WhisperEncoder().eval(),
               cases=seq_cases(lambda b, s: (torch.randn(b, 16, s),), [(1, 8), (2, 30), (1, 100)]), opset=17,
               inputs=["input_features"], outputs=["last_hidden_state"],
               axes={"input_features": {0: "batch_size", 2: "frames"}, "last_hidden_state": {0: "batch_size"}})
    torch.manual_seed(4)
    yield dict(name="vit", model=ViT().eval(), cases=[(f"b{b}", (torch.randn(b, 3, 32, 32),)) for b in (1, 3)],
               opset=17, inputs=["pixel_values"], outputs=["logits"],
               axes={"pixel_values": {0: "batch_size"}, "logits": {0: "batch_size"}})
    torch.manual_seed(5)
    yield dict(name="gru_tagger", model=GRUTagger().eval(),
               cases=seq_cases(lambda b, s: (torch.randint(0, 50, (b, s)),), [(1, 1), (2, 9), (3, 25)]), opset=14,
               inputs=["tokens"], outputs=["tags", "h_n"],
               axes={"tokens": seq, "tags": seq, "h_n": {1: "batch_size"}})
    torch.manual_seed(6)
    yield dict(name="lstm_forecaster", model=LSTMForecaster().eval(),
               cases=[(f"t{t}_b{b}", (torch.randn(t, b, 6), torch.randn(1, b, 20), torch.randn(1, b, 20)))
                      for t, b in ((1, 1), (12, 2), (30, 4))], opset=14, inputs=["x", "h0", "c0"],
               outputs=["y", "h_n", "c_n"],
               axes={"x": {0: "time", 1: "batch"}, "h0": {1: "batch"}, "c0": {1: "batch"}, "y": {0: "batch"},
                     "h_n": {1: "batch"}, "c_n": {1: "batch"}})
    torch.manual_seed(7)
    yield dict(name="detect_head", model=DetectHead().eval(),
               cases=[(f"b{b}_{h}x{w}", (torch.randn(b, 3, h, w),)) for b, h, w in ((1, 16, 16), (2, 24, 40))],
               opset=17, inputs=["images"], outputs=["scores", "boxes"],
               axes={"images": {0: "batch", 2: "height", 3: "width"}, "scores": {0: "batch"},
                     "boxes": {0: "batch"}})


def save_pb(t, path):
    onnx.save_tensor(numpy_helper.from_array(t.detach().numpy()), path)


def export(m):
    path = os.path.join(HERE, m["name"] + ".onnx")
    first = m["cases"][0][1]
    with torch.no_grad():
        torch.onnx.export(m["model"], first, path, opset_version=m["opset"], input_names=m["inputs"],
                          output_names=m["outputs"], dynamic_axes=m["axes"])
    if m.get("fix"):  # what a user must mend in torch.onnx's file before any runtime takes it
        m["fix"](path)
    for case, args in m["cases"]:
        d = os.path.join(HERE, "data", m["name"], case)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            outs = m["model"](*args)
        for k, t in enumerate(args):
            save_pb(t, os.path.join(d, f"input_{k}.pb"))
        for k, t in enumerate(outs if isinstance(outs, tuple) else (outs,)):
            save_pb(t, os.path.join(d, f"output_{k}.pb"))
    print(f"{m['name']}: {os.path.getsize(path)} bytes, {len(m['cases'])} cases")


def export_named(models, names):
    """Exports the models named (all when `names` is empty)."""
    for m in models:
        if not names or m["name"] in names:
            export(m)


if __name__ == "__main__":
    export_named(models(), set(sys.argv[1:]))
