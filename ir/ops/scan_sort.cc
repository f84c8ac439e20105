// Cumulative ops, sorting, top-k, einsum, and the signal-processing and
// detection ops of ONNX: det, dft, stft, window, mel_weight_matrix,
// non_max_suppression, hardmax.
//
// Integers that fix output dims (topk's k, a window's size, dft and stft
// lengths) are Sym attributes: a frontend that only knows one at run time
// binds it to a fresh variable first (match_cast of tensor_to_shape). An
// axis known only at run time is an optional scalar operand instead (cumsum,
// cumprod, dft): the result keeps the dims no choice of axis can change.
#include <algorithm>
#include <cctype>
#include <map>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// A Sym attribute (check_op_attrs has converted an Int to a Sym).
SymExpr get_sym(const Attrs& attrs, const std::string& name) {
  const AttrValue* v = attrs.find(name);
  if (!v) return {};
  if (const auto* s = std::get_if<SymExpr>(v)) return *s;
  return SymExpr(std::get<int64_t>(*v));
}

// Whether a Sym attribute holds the "default" marker -1.
bool is_unset(const SymExpr& s) { return !s.defined() || s.is_const(-1); }

// Errors when `s` is provably negative (or, with positive, provably < 1).
void check_count(const std::string& op, const std::string& what, const SymExpr& s, const Analyzer& ana, bool positive) {
  if (ana.prove_less(s, positive ? 1 : 0) == Tri::Yes)
    fail(op, ": ", what, " must be ", positive ? "positive" : "non-negative", ", got ", s);
}

// An optional scalar operand (rank 0, or rank 1 with one element).
void check_scalar_arg(const CallNode& call, size_t i, const char* what, const Analyzer& ana) {
  if (call.args.size() <= i) return;
  const std::string& op = op_name(call);
  TensorInfo t = tensor_arg(call, i, true);
  if (t.ndim > 1) fail(op, ": ", what, " must be a scalar, got a rank-", t.ndim, " tensor");
  if (t.ndim == 1 && t.shape && ana.can_prove_not_equal((*t.shape)[0], 1))
    fail(op, ": ", what, " must have one element, got ", (*t.shape)[0]);
}

// ---- einsum -------------------------------------------------------------------------

// One side of an equation: its index letters, with the position among them
// where "..." stands (-1: none).
struct EinsumTerm {
  std::string letters;
  int ellipsis = -1;
};

EinsumTerm parse_term(const std::string& op, const std::string& s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      t.letters += c;
    } else if (c == '.' && s.compare(i, 3, "...") == 0 && t.ellipsis < 0) {
      t.ellipsis = int(t.letters.size());
      i += 2;
    } else {
      fail(op, ": bad subscripts '", s, "'");
    }
  }
  return t;
}

struct EinsumEquation {
  std::vector<EinsumTerm> inputs;
  EinsumTerm output;
};

// Parses "ij,jk->ik"; without "->" the output is numpy's implicit one: the
// ellipsis dims, then the letters used exactly once, in ASCII order.
EinsumEquation parse_einsum(const std::string& op, const std::string& equation) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  EinsumEquation out;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    out.inputs.push_back(parse_term(op, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    out.output = parse_term(op, eq.substr(arrow + 2));
    for (size_t i = 0; i < out.output.letters.size(); ++i) {
      char c = out.output.letters[i];
      if (out.output.letters.find(c, i + 1) != std::string::npos) fail(op, ": output index '", c, "' repeats");
      bool used = std::any_of(out.inputs.begin(), out.inputs.end(),
                              [&](const EinsumTerm& t) { return t.letters.find(c) != std::string::npos; });
      if (!used) fail(op, ": output index '", c, "' appears in no input");
    }
    return out;
  }
  std::map<char, int> count;
  bool ellipsis = false;
  for (const EinsumTerm& t : out.inputs) {
    for (char c : t.letters) ++count[c];
    ellipsis = ellipsis || t.ellipsis >= 0;
  }
  if (ellipsis) out.output.ellipsis = 0;
  for (auto [c, n] : count)  // std::map iterates in ASCII order
    if (n == 1) out.output.letters += c;
  return out;
}

