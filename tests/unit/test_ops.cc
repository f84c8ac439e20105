// The op registry and the struct-info rules of ir/ops/*.cc.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "ir/error.h"
#include "ir/module.h"
#include "ir/normalize.h"
#include "ir/op.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType f16 = DataType::f16();
const DataType i64 = DataType::i64();
const DataType boolean = DataType::boolean();

// A compact text form for checks: Tensor[(n, 4), f32], Tensor[ndim=2, f32], ...
std::string show(const StructInfo& si) {
  auto dims = [](const std::vector<SymExpr>& ds) {
    std::string s = "(";
    for (size_t i = 0; i < ds.size(); ++i) s += (i ? ", " : "") + to_string(ds[i]);
    return s + (ds.size() == 1 ? ",)" : ")");
  };
  if (const auto* t = as<TensorSI>(si)) {
    std::string s = "Tensor[";
    if (t->shape)
      s += dims(*t->shape);
    else if (t->ndim >= 0)
      s += "ndim=" + std::to_string(t->ndim);
    if (!t->dtype.is_void()) s += (s.size() > 7 ? ", " : "") + t->dtype.str();
    return s + "]";
  }
  if (const auto* p = as<PrimSI>(si)) return "Prim[" + p->dtype.str() + "]";
  if (const auto* s = as<ShapeSI>(si))
    return s->values ? "Shape[" + dims(*s->values) + "]" : "Shape[ndim=" + std::to_string(s->ndim) + "]";
  if (const auto* t = as<TupleSI>(si)) {
    std::string s = "Tuple[";
    for (size_t i = 0; i < t->fields.size(); ++i) s += (i ? ", " : "") + show(t->fields[i]);
    return s + "]";
  }
  return as<ObjectSI>(si) ? "Object" : "?";
}

Expr tensor(std::vector<SymExpr> dims, DataType dtype = DataType::f32()) {
  return make_var("x", tensor_si(dtype, std::move(dims)));
}
Expr tensor_ndim(int ndim, DataType dtype = DataType::f32()) { return make_var("x", tensor_si_ndim(dtype, ndim)); }

// Deduces the struct info of op(args, attrs) with the op's own rule.
StructInfo infer(const std::string& op, std::vector<Expr> args, Attrs attrs = {},
                 std::vector<StructInfo> sinfo_args = {}, const Analyzer& ana = Analyzer(),
                 const IRModule* mod = nullptr) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs), std::move(sinfo_args));
  const auto* c = as<CallNode>(call);
  return c->op()->infer(*c, InferContext{ana, mod});
}

std::string infer_str(const std::string& op, std::vector<Expr> args, Attrs attrs = {},
                      const Analyzer& ana = Analyzer()) {
  return show(infer(op, std::move(args), std::move(attrs), {}, ana));
}

// The message of the Error `f` raises, or "" when it raises none.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string infer_error(const std::string& op, std::vector<Expr> args, Attrs attrs = {},
                        const Analyzer& ana = Analyzer()) {
  return error_of([&] { infer(op, args, attrs, {}, ana); });
}

}  // namespace

TEST_CASE("registry: lookup, listing and docs") {
  REQUIRE(find_op("add") != nullptr);
  CHECK(find_op("add")->name == "add");
  CHECK(find_op("no_such_op") == nullptr);
  CHECK(find_op("relu") == find_op("relu"));
  auto ops = all_ops();
  CHECK(ops.size() >= 80);
  for (size_t i = 1; i < ops.size(); ++i) CHECK(ops[i - 1]->name < ops[i]->name);
  for (const OpInfo* op : ops) {
    CHECK_MESSAGE(!op->doc.empty(), op->name);
    CHECK_MESSAGE(op->infer != nullptr, op->name);
  }
  CHECK(find_op("call_builtin")->pure == false);
  CHECK(find_op("call_tir")->pure);
  CHECK(find_op("sum")->find_attr("keepdims") != nullptr);
  CHECK(find_op("sum")->find_attr("axes") == nullptr);
}

