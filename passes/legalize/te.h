// Tensor-expression helpers: short ways to write the loop nests of
// legalised programs (passes/legalize/legalize.h).
//
// A legaliser declares its buffers with a ProgramBuilder, then builds the
// body from these pieces:
//
//   using namespace relax::te;
//   // y[i] = x[i] + b[broadcast(i)], numpy broadcasting, over y's shape:
//   Stmt body = compute(y, [&](const Index& i) { return load_bcast(x, i, y) + load_bcast(b, i, y); });
//   // a reduction per output element, with an f32 accumulator:
//   Stmt body = compute_reduce(y, {x->shape[1]}, sum_reducer(DataType::f32()),
//       [&](const Index& i, const Index& r) { return cast(f32, load(x, {i[0], r[0]})); },
//       [&](const Index& i, TExpr acc) { return cast(y->dtype, acc); });
//   return pb.finish(body);
//
// Loop kinds are chosen here, once: the outermost loop is `parallel` when
// the work is large (symbolic, or >= kParallelWork elements), the innermost
// `vectorized` when its extent is symbolic or a multiple of 8 and the store
// is plain elementwise (every load indexed by the innermost variable itself,
// or not depending on it); every other loop is `range`.
//
// Operators + - * / and unary - build tir::binary/unary; both operands must
// have the same dtype (cast first). Indices are i64 TExprs (tir::sym).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/analyzer.h"
#include "ir/tir.h"

