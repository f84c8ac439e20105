// Graph builders, the module, and struct-info deduction: literals, tuples,
// calls to module functions with symbolic parameters bound, If, SeqExpr with
// match_cast, and the errors.
#include <doctest/doctest.h>

#include "ir/error.h"
#include "ir/normalize.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// fn(params...) -> ret { return params[0] }: the body is irrelevant here.
Function signature(std::vector<Var> params, StructInfo ret) {
  Expr body = params.empty() ? make_tuple({}) : Expr(params[0]);
  return make_function(std::move(params), make_seq({}, body), std::move(ret));
}

struct Fixture {
  Analyzer ana;
  IRModule mod;
  InferContext ctx{ana, &mod};
  SymExpr n = SymExpr::var("n");
  SymExpr m = SymExpr::var("m");

  StructInfo infer(const Expr& e) { return infer_struct_info(e, ctx); }
  StructInfo call(const std::string& f, std::vector<Expr> args) {
    return infer(make_call(make_global_var(f), std::move(args)));
  }
};

}  // namespace

TEST_CASE("builders set the struct info they know") {
  SymExpr n = SymExpr::var("n");
  CHECK(struct_info_same(sinfo_of(make_prim_int(n + 1)), prim_si(i64, n + 1)));
  CHECK(struct_info_same(sinfo_of(make_prim_float(0.5)), prim_si(f32)));
  CHECK(struct_info_same(sinfo_of(make_prim_bool(true)), prim_si(DataType::boolean())));
  CHECK(sinfo_of(make_string("cblas"))->kind == SIKind::Object);
  CHECK(struct_info_same(sinfo_of(make_shape({n, 4})), shape_si({n, 4})));
  CHECK(make_global_var("f")->sinfo == nullptr);
  CHECK(as<FuncSI>(sinfo_of(make_extern("sgemm")))->params == std::nullopt);

  Var x = make_var("x", tensor_si(f32, {n}));
  Expr t = make_tuple({x, make_shape({n})});
  CHECK(struct_info_same(sinfo_of(t), tuple_si({tensor_si(f32, {n}), shape_si({n})})));
  CHECK(struct_info_same(sinfo_of(make_tuple_get_item(t, 1)), shape_si({n})));
  CHECK(make_tuple_get_item(t, 5)->sinfo == nullptr);
  CHECK(make_tuple({make_global_var("g")})->sinfo == nullptr);

  Function f = make_function({x}, make_seq({}, x), tensor_si(f32, {n}));
  CHECK(struct_info_same(sinfo_of(f), func_si({tensor_si(f32, {n})}, tensor_si(f32, {n}))));
  Function impure = make_function({x}, make_seq({}, x), object_si(), Attrs{{"pure", false}});
  CHECK(!as<FuncSI>(sinfo_of(impure))->pure);

  // A seq with a match_cast leaves its struct info to the normalizer.
  Var y = make_var("y", tensor_si(f32, {SymExpr::var("k")}));
  CHECK(make_seq({BindingBlock{false, {Binding{y, x, y->sinfo}}}}, y)->sinfo == nullptr);
  CHECK(make_seq({BindingBlock{false, {Binding{y, x, nullptr}}}}, y)->sinfo == y->sinfo);

  CHECK(std::string(expr_kind_name(ExprKind::TupleGetItem)) == "TupleGetItem");
  CHECK(error_of([] { sinfo_of(make_global_var("f")); }).find("GlobalVar") != std::string::npos);
  CHECK(error_of([] { make_op_ref("no.such.op"); }) == "unknown op 'no.such.op'");
  CHECK(as_var(Expr(x)) == x);
}

TEST_CASE("IRModule keeps order, replaces, removes and finds fresh names") {
  IRModule mod;
  Function f = signature({}, object_si());
  tir::Program p = tir::make_program("p", {}, {}, {}, tir::make_barrier());
  mod.add_function("main", f);
  mod.add_program("p", p);
  mod.add_extern("cblas.sgemm");
  mod.add_function("helper", f);
  CHECK(mod.function("main") == f);
  CHECK(mod.function("p") == nullptr);
  CHECK(mod.program("p") == p);
  REQUIRE(mod.extern_decl("cblas.sgemm"));
  CHECK(mod.extern_decl("cblas.sgemm")->name == "cblas.sgemm");
  CHECK(mod.function_names() == std::vector<std::string>{"main", "helper"});
  CHECK(mod.program_names() == std::vector<std::string>{"p"});

  Function g = signature({}, tensor_si_ndim(f32, 1));
  mod.add_function("main", g);  // replaced in place
  CHECK(mod.items()[0].first == "main");
  CHECK(mod.function("main") == g);
  mod.remove("p");
  CHECK(!mod.contains("p"));
  CHECK(mod.items().size() == 3);
  CHECK(mod.function("helper") == f);

  CHECK(mod.fresh_name("fused") == "fused");
  mod.add_function("fused", f);
  CHECK(mod.fresh_name("fused") == "fused_1");
  mod.add_function("fused_1", f);
  CHECK(mod.fresh_name("fused") == "fused_2");
}

