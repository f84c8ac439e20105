#!/usr/bin/env python3
"""Exports the second half of the real-model corpus: vision, detection,
segmentation, audio, OCR and seq2seq models written the way their real code
writes them (torchvision's own model classes where they exist, at small
widths), exported by torch.onnx as users export them, with named dynamic
axes. Same layout as export_corpus.py: NAME.onnx here and reference outputs
computed by PyTorch under data/NAME/CASE/.

    /usr/bin/python3 tests/corpus/export_vision.py [NAME...]

Weights are random but seeded; sizes are small (each file < 2 MB).

  resnet_small        torchvision BasicBlocks, BN, maxpool, adaptive avgpool; dynamic batch, H, W
  mobilenetv3_small   torchvision's builder at width 0.25: depthwise, hardswish, hardsigmoid SE
  efficientnet_small  torchvision's EfficientNet at width 0.25: MBConv, SiLU, SE
  swin_tiny           torchvision's SwinTransformer: window partition, roll, shift mask, patch merging
  unet_seg(_op11)     U-Net: ConvTranspose2d and bilinear upsampling, F.pad to the skip's size, concat
  yolo_nms            YOLOv5 grid decode, confidence filter, TopK, batched_nms (NonMaxSuppression in an If)
  retinaface          FPN (nearest to the lateral's size), SSH, heads, priors from traced sizes
  espcn               PixelShuffle (DepthToSpace); dynamic H, W
  t5_decoder          T5 decoder with past (Optimum's names): unidirectional buckets, causal, cross
  conformer_audio     wav2vec2 conv extractor (GroupNorm), weight-normed pos conv, Conformer layers
  crnn_ocr            CNN to height 1, two BiLSTMs, log_softmax; dynamic width
  text_classifier     nn.MultiheadAttention with key padding mask, masked mean pooling
  lenet_op9           opset 9: view-flatten, Gemm, softmax
  scripted_if         torch.jit.script: an If on the sequence length
  scripted_loop       torch.jit.script: a GRU cell in a for loop (Loop, sequence ops)
  ssdlite             torchvision's SSDlite (MobileNetV3 at width 0.25, six feature maps, SSDLiteHead,
                      default boxes, its own resize and postprocess: score filter, TopK, batched NMS)
  raft_flow           torchvision's RAFT (optical flow) at small widths: InstanceNorm, a correlation
                      volume by MatMul, its pyramid sampled by GridSample, 4 GRU refinements unrolled
"""
import functools
import math
import sys
from typing import List

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import efficientnet as tv_effnet
from torchvision.models import mobilenetv3 as tv_mbv3
from torchvision.models import resnet as tv_resnet
from torchvision.models import swin_transformer as tv_swin
from torchvision.models.detection import _utils as det_utils
from torchvision.models.detection import ssd as tv_ssd
from torchvision.models.detection import ssdlite as tv_ssdlite
from torchvision.models.optical_flow import raft as tv_raft

from export_corpus import export_named


