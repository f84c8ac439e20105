// Legalisation of the nn, image, quantization, recurrent and index-extra
// ops (passes/legalize/{nn,image,quant,index}.cc): each op
// on a few shapes, symbolic batch included, becomes a call_tir (or the
// library call it is meant to become) whose module verifies.
#include <doctest/doctest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/legalize/legalize.h"
#include "passes/passes.h"

using namespace relax;

namespace {

// Legalises `fn @main(<params>) { %y = <call> }` and checks the result.
void check_legalized(const std::string& op, const std::string& params, const std::string& result,
                     const std::string& value, const std::string& callee = "") {
  std::string text = "fn @main(" + params + ") -> " + result + " {\n  dataflow {\n    y: " + result + " = " + value +
                     "\n  }\n  return y\n}\n";
  CAPTURE(text);
  IRModule mod = parse_module(text);
  IRModule out = legalize(mod);
  std::vector<std::string> problems = verify(out);
  std::string joined;
  for (const std::string& p : problems) joined += p + "\n";
  CHECK_MESSAGE(problems.empty(), joined);
  std::string printed = print_module(out);
  CAPTURE(printed);
  CHECK(printed.find("= " + op + "(") == std::string::npos);
  CHECK(printed.find(callee.empty() ? "call_tir(@" + op : callee) != std::string::npos);
}

const char* kGemmConv = "call_library(\"gemm.conv2d\"";

}  // namespace

TEST_CASE("conv: 1-D, 2-D, 3-D, groups, dilation, f16") {
  check_legalized("conv", "x: Tensor[(n, 4, 10), f32], w: Tensor[(6, 4, 3), f32]", "Tensor[(n, 6, 10), f32]",
                  "conv(x, w, padding=[1, 1])", kGemmConv);  // 1-D: the library's, as height 1
  check_legalized("conv", "x: Tensor[(n, 4, 10), f32], w: Tensor[(2, 4, 3), f32]", "Tensor[(n, 2, 10), f32]",
                  "conv(x, w, padding=[1, 1])");  // two outputs: a loop nest
  check_legalized("conv", "x: Tensor[(n, 4, 9, 9), f32], w: Tensor[(8, 2, 3, 3), f32]", "Tensor[(n, 8, 3, 3), f32]",
                  "conv(x, w, strides=[2, 2], dilation=[2, 2], groups=2)", kGemmConv);
  check_legalized("conv", "x: Tensor[(n, 4, 9, 9), f32], w: Tensor[(4, 1, 3, 3), f32]", "Tensor[(n, 4, 9, 9), f32]",
                  "conv(x, w, padding=[1, 1, 1, 1], groups=4)", kGemmConv);  // depthwise: the library's kernel
  check_legalized("conv", "x: Tensor[(2, 2, 4, 4, 4), f32], w: Tensor[(2, 2, 2, 2, 2), f32]",
                  "Tensor[(2, 2, 5, 5, 5), f32]", "conv(x, w, padding=[1, 1, 1, 1, 1, 1])");
  check_legalized("conv", "x: Tensor[(1, 4, 8, 8), f16], w: Tensor[(4, 4, 3, 3), f16]", "Tensor[(1, 4, 8, 8), f16]",
                  "conv(x, w, padding=[1, 1, 1, 1])");
  check_legalized("conv", "x: Tensor[(n, 3, h, w), f32], k: Tensor[(8, 3, 3, 3), f32]",
                  "Tensor[(n, 8, h - 2, w - 2), f32]", "conv(x, k)", kGemmConv);
}

TEST_CASE("conv_transpose and deform_conv") {
  check_legalized("conv_transpose", "x: Tensor[(n, 4, 5, 5), f32], w: Tensor[(4, 3, 3, 3), f32]",
                  "Tensor[(n, 6, 10, 10), f32]",
                  "conv_transpose(x, w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1], groups=2)",
                  "call_library(\"gemm.conv_transpose2d\"");  // 3 x 3 x 3 rows per group: the library's
  check_legalized("conv_transpose", "x: Tensor[(n, 4, 5, 5), f32], w: Tensor[(4, 1, 2, 2), f32]",
                  "Tensor[(n, 1, 10, 10), f32]", "conv_transpose(x, w, strides=[2, 2])");  // 4 rows: a loop nest
  check_legalized("conv_transpose", "x: Tensor[(1, 2, 5), f16], w: Tensor[(2, 2, 3), f16]", "Tensor[(1, 2, 7), f16]",
                  "conv_transpose(x, w)");
  check_legalized("deform_conv",
                  "x: Tensor[(n, 2, 5, 5), f32], w: Tensor[(2, 2, 3, 3), f32], o: Tensor[(n, 18, 3, 3), f32], "
                  "m: Tensor[(n, 9, 3, 3), f32]",
                  "Tensor[(n, 2, 3, 3), f32]", "deform_conv(x, w, o, m)");
}