TEST_CASE("tuples and tuple_get_item") {
  Fixture fx;
  Var x = make_var("x", tensor_si(f32, {fx.n, 4}));
  Expr t = make_tuple({x, make_prim_int(3)});
  CHECK(struct_info_same(fx.infer(t), tuple_si({x->sinfo, prim_si(i64, 3)})));
  Expr item = std::make_shared<TupleGetItemNode>(t, 0);
  CHECK(fx.infer(item) == x->sinfo);
  CHECK(error_of([&] { fx.infer(std::make_shared<TupleGetItemNode>(t, 3)); }) ==
        "tuple index 3 out of range for a tuple of 2");
  CHECK(error_of([&] { fx.infer(std::make_shared<TupleGetItemNode>(t, -1)); }) != "");
  CHECK(fx.infer(make_tuple_get_item(make_var("o", object_si()), 7))->kind == SIKind::Object);
  CHECK(error_of([&] { fx.infer(make_tuple_get_item(x, 0)); }).find("not a tuple") != std::string::npos);
}

TEST_CASE("a call to a module function binds its symbolic parameters") {
  Fixture fx;
  // fn @f(x: Tensor[(n, 4), f32]) -> Tensor[(n * 2,), f32]
  SymExpr n = SymExpr::var("n");
  fx.mod.add_function("f", signature({make_var("x", tensor_si(f32, {n, 4}))}, tensor_si(f32, {n * 2})));
  StructInfo r = fx.call("f", {make_var("a", tensor_si(f32, {fx.m + 1, 4}))});
  CHECK(struct_info_same(r, tensor_si(f32, {(fx.m + 1) * 2})));

  // Unknown dims cannot bind n: the result keeps its rank only.
  r = fx.call("f", {make_var("a", tensor_si_ndim(f32, 2))});
  CHECK(struct_info_same(r, tensor_si_ndim(f32, 1)));
  r = fx.call("f", {make_var("a", object_si())});
  CHECK(struct_info_same(r, tensor_si_ndim(f32, 1)));

  CHECK(error_of([&] {
          fx.call("f", {make_var("a", tensor_si(f32, {fx.m, 5}))});
        }) == "call to @f: argument 0 dim 1 is 5 but the parameter expects 4");
  CHECK(error_of([&] { fx.call("f", {}); }) == "call to @f: expects 1 arguments, got 0");
  CHECK(error_of([&] {
          fx.call("f", {make_var("a", tensor_si(DataType::f16(), {fx.m, 4}))});
        }) == "call to @f: argument 0 has dtype f16 but the parameter expects f32");
  CHECK(error_of([&] { fx.call("f", {make_var("a", tensor_si_ndim(f32, 3))}); }) ==
        "call to @f: argument 0 has rank 3 but the parameter expects rank 2");
  CHECK(error_of([&] {
          fx.call("f", {make_shape({fx.m, 4})});
        }) == "call to @f: argument 0 is a Shape but the parameter expects a Tensor");
}

TEST_CASE("a variable bound twice in a signature must agree") {
  Fixture fx;
  // fn @g(x: Tensor[(n, 512), f32], y: Tensor[(n,), f32], s: Prim[i64, k]) -> Tuple[Tensor[(n + k,)], Shape[(j,)]]
  SymExpr n = SymExpr::var("n"), k = SymExpr::var("k"), j = SymExpr::var("j");
  std::vector<Var> ps = {make_var("x", tensor_si(f32, {n, 512})), make_var("y", tensor_si(f32, {n})),
                         make_var("s", prim_si(i64, k))};
  fx.mod.add_function("g", signature(ps, tuple_si({tensor_si(f32, {n + k}), shape_si({j})})));

  StructInfo r =
      fx.call("g", {make_var("a", tensor_si(f32, {8, 512})), make_var("b", tensor_si(f32, {8})), make_prim_int(fx.m)});
  // j is bound by nothing: the shape keeps its rank only.
  CHECK(struct_info_same(r, tuple_si({tensor_si(f32, {fx.m + 8}), shape_si_ndim(1)})));

  CHECK(error_of([&] {
          fx.call("g", {make_var("a", tensor_si(f32, {8, 512})), make_var("b", tensor_si(f32, {9})), make_prim_int(1)});
        }) == "call to @g: argument 1 dim 0 is 9 but the parameter expects 8");
  CHECK(error_of([&] {
          fx.call("g", {make_var("a", tensor_si(f32, {fx.m, 768})), make_var("b", tensor_si(f32, {fx.m})),
                        make_prim_int(1)});
        }) == "call to @g: argument 0 dim 1 is 768 but the parameter expects 512");
  // Unrelated symbolic dims cannot be proven different: no error.
  SymExpr q = SymExpr::var("q");
  r = fx.call("g", {make_var("a", tensor_si(f32, {fx.m, 512})), make_var("b", tensor_si(f32, {q})), make_prim_int(2)});
  CHECK(struct_info_same(as<TupleSI>(r)->fields[0], tensor_si(f32, {fx.m + 2})));
}

