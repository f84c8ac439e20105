// fuse-library-epilogues: a library convolution (gemm.conv2d_packed) or
// product (blas.matmul, f32, blas.matmul_view writing its result as it
// is, or gemm.matmul_packed), the cpu target's, whose result only an
// elementwise kernel reads, and reads as a bias, residual, activation and
// clamp would,
//   y = call_library("gemm.conv2d_packed", (x, w, shape(p...)), out=T)
//   z = call_tir(@f, (.., y, .., b, .., r, ..), out=T)
//   @f: z[i] = max(y[i] + b[i1, 0, 0] + r[i], 0.0)   (terms in any order)
// becomes one call that applies it to its outputs right after summing
// them, while they are in cache (runtime/epilogue.h):
//   z = call_library("gemm.conv2d_packed", (x, w, shape(p..., e, lo, hi, k1, k2, k3), b, r), out=T)
// (a product: (a, b, shape(e, lo, hi, k1, k2, k3), tensors...)). e: bits
// 0-1 the number of per-channel biases (up to 2), bit 2 a residual, bit 3
// a SiLU, bits 4 and 5 the lower and upper clamp read from a scalar
// tensor, bit 6 a leaky ReLU (its threshold and slope two scalar
// tensors), bit 7 tanh, bit 8 GELU's erf form s * (erf(s / k1) + k2) * k3
// (bit 9: k1 divides, else multiplies), bits 10-12 k1, k2, k3 from scalar
// tensors, bit 13 hardswish s * min(max(k1 * s + k2, lo), hi) (the bounds
// the gate's); lo, hi and the k's as f32 bits where constant. The tensors
// follow the parameters in that order: biases, residual, lower and upper
// bound, threshold and slope, k1, k2, k3.
// What @f may store: a sum of loads, each one of y at the stored index, a
// tensor of y's shape at the stored index (at most one), or a tensor of
// the output channels' size (a convolution's dim 1, a product's last), all
// of its dims 1 but the one read at the channel index (at most two);
// under max(., lo), min(., hi) or both, with bounds constant or read from
// a scalar tensor (an exported Clip's min and max), as s * sigmoid(s) of
// that sum s (a SiLU: EfficientNet's and YOLO's convolutions), as s < t ?
// a * s : s (a leaky ReLU: t and a scalar tensors, RetinaFace's
// convolutions), as tanh(s), or as GELU (the transformers' MLPs: torch
// exports (s * (erf(s / 1.414) + 1)) * 0.5, the legaliser writes s * 0.5 *
// (1 + erf(s * 0.7071))), or as hardswish (MobileNetV3). ResNet's conv + bias + relu, and its conv + bias
// + (downsample + bias) + relu, are each one call instead of two and a
// tensor. The additions may round in another order than @f's (the biases
// first, then the residual).
//
// A convolution with a workspace (the im2col form, a tuple result) is left
// alone, as is a result read twice or by anything else.
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/analyzer.h"
#include "ir/error.h"
#include "ir/explain.h"
#include "ir/mutator.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/tir_functor.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr const char* kConv = "gemm.conv2d_packed";
constexpr const char* kMatmul = "blas.matmul";
constexpr const char* kMatmulView = "blas.matmul_view";
constexpr const char* kMatmulPacked = "gemm.matmul_packed";
constexpr const char* kQmatmul = "gemm.qmatmul_packed";
constexpr const char* kTopic = "fuse-library-epilogues";  // --explain

// A scalar operand: a constant, or an input of @f read as one f32.
struct Scalar {
  float value = 0.0f;
  int input = -1;
};

struct Epilogue {
  int scale = -1;   // an integer product's: the input of @f its i32 sums are scaled by
  int scale2 = -1;  // and a second scalar factor of it ((s0 * s1) as the kernel wrote it)
  // The result quantized (an integer product's): saturate(round(v / s) + z) to u8 or i8, s and z scalar inputs.
  int q_scale = -1, q_zero = -1;
  std::vector<size_t> biases;  // inputs of @f
  int residual = -1;
  bool silu = false;  // the sum s as s * sigmoid(s)
  bool tanh = false;  // as tanh(s)
  // s * min(max(k1 * s + k2, lo), hi) (ONNX HardSwish), the bounds the gate's.
  bool hardswish = false;
  // GELU's erf form: s * (erf(s / k1) + k2) * k3 (s * k1 where not gelu_div).
  bool gelu = false, gelu_div = false;
  Scalar k1{1.0f}, k2{0.0f}, k3{1.0f};
  // Scalars read from inputs of @f (rank 0, or one element): the clamps'
  // bounds, and a leaky ReLU's threshold and slope (s < t ? a * s : s).
  int lo_input = -1, hi_input = -1, leak_at = -1, slope = -1;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  // One activation at most (the runtime refuses flags naming two).
  bool activated() const { return silu || tanh || gelu || hardswish || slope >= 0; }
};

