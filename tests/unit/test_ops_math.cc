// The struct-info rules of ir/ops/math.cc.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/struct_info.h"

using namespace relax;

namespace {

// Tensor[(2, n), f32], Tensor[ndim=2, f32], Prim[f32], ...
std::string show_math(const StructInfo& si) {
  if (const auto* t = as<TensorSI>(si)) {
    std::string s = "Tensor[";
    if (t->shape) {
      s += "(";
      for (size_t i = 0; i < t->shape->size(); ++i) s += (i ? ", " : "") + to_string((*t->shape)[i]);
      s += ")";
    } else if (t->ndim >= 0) {
      s += "ndim=" + std::to_string(t->ndim);
    }
    if (!t->dtype.is_void()) s += (s.size() > 7 ? ", " : "") + t->dtype.str();
    return s + "]";
  }
  if (const auto* p = as<PrimSI>(si)) return "Prim[" + p->dtype.str() + "]";
  return "?";
}

Expr var(StructInfo si) { return make_var("x", std::move(si)); }

std::string infer_math(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  try {
    return show_math(c->op()->infer(*c, InferContext{ana, nullptr}));
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

const DataType f32 = DataType::f32();
const DataType f16 = DataType::f16();
const DataType i32 = DataType::i32();
const DataType i64 = DataType::i64();

}  // namespace

TEST_CASE("math: inverse and hyperbolic trigonometry keep the operand's struct info") {
  SymExpr n = SymExpr::var("n");
  for (const char* op : {"asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}) {
    REQUIRE_MESSAGE(find_op(op) != nullptr, op);
    CHECK(infer_math(op, {var(tensor_si(f32, {n, 4}))}) == "Tensor[(n, 4), f32]");
    CHECK(infer_math(op, {var(tensor_si_ndim(f16, 3))}) == "Tensor[ndim=3, f16]");
    CHECK(infer_math(op, {var(prim_si(f32))}) == "Prim[f32]");
  }
  CHECK(infer_math("asin", {var(tensor_si(i64, {2}))}).find("error: asin:") == 0);
}

TEST_CASE("math: fmod broadcasts like the other binary ops") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer_math("fmod", {var(tensor_si(i32, {n, 1})), var(tensor_si(i32, {3}))}) == "Tensor[(n, 3), i32]");
  CHECK(infer_math("fmod", {var(tensor_si(f32, {2, 3})), var(tensor_si_ndim(f32, -1))}) == "Tensor[f32]");
  CHECK(infer_math("fmod", {var(prim_si(i64)), var(prim_si(i64))}) == "Prim[i64]");
  CHECK(infer_math("fmod", {var(tensor_si(f32, {2})), var(tensor_si(i32, {2}))}).find("error: fmod:") == 0);
  CHECK(infer_math("fmod", {var(tensor_si(f32, {2})), var(tensor_si(f32, {3}))}).find("error: fmod:") == 0);
}

TEST_CASE("math: astype_float8 converts to float8 types only") {
  SymExpr n = SymExpr::var("n");
  DataType e4m3 = *DataType::parse("f8e4m3fn");
  DataType e8m0 = *DataType::parse("f8e8m0");
  CHECK(infer_math("astype_float8", {var(tensor_si(f32, {n, 2}))}, {{"dtype", e4m3}, {"saturate", false}}) ==
        "Tensor[(n, 2), f8e4m3fn]");
  CHECK(infer_math("astype_float8", {var(tensor_si(f16, {3}))},
                   {{"dtype", e8m0}, {"round_mode", std::string("nearest")}}) == "Tensor[(3), f8e8m0]");
  CHECK(infer_math("astype_float8", {var(prim_si(f32))}, {{"dtype", e4m3}}) == "Prim[f8e4m3fn]");
  CHECK(infer_math("astype_float8", {var(tensor_si(f32, {3}))}, {{"dtype", f16}}).find("error: astype_float8:") == 0);
  CHECK(infer_math("astype_float8", {var(tensor_si(f32, {3}))}, {{"dtype", e8m0}, {"round_mode", std::string("odd")}})
            .find("error: astype_float8: round_mode") == 0);
  const OpInfo* op = find_op("astype_float8");
  REQUIRE(op != nullptr);
  Attrs a = check_op_attrs(*op, {{"dtype", e4m3}}, 1);
  CHECK(a.get_bool("saturate") == true);
  CHECK(a.get_string("round_mode") == "up");
}

TEST_CASE("math: bitcast needs equal bit widths") {
  SymExpr n = SymExpr::var("n");
  CHECK(infer_math("bitcast", {var(tensor_si(f32, {n}))}, {{"dtype", i32}}) == "Tensor[(n), i32]");
  CHECK(infer_math("bitcast", {var(tensor_si(DataType::boolean(), {2}))}, {{"dtype", DataType::u(8)}}) ==
        "Tensor[(2), u8]");
  CHECK(infer_math("bitcast", {var(prim_si(DataType::f(64)))}, {{"dtype", i64}}) == "Prim[i64]");
  CHECK(infer_math("bitcast", {var(tensor_si_ndim(DataType::void_(), 2))}, {{"dtype", i64}}) == "Tensor[ndim=2, i64]");
  CHECK(infer_math("bitcast", {var(tensor_si(f32, {2}))}, {{"dtype", i64}}) ==
        "error: bitcast: f32 (32 bits) and i64 (64 bits) differ in width");
}
