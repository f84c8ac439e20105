// The struct-info rules of ir/ops/index.cc and of shape_to_tensor /
// tensor_to_shape (ir/ops/manipulate.cc).
#include <doctest/doctest.h>

#include <string>

#include "ir/error.h"
#include "ir/op.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

// Tensor[(2, n), f32], Tensor[ndim=2, f32], Shape[(3,)], Tuple[...].
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
  if (const auto* s = as<ShapeSI>(si))
    return s->values ? "Shape[" + dims(*s->values) + "]" : "Shape[ndim=" + std::to_string(s->ndim) + "]";
  if (const auto* t = as<TupleSI>(si)) {
    std::string s = "Tuple[";
    for (size_t i = 0; i < t->fields.size(); ++i) s += (i ? ", " : "") + show(t->fields[i]);
    return s + "]";
  }
  return "?";
}

Expr tensor(std::vector<SymExpr> dims, DataType dtype = f32) {
  return make_var("x", tensor_si(dtype, std::move(dims)));
}
Expr scalar(DataType dtype = f32) { return tensor({}, dtype); }

StructInfo infer(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  return c->op()->infer(*c, InferContext{ana, nullptr});
}

std::string error_of(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  try {
    infer(op, std::move(args), std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("shape_to_tensor and tensor_to_shape") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("shape_to_tensor", {make_shape({n, 4, 5})})) == "Tensor[(3,), i64]");
  CHECK(show(infer("shape_to_tensor", {make_shape({n})}, {{"dtype", DataType::i32()}})) == "Tensor[(1,), i32]");
  CHECK(show(infer("tensor_to_shape", {tensor({3}, i64)})) == "Shape[ndim=3]");
  CHECK(show(infer("tensor_to_shape", {tensor({n}, i64)})) == "Shape[ndim=-1]");
  CHECK(error_of("tensor_to_shape", {tensor({2, 3}, i64)}).find("rank-1") != std::string::npos);
  CHECK(error_of("tensor_to_shape", {tensor({3}, f32)}).find("integer") != std::string::npos);
}

TEST_CASE("gather_elements and gather_nd") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("gather_elements", {tensor({n, 4}), tensor({n, 2}, i64)}, {{"axis", int64_t(1)}})) ==
        "Tensor[(n, 2), f32]");
  CHECK(error_of("gather_elements", {tensor({n, 4}), tensor({2}, i64)}).find("rank") != std::string::npos);
  CHECK(error_of("gather_elements", {tensor({n, 4}), tensor({n, 2}, i64)}, {{"axis", int64_t(2)}}).find("axis") !=
        std::string::npos);
  // indices (2, 2, 1) into (2, 2, 3) with one batch dim: (2, 2) + x.shape[2:]
  CHECK(show(infer("gather_nd", {tensor({2, 2, 3}), tensor({2, 2, 1}, i64)}, {{"batch_dims", int64_t(1)}})) ==
        "Tensor[(2, 2, 3), f32]");
  CHECK(show(infer("gather_nd", {tensor({n, 5}), tensor({7, 2}, i64)})) == "Tensor[(7,), f32]");
  CHECK(show(infer("gather_nd", {tensor({n, 5}), tensor({7, n}, i64)})) == "Tensor[f32]");
  CHECK(error_of("gather_nd", {tensor({n, 5}), tensor({7, 3}, i64)}).find("do not fit") != std::string::npos);
  CHECK(error_of("gather_nd", {tensor({2, 5}), tensor({3, 1}, i64)}, {{"batch_dims", int64_t(1)}}).find("batch") !=
        std::string::npos);
}

TEST_CASE("scatter_elements and scatter_nd") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("scatter_elements", {tensor({n, 4}), tensor({1, 2}, i64), tensor({1, 2})},
                   {{"reduction", std::string("add")}})) == "Tensor[(n, 4), f32]");
  CHECK(error_of("scatter_elements", {tensor({n, 4}), tensor({1, 2}, i64), tensor({1, 3})}).find("differ") !=
        std::string::npos);
  CHECK(error_of("scatter_elements", {tensor({4}), tensor({1}, i64), tensor({1})}, {{"reduction", std::string("sub")}})
            .find("reduction") != std::string::npos);
  CHECK(show(infer("scatter_nd", {tensor({4, 4, 4}), tensor({2, 1}, i64), tensor({2, 4, 4})})) ==
        "Tensor[(4, 4, 4), f32]");
  CHECK(error_of("scatter_nd", {tensor({4, 4, 4}), tensor({2, 1}, i64), tensor({2, 4})}).find("rank") !=
        std::string::npos);
}