TEST_CASE("check_op_attrs: arity, unknown, types, defaults, order") {
  const OpInfo& relu = *find_op("relu");
  CHECK(error_of([&] { check_op_attrs(relu, {}, 2); }) == "op 'relu' takes 1 argument, got 2");
  CHECK(error_of([&] { check_op_attrs(*find_op("add"), {}, 1); }) == "op 'add' takes 2 arguments, got 1");
  CHECK(error_of([&] { check_op_attrs(*find_op("call_tir"), {}, 4); }) ==
        "op 'call_tir' takes 2 or 3 arguments, got 4");
  const OpInfo& sum = *find_op("sum");
  CHECK(error_of([&] {
          check_op_attrs(sum, {{"axes", std::vector<int64_t>{1}}}, 1);
        }) == "op 'sum' has no attribute 'axes'");
  CHECK(error_of([&] {
          check_op_attrs(sum, {{"keepdims", std::vector<int64_t>{1}}}, 1);
        }) == "op 'sum': attribute 'keepdims' should be a bool, not an int list");
  CHECK(error_of([&] { check_op_attrs(*find_op("astype"), {}, 1); }) ==
        "op 'astype' requires attribute 'dtype' (dtype)");

  // Defaults are filled in declaration order, whatever order was given.
  Attrs a = check_op_attrs(sum, {{"keepdims", true}, {"axis", std::vector<int64_t>{0}}}, 1);
  REQUIRE(a.size() == 2);
  CHECK(a.begin()->first == "axis");
  CHECK(a.get_bool("keepdims") == true);
  Attrs d = check_op_attrs(sum, {}, 1);
  CHECK(d.get_ints("axis").empty());
  CHECK(d.get_bool("keepdims") == false);

  // Int widens to Float; Ints widen to Syms.
  Attrs ln = check_op_attrs(*find_op("layer_norm"), {{"axes", std::vector<int64_t>{-1}}, {"epsilon", int64_t(1)}}, 3);
  CHECK(std::holds_alternative<double>(*ln.find("epsilon")));
  CHECK(ln.get_float("epsilon") == 1.0);
  Attrs ss = check_op_attrs(
      *find_op("strided_slice"),
      {{"axes", std::vector<int64_t>{0}}, {"begin", std::vector<int64_t>{1}}, {"end", std::vector<int64_t>{3}}}, 1);
  REQUIRE(std::holds_alternative<std::vector<SymExpr>>(*ss.find("begin")));
  CHECK(std::get<std::vector<SymExpr>>(*ss.find("end"))[0].is_const(3));
  // An Int is not a Bool.
  CHECK(!error_of([&] { check_op_attrs(sum, {{"keepdims", int64_t(1)}}, 1); }).empty());
}

TEST_CASE("rules validate attributes themselves") {
  Expr x = tensor({2, 3});
  CHECK(infer_error("sum", {x}, {{"axes", std::vector<int64_t>{1}}}) == "op 'sum' has no attribute 'axes'");
  CHECK(infer_error("astype", {x}) == "op 'astype' requires attribute 'dtype' (dtype)");
  CHECK(infer_error("relu", {x, x}) == "op 'relu' takes 1 argument, got 2");
}

TEST_CASE("unary elementwise") {
  SymExpr n = SymExpr::var("n");
  Expr x = tensor({n, 4});
  StructInfo si = sinfo_of(x);
  CHECK(infer("relu", {x}) == si);  // the operand's own struct info
  CHECK(infer("exp", {x}) == si);
  CHECK(infer_str("isnan", {x}) == "Tensor[(n, 4), bool]");
  CHECK(infer_str("astype", {x}, {{"dtype", f16}}) == "Tensor[(n, 4), f16]");
  CHECK(infer_str("neg", {tensor_ndim(-1)}) == "Tensor[f32]");
  CHECK(infer_str("sqrt", {tensor_ndim(3, DataType())}) == "Tensor[ndim=3]");
  CHECK(infer_error("exp", {tensor({3}, i64)}) == "exp: the operand must have a float dtype, got i64");
  CHECK(infer_error("logical_not", {tensor({3}, f32)}) == "logical_not: the operand must have dtype bool, got f32");
  CHECK(infer_str("bitwise_not", {tensor({3}, i64)}) == "Tensor[(3,), i64]");
  CHECK(infer_str("neg", {make_prim_float(1.5)}) == "Prim[f32]");
  CHECK(infer_error("relu", {make_shape({2})}) == "relu: argument 0 must be a tensor or a scalar, got Shape");
}

TEST_CASE("broadcasting: concrete and symbolic") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  CHECK(infer_str("add", {tensor({2, 3}), tensor({2, 3})}) == "Tensor[(2, 3), f32]");
  CHECK(infer_str("add", {tensor({4, 1, 3}), tensor({5, 1})}) == "Tensor[(4, 5, 3), f32]");
  CHECK(infer_str("multiply", {tensor({3}), tensor({})}) == "Tensor[(3,), f32]");
  CHECK(infer_str("add", {tensor({n, 4}), tensor({n, 4})}) == "Tensor[(n, 4), f32]");
  CHECK(infer_str("add", {tensor({n, 1}), tensor({1, m})}) == "Tensor[(n, m), f32]");
  CHECK(infer_str("add", {tensor({n}), tensor({4, 1})}) == "Tensor[(4, n), f32]");
  // Unprovable: ndim-only, never a guess.
  CHECK(infer_str("add", {tensor({n, 4}), tensor({m, 4})}) == "Tensor[ndim=2, f32]");
  // Not provably equal, but every valid broadcast has one result (checked
  // at run time by the legaliser): a dim that cannot be 1 ...
  CHECK(infer_str("add", {tensor({n}), tensor({4})}) == "Tensor[(4,), f32]");
  // ... and the larger of two ordered dims where the smaller is 1 whenever
  // the larger is: a position table sliced to min(s, 512), as BERT adds it.
  SymExpr b = SymExpr::var("b"), s = SymExpr::var("s");
  CHECK(infer_str("add", {tensor({b, s, 8}), tensor({1, min(s, SymExpr(512)), 8})}) == "Tensor[(b, s, 8), f32]");
  CHECK(infer_str("where", {tensor({1, 1, min(s, SymExpr(64)), min(s, SymExpr(64))}, DataType::boolean()),
                            tensor({b, 4, s, s}), tensor({})}) == "Tensor[(b, 4, s, s), f32]");
  // GPT-2 with a KV cache: the causal mask bias[:, :, p : p + s, : p + s]
  // has clamped dims no order proves; the scores' plain dims are taken.
  SymExpr p = SymExpr::var("p"), total = min(p + s, SymExpr(64));
  SymExpr rows = max(total - min(p, SymExpr(64)), SymExpr(0));
  CHECK(infer_str("where", {tensor({1, 1, rows, total}, DataType::boolean()), tensor({b, 4, s, p + s}),
                            tensor({})}) == "Tensor[(b, 4, s, p + s), f32]");
  // Provable mismatch.
  CHECK(infer_error("add", {tensor({2, 3}), tensor({2, 4})}) == "add: cannot broadcast dims 3 and 4 at axis 1");
  CHECK(infer_error("subtract", {tensor({n + 2, 3}), tensor({n + 3, 3})}) ==
        "subtract: cannot broadcast dims n + 2 and n + 3 at axis 0");
  // n and n + 1 differ, but n (>= 0) may be 1, so may n + 1 (n + 1 >= 1);
  // n <= n + 1, yet n + 1 == 1 leaves n == 0, which broadcasts to 0: no dim.
  CHECK(infer_str("add", {tensor({n}), tensor({n + 1})}) == "Tensor[ndim=1, f32]");
  // n + 2 cannot be 1: n + 1 must be 1.
  CHECK(infer_str("add", {tensor({n + 1}), tensor({n + 2})}) == "Tensor[(n + 2,), f32]");
  // Unknown rank and ndim-only operands.
  CHECK(infer_str("add", {tensor({2, 3}), tensor_ndim(-1)}) == "Tensor[f32]");
  CHECK(infer_str("add", {tensor({2, 3}), tensor_ndim(3)}) == "Tensor[ndim=3, f32]");
  // A later axis still reports a provable mismatch after an unknown one.
  CHECK(infer_error("add", {tensor({n, 3}), tensor({m, 5})}) == "add: cannot broadcast dims 3 and 5 at axis 1");
}

