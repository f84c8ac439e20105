// The conversions (astype, astype_float8) and the broadcasts whose result
// dims are known only at run time (passes/legalize/elementwise.cc,
// passes/legalize/manipulate.cc, runtime/builtins_shape.cc).
#include <doctest/doctest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/legalize/legalize.h"
#include "passes/passes.h"
#include "runtime/error.h"
#include "runtime/vm.h"

using namespace relax;

namespace {

// The legalised module's text; fails the test when it does not verify or
// when `op` is still called.
std::string legalized(const std::string& text, const std::vector<std::string>& ops) {
  IRModule mod = legalize(parse_module(text));
  for (const std::string& e : verify(mod)) FAIL_CHECK(e);
  std::string out = print_module(mod);
  for (const std::string& op : ops) {
    INFO(op, "\n", out);
    CHECK(out.find("= " + op + "(") == std::string::npos);
  }
  return out;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

rt::Value call_builtin(const std::string& name, std::vector<rt::Value> args) {
  static rt::VirtualMachine vm(
      rt::Executable{}, [](const std::string&) { return rt::Tensor(); }, nullptr);
  const rt::Builtin* fn = rt::find_builtin(name);
  REQUIRE(fn);
  std::vector<int64_t> heap;
  std::vector<const rt::Value*> ptrs;
  for (const rt::Value& a : args) ptrs.push_back(&a);
  rt::Value out;
  rt::BuiltinCall c{vm, heap, ptrs.data(), ptrs.size(), out};
  (*fn)(c);
  return out;
}

}  // namespace

TEST_CASE("legalize: astype to a float8 type saturates, as ONNX Cast's default") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(n, 4), f32], h: Tensor[(3,), f16], e: Tensor[(3,), f8e5m2]) -> Tensor[(3,), f8e4m3fnuz] {
  a: Tensor[(n, 4), f8e4m3fn] = astype(x, dtype=f8e4m3fn)
  b: Tensor[(3,), f8e5m2] = astype(h, dtype=f8e5m2)
  c: Tensor[(3,), f8e4m3fnuz] = astype(e, dtype=f8e4m3fnuz)
  d: Tensor[(n, 4), f8e4m3fn] = astype_float8(x, dtype=f8e4m3fn, saturate=false)
  return c
}
)",
                              {"astype", "astype_float8"});
  INFO(out);
  CHECK(has(out, "cast(f8e4m3fn, select(isnan(x[i0, i1]), x[i0, i1], min(max(x[i0, i1], -448.0f32), 448.0f32)))"));
  // The bounds in f32: f16 would hold them, e5m2 would not hold 240.
  CHECK(has(out, "min(max(cast(f32, x[i0]), -57344.0f32), 57344.0f32)"));
  CHECK(has(out, "min(max(cast(f32, x[i0]), -240.0f32), 240.0f32)"));
  // Not saturating: the cast alone (NaN or inf by the type's encoding).
  CHECK(has(out, "= cast(f8e4m3fn, x[i0, i1])"));
}

TEST_CASE("legalize: floats to the sub-byte integers keep the low bits of a wide integer") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(5,), f32], h: Tensor[(7,), f16], i: Tensor[(5,), i32]) -> Tensor[(5,), i4] {
  a: Tensor[(5,), i4] = astype(x, dtype=i4)
  b: Tensor[(7,), u2] = astype(h, dtype=u2)
  c: Tensor[(5,), u4] = astype(i, dtype=u4)
  d: Tensor[(5,), i8] = astype(x, dtype=i8)
  return a
}
)",
                              {"astype"});
  INFO(out);
  CHECK(has(out, "cast(i4, cast(i32, x[i0]))"));
  CHECK(has(out, "cast(u2, cast(i32, x[i0]))"));
  CHECK(has(out, "= cast(u4, x[i0])"));
  CHECK(has(out, "= cast(i8, x[i0])"));
}