TEST_CASE("one_hot, nonzero and unique") {
  SymExpr n = SymExpr::var("n"), d = SymExpr::var("d");
  CHECK(show(infer("one_hot", {tensor({n, 3}, i64), tensor({2}), make_shape({d})})) == "Tensor[(n, 3, d), f32]");
  CHECK(show(infer("one_hot", {tensor({n, 3}, i64), tensor({2}), make_shape({10})}, {{"axis", int64_t(1)}})) ==
        "Tensor[(n, 10, 3), f32]");
  CHECK(show(infer("one_hot", {tensor({n}, i64), tensor({2}), make_var("s", shape_si_ndim(1))})) ==
        "Tensor[ndim=2, f32]");
  CHECK(error_of("one_hot", {tensor({n}, i64), tensor({3}), make_shape({4})}).find("differ") != std::string::npos);
  CHECK(show(infer("nonzero", {tensor({n, 3})})) == "Tensor[ndim=2, i64]");
  CHECK(show(infer("unique", {tensor({n, 3})}, {{"axis", int64_t(1)}})) ==
        "Tuple[Tensor[ndim=2, f32], Tensor[ndim=1, i64], Tensor[(3,), i64], Tensor[ndim=1, i64]]");
  CHECK(error_of("unique", {tensor({})}).find("rank >= 1") != std::string::npos);
}

TEST_CASE("trilu and reverse_sequence") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("trilu", {tensor({2, n, 5}), scalar(i64)}, {{"upper", false}})) == "Tensor[(2, n, 5), f32]");
  CHECK(error_of("trilu", {tensor({5}), scalar(i64)}).find("rank >= 2") != std::string::npos);
  CHECK(error_of("trilu", {tensor({5, 5}), tensor({1}, i64)}).find("scalar") != std::string::npos);
  CHECK(show(infer("reverse_sequence", {tensor({n, 4, 3}), tensor({4}, i64)})) == "Tensor[(n, 4, 3), f32]");
  CHECK(error_of("reverse_sequence", {tensor({n, 4}), tensor({5}, i64)}).find("differ") != std::string::npos);
  CHECK(error_of("reverse_sequence", {tensor({n, 4}), tensor({4}, i64)}, {{"time_axis", int64_t(1)}}).find("both") !=
        std::string::npos);
}

TEST_CASE("pad and tile") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("pad", {tensor({n, 4}), make_shape({1, 0, 2, -1}), scalar()})) == "Tensor[(n + 3, 3), f32]");
  CHECK(show(infer("pad", {tensor({n, 4}), make_var("p", shape_si_ndim(4)), scalar()},
                   {{"mode", std::string("reflect")}})) == "Tensor[ndim=2, f32]");
  CHECK(error_of("pad", {tensor({n, 4}), make_shape({1, 2}), scalar()}).find("needs 4") != std::string::npos);
  CHECK(error_of("pad", {tensor({4}), make_shape({-3, -3}), scalar()}).find("negative") != std::string::npos);
  CHECK(error_of("pad", {tensor({4}), make_shape({1, 1}), scalar()}, {{"mode", std::string("mirror")}}).find("mode") !=
        std::string::npos);
  CHECK(show(infer("tile", {tensor({n, 4}), make_shape({2, n})})) == "Tensor[(n * 2, n * 4), f32]");
  CHECK(error_of("tile", {tensor({n, 4}), make_shape({2})}).find("needs 2") != std::string::npos);
}

TEST_CASE("arange, eye and col2im") {
  SymExpr n = SymExpr::var("n");
  CHECK(show(infer("arange", {make_shape({n}), scalar(i64), scalar(i64)})) == "Tensor[(n,), i64]");
  CHECK(show(infer("arange", {make_var("s", shape_si_ndim(1)), scalar(), scalar()})) == "Tensor[ndim=1, f32]");
  CHECK(error_of("arange", {make_shape({n}), scalar(i64), scalar()}).find("differ") != std::string::npos);
  CHECK(show(infer("eye", {make_shape({n, 4})}, {{"dtype", f32}, {"k", int64_t(1)}})) == "Tensor[(n, 4), f32]");
  CHECK(show(infer("col2im", {tensor({1, 10, 12}), make_shape({3, 4, 5}), make_shape({1, 1, 5})})) ==
        "Tensor[(1, 2, 3, 4, 5), f32]");
  CHECK(error_of("col2im", {tensor({1, 7, 12}), make_shape({5, 5}), make_shape({1, 5})}).find("multiple") !=
        std::string::npos);
}

TEST_CASE("dynamic_strided_slice") {
  SymExpr n = SymExpr::var("n");
  Expr v = tensor({2}, i64);
  CHECK(show(infer("dynamic_strided_slice", {tensor({n, 4}), v, v, v, v})) == "Tensor[ndim=2, f32]");
  CHECK(error_of("dynamic_strided_slice", {tensor({n, 4}), v, v, tensor({2}), v}).find("integer") != std::string::npos);
}
