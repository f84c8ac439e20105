// The text format round trip: every file of tests/ir/roundtrip/ is written in
// canonical printed form, so parse + print gives it back byte for byte, and
// parsing the printed text prints the same again. Plus the printer's naming,
// number spelling and the parser's scoping and struct-info deduction.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace relax;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// "" when equal, else the first differing line of each side.
std::string first_difference(const std::string& expected, const std::string& actual) {
  if (expected == actual) return "";
  auto e = split_lines(expected), a = split_lines(actual);
  size_t n = std::max(e.size(), a.size());
  for (size_t i = 0; i < n; ++i) {
    std::string el = i < e.size() ? e[i] : "<end of text>";
    std::string al = i < a.size() ? a[i] : "<end of text>";
    if (el != al) return cat("line ", i + 1, ":\n  - ", el, "\n  + ", al);
  }
  return "the texts differ in their final newlines";
}

std::string print_of(const std::string& text) { return print_module(parse_module(text)); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("roundtrip: every corpus file prints back exactly") {
  std::filesystem::path dir = std::filesystem::path(RELAX_SOURCE_DIR) / "tests/ir/roundtrip";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".relax") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 40);
  for (const auto& path : files) {
    std::string name = path.filename().string();
    std::string text = read_file(path);
    std::string printed, again;
    try {
      printed = print_module(parse_module(text, name));
      again = print_module(parse_module(printed, name + " (printed)"));
    } catch (const Error& e) {
      FAIL_CHECK(name << ": " << e.what());
      continue;
    }
    std::string diff = first_difference(text, printed);
    if (!diff.empty()) FAIL_CHECK(name << ": the printed text differs from the file at " << diff);
    diff = first_difference(printed, again);
    if (!diff.empty()) FAIL_CHECK(name << ": printing the reparsed text differs at " << diff);
  }
}

TEST_CASE("roundtrip: distinct variables with one name get suffixes") {
  SymExpr n1 = SymExpr::var("n"), n2 = SymExpr::var("n");
  StructInfo t1 = tensor_si(DataType::f32(), {n1}), t2 = tensor_si(DataType::f32(), {n2});
  Var x1 = make_var("x", t1), x2 = make_var("x", t2);
  Var y = make_var("x_1", t1);  // its own name is taken by the time it prints
  Var d1 = make_dataflow_var("lv", t1), d2 = make_dataflow_var("lv", t1);
  BindingBlock df{true, {{d1, x1, nullptr}, {d2, d1, nullptr}, {y, d2, nullptr}}};
  Function f = make_function({x1, x2}, make_seq({df}, make_tuple({y, x2})), tuple_si({t1, t2}));
  std::string text = print_function("f", f);
  CHECK(text ==
        "fn @f(x: Tensor[(n,), f32], x_1: Tensor[(n_1,), f32]) -> Tuple[Tensor[(n,), f32], Tensor[(n_1,), f32]] {\n"
        "  dataflow {\n"
        "    %lv: Tensor[(n,), f32] = x\n"
        "    %lv_1: Tensor[(n,), f32] = %lv\n"
        "    x_1_1: Tensor[(n,), f32] = %lv_1\n"
        "  }\n"
        "  return (x_1_1, x_1)\n"
        "}\n");
  IRModule mod;
  mod.add_function("f", f);
  CHECK(print_of(print_module(mod)) == print_module(mod));
}

TEST_CASE("roundtrip: names that would not read back are changed or quoted") {
  StructInfo t = tensor_si(DataType::f32(), {4});
  Var a = make_var("a:b", t), r = make_var("relu", t), k = make_var("if", t), e = make_var("", t);
  Var q = make_dataflow_var("x/0", t);
  BindingBlock df{true, {{q, a, nullptr}, {r, q, nullptr}}};
  BindingBlock plain{false, {{k, r, nullptr}, {e, k, nullptr}}};
  Function f = make_function({a}, make_seq({df, plain}, e), t);
  IRModule mod;
  mod.add_function("layer/0", f);
  std::string text = print_module(mod);
  CHECK(text ==
        "fn @\"layer/0\"(a_b: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n"
        "  dataflow {\n"
        "    %\"x/0\": Tensor[(4,), f32] = a_b\n"
        "    relu_1: Tensor[(4,), f32] = %\"x/0\"\n"
        "  }\n"
        "  if_1: Tensor[(4,), f32] = relu_1\n"
        "  _: Tensor[(4,), f32] = if_1\n"
        "  return _\n"
        "}\n");
  CHECK(print_of(text) == text);
}