namespace relax::te {

using tir::Buffer;
using tir::Stmt;
using tir::TExpr;
using Index = std::vector<TExpr>;

constexpr int64_t kParallelWork = 16384;

// The tir builders, usable unqualified (ADL finds them too).
using tir::call;
using tir::cast;
using tir::load;
using tir::select;

// ---- scalars ---------------------------------------------------------------------

TExpr const_of(DataType dtype, double v);  // imm for floats, imm_int (truncated) otherwise
TExpr zero(DataType dtype);
TExpr one(DataType dtype);
TExpr max_value(DataType dtype);                     // +inf for floats, the largest integer, true
TExpr min_value(DataType dtype);                     // -inf for floats, the smallest integer, false
TExpr idx(const SymExpr& v);                         // an i64 index value
TExpr as_index(const TExpr& e);                      // cast to i64
TExpr from_index(DataType dtype, const SymExpr& v);  // an index value as dtype (folded when constant)

TExpr operator+(const TExpr& a, const TExpr& b);
TExpr operator-(const TExpr& a, const TExpr& b);
TExpr operator*(const TExpr& a, const TExpr& b);
TExpr operator/(const TExpr& a, const TExpr& b);
TExpr operator-(const TExpr& a);
TExpr eq(const TExpr& a, const TExpr& b);
TExpr ne(const TExpr& a, const TExpr& b);
TExpr lt(const TExpr& a, const TExpr& b);
TExpr le(const TExpr& a, const TExpr& b);
TExpr gt(const TExpr& a, const TExpr& b);
TExpr ge(const TExpr& a, const TExpr& b);
TExpr and_(const TExpr& a, const TExpr& b);
TExpr or_(const TExpr& a, const TExpr& b);
TExpr not_(const TExpr& a);
TExpr min_(const TExpr& a, const TExpr& b);
TExpr max_(const TExpr& a, const TExpr& b);
// An intrinsic call (the name `call` is usually taken by the CallNode).
TExpr intrin(tir::Intrinsic fn, const TExpr& a);
TExpr intrin(tir::Intrinsic fn, const TExpr& a, const TExpr& b);
// Float conversions for math: x in f32 when x is a narrow float (f16, bf16,
// f8...), back to `dtype` afterwards.
DataType compute_dtype(DataType dtype);
// Round half to even, from floor alone (exact: x - floor(x) is), for a float x.
TExpr round_half_even(const TExpr& x);
// The largest finite value of the narrow float types that clamp when they
// saturate (the float8 kinds with one, f4e2m1); 0 for every other dtype.
double narrow_float_max(DataType dtype);
// x (a float) clamped into +-narrow_float_max(to), NaN kept: what ONNX's
// saturating conversions to float8 / float4 do before rounding.
TExpr saturate_to(const TExpr& x, DataType to);

// An index read from data (any integer dtype), negative values counting from
// the end of `dim`, then clamped into [0, dim - 1] so that no access is out
// of bounds.
TExpr wrap_clamp_index(const TExpr& i, const SymExpr& dim);

// ---- loops -------------------------------------------------------------------------

// Whether `s` is one store whose last index is loop variable `v` and whose
// value reads only elements contiguous in `v` (or none that depend on it):
// a loop over `v` around it vectorises without gathers or reductions.
bool plain_store(const tir::Stmt& s, const SymExpr& v);
// Whether `e` mentions the variable `v` (in an index, a load's or its own).
bool texpr_mentions(const TExpr& e, const SymExpr& v);

struct LoopHints {
  bool parallel = true;   // allow a parallel outermost loop
  bool vectorize = true;  // allow a vectorized innermost loop (only for plain elementwise stores)
  SymExpr work = 1;       // extra work per innermost iteration (a reduction's extent)
  // Vectorize the innermost loop even where its body is not a plain store
  // (reads through index tables: gathers, which AVX-512 and AVX2 have).
  bool vectorize_gathers = false;
};

// for i0 in extents[0] { for i1 ... { body(i) } } with fresh loop variables
// named `prefix`0, `prefix`1, ...; no extents: body({}).
Stmt loop_nest(const std::vector<SymExpr>& extents, const std::function<Stmt(const Index&)>& body,
               const LoopHints& hints = {}, const std::string& prefix = "i");
// out[i] = f(i) for every i of out's shape.
Stmt compute(const Buffer& out, const std::function<TExpr(const Index&)>& f, const LoopHints& hints = {});

// ---- broadcasting --------------------------------------------------------------------

// The index into `in` (rank <= out_shape's) for the output index `i`, by
// numpy rules: missing leading dims dropped, unit dims read at 0, a
// symbolic dim that may or may not be 1 read at select(dim == 1, 0, i).
Index broadcast_index(const Buffer& in, const Index& i, const std::vector<SymExpr>& out_shape);
Index broadcast_index(const std::vector<SymExpr>& in_shape, const Index& i, const std::vector<SymExpr>& out_shape);
TExpr load_bcast(const Buffer& in, const Index& i, const Buffer& out);
TExpr load_bcast(const Buffer& in, const Index& i, const std::vector<SymExpr>& out_shape);

// ---- locals and reductions ------------------------------------------------------------

// A one-element local buffer (a scalar variable of the loop body).
struct Local {
  Buffer buf;
  TExpr get() const;
  Stmt set(const TExpr& v) const;
};
Local local(const std::string& name, DataType dtype);
// Wraps `body` in the allocations of `locals`.
Stmt with_locals(const std::vector<Local>& locals, Stmt body);

struct Reducer {
  DataType acc_dtype;
  TExpr init;
  std::function<TExpr(const TExpr& acc, const TExpr& v)> combine;
};
Reducer sum_reducer(DataType acc_dtype);
Reducer prod_reducer(DataType acc_dtype);
Reducer max_reducer(DataType acc_dtype);
Reducer min_reducer(DataType acc_dtype);

// acc = combine(acc, value(r)) for every r in the extents (range loops,
// variables named `prefix`0...).
Stmt accumulate(const Local& acc, const std::vector<SymExpr>& extents,
                const std::function<TExpr(const Index& r)>& value,
                const std::function<TExpr(const TExpr& acc, const TExpr& v)>& combine, const std::string& prefix = "k");
// For every output index i: acc = init; acc = combine(acc, value(i, r)) over
// r in `extents`; out[i] = finalize(i, acc).
Stmt compute_reduce(const Buffer& out, const std::vector<SymExpr>& extents, const Reducer& red,
                    const std::function<TExpr(const Index& i, const Index& r)>& value,
                    const std::function<TExpr(const Index& i, const TExpr& acc)>& finalize);

// The number of elements of a shape.
SymExpr num_elements(const std::vector<SymExpr>& shape);
// Row-major flat offset of `i` in `shape`, and its inverse.
TExpr flat_index(const Index& i, const std::vector<SymExpr>& shape);
Index unflatten(const TExpr& flat, const std::vector<SymExpr>& shape);

}  // namespace relax::te
