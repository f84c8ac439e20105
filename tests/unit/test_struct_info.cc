// Struct info queries: equality, base-of, unification, erasure, substitution
// and variable collection, with symbolic dims.
#include <doctest/doctest.h>

#include <algorithm>

#include "ir/struct_info.h"

using namespace relax;

namespace {

const DataType f32 = DataType::f32();
const DataType i64 = DataType::i64();

struct Dims {
  SymExpr n = SymExpr::var("n");
  SymExpr m = SymExpr::var("m");
  Analyzer ana;
};

}  // namespace

TEST_CASE("struct info constructors set ndim from a known shape") {
  Dims d;
  StructInfo t_si = tensor_si(f32, {d.n, 4});
  auto t = as<TensorSI>(t_si);
  REQUIRE(t);
  CHECK(t->ndim == 2);
  CHECK(t->shape->size() == 2);
  StructInfo s_si = shape_si({d.n});
  auto s = as<ShapeSI>(s_si);
  REQUIRE(s);
  CHECK(s->ndim == 1);
  CHECK(as<TensorSI>(tensor_si_ndim(f32, -1))->unknown_rank());
  CHECK(!as<TensorSI>(tensor_si_ndim(f32, 3))->shape);
  CHECK(as<ShapeSI>(shape_si_ndim(-5))->ndim == -1);
  CHECK(as<FuncSI>(opaque_func_si(object_si()))->params == std::nullopt);
  CHECK(!as<FuncSI>(opaque_func_si(object_si()))->pure);
  CHECK(as<FuncSI>(func_si({}, object_si()))->pure);
  CHECK(as<TensorSI>(object_si()) == nullptr);
}

TEST_CASE("is_base_of on tensors with symbolic dims") {
  Dims d;
  auto n4 = tensor_si(f32, {d.n, 4});
  CHECK(is_base_of(n4, tensor_si(f32, {d.n, 4}), d.ana) == Tri::Yes);
  CHECK(is_base_of(n4, tensor_si(f32, {d.n, 5}), d.ana) == Tri::No);
  CHECK(is_base_of(n4, tensor_si(f32, {d.m, 4}), d.ana) == Tri::Unknown);
  CHECK(is_base_of(n4, tensor_si(f32, {d.n + 1, 4}), d.ana) == Tri::No);
  // Coarser bases accept; coarser derived values may fit at run time.
  CHECK(is_base_of(tensor_si_ndim(f32, 2), n4, d.ana) == Tri::Yes);
  CHECK(is_base_of(tensor_si_ndim(f32, -1), n4, d.ana) == Tri::Yes);
  CHECK(is_base_of(tensor_si_ndim(DataType::void_(), 2), n4, d.ana) == Tri::Yes);
  CHECK(is_base_of(object_si(), n4, d.ana) == Tri::Yes);
  CHECK(is_base_of(n4, tensor_si_ndim(f32, 2), d.ana) == Tri::Unknown);
  CHECK(is_base_of(n4, tensor_si_ndim(f32, -1), d.ana) == Tri::Unknown);
  CHECK(is_base_of(n4, tensor_si(DataType::void_(), {d.n, 4}), d.ana) == Tri::Unknown);
  CHECK(is_base_of(n4, object_si(), d.ana) == Tri::Unknown);
  // Provable incompatibilities.
  CHECK(is_base_of(n4, tensor_si(DataType::f16(), {d.n, 4}), d.ana) == Tri::No);
  CHECK(is_base_of(n4, tensor_si(f32, {d.n}), d.ana) == Tri::No);
  CHECK(is_base_of(tensor_si_ndim(f32, 3), n4, d.ana) == Tri::No);
  CHECK(is_base_of(n4, shape_si({d.n, 4}), d.ana) == Tri::No);
}