def randomize_norms(model, seed):
    """BatchNorm with non-trivial running statistics and affine parameters,
    as a trained model has them (fresh ones are the identity in eval)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
            m.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            m.bias.data.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
    return model


def scale_last(linear, s):
    """Keeps the outputs O(1), so that atol 1e-5 measures the compiler, not
    float accumulation order."""
    with torch.no_grad():
        linear.weight.mul_(s)
        if linear.bias is not None:
            linear.bias.mul_(s)


# ---- ResNet: torchvision's BasicBlock at small widths ----------------------------------------

class ResNetSmall(nn.Module):
    """torchvision's ResNet layout (stem conv 7x7/2, maxpool, four stages of
    BasicBlocks with 1x1 downsample, adaptive avgpool, fc) at widths 16..64."""

    def __init__(self, widths=(16, 16, 32, 64), classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, widths[0], 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        layers, inplanes = [], widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            down = None
            if stride != 1 or inplanes != w:
                down = nn.Sequential(nn.Conv2d(inplanes, w, 1, stride=stride, bias=False), nn.BatchNorm2d(w))
            layers.append(nn.Sequential(tv_resnet.BasicBlock(inplanes, w, stride, down), tv_resnet.BasicBlock(w, w)))
            inplanes = w
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- U-Net (milesial/Pytorch-UNet's layout): pads the upsampled map to the skip's size -------

class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Up(nn.Module):
    def __init__(self, cin, cout, bilinear):
        super().__init__()
        self.bilinear = bilinear
        if bilinear:
            self.conv = DoubleConv(cin + cout, cout)
        else:
            self.up = nn.ConvTranspose2d(cin, cin // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(cin // 2 + cout, cout)

    def forward(self, x1, x2):
        if self.bilinear:
            x1 = F.interpolate(x1, scale_factor=2, mode="bilinear", align_corners=False)
        else:
            x1 = self.up(x1)
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        return self.conv(torch.cat([x2, x1], dim=1))


class UNet(nn.Module):
    def __init__(self, channels=3, classes=3, w=8):
        super().__init__()
        self.inc = DoubleConv(channels, w)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(w, 2 * w))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(2 * w, 4 * w))
        self.up1 = Up(4 * w, 2 * w, bilinear=False)
        self.up2 = Up(2 * w, w, bilinear=True)
        self.outc = nn.Conv2d(w, classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        return self.outc(self.up2(self.up1(x3, x2), x1))


# ---- YOLOv5-style detector: grid decode, confidence filter, TopK, batched NMS ----------------

class YoloNMS(nn.Module):
    """A YOLOv5 Detect layer over one feature map (stride 8), then the
    non_max_suppression of its utils/general.py for one image, with
    torchvision's batched_nms and a pre-NMS TopK (torchvision's _topk_min)."""

    def __init__(self, classes=3, w=16, conf_thres=0.3, iou_thres=0.45, topk=30, max_det=20):
        super().__init__()
        act = nn.SiLU()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, w, 3, 2, 1), nn.BatchNorm2d(w), act,
            nn.Conv2d(w, 2 * w, 3, 2, 1), nn.BatchNorm2d(2 * w), act,
            nn.Conv2d(2 * w, 2 * w, 3, 2, 1), nn.BatchNorm2d(2 * w), act)
        self.na, self.no, self.stride = 3, 5 + classes, 8.0
        self.m = nn.Conv2d(2 * w, self.na * self.no, 1)
        self.register_buffer("anchor_grid", torch.tensor([[10., 13.], [16., 30.], [33., 23.]]).view(1, 3, 1, 1, 2))
        self.conf_thres, self.iou_thres, self.topk, self.max_det = conf_thres, iou_thres, topk, max_det

    def forward(self, images):
        x = self.m(self.backbone(images))
        bs, _, ny, nx = x.shape
        x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
        y = x.sigmoid()
        xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.stride
        wh = (y[..., 2:4] * 2) ** 2 * self.anchor_grid
        pred = torch.cat((xy, wh, y[..., 4:]), -1).view(bs, -1, self.no)
        # non_max_suppression, image 0
        p = pred[0]
        p = p[p[:, 4] > self.conf_thres]
        cls_conf = p[:, 5:] * p[:, 4:5]
        box = torch.cat((p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2), 1)
        conf, j = cls_conf.max(1)
        keep = conf > self.conf_thres
        box, conf, j = box[keep], conf[keep], j[keep]
        k = det_utils._topk_min(conf, self.topk, 0)
        conf, idx = conf.topk(k)
        box, j = box[idx], j[idx]
        i = torchvision.ops.batched_nms(box, conf, j, self.iou_thres)[:self.max_det]
        return box[i], conf[i], j[i]


# ---- RetinaFace (biubug6/Pytorch_Retinaface's layout): FPN, SSH, heads, prior decode ---------

def conv_bn(cin, cout, stride=1, leaky=0.0, k=3):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.LeakyReLU(negative_slope=leaky, inplace=True))


def conv_bn_no_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))


def conv_dw(cin, cout, stride, leaky=0.1):
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
        nn.LeakyReLU(negative_slope=leaky, inplace=True),
        nn.Conv2d(cin, cout, 1, 1, 0, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(negative_slope=leaky, inplace=True))


class SSH(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        leaky = 0.1 if cout <= 64 else 0.0
        self.conv3X3 = conv_bn_no_relu(cin, cout // 2)
        self.conv5X5_1 = conv_bn(cin, cout // 4, leaky=leaky)
        self.conv5X5_2 = conv_bn_no_relu(cout // 4, cout // 4)
        self.conv7X7_2 = conv_bn(cout // 4, cout // 4, leaky=leaky)
        self.conv7x7_3 = conv_bn_no_relu(cout // 4, cout // 4)

    def forward(self, x):
        c3 = self.conv3X3(x)
        c5_1 = self.conv5X5_1(x)
        c5 = self.conv5X5_2(c5_1)
        c7 = self.conv7x7_3(self.conv7X7_2(c5_1))
        return F.relu(torch.cat([c3, c5, c7], dim=1))


class FPN(nn.Module):
    def __init__(self, in_list, cout):
        super().__init__()
        leaky = 0.1 if cout <= 64 else 0.0
        self.output1 = conv_bn(in_list[0], cout, leaky=leaky, k=1)
        self.output2 = conv_bn(in_list[1], cout, leaky=leaky, k=1)
        self.output3 = conv_bn(in_list[2], cout, leaky=leaky, k=1)
        self.merge1 = conv_bn(cout, cout, leaky=leaky)
        self.merge2 = conv_bn(cout, cout, leaky=leaky)

    def forward(self, inputs: List[torch.Tensor]):
        output1, output2, output3 = self.output1(inputs[0]), self.output2(inputs[1]), self.output3(inputs[2])
        up3 = F.interpolate(output3, size=[output2.size(2), output2.size(3)], mode="nearest")
        output2 = self.merge2(output2 + up3)
        up2 = F.interpolate(output2, size=[output1.size(2), output1.size(3)], mode="nearest")
        output1 = self.merge1(output1 + up2)
        return [output1, output2, output3]


class RetinaFace(nn.Module):
    def __init__(self, w=8, cout=16, anchors=2):
        super().__init__()
        self.stage1 = nn.Sequential(conv_bn(3, w, 2, leaky=0.1), conv_dw(w, 2 * w, 1), conv_dw(2 * w, 2 * w, 2))
        self.stage2 = nn.Sequential(conv_dw(2 * w, 4 * w, 2), conv_dw(4 * w, 4 * w, 1))
        self.stage3 = nn.Sequential(conv_dw(4 * w, 8 * w, 2), conv_dw(8 * w, 8 * w, 1))
        self.fpn = FPN([2 * w, 4 * w, 8 * w], cout)
        self.ssh = nn.ModuleList([SSH(cout, cout) for _ in range(3)])
        self.cls = nn.ModuleList([nn.Conv2d(cout, anchors * 2, 1) for _ in range(3)])
        self.bbox = nn.ModuleList([nn.Conv2d(cout, anchors * 4, 1) for _ in range(3)])
        self.ldm = nn.ModuleList([nn.Conv2d(cout, anchors * 10, 1) for _ in range(3)])
        self.steps, self.min_sizes = [4, 8, 16], [[8, 12], [24, 32], [48, 64]]
        self.variance = [0.1, 0.2]

    def priors(self, feats, img_h, img_w):
        """layers/functions/prior_box.py, on traced sizes: (cx, cy, s_kx, s_ky) per anchor."""
        out = []
        for f, step, sizes in zip(feats, self.steps, self.min_sizes):
            fh, fw = f.shape[2], f.shape[3]
            cy, cx = torch.meshgrid((torch.arange(fh).float() + 0.5) * step / img_h,
                                    (torch.arange(fw).float() + 0.5) * step / img_w, indexing="ij")
            per = [torch.stack([cx, cy, torch.full_like(cx, 1.0) * s / img_w, torch.full_like(cy, 1.0) * s / img_h], -1)
                   for s in sizes]
            out.append(torch.stack(per, 2).view(-1, 4))
        return torch.cat(out, 0)

    def forward(self, images):
        img_h, img_w = images.shape[2], images.shape[3]
        c1 = self.stage1(images)
        c2 = self.stage2(c1)
        c3 = self.stage3(c2)
        feats = [ssh(f) for ssh, f in zip(self.ssh, self.fpn([c1, c2, c3]))]
        b = images.shape[0]
        conf = torch.cat([h(f).permute(0, 2, 3, 1).contiguous().view(b, -1, 2) for h, f in zip(self.cls, feats)], 1)
        loc = torch.cat([h(f).permute(0, 2, 3, 1).contiguous().view(b, -1, 4) for h, f in zip(self.bbox, feats)], 1)
        ldm = torch.cat([h(f).permute(0, 2, 3, 1).contiguous().view(b, -1, 10) for h, f in zip(self.ldm, feats)], 1)
        pr = self.priors(feats, img_h, img_w).unsqueeze(0)
        v0, v1 = self.variance
        boxes = torch.cat((pr[..., :2] + loc[..., :2] * v0 * pr[..., 2:], pr[..., 2:] * torch.exp(loc[..., 2:] * v1)), -1)
        boxes = torch.cat((boxes[..., :2] - boxes[..., 2:] / 2, boxes[..., :2] + boxes[..., 2:] / 2), -1)
        landms = torch.cat([pr[..., :2] + ldm[..., 2 * i:2 * i + 2] * v0 * pr[..., 2:] for i in range(5)], -1)
        return boxes, F.softmax(conf, dim=-1), landms


# ---- ESPCN super-resolution: PixelShuffle ----------------------------------------------------

class ESPCN(nn.Module):
    def __init__(self, scale=3, channels=1):
        super().__init__()
        self.first_part = nn.Sequential(nn.Conv2d(channels, 32, 5, padding=2), nn.Tanh(),
                                        nn.Conv2d(32, 16, 3, padding=1), nn.Tanh())
        self.last_part = nn.Sequential(nn.Conv2d(16, channels * scale ** 2, 3, padding=1), nn.PixelShuffle(scale))

    def forward(self, x):
        return self.last_part(self.first_part(x))


# ---- T5 decoder with past (modeling_t5.py; Optimum's decoder_with_past_model.onnx) ------------

class T5LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d)), eps

    def forward(self, x):
        var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


class T5DecAttention(nn.Module):
    def __init__(self, d_model, heads, has_bias, buckets=32, max_distance=128):
        super().__init__()
        self.heads, self.d_kv, self.buckets, self.max_distance = heads, d_model // heads, buckets, max_distance
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))
        self.relative_attention_bias = nn.Embedding(buckets, heads) if has_bias else None

    @staticmethod
    def _relative_position_bucket(relative_position, num_buckets, max_distance):
        # bidirectional=False, as the decoder calls it
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return torch.where(is_small, relative_position, large)

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        buckets = self._relative_position_bucket(memory_position - context_position, self.buckets, self.max_distance)
        return self.relative_attention_bias(buckets).permute([2, 0, 1]).unsqueeze(0)

    def shape(self, t, b):
        return t.view(b, -1, self.heads, self.d_kv).transpose(1, 2)

    def forward(self, hidden, mask, is_cross, past_key_value=None, position_bias=None):
        b, seq_length = hidden.shape[:2]
        real_seq_length = seq_length
        if past_key_value is not None and not is_cross:
            real_seq_length = real_seq_length + past_key_value[0].shape[2]
        key_length = past_key_value[0].shape[2] if is_cross else real_seq_length
        q = self.shape(self.q(hidden), b)
        if not is_cross:  # self-attention: append to the past
            k, v = self.shape(self.k(hidden), b), self.shape(self.v(hidden), b)
            if past_key_value is not None:
                k = torch.cat([past_key_value[0], k], dim=2)
                v = torch.cat([past_key_value[1], v], dim=2)
        else:  # cross-attention: the past holds the encoder's keys and values
            k, v = past_key_value
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            if self.relative_attention_bias is None:
                position_bias = torch.zeros((1, self.heads, real_seq_length, key_length), dtype=scores.dtype)
            else:
                position_bias = self.compute_bias(real_seq_length, key_length)
            if past_key_value is not None:
                position_bias = position_bias[:, :, -hidden.size(1):, :]
            position_bias = position_bias + mask
        w = F.softmax(scores.float() + position_bias, dim=-1).type_as(scores)
        y = torch.matmul(w, v).transpose(1, 2).contiguous().view(b, -1, self.heads * self.d_kv)
        return self.o(y), (k, v), position_bias


class T5DecoderWithPast(nn.Module):
    def __init__(self, vocab=120, d_model=32, heads=4, layers=2, d_ff=64):
        super().__init__()
        self.d_model, self.layers = d_model, layers
        self.shared = nn.Embedding(vocab, d_model)
        self.self_attn = nn.ModuleList([T5DecAttention(d_model, heads, i == 0) for i in range(layers)])
        self.cross_attn = nn.ModuleList([T5DecAttention(d_model, heads, False) for _ in range(layers)])
        self.ln = nn.ModuleList([T5LayerNorm(d_model) for _ in range(3 * layers)])
        self.ff = nn.ModuleList([nn.Sequential(nn.Linear(d_model, d_ff, bias=False), nn.ReLU(),
                                               nn.Linear(d_ff, d_model, bias=False)) for _ in range(layers)])
        self.final = T5LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.shared.weight

    def forward(self, input_ids, encoder_attention_mask, *flat_past):
        b, s = input_ids.shape
        past_len = flat_past[0].shape[2]
        x = self.shared(input_ids)
        # get_extended_attention_mask for a decoder: causal, with the past all visible
        seq_ids = torch.arange(past_len + s)
        causal = seq_ids[None, :] <= (seq_ids[past_len:, None])
        self_mask = (1.0 - causal[None, None].to(x.dtype)) * torch.finfo(x.dtype).min
        cross_mask = (1.0 - encoder_attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        presents = []
        self_bias, cross_bias = None, None
        for i in range(self.layers):
            past = flat_past[4 * i:4 * i + 4]
            y, kv, self_bias = self.self_attn[i](self.ln[3 * i](x), self_mask, False, (past[0], past[1]), self_bias)
            x = x + y
            y, _, cross_bias = self.cross_attn[i](self.ln[3 * i + 1](x), cross_mask, True, (past[2], past[3]), cross_bias)
            x = x + y
            x = x + self.ff[i](self.ln[3 * i + 2](x))
            presents += list(kv)
        x = self.final(x) * (self.d_model ** -0.5)
        return (self.lm_head(x), *presents)


# ---- wav2vec2 / Conformer audio encoder ------------------------------------------------------

class SamePad(nn.Module):
    def forward(self, x):
        return x[:, :, :-1]


class ConformerConvModule(nn.Module):
    def __init__(self, d, k=7):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d)
        self.pointwise_conv1 = nn.Conv1d(d, 2 * d, 1, bias=False)
        self.glu = nn.GLU(dim=1)
        self.depthwise_conv = nn.Conv1d(d, d, k, padding=(k - 1) // 2, groups=d, bias=False)
        self.batch_norm = nn.BatchNorm1d(d)
        self.activation = nn.SiLU()
        self.pointwise_conv2 = nn.Conv1d(d, d, 1, bias=False)

    def forward(self, x):
        h = self.glu(self.pointwise_conv1(self.layer_norm(x).transpose(1, 2)))
        h = self.pointwise_conv2(self.activation(self.batch_norm(self.depthwise_conv(h))))
        return h.transpose(1, 2)


class ConformerLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ffn1 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.heads, self.hd = heads, d // heads
        self.linear_q, self.linear_k, self.linear_v, self.linear_out = (nn.Linear(d, d) for _ in range(4))
        self.conv_module = ConformerConvModule(d)
        self.ffn2 = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x):
        x = x + 0.5 * self.ffn1(x)
        h = self.self_attn_layer_norm(x)
        b, t, _ = h.size()
        q = self.linear_q(h).view(b, -1, self.heads, self.hd).transpose(1, 2)
        k = self.linear_k(h).view(b, -1, self.heads, self.hd).transpose(1, 2)
        v = self.linear_v(h).view(b, -1, self.heads, self.hd).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)
        a = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, -1, self.heads * self.hd)
        x = x + self.linear_out(a)
        x = x + self.conv_module(x)
        x = x + 0.5 * self.ffn2(x)
        return self.final_layer_norm(x)


class Wav2Vec2Conformer(nn.Module):
    """wav2vec2's feature extractor (group-norm first layer), feature
    projection and weight-normed positional conv, then Conformer layers."""

    def __init__(self, c=32, d=32, heads=4, layers=2):
        super().__init__()
        self.conv_layers = nn.ModuleList([
            nn.Conv1d(1, c, 10, stride=5, bias=False), nn.Conv1d(c, c, 3, stride=2, bias=False),
            nn.Conv1d(c, c, 2, stride=2, bias=False)])
        self.group_norm = nn.GroupNorm(c, c, affine=True)
        self.fp_norm, self.fp = nn.LayerNorm(c), nn.Linear(c, d)
        conv = nn.Conv1d(d, d, kernel_size=16, padding=8, groups=4)
        self.pos_conv = nn.utils.weight_norm(conv, name="weight", dim=2)
        self.pad = SamePad()
        self.layers = nn.ModuleList([ConformerLayer(d, heads) for _ in range(layers)])

    def forward(self, input_values):
        h = input_values[:, None]
        for i, conv in enumerate(self.conv_layers):
            h = conv(h)
            if i == 0:
                h = self.group_norm(h)
            h = F.gelu(h)
        h = self.fp(self.fp_norm(h.transpose(1, 2)))
        pos = F.gelu(self.pad(self.pos_conv(h.transpose(1, 2))))
        h = h + pos.transpose(1, 2)
        for layer in self.layers:
            h = layer(h)
        return h


# ---- CRNN OCR: CNN to height 1, BiLSTM, log_softmax (time, batch, classes) --------------------

class BidirectionalLSTM(nn.Module):
    def __init__(self, nin, hidden, nout):
        super().__init__()
        self.rnn = nn.LSTM(nin, hidden, bidirectional=True)
        self.embedding = nn.Linear(hidden * 2, nout)

    def forward(self, x):
        recurrent, _ = self.rnn(x)
        t, b, h = recurrent.size()
        return self.embedding(recurrent.view(t * b, h)).view(t, b, -1)


class CRNN(nn.Module):
    def __init__(self, classes=12, hidden=16):
        super().__init__()
        cnn = nn.Sequential()
        ks, ps, ss, nm = [3, 3, 3, 3, 2], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [8, 16, 16, 32, 32]

        def conv_relu(i, bn=False):
            cin = 1 if i == 0 else nm[i - 1]
            cnn.add_module(f"conv{i}", nn.Conv2d(cin, nm[i], ks[i], ss[i], ps[i]))
            if bn:
                cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(nm[i]))
            cnn.add_module(f"relu{i}", nn.ReLU(True))
        conv_relu(0)
        cnn.add_module("pooling0", nn.MaxPool2d(2, 2))  # 16 x W/2
        conv_relu(1)
        cnn.add_module("pooling1", nn.MaxPool2d(2, 2))  # 8 x W/4
        conv_relu(2, True)
        cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 4 x W/4+1
        conv_relu(3, True)
        cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))  # 2 x W/4+2
        conv_relu(4, True)  # 1 x W/4+1
        self.cnn = cnn
        self.rnn = nn.Sequential(BidirectionalLSTM(32, hidden, hidden), BidirectionalLSTM(hidden, hidden, classes))

    def forward(self, x):
        conv = self.cnn(x)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
        return F.log_softmax(self.rnn(conv), dim=2)


# ---- A text classifier: nn.MultiheadAttention with key padding mask, masked mean pool ---------
# (sequence-first, nn.MultiheadAttention's default: with batch_first=True, torch 1.13 takes its
# fast path under no_grad, and aten::_native_multi_head_attention does not export)

class TextClassifier(nn.Module):
    def __init__(self, vocab=200, d=32, heads=4, layers=2, max_positions=64, labels=5):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_positions, d)
        self.emb_ln = nn.LayerNorm(d, eps=1e-12)
        self.attn = nn.ModuleList([nn.MultiheadAttention(d, heads) for _ in range(layers)])
        self.sa_ln = nn.ModuleList([nn.LayerNorm(d, eps=1e-12) for _ in range(layers)])
        self.ffn = nn.ModuleList([nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
                                  for _ in range(layers)])
        self.out_ln = nn.ModuleList([nn.LayerNorm(d, eps=1e-12) for _ in range(layers)])
        self.pre_classifier = nn.Linear(d, d)
        self.classifier = nn.Linear(d, labels)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1), dtype=torch.long).unsqueeze(0).expand_as(input_ids)
        x = self.emb_ln(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        pad = attention_mask == 0
        for attn, ln1, ffn, ln2 in zip(self.attn, self.sa_ln, self.ffn, self.out_ln):
            t = x.transpose(0, 1)  # (sequence, batch, d): the default layout
            a = attn(t, t, t, key_padding_mask=pad, need_weights=False)[0].transpose(0, 1)
            x = ln1(x + a)
            x = ln2(x + ffn(x))
        m = attention_mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return self.classifier(F.relu(self.pre_classifier(pooled)))


# ---- LeNet at opset 9: view-flatten, Gemm, softmax ---------------------------------------------

class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.bn = nn.BatchNorm2d(16)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 4 * 4, 48), nn.Linear(48, 32), nn.Linear(32, 10)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.bn(self.conv2(x))), 2)
        x = x.view(x.size(0), -1)
        x = self.dropout(F.relu(self.fc1(x)))
        return F.softmax(self.fc3(F.relu(self.fc2(x))), dim=1)


# ---- A scripted module with data-dependent control flow (exports If) ---------------------------

class AdaptivePoolEncoder(nn.Module):
    """Long sequences are downsampled by a strided conv and max-pooled; short
    ones are mean-pooled; torch.jit.script keeps the branch, so the export
    holds an If on the sequence length."""

    def __init__(self, d=16, out=8):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.down = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.head = nn.Linear(d, out)

    def forward(self, x):
        h = torch.tanh(self.proj(x))
        if h.shape[1] > 8:
            pooled = self.down(h.transpose(1, 2)).max(dim=2)[0]
        else:
            pooled = h.mean(dim=1)
        return self.head(pooled)


class ScriptedGRUDecoder(nn.Module):
    """A hand-written recurrent loop, as scripted RNN-T/CTC decoders write
    it: a GRU cell stepped over the frames with a Python for loop and the
    outputs collected in a list; torch.jit.script exports a Loop with a
    dynamic trip count and a sequence of outputs."""

    def __init__(self, d=12, hidden=16, out=6):
        super().__init__()
        self.ih, self.hh = nn.Linear(d, 3 * hidden), nn.Linear(hidden, 3 * hidden)  # aten::gru_cell does not export
        self.out = nn.Linear(hidden, out)
        self.hidden = hidden

    def cell(self, x, h):
        gi, gh = self.ih(x).chunk(3, 1), self.hh(h).chunk(3, 1)
        r = torch.sigmoid(gi[0] + gh[0])
        z = torch.sigmoid(gi[1] + gh[1])
        n = torch.tanh(gi[2] + r * gh[2])
        return (1 - z) * n + z * h

    def forward(self, x):
        h = torch.zeros(x.size(0), self.hidden, dtype=x.dtype)
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
            outs.append(self.out(h))
        return torch.stack(outs, dim=1), h


# ---- the corpus -------------------------------------------------------------------------------

# ---- SSDlite: torchvision's detector at a quarter of its widths -----------------------------

class SSDLite(nn.Module):
    """ssdlite320_mobilenet_v3_large as torchvision assembles it (MobileNetV3-Large
    with the reduced tail, the extractor's C4 split and four extra blocks: six
    feature maps; DefaultBoxGenerator; SSDLiteHead) at width 0.25, 5 classes and
    a 160x160 input, the image given as one (3, H, W) tensor. Its transform
    resizes any image to 160x160, and its postprocess scales the boxes back."""

    def __init__(self, classes=5, size=160):
        super().__init__()
        norm = functools.partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
        trunk = torchvision.models.mobilenet_v3_large(width_mult=0.25, reduced_tail=True, norm_layer=norm).features
        c4 = [i for i, b in enumerate(trunk) if getattr(b, "_is_cn", False)][-1]
        extractor = tv_ssdlite.SSDLiteFeatureExtractorMobileNet(trunk, c4, norm, width_mult=0.25)
        boxes = tv_ssd.DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
        channels = det_utils.retrieve_out_channels(extractor, (size, size))
        head = tv_ssdlite.SSDLiteHead(channels, boxes.num_anchors_per_location(), classes, norm)
        self.ssd = tv_ssd.SSD(extractor, boxes, (size, size), classes, head=head, score_thresh=0.05,
                              nms_thresh=0.55, detections_per_img=40, topk_candidates=40,
                              image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])

    def forward(self, image):
        out = self.ssd([image])[0]
        return out["boxes"], out["scores"], out["labels"]


def calibrate_norms(ssd, batches):
    """BatchNorm statistics measured on `batches` (normalised images), as
    training leaves them: with random ones a deep MobileNet's features no
    longer depend on its input, and every image gets the same detections."""
    norms = [m for m in ssd.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a plain average over the batches
    ssd.train()
    with torch.no_grad():
        for x in batches:
            ssd.head(list(ssd.backbone(x).values()))
    ssd.eval()


# ---- RAFT: torchvision's optical-flow network at small widths --------------------------------

class RAFTFlow(nn.Module):
    """torchvision's RAFT-small layout (bottleneck feature encoder with
    InstanceNorm, context encoder, a 4-level correlation pyramid, ConvGRU
    update block, bilinear upsampling of the flow) at a quarter of its widths,
    returning the last of `updates` refinements."""

    def __init__(self, updates=4):
        super().__init__()
        self.updates = updates
        self.raft = tv_raft._raft(
            feature_encoder_layers=(8, 8, 16, 24, 32), feature_encoder_block=tv_raft.BottleneckBlock,
            feature_encoder_norm_layer=nn.InstanceNorm2d,
            context_encoder_layers=(8, 8, 16, 24, 40), context_encoder_block=tv_raft.BottleneckBlock,
            context_encoder_norm_layer=None, corr_block_num_levels=4, corr_block_radius=3,
            motion_encoder_corr_layers=(24,), motion_encoder_flow_layers=(16, 8), motion_encoder_out_channels=22,
            recurrent_block_hidden_state_size=24, recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,),
            flow_head_hidden_size=32, use_mask_predictor=False)

    def forward(self, image1, image2):
        return self.raft(image1, image2, num_flow_updates=self.updates)[-1]


def float_sqrt_of_count(path):
    """RAFT's CorrBlock divides by torch.sqrt(torch.tensor(channels)); torch
    1.13 exports that as Sqrt of an int64 Cast, which ONNX's type rules (and
    ONNX Runtime) refuse. The Cast is made a cast to float, as a user would
    mend it; the value is the same."""
    model = onnx.load(path)
    made = {o: n for n in model.graph.node for o in n.output}
    for n in model.graph.node:
        src = made.get(n.input[0]) if n.op_type == "Sqrt" else None
        if src is not None and src.op_type == "Cast" and src.attribute[0].i == onnx.TensorProto.INT64:
            src.attribute[0].i = onnx.TensorProto.FLOAT
    onnx.save(model, path)


def image_cases(shapes, channels=3):
    return [(f"b{b}_{h}x{w}", (torch.randn(b, channels, h, w),)) for b, h, w in shapes]


IMG = {0: "batch_size", 2: "height", 3: "width"}
BATCH = {0: "batch_size"}


def models():
    torch.manual_seed(100)
    resnet = randomize_norms(ResNetSmall(), 100).eval()
    scale_last(resnet.fc, 0.5)
    yield dict(name="resnet_small", model=resnet, cases=image_cases([(1, 32, 32), (2, 48, 40)]), opset=17,
               inputs=["pixel_values"], outputs=["logits"], axes={"pixel_values": IMG, "logits": BATCH})

    torch.manual_seed(101)
    mbv3 = randomize_norms(torchvision.models.mobilenet_v3_small(width_mult=0.25, num_classes=10), 101).eval()
    scale_last(mbv3.classifier[-1], 100.0)  # torchvision inits it N(0, 0.01): outputs would be ~1e-3
    # mobilenetv3 and efficientnet at a fixed image size, dynamic batch only, as torchvision's
    # classifiers are usually exported (a dynamic H/W build of either takes minutes on vulkan)
    yield dict(name="mobilenetv3_small", model=mbv3, cases=image_cases([(1, 32, 32), (3, 32, 32)]), opset=17,
               inputs=["pixel_values"], outputs=["logits"], axes={"pixel_values": BATCH, "logits": BATCH})

    torch.manual_seed(102)
    setting, last = tv_effnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    effnet = randomize_norms(tv_effnet.EfficientNet(setting, 0.2, num_classes=10, last_channel=last), 102).eval()
    yield dict(name="efficientnet_small", model=effnet, cases=image_cases([(1, 32, 32), (3, 32, 32)]), opset=17,
               inputs=["pixel_values"], outputs=["logits"], axes={"pixel_values": BATCH, "logits": BATCH})

    torch.manual_seed(103)
    swin = tv_swin.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                                   window_size=[4, 4], num_classes=10).eval()
    yield dict(name="swin_tiny", model=swin, cases=[(f"b{b}", (torch.randn(b, 3, 32, 32),)) for b in (1, 3)],
               opset=17, inputs=["pixel_values"], outputs=["logits"],
               axes={"pixel_values": BATCH, "logits": BATCH})

    torch.manual_seed(104)
    unet = randomize_norms(UNet(), 104).eval()
    unet_cases = image_cases([(1, 32, 32), (2, 30, 46)])
    yield dict(name="unet_seg", model=unet, cases=unet_cases, opset=17, inputs=["image"], outputs=["masks"],
               axes={"image": IMG, "masks": IMG})
    yield dict(name="unet_seg_op11", model=unet, cases=unet_cases, opset=11, inputs=["image"], outputs=["masks"],
               axes={"image": IMG, "masks": IMG})

    torch.manual_seed(105)
    yolo = randomize_norms(YoloNMS(), 105).eval()
    with torch.no_grad():  # confident, spread scores, as a trained head gives; boxes near the anchors
        conf_rows = torch.tensor([a * yolo.no + c for a in range(yolo.na) for c in range(4, yolo.no)])
        yolo.m.weight[conf_rows] *= 12.0
        yolo.m.bias[conf_rows] *= 12.0
        yolo.m.bias[torch.tensor([a * yolo.no + c for a in range(yolo.na) for c in (2, 3)])] += 1.0
    yield dict(name="yolo_nms", model=yolo, cases=image_cases([(1, 32, 32), (1, 48, 64)]), opset=17,
               inputs=["images"], outputs=["boxes", "scores", "labels"],
               axes={"images": {2: "height", 3: "width"}, "boxes": {0: "detections"},
                     "scores": {0: "detections"}, "labels": {0: "detections"}})

    torch.manual_seed(106)
    rf = randomize_norms(RetinaFace(), 106).eval()
    yield dict(name="retinaface", model=rf, cases=image_cases([(1, 32, 32), (2, 36, 52)]), opset=17,
               inputs=["images"], outputs=["boxes", "scores", "landmarks"],
               axes={"images": IMG, "boxes": {0: "batch_size", 1: "priors"}, "scores": {0: "batch_size", 1: "priors"},
                     "landmarks": {0: "batch_size", 1: "priors"}})

    torch.manual_seed(107)
    yield dict(name="espcn", model=ESPCN().eval(), cases=image_cases([(1, 8, 8), (2, 13, 17)], channels=1),
               opset=17, inputs=["lr"], outputs=["sr"], axes={"lr": IMG, "sr": IMG})

    torch.manual_seed(108)
    t5 = T5DecoderWithPast().eval()
    past_names, present_names, axes = [], [], {}
    for i in range(2):
        for kind in ("decoder", "encoder"):
            for kv in ("key", "value"):
                n = f"past_key_values.{i}.{kind}.{kv}"
                past_names.append(n)
                axes[n] = {0: "batch_size", 2: "past_decoder_sequence_length" if kind == "decoder"
                           else "encoder_sequence_length"}
        for kv in ("key", "value"):
            n = f"present.{i}.decoder.{kv}"
            present_names.append(n)
            axes[n] = {0: "batch_size", 2: "total_decoder_sequence_length"}

    def t5_case(b, s, p, e):
        mask = torch.ones(b, e, dtype=torch.long)
        mask[-1, e - 2:] = 0
        past = []
        for _ in range(2):
            past += [torch.randn(b, 4, p, 8), torch.randn(b, 4, p, 8), torch.randn(b, 4, e, 8), torch.randn(b, 4, e, 8)]
        return f"b{b}_s{s}_p{p}_e{e}", (torch.randint(0, 120, (b, s)), mask, *past)
    axes.update({"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
                 "encoder_attention_mask": {0: "batch_size", 1: "encoder_sequence_length"},
                 "logits": {0: "batch_size", 1: "decoder_sequence_length"}})
    yield dict(name="t5_decoder", model=t5, cases=[t5_case(1, 1, 5, 7), t5_case(2, 1, 3, 11), t5_case(2, 3, 4, 6)],
               opset=17, inputs=["input_ids", "encoder_attention_mask", *past_names],
               outputs=["logits", *present_names], axes=axes)

    torch.manual_seed(109)
    w2v = randomize_norms(Wav2Vec2Conformer(), 109).eval()
    yield dict(name="conformer_audio", model=w2v,
               cases=[(f"b{b}_n{n}", (torch.randn(b, n),)) for b, n in ((1, 400), (2, 1000))], opset=17,
               inputs=["input_values"], outputs=["last_hidden_state"],
               axes={"input_values": {0: "batch_size", 1: "samples"}, "last_hidden_state": {0: "batch_size"}})

    torch.manual_seed(110)
    crnn = randomize_norms(CRNN(), 110).eval()
    yield dict(name="crnn_ocr", model=crnn, cases=image_cases([(1, 32, 32), (2, 32, 100)], channels=1), opset=17,
               inputs=["image"], outputs=["log_probs"],
               axes={"image": {0: "batch_size", 3: "width"}, "log_probs": {1: "batch_size"}})

    torch.manual_seed(111)

    def text_case(b, s):
        ids = torch.randint(1, 200, (b, s))
        mask = torch.ones(b, s, dtype=torch.long)
        mask[-1, max(1, s // 2):] = 0
        ids[mask == 0] = 0
        return ids, mask
    seq = {0: "batch_size", 1: "sequence_length"}
    yield dict(name="text_classifier", model=TextClassifier().eval(),
               cases=[(f"b{b}_s{s}", text_case(b, s)) for b, s in ((1, 6), (3, 21))], opset=17,
               inputs=["input_ids", "attention_mask"], outputs=["logits"],
               axes={"input_ids": seq, "attention_mask": seq, "logits": BATCH})

    torch.manual_seed(112)
    yield dict(name="lenet_op9", model=randomize_norms(LeNet(), 112).eval(),
               cases=[(f"b{b}", (torch.randn(b, 1, 28, 28),)) for b in (1, 4)], opset=9,
               inputs=["image"], outputs=["probs"], axes={"image": BATCH, "probs": BATCH})

    torch.manual_seed(113)
    scripted = torch.jit.script(AdaptivePoolEncoder().eval())
    yield dict(name="scripted_if", model=scripted,
               cases=[(f"b{b}_s{s}", (torch.randn(b, s, 16),)) for b, s in ((1, 4), (2, 12), (1, 9))], opset=17,
               inputs=["x"], outputs=["y"], axes={"x": {0: "batch_size", 1: "sequence_length"}, "y": BATCH})

    torch.manual_seed(114)
    loop = torch.jit.script(ScriptedGRUDecoder().eval())
    yield dict(name="scripted_loop", model=loop,
               cases=[(f"b{b}_s{s}", (torch.randn(b, s, 12),)) for b, s in ((1, 1), (2, 7), (1, 20))], opset=17,
               inputs=["x"], outputs=["y", "h_n"],
               axes={"x": {0: "batch_size", 1: "sequence_length"}, "y": {0: "batch_size", 1: "sequence_length"},
                     "h_n": BATCH})

    torch.manual_seed(116)
    ssd = SSDLite()
    calibrate_norms(ssd.ssd, [torch.rand(8, 3, 160, 160) * 2 - 1 for _ in range(4)])
    with torch.no_grad():  # confident, spread scores, as a trained head gives
        for block in ssd.ssd.head.classification_head.module_list:
            block[-1].weight.mul_(4.0)
            block[-1].bias.mul_(4.0)
    ssd.eval()
    ssd_cases = [(f"{h}x{w}", (torch.rand(3, h, w),)) for h, w in ((160, 160), (96, 128), (176, 120))]
    yield dict(name="ssdlite", model=ssd, cases=ssd_cases, opset=11, inputs=["image"],
               outputs=["boxes", "scores", "labels"],
               axes={"image": {1: "height", 2: "width"}, "boxes": {0: "detections"},
                     "scores": {0: "detections"}, "labels": {0: "detections"}})

    torch.manual_seed(115)
    # Traced at 128x128, where the pyramid's coarsest level is 2x2; at 64x128 it is 1x2 and the
    # exported graph divides by (height - 1) = 0 there (torchvision's `if h > 1` was traced away)
    # and samples that level with infinite coordinates on an axis of one pixel.
    flow_cases = []
    for b, h, w in ((1, 128, 128), (2, 64, 128), (1, 96, 160)):
        img = torch.randn(b, 3, h, w)
        flow_cases.append((f"b{b}_{h}x{w}", (img, torch.roll(img, shifts=(2, 3), dims=(2, 3)) * 0.9)))
    yield dict(name="raft_flow", model=RAFTFlow().eval(), cases=flow_cases, opset=16,
               inputs=["image1", "image2"], outputs=["flow"],
               axes={"image1": IMG, "image2": IMG, "flow": IMG}, fix=float_sqrt_of_count)


if __name__ == "__main__":
    export_named(models(), set(sys.argv[1:]))
