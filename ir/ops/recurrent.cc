// The recurrent layers rnn, gru and lstm: one op each, a whole sequence,
// every direction.
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

struct CellKind {
  const char* name;
  int gates;        // blocks of hidden_size rows in W and R
  int activations;  // activation functions per direction
  int max_args;     // X, W, R, B, sequence_lens, initial_h[, initial_c, P]
  bool has_cell;    // lstm: a cell state, Y_c
};
const CellKind kCells[] = {
    {"rnn", 1, 1, 6, false},
    {"gru", 3, 2, 6, false},
    {"lstm", 4, 3, 8, true},
};

// What the rule learns about the sizes, each undefined while unknown.
struct RnnDims {
  SymExpr seq, batch, input, hidden;
  int64_t dirs = 1;
  bool batch_first = false;
};

// Checks the rank and the known dims of an operand against `want` (undefined
// entries are not checked) and agrees its dtype with `dtype`.
void check_operand(const std::string& op, const CallNode& call, size_t i, const char* what,
                   const std::vector<SymExpr>& want, DataType& dtype, bool float_operand, const Analyzer& ana) {
  TensorInfo t = tensor_arg(call, i);
  if (!t.unknown_rank() && t.ndim != int(want.size()))
    fail(op, ": ", what, " must have rank ", want.size(), ", got ", t.ndim);
  if (float_operand) {
    require_float(op, t.dtype, what);
    if (dtype.is_void()) dtype = t.dtype;
    common_dtype(op, dtype, t.dtype);
  } else {
    require_integer(op, t.dtype, what, false);
  }
  if (!t.shape) return;
  for (size_t d = 0; d < want.size(); ++d)
    check_dims_equal(op, (*t.shape)[d], want[d], cat("dim ", d, " of ", what), ana);
}

// The first known value of the two.
SymExpr either(const SymExpr& a, const SymExpr& b) { return a.defined() ? a : b; }

RnnDims rnn_dims(const std::string& op, const CallNode& call, const Attrs& attrs, const CellKind& cell) {
  RnnDims d;
  std::string direction = attrs.get_string("direction");
  if (direction == "bidirectional") {
    d.dirs = 2;
  } else if (direction != "forward" && direction != "reverse") {
    fail(op, ": direction must be forward, reverse or bidirectional, got '", direction, "'");
  }
  int64_t layout = attrs.get_int("layout");
  if (layout != 0 && layout != 1) fail(op, ": layout must be 0 or 1, got ", layout);
  d.batch_first = layout == 1;
  int64_t hidden = attrs.get_int("hidden_size");
  if (hidden < 0) fail(op, ": hidden_size must be positive, got ", hidden);
  if (hidden > 0) d.hidden = hidden;

  const AttrValue* acts = attrs.find("activations");
  size_t n_act = acts ? std::get<std::vector<std::string>>(*acts).size() : 0;
  size_t want_act = size_t(d.dirs * cell.activations);
  if (n_act != 0 && n_act != want_act)
    fail(op, ": ", n_act, " activations given, expected ", want_act, " (", cell.activations, " per direction)");
  for (const char* list : {"activation_alpha", "activation_beta"}) {
    size_t n = attrs.get_floats(list).size();
    if (n != 0 && n != (n_act ? n_act : want_act))
      fail(op, ": ", list, " has ", n, " values, one per activation expected");
  }
  if (attrs.get_float("clip") < 0) fail(op, ": clip must not be negative");

  TensorInfo x = tensor_arg(call, 0), r = tensor_arg(call, 2), w = tensor_arg(call, 1);
  if (x.shape && x.ndim == 3) {
    d.seq = (*x.shape)[d.batch_first ? 1 : 0];
    d.batch = (*x.shape)[d.batch_first ? 0 : 1];
    d.input = (*x.shape)[2];
  }
  if (r.shape && r.ndim == 3) d.hidden = either(d.hidden, (*r.shape)[2]);
  if (!d.input.defined() && w.shape && w.ndim == 3) d.input = (*w.shape)[2];
  return d;
}

// (dirs, batch, hidden) or (batch, dirs, hidden) with layout 1.
std::vector<SymExpr> state_dims(const RnnDims& d) {
  if (d.batch_first) return {d.batch, SymExpr(d.dirs), d.hidden};
  return {SymExpr(d.dirs), d.batch, d.hidden};
}

SymExpr times(int64_t k, const SymExpr& e) { return e.defined() ? k * e : SymExpr(); }

StructInfo dims_or_rank(DataType dtype, const std::vector<SymExpr>& dims) {
  for (const SymExpr& e : dims)
    if (!e.defined()) return tensor_si_ndim(dtype, int(dims.size()));
  return tensor_si(dtype, dims);
}