TEST_CASE("calls to programs, externs, variables and unknown globals") {
  Fixture fx;
  fx.mod.add_program("p", tir::make_program("p", {}, {}, {}, tir::make_barrier()));
  fx.mod.add_extern("print");
  fx.mod.add_extern("typed", func_si({object_si()}, shape_si_ndim(2), false));
  Var a = make_var("a", tensor_si(f32, {fx.m}));
  CHECK(error_of([&] { fx.call("p", {a}); }).find("call_tir") != std::string::npos);
  CHECK(fx.call("print", {a})->kind == SIKind::Object);
  CHECK(struct_info_same(fx.call("typed", {a}), shape_si_ndim(2)));
  CHECK(error_of([&] { fx.call("missing", {a}); }) == "call to @missing: no such function in the module");
  CHECK(fx.infer(make_call(make_extern("cblas_sgemm"), {a}))->kind == SIKind::Object);

  // A global's own struct info is the item's signature.
  SymExpr n = SymExpr::var("n");
  fx.mod.add_function("id", signature({make_var("x", tensor_si(f32, {n}))}, tensor_si(f32, {n})));
  CHECK(struct_info_same(fx.infer(make_global_var("id")), func_si({tensor_si(f32, {n})}, tensor_si(f32, {n}))));

  // A variable holding a function: the same binding of symbolic parameters.
  Var fn = make_var("fn", func_si({tensor_si(f32, {n, 2})}, tensor_si(f32, {n * 2})));
  CHECK(struct_info_same(fx.infer(make_call(fn, {make_var("b", tensor_si(f32, {fx.m, 2}))})),
                         tensor_si(f32, {fx.m * 2})));
  CHECK(error_of([&] {
          fx.infer(make_call(fn, {make_var("b", tensor_si(f32, {fx.m, 3}))}));
        }) == "call to fn: argument 0 dim 1 is 3 but the parameter expects 2");
  Var opaque = make_var("h", opaque_func_si(tensor_si_ndim(f32, 1)));
  CHECK(struct_info_same(fx.infer(make_call(opaque, {a, a})), tensor_si_ndim(f32, 1)));
}

TEST_CASE("op calls use the op's rule") {
  Fixture fx;
  Var x = make_var("x", tensor_si(f32, {fx.n, 784}));
  Var w = make_var("w", tensor_si(f32, {784, 128}));
  Expr c = make_op_call("matmul", {x, w});
  REQUIRE(as<CallNode>(c)->op());
  CHECK(as<CallNode>(c)->op()->name == "matmul");
  CHECK(struct_info_same(fx.infer(c), tensor_si(f32, {fx.n, 128})));
}

TEST_CASE("If unifies its branches and checks its condition") {
  Fixture fx;
  Var a = make_var("a", tensor_si(f32, {fx.n, 4}));
  Var b = make_var("b", tensor_si(f32, {fx.m, 4}));
  Var c = make_var("c", prim_si(DataType::boolean()));
  Expr e = make_if(c, make_seq({}, a), make_seq({}, b));
  CHECK(struct_info_same(fx.infer(e), tensor_si_ndim(f32, 2)));
  CHECK(struct_info_same(fx.infer(make_if(c, make_seq({}, a), make_seq({}, a))), a->sinfo));
  Var t0 = make_var("t0", tensor_si(DataType::boolean(), {}));
  CHECK(fx.infer(make_if(t0, make_seq({}, a), make_seq({}, a)))->kind == SIKind::Tensor);
  Var ci = make_var("ci", prim_si(i64));
  CHECK(error_of([&] { fx.infer(make_if(ci, make_seq({}, a), make_seq({}, b))); }) ==
        "if: the condition must be a bool scalar, got a Prim of dtype i64");
  Var t1 = make_var("t1", tensor_si(DataType::boolean(), {fx.n}));
  CHECK(error_of([&] { fx.infer(make_if(t1, make_seq({}, a), make_seq({}, b))); }) ==
        "if: the condition must be a bool scalar, got a Tensor of rank 1");
  CHECK(error_of([&] { fx.infer(make_if(make_shape({}), make_seq({}, a), make_seq({}, b))); }) ==
        "if: the condition must be a bool scalar, got a Shape");
}