TEST_CASE("binary dtypes, comparisons, scalars") {
  CHECK(infer_error("add", {tensor({3}, f32), tensor({3}, i64)}) == "add: dtypes f32 and i64 differ");
  CHECK(infer_str("add", {tensor({3}, f32), tensor({3}, DataType())}) == "Tensor[(3,)]");
  CHECK(infer_str("less", {tensor({2, 3}), tensor({3})}) == "Tensor[(2, 3), bool]");
  CHECK(infer_str("equal", {tensor({3}, DataType()), tensor({3}, DataType())}) == "Tensor[(3,), bool]");
  CHECK(infer_str("logical_and", {tensor({3}, boolean), tensor({3}, boolean)}) == "Tensor[(3,), bool]");
  CHECK(infer_error("logical_or", {tensor({3}), tensor({3})}) == "logical_or: operand 0 must have dtype bool, got f32");
  CHECK(infer_str("left_shift", {tensor({3}, i64), tensor({3}, i64)}) == "Tensor[(3,), i64]");
  CHECK(infer_error("bitwise_and", {tensor({3}), tensor({3})}) ==
        "bitwise_and: operand 0 must have an integer dtype, got f32");
  // A Prim scalar acts as a rank-0 tensor.
  CHECK(infer_str("multiply", {tensor({2, 3}), make_prim_float(0.5)}) == "Tensor[(2, 3), f32]");
  CHECK(infer_str("add", {make_prim_float(1.0), make_prim_float(2.0)}) == "Prim[f32]");
  CHECK(infer_error("add", {tensor({2}), make_prim_int(1)}) == "add: dtypes f32 and i64 differ");
  // Integer scalars fold their symbolic values.
  SymExpr n = SymExpr::var("n");
  auto value = [](StructInfo si) { return as<PrimSI>(si)->value; };
  CHECK(value(infer("add", {make_prim_int(n), make_prim_int(1)})) == n + 1);
  CHECK(value(infer("floor_divide", {make_prim_int(n * 4), make_prim_int(2)})) == n * 2);
  CHECK(!value(infer("floor_divide", {make_prim_int(n), make_prim_int(0)})).defined());
  CHECK(!value(infer("power", {make_prim_int(n), make_prim_int(2)})).defined());
  CHECK(show(infer("less", {make_prim_int(n), make_prim_int(2)})) == "Prim[bool]");
  CHECK(infer_error("add", {tensor({2}), make_string("s")}) ==
        "add: argument 1 must be a tensor or a scalar, got Object");
}

TEST_CASE("where and clip") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer_str("where", {tensor({n, 1}, boolean), tensor({4}), tensor({1, 4})}) == "Tensor[(n, 4), f32]");
  CHECK(infer_error("where", {tensor({3}), tensor({3}), tensor({3})}) ==
        "where: the condition must have dtype bool, got f32");
  CHECK(infer_error("where", {tensor({3}, boolean), tensor({3}), tensor({3}, f16)}) ==
        "where: dtypes f32 and f16 differ");
  CHECK(infer_error("where", {tensor({2}, boolean), tensor({3}), tensor({3})}) ==
        "where: cannot broadcast dims 2 and 3 at axis 0");
  Expr x = tensor({n, 4});
  CHECK(infer("clip", {x, make_prim_float(0.0), make_prim_float(6.0)}) == sinfo_of(x));
}