// Unifies the sizes one index letter takes in different places: equal, or
// one of them 1 (broadcast). Nullopt when it cannot be proven.
std::optional<SymExpr> unify_index(const std::string& op, char c, const SymExpr& a, const SymExpr& b,
                                   const Analyzer& ana) {
  if (a == b || ana.can_prove_equal(a, b)) return a;
  if (a.is_const(1)) return b;
  if (b.is_const(1)) return a;
  if (ana.can_prove_not_equal(a, b) && ana.can_prove_not_equal(a, 1) && ana.can_prove_not_equal(b, 1))
    fail(op, ": index '", c, "' has sizes ", a, " and ", b);
  return std::nullopt;
}

StructInfo infer_einsum(const CallNode& call, const InferContext& ctx) {
  std::string equation = attrs_of(call).get_string("subscripts");
  const std::string& op = op_name(call);
  std::vector<StructInfo> fields = tuple_arg(call, 0);
  EinsumEquation eq = parse_einsum(op, equation);
  if (eq.inputs.size() != fields.size())
    fail(op, ": '", equation, "' names ", eq.inputs.size(), " operands but ", fields.size(), " are given");

  DataType dtype;
  bool all_known = true;  // every operand's dims are known
  int ellipsis_ndim = 0;  // the broadcast rank of the "..." dims; -1 unknown
  TensorInfo ellipsis_dims{DataType(), 0, Dims{}};
  std::map<char, std::optional<SymExpr>> sizes;
  for (size_t i = 0; i < fields.size(); ++i) {
    TensorInfo t = tensor_info(op, fields[i], cat("operand ", i), false);
    dtype = i == 0 ? t.dtype : common_dtype(op, dtype, t.dtype);
    const EinsumTerm& term = eq.inputs[i];
    int nletters = int(term.letters.size());
    if (!t.unknown_rank()) {
      if (term.ellipsis < 0 && t.ndim != nletters)
        fail(op, ": operand ", i, " has rank ", t.ndim, " but '", equation, "' gives it ", nletters, " indices");
      if (term.ellipsis >= 0 && t.ndim < nletters)
        fail(op, ": operand ", i, " has rank ", t.ndim, ", fewer than its ", nletters, " indices");
    }
    if (!t.shape) {
      all_known = false;
      if (term.ellipsis >= 0)
        ellipsis_ndim = t.unknown_rank() || ellipsis_ndim < 0 ? -1 : std::max(ellipsis_ndim, t.ndim - nletters);
      continue;
    }
    const Dims& d = *t.shape;
    int nell = term.ellipsis < 0 ? 0 : t.ndim - nletters;
    for (int j = 0; j < nletters; ++j) {
      char c = term.letters[j];
      const SymExpr& dim = d[j < term.ellipsis || term.ellipsis < 0 ? j : j + nell];
      auto it = sizes.find(c);
      if (it == sizes.end()) {
        sizes[c] = dim;
      } else if (it->second) {
        it->second = unify_index(op, c, *it->second, dim, ctx.ana);
      }
    }
    if (term.ellipsis >= 0) {
      TensorInfo e{DataType(), nell, Dims(d.begin() + term.ellipsis, d.begin() + term.ellipsis + nell)};
      if (ellipsis_ndim >= 0) ellipsis_ndim = std::max(ellipsis_ndim, nell);
      if (ellipsis_dims.shape) ellipsis_dims = broadcast(op, ellipsis_dims, e, ctx.ana);
    }
  }

  const EinsumTerm& outt = eq.output;
  int out_ell = outt.ellipsis < 0 ? 0 : ellipsis_ndim;
  if (outt.ellipsis < 0 && ellipsis_ndim > 0)
    fail(op, ": '", equation, "' drops the ", ellipsis_ndim, " dims of '...' from the output");
  if (out_ell < 0) return tensor_si_ndim(dtype, -1);
  int ndim = int(outt.letters.size()) + out_ell;
  if (!all_known || !ellipsis_dims.shape) return tensor_si_ndim(dtype, ndim);
  Dims out;
  for (int j = 0; j <= int(outt.letters.size()); ++j) {
    if (j == outt.ellipsis) out.insert(out.end(), ellipsis_dims.shape->begin(), ellipsis_dims.shape->end());
    if (j == int(outt.letters.size())) break;
    const std::optional<SymExpr>& s = sizes[outt.letters[j]];
    if (!s) return tensor_si_ndim(dtype, ndim);
    out.push_back(*s);
  }
  return tensor_si(dtype, std::move(out));
}