TEST_CASE("pools, indices, unpool, lrn") {
  check_legalized("max_pool", "x: Tensor[(n, 3, 8, 8), f32]", "Tensor[(n, 3, 4, 4), f32]",
                  "max_pool(x, pool_size=[2, 2], strides=[2, 2])", "call_library(\"pool.max2d\"");  // f32 2-D
  check_legalized("max_pool", "x: Tensor[(n, 3, 8, 8), f16]", "Tensor[(n, 3, 4, 4), f16]",
                  "max_pool(x, pool_size=[2, 2], strides=[2, 2])");  // other dtypes: a loop nest
  check_legalized("max_pool", "x: Tensor[(n, 3, 7), u8]", "Tensor[(n, 3, 4), u8]",
                  "max_pool(x, pool_size=[3], strides=[2], padding=[1, 1])");
  check_legalized("avg_pool", "x: Tensor[(n, 3, 5, 5, 5), f32]", "Tensor[(n, 3, 3, 3, 3), f32]",
                  "avg_pool(x, pool_size=[3, 3, 3], strides=[2, 2, 2], padding=[1, 1, 1, 1, 1, 1], "
                  "count_include_pad=true)");
  check_legalized("avg_pool", "x: Tensor[(1, 3, 8, 8), f16]", "Tensor[(1, 3, 4, 4), f16]",
                  "avg_pool(x, pool_size=[2, 2], strides=[2, 2])");
  check_legalized("lp_pool", "x: Tensor[(n, 3, 8, 8), f32]", "Tensor[(n, 3, 7, 7), f32]",
                  "lp_pool(x, p=3.0, pool_size=[2, 2])");
  check_legalized("max_pool_indices", "x: Tensor[(n, 3, 8, 8), f32]", "Tensor[(n, 3, 4, 4), i64]",
                  "max_pool_indices(x, pool_size=[2, 2], strides=[2, 2], storage_order=1)");
  check_legalized("max_unpool", "x: Tensor[(n, 3, 4, 4), f32], i: Tensor[(n, 3, 4, 4), i64]",
                  "Tensor[(n, 3, 8, 8), f32]", "max_unpool(x, i, output_shape=[n, 3, 8, 8])");
  check_legalized("lrn", "x: Tensor[(n, 8, 4, 4), f32]", "Tensor[(n, 8, 4, 4), f32]", "lrn(x, size=3)");
}

TEST_CASE("nll_loss with each reduction") {
  for (const char* red : {"none", "sum", "mean"}) {
    bool none = std::string(red) == "none";
    check_legalized("nll_loss", "x: Tensor[(n, 5, 3), f32], t: Tensor[(n, 3), i64], w: Tensor[(5,), f32]",
                    none ? "Tensor[(n, 3), f32]" : "Tensor[(), f32]",
                    std::string("nll_loss(x, t, w, reduction=\"") + red + "\", ignore_index=1)");
  }
}

TEST_CASE("resize: modes and coordinate transformations") {
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "half_pixel_symmetric",
                              "tf_crop_and_resize"}) {
      check_legalized("resize", "x: Tensor[(n, 3, 4, 4), f32], roi: Tensor[(8,), f32], s: Tensor[(4,), f32]",
                      "Tensor[(n, 3, 8, 6), f32]",
                      std::string("resize(x, roi, s, sizes=[n, 3, 8, 6], mode=\"") + mode +
                          "\", coordinate_transformation_mode=\"" + coord + "\", exclude_outside=true)");
    }
  check_legalized("resize", "x: Tensor[(1, 1, 8, 8), f32]", "Tensor[(1, 1, 3, 3), f32]",
                  "resize(x, sizes=[1, 1, 3, 3], mode=\"cubic\", antialias=true)");
  check_legalized("resize", "x: Tensor[(1, 1, 8, 8, 8), u8]", "Tensor[(1, 1, 4, 4, 4), u8]",
                  "resize(x, sizes=[1, 1, 4, 4, 4], mode=\"linear\", antialias=true)");
}

