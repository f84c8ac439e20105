// Tensor-program builders: Sym folding, typing rules and their errors,
// statement builders and the name tables.
#include <doctest/doctest.h>

#include "ir/error.h"
#include "ir/tir.h"

using namespace relax;
using namespace relax::tir;

namespace {

const DataType f32 = DataType::f32();
const DataType i32 = DataType::i32();
const DataType i64 = DataType::i64();
const DataType boolean = DataType::boolean();

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("binary ops on two Syms fold into one canonical Sym") {
  SymExpr n = SymExpr::var("n"), i = SymExpr::var("i");
  auto e = binary(BinOp::Add, binary(BinOp::Mul, sym(i), sym(4)), sym(n));
  auto s = as<SymNodeT>(e);
  REQUIRE(s);
  CHECK(s->value == i * 4 + n);
  CHECK(e->dtype == i64);
  CHECK(as<SymNodeT>(binary(BinOp::FloorDiv, sym(n * 8), sym(8)))->value == floordiv(n * 8, 8));
  CHECK(as<SymNodeT>(binary(BinOp::Min, sym(n), sym(i)))->value == min(n, i));
  CHECK(as<SymNodeT>(unary(UnOp::Neg, sym(n)))->value == -n);
  // Comparisons and true division stay binary nodes.
  TExpr cmp = binary(BinOp::LT, sym(i), sym(n));
  auto c = as<BinaryNode>(cmp);
  REQUIRE(c);
  CHECK(c->dtype == boolean);
  CHECK(c->op == BinOp::LT);
  CHECK(as<BinaryNode>(binary(BinOp::Div, sym(i), sym(n)))->dtype == i64);
  CHECK(error_of([&] { binary(BinOp::FloorMod, sym(n), sym(0)); }).find("division by zero") != std::string::npos);
}

TEST_CASE("binary typing rules") {
  Buffer x = make_buffer("x", f32, {SymExpr(8)});
  TExpr xv = load(x, {sym(0)});
  CHECK(binary(BinOp::Add, xv, imm(f32, 1.0))->dtype == f32);
  CHECK(error_of([&] { binary(BinOp::Add, xv, imm_int(i32, 1)); }) == "binary '+': operand dtypes f32 and i32 differ");
  CHECK(error_of([&] { binary(BinOp::BitAnd, xv, xv); }).find("bitwise") != std::string::npos);
  CHECK(error_of([&] { binary(BinOp::Shl, imm_int(boolean, 1), imm_int(boolean, 0)); }).find("shift") !=
        std::string::npos);
  CHECK(error_of([&] { binary(BinOp::And, xv, xv); }).find("must be bool") != std::string::npos);
  CHECK(error_of([&] { binary(BinOp::Add, imm_int(boolean, 1), imm_int(boolean, 1)); }) != "");
  // Comparisons give bool with the operands' lanes.
  TExpr v = cast(f32.with_lanes(4), xv);
  CHECK(binary(BinOp::GE, v, v)->dtype == boolean.with_lanes(4));
  CHECK(binary(BinOp::And, imm_int(boolean, 1), imm_int(boolean, 0))->dtype == boolean);
  CHECK(binary(BinOp::BitXor, imm_int(i32, 6), imm_int(i32, 3))->dtype == i32);
}

TEST_CASE("immediates, casts, selects, intrinsics, loads") {
  CHECK(imm_int(boolean, 7)->kind == TKind::Imm);
  CHECK(as<ImmNode>(imm_int(boolean, 7))->int_value == 1);
  CHECK(error_of([] { imm(i32, 1.0); }) != "");
  CHECK(error_of([] { imm_int(f32, 1); }) != "");

  TExpr a = imm(f32, 2.0);
  CHECK(cast(f32, a) == a);  // same dtype: the same node
  CHECK(cast(i32, a)->dtype == i32);
  CHECK(error_of([&] { cast(f32.with_lanes(4), cast(f32.with_lanes(2), a)); }).find("lane") != std::string::npos);

  TExpr c = binary(BinOp::GT, a, imm(f32, 0.0));
  CHECK(select(c, a, imm(f32, 0.0))->dtype == f32);
  CHECK(error_of([&] { select(a, a, a); }) == "select: the condition must be bool, got f32");
  CHECK(error_of([&] { select(c, a, imm_int(i32, 0)); }) == "select: operand dtypes f32 and i32 differ");

  CHECK(call(Intrinsic::exp, {a})->dtype == f32);
  CHECK(call(Intrinsic::isnan, {a})->dtype == boolean);
  CHECK(call(Intrinsic::abs, {imm_int(i32, -3)})->dtype == i32);
  CHECK(error_of([&] { call(Intrinsic::pow, {a}); }) == "intrinsic 'pow' takes 2 arguments, got 1");
  CHECK(error_of([&] { call(Intrinsic::exp, {imm_int(i32, 1)}); }).find("'exp'") != std::string::npos);
  CHECK(error_of([&] { call(Intrinsic::fma, {a, a, imm(DataType::f16(), 1.0)}); }).find("differ") != std::string::npos);

  Buffer b = make_buffer("b", DataType::f16(), {SymExpr(4), SymExpr::var("n")});
  CHECK(load(b, {sym(0), sym(1)})->dtype == DataType::f16());
  CHECK(error_of([&] { load(b, {sym(0)}); }) == "load from 'b': 1 indices for a buffer of rank 2");
  CHECK(error_of([&] { load(b, {sym(0), a}); }).find("index has dtype f32") != std::string::npos);
}

TEST_CASE("statement builders") {
  SymExpr n = SymExpr::var("n"), i = SymExpr::var("i");
  Buffer y = make_buffer("y", f32, {n});
  Stmt st = make_store(y, {sym(i)}, imm(f32, 0.0));
  CHECK(error_of([&] { make_store(y, {sym(i)}, imm_int(i32, 0)); }) ==
        "store to 'y': value dtype i32 differs from the buffer's f32");

  // Nested sequences flatten; a single statement stands alone.
  Stmt seq = make_seq({st, make_seq({st, make_barrier()})});
  auto s = as<SeqNode>(seq);
  REQUIRE(s);
  CHECK(s->stmts.size() == 3);
  CHECK(make_seq({st}) == st);

  Stmt loop = make_for(i, n, LoopKind::Parallel, st);
  CHECK(as<ForNode>(loop)->extent == n);
  CHECK(error_of([&] { make_for(i + 1, n, LoopKind::Serial, st); }).find("loop variable") != std::string::npos);
  CHECK(error_of([&] { make_if(imm(f32, 1.0), st); }) != "");
  CHECK(as<IfThenElseNode>(make_if(binary(BinOp::LT, sym(i), sym(n)), st))->else_case == nullptr);
  CHECK(make_allocate(y, st)->kind == SKind::Allocate);  // global: a workspace (the verifier checks where)
  Buffer tmp = make_buffer("tmp", f32, {SymExpr(1)}, Scope::Local);
  CHECK(make_allocate(tmp, st)->kind == SKind::Allocate);

  Buffer x = make_buffer("x", f32, {n});
  Program p = make_program("copy", {x}, {y}, {}, loop);
  CHECK(p->name == "copy");
  CHECK(p->inputs.size() == 1);
  CHECK(p->outputs[0] == y);
}

TEST_CASE("name tables") {
  CHECK(std::string(binop_text(BinOp::FloorDiv)) == "//");
  CHECK(std::string(binop_text(BinOp::Shr)) == ">>");
  CHECK(binop_is_compare(BinOp::NE));
  CHECK(!binop_is_compare(BinOp::And));
  CHECK(binop_is_logical(BinOp::Or));
  CHECK(std::string(unop_text(UnOp::BitNot)) == "~");
  CHECK(std::string(intrinsic_name(Intrinsic::atan2)) == "atan2");
  CHECK(intrinsic_arity(Intrinsic::fma) == 3);
  CHECK(find_intrinsic("sigmoid") == Intrinsic::sigmoid);
  CHECK(!find_intrinsic("nope"));
  CHECK(std::string(loop_kind_text(LoopKind::ThreadY)) == "threadIdx.y");
  CHECK(find_loop_kind("range") == LoopKind::Serial);
  CHECK(find_loop_kind("blockIdx.z") == LoopKind::BlockZ);
  CHECK(!find_loop_kind("serial"));
  CHECK(std::string(scope_name(Scope::Shared)) == "shared");
}