// ---- topk, cumulative ops, hardmax ----------------------------------------------------

StructInfo infer_topk(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  SymExpr k = get_sym(attrs, "k");
  check_count(op, "k", k, ctx.ana, false);
  auto result = [&](StructInfo values) {
    const auto* t = as<TensorSI>(values);
    StructInfo indices = t->shape ? tensor_si(DataType::i64(), *t->shape) : tensor_si_ndim(DataType::i64(), t->ndim);
    return tuple_si({values, indices});
  };
  if (x.unknown_rank()) return result(tensor_si_ndim(x.dtype, -1));
  if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
  int ax = normalize_axis(op, attrs.get_int("axis"), x.ndim);
  if (!x.shape) return result(tensor_si_ndim(x.dtype, x.ndim));
  Dims out = *x.shape;
  if (ctx.ana.prove_less(out[ax], k) == Tri::Yes) fail(op, ": k = ", k, " exceeds dim ", out[ax], " at axis ", ax);
  out[ax] = k;
  return result(tensor_si(x.dtype, std::move(out)));
}

// Ops whose result has the operand's struct info; `axis` must be valid.
StructInfo infer_same_along_axis(const CallNode& call, const InferContext&) {
  int64_t axis = attrs_of(call).get_int("axis");
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  if (!x.unknown_rank()) {
    if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
    normalize_axis(op, axis, x.ndim);
  }
  return si;
}

// An optional axis operand read at run time: an integer scalar (rank 0, or
// rank 1 with one element).
void check_axis_arg(const CallNode& call, size_t i, const Analyzer& ana) {
  if (call.args.size() <= i) return;
  check_scalar_arg(call, i, "the axis operand", ana);
  require_integer(op_name(call), tensor_arg(call, i, true).dtype, "the axis operand", false);
}

// cumsum / cumprod: the result has the operand's struct info. The axis is
// the attribute, or the operand 1 when given (then only the rank is checked).
StructInfo infer_cumulative(const CallNode& call, const InferContext& ctx) {
  if (call.args.size() < 2) return infer_same_along_axis(call, ctx);
  attrs_of(call);
  const std::string& op = op_name(call);
  StructInfo si = arg_sinfo(call, 0);
  TensorInfo x = tensor_info(op, si, "argument 0", false);
  if (x.ndim == 0) fail(op, ": needs a tensor of rank >= 1");
  check_axis_arg(call, 1, ctx.ana);
  return si;
}

// ---- linear algebra and signal processing ------------------------------------------

StructInfo infer_det(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  require_float(op, x.dtype, "the operand");
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  if (x.ndim < 2) fail(op, ": needs a tensor of rank >= 2, got rank ", x.ndim);
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim - 2);
  const Dims& d = *x.shape;
  if (ctx.ana.can_prove_not_equal(d[x.ndim - 1], d[x.ndim - 2]))
    fail(op, ": the matrices are ", d[x.ndim - 2], " x ", d[x.ndim - 1], ", not square");
  return tensor_si(x.dtype, Dims(d.begin(), d.end() - 2));
}

// The last dim of a signal holds (real) or (real, imaginary): 1 or 2.
void check_complex_dim(const std::string& op, const SymExpr& d, const Analyzer& ana) {
  if (ana.can_prove_not_equal(d, 1) && ana.can_prove_not_equal(d, 2))
    fail(op, ": the last dim must be 1 (real) or 2 (complex), got ", d);
}