TEST_CASE("grid_sample, affine_grid, roi_align") {
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      check_legalized("grid_sample", "x: Tensor[(n, 2, 4, 4), f32], g: Tensor[(n, 3, 5, 2), f32]",
                      "Tensor[(n, 2, 3, 5), f32]",
                      std::string("grid_sample(x, g, mode=\"") + mode + "\", padding_mode=\"" + pad + "\")");
  check_legalized("grid_sample", "x: Tensor[(1, 2, 4, 4, 4), f32], g: Tensor[(1, 2, 3, 2, 3), f32]",
                  "Tensor[(1, 2, 2, 3, 2), f32]", "grid_sample(x, g, align_corners=true)");
  check_legalized("affine_grid", "t: Tensor[(n, 2, 3), f32]", "Tensor[(n, 4, 5, 2), f32]",
                  "affine_grid(t, size=[n, 1, 4, 5])");
  check_legalized("affine_grid", "t: Tensor[(2, 3, 4), f32]", "Tensor[(2, 2, 3, 4, 3), f32]",
                  "affine_grid(t, size=[2, 1, 2, 3, 4], align_corners=true)");
  check_legalized("roi_align", "x: Tensor[(n, 3, 8, 8), f32], r: Tensor[(k, 4), f32], b: Tensor[(k,), i64]",
                  "Tensor[(k, 3, 2, 2), f32]", "roi_align(x, r, b, output_height=2, output_width=2)");
  check_legalized("roi_align", "x: Tensor[(1, 3, 8, 8), f32], r: Tensor[(2, 4), f32], b: Tensor[(2,), i64]",
                  "Tensor[(2, 3, 3, 2), f32]",
                  "roi_align(x, r, b, output_height=3, output_width=2, sampling_ratio=2, mode=\"max\")");
}

TEST_CASE("quantize and dequantize: per tensor, per axis, blocked, narrow targets") {
  check_legalized("quantize", "x: Tensor[(n, 4), f32], s: Tensor[(), f32], z: Tensor[(), u8]", "Tensor[(n, 4), u8]",
                  "quantize(x, s, z)");
  check_legalized("quantize", "x: Tensor[(n, 4), f32], s: Tensor[(4,), f32], z: Tensor[(4,), i4]", "Tensor[(n, 4), i4]",
                  "quantize(x, s, z, axis=1, out_dtype=i4)");
  check_legalized("quantize", "x: Tensor[(n, 6), f32], s: Tensor[(n, 2), f32]", "Tensor[(n, 6), f8e4m3fn]",
                  "quantize(x, s, axis=1, block_size=3, out_dtype=f8e4m3fn)");
  check_legalized("dequantize", "x: Tensor[(n, 4), i8], s: Tensor[(4,), f32], z: Tensor[(4,), i8]",
                  "Tensor[(n, 4), f32]", "dequantize(x, s, z, axis=-1)");
  check_legalized("dequantize", "x: Tensor[(n, 6), u4], s: Tensor[(n, 2), f16]", "Tensor[(n, 6), f16]",
                  "dequantize(x, s, axis=1, block_size=3)");
}

