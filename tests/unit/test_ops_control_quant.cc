// The struct-info rules of the control-flow ops (loop, scan), the
// quantization ops (quantize, dequantize) and the recurrent layers (rnn,
// gru, lstm).
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "ir/error.h"
#include "ir/normalize.h"
#include "ir/op.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType f16 = DataType::f16();
const DataType i64 = DataType::i64();
const DataType u8 = DataType::u(8);
const DataType i8 = DataType::i(8);
const DataType boolean = DataType::boolean();

std::string dims_str(const std::vector<SymExpr>& ds) {
  std::string s = "(";
  for (size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + to_string(ds[i]);
  return s + (ds.size() == 1 ? ",)" : ")");
}

// Tensor[(n, 4), f32], Tensor[ndim=2, f32], Tuple[...].
std::string show(const StructInfo& si) {
  if (const auto* t = as<TensorSI>(si)) {
    std::string s = t->shape ? dims_str(*t->shape) : "ndim=" + std::to_string(t->ndim);
    return "Tensor[" + s + ", " + t->dtype.str() + "]";
  }
  if (const auto* t = as<TupleSI>(si)) {
    std::string s = "Tuple[";
    for (size_t i = 0; i < t->fields.size(); ++i) s += (i ? ", " : "") + show(t->fields[i]);
    return s + "]";
  }
  return as<ObjectSI>(si) ? "Object" : "?";
}

Expr var(StructInfo si) { return make_var("x", std::move(si)); }
Expr tensor(std::vector<SymExpr> dims, DataType dtype = f32) { return var(tensor_si(dtype, std::move(dims))); }

// A function with parameters `params` returning the tuple `ret` (its body
// returns the parameters; only the signature matters to the rules).
Expr function(const std::vector<StructInfo>& params, StructInfo ret) {
  std::vector<Var> ps;
  for (const StructInfo& p : params) ps.push_back(make_var("p", p));
  return make_function(ps, make_seq({}, ps.empty() ? make_tuple({}) : Expr(ps[0])), std::move(ret));
}

StructInfo infer(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  return c->op()->infer(*c, InferContext{ana, nullptr});
}

std::string infer_str(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  return show(infer(op, std::move(args), std::move(attrs)));
}

std::string infer_error(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  try {
    infer(op, std::move(args), std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

StructInfo scalar(DataType dtype) { return tensor_si(dtype, {}); }

}  // namespace

TEST_CASE("loop: final carried values and stacked per-iteration outputs") {
  SymExpr n = SymExpr::var("n");
  StructInfo carried = tensor_si(f32, {n, 4});
  Expr body = function({scalar(i64), scalar(boolean), carried},
                       tuple_si({scalar(boolean), carried, tensor_si(f32, {4})}));
  Expr init = make_tuple({tensor({n, 4})});
  CHECK(infer_str("loop", {body, tensor({}, i64), tensor({}, boolean), init}) ==
        "Tuple[Tensor[(n, 4), f32], Tensor[ndim=2, f32]]");
  // Prim scalars are accepted for the trip count and the condition.
  CHECK(infer_str("loop", {body, make_prim_int(10), make_prim_bool(true), init}) ==
        "Tuple[Tensor[(n, 4), f32], Tensor[ndim=2, f32]]");
}

TEST_CASE("loop: a carried value whose shape changes unifies to the coarser form") {
  StructInfo param = tensor_si_ndim(f32, 1);
  Expr body = function({scalar(i64), scalar(boolean), param}, tuple_si({scalar(boolean), param}));
  CHECK(infer_str("loop", {body, tensor({}, i64), tensor({}, boolean), make_tuple({tensor({1})})}) ==
        "Tuple[Tensor[ndim=1, f32]]");
}

TEST_CASE("loop and scan: the body's own symbolic variables are bound to the operands' dims") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), t = SymExpr::var("t");
  StructInfo carried = tensor_si(f32, {m, 4});
  Expr body = function({scalar(i64), scalar(boolean), carried}, tuple_si({scalar(boolean), carried, carried}));
  CHECK(infer_str("loop", {body, tensor({}, i64), tensor({}, boolean), make_tuple({tensor({n, 4})})}) ==
        "Tuple[Tensor[(n, 4), f32], Tensor[ndim=3, f32]]");
  // A variable no operand binds becomes unknown.
  SymExpr k = SymExpr::var("k");
  Expr free = function({scalar(i64), scalar(boolean), carried}, tuple_si({scalar(boolean), carried, tensor_si(f32, {k})}));
  CHECK(infer_str("loop", {free, tensor({}, i64), tensor({}, boolean), make_tuple({tensor({n, 4})})}) ==
        "Tuple[Tensor[(n, 4), f32], Tensor[ndim=2, f32]]");
  Expr scan_body = function({tensor_si(f32, {m}), tensor_si(f32, {m})}, tuple_si({tensor_si(f32, {m}), tensor_si(f32, {m})}));
  CHECK(infer_str("scan", {scan_body, make_tuple({tensor({n})}), make_tuple({tensor({t, n})})}) ==
        "Tuple[Tensor[(n,), f32], Tensor[(t, n), f32]]");
}

TEST_CASE("loop: errors") {
  StructInfo c = tensor_si(f32, {3});
  Expr body = function({scalar(i64), scalar(boolean), c}, tuple_si({scalar(boolean), c}));
  Expr init = make_tuple({tensor({3})});
  CHECK(contains(infer_error("loop", {body, tensor({}, i64), tensor({}, f32), init}), "loop: cond must have dtype bool"));
  CHECK(contains(infer_error("loop", {body, tensor({2}, i64), tensor({}, boolean), init}), "must be a scalar"));
  CHECK(contains(infer_error("loop", {body, tensor({}, i64), tensor({}, boolean), make_tuple({})}),
                 "the body takes 3 parameters, expected 2"));
  CHECK(contains(infer_error("loop", {body, tensor({}, i64), tensor({}, boolean), make_tuple({tensor({5})})}),
                 "cannot hold it"));
  Expr shrinking = function({scalar(i64), scalar(boolean), c}, tuple_si({scalar(boolean), tensor_si(f32, {2})}));
  CHECK(contains(infer_error("loop", {shrinking, tensor({}, i64), tensor({}, boolean), init}), "cannot hold it"));
  CHECK(contains(infer_error("loop", {tensor({3}), tensor({}, i64), tensor({}, boolean), init}),
                 "the body) must be a function"));
}

TEST_CASE("scan: states and outputs stacked along the scan length") {
  SymExpr t = SymExpr::var("t");
  StructInfo state = tensor_si(f32, {2});
  Expr body = function({state, tensor_si(f32, {2})}, tuple_si({state, state}));
  Expr init = make_tuple({tensor({2})});
  CHECK(infer_str("scan", {body, init, make_tuple({tensor({t, 2})})}) ==
        "Tuple[Tensor[(2,), f32], Tensor[(t, 2), f32]]");
  // Scan axis 1 of the input, stacked as the last axis of the output.
  Attrs axes{{"scan_input_axes", std::vector<int64_t>{1}}, {"scan_output_axes", std::vector<int64_t>{-1}}};
  CHECK(infer_str("scan", {body, init, make_tuple({tensor({2, t})})}, axes) ==
        "Tuple[Tensor[(2,), f32], Tensor[(2, t), f32]]");
  // Scan-8: a leading batch axis on every state, input and result.
  Attrs batched{{"batched", true}};
  CHECK(infer_str("scan", {body, make_tuple({tensor({1, 2})}), make_tuple({tensor({1, 3, 2})})}, batched) ==
        "Tuple[Tensor[(1, 2), f32], Tensor[(1, 3, 2), f32]]");
  // A single result that is not a tuple: one state, no scan outputs.
  Expr single = function({state, tensor_si(f32, {2})}, state);
  CHECK(infer_str("scan", {single, init, make_tuple({tensor({t, 2})})}) == "Tuple[Tensor[(2,), f32]]");
}

TEST_CASE("scan: errors") {
  StructInfo state = tensor_si(f32, {2});
  Expr body = function({state, tensor_si(f32, {2}), tensor_si(f32, {2})}, tuple_si({state}));
  Expr init = make_tuple({tensor({2})});
  CHECK(contains(infer_error("scan", {body, init, make_tuple({tensor({3, 2}), tensor({4, 2})})}),
                 "the scan length is 4 here but 3 before"));
  CHECK(contains(infer_error("scan", {body, init, make_tuple({tensor({3, 2}), tensor({3, 2})})},
                             {{"scan_input_directions", std::vector<int64_t>{0, 2}}}),
                 "must be 0 (forward) or 1 (reverse)"));
  CHECK(contains(infer_error("scan", {body, init, make_tuple({tensor({3, 5}), tensor({3, 2})})}), "cannot hold it"));
  CHECK(contains(infer_error("scan", {body, init, make_tuple({tensor({3, 2})})}), "the body takes 3 parameters"));
}

TEST_CASE("quantize: granularities and the result dtype") {
  SymExpr n = SymExpr::var("n");
  Expr x = tensor({n, 3, 4});
  CHECK(infer_str("quantize", {x, tensor({})}) == "Tensor[(n, 3, 4), u8]");
  CHECK(infer_str("quantize", {x, make_prim_float(0.5), tensor({1}, i8)}, {{"out_dtype", i8}}) ==
        "Tensor[(n, 3, 4), i8]");
  CHECK(infer_str("quantize", {x, tensor({3}), tensor({3}, u8)}) == "Tensor[(n, 3, 4), u8]");  // axis 1
  CHECK(infer_str("quantize", {x, tensor({4})}, {{"axis", int64_t(-1)}, {"out_dtype", DataType::i(4)}}) ==
        "Tensor[(n, 3, 4), i4]");
  Attrs blocked{{"axis", int64_t(2)}, {"block_size", int64_t(3)}};
  CHECK(infer_str("quantize", {x, tensor({n, 3, 2}), tensor({n, 3, 2}, u8)}, blocked) == "Tensor[(n, 3, 4), u8]");
  CHECK(infer_str("quantize", {tensor({5}), tensor({})}, {{"out_dtype", DataType(TypeCode::Float8E4M3FN, 8)}}) ==
        "Tensor[(5,), f8e4m3fn]");
}

TEST_CASE("quantize and dequantize: errors") {
  Expr x = tensor({2, 3, 4});
  CHECK(contains(infer_error("quantize", {x, tensor({4})}), "the length of the scale is 4, expected 3"));
  CHECK(contains(infer_error("quantize", {x, tensor({3}), tensor({3}, i8)}), "dtypes i8 and u8 differ"));
  CHECK(contains(infer_error("quantize", {x, tensor({2, 3})}), "must be a scalar or a vector"));
  CHECK(contains(infer_error("quantize", {x, tensor({2, 3, 1})}, {{"axis", int64_t(2)}, {"block_size", int64_t(2)}}),
                 "dim 2 of the scale is 1, expected 2"));
  CHECK(contains(infer_error("quantize", {x, tensor({})}, {{"out_dtype", f32}}), "not a quantized dtype"));
  CHECK(contains(infer_error("dequantize", {tensor({4}, u8), tensor({}), tensor({}, i8)}), "dtypes u8 and i8 differ"));
  CHECK(contains(infer_error("dequantize", {tensor({4}), tensor({})}), "not a quantized dtype"));
}

TEST_CASE("dequantize: the result takes the scale's dtype unless out_dtype says otherwise") {
  Expr x = tensor({1, 3, 2}, u8);
  CHECK(infer_str("dequantize", {x, tensor({}), tensor({}, u8)}) == "Tensor[(1, 3, 2), f32]");
  CHECK(infer_str("dequantize", {x, tensor({3}, f16)}) == "Tensor[(1, 3, 2), f16]");
  CHECK(infer_str("dequantize", {x, tensor({3})}, {{"out_dtype", f16}}) == "Tensor[(1, 3, 2), f16]");
  CHECK(infer_str("dequantize", {tensor({5}, DataType(TypeCode::Float8E5M2, 8)), tensor({})}) == "Tensor[(5,), f32]");
}

TEST_CASE("rnn, gru, lstm: output shapes from X and R") {
  SymExpr s = SymExpr::var("s"), b = SymExpr::var("b");
  Expr x = tensor({s, b, 2});
  CHECK(infer_str("rnn", {x, tensor({1, 4, 2}), tensor({1, 4, 4})}) ==
        "Tuple[Tensor[(s, 1, b, 4), f32], Tensor[(1, b, 4), f32]]");
  CHECK(infer_str("gru", {x, tensor({2, 15, 2}), tensor({2, 15, 5}), tensor({2, 30})},
                  {{"direction", std::string("bidirectional")}}) ==
        "Tuple[Tensor[(s, 2, b, 5), f32], Tensor[(2, b, 5), f32]]");
  Expr xb = tensor({b, s, 2});
  CHECK(infer_str("lstm", {xb, tensor({1, 28, 2}), tensor({1, 28, 7})}, {{"layout", int64_t(1)}, {"hidden_size", int64_t(7)}}) ==
        "Tuple[Tensor[(b, s, 1, 7), f32], Tensor[(b, 1, 7), f32], Tensor[(b, 1, 7), f32]]");
  CHECK(infer_str("lstm", {x, tensor({1, 12, 2}), tensor({1, 12, 3}), tensor({1, 24}), tensor({b}, DataType::i32()),
                           tensor({1, b, 3}), tensor({1, b, 3}), tensor({1, 9})}) ==
        "Tuple[Tensor[(s, 1, b, 3), f32], Tensor[(1, b, 3), f32], Tensor[(1, b, 3), f32]]");
  CHECK(infer_str("rnn", {var(tensor_si_ndim(f32, 3)), tensor({1, 4, 2}), tensor({1, 4, 4})}) ==
        "Tuple[Tensor[ndim=4, f32], Tensor[ndim=3, f32]]");
}

TEST_CASE("rnn, gru, lstm: errors") {
  Expr x = tensor({3, 2, 2});
  CHECK(contains(infer_error("gru", {x, tensor({1, 12, 2}), tensor({1, 15, 5})}), "dim 1 of W is 12, expected 15"));
  CHECK(contains(infer_error("rnn", {x, tensor({2, 4, 2}), tensor({2, 4, 4})}), "dim 0 of W is 2, expected 1"));
  CHECK(contains(infer_error("lstm", {x, tensor({1, 12, 2}), tensor({1, 12, 3})}, {{"direction", std::string("up")}}),
                 "direction must be forward, reverse or bidirectional"));
  CHECK(contains(infer_error("lstm", {x, tensor({1, 12, 2}), tensor({1, 12, 3})},
                             {{"activations", std::vector<std::string>{"Tanh"}}}),
                 "1 activations given, expected 3"));
  CHECK(contains(infer_error("rnn", {x, tensor({1, 4, 2}), tensor({1, 4, 4}), tensor({1, 8}), tensor({2}, f32)}),
                 "sequence_lens must have an integer dtype"));
  CHECK(contains(infer_error("rnn", {x, tensor({1, 4, 2}, f16), tensor({1, 4, 4})}), "dtypes f32 and f16 differ"));
}

TEST_CASE("matmul_integer: the i32 result of 8-bit operands; zero points that cannot vary along k") {
  SymExpr n = SymExpr::var("n");
  const DataType u8 = DataType::u(8), i8 = DataType::i(8);
  CHECK(infer_str("matmul_integer", {tensor({n, 5, 8}, u8), tensor({8, 3}, i8), tensor({}, u8), tensor({}, i8)}) ==
        "Tensor[(n, 5, 3), i32]");
  CHECK(infer_str("matmul_integer", {tensor({2, 5, 8}, i8), tensor({1, 8, 3}, u8), tensor({2, 5, 1}, i8),
                                     tensor({3}, u8)}) == "Tensor[(2, 5, 3), i32]");
  CHECK(contains(infer_error("matmul_integer", {tensor({5, 8}), tensor({8, 3}, i8), tensor({}), tensor({}, i8)}),
                 "a must be u8 or i8"));
  CHECK(contains(infer_error("matmul_integer", {tensor({5, 8}, u8), tensor({8, 3}, i8), tensor({}, i8),
                                                tensor({}, i8)}),
                 "a_zp's dtype i8 differs from a's u8"));
  CHECK(contains(infer_error("matmul_integer", {tensor({5, 8}, u8), tensor({8, 3}, i8), tensor({5, 8}, u8),
                                                tensor({}, i8)}),
                 "one zero point per row"));
  CHECK(contains(infer_error("matmul_integer", {tensor({5, 8}, u8), tensor({8, 3}, i8), tensor({}, u8),
                                                tensor({8, 3}, i8)}),
                 "must not vary along the reduction"));
  CHECK(contains(infer_error("matmul_integer", {tensor({5, 8}, u8), tensor({7, 3}, i8), tensor({}, u8),
                                                tensor({}, i8)}),
                 "inner dims"));
}

TEST_CASE("conv_integer: conv's shapes with an i32 result; 8-bit operands, zero points of their dtypes") {
  SymExpr n = SymExpr::var("n"), h = SymExpr::var("h");
  const DataType u8 = DataType::u(8), i8 = DataType::i(8);
  Attrs pad{{"padding", std::vector<int64_t>{1, 1, 1, 1}}};
  CHECK(infer_str("conv_integer", {tensor({n, 4, h, 9}, u8), tensor({8, 4, 3, 3}, i8), tensor({}, u8),
                                   tensor({8}, i8)},
                  pad) == "Tensor[(n, 8, h, 9), i32]");
  CHECK(contains(infer_error("conv_integer", {tensor({n, 4, 9, 9}), tensor({8, 4, 3, 3}, i8), tensor({}),
                                              tensor({}, i8)}),
                 "x must be u8 or i8"));
  CHECK(contains(infer_error("conv_integer", {tensor({n, 4, 9, 9}, u8), tensor({8, 4, 3, 3}, i8), tensor({4}, u8),
                                              tensor({}, i8)}),
                 "x_zp must be one value"));
  CHECK(contains(infer_error("conv_integer", {tensor({n, 4, 9, 9}, u8), tensor({8, 4, 3, 3}, i8), tensor({}, u8),
                                              tensor({5}, i8)}),
                 "w_zp has 5 values for 8 output channels"));
  CHECK(contains(infer_error("conv_integer", {tensor({n, 4, 9, 9}, u8), tensor({8, 4, 3, 3}, i8), tensor({}, u8),
                                              tensor({}, u8)}),
                 "w_zp's dtype u8 differs from w's i8"));
}