// The length of a transformed axis of length d (see the dft doc).
SymExpr dft_axis_length(const SymExpr& d, const SymExpr& length, bool inverse, bool onesided, const Analyzer& ana) {
  SymExpr n = !is_unset(length) ? length : onesided && inverse ? 2 * (d - 1) : d;
  return ana.simplify(onesided && !inverse ? floordiv(n, 2) + 1 : n);
}

StructInfo infer_dft(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  require_float(op, x.dtype, "the signal");
  bool inverse = attrs.get_bool("inverse"), onesided = attrs.get_bool("onesided");
  bool runtime_axis = call.args.size() > 1;
  check_axis_arg(call, 1, ctx.ana);
  SymExpr length = get_sym(attrs, "length");
  if (!is_unset(length)) check_count(op, "length", length, ctx.ana, true);
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  if (x.ndim < 2) fail(op, ": needs a signal of rank >= 2, got rank ", x.ndim);
  int ax = runtime_axis ? -1 : normalize_axis(op, attrs.get_int("axis"), x.ndim);
  if (ax == x.ndim - 1) fail(op, ": the axis cannot be the last (complex) dim");
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim);
  Dims out = *x.shape;
  check_complex_dim(op, out.back(), ctx.ana);
  out.back() = onesided && inverse ? 1 : 2;
  if (!runtime_axis) {
    out[ax] = dft_axis_length(out[ax], length, inverse, onesided, ctx.ana);
    return tensor_si(x.dtype, std::move(out));
  }
  // The axis is any but the last: the dims are known when no transform
  // changes one.
  for (int j = 0; j + 1 < x.ndim; ++j)
    if (!ctx.ana.can_prove_equal(dft_axis_length(out[j], length, inverse, onesided, ctx.ana), out[j]))
      return tensor_si_ndim(x.dtype, x.ndim);
  return tensor_si(x.dtype, std::move(out));
}

StructInfo infer_stft(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  require_float(op, x.dtype, "the signal");
  SymExpr step = get_sym(attrs, "frame_step"), length = get_sym(attrs, "frame_length");
  check_count(op, "frame_step", step, ctx.ana, true);
  std::optional<SymExpr> window_len;
  if (call.args.size() > 1) {
    TensorInfo w = tensor_arg(call, 1);
    common_dtype(op, x.dtype, w.dtype);
    if (!w.unknown_rank() && w.ndim != 1) fail(op, ": the window must have rank 1, got ", w.ndim);
    if (w.shape) window_len = (*w.shape)[0];
  }
  if (is_unset(length)) {
    if (call.args.size() < 2) fail(op, ": needs a frame_length or a window");
    length = window_len ? *window_len : SymExpr();
  } else {
    check_count(op, "frame_length", length, ctx.ana, true);
    if (window_len && ctx.ana.can_prove_not_equal(*window_len, length))
      fail(op, ": the window has ", *window_len, " elements but frame_length is ", length);
  }
  if (!x.unknown_rank() && x.ndim != 3) fail(op, ": the signal must have rank 3, got ", x.ndim);
  if (!x.shape || !length.defined()) return tensor_si_ndim(x.dtype, 4);
  const Dims& d = *x.shape;
  check_complex_dim(op, d[2], ctx.ana);
  SymExpr frames = ctx.ana.simplify(floordiv(d[1] - length, step) + 1);
  if (ctx.ana.prove_less(frames, 1) == Tri::Yes)
    fail(op, ": frame_length ", length, " exceeds the signal length ", d[1]);
  SymExpr bins = ctx.ana.simplify(attrs.get_bool("onesided") ? floordiv(length, 2) + 1 : length);
  return tensor_si(x.dtype, {d[0], frames, bins, SymExpr(2)});
}

StructInfo infer_window(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  std::string kind = attrs.get_string("kind");
  if (kind != "hann" && kind != "hamming" && kind != "blackman")
    fail(op, ": unknown window kind '", kind, "' (hann, hamming or blackman)");
  DataType dtype = attrs.get_dtype("dtype");
  SymExpr size = get_sym(attrs, "size");
  check_count(op, "size", size, ctx.ana, false);
  return tensor_si(dtype, {size});
}