TEST_CASE("is_base_of on shapes, prims, tuples and functions") {
  Dims d;
  CHECK(is_base_of(shape_si({d.n}), shape_si({d.n}), d.ana) == Tri::Yes);
  CHECK(is_base_of(shape_si_ndim(1), shape_si({d.n}), d.ana) == Tri::Yes);
  CHECK(is_base_of(shape_si({3}), shape_si({4}), d.ana) == Tri::No);
  CHECK(is_base_of(prim_si(i64), prim_si(i64, d.n), d.ana) == Tri::Yes);
  CHECK(is_base_of(prim_si(i64, d.n), prim_si(i64), d.ana) == Tri::Unknown);
  CHECK(is_base_of(prim_si(i64, d.n), prim_si(i64, d.n), d.ana) == Tri::Yes);
  CHECK(is_base_of(prim_si(i64), prim_si(f32), d.ana) == Tri::No);

  auto tup = tuple_si({tensor_si(f32, {d.n}), prim_si(i64)});
  CHECK(is_base_of(tuple_si({tensor_si_ndim(f32, 1), object_si()}), tup, d.ana) == Tri::Yes);
  CHECK(is_base_of(tuple_si({tensor_si(f32, {d.m}), prim_si(i64)}), tup, d.ana) == Tri::Unknown);
  CHECK(is_base_of(tuple_si({object_si()}), tup, d.ana) == Tri::No);

  // Params are contravariant, the result covariant.
  auto narrow = func_si({tensor_si(f32, {4})}, tensor_si(f32, {4}));
  auto wide = func_si({tensor_si_ndim(f32, 1)}, tensor_si(f32, {4}));
  CHECK(is_base_of(narrow, wide, d.ana) == Tri::Yes);
  CHECK(is_base_of(wide, narrow, d.ana) == Tri::Unknown);
  CHECK(is_base_of(opaque_func_si(tensor_si_ndim(f32, 1)), narrow, d.ana) == Tri::Yes);
  CHECK(is_base_of(opaque_func_si(tensor_si_ndim(f32, 2)), narrow, d.ana) == Tri::No);
  CHECK(is_base_of(func_si({object_si(), object_si()}, object_si()), narrow, d.ana) == Tri::No);
  // A pure base does not accept an impure function.
  CHECK(is_base_of(func_si({tensor_si(f32, {4})}, tensor_si(f32, {4}), true),
                   func_si({tensor_si(f32, {4})}, tensor_si(f32, {4}), false), d.ana) == Tri::No);
  // Signatures equal up to renaming of their own variables.
  auto fn = func_si({tensor_si(f32, {d.n})}, tensor_si(f32, {d.n * 2}));
  auto fm = func_si({tensor_si(f32, {d.m})}, tensor_si(f32, {d.m * 2}));
  CHECK(is_base_of(fn, fm, d.ana) == Tri::Yes);
  CHECK(struct_info_equal(fn, fm, d.ana) == Tri::Yes);
}

TEST_CASE("struct_info_equal") {
  Dims d;
  CHECK(struct_info_equal(tensor_si(f32, {d.n, 4}), tensor_si(f32, {d.n, 4}), d.ana) == Tri::Yes);
  CHECK(struct_info_equal(tensor_si(f32, {d.n * 4}), tensor_si(f32, {4 * d.n}), d.ana) == Tri::Yes);
  CHECK(struct_info_equal(tensor_si(f32, {d.n, 4}), tensor_si(f32, {d.m, 4}), d.ana) == Tri::Unknown);
  CHECK(struct_info_equal(tensor_si(f32, {d.n, 4}), tensor_si(f32, {d.n, 5}), d.ana) == Tri::No);
  CHECK(struct_info_equal(tensor_si(f32, {d.n, 4}), tensor_si_ndim(f32, 2), d.ana) == Tri::No);
  CHECK(struct_info_equal(tensor_si(f32, {d.n}), tensor_si(i64, {d.n}), d.ana) == Tri::No);
  CHECK(struct_info_equal(object_si(), object_si(), d.ana) == Tri::Yes);
  CHECK(struct_info_equal(object_si(), shape_si({}), d.ana) == Tri::No);
  CHECK(struct_info_equal(prim_si(i64, d.n), prim_si(i64, d.n + 1), d.ana) == Tri::No);
  CHECK(struct_info_equal(tuple_si({}), tuple_si({object_si()}), d.ana) == Tri::No);
  CHECK(struct_info_equal(opaque_func_si(object_si()), func_si({}, object_si(), false), d.ana) == Tri::No);
}