bool is_var(const tir::TExpr& e, const SymExpr& v) {
  const auto* s = tir::as<tir::SymNodeT>(e);
  return s && s->value == v;
}
bool same_shape(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}
// The operands of a tree of `op` (an associative one) under e, left to
// right: e itself when it is not one.
std::vector<tir::TExpr> operands(const tir::TExpr& e, tir::BinOp op) {
  std::vector<tir::TExpr> out, todo{e};
  while (!todo.empty()) {
    tir::TExpr t = todo.back();
    todo.pop_back();
    const auto* b = tir::as<tir::BinaryNode>(t);
    if (b && b->op == op) {
      todo.push_back(b->b), todo.push_back(b->a);
      continue;
    }
    out.push_back(t);
  }
  return out;
}
int input_index(const tir::Program& p, const tir::Buffer& b) {
  for (size_t i = 0; i < p->inputs.size(); ++i)
    if (p->inputs[i] == b) return int(i);
  return -1;
}

// The matcher of one candidate: what @f does to its input `conv` (the
// library call's result), if it is such an epilogue, as named rules run in
// order, outermost first, each consuming what it recognises of the stored
// value (the rules that say why they refuse a candidate: --explain
// fuse-library-epilogues); biases are read at the output's channel dim (a
// convolution's 1, a product's last).
//
// A product's result may be read through a reshape that keeps its rows
// (GPT-2's Gemm output (B * S, N) read as (B, S, N)): its last dim is the
// output's, and the read's offset is provably the store's under the
// loops' bounds.
//
// An integer product's i32 sums (`integer`) must be read as f32 times a
// scale, one for all or one per column: f32(y[i]) * s.
//
// Its result may be quantized as the quantize legaliser writes it,
// cast(u8, cast(i32, min(max(round(v / s) + f32(z), 0), 255))) (i8: -128
// and 127), with s and z scalar inputs (f32; the output's dtype): the
// store's dtype is then u8 or i8.
class EpilogueMatcher {
 public:
  // blocked: a convolution in the blocked channel layout (layout 4,
  // runtime/conv_blocked.h), whose channel is dims 1 and 4 together.
  EpilogueMatcher(const tir::Program& p, size_t conv, bool product, bool integer, bool blocked = false)
      : p_(p), conv_(conv), product_(product), integer_(integer), blocked_(blocked) {}

  // The epilogue; nullopt when a rule refuses it, why_not() saying which and why.
  std::optional<Epilogue> match() {
    if (!nest()) return std::nullopt;
    v_ = store_->value;
    if (quantized_ && !quantized_result()) return std::nullopt;
    if (!clamps() || !leaky_relu()) return std::nullopt;
    silu();
    hardswish();
    tanh();
    if (!gelu() || !sum_terms()) return std::nullopt;
    return e_;
  }
  const std::string& why_not() const { return why_; }

 private:
  bool refuse(std::string why) {
    why_ = std::move(why);
    return false;
  }
  bool clamped() const { return has_lo_ || has_hi_; }
  // Whether an activation rule may still apply to v_: none has, no clamp.
  bool may_activate() const { return !clamped() && !e_.activated(); }

  // Rule "nest": one output of f32 (or, quantized, u8 or i8) and y the
  // library's dtype; loops over every dim of the output in order, then one
  // store at the loop variables. Indices are simplified under their bounds
  // (inlining a reshape leaves i2 // 32 and i2 % 32 for i2 < 32).
  bool nest() {
    if (p_->outputs.size() != 1 || conv_ >= p_->inputs.size()) return refuse("not one output");
    out_ = p_->outputs[0], y_ = p_->inputs[conv_];
    quantized_ = integer_ && (out_->dtype == DataType::u(8) || out_->dtype == DataType::i(8));
    if (!(out_->dtype == DataType::f32() || quantized_) ||
        !(y_->dtype == (integer_ ? DataType::i32() : DataType::f32())))
      return refuse(cat("dtypes: the output is ", out_->dtype.str(), ", the library's result ", y_->dtype.str()));
    if (out_->shape.size() < (product_ ? 1 : blocked_ ? 5 : 2)) return refuse("the output's rank is too small");
    channel_ = product_ ? out_->shape.size() - 1 : 1;
    const bool reshaped = !same_shape(out_->shape, y_->shape);
    if (reshaped && (!product_ || y_->shape.empty() || !(y_->shape.back() == out_->shape.back())))
      return refuse("the library's result is read through a reshape that does not keep its rows");
    body_ = tir::simplify_indices(p_->body);
    tir::Stmt s = body_;
    while (const auto* f = tir::as<tir::ForNode>(s)) {
      if (vars_.size() >= out_->shape.size() || !(f->extent == out_->shape[vars_.size()]))
        return refuse("the loops do not run over the output's dims in order");
      vars_.push_back(f->var);
      az_.bind_below(f->var, f->extent);
      if (f->extent.is_const()) az_.bind(f->var, 0, f->extent.const_value() - 1);
      s = f->body;
    }
    if (reshaped && !az_.can_prove_equal(numel(out_->shape), numel(y_->shape)))
      return refuse("the reshaped read has another element count");
    for (size_t d = 0; d < vars_.size(); ++d) stored_ = stored_ * out_->shape[d] + vars_[d];
    store_ = tir::as<tir::StoreNode>(s);
    if (!store_ || store_->buffer != out_ || !at_store_index(store_->indices))
      return refuse("the nest's body is not one store of the output at the loop variables");
    return true;
  }

