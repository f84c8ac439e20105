// The verifier on IR built directly (the parser rejects most of these
// before the verifier could see them; passes can still produce them).
#include <doctest/doctest.h>

#include "ir/error.h"
#include "ir/verifier.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();

bool has_error(const IRModule& mod, const std::string& text) {
  for (const std::string& e : verify(mod))
    if (e.find(text) != std::string::npos) return true;
  return false;
}

IRModule module_of(const Function& f) {
  IRModule mod;
  mod.add_function("main", f);
  return mod;
}

}  // namespace

TEST_CASE("a well-formed function has no errors") {
  SymExpr n = SymExpr::var("n");
  Var x = make_var("x", tensor_si(f32, {n}));
  Var a = make_dataflow_var("a", tensor_si(f32, {n}));
  Var b = make_var("b", tensor_si(f32, {n}));
  BindingBlock df{true, {{a, make_op_call("exp", {x}), nullptr}, {b, make_op_call("log", {a}), nullptr}}};
  IRModule mod = module_of(make_function({x}, make_seq({df}, b), tensor_si(f32, {n})));
  CHECK(verify(mod).empty());
}

TEST_CASE("use before definition and double binding are reported with the binding") {
  SymExpr n = SymExpr::var("n");
  Var x = make_var("x", tensor_si(f32, {n}));
  Var a = make_var("a", tensor_si(f32, {n}));
  Var b = make_var("b", tensor_si(f32, {n}));
  BindingBlock blk{false,
                   {{a, make_op_call("add", {x, b}), nullptr},
                    {b, make_op_call("exp", {x}), nullptr},
                    {b, make_op_call("exp", {x}), nullptr}}};
  IRModule mod = module_of(make_function({x}, make_seq({blk}, a), tensor_si(f32, {n})));
  CHECK(has_error(mod, "in @main, binding a: variable 'b' is used before its definition"));
  CHECK(has_error(mod, "in @main, binding b: variable 'b' is bound twice"));
}

TEST_CASE("dataflow variables must stay in their block") {
  SymExpr n = SymExpr::var("n");
  Var x = make_var("x", tensor_si(f32, {n}));
  Var a = make_dataflow_var("a", tensor_si(f32, {n}));
  Var c = make_dataflow_var("c", tensor_si(f32, {n}));
  BindingBlock df{true, {{a, make_op_call("exp", {x}), nullptr}}};
  BindingBlock plain{false, {{c, make_op_call("exp", {x}), nullptr}}};
  IRModule mod = module_of(make_function({x}, make_seq({df, plain}, a), tensor_si(f32, {n})));
  CHECK(has_error(mod, "in @main: variable '%a' is used outside its dataflow block"));
  CHECK(has_error(mod, "binding %c: dataflow variable bound outside a dataflow block"));
}

TEST_CASE("symbolic variables must be defined by a parameter or match_cast") {
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m");
  Var x = make_var("x", tensor_si(f32, {n}));
  Var y = make_var("y", tensor_si(f32, {m}));
  Var z = make_var("z", tensor_si(f32, {m}));
  // y = match_cast(x, Tensor[(m,)]) defines m; z uses it afterwards.
  BindingBlock ok{false, {{y, x, tensor_si(f32, {m})}, {z, make_op_call("exp", {y}), nullptr}}};
  CHECK(verify(module_of(make_function({x}, make_seq({ok}, x), tensor_si(f32, {n})))).empty());
  // Without the match_cast, m is used before it is defined.
  BindingBlock bad{false, {{z, make_op_call("exp", {x}), nullptr}}};
  IRModule mod = module_of(make_function({x}, make_seq({bad}, x), tensor_si(f32, {n})));
  CHECK(has_error(mod, "symbolic variable 'm' is used in the annotation before a parameter or match_cast defines it"));
  // A parameter whose dims only mention n*2 does not define n.
  Var p = make_var("p", tensor_si(f32, {n * 2}));
  CHECK(has_error(module_of(make_function({p}, make_seq({}, p), tensor_si(f32, {n * 2}))),
                  "symbolic variable 'n' is used in the annotation of parameter 'p'"));
}

