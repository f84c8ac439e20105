// Signal processing: dft, stft, window, mel_weight_matrix.
//
// Integers that fix output dims (a window's size, dft and stft lengths) are
// Sym attributes: a frontend that only knows one at run time binds it to a
// fresh variable first (match_cast of tensor_to_shape). dft's axis known
// only at run time is an optional scalar operand instead: the result keeps
// the dims no choice of axis can change.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

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

}  // namespace

void register_signal_ops(OpRegistry& reg) {
  using T = AttrType;
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
}

}  // namespace relax