TEST_CASE("matmul") {
  SymExpr n = SymExpr::var("n"), b = SymExpr::var("b");
  CHECK(infer_str("matmul", {tensor({n, 784}), tensor({784, 128})}) == "Tensor[(n, 128), f32]");
  CHECK(infer_error("matmul", {tensor({n, 768}), tensor({512, 128})}) == "matmul: inner dims 768 and 512 differ");
  // Batch broadcasting.
  CHECK(infer_str("matmul", {tensor({b, 1, n, 64}), tensor({12, 64, n})}) == "Tensor[(b, 12, n, n), f32]");
  CHECK(infer_str("matmul", {tensor({8, n, 64}), tensor({64, 32})}) == "Tensor[(8, n, 32), f32]");
  CHECK(infer_error("matmul", {tensor({2, 3, 4}), tensor({5, 4, 6})}) ==
        "matmul: cannot broadcast dims 2 and 5 at axis 0");
  // 1-D operands.
  CHECK(infer_str("matmul", {tensor({4}), tensor({4, 5})}) == "Tensor[(5,), f32]");
  CHECK(infer_str("matmul", {tensor({3, 4}), tensor({4})}) == "Tensor[(3,), f32]");
  CHECK(infer_str("matmul", {tensor({4}), tensor({4})}) == "Tensor[(), f32]");
  CHECK(infer_str("matmul", {tensor({2, 3, 4}), tensor({4})}) == "Tensor[(2, 3), f32]");
  CHECK(infer_error("matmul", {tensor({3}), tensor({4})}) == "matmul: inner dims 3 and 4 differ");
  // Unprovable inner dims pass; unknown rank and ndim-only degrade.
  CHECK(infer_str("matmul", {tensor({2, n}), tensor({b, 3})}) == "Tensor[(2, 3), f32]");
  CHECK(infer_str("matmul", {tensor({2, 3}), tensor_ndim(-1)}) == "Tensor[f32]");
  CHECK(infer_str("matmul", {tensor_ndim(3), tensor({4, 5})}) == "Tensor[ndim=3, f32]");
  CHECK(infer_str("matmul", {tensor({n, 4}, DataType::i(8)), tensor({4, 2}, DataType::i(8))},
                  {{"out_dtype", DataType::i32()}}) == "Tensor[(n, 2), i32]");
  CHECK(infer_error("matmul", {tensor({2, 3}), tensor({3, 2}, f16)}) == "matmul: dtypes f32 and f16 differ");
  CHECK(infer_error("matmul", {tensor({}), tensor({3, 2})}) ==
        "matmul: operands must have rank >= 1, got a rank-0 tensor");
}

TEST_CASE("reshape") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer_str("reshape", {tensor({2, 3}), make_shape({3, 2})}) == "Tensor[(3, 2), f32]");
  CHECK(infer_str("reshape", {tensor({n, 4}), make_shape({n * 2, 2})}) == "Tensor[(n * 2, 2), f32]");
  CHECK(infer_error("reshape", {tensor({2, 3}), make_shape({8})}) == "reshape: cannot reshape 6 elements into 8");
  Analyzer pos;
  pos.bind(n, 1, 1 << 20);
  CHECK(infer_error("reshape", {tensor({n, 4}), make_shape({n, 3})}, {}, pos) ==
        "reshape: cannot reshape n * 4 elements into n * 3");
  CHECK(infer_str("reshape", {tensor({n, 4}), make_shape({n, 3})}) == "Tensor[(n, 3), f32]");  // n may be 0
  CHECK(infer_error("reshape", {tensor({6}), make_shape({-1, 6})}) ==
        "reshape: negative dim -1 in the requested shape");
  // Unknown counts pass; a shape of unknown values gives an ndim-only tensor.
  CHECK(infer_str("reshape", {tensor({n}), make_shape({4})}) == "Tensor[(4,), f32]");
  CHECK(infer_str("reshape", {tensor_ndim(-1), make_shape({4, 2})}) == "Tensor[(4, 2), f32]");
  Expr s = make_var("s", shape_si_ndim(3));
  CHECK(infer_str("reshape", {tensor({2, 3}), s}) == "Tensor[ndim=3, f32]");
  CHECK(infer_error("reshape", {tensor({2, 3}), tensor({2})}) == "reshape: argument 1 must be a shape, got Tensor");
}