TEST_CASE("a seq hides the symbolic variables its match_casts define") {
  Fixture fx;
  SymExpr k = SymExpr::var("k");
  Var x = make_var("x", tensor_si(f32, {fx.n}));
  Var o = make_var("o", object_si());
  // y = match_cast(o, Tensor[(k, n), f32]); return y   -- k is new, n is x's
  Var y = make_var("y", tensor_si(f32, {k, fx.n}));
  Var z = make_var("z", tensor_si(f32, {fx.n}));
  BindingBlock blk{false, {Binding{z, x, nullptr}, Binding{y, o, y->sinfo}}};
  SeqExpr seq = make_seq({blk}, y);
  CHECK(struct_info_same(fx.infer(seq), tensor_si_ndim(f32, 2)));

  // Returning only what mentions n keeps its dims.
  Var w = make_var("w", tensor_si(f32, {fx.n}));
  SeqExpr seq2 = make_seq({BindingBlock{false, {Binding{z, x, nullptr}, Binding{w, o, w->sinfo}}}}, w);
  CHECK(struct_info_same(fx.infer(seq2), tensor_si(f32, {fx.n})));

  // Returning a tuple: only the field mentioning k is coarsened.
  SeqExpr seq3 = make_seq({blk}, make_tuple({y, z}));
  CHECK(struct_info_same(fx.infer(seq3), tuple_si({tensor_si_ndim(f32, 2), tensor_si(f32, {fx.n})})));
}

TEST_CASE("ensure_struct_info fills in bottom up, only where unset") {
  Fixture fx;
  SymExpr n = SymExpr::var("n");
  fx.mod.add_function("f", signature({make_var("x", tensor_si(f32, {n, 4}))}, tensor_si(f32, {n * 2})));
  Var a = make_var("a", tensor_si(f32, {fx.m, 4}));
  // lv0 = @f(a); lv1 = (lv0, a); lv2 = lv1[0]; return lv2   (no annotations)
  Var lv0 = make_var("lv0", nullptr), lv1 = make_var("lv1", nullptr), lv2 = make_var("lv2", nullptr);
  Expr call = make_call(make_global_var("f"), {a});
  Expr tup = make_tuple({lv0, a});
  Expr get = make_tuple_get_item(lv1, 0);
  BindingBlock blk{true, {Binding{lv0, call, nullptr}, Binding{lv1, tup, nullptr}, Binding{lv2, get, nullptr}}};
  SeqExpr body = make_seq({blk}, lv2);
  Function fn = make_function({a}, body, nullptr);
  CHECK(fn->sinfo == nullptr);
  ensure_struct_info(fn, fx.ctx);
  CHECK(struct_info_same(lv0->sinfo, tensor_si(f32, {fx.m * 2})));
  CHECK(struct_info_same(lv2->sinfo, tensor_si(f32, {fx.m * 2})));
  CHECK(struct_info_same(sinfo_of(body), tensor_si(f32, {fx.m * 2})));
  CHECK(struct_info_same(sinfo_of(fn), func_si({a->sinfo}, tensor_si(f32, {fx.m * 2}))));

  // Existing struct info is kept.
  Var b = make_var("b", tensor_si(f32, {fx.m, 4}));
  Expr c2 = make_call(make_global_var("f"), {b});
  c2->sinfo = object_si();
  ensure_struct_info(c2, fx.ctx);
  CHECK(c2->sinfo->kind == SIKind::Object);
  CHECK(error_of([&] { fx.infer(make_var("u", nullptr)); }) == "variable 'u' has no struct info");
}

TEST_CASE("a call to a local function keeps the symbolic variables it captures") {
  Fixture fx;
  // f: Func[(Tensor[(m,), f32]) -> Tensor[(n, m), f32]] where n belongs to the enclosing scope.
  SymExpr m = SymExpr::var("m");
  Var f = make_var("f", func_si({tensor_si(f32, {m})}, tensor_si(f32, {fx.n, m})));
  StructInfo r = fx.infer(make_call(f, {make_var("a", tensor_si(f32, {4}))}));
  CHECK(struct_info_same(r, tensor_si(f32, {fx.n, 4})));
}