  // Rule "quantized": an integer product's result quantized as the
  // quantize legaliser writes it, cast(u8, cast(i32, min(max(round(v / s)
  // + f32(z), 0), 255))) (i8: -128 and 127), s and z scalar inputs.
  bool quantized_result() {
    const bool i8 = out_->dtype == DataType::i(8);
    const auto* narrow = tir::as<tir::CastNode>(v_);
    const auto* wide = narrow ? tir::as<tir::CastNode>(narrow->a) : nullptr;
    const auto* hi = wide && wide->dtype == DataType::i32() ? tir::as<tir::BinaryNode>(wide->a) : nullptr;
    const auto* lo = hi && hi->op == tir::BinOp::Min ? tir::as<tir::BinaryNode>(hi->a) : nullptr;
    if (!lo || lo->op != tir::BinOp::Max || constant(lo->b) != (i8 ? -128.0 : 0.0) ||
        constant(hi->b) != (i8 ? 127.0 : 255.0))
      return refuse("a u8 or i8 result that is not a saturating cast of a clamp to its range");
    const auto* add = tir::as<tir::BinaryNode>(lo->a);
    if (!add || add->op != tir::BinOp::Add) return refuse("the quantized value is not round(v / s) + z");
    for (auto [r, z] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
      const auto* round = tir::as<tir::CallNodeT>(r);
      const auto* zc = tir::as<tir::CastNode>(z);
      const auto* zl = zc && zc->dtype == DataType::f32() ? tir::as<tir::LoadNode>(zc->a) : nullptr;
      const auto* div =
          round && round->fn == tir::Intrinsic::round ? tir::as<tir::BinaryNode>(round->args[0]) : nullptr;
      if (!zl || !(zl->buffer->dtype == out_->dtype) || !div || div->op != tir::BinOp::Div) continue;
      const int s = scalar_input(div->b);
      int zi = input_index(p_, zl->buffer);
      for (size_t d = 0; d < zl->indices.size(); ++d)
        if (!index_is(zl->indices[d], SymExpr(0)) || !(zl->buffer->shape[d] == SymExpr(1))) zi = -1;
      if (s < 0 || zi < 0) continue;
      e_.q_scale = s, e_.q_zero = zi, v_ = div->a;
      return true;
    }
    return refuse("the quantization's scale or zero point is not a scalar input");
  }

  // Rule "clamps": max(., lo) and min(., hi), the other side a constant or
  // a scalar input, each at most once.
  bool clamps() {
    for (;;) {
      const auto* b = tir::as<tir::BinaryNode>(v_);
      if (!b || (b->op != tir::BinOp::Max && b->op != tir::BinOp::Min)) return true;
      const bool lower = b->op == tir::BinOp::Max;
      bool& seen = lower ? has_lo_ : has_hi_;
      if (seen) return refuse(cat("two ", lower ? "lower" : "upper", " clamps"));
      seen = true;
      const auto* imm = tir::as<tir::ImmNode>(b->b);
      tir::TExpr bound = b->b, rest = b->a;
      if (!imm && scalar_input(b->b) < 0) bound = b->a, rest = b->b, imm = tir::as<tir::ImmNode>(b->a);
      if (imm && imm->dtype.is_float())
        (lower ? e_.lo : e_.hi) = float(imm->float_value);
      else if (int input = scalar_input(bound); input >= 0)
        (lower ? e_.lo_input : e_.hi_input) = input;
      else
        return refuse("a clamp's bound is neither a constant nor a scalar input");
      v_ = rest;
    }
  }