TEST_CASE("tensor programs: unbound symbolic variables and reused loop variables") {
  using namespace relax::tir;
  SymExpr n = SymExpr::var("n"), m = SymExpr::var("m"), i = SymExpr::var("i");
  Buffer a = make_buffer("a", f32, {n});
  Buffer b = make_buffer("b", f32, {n * 2});  // n is bound by a's shape
  Stmt inner = make_store(b, {sym(i)}, load(a, {sym(i)}));
  IRModule mod;
  mod.add_program("ok", make_program("ok", {a}, {b}, {}, make_for(i, n, LoopKind::Serial, inner)));
  mod.add_program("unbound", make_program("unbound", {a}, {b}, {}, make_for(i, m, LoopKind::Parallel, inner)));
  Stmt twice = make_for(i, n, LoopKind::Serial, make_for(i, n, LoopKind::Serial, inner));
  mod.add_program("twice", make_program("twice", {a}, {b}, {}, twice));
  std::vector<std::string> errors = verify(mod);
  CHECK(errors.size() == 2);
  CHECK(has_error(mod, "in program @unbound: symbolic variable 'm' in the extent of loop 'i' is not bound"));
  CHECK(has_error(mod, "in program @twice: loop variable 'i' is already bound"));
}

TEST_CASE("tensor programs: a workspace (global alloc) only at the root of the body") {
  using namespace relax::tir;
  SymExpr n = SymExpr::var("n"), i = SymExpr::var("i"), m = SymExpr::var("m");
  Buffer a = make_buffer("a", f32, {n});
  Buffer b = make_buffer("b", f32, {n});
  Buffer ws = make_buffer("ws", f32, {n * 2});
  Buffer bad = make_buffer("bad", f32, {m});
  Stmt use = make_seq({make_store(ws, {sym(i)}, load(a, {sym(i)})), make_store(b, {sym(i)}, load(ws, {sym(i)}))});
  IRModule mod;
  mod.add_program("root", make_program("root", {a}, {b}, {}, make_allocate(ws, make_for(i, n, LoopKind::Serial, use))));
  mod.add_program("nested",
                  make_program("nested", {a}, {b}, {}, make_for(i, n, LoopKind::Serial, make_allocate(ws, use))));
  Stmt unbound = make_allocate(bad, make_allocate(ws, make_for(i, n, LoopKind::Serial, use)));
  mod.add_program("unbound", make_program("unbound", {a}, {b}, {}, unbound));
  std::vector<std::string> errors = verify(mod);
  CHECK(errors.size() == 2);
  CHECK(has_error(mod, "in program @nested: allocated buffer 'ws' is global: a workspace must be allocated at the root"));
  CHECK(has_error(mod, "in program @unbound: symbolic variable 'm' in the shape of workspace 'bad' is not bound"));
}

TEST_CASE("verify_or_throw lists every problem") {
  SymExpr n = SymExpr::var("n");
  Var x = make_var("x", tensor_si(f32, {n}));
  Var y = make_var("y", tensor_si(f32, {n, 3}));
  BindingBlock blk{false, {{y, make_op_call("exp", {x}), nullptr}}};
  IRModule mod = module_of(make_function({x}, make_seq({blk}, y), tensor_si(DataType::i64(), {n})));
  try {
    verify_or_throw(mod);
    FAIL("expected an error");
  } catch (const Error& e) {
    std::string s = e.what();
    CHECK(s.find("annotation Tensor[(n, 3), f32] is incompatible with the deduced Tensor[(n,), f32]") !=
          std::string::npos);
    CHECK(s.find("declared to return Tensor[(n,), i64]") != std::string::npos);
  }
}
