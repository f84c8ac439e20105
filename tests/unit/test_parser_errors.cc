// Malformed IR text: each case asserts the message and its FILE:LINE:COL, and
// the parser never crashes, whatever the input (truncated, mutated, random
// bytes, deep nesting).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/error.h"
#include "ir/parser.h"

using namespace relax;

namespace {

// The message of the Error that parsing `text` raises, "" if none.
std::string parse_error(const std::string& text) {
  try {
    parse_module(text, "t.relax");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A function around `body` lines (two-space indented), x: Tensor[(n, 4), f32].
std::string fn(const std::string& body) {
  return "fn @f(x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {\n" + body + "}\n";
}

std::string prog(const std::string& body) {
  return "prog @p(x: Buffer[(n,), f32]) -> (y: Buffer[(n,), f32]) {\n" + body + "}\n";
}

// Parsing either succeeds or raises an Error; anything else fails the test.
void parses_or_errors(const std::string& text) {
  try {
    parse_module(text, "fuzz.relax");
  } catch (const Error&) {
  }
}

}  // namespace

TEST_CASE("parser errors: names") {
  CHECK(parse_error(fn("  y = matmull(x, x)\n  return y\n")) == "t.relax:2:7: unknown op 'matmull'");
  CHECK(parse_error(fn("  return lv3\n")) == "t.relax:2:10: undefined variable 'lv3'");
  CHECK(parse_error(fn("  y = relu(x)\n  y = exp(x)\n  return y\n")) == "t.relax:3:3: variable 'y' is bound twice");
  CHECK(parse_error(fn("  dataflow {\n    %a = relu(x)\n  }\n  return %a\n")) ==
        "t.relax:5:10: undefined variable '%a'");
  CHECK(parse_error(fn("  if = relu(x)\n  return x\n")) == "t.relax:2:3: 'if' is a reserved word");
  CHECK(parse_error(fn("  y = relu(x)\n  return y\n") + "\n" + fn("  return x\n")) ==
        "t.relax:6:4: global '@f' is defined twice");
}

TEST_CASE("parser errors: tokens and literals") {
  CHECK(parse_error("fn @f(x: Tensor[(n,), f33]) -> Object {\n  return x\n}\n") == "t.relax:1:23: unknown dtype 'f33'");
  CHECK(parse_error(fn("  s = \"abc\n  return x\n")) == "t.relax:2:7: unterminated string");
  CHECK(parse_error(fn("  s = \"a\\qb\"\n  return x\n")) == "t.relax:2:9: invalid escape '\\q' in string");
  CHECK(parse_error(fn("  y = x[99999999999999999999]\n  return x\n")) ==
        "t.relax:2:9: integer literal '99999999999999999999' is out of range");
  CHECK(parse_error(fn("  y = 3\n  return x\n")) ==
        "t.relax:2:7: expected an expression but found '3' (a scalar is written prim(3))");
  CHECK(parse_error("fn @f() -> Object {\n  return $\n}\n") == "t.relax:2:10: unexpected character '$'");
  CHECK(parse_error("fn @f(x: Tensr) -> Object {\n  return x\n}\n") ==
        "t.relax:1:10: expected a struct info (Object, Prim, Shape, Tensor, Tuple, List or Func) but found 'Tensr'");
}

TEST_CASE("parser errors: structure") {
  CHECK(parse_error(fn("  y = relu(x\n  return y\n")) == "t.relax:3:3: expected ',' or ')' but found 'return'");
  CHECK(parse_error("fn @f(x: Tensor) -> Tensor {\n  return x\n") ==
        "t.relax:3:1: expected '}' but found end of input");
  CHECK(parse_error(fn("  y = relu(x)\n")) == "t.relax:3:1: expected a binding, 'dataflow' or 'return' but found '}'");
  CHECK(parse_error("fn @f(x: Tensor[(n 4), f32]) -> Object {\n  return x\n}\n") ==
        "t.relax:1:20: expected ')' but found '4'");
  CHECK(parse_error("x = 1\n") == "t.relax:1:1: expected 'fn', 'prog', 'extern' or 'module_attrs' but found 'x'");
  CHECK(parse_error(fn("  y = sum(x, keepdims=true, x)\n  return y\n")) ==
        "t.relax:2:29: positional argument after attributes");
}

TEST_CASE("parser errors: op attributes") {
  CHECK(parse_error(fn("  y = sum(x, axis=1)\n  return y\n")) ==
        "t.relax:2:19: attribute 'axis' of 'sum' should be an int list, found '1'");
  CHECK(parse_error(fn("  y = relu(x, alpha=0.5)\n  return y\n")) ==
        "t.relax:2:15: op 'relu' has no attribute 'alpha'");
  CHECK(parse_error(fn("  y = astype(x, dtype=f32, dtype=f16)\n  return y\n")) ==
        "t.relax:2:28: attribute 'dtype' given twice");
  CHECK(parse_error(fn("  y = astype(x)\n  return y\n")) ==
        "t.relax:2:7: op 'astype' requires attribute 'dtype' (dtype)");
}

TEST_CASE("parser errors: struct-info deduction of unannotated bindings") {
  CHECK(parse_error("fn @f(a: Tensor[(4, 3), f32]) -> Object {\n  y = matmul(a, a)\n  return y\n}\n")
            .rfind("t.relax:2:7: ", 0) == 0);
  CHECK(parse_error("fn @f(a: Tensor[(4, 3), f32]) -> Object {\n  y = @nowhere(a)\n  return y\n}\n") ==
        "t.relax:2:7: call to @nowhere: no such function in the module");
}

TEST_CASE("parser errors: tensor programs") {
  CHECK(parse_error(prog("  for i in range(n) {\n    y[i] = x[i] * 2.0\n  }\n")) ==
        "t.relax:3:19: a float literal in a tensor program needs a dtype suffix, as in 2.0f32");
  CHECK(parse_error(prog("  for i in range(n) {\n    z[i] = x[i]\n  }\n")) == "t.relax:3:5: undefined buffer 'z'");
  CHECK(parse_error(prog("  for i in sequential(n) {\n    y[i] = x[i]\n  }\n")) ==
        "t.relax:2:12: unknown loop kind 'sequential'");
  CHECK(parse_error(prog("  for i in range(n) {\n    y[i] = exp(x[i], x[i])\n  }\n")) ==
        "t.relax:3:12: 'exp' takes 1 argument, got 2");
  CHECK(parse_error(prog("  for i in range(n) {\n    y[i] = x[i] + 256u8\n  }\n")) ==
        "t.relax:3:19: literal 256 is out of range for u8");
  CHECK(parse_error(prog("  for n in range(4) {\n    y[n] = x[n]\n  }\n")) == "t.relax:2:7: 'n' is already defined");
  CHECK(parse_error(prog("  alloc t: Buffer[(1,), f32, texture]\n")) ==
        "t.relax:2:30: unknown buffer scope 'texture' (global, shared or local)");
  CHECK(parse_error(prog("  for i in range(n) {\n    y[i // (n - n)] = x[i]\n  }\n")) ==
        "t.relax:3:9: binary '//': division by zero");
  CHECK(parse_error(prog("  for i in range(n) {\n    y[i] = x[i] + 1i32\n  }\n")).rfind("t.relax:3:17: ", 0) == 0);
}

TEST_CASE("parser errors: deep nesting is refused, not a stack overflow") {
  std::string deep =
      "fn @f(x: Object) -> Object {\n  return " + std::string(100000, '(') + "x" + std::string(100000, ')') + "\n}\n";
  CHECK(parse_error(deep).find("nesting too deep") != std::string::npos);
  std::string deep_sinfo = "fn @f(x: " + std::string(5000, 'T') + ") -> Object {\n  return x\n}\n";
  parses_or_errors(deep_sinfo);
  std::string tuples;
  for (int i = 0; i < 5000; ++i) tuples += "Tuple[";
  CHECK(parse_error("fn @f(x: " + tuples + ") -> Object {\n}\n").find("nesting too deep") != std::string::npos);
  std::string texpr = prog("  y[0] = " + std::string(5000, '-') + "x[0]\n");
  CHECK(parse_error(texpr).find("nesting too deep") != std::string::npos);
}

TEST_CASE("parser errors: truncated, mutated and random input never crash") {
  std::filesystem::path dir = std::filesystem::path(RELAX_SOURCE_DIR) / "tests/ir/roundtrip";
  std::mt19937 rng(1234);
  const std::string alphabet = "(){}[],:=%@\"#-+*/.<>!~&|^ \nxn0123456789fe";
  for (const char* name : {"01_mlp.relax", "14_if.relax", "26_call_tir.relax", "30_tir_softmax.relax",
                           "23_function_attrs.relax", "35_tir_binary_ops.relax"}) {
    std::ifstream in(dir / name, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    REQUIRE(!text.empty());
    for (size_t cut = 0; cut < text.size(); cut += 3) parses_or_errors(text.substr(0, cut));
    for (int k = 0; k < 300; ++k) {
      std::string m = text;
      for (int e = 0; e < 3; ++e) {
        size_t pos = rng() % m.size();
        switch (rng() % 3) {
          case 0:
            m[pos] = alphabet[rng() % alphabet.size()];
            break;
          case 1:
            m.erase(pos, 1 + rng() % 4);
            break;
          default:
            m.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        }
        if (m.empty()) m = "x";
      }
      parses_or_errors(m);
    }
  }
  for (int k = 0; k < 200; ++k) {
    std::string bytes(1 + rng() % 200, '\0');
    for (char& c : bytes) c = char(rng() % 256);
    parses_or_errors(bytes);
  }
  CHECK(parse_error(std::string("\x01\xff", 2)) == "t.relax:1:1: unexpected character '\\x01'");
}