TEST_CASE("unify gives the least upper bound") {
  Dims d;
  auto n4 = tensor_si(f32, {d.n, 4});
  CHECK(struct_info_same(unify(n4, tensor_si(f32, {d.n, 4}), d.ana), n4));
  // Dims that are not provably equal drop the whole shape, keeping the rank.
  StructInfo u_si = unify(n4, tensor_si(f32, {d.m, 4}), d.ana);
  auto u = as<TensorSI>(u_si);
  REQUIRE(u);
  CHECK(u->ndim == 2);
  CHECK(!u->shape);
  CHECK(u->dtype == f32);
  u_si = unify(n4, tensor_si(DataType::f16(), {d.n}), d.ana);
  u = as<TensorSI>(u_si);
  REQUIRE(u);
  CHECK(u->unknown_rank());
  CHECK(u->dtype.is_void());
  CHECK(unify(n4, shape_si({d.n}), d.ana)->kind == SIKind::Object);
  CHECK(unify(n4, object_si(), d.ana)->kind == SIKind::Object);

  StructInfo t_si = unify(tuple_si({n4, prim_si(i64, 3)}), tuple_si({n4, prim_si(i64, 4)}), d.ana);
  auto t = as<TupleSI>(t_si);
  REQUIRE(t);
  CHECK(struct_info_same(t->fields[0], n4));
  CHECK(struct_info_same(t->fields[1], prim_si(i64)));
  // Tuples of tensors of different lengths unify as a list (an ONNX
  // sequence carried through a loop); other tuples as Object.
  CHECK(struct_info_same(unify(tuple_si({n4}), tuple_si({n4, n4}), d.ana), list_si(tensor_si_ndim(f32, 2))));
  CHECK(unify(tuple_si({prim_si(i64)}), tuple_si({}), d.ana)->kind == SIKind::Object);
  CHECK(struct_info_same(unify(prim_si(i64, d.n), prim_si(i64, d.n), d.ana), prim_si(i64, d.n)));
  CHECK(struct_info_same(unify(shape_si({d.n}), shape_si({2}), d.ana), shape_si_ndim(1)));

  auto f = unify(func_si({n4}, n4), func_si({n4}, tensor_si(f32, {d.m, 4})), d.ana);
  CHECK(struct_info_same(f, func_si({n4}, tensor_si_ndim(f32, 2))));
  f = unify(func_si({n4}, n4), func_si({tensor_si_ndim(f32, 2)}, n4, false), d.ana);
  CHECK(struct_info_same(f, opaque_func_si(n4, false)));
}

TEST_CASE("erase_vars coarsens what mentions out-of-scope variables") {
  Dims d;
  auto only_n = [&](const SymExpr& v) { return v == d.n; };
  auto t = tensor_si(f32, {d.n, d.m + 1});
  CHECK(struct_info_same(erase_vars(t, only_n), tensor_si_ndim(f32, 2)));
  auto kept = tensor_si(f32, {d.n * 2, 3});
  CHECK(erase_vars(kept, only_n) == kept);  // unchanged: the same node
  CHECK(struct_info_same(erase_vars(prim_si(i64, d.m), only_n), prim_si(i64)));
  CHECK(struct_info_same(erase_vars(shape_si({d.m}), only_n), shape_si_ndim(1)));
  auto tup = erase_vars(tuple_si({kept, t}), only_n);
  CHECK(struct_info_same(tup, tuple_si({kept, tensor_si_ndim(f32, 2)})));
  // A signature's own variables stay; others go.
  auto k = SymExpr::var("k");
  auto sig = func_si({tensor_si(f32, {k})}, tensor_si(f32, {k, d.m}));
  CHECK(struct_info_same(erase_vars(sig, only_n), func_si({tensor_si(f32, {k})}, tensor_si_ndim(f32, 2))));
}