TEST_CASE("permute_dims, expand_dims, squeeze") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer_str("permute_dims", {tensor({n, 3, 4})}) == "Tensor[(4, 3, n), f32]");
  CHECK(infer_str("permute_dims", {tensor({n, 3, 4})}, {{"axes", std::vector<int64_t>{0, 2, 1}}}) ==
        "Tensor[(n, 4, 3), f32]");
  CHECK(infer_str("permute_dims", {tensor({n, 3, 4})}, {{"axes", std::vector<int64_t>{-1, 0, 1}}}) ==
        "Tensor[(4, n, 3), f32]");
  CHECK(infer_error("permute_dims", {tensor({n, 3, 4})}, {{"axes", std::vector<int64_t>{0, 0, 1}}}) ==
        "permute_dims: axis 0 is repeated");
  CHECK(infer_error("permute_dims", {tensor({n, 3})}, {{"axes", std::vector<int64_t>{0, 2}}}) ==
        "permute_dims: axis 2 is out of range for a tensor of rank 2");
  CHECK(infer_str("permute_dims", {tensor_ndim(-1)}, {{"axes", std::vector<int64_t>{1, 0}}}) == "Tensor[ndim=2, f32]");

  CHECK(infer_str("expand_dims", {tensor({n, 3})}, {{"axis", std::vector<int64_t>{0, -1}}}) ==
        "Tensor[(1, n, 3, 1), f32]");
  CHECK(infer_str("expand_dims", {tensor({n, 3})}, {{"axis", std::vector<int64_t>{1}}}) == "Tensor[(n, 1, 3), f32]");
  CHECK(infer_str("expand_dims", {tensor_ndim(2)}, {{"axis", std::vector<int64_t>{1}}}) == "Tensor[ndim=3, f32]");

  CHECK(infer_str("squeeze", {tensor({1, 3, 1})}) == "Tensor[(3,), f32]");
  CHECK(infer_str("squeeze", {tensor({1, n})}) == "Tensor[f32]");  // n may be 1: rank unknown
  CHECK(infer_str("squeeze", {tensor({1, n})}, {{"axis", std::vector<int64_t>{0}}}) == "Tensor[(n,), f32]");
  CHECK(infer_error("squeeze", {tensor({1, 4})}, {{"axis", std::vector<int64_t>{1}}}) == "squeeze: dim 1 is 4, not 1");
  CHECK(infer_str("squeeze", {tensor_ndim(3)}, {{"axis", std::vector<int64_t>{0}}}) == "Tensor[ndim=2, f32]");
}

TEST_CASE("concat and split with symbolic dims") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  auto tup = [](std::vector<Expr> fs) { return make_tuple(std::move(fs)); };
  CHECK(infer_str("concat", {tup({tensor({n, 4}), tensor({m, 4})})}) == "Tensor[(m + n, 4), f32]");
  CHECK(infer_str("concat", {tup({tensor({2, n}), tensor({2, n}), tensor({2, 1})})}, {{"axis", int64_t(-1)}}) ==
        "Tensor[(2, n * 2 + 1), f32]");
  CHECK(infer_error("concat", {tup({tensor({n, 4}), tensor({n, 5})})}) ==
        "concat: dim 1 of input 1 is 5 but input 0 has 4");
  CHECK(infer_str("concat", {tup({tensor({2, n}), tensor({2, m})})}) == "Tensor[ndim=2, f32]");
  CHECK(infer_error("concat", {tup({tensor({2, 3}), tensor({2})})}) == "concat: input 1 has rank 1, expected 2");
  CHECK(infer_error("concat", {tup({tensor({2}), tensor({2}, f16)})}) == "concat: dtypes f32 and f16 differ (input 1)");
  CHECK(infer_str("concat", {tup({tensor_ndim(-1), tensor({2, 3})})}) == "Tensor[ndim=2, f32]");
  CHECK(infer_error("concat", {tup({})}) == "concat: needs at least one tensor");

  CHECK(infer_str("split", {tensor({6, n})}, {{"sections", int64_t(3)}}) ==
        "Tuple[Tensor[(2, n), f32], Tensor[(2, n), f32], Tensor[(2, n), f32]]");
  CHECK(infer_error("split", {tensor({7, n})}, {{"sections", int64_t(3)}}) ==
        "split: dim 7 at axis 0 does not split into 3 equal sections");
  CHECK(infer_str("split", {tensor({n * 4})}, {{"sections", int64_t(2)}}) ==
        "Tuple[Tensor[(n * 2,), f32], Tensor[(n * 2,), f32]]");
  CHECK(infer_str("split", {tensor({n})}, {{"sections", int64_t(2)}}) ==
        "Tuple[Tensor[ndim=1, f32], Tensor[ndim=1, f32]]");
  CHECK(infer_str("split", {tensor({2, 10})}, {{"indices", std::vector<int64_t>{3, 7}}, {"axis", int64_t(1)}}) ==
        "Tuple[Tensor[(2, 3), f32], Tensor[(2, 4), f32], Tensor[(2, 3), f32]]");
  CHECK(infer_str("split", {tensor({5})}, {{"indices", std::vector<int64_t>{3, 8}}}) ==
        "Tuple[Tensor[(3,), f32], Tensor[(2,), f32], Tensor[(0,), f32]]");
  CHECK(infer_str("split", {tensor_ndim(-1)}, {{"sections", int64_t(2)}}) == "Tuple[Tensor[f32], Tensor[f32]]");
}

