// The legalize pass: its infrastructure (program deduplication, fresh
// names, the buffer-dim convention, sym_params, bindings before the call)
// and, per family, every registered op legalised on a few shapes into a
// module that verifies and keeps no call of that op.
#include <doctest/doctest.h>

#include <set>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/analysis/graph_util.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"
#include "passes/passes.h"

using namespace relax;

namespace {

// Parses `body` as the bindings of @main(params) returning `ret`,
// normalises and legalises it, and checks the result verifies.
IRModule legalized(const std::string& params, const std::string& body, const std::string& ret) {
  std::string text = "fn @main(" + params + ") -> Object {\n" + body + "  return " + ret + "\n}\n";
  IRModule mod = normalize(parse_module(text));
  IRModule out = legalize(mod);
  std::vector<std::string> errors = verify(out);
  INFO(print_module(out));
  for (const std::string& e : errors) FAIL_CHECK(e);
  return out;
}

// The op names still called in the module's functions.
std::set<std::string> remaining_ops(const IRModule& mod) {
  std::set<std::string> ops;
  for (const auto& [name, item] : mod.items())
    if (auto* f = std::get_if<Function>(&item))
      visit_exprs(*f, [&](const Expr& e) {
        if (auto* c = as<CallNode>(e); c && c->op()) ops.insert(c->op()->name);
      });
  return ops;
}

std::set<std::string> ops_in(const std::string& params, const std::string& body) {
  IRModule mod = normalize(parse_module("fn @main(" + params + ") -> Object {\n" + body + "  return x\n}\n"));
  return remaining_ops(mod);
}

std::set<std::string> g_covered;  // ops exercised by the family tests

// Legalises and checks that none of the ops called in `body` remains.
void check_family(const std::string& params, const std::string& body) {
  std::set<std::string> before = ops_in(params, body);
  IRModule out = legalized(params, body, "x");
  std::set<std::string> after = remaining_ops(out);
  for (const std::string& op : before) {
    g_covered.insert(op);
    CHECK_MESSAGE(!after.count(op), op << " was not legalised");
  }
  CHECK(!out.program_names().empty());
}

int program_count(const IRModule& mod) { return int(mod.program_names().size()); }

}  // namespace

TEST_CASE("legalize: the same op on the same dims compiles once; names are fresh") {
  IRModule out = legalized("x: Tensor[(n, 4), f32], y: Tensor[(n, 4), f32], z: Tensor[(4,), f32]",
                           "  a = add(x, y)\n  b = add(a, y)\n  c = add(b, z)\n  d = multiply(c, c)\n", "d");
  CHECK(program_count(out) == 3);
  CHECK(out.program("add"));
  CHECK(out.program("add_1"));
  CHECK(out.program("multiply"));
  // Running it again adds nothing: the programs already there are reused.
  IRModule again = legalize(out);
  CHECK(program_count(again) == 3);
}

TEST_CASE("legalize: compound dims become program variables, plain ones stay shared") {
  IRModule out = legalized("pp: Prim[i64, p], x: Tensor[(b, p + s, 8), f32], y: Tensor[(b, s, 8), f32]",
                           "  c = concat((x, y), axis=1)\n  d = add(x, x)\n", "d");
  tir::Program concat = out.program("concat");
  REQUIRE(concat);
  const auto& in0 = concat->inputs[0]->shape;
  const auto& in1 = concat->inputs[1]->shape;
  CHECK(in0[0] == in1[0]);  // b kept, one variable
  CHECK(in0[1].is_var());   // p + s -> fresh variable
  CHECK(in0[1].name() == "d0");
  CHECK(in1[1].name() == "s");
  CHECK(concat->outputs[0]->shape[1].is_var());  // p + s + s -> another
  CHECK(concat->outputs[0]->shape[1] != in0[1]);
  tir::Program add = out.program("add");
  REQUIRE(add);
  CHECK(add->inputs[0]->shape[1] == add->inputs[1]->shape[1]);  // the same compound dim: one variable
  CHECK(add->inputs[0]->shape[1] == add->outputs[0]->shape[1]);
  CHECK(concat->sym_params.empty());
}