TEST_CASE("rnn, gru, lstm: directions, layouts, optional inputs") {
  check_legalized("rnn", "x: Tensor[(s, n, 3), f32], w: Tensor[(1, 5, 3), f32], r: Tensor[(1, 5, 5), f32]",
                  "Tuple[Tensor[(s, 1, n, 5), f32], Tensor[(1, n, 5), f32]]", "rnn(x, w, r, hidden_size=5)");
  check_legalized("gru",
                  "x: Tensor[(n, s, 3), f32], w: Tensor[(2, 12, 3), f32], r: Tensor[(2, 12, 4), f32], "
                  "b: Tensor[(2, 24), f32], l: Tensor[(n,), i32], h: Tensor[(n, 2, 4), f32]",
                  "Tuple[Tensor[(n, s, 2, 4), f32], Tensor[(n, 2, 4), f32]]",
                  "gru(x, w, r, b, l, h, direction=\"bidirectional\", layout=1)");
  check_legalized("gru", "x: Tensor[(s, n, 3), f32], w: Tensor[(1, 12, 3), f32], r: Tensor[(1, 12, 4), f32]",
                  "Tuple[Tensor[(s, 1, n, 4), f32], Tensor[(1, n, 4), f32]]",
                  "gru(x, w, r, linear_before_reset=true, clip=2.0)");
  check_legalized("lstm",
                  "x: Tensor[(s, n, 3), f32], w: Tensor[(1, 16, 3), f32], r: Tensor[(1, 16, 4), f32], "
                  "b: Tensor[(1, 32), f32], l: Tensor[(n,), i32], h: Tensor[(1, n, 4), f32], "
                  "c: Tensor[(1, n, 4), f32], p: Tensor[(1, 12), f32]",
                  "Tuple[Tensor[(s, 1, n, 4), f32], Tensor[(1, n, 4), f32], Tensor[(1, n, 4), f32]]",
                  "lstm(x, w, r, b, l, h, c, p, direction=\"reverse\", activations=[\"HardSigmoid\", \"Tanh\", "
                  "\"Softsign\"], activation_alpha=[0.2, 0.0, 0.0], activation_beta=[0.5, 0.0, 0.0])");
}

TEST_CASE("col2im and reverse_sequence") {
  check_legalized("col2im", "x: Tensor[(n, 8, 9), f32]", "Tensor[(n, 2, 4, 4), f32]",
                  "col2im(x, shape(4, 4), shape(2, 2))");
  check_legalized("col2im", "x: Tensor[(1, 4, 6), f32]", "Tensor[(1, 1, 5, 5), f32]",
                  "col2im(x, shape(5, 5), shape(2, 2), strides=[2, 2], pads=[0, 0, 1, 1], dilations=[1, 2])");
  check_legalized("reverse_sequence", "x: Tensor[(t, n, 2), f32], l: Tensor[(n,), i64]", "Tensor[(t, n, 2), f32]",
                  "reverse_sequence(x, l)");
  check_legalized("reverse_sequence", "x: Tensor[(n, t), f32], l: Tensor[(n,), i64]", "Tensor[(n, t), f32]",
                  "reverse_sequence(x, l, batch_axis=0, time_axis=1)");
}

TEST_CASE("matmul_integer: the runtime's integer product where it takes the zero points, else a loop nest") {
  const char* qmatmul = "call_library(\"gemm.qmatmul\"";
  check_legalized("matmul_integer", "a: Tensor[(n, 5, 8), u8], b: Tensor[(8, 3), i8], za: Tensor[(), u8], zb: Tensor[(), i8]",
                  "Tensor[(n, 5, 3), i32]", "matmul_integer(a, b, za, zb)", qmatmul);
  // One zero point per row of a and per column of b.
  check_legalized("matmul_integer",
                  "a: Tensor[(n, 5, 8), i8], b: Tensor[(n, 8, 3), u8], za: Tensor[(n, 5, 1), i8], zb: Tensor[(3,), u8]",
                  "Tensor[(n, 5, 3), i32]", "matmul_integer(a, b, za, zb)", qmatmul);
  // Zero points per batch of b: the runtime's product takes one set for all.
  check_legalized("matmul_integer",
                  "a: Tensor[(2, 5, 8), u8], b: Tensor[(2, 8, 3), u8], za: Tensor[(), u8], zb: Tensor[(2, 1, 3), u8]",
                  "Tensor[(2, 5, 3), i32]", "matmul_integer(a, b, za, zb)");
}

TEST_CASE("conv_integer: a loop nest where the weight is not a constant (the library packs constants)") {
  check_legalized("conv_integer",
                  "x: Tensor[(n, 4, 9, 9), u8], w: Tensor[(8, 4, 3, 3), i8], zx: Tensor[(), u8], zw: Tensor[(8,), i8]",
                  "Tensor[(n, 8, 9, 9), i32]", "conv_integer(x, w, zx, zw, padding=[1, 1, 1, 1])");
  check_legalized("conv_integer",
                  "x: Tensor[(n, 4, 10), i8], w: Tensor[(4, 2, 3), u8], zx: Tensor[(1,), i8], zw: Tensor[(), u8]",
                  "Tensor[(n, 4, 4), i32]", "conv_integer(x, w, zx, zw, strides=[2], groups=2)");
}
