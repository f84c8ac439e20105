// ONNX converters: the recurrent layers RNN, GRU and LSTM, each one graph op
// (rnn, gru, lstm in ir/ops/quant.cc) whose attributes are spelled out in
// full: the activation list has every direction's functions, and
// activation_alpha / activation_beta one value per listed function.
//
// ONNX's activation_alpha / activation_beta lists hold values only for the
// functions that take them, consumed in order (as ONNX Runtime reads them);
// functions without a given value get ONNX's defaults.
#include <algorithm>
#include <cctype>

#include "frontends/onnx/context.h"

namespace relax::onnx_fe {
namespace {

struct Activation {
  const char* name;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // defaults
};
const Activation kActivations[] = {
    {"Relu", false, false, 0, 0},         {"Tanh", false, false, 0, 0},
    {"Sigmoid", false, false, 0, 0},      {"Softsign", false, false, 0, 0},
    {"Softplus", false, false, 0, 0},     {"Affine", true, true, 1.0, 0.0},
    {"LeakyRelu", true, false, 0.01, 0},  {"ThresholdedRelu", true, false, 1.0, 0},
    {"ScaledTanh", true, true, 1.0, 1.0}, {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1.0, 0},
};

const Activation* find_activation(const std::string& name) {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const Activation& a : kActivations)
    if (lower(a.name) == lower(name)) return &a;
  return nullptr;
}

struct Layer {
  const char* op;    // the graph op
  int gates;         // G: blocks of hidden_size rows in W
  int max_inputs;    // X, W, R, B, sequence_lens, initial_h[, initial_c, P]
  std::vector<const char*> default_activations;  // per direction
};
const Layer kRnn{"rnn", 1, 6, {"Tanh"}};
const Layer kGru{"gru", 3, 6, {"Sigmoid", "Tanh"}};
const Layer kLstm{"lstm", 4, 8, {"Sigmoid", "Tanh", "Tanh"}};

// activations, activation_alpha and activation_beta, spelled out in full.
void set_activations(Context& ctx, const Layer& layer, int dirs, Attrs& attrs) {
  std::vector<std::string> names = ctx.attr_strings("activations");
  size_t per_dir = layer.default_activations.size();
  if (names.empty()) names.assign(layer.default_activations.begin(), layer.default_activations.end());
  if (dirs == 2 && names.size() == per_dir) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * size_t(dirs))
    ctx.fail(names.size(), " activations given, expected ", per_dir * size_t(dirs));
  std::vector<float> alphas = ctx.attr_floats("activation_alpha"), betas = ctx.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<double> alpha, beta;
  for (size_t k = 0; k < names.size(); ++k) {
    std::string& n = names[k];
    // An empty name (some exporters write activations=["", ""]) is the
    // default activation of that position.
    if (n.empty()) n = layer.default_activations[k % per_dir];
    const Activation* a = find_activation(n);
    if (!a) ctx.unsupported(cat("activation '", n, "'"));
    n = a->name;
    alpha.push_back(a->uses_alpha && next_alpha < alphas.size() ? alphas[next_alpha++] : a->alpha);
    beta.push_back(a->uses_beta && next_beta < betas.size() ? betas[next_beta++] : a->beta);
  }
  attrs.set("activations", names);
  attrs.set("activation_alpha", alpha);
  attrs.set("activation_beta", beta);
}

// What the defaults of omitted inputs are built from.
struct Sizes {
  DataType dtype;
  SymExpr seq, batch, hidden;
  int dirs;
  bool batch_first;
};

SymExpr dim(Context& ctx, size_t input, int axis) {
  auto s = ctx.shape(input);
  if (!s || int(s->size()) <= axis) ctx.unsupported("omitted inputs with operands of unknown shape");
  return (*s)[size_t(axis)];
}

// The value an omitted input `i` stands for: zeros, or the full length for sequence_lens.
Expr default_input(Context& ctx, const Layer& layer, const Sizes& s, size_t i) {
  static const char* kNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  auto zeros = [&](std::vector<SymExpr> dims) {
    return ctx.emit(make_op_call("zeros", {make_shape(std::move(dims))}, {{"dtype", s.dtype}}), kNames[i]);
  };
  SymExpr dirs(s.dirs);
  switch (i) {
    case 3: return zeros({dirs, 2 * layer.gates * s.hidden});
    case 4: {
      Expr full = make_op_call("full", {make_shape({s.batch}), make_prim_int(s.seq, DataType::i32())},
                               {{"dtype", DataType::i32()}});
      return ctx.emit(full, kNames[i]);
    }
    case 5:
    case 6:
      return zeros(s.batch_first ? std::vector<SymExpr>{s.batch, dirs, s.hidden}
                                 : std::vector<SymExpr>{dirs, s.batch, s.hidden});
    default: return zeros({dirs, 3 * s.hidden});
  }
}

std::vector<Value> convert_layer(Context& ctx, const Layer& layer) {
  std::string direction = ctx.attr_string("direction", "forward");
  int dirs = direction == "bidirectional" ? 2 : 1;
  int64_t layout = ctx.attr_int("layout", 0);
  int64_t hidden = ctx.attr_int("hidden_size", 0);
  // In the declared order of the op's attributes.
  Attrs attrs{{"hidden_size", hidden}, {"direction", direction}};
  set_activations(ctx, layer, dirs, attrs);
  if (ctx.has_attr("clip")) attrs.set("clip", double(ctx.attr_float("clip")));
  attrs.set("layout", layout);
  if (layer.gates == 3) attrs.set("linear_before_reset", ctx.attr_int("linear_before_reset", 0) != 0);
  if (layer.gates == 4) attrs.set("input_forget", ctx.attr_int("input_forget", 0) != 0);

  // Present inputs as they are; omitted ones before the last present one as their defaults.
  size_t last = 2;
  for (size_t i = 3; i < size_t(layer.max_inputs); ++i)
    if (ctx.has_input(i)) last = i;
  std::vector<Expr> args{ctx.expr(0), ctx.expr(1), ctx.expr(2)};
  if (last > 2) {
    bool batch_first = layout == 1;
    Sizes s{ctx.dtype(0), SymExpr(), SymExpr(), SymExpr(), dirs, batch_first};
    for (size_t i = 3; i <= last; ++i) {
      if (ctx.has_input(i)) {
        args.push_back(ctx.expr(i));
        continue;
      }
      if (!s.hidden.defined()) {
        s.seq = dim(ctx, 0, batch_first ? 1 : 0);
        s.batch = dim(ctx, 0, batch_first ? 0 : 1);
        s.hidden = hidden > 0 ? SymExpr(hidden) : dim(ctx, 2, 2);
      }
      args.push_back(default_input(ctx, layer, s, i));
    }
  }
  Expr r = ctx.emit(make_op_call(layer.op, args, attrs), ctx.op_type());
  std::vector<Value> out;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    if (!ctx.output_used(k)) {
      out.emplace_back();
      continue;
    }
    out.push_back(expr_value(ctx.emit(make_tuple_get_item(r, int(k)), ctx.output_name(int(k)))));
  }
  return out;
}

}  // namespace

void register_rnn_converters(ConverterRegistry& r) {
  r.add("RNN", 7, [](Context& ctx) { return convert_layer(ctx, kRnn); });
  r.add("GRU", 7, [](Context& ctx) { return convert_layer(ctx, kGru); });
  r.add("LSTM", 7, [](Context& ctx) { return convert_layer(ctx, kLstm); });
}

}  // namespace relax::onnx_fe