  // Rule "leaky-relu": s < t ? a * s : s (either order of the product),
  // with t and a scalar inputs (ONNX LeakyRelu as the legaliser writes
  // it), with no clamp.
  bool leaky_relu() {
    const auto* sel = tir::as<tir::SelectNode>(v_);
    if (!sel || clamped()) return true;
    const auto* lt = tir::as<tir::BinaryNode>(sel->cond);
    const auto* mul = tir::as<tir::BinaryNode>(sel->a);
    if (!lt || lt->op != tir::BinOp::LT || !mul || mul->op != tir::BinOp::Mul)
      return refuse("a select that is not s < t ? a * s : s");
    tir::TExpr scaled = mul->b;
    int slope = scalar_input(mul->a);
    if (slope < 0) slope = scalar_input(mul->b), scaled = mul->a;
    const std::string sum = print_texpr(sel->b);
    const int leak_at = scalar_input(lt->b);
    if (slope < 0 || leak_at < 0 || print_texpr(lt->a) != sum || print_texpr(scaled) != sum)
      return refuse("a leaky ReLU whose threshold or slope is not a scalar input, or that reads another sum");
    e_.leak_at = leak_at, e_.slope = slope;
    v_ = sel->b;
    return true;
  }

  // Rule "silu": s * sigmoid(s) (either order), with no clamp.
  void silu() {
    const auto* m = tir::as<tir::BinaryNode>(v_);
    if (!m || m->op != tir::BinOp::Mul || !may_activate()) return;
    for (auto [s, g] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
      const auto* call = tir::as<tir::CallNodeT>(g);
      if (call && call->fn == tir::Intrinsic::sigmoid && print_texpr(call->args[0]) == print_texpr(s)) {
        e_.silu = true;
        v_ = s;
        return;
      }
    }
  }

  // Rule "hardswish": s * min(max(k1 * s + k2, lo), hi) (either order of
  // each product and sum; k1 * s may be s), with no clamp outside: the
  // bounds are the gate's.
  void hardswish() {
    const auto* m = tir::as<tir::BinaryNode>(v_);
    if (!m || m->op != tir::BinOp::Mul || !may_activate()) return;
    for (auto [sum, gate] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
      const auto* hi = tir::as<tir::BinaryNode>(gate);
      const auto* lo = hi && hi->op == tir::BinOp::Min ? tir::as<tir::BinaryNode>(hi->a) : nullptr;
      if (!lo || lo->op != tir::BinOp::Max) continue;
      std::optional<Scalar> lo_k = scalar(lo->b), hi_k = scalar(hi->b);
      const auto* affine = tir::as<tir::BinaryNode>(lo->a);
      if (!lo_k || !hi_k || !affine || affine->op != tir::BinOp::Add) continue;
      std::optional<std::pair<Scalar, Scalar>> k = affine_of(affine, sum);
      if (!k) continue;
      e_.k1 = k->first, e_.k2 = k->second;
      e_.lo_input = lo_k->input, e_.lo = lo_k->value;
      e_.hi_input = hi_k->input, e_.hi = hi_k->value;
      e_.hardswish = true;
      v_ = sum;
      return;
    }
  }
  // (k1, k2) when `affine` is k1 * s + k2 of `sum` (either order of each;
  // k1 * s may be s, k1 then 1).
  std::optional<std::pair<Scalar, Scalar>> affine_of(const tir::BinaryNode* affine, const tir::TExpr& sum) {
    for (auto [scaled, k2] : {std::pair{affine->a, affine->b}, std::pair{affine->b, affine->a}}) {
      std::optional<Scalar> k2_k = scalar(k2), k1_k = Scalar{1.0f};
      tir::TExpr s_in = scaled;
      if (const auto* mul = tir::as<tir::BinaryNode>(scaled); mul && mul->op == tir::BinOp::Mul) {
        if ((k1_k = scalar(mul->a)))
          s_in = mul->b;
        else if ((k1_k = scalar(mul->b)))
          s_in = mul->a;
      }
      if (k2_k && k1_k && print_texpr(s_in) == print_texpr(sum)) return std::pair{*k1_k, *k2_k};
    }
    return std::nullopt;
  }

  // Rule "tanh": tanh(s), with no clamp.
  void tanh() {
    const auto* call = tir::as<tir::CallNodeT>(v_);
    if (!call || call->fn != tir::Intrinsic::tanh || !may_activate()) return;
    e_.tanh = true;
    v_ = call->args[0];
  }