TEST_CASE("roundtrip: floats print with the fewest digits that read back") {
  CHECK(print_expr(make_prim_float(0.1)) == "prim(0.1, f32)");
  CHECK(print_expr(make_prim_float(100.0)) == "prim(100.0, f32)");
  CHECK(print_expr(make_prim_float(1e-05, DataType::f(64))) == "prim(1e-05, f64)");
  CHECK(print_expr(make_prim_float(1e20)) == "prim(1e+20, f32)");
  CHECK(print_expr(make_prim_float(1.0 / 3.0, DataType::f(64))) == "prim(0.3333333333333333, f64)");
  CHECK(print_expr(make_prim_float(-std::numeric_limits<double>::infinity())) == "prim(-inf, f32)");
  CHECK(print_texpr(tir::imm(DataType::f16(), 2.0)) == "2.0f16");
  CHECK(print_texpr(tir::imm(DataType::bf16(), std::numeric_limits<double>::quiet_NaN())) == "bf16.nan");
  CHECK(print_texpr(tir::imm(DataType::f32(), -std::numeric_limits<double>::infinity())) == "-f32.inf");
  CHECK(print_texpr(tir::imm_int(DataType::u(8), 255)) == "255u8");
  CHECK(print_texpr(tir::imm_int(DataType::boolean(), 1)) == "true");
  // Every double survives print + parse.
  for (double v : {0.1, 1.0 / 3.0, 6.02214076e23, 5e-324, 1.7976931348623157e308, -0.0, 123456789.125}) {
    std::string text = print_expr(make_prim_float(v, DataType::f(64)));
    std::string src = "fn @f() -> Prim[f64] {\n  return " + text + "\n}\n";
    IRModule m = parse_module(src);
    auto* p = as<PrimValueNode>(m.function("f")->body->body);
    REQUIRE(p);
    CHECK(p->float_value == v);
    CHECK(std::signbit(p->float_value) == std::signbit(v));
  }
}

TEST_CASE("roundtrip: struct info text") {
  for (const char* s :
       {"Object", "Prim[i64]", "Prim[i64, n + 1]", "Shape", "Shape[ndim=2]", "Shape[(n, 4)]", "Shape[()]", "Tensor",
        "Tensor[f32]", "Tensor[ndim=2, f32]", "Tensor[(n,), f32]", "Tensor[ndim=2]", "Tensor[(n, 4)]", "Tuple[]",
        "Tuple[Tensor[(n,), f32], Shape[(n,)]]", "Func[(Tensor[(n,), f32], Prim[i64]) -> Tensor[(n,), f32]]",
        "Func[... -> Object]", "Func[(Object) -> Object, impure]", "Func[... -> Object, impure]", "List",
        "List[Tensor[ndim=2, f32]]", "List[Tensor[(3, 4), i64]]"})
    CHECK(print_sinfo(parse_sinfo(s)) == s);
  CHECK(print_sinfo(parse_sinfo("Tensor[ (n ,4) , f32 ]")) == "Tensor[(n, 4), f32]");
  CHECK(print_sinfo(parse_sinfo("Shape[(n)]")) == "Shape[(n,)]");
  CHECK(error_of([] { parse_sinfo("Tensor[(n,), f32] x"); }) == "<input>:1:19: expected end of input but found 'x'");
}