TEST_CASE("legalize: values no buffer binds are sym_params; constant prims are immediates") {
  IRModule out = legalized("x: Tensor[(n, 4), i64], k: Prim[i64, k]",
                           "  a = add(x, prim(k))\n  b = add(x, prim(3))\n"
                           "  c = strided_slice(x, axes=[0], begin=[k + 1], end=[n])\n",
                           "c");
  tir::Program a = out.program("add");
  REQUIRE(a);
  REQUIRE(a->sym_params.size() == 1);
  CHECK(a->sym_params[0].name() == "k");
  tir::Program b = out.program("add_1");
  REQUIRE(b);
  CHECK(b->sym_params.empty());
  CHECK(print_program("add_1", b).find("3i64") != std::string::npos);
  tir::Program s = out.program("strided_slice");
  REQUIRE(s);
  REQUIRE(s->sym_params.size() == 1);  // k + 1: a fresh variable, passed by shape(k + 1)
  CHECK(s->sym_params[0].is_var());
  std::string text = print_module(out);
  CHECK(text.find("shape(k + 1)") != std::string::npos);
  CHECK(text.find("shape(k)") != std::string::npos);
}

TEST_CASE("legalize: runtime shapes are bound by a match_cast before the call") {
  IRModule out = legalized("x: Tensor[(n, 6), f32], s: Shape[ndim=2], u: Tensor[ndim=2, f32]",
                           "  r = reshape(x, s)\n  v = relu(u)\n", "v");
  std::string text = print_module(out);
  CHECK(text.find("match_cast(s, Shape[(s_d0, s_d1)])") != std::string::npos);
  CHECK(text.find("match_cast(u, Tensor[(u_d0, u_d1), f32])") != std::string::npos);
  CHECK(remaining_ops(out).count("reshape") == 0);
  CHECK(remaining_ops(out).count("relu") == 0);
}

TEST_CASE("legalize: the VM's own ops stay") {
  IRModule out = legalized("x: Tensor[(n, 4), f32]", "  s = shape_of(x)\n  t = shape_to_tensor(s)\n", "t");
  std::set<std::string> ops = remaining_ops(out);
  CHECK(ops.count("shape_of"));
  CHECK(ops.count("shape_to_tensor"));
}

TEST_CASE("te: loop kinds and broadcasting") {
  using namespace te;
  SymExpr n = SymExpr::var("n");
  Buffer out = tir::make_buffer("out", DataType::f32(), {n, 64});
  Buffer a = tir::make_buffer("a", DataType::f32(), {n, 64});
  Buffer b = tir::make_buffer("b", DataType::f32(), {SymExpr::var("m"), 64});
  std::string s = print_stmt(compute(out, [&](const Index& i) { return load(a, i) + load_bcast(b, i, out); }));
  CHECK(s.find("parallel(n)") != std::string::npos);
  CHECK(s.find("vectorized(64)") != std::string::npos);
  CHECK(s.find("select(m == 1, 0, i0)") != std::string::npos);
  Buffer small = tir::make_buffer("o", DataType::f32(), {4, 3});
  std::string t = print_stmt(compute(small, [&](const Index&) { return zero(DataType::f32()); }));
  CHECK(t.find("parallel") == std::string::npos);
  CHECK(t.find("vectorized") == std::string::npos);
  CHECK(print_texpr(max_value(DataType::i(8))) == "127i8");
  CHECK(print_texpr(min_value(DataType::f16())) == "-f16.inf");
}