  // Rule "gelu": GELU's erf form, with no clamp: a product (in any
  // grouping and order) of s, erf(s / k1) + k2 (or s * k1, either order of
  // each), and at most one scalar k3.
  bool gelu() {
    const auto* m = tir::as<tir::BinaryNode>(v_);
    if (!m || m->op != tir::BinOp::Mul || !may_activate()) return true;
    Epilogue g = e_;
    std::optional<tir::TExpr> sum, erf_sum;
    int erfs = 0, k3s = 0;
    for (const tir::TExpr& f : operands(v_, tir::BinOp::Mul)) {
      std::optional<Scalar> k2;
      if (const tir::CallNodeT* erf = erf_plus(f, k2)) {
        // erf's argument: s / k1, s * k1 or k1 * s.
        const auto* arg = tir::as<tir::BinaryNode>(erf->args[0]);
        if (!arg || (arg->op != tir::BinOp::Div && arg->op != tir::BinOp::Mul))
          return refuse("erf's argument is not s / k1 or s * k1");
        std::optional<Scalar> k1 = scalar(arg->b);
        erf_sum = arg->a;
        if (!k1 && arg->op == tir::BinOp::Mul) k1 = scalar(arg->a), erf_sum = arg->b;
        if (!k1) return refuse("erf's k1 is neither a constant nor a scalar input");
        g.gelu_div = arg->op == tir::BinOp::Div, g.k1 = *k1, g.k2 = *k2;
        ++erfs;
      } else if (std::optional<Scalar> k3 = scalar(f)) {
        g.k3 = *k3;
        ++k3s;
      } else if (!sum) {
        sum = f;
      } else {
        return refuse("a product of two sums");
      }
    }
    if (erfs == 1 && k3s <= 1 && sum && print_texpr(*sum) == print_texpr(*erf_sum)) {
      g.gelu = true;
      e_ = g;
      v_ = *sum;
    }
    return true;
  }
  // erf(.) when f is erf(.) + k2 (either order), k2 a constant or scalar input.
  const tir::CallNodeT* erf_plus(const tir::TExpr& f, std::optional<Scalar>& k2) {
    const auto* add = tir::as<tir::BinaryNode>(f);
    if (!add || add->op != tir::BinOp::Add) return nullptr;
    for (auto [c, k] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
      const auto* call = tir::as<tir::CallNodeT>(c);
      if (call && call->fn == tir::Intrinsic::erf && (k2 = scalar(k))) return call;
    }
    return nullptr;
  }

  // Rule "sum": what is left is a sum of the library's result at the
  // stored element (an integer product's as f32 times its scale), at most
  // one residual of the output's shape there, and at most two biases read
  // at the channel index; a float one must add something to the result.
  bool sum_terms() {
    bool seen_conv = false;
    for (const tir::TExpr& t : operands(v_, tir::BinOp::Add)) {
      if (integer_ && !seen_conv) {
        if (int s = scaled_sums(t); s >= 0) {
          e_.scale = s, seen_conv = true;
          continue;
        }
      }
      const auto* l = tir::as<tir::LoadNode>(t);
      if (!l || !(l->buffer->dtype == DataType::f32()))
        return refuse(cat("a term that is not an f32 load: ", print_texpr(t)));
      int input = input_index(p_, l->buffer);
      if (input < 0) return refuse("a term reads a buffer that is not an input");
      if (size_t(input) == conv_ && reads_stored(*l) && !seen_conv) {
        seen_conv = true;
        continue;
      }
      if (size_t(input) != conv_ && same_shape(l->buffer->shape, out_->shape) && reads_stored(*l)) {
        if (e_.residual >= 0) return refuse("two residuals");
        e_.residual = input;
        continue;
      }
      const int bias = channel_input(*l);
      if (bias < 0) return refuse(cat("a term that is neither the result, a residual nor a bias: ", print_texpr(t)));
      if (e_.biases.size() == 2) return refuse("more than two biases");
      e_.biases.push_back(size_t(bias));
    }
    if (!seen_conv) return refuse("the library's result is not read at the stored element");
    if (!integer_ && e_.biases.empty() && e_.residual < 0 && !clamped() && !e_.activated())
      return refuse("nothing to apply");
    return true;
  }