TEST_CASE("strided_slice") {
  SymExpr n = SymExpr::var("n"), b = SymExpr::var("b");
  auto slice = [](std::vector<int64_t> axes, std::vector<SymExpr> begin, std::vector<SymExpr> end,
                  std::vector<int64_t> strides = {}) {
    return Attrs{{"axes", axes}, {"begin", begin}, {"end", end}, {"strides", strides}};
  };
  CHECK(infer_str("strided_slice", {tensor({10, 8})}, slice({0}, {2}, {7})) == "Tensor[(5, 8), f32]");
  CHECK(infer_str("strided_slice", {tensor({10, 8})}, slice({0, 1}, {1, 0}, {100, 8}, {3, 2})) ==
        "Tensor[(3, 4), f32]");
  CHECK(infer_str("strided_slice", {tensor({10})}, slice({0}, {7}, {3})) == "Tensor[(0,), f32]");
  CHECK(infer_str("strided_slice", {tensor({10})}, slice({0}, {9}, {-1}, {-1})) == "Tensor[(10,), f32]");
  CHECK(infer_str("strided_slice", {tensor({10})}, slice({0}, {8}, {1}, {-2})) == "Tensor[(4,), f32]");
  // Symbolic bounds, with n known to be at least 8.
  Analyzer ana;
  ana.bind(n, 8, 1 << 20);
  ana.bind(b, 0, 2);
  auto sliced = [&](Attrs a) {
    return as<TensorSI>(infer("strided_slice", {tensor({n, 8})}, a, {}, ana))->shape->at(0);
  };
  CHECK(ana.can_prove_equal(sliced(slice({0}, {1}, {n})), n - 1));
  CHECK(ana.can_prove_equal(sliced(slice({-2}, {0}, {n}, {2})), floordiv(n + 1, 2)));
  CHECK(ana.can_prove_equal(sliced(slice({0}, {b}, {b + 3})), 3));
  // Unbounded n: the dim stays exact but symbolic, never a guess.
  SymExpr d = as<TensorSI>(infer("strided_slice", {tensor({n})}, slice({0}, {0}, {n})))->shape->at(0);
  CHECK(Analyzer().can_prove_equal(d, n));
  CHECK(infer_error("strided_slice", {tensor({10})}, slice({0}, {1}, {5}, {0})) == "strided_slice: stride 0");
  CHECK(infer_error("strided_slice", {tensor({10})}, slice({0, 1}, {1}, {5})) ==
        "strided_slice: axes, begin, end and strides must have the same length, got 2, 1, 1 and 0");
  CHECK(infer_error("strided_slice", {tensor({10})}, slice({1}, {1}, {5})) ==
        "strided_slice: axis 1 is out of range for a tensor of rank 1");
  CHECK(infer_str("strided_slice", {tensor_ndim(2)}, slice({0}, {1}, {5})) == "Tensor[ndim=2, f32]");
  CHECK(infer_str("strided_slice", {tensor_ndim(-1)}, slice({0}, {1}, {5})) == "Tensor[f32]");
}

TEST_CASE("broadcast_to, take, shape_of, full/zeros/ones") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  CHECK(infer_str("broadcast_to", {tensor({1, 4}), make_shape({n, 3, 4})}) == "Tensor[(n, 3, 4), f32]");
  CHECK(infer_error("broadcast_to", {tensor({2, 4}), make_shape({3, 4})}) ==
        "broadcast_to: cannot broadcast dim 2 to 3 at axis 0");
  CHECK(infer_error("broadcast_to", {tensor({2, 4}), make_shape({4})}) ==
        "broadcast_to: cannot broadcast a rank-2 tensor to rank 1");

  CHECK(infer_str("take", {tensor({100, 64}), tensor({n, m}, i64)}) == "Tensor[(n, m, 64), f32]");
  CHECK(infer_str("take", {tensor({3, 100, 64}), tensor({n}, i64)}, {{"axis", int64_t(1)}}) ==
        "Tensor[(3, n, 64), f32]");
  CHECK(infer_str("take", {tensor({100, 64}), make_prim_int(5)}) == "Tensor[(64,), f32]");
  CHECK(infer_error("take", {tensor({100, 64}), tensor({3}, f32)}) ==
        "take: the indices must have an integer dtype, got f32");
  CHECK(infer_str("take", {tensor_ndim(2), tensor({n}, i64)}) == "Tensor[ndim=2, f32]");

  CHECK(infer_str("shape_of", {tensor({n, 4})}) == "Shape[(n, 4)]");
  CHECK(infer_str("shape_of", {tensor_ndim(3)}) == "Shape[ndim=3]");
  CHECK(infer_str("shape_of", {tensor_ndim(-1)}) == "Shape[ndim=-1]");

  CHECK(infer_str("full", {make_shape({n, 2}), make_prim_float(1.0)}) == "Tensor[(n, 2), f32]");
  CHECK(infer_str("full", {make_shape({2}), make_prim_float(1.0)}, {{"dtype", f16}}) == "Tensor[(2,), f16]");
  CHECK(infer_error("full", {make_shape({2}), tensor({2})}) ==
        "full: fill_value must be a scalar, got a rank-1 tensor");
  CHECK(infer_str("zeros", {make_shape({n})}, {{"dtype", i64}}) == "Tensor[(n,), i64]");
  CHECK(infer_str("ones", {make_shape({2, 2})}, {{"dtype", boolean}}) == "Tensor[(2, 2), bool]");
  CHECK(infer_error("zeros", {make_shape({2})}) == "op 'zeros' requires attribute 'dtype' (dtype)");
}