TEST_CASE("substitute and variable collection") {
  Dims d;
  SymMap<SymExpr> map{{d.n, d.m + 1}};
  auto t = substitute(tensor_si(f32, {d.n * 2, 4}), map);
  CHECK(struct_info_same(t, tensor_si(f32, {(d.m + 1) * 2, 4})));
  auto same = tensor_si(f32, {d.m});
  CHECK(substitute(same, map) == same);
  CHECK(struct_info_same(substitute(prim_si(i64, d.n), map), prim_si(i64, d.m + 1)));

  std::vector<SymExpr> vars;
  collect_vars(tuple_si({tensor_si(f32, {d.n * d.m, d.n}), prim_si(i64, d.m)}), vars);
  REQUIRE(vars.size() == 2);
  CHECK(std::count(vars.begin(), vars.end(), d.n) == 1);
  CHECK(std::count(vars.begin(), vars.end(), d.m) == 1);

  // Only variables standing alone can be defined by an annotation.
  auto k = SymExpr::var("k");
  std::vector<SymExpr> defs;
  collect_definable_vars(tuple_si({tensor_si(f32, {d.n, d.m * 2}), shape_si({k + 1}), prim_si(i64, k)}), defs);
  REQUIRE(defs.size() == 2);
  CHECK(defs[0] == d.n);
  CHECK(defs[1] == k);
}

TEST_CASE("struct_info_same compares the text form") {
  Dims d;
  CHECK(struct_info_same(tensor_si(f32, {d.n, 4}), tensor_si(f32, {d.n, 4})));
  CHECK(!struct_info_same(tensor_si(f32, {d.n, 4}), tensor_si(f32, {d.m, 4})));
  CHECK(!struct_info_same(tensor_si(f32, {d.n}), tensor_si_ndim(f32, 1)));
  CHECK(!struct_info_same(shape_si_ndim(-1), shape_si_ndim(1)));
  CHECK(!struct_info_same(prim_si(i64), prim_si(i64, 3)));
  CHECK(struct_info_same(func_si({object_si()}, object_si()), func_si({object_si()}, object_si())));
  CHECK(!struct_info_same(func_si({object_si()}, object_si(), true), func_si({object_si()}, object_si(), false)));
  CHECK(!struct_info_same(opaque_func_si(object_si(), false), func_si({}, object_si(), false)));
  CHECK(!struct_info_same(object_si(), nullptr));
}

TEST_CASE("lists: elements free of variables, tuples fit them, unification with tuples") {
  Dims d;
  auto n4 = tensor_si(f32, {d.n, 4});
  auto c34 = tensor_si(f32, {3, 4});
  // A list's element keeps constant dims only: its values' shapes differ.
  CHECK(struct_info_same(list_si(n4), list_si(tensor_si_ndim(f32, 2))));
  CHECK(struct_info_same(list_si(c34), list_si(tensor_si(f32, {3, 4}))));
  std::vector<SymExpr> vars;
  collect_vars(list_si(n4), vars);
  CHECK(vars.empty());
  // A tuple fits a list when every field fits the element; never the reverse.
  StructInfo l2 = list_si(tensor_si_ndim(f32, 2));
  CHECK(is_base_of(l2, tuple_si({n4, c34}), d.ana) == Tri::Yes);
  CHECK(is_base_of(l2, tuple_si({}), d.ana) == Tri::Yes);
  CHECK(is_base_of(l2, tuple_si({tensor_si(f32, {4})}), d.ana) == Tri::No);
  CHECK(is_base_of(tuple_si({n4}), l2, d.ana) == Tri::Unknown);
  CHECK(is_base_of(l2, list_si(c34), d.ana) == Tri::Yes);
  CHECK(is_base_of(list_si(c34), l2, d.ana) != Tri::Yes);
  CHECK(is_base_of(l2, list_si(nullptr), d.ana) == Tri::Yes);
  // The empty tuple (SequenceEmpty) contributes nothing to the element.
  CHECK(struct_info_same(unify(tuple_si({}), list_si(c34), d.ana), list_si(c34)));
  CHECK(struct_info_same(unify(list_si(c34), list_si(tensor_si(f32, {5, 4})), d.ana), l2));
  CHECK(struct_info_same(unify(list_si(nullptr), list_si(c34), d.ana), list_si(c34)));
  CHECK(unify(list_si(c34), tensor_si(f32, {3, 4}), d.ana)->kind == SIKind::Object);
  CHECK(struct_info_equal(list_si(c34), list_si(tensor_si(f32, {3, 4})), d.ana) == Tri::Yes);
  CHECK(struct_info_equal(list_si(c34), list_si(nullptr), d.ana) == Tri::No);
}