  // ---- what the rules read ----
  static SymExpr numel(const std::vector<SymExpr>& shape) {
    SymExpr n(1);
    for (const SymExpr& d : shape) n = n * d;
    return n;
  }
  // An f32 constant c, or c of another dtype cast to f32.
  static std::optional<double> constant(const tir::TExpr& t) {
    const tir::TExpr* x = &t;
    if (const auto* c = tir::as<tir::CastNode>(t)) x = &c->a;
    const auto* imm = tir::as<tir::ImmNode>(*x);
    if (!imm) return std::nullopt;
    return imm->dtype.is_float() ? imm->float_value : double(imm->int_value);
  }
  // An index provably equal to v.
  bool index_is(const tir::TExpr& e, const SymExpr& v) const {
    const auto* sym = tir::as<tir::SymNodeT>(e);
    return sym && az_.can_prove_equal(sym->value, v);
  }
  // The row-major offset of `indices` into `shape`, if they are symbolic.
  static std::optional<SymExpr> offset(const std::vector<tir::TExpr>& indices, const std::vector<SymExpr>& shape) {
    if (indices.size() != shape.size()) return std::nullopt;
    SymExpr o(0);
    for (size_t d = 0; d < indices.size(); ++d) {
      const auto* sym = tir::as<tir::SymNodeT>(indices[d]);
      if (!sym) return std::nullopt;
      o = o * shape[d] + sym->value;
    }
    return o;
  }
  // Indices that are the loop variables in order: the stored element.
  bool at_store_index(const std::vector<tir::TExpr>& indices) const {
    if (indices.size() != vars_.size()) return false;
    for (size_t d = 0; d < vars_.size(); ++d)
      if (!is_var(indices[d], vars_[d])) return false;
    return true;
  }
  // A read of y (or of a tensor of the output's shape) at the stored element.
  bool reads_stored(const tir::LoadNode& l) const {
    if (same_shape(l.buffer->shape, out_->shape)) {
      if (l.indices.size() != vars_.size()) return false;
      for (size_t d = 0; d < vars_.size(); ++d)
        if (!index_is(l.indices[d], vars_[d])) return false;
      return true;
    }
    if (l.buffer != y_) return false;
    std::optional<SymExpr> at = offset(l.indices, y_->shape);
    return at && az_.can_prove_equal(*at, stored_);
  }
  // An input of @f read as one f32 scalar (a rank-0 tensor, or one element
  // at index 0): its index, or -1.
  int scalar_input(const tir::TExpr& t) const {
    const auto* l = tir::as<tir::LoadNode>(t);
    if (!l || !(l->buffer->dtype == DataType::f32())) return -1;
    for (size_t d = 0; d < l->indices.size(); ++d)
      if (!index_is(l->indices[d], SymExpr(0)) || !(l->buffer->shape[d] == SymExpr(1))) return -1;
    int input = input_index(p_, l->buffer);
    return size_t(input) == conv_ ? -1 : input;
  }
  // A constant or a scalar input.
  std::optional<Scalar> scalar(const tir::TExpr& t) const {
    if (const auto* imm = tir::as<tir::ImmNode>(t); imm && imm->dtype.is_float())
      return Scalar{float(imm->float_value)};
    if (int input = scalar_input(t); input >= 0) return Scalar{0.0f, input};
    return std::nullopt;
  }
  // An input of @f with one element per output channel, read at the
  // channel index (its other dims of size 1 read at 0, or at a loop
  // variable of extent 1: `b[i1, i2, i3]` over a 1x1 plane): its index, or
  // -1.
  // A blocked convolution's channel is two dims, its block (1) and lane
  // (4), read in that order: the bias's elements in channel order.
  int channel_input(const tir::LoadNode& l) const {
    std::vector<size_t> dims = {channel_};
    if (blocked_) dims.push_back(4);
    size_t matched = 0;
    for (size_t d = 0; d < l.indices.size(); ++d) {
      bool unit_var = false;
      for (size_t k = 0; k < vars_.size(); ++k)
        unit_var |= is_var(l.indices[d], vars_[k]) && out_->shape[k] == SymExpr(1);
      if (matched < dims.size() && index_is(l.indices[d], vars_[dims[matched]]) &&
          l.buffer->shape[d] == out_->shape[dims[matched]]) {
        ++matched;
      } else if (!(index_is(l.indices[d], SymExpr(0)) || unit_var) || !(l.buffer->shape[d] == SymExpr(1))) {
        return -1;
      }
    }
    const int input = input_index(p_, l.buffer);
    return matched == dims.size() && size_t(input) != conv_ && l.buffer->dtype == DataType::f32() ? input : -1;
  }
  // The i32 sums as f32 times their scale (either order): the scale's input.
  int scaled_sums(const tir::TExpr& t) {
    const auto* m = tir::as<tir::BinaryNode>(t);
    if (!m || m->op != tir::BinOp::Mul) return -1;
    for (auto [c, k] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
      const auto* cast = tir::as<tir::CastNode>(c);
      const auto* l = cast && cast->dtype == DataType::f32() ? tir::as<tir::LoadNode>(cast->a) : nullptr;
      if (!l || l->buffer != y_ || !reads_stored(*l)) continue;
      if (int s = scalar_input(k); s >= 0) return s;
      if (const auto* kl = tir::as<tir::LoadNode>(k)) return channel_input(*kl);
      // (s0 * s1), two scalars: dynamic quantization's x_scale * w_scale.
      if (const auto* km = tir::as<tir::BinaryNode>(k); km && km->op == tir::BinOp::Mul) {
        const int s0 = scalar_input(km->a), s1 = scalar_input(km->b);
        if (s0 >= 0 && s1 >= 0) {
          e_.scale2 = s1;
          return s0;
        }
      }
    }
    return -1;
  }