StructInfo infer_mel_weight_matrix(const CallNode& call, const InferContext& ctx) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  const char* names[] = {"sample_rate", "lower_edge_hertz", "upper_edge_hertz"};
  for (size_t i = 0; i < 3; ++i) check_scalar_arg(call, i, names[i], ctx.ana);
  SymExpr bins = get_sym(attrs, "num_mel_bins"), length = get_sym(attrs, "dft_length");
  check_count(op, "num_mel_bins", bins, ctx.ana, true);
  check_count(op, "dft_length", length, ctx.ana, true);
  return tensor_si(attrs.get_dtype("dtype"), {ctx.ana.simplify(floordiv(length, 2) + 1), bins});
}

StructInfo infer_nms(const CallNode& call, const InferContext& ctx) {
  int64_t center = attrs_of(call).get_int("center_point_box");
  const std::string& op = op_name(call);
  if (center != 0 && center != 1) fail(op, ": center_point_box must be 0 or 1, got ", center);
  TensorInfo boxes = tensor_arg(call, 0), scores = tensor_arg(call, 1);
  require_float(op, boxes.dtype, "the boxes");
  common_dtype(op, boxes.dtype, scores.dtype);
  if (!boxes.unknown_rank() && boxes.ndim != 3) fail(op, ": boxes must have rank 3, got ", boxes.ndim);
  if (!scores.unknown_rank() && scores.ndim != 3) fail(op, ": scores must have rank 3, got ", scores.ndim);
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < call.args.size(); ++i) check_scalar_arg(call, i, names[i - 2], ctx.ana);
  if (boxes.shape) {
    const Dims& b = *boxes.shape;
    if (ctx.ana.can_prove_not_equal(b[2], 4)) fail(op, ": boxes must have 4 coordinates, got ", b[2]);
    if (scores.shape) {
      const Dims& s = *scores.shape;
      if (ctx.ana.can_prove_not_equal(b[0], s[0])) fail(op, ": boxes have ", b[0], " batches, scores ", s[0]);
      if (ctx.ana.can_prove_not_equal(b[1], s[2])) fail(op, ": boxes have ", b[1], " boxes, scores ", s[2]);
    }
  }
  return tensor_si_ndim(DataType::i64(), 2);
}

}  // namespace