TEST_CASE("legalize: a broadcast of different dim variables gets its shape at run time") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(n, m), f32], y: Tensor[(a, b), f32], c: Tensor[(b,), bool]) -> Tensor[ndim=2, f32] {
  s: Tensor[ndim=2, f32] = subtract(x, y)
  w: Tensor[ndim=2, f32] = where(c, x, y)
  return s
}
)",
                              {"subtract", "where"});
  INFO(out);
  // The operands, then the variable the call binds (named in an error).
  CHECK(has(out, "call_pure_builtin(\"relax.broadcast_shape\", (x, y, \"s\"), out=Shape[ndim=2])"));
  CHECK(has(out, "call_pure_builtin(\"relax.broadcast_shape\", (c, x, y, \"w\"), out=Shape[ndim=2])"));
  CHECK(has(out, "Shape[(bcast_d0, bcast_d1)]"));
  // Each operand is read with run-time selects.
  CHECK(has(out, "a[select(n == 1, 0, i0), select(m == 1, 0, i1)] - b[select(a_1 == 1, 0, i0), select(b_1 == 1, 0, i1)]"));
}

TEST_CASE("legalize: a broadcast whose dim was chosen by order is checked at run time") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(b, s, 8), f32], pos: Tensor[(1, min(s, 512), 8), f32], y: Tensor[(b, s, 8), f32]) -> Tensor[(b, s, 8), f32] {
  h: Tensor[(b, s, 8), f32] = add(x, pos)
  k: Tensor[(b, s, 8), f32] = add(h, y)
  return k
}
)",
                              {"add"});
  INFO(out);
  // The operands' shapes (no tensor is read) broadcast to h's, or the run stops naming h.
  CHECK(has(out, "h_broadcast: Shape[ndim=3] = call_pure_builtin(\"relax.broadcast_shape\", (shape(b, s, 8), "
                 "shape(1, min(s, 512), 8), \"h\"), out=Shape[ndim=3])"));
  CHECK(has(out, "h_broadcast_checked = match_cast(h_broadcast, Shape[(b, s, 8)])"));
  // k's operands have h's dims: nothing to check.
  CHECK(!has(out, "k_broadcast"));
}

TEST_CASE("legalize: concat of parts whose other dims are different variables") {
  std::string out = legalized(R"(
fn @main(x: Tensor[(a, b, 1), f32], y: Tensor[(c, d, 2), f32]) -> Tensor[ndim=3, f32] {
  r: Tensor[ndim=3, f32] = concat((x, y), axis=-1)
  return r
}
)",
                              {"concat"});
  INFO(out);
  // y is checked at run time to have x's other dims.
  CHECK(has(out, "match_cast(y, Tensor[(a, b, 2), f32])"));
  CHECK(has(out, "out=Tensor[(a, b, 3), f32]"));
}

TEST_CASE("runtime: relax.broadcast_shape") {
  auto shape = [](std::vector<int64_t> d) { return rt::Value(rt::make_shape(std::move(d))); };
  rt::Tensor t = rt::Tensor::empty(rt::DType::f32(), {3, 1});
  CHECK(call_builtin("relax.broadcast_shape", {t, shape({2, 1, 4})}).shape() == std::vector<int64_t>{2, 3, 4});
  CHECK(call_builtin("relax.broadcast_shape", {shape({}), int64_t(2)}).shape().empty());
  CHECK(call_builtin("relax.broadcast_shape", {shape({0, 1}), shape({1, 5})}).shape() == std::vector<int64_t>{0, 5});
  CHECK(call_builtin("relax.broadcast_shape", {t, shape({1, 1})}).shape() == std::vector<int64_t>{3, 1});
  try {
    call_builtin("relax.broadcast_shape", {t, shape({2, 4})});
    FAIL("expected an error");
  } catch (const rt::Error& e) {
    std::string m = e.what();
    INFO(m);
    CHECK(has(m, "dim 0 of the result"));
    CHECK(has(m, "has 3"));
    CHECK(has(m, "has 2"));
    CHECK(has(m, "[3, 1] and [2, 4]"));
  }
  // A label (the checked value's name) is named in the error.
  try {
    call_builtin("relax.broadcast_shape", {t, shape({2, 4}), std::string("/h.0/attn/Where_output_0")});
    FAIL("expected an error");
  } catch (const rt::Error& e) {
    CHECK(has(e.what(), "broadcast_shape of '/h.0/attn/Where_output_0': dim 0"));
  }
  CHECK(call_builtin("relax.broadcast_shape", {t, shape({1, 1}), std::string("x")}).shape() ==
        std::vector<int64_t>{3, 1});
}