  const tir::Program p_;
  const size_t conv_;
  const bool product_, integer_, blocked_;
  tir::Buffer out_, y_;
  bool quantized_ = false;
  size_t channel_ = 0;         // the output's channel dim: a convolution's 1, a product's last
  std::vector<SymExpr> vars_;  // the nest's loop variables, outermost first
  Analyzer az_;                // their bounds
  SymExpr stored_{0};          // the store's offset into the output
  tir::Stmt body_;             // @f's body, indices simplified: what store_ points into
  const tir::StoreNode* store_ = nullptr;
  Epilogue e_;
  tir::TExpr v_;  // what is left of the stored value to match
  bool has_lo_ = false, has_hi_ = false;
  std::string why_;
};

int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

// A library call that can take an epilogue, as the legaliser wrote it:
// the convolution without an epilogue or workspace, or the product
// (f32).
struct LibraryCall {
  const CallNode* call;
  std::string name;
  bool blocked = false;  // a convolution in the blocked channel layout (layout 4)
};
std::optional<LibraryCall> plain_library_call(const Expr& value) {
  const CallNode* c = as_op_call(value, "call_library");
  if (!c || c->args.size() != 2) return std::nullopt;
  const auto* name = as<StringImmNode>(c->args[0]);
  const auto* args = as<TupleNode>(c->args[1]);
  const auto* t = value->sinfo ? dynamic_cast<const TensorSI*>(value->sinfo.get()) : nullptr;
  if (!name || !args || !t) return std::nullopt;
  if (name->value == kConv && args->fields.size() == 3) {
    const auto* params = as<ShapeExprNode>(args->fields[2]);
    if (!params || params->values.size() != 10) return std::nullopt;
    return LibraryCall{c, kConv, params->values[9].is_const(4)};
  }
  if (name->value == kMatmul && args->fields.size() == 2 && t->dtype == DataType::f32() && t->shape &&
      !t->shape->empty())
    return LibraryCall{c, kMatmul};
  // A product of views (passes/fold_matmul_views.cc) whose result is
  // written as it is: its parameters a's, b's and out's views, out's rank 0.
  if (name->value == kMatmulView && args->fields.size() == 3 && t->dtype == DataType::f32() && t->shape &&
      !t->shape->empty()) {
    const auto* params = as<ShapeExprNode>(args->fields[2]);
    size_t pos = 0;
    for (int view = 0; params && view < 3; ++view) {
      if (pos >= params->values.size() || !params->values[pos].is_const()) return std::nullopt;
      const int64_t rank = params->values[pos].const_value();
      if (view == 2 && rank != 0) return std::nullopt;
      pos += rank == 0 ? 1 : size_t(2 + 2 * rank);
    }
    if (params && pos == params->values.size()) return LibraryCall{c, kMatmulView};
  }
  if (name->value == kMatmulPacked && args->fields.size() == 3 && t->dtype == DataType::f32()) {
    const auto* params = as<ShapeExprNode>(args->fields[2]);
    if (params && params->values.size() == 2) return LibraryCall{c, kMatmulPacked};
  }
  if (name->value == kQmatmul && args->fields.size() == 4 && t->dtype == DataType::i32()) {
    const auto* params = as<ShapeExprNode>(args->fields[3]);
    if (params && params->values.size() == 2) return LibraryCall{c, kQmatmul};
  }
  return std::nullopt;
}

class Fuser : public ExprMutator {
 public:
  explicit Fuser(const IRModule& mod) : ExprMutator(&mod), explaining_(explaining(kTopic)) {}