TEST_CASE("legalize family: elementwise and math") {
  std::string unary_f, unary_h;
  int k = 0;
  for (const char* op :
       {"neg",      "abs",  "exp",  "log",  "sqrt", "rsqrt", "tanh",  "sigmoid", "relu", "gelu",       "silu",
        "softplus", "erf",  "sin",  "cos",  "tan",  "floor", "ceil",  "round",   "sign", "reciprocal", "isnan",
        "isinf",    "asin", "acos", "atan", "sinh", "cosh",  "asinh", "acosh",   "atanh"}) {
    unary_f += "  u" + std::to_string(k) + " = " + op + "(x)\n";
    unary_h += "  h" + std::to_string(k++) + " = " + op + "(h)\n";
  }
  check_family("x: Tensor[(n, 8), f32], h: Tensor[(3, 5), f16]", unary_f + unary_h);
  std::string bin_f, bin_i, bin_b;
  for (const char* op : {"add", "subtract", "multiply", "divide", "floor_divide", "mod", "fmod", "power", "maximum",
                         "minimum", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    bin_f += "  f" + std::to_string(k) + " = " + op + "(x, y)\n";
    bin_i += "  i" + std::to_string(k++) + " = " + op + "(i, j)\n";
  }
  for (const char* op : {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"})
    bin_i += "  i" + std::to_string(k++) + " = " + op + "(i, j)\n";
  for (const char* op : {"logical_and", "logical_or", "logical_xor"})
    bin_b += "  b" + std::to_string(k++) + " = " + op + "(p, q)\n";
  check_family(
      "x: Tensor[(n, 8), f32], y: Tensor[(1, 8), f32], i: Tensor[(n, 1), i32], j: Tensor[(m,), i32], p: "
      "Tensor[(4,), bool], q: Tensor[(2, 4), bool], c8: Tensor[(8,), bool]",
      bin_f + bin_i + bin_b +
          "  n1 = logical_not(p)\n  n2 = bitwise_not(i)\n  n3 = bitwise_not(p)\n"
          "  w = where(c8, x, prim(0.5, f32))\n  c = clip(x, prim(0.0, f32), y)\n"
          "  a1 = astype(x, dtype=i32)\n  a2 = astype(i, dtype=bool)\n  a3 = astype(x, dtype=f16)\n"
          "  a4 = astype(p, dtype=f32)\n  a5 = astype(x, dtype=bf16)\n"
          "  f8 = astype_float8(x, dtype=f8e4m3fn)\n  f9 = astype_float8(x, dtype=f8e5m2, saturate=false)\n"
          "  s1 = add(x, prim(2.0, f32))\n  s2 = multiply(i, prim(n, i32))\n  s3 = power(i, prim(2, i32))\n");
}

TEST_CASE("legalize family: reductions") {
  check_family("x: Tensor[(b, s, 16), f32], h: Tensor[(4, n), f16], g: Tensor[(s, 16), f32]",
               "  a = sum(x, axis=[1], keepdims=true)\n  b2 = mean(x, axis=[0, 2])\n  c = max(x)\n"
               "  d = min(h, axis=[-1])\n  e = prod(x, axis=[2], keepdims=true)\n  f = mean(h)\n"
               "  g1 = argmax(x, axis=1)\n  g2 = argmin(h, axis=-1, keepdims=true)\n"
               "  s1 = softmax(x)\n  s2 = softmax(x, axis=0)\n  s3 = log_softmax(h, axis=1)\n"
               "  l = layer_norm(x, g, g, axes=[1, 2], epsilon=1e-05)\n  m = sum(h, axis=[0])\n");
}

TEST_CASE("legalize family: matmul") {
  check_family(
      "x: Tensor[(b, n, 16), f32], w: Tensor[(16, 8), f32], v: Tensor[(16,), f32], "
      "y: Tensor[(2, 1, n, 16), f16], z: Tensor[(3, 16, 5), f16], i: Tensor[(4, 4), i32], "
      "q: Tensor[(b, n, 16), u8], r: Tensor[(b, 16, 8), i8], qz: Tensor[(), u8], rz: Tensor[(b, 1, 8), i8]",
      "  a = matmul(x, w)\n  b2 = matmul(x, v)\n  c = matmul(v, w)\n  d = matmul(v, v)\n"
      "  e = matmul(y, z)\n  f = matmul(i, i)\n  g = matmul(x, w, out_dtype=f16)\n"
      "  h = matmul_integer(q, r, qz, rz)\n");
}

TEST_CASE("legalize family: manipulation") {
  check_family(
      "x: Tensor[(n, 12), f32], s: Shape[ndim=2], i: Tensor[(t, 2), i64], h: Tensor[(n, 1, 4), f16], "
      "k: Prim[i64, k], v: Tensor[(), f32], g: Tensor[(3, 1, 4), f32]",
      "  r1 = reshape(x, shape(n * 3, 4))\n  r2 = reshape(x, s)\n  p = permute_dims(h, axes=[2, 0, 1])\n"
      "  p2 = permute_dims(x)\n  c = concat((x, x, x), axis=1)\n  c2 = concat((h, h), axis=-2)\n"
      "  s1 = split(x, sections=3, axis=1)\n  s2 = split(x, indices=[2, 5], axis=1)\n"
      "  sl = strided_slice(x, axes=[1, 0], begin=[10, k], end=[1, n], strides=[-2, 1])\n"
      "  q = squeeze(h, axis=[1])\n  q2 = squeeze(g)\n  e = expand_dims(x, axis=[0, 3])\n"
      "  bt = broadcast_to(h, shape(2, n, 3, 4))\n  bt2 = broadcast_to(x, s)\n"
      "  t1 = take(x, i, axis=1)\n  t2 = take(h, prim(-1), axis=0)\n"
      "  f1 = full(shape(n, 2), prim(1.5, f32), dtype=f16)\n  f2 = full(s, v)\n"
      "  z = zeros(shape(3, n), dtype=i32)\n  o = ones(s, dtype=bool)\n");
}

TEST_CASE("legalize family: indexing") {
  check_family(
      "x: Tensor[(n, 4), f32], i: Tensor[(n, 4), i64], v: Tensor[(2,), f32], j: Tensor[(n,), i32], "
      "k: Prim[i64, k], s: Tensor[(), f32], ind: Tensor[(m, 1), i64], u: Tensor[(m, 4), f32], "
      "c: Tensor[(n, 8, 9), f32], l: Tensor[(4,), i64]",
      "  a = arange(shape(n), prim(0), prim(2))\n  a2 = arange(shape(7), prim(0.5, f32), s)\n"
      "  e = eye(shape(3, n), k=1, dtype=f32)\n  t = trilu(x, prim(k))\n"
      "  t2 = trilu(x, prim(-1), upper=false)\n  o = one_hot(j, v, shape(5), axis=0)\n"
      "  g = gather_elements(x, i, axis=1)\n  r = tile(x, shape(2, 3))\n"
      "  se = scatter_elements(x, i, x, axis=1, reduction=\"max\")\n  sn = scatter_nd(x, ind, u)\n"
      "  gn = gather_nd(x, ind)\n  p = pad(x, shape(1, 0, 0, 2), prim(0.5, f32), mode=\"edge\")\n"
      "  ci = col2im(c, shape(4, 4), shape(2, 2))\n  rs = reverse_sequence(x, l, batch_axis=1, time_axis=0)\n");
}

TEST_CASE("legalize: every op of these families is exercised by a family test") {
  LegalizerRegistry reg;
  register_elementwise_legalizers(reg);
  register_reduce_legalizers(reg);
  register_matmul_legalizers(reg);
  register_manipulate_legalizers(reg);
  register_index_legalizers(reg);
  for (const std::string& op : reg.ops()) CHECK_MESSAGE(g_covered.count(op), op << " has a legaliser but no test");
}