StructInfo infer_recurrent(const CallNode& call, const InferContext& ctx, const CellKind& cell) {
  Attrs attrs = attrs_of(call);
  const std::string& op = op_name(call);
  RnnDims d = rnn_dims(op, call, attrs, cell);
  const Analyzer& ana = ctx.ana;
  SymExpr gh = times(cell.gates, d.hidden);
  SymExpr dirs(d.dirs);
  DataType dtype;
  check_operand(op, call, 0, "X", {SymExpr(), SymExpr(), SymExpr()}, dtype, true, ana);
  check_operand(op, call, 1, "W", {dirs, gh, d.input}, dtype, true, ana);
  check_operand(op, call, 2, "R", {dirs, gh, d.hidden}, dtype, true, ana);
  size_t n = call.args.size();
  if (n > 3) check_operand(op, call, 3, "B", {dirs, times(2, gh)}, dtype, true, ana);
  if (n > 4) check_operand(op, call, 4, "sequence_lens", {d.batch}, dtype, false, ana);
  if (n > 5) check_operand(op, call, 5, "initial_h", state_dims(d), dtype, true, ana);
  if (n > 6) check_operand(op, call, 6, "initial_c", state_dims(d), dtype, true, ana);
  if (n > 7) check_operand(op, call, 7, "P", {dirs, times(3, d.hidden)}, dtype, true, ana);

  std::vector<SymExpr> y = d.batch_first ? std::vector<SymExpr>{d.batch, d.seq, dirs, d.hidden}
                                         : std::vector<SymExpr>{d.seq, dirs, d.batch, d.hidden};
  std::vector<StructInfo> out{dims_or_rank(dtype, y), dims_or_rank(dtype, state_dims(d))};
  if (cell.has_cell) out.push_back(out.back());
  return tuple_si(std::move(out));
}

// What the three layers share, after each one's own first sentences.
const char* kRecurrentDoc =
    " X is (seq, batch, input), or (batch, seq, input) with layout 1; W is (dirs, G*hidden, input), R (dirs, "
    "G*hidden, hidden), B (dirs, 2*G*hidden) (W's biases then R's), sequence_lens (batch) an integer tensor, "
    "the initial states (dirs, batch, hidden), or (batch, dirs, hidden) with layout 1. dirs is 2 with "
    "direction=bidirectional (the second direction runs in reverse), else 1; hidden is hidden_size, or R's "
    "last dim when 0. Omitted trailing arguments are zeros, and the full sequence for sequence_lens. "
    "activations lists the functions per direction by their ONNX names (Sigmoid, Tanh, Relu, Affine, "
    "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus; empty: the defaults), with "
    "activation_alpha / activation_beta one value per listed function (empty: the defaults); clip > 0 clips "
    "gate pre-activations to [-clip, clip]. Steps past an entry's sequence length leave its state unchanged "
    "and write zeros to Y. Y is (seq, dirs, batch, hidden) (layout 1: (batch, seq, dirs, hidden)) and holds "
    "every step's hidden state; the final states are shaped like the initial ones.";

const char* recurrent_head(const CellKind& c) {
  if (c.has_cell)
    return "lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P): the ONNX LSTM layer, G = 4 gates (i, o, f, "
           "c) with activations (f, g, h) per direction (default Sigmoid, Tanh, Tanh) and peephole weights P "
           "(dirs, 3*hidden) for i, o, f; input_forget couples the input and forget gates. The result is the "
           "tuple (Y, Y_h, Y_c): every hidden state, the last hidden state and the last cell state.";
  if (c.gates == 3)
    return "gru(X, W, R, B, sequence_lens, initial_h): the ONNX GRU layer, G = 3 gates (z, r, h) with "
           "activations (f, g) per direction (default Sigmoid, Tanh); linear_before_reset applies the reset "
           "gate after R's product. The result is the tuple (Y, Y_h): every hidden state and the last one.";
  return "rnn(X, W, R, B, sequence_lens, initial_h): the ONNX RNN layer, H_t = f(X_t W^T + H_{t-1} R^T + "
         "biases), G = 1, one activation f per direction (default Tanh). The result is the tuple (Y, Y_h): "
         "every hidden state and the last one.";
}

}  // namespace

void register_recurrent_ops(OpRegistry& reg) {
  using T = AttrType;
  for (const CellKind& c : kCells) {
    auto b = reg.add(c.name);
    b.doc(cat(recurrent_head(c), kRecurrentDoc))
        .args(3, c.max_args)
        .attr("hidden_size", T::Int, int64_t(0))
        .attr("direction", T::String, std::string("forward"))
        .attr("activations", T::Strings, std::vector<std::string>{})
        .attr("activation_alpha", T::Floats, std::vector<double>{})
        .attr("activation_beta", T::Floats, std::vector<double>{})
        .attr("clip", T::Float, 0.0)
        .attr("layout", T::Int, int64_t(0));
    if (c.gates == 3) b.attr("linear_before_reset", T::Bool, false);
    if (c.has_cell) b.attr("input_forget", T::Bool, false);
    const CellKind* cell = &c;
    b.infer([cell](const CallNode& call, const InferContext& ctx) { return infer_recurrent(call, ctx, *cell); });
  }
}

}  // namespace relax