TEST_CASE("reductions, softmax, layer_norm") {
  SymExpr n = SymExpr::var("n");
  Expr x = tensor({n, 4, 8});
  CHECK(infer_str("sum", {x}) == "Tensor[(), f32]");
  CHECK(infer_str("sum", {x}, {{"keepdims", true}}) == "Tensor[(1, 1, 1), f32]");
  CHECK(infer_str("mean", {x}, {{"axis", std::vector<int64_t>{1}}}) == "Tensor[(n, 8), f32]");
  CHECK(infer_str("max", {x}, {{"axis", std::vector<int64_t>{-1, 0}}, {"keepdims", true}}) == "Tensor[(1, 4, 1), f32]");
  CHECK(infer_error("sum", {x}, {{"axis", std::vector<int64_t>{3}}}) ==
        "sum: axis 3 is out of range for a tensor of rank 3");
  CHECK(infer_error("prod", {x}, {{"axis", std::vector<int64_t>{1, -2}}}) == "prod: axis -2 is repeated");
  CHECK(infer_str("sum", {tensor_ndim(-1)}) == "Tensor[(), f32]");
  CHECK(infer_str("sum", {tensor_ndim(-1)}, {{"axis", std::vector<int64_t>{0}}}) == "Tensor[f32]");
  CHECK(infer_str("min", {tensor_ndim(3)}, {{"axis", std::vector<int64_t>{0}}}) == "Tensor[ndim=2, f32]");
  CHECK(infer_str("argmax", {x}, {{"axis", int64_t(-1)}}) == "Tensor[(n, 4), i64]");
  CHECK(infer_str("argmin", {x}, {{"axis", int64_t(0)}, {"keepdims", true}}) == "Tensor[(1, 4, 8), i64]");

  CHECK(infer("softmax", {x}) == sinfo_of(x));
  CHECK(infer("log_softmax", {x}, {{"axis", int64_t(1)}}) == sinfo_of(x));
  CHECK(infer_error("softmax", {x}, {{"axis", int64_t(3)}}) ==
        "softmax: axis 3 is out of range for a tensor of rank 3");
  CHECK(infer_error("softmax", {tensor({3}, i64)}) == "softmax: the operand must have a float dtype, got i64");

  Attrs ln{{"axes", std::vector<int64_t>{-1}}};
  CHECK(infer("layer_norm", {x, tensor({8}), tensor({8})}, ln) == sinfo_of(x));
  CHECK(infer_error("layer_norm", {tensor({n, 768}), tensor({512}), tensor({768})}, ln) ==
        "layer_norm: gamma dim 0 is 512 but x has 768 at axis 1");
  CHECK(infer_error("layer_norm", {tensor({n, 768}), tensor({768, 1}), tensor({768})}, ln) ==
        "layer_norm: gamma has rank 2 but 1 axes are normalized");
}

TEST_CASE("conv and pooling output dims") {
  SymExpr n = SymExpr::var("n"), h = SymExpr::var("h"), w = SymExpr::var("w");
  Attrs conv{{"strides", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{1, 1, 1, 1}}};
  CHECK(infer_str("conv", {tensor({1, 3, 224, 224}), tensor({64, 3, 3, 3})}, conv) == "Tensor[(1, 64, 112, 112), f32]");
  CHECK(infer_str("conv", {tensor({n, 3, 32, 32}), tensor({16, 3, 5, 5})}) == "Tensor[(n, 16, 28, 28), f32]");
  // Asymmetric padding, dilation.
  CHECK(infer_str("conv", {tensor({1, 8, 10}), tensor({4, 8, 3})},
                  {{"padding", std::vector<int64_t>{2, 0}}, {"dilation", std::vector<int64_t>{2}}}) ==
        "Tensor[(1, 4, 8), f32]");
  // Groups: depthwise.
  CHECK(infer_str("conv", {tensor({1, 32, 7, 7}), tensor({32, 1, 3, 3})},
                  {{"groups", int64_t(32)}, {"padding", std::vector<int64_t>{1}}}) == "Tensor[(1, 32, 7, 7), f32]");
  CHECK(infer_error("conv", {tensor({1, 3, 8, 8}), tensor({8, 4, 3, 3})}) ==
        "conv: input has 3 channels but the weight expects 4 (groups 1)");
  CHECK(infer_error("conv", {tensor({1, 3, 2, 2}), tensor({8, 3, 3, 3})}) ==
        "conv: output size 0 at spatial axis 0 is not positive (input 2, window 3)");
  CHECK(infer_error("conv", {tensor({1, 3, 8}), tensor({8, 3, 3, 3})}) ==
        "conv: input has rank 3 but the weight has rank 4");
  // Symbolic spatial dims.
  Analyzer ana;
  ana.bind(h, 1, 4096);
  ana.bind(w, 1, 4096);
  StructInfo r = infer("conv", {tensor({n, 3, h, w}), tensor({8, 3, 3, 3})}, conv, {}, ana);
  const auto* t = as<TensorSI>(r);
  REQUIRE(t->shape);
  CHECK(t->shape->at(0) == n);
  CHECK(t->shape->at(1).is_const(8));
  CHECK(ana.can_prove_equal(t->shape->at(2), floordiv(h - 1, 2) + 1));
  CHECK(ana.can_prove_equal(t->shape->at(3), floordiv(w - 1, 2) + 1));
  CHECK(infer_str("conv", {tensor({n, 3, h, w}), tensor({8, 3, 1, 1})}) == "Tensor[(n, 8, h, w), f32]");
  CHECK(infer_str("conv", {tensor_ndim(4), tensor({8, 3, 1, 1})}) == "Tensor[ndim=4, f32]");
  CHECK(infer_str("conv", {tensor_ndim(-1), tensor_ndim(-1)}) == "Tensor[f32]");

  Attrs pool{{"pool_size", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}}};
  CHECK(infer_str("max_pool", {tensor({1, 64, 112, 112})}, pool) == "Tensor[(1, 64, 55, 55), f32]");
  pool.set("ceil_mode", true);
  CHECK(infer_str("max_pool", {tensor({1, 64, 112, 112})}, pool) == "Tensor[(1, 64, 56, 56), f32]");
  CHECK(infer_str("avg_pool", {tensor({n, 64, 7, 7})}, {{"pool_size", std::vector<int64_t>{7}}}) ==
        "Tensor[(n, 64, 1, 1), f32]");
  StructInfo p = infer("avg_pool", {tensor({n, 16, h, w})},
                       {{"pool_size", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2}}}, {}, ana);
  CHECK(ana.can_prove_equal(as<TensorSI>(p)->shape->at(2), floordiv(h, 2)));
  CHECK(infer_error("max_pool", {tensor({1, 4, 8, 8})}) == "op 'max_pool' requires attribute 'pool_size' (int list)");
  CHECK(infer_error("max_pool", {tensor({4, 8})}, {{"pool_size", std::vector<int64_t>{2}}}) ==
        "max_pool: input must have rank >= 3 (N, C, spatial...), got 2");
}