void register_sequence_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("einsum")
      .doc(
          "einsum((x0, x1, ...), subscripts=s): Einstein summation as numpy.einsum: each operand's dims are "
          "named by the letters of its term of s ('...' stands for broadcast leading dims); the result has "
          "the dims named after '->' (without '->': the '...' dims, then the letters used once, in ASCII "
          "order) and sums the product of the operands over every other letter. A letter repeated within "
          "a term takes the diagonal.")
      .args(1)
      .attr("subscripts", T::String)
      .infer(infer_einsum);
  reg.add("topk")
      .doc(
          "topk(x, k=K, axis=a, largest=b, sorted=s): a tuple (values, indices i64) of the K largest (or, "
          "with largest=false, smallest) elements along axis a, in descending (ascending) order when "
          "sorted; ties keep the lower index first.")
      .args(1)
      .attr("k", T::Sym)
      .attr("axis", T::Int, int64_t(-1))
      .attr("largest", T::Bool, true)
      .attr("sorted", T::Bool, true)
      .infer(infer_topk);
  for (const char* name : {"cumsum", "cumprod"}) {
    bool sum = std::string(name) == "cumsum";
    reg.add(name)
        .doc(cat(name, "(x, [axis_value], axis=a, exclusive=e, reverse=r): the running ", sum ? "sum" : "product",
                 " along axis a: element i combines elements 0..i (exclusive: 0..i-1, the first being ",
                 sum ? "0" : "1",
                 "); reverse runs from the end. Same shape and dtype as x. When the integer scalar "
                 "axis_value is given, the axis is its value, read at run time (in [-rank, rank)), and the "
                 "attribute a is unused."))
        .args(1, 2)
        .attr("axis", T::Int, int64_t(0))
        .attr("exclusive", T::Bool, false)
        .attr("reverse", T::Bool, false)
        .infer(infer_cumulative);
  }
  reg.add("hardmax")
      .doc(
          "hardmax(x, axis=a): 1 where x holds the first largest element along axis a, else 0; same shape "
          "and dtype as x.")
      .args(1)
      .attr("axis", T::Int, int64_t(-1))
      .infer(infer_same_along_axis);
  reg.add("det")
      .doc("det(x): the determinant of each square matrix in x's last two dims; the result has x's batch dims.")
      .args(1)
      .infer(infer_det);
  reg.add("dft")
      .doc(
          "dft(x, [axis_value], axis=a, inverse=i, onesided=o, length=n): the discrete Fourier transform "
          "along axis a (or, when the integer scalar axis_value is given, along its value read at run time, "
          "the attribute being unused; never the last dim) of "
          "a signal whose last dim is 1 (real) or 2 (real, imaginary). The signal is cut or zero-padded to "
          "n (-1: the dim, or 2*(dim-1) for the inverse one-sided transform). The result is complex (last "
          "dim 2) with n elements at a, or n/2+1 for the one-sided forward transform; the inverse one-sided "
          "transform reads n/2+1 bins and returns a real signal (last dim 1). The inverse divides by n.")
      .args(1, 2)
      .attr("axis", T::Int, int64_t(-2))
      .attr("inverse", T::Bool, false)
      .attr("onesided", T::Bool, false)
      .attr("length", T::Sym, SymExpr(-1))
      .infer(infer_dft);
  reg.add("stft")
      .doc(
          "stft(signal, [window], frame_step=s, frame_length=n, onesided=o): the short-time Fourier "
          "transform of signal [batch, length, 1 or 2]: frames of n samples every s samples, each "
          "multiplied by the window (rank 1, n elements) and transformed; the result is [batch, "
          "(length-n)/s+1, n (onesided: n/2+1), 2]. frame_length -1: the window's length.")
      .args(1, 2)
      .attr("frame_step", T::Sym)
      .attr("frame_length", T::Sym, SymExpr(-1))
      .attr("onesided", T::Bool, true)
      .infer(infer_stft);
  reg.add("window")
      .doc(
          "window(kind=k, size=N, periodic=p, dtype=D): the N-point hann, hamming or blackman window "
          "(periodic: the first N of N+1 symmetric points; else symmetric).")
      .args(0)
      .attr("kind", T::String)
      .attr("size", T::Sym)
      .attr("periodic", T::Bool, true)
      .attr("dtype", T::DType, DataType::f32())
      .infer(infer_window);
  reg.add("mel_weight_matrix")
      .doc(
          "mel_weight_matrix(sample_rate, lower_edge_hertz, upper_edge_hertz, num_mel_bins=m, "
          "dft_length=n, dtype=D): the [n/2+1, m] matrix of triangular mel filters (ONNX "
          "MelWeightMatrix) mapping one-sided spectrum bins to mel bands; the arguments are scalars.")
      .args(3)
      .attr("num_mel_bins", T::Sym)
      .attr("dft_length", T::Sym)
      .attr("dtype", T::DType, DataType::f32())
      .infer(infer_mel_weight_matrix);
  reg.add("non_max_suppression")
      .doc(
          "non_max_suppression(boxes [B, S, 4], scores [B, C, S], [max_per_class], [iou_threshold], "
          "[score_threshold], center_point_box=c): per batch and class, greedily keeps the highest-scoring "
          "boxes above score_threshold whose IoU with every kept box is at most iou_threshold, at most "
          "max_per_class of them (absent or 0: none); returns the kept [batch, class, box] triples as an "
          "[n, 3] i64 tensor whose n depends on the data. Boxes are corners (y1, x1, y2, x2) or, with c=1, "
          "(x center, y center, width, height).")
      .args(2, 5)
      .attr("center_point_box", T::Int, int64_t(0))
      .infer(infer_nms);
}

}  // namespace relax