  Function run(const Function& f) {
    uses_.clear(), fused_.clear(), dropped_.clear();
    visit_exprs(f->body, [&](const Expr& e) {
      if (const auto* v = as<VarNode>(e)) ++uses_[v];
    });
    visit_exprs(f->body, [&](const Expr& e) {
      const auto* seq = as<SeqExprNode>(e);
      if (!seq) return;
      for (const BindingBlock& block : seq->blocks) plan(block);
    });
    if (fused_.empty()) return f;
    return visit_function(f);
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    if (dropped_.count(b.var.get())) return;
    auto it = fused_.find(b.var.get());
    if (it == fused_.end()) return ExprMutator::visit_binding(b, out);
    Expr call = visit(it->second);
    out.push_back(Binding{b.var, call, nullptr});
  }

 private:
  void plan(const BindingBlock& block) {
    std::unordered_map<const VarNode*, LibraryCall> calls;  // in this block
    for (const Binding& b : block.bindings) {
      if (b.is_match_cast()) continue;
      if (std::optional<LibraryCall> lib = plain_library_call(b.value)) {
        calls.emplace(b.var.get(), *lib);
        continue;
      }
      const CallNode* c = as_op_call(b.value, "call_tir");
      if (!c || c->args.size() < 2) continue;
      const auto* g = as<GlobalVarNode>(c->args[0]);
      const auto* args = as<TupleNode>(c->args[1]);
      if (!g || !args || !mod_->program(g->name)) continue;
      for (size_t k = 0; k < args->fields.size(); ++k) {
        const auto* y = as<VarNode>(args->fields[k]);
        auto lib = y ? calls.find(y) : calls.end();
        if (lib == calls.end() || uses_[y] != 1) continue;
        const bool integer = lib->second.name == kQmatmul;
        EpilogueMatcher m(mod_->program(g->name), k, lib->second.name != kConv, integer, lib->second.blocked);
        std::optional<Epilogue> e = m.match();
        if (explaining_)
          explain(kTopic, cat("%", b.var->name, " = @", g->name, e ? " fused into " : " after ", lib->second.name,
                              e ? "" : ": not fused: " + m.why_not()));
        if (!e) continue;
        const auto* lib_args = as<TupleNode>(lib->second.call->args[1]);
        std::vector<Expr> fields = {lib_args->fields[0], lib_args->fields[1]};
        if (integer) fields.push_back(lib_args->fields[2]);
        std::vector<SymExpr> p;
        if (lib->second.name != kMatmul) p = as<ShapeExprNode>(lib_args->fields.back())->values;
        const int64_t flags = (e->scale >= 0 ? 1 << 14 : 0) | (e->scale2 >= 0 ? 1 << 15 : 0) |
                              (e->q_scale >= 0 ? 1 << 16 : 0) | int64_t(e->biases.size()) | (e->residual >= 0 ? 4 : 0) |
                              (e->silu ? 8 : 0) | (e->lo_input >= 0 ? 16 : 0) | (e->hi_input >= 0 ? 32 : 0) |
                              (e->slope >= 0 ? 64 : 0) | (e->tanh ? 128 : 0) | (e->gelu ? 256 : 0) |
                              (e->gelu_div ? 512 : 0) | (e->k1.input >= 0 ? 1024 : 0) | (e->k2.input >= 0 ? 2048 : 0) |
                              (e->k3.input >= 0 ? 4096 : 0) | (e->hardswish ? 8192 : 0);
        for (int64_t v : {flags, float_bits(e->lo), float_bits(e->hi), float_bits(e->k1.value), float_bits(e->k2.value),
                          float_bits(e->k3.value)})
          p.push_back(SymExpr(v));
        fields.push_back(make_shape(p));
        for (int i : {e->scale, e->scale2})
          if (i >= 0) fields.push_back(args->fields[size_t(i)]);
        for (size_t i : e->biases) fields.push_back(args->fields[i]);
        for (int i : {e->residual, e->lo_input, e->hi_input, e->leak_at, e->slope, e->k1.input, e->k2.input,
                      e->k3.input, e->q_scale, e->q_zero})
          if (i >= 0) fields.push_back(args->fields[size_t(i)]);
        Expr call =
            make_op_call("call_library", {make_string(lib->second.name), make_tuple(fields)}, {}, {b.var->sinfo});
        call->sinfo = b.var->sinfo;
        fused_[b.var.get()] = call;
        dropped_.insert(y);
        calls.erase(lib);
        break;
      }
    }
  }

  const bool explaining_;  // --explain fuse-library-epilogues: say why each candidate is (not) fused
  std::unordered_map<const VarNode*, int> uses_;
  std::unordered_map<const VarNode*, Expr> fused_;
  std::unordered_set<const VarNode*> dropped_;
};

}  // namespace

IRModule fuse_library_epilogues(const IRModule& mod) {
  Fuser fuser(mod);
  return map_functions(mod, [&](const std::string&, const Function& f) { return fuser.run(f); });
}

}  // namespace relax