TEST_CASE("cross-level calls") {
  SymExpr n = SymExpr::var("n");
  IRModule mod;
  auto a = tir::make_buffer("a", f32, {n, 4}), o = tir::make_buffer("o", f32, {n, 4});
  mod.add_program("relu_prog", tir::make_program("relu_prog", {a}, {o}, {}, tir::make_seq({})));
  mod.add_function("main", make_function({}, make_seq({}, make_tuple({})), tuple_si({})));
  Expr x = tensor({n, 4});
  StructInfo out = tensor_si(f32, {n, 4});
  Analyzer ana;
  CHECK(infer("call_tir", {make_global_var("relu_prog"), make_tuple({x})}, {}, {out}, ana, &mod) == out);
  CHECK(infer("call_tir", {make_global_var("anything"), make_tuple({x})}, {}, {out}) == out);  // no module: unchecked
  auto err = [&](const std::string& callee, std::vector<Expr> args_tail, std::vector<StructInfo> outs) {
    std::vector<Expr> args = {make_global_var(callee)};
    args.insert(args.end(), args_tail.begin(), args_tail.end());
    return error_of([&] { infer("call_tir", args, {}, outs, ana, &mod); });
  };
  CHECK(err("relu_prog", {make_tuple({x})}, {}) == "call_tir needs out=...");
  CHECK(err("foo", {make_tuple({x})}, {out}) == "call_tir: @foo is not a tensor program in the module");
  CHECK(err("main", {make_tuple({x})}, {out}) == "call_tir: @main is not a tensor program in the module");
  CHECK(err("relu_prog", {make_tuple({x, x})}, {out}) == "call_tir: @relu_prog takes 1 inputs, got 2");
  CHECK(err("relu_prog", {make_tuple({x})}, {tuple_si({out, out})}) ==
        "call_tir: @relu_prog writes 1 outputs, but out=... describes 2");
  CHECK(err("relu_prog", {make_tuple({x}), make_shape({n})}, {out}) ==
        "call_tir: @relu_prog takes 0 symbolic arguments, got 1");
  CHECK(err("relu_prog", {make_tuple({x})}, {object_si()}) ==
        "call_tir: out must be a tensor or a tuple of tensors, got Object");
  CHECK(error_of([&] {
          infer("call_tir", {make_string("relu_prog"), make_tuple({x})}, {}, {out}, ana, &mod);
        }) == "call_tir: the callee must be a tensor program @name, got a StringImm");
  CHECK(error_of([&] {
          infer("call_tir", {make_global_var("relu_prog"), x}, {}, {out}, ana, &mod);
        }) == "call_tir: argument 1 must be a tuple, got Tensor");

  CHECK(infer("call_library", {make_string("cblas.sgemm"), make_tuple({x, x})}, {}, {out}) == out);
  CHECK(infer("call_builtin", {make_string("vm.builtin.alloc"), make_tuple({make_shape({n})})}, {}, {object_si()})
            ->kind == SIKind::Object);
  CHECK(error_of([&] { infer("call_builtin", {make_string("f"), make_tuple({})}); }) == "call_builtin needs out=...");
  CHECK(error_of([&] {
          infer("call_library", {x, make_tuple({})}, {}, {out});
        }) == "call_library: the callee must be a name string, got a Var");
}

TEST_CASE("infer_struct_info uses the op rules") {
  SymExpr n = SymExpr::var("n");
  Analyzer ana;
  InferContext ctx{ana, nullptr};
  Expr call = make_op_call("matmul", {tensor({n, 784}), tensor({784, 128})});
  CHECK(show(infer_struct_info(call, ctx)) == "Tensor[(n, 128), f32]");
  Expr bad = make_op_call("matmul", {tensor({n, 768}), tensor({512, 128})});
  CHECK(error_of([&] { infer_struct_info(bad, ctx); }) == "matmul: inner dims 768 and 512 differ");
}