TEST_CASE("roundtrip: unannotated bindings take the deduced struct info, also across forward calls") {
  IRModule m = parse_module(
      "fn @main(x: Tensor[(n, 8), f32]) -> Tensor[(n, 8), f32] {\n"
      "  y = @helper(x)\n"
      "  t = (y, shape(n))\n"
      "  z = t[0]\n"
      "  return z\n"
      "}\n"
      "\n"
      "fn @helper(a: Tensor[(k, 8), f32]) -> Tensor[(k, 8), f32] {\n"
      "  return a\n"
      "}\n");
  CHECK(print_module(m) ==
        "fn @main(x: Tensor[(n, 8), f32]) -> Tensor[(n, 8), f32] {\n"
        "  y: Tensor[(n, 8), f32] = @helper(x)\n"
        "  t: Tuple[Tensor[(n, 8), f32], Shape[(n,)]] = (y, shape(n))\n"
        "  z: Tensor[(n, 8), f32] = t[0]\n"
        "  return z\n"
        "}\n"
        "\n"
        "fn @helper(a: Tensor[(k, 8), f32]) -> Tensor[(k, 8), f32] {\n"
        "  return a\n"
        "}\n");
  // One GlobalVar node per name.
  auto* call = as<CallNode>(m.function("main")->body->blocks[0].bindings[0].value);
  REQUIRE(call);
  IRModule m2 = parse_module("fn @a() -> Object {\n  x: Object = @b\n  y: Object = @b\n  return x\n}\n");
  const auto& bs = m2.function("a")->body->blocks[0].bindings;
  CHECK(bs[0].value == bs[1].value);
}

TEST_CASE("roundtrip: an annotated binding keeps its annotation when deduction fails") {
  IRModule m = parse_module(
      "fn @f(x: Tensor[(4, 3), f32]) -> Tensor[(4, 4), f32] {\n"
      "  y: Tensor[(4, 4), f32] = matmul(x, x)\n"
      "  return y\n"
      "}\n");
  const Binding& b = m.function("f")->body->blocks[0].bindings[0];
  CHECK(print_sinfo(b.var->sinfo) == "Tensor[(4, 4), f32]");
  CHECK(print_sinfo(b.value->sinfo) == "Tensor[(4, 4), f32]");
  // When it succeeds, the value has the deduced struct info.
  IRModule m2 = parse_module(
      "fn @f(x: Tensor[(4, 4), f32]) -> Tensor {\n"
      "  y: Tensor = relu(x)\n"
      "  return y\n"
      "}\n");
  const Binding& b2 = m2.function("f")->body->blocks[0].bindings[0];
  CHECK(print_sinfo(b2.var->sinfo) == "Tensor");
  CHECK(print_sinfo(b2.value->sinfo) == "Tensor[(4, 4), f32]");
}

TEST_CASE("roundtrip: scopes of dataflow blocks, branches and loops") {
  // A dataflow variable's name is free again after its block; the printer
  // still gives distinct variables of one function distinct names.
  std::string src =
      "fn @f(x: Tensor[(4,), f32], c: Prim[bool]) -> Tensor[(4,), f32] {\n"
      "  dataflow {\n"
      "    %t: Tensor[(4,), f32] = exp(x)\n"
      "    a: Tensor[(4,), f32] = log(%t)\n"
      "  }\n"
      "  dataflow {\n"
      "    %t: Tensor[(4,), f32] = exp(a)\n"
      "    b: Tensor[(4,), f32] = log(%t)\n"
      "  }\n"
      "  r: Tensor[(4,), f32] = if (c) {\n"
      "    v: Tensor[(4,), f32] = exp(b)\n"
      "    v\n"
      "  } else {\n"
      "    v: Tensor[(4,), f32] = log(b)\n"
      "    v\n"
      "  }\n"
      "  s: Tensor[(4,), f32] = {\n"
      "    w: Tensor[(4,), f32] = relu(r)\n"
      "    w\n"
      "  }\n"
      "  return s\n"
      "}\n";
  std::string printed = print_of(src);
  CHECK(printed.find("    %t_1: Tensor[(4,), f32] = exp(a)\n") != std::string::npos);
  CHECK(printed.find("    v_1: Tensor[(4,), f32] = log(b)\n    v_1\n") != std::string::npos);
  CHECK(printed.find("  s: Tensor[(4,), f32] = {\n    w: Tensor[(4,), f32] = relu(r)\n    w\n  }\n") !=
        std::string::npos);
  CHECK(print_of(printed) == printed);
}

TEST_CASE("roundtrip: tensor-program statements and expressions") {
  SymExpr n = SymExpr::var("n"), i = SymExpr::var("i");
  tir::Buffer x = tir::make_buffer("x", DataType::f32(), {n});
  tir::Buffer t1 = tir::make_buffer("t", DataType::f32(), {1}, tir::Scope::Local);
  tir::Buffer t2 = tir::make_buffer("t", DataType::f32(), {1}, tir::Scope::Local);
  using tir::BinOp;
  tir::TExpr xi = tir::load(x, {tir::sym(i)});
  // Precedence: (a + b) * c keeps its parentheses, a * b + c needs none.
  CHECK(print_texpr(tir::binary(BinOp::Mul, tir::binary(BinOp::Add, xi, xi), xi)) == "(x[i] + x[i]) * x[i]");
  CHECK(print_texpr(tir::binary(BinOp::Add, tir::binary(BinOp::Mul, xi, xi), xi)) == "x[i] * x[i] + x[i]");
  CHECK(print_texpr(tir::binary(BinOp::Sub, xi, tir::binary(BinOp::Sub, xi, xi))) == "x[i] - (x[i] - x[i])");
  CHECK(print_texpr(tir::sym(i * 4 + n)) == "i * 4 + n");
  // Two allocations in sequence: the first needs a block of its own.
  tir::Stmt s1 = tir::make_allocate(t1, tir::make_store(t1, {tir::sym(0)}, tir::imm(DataType::f32(), 1.0)));
  tir::Stmt s2 = tir::make_allocate(t2, tir::make_store(t2, {tir::sym(0)}, xi));
  tir::Stmt body = tir::make_for(i, n, tir::LoopKind::Serial, tir::make_seq({s1, s2}));
  CHECK(print_stmt(body) ==
        "for i in range(n) {\n"
        "  {\n"
        "    alloc t: Buffer[(1,), f32, local]\n"
        "    t[0] = 1.0f32\n"
        "  }\n"
        "  alloc t: Buffer[(1,), f32, local]\n"
        "  t[0] = x[i]\n"
        "}\n");
  IRModule mod;
  mod.add_program("p", tir::make_program("p", {x}, {}, {}, body));
  std::string text = print_module(mod);
  CHECK(print_of(text) == text);
  IRModule back = parse_module(text);
  auto* loop = tir::as<tir::ForNode>(back.program("p")->body);
  REQUIRE(loop);
  auto* seq = tir::as<tir::SeqNode>(loop->body);
  REQUIRE(seq);
  CHECK(seq->stmts.size() == 2);
  CHECK(tir::as<tir::AllocateNode>(seq->stmts[0]));
  CHECK(tir::as<tir::AllocateNode>(seq->stmts[1]));
}

TEST_CASE("roundtrip: an empty module prints as nothing") {
  CHECK(print_module(IRModule()) == "");
  CHECK(print_module(parse_module("  # only a comment\n")) == "");
}

TEST_CASE("roundtrip: a call's attributes print in the op's order, whatever order they were set in") {
  // A frontend sets max_pool's strides before its pool_size; the parser
  // gives them back in the op's declared order. Printed text is canonical:
  // print(parse(print(ir))) == print(ir).
  Expr x = make_var("x", tensor_si(DataType::f32(), {SymExpr(1), SymExpr(2), SymExpr(8), SymExpr(8)}));
  Attrs a;
  a.set("ceil_mode", AttrValue(true));
  a.set("strides", AttrValue(std::vector<int64_t>{2, 2}));
  a.set("pool_size", AttrValue(std::vector<int64_t>{3, 3}));
  std::string text = print_expr(make_op_call("max_pool", {x}, a));
  CHECK(text == "max_pool(x, pool_size=[3, 3], strides=[2, 2], ceil_mode=true)");
}
