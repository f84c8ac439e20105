// Struct info: constructors and the queries the normalizer, the verifier and
// the passes ask (equality, base-of, unification, erasure, substitution).
//
// Three-valued answers follow one convention: No means provably
// incompatible (other kinds, dtypes, ranks, or dims the analyser separates),
// Unknown means "cannot tell statically" (a coarser struct info, or
// symbolic dims the analyser cannot relate), Yes means proven.
#include "ir/struct_info.h"

#include <algorithm>

#include "ir/error.h"

namespace relax {

// ---- Constructors ------------------------------------------------------------

StructInfo object_si() {
  static const StructInfo kObject = std::make_shared<ObjectSI>();
  return kObject;
}

StructInfo prim_si(DataType dtype, SymExpr value) { return std::make_shared<PrimSI>(dtype, value); }

StructInfo shape_si(std::vector<SymExpr> values) {
  int nd = int(values.size());
  return std::make_shared<ShapeSI>(nd, std::move(values));
}

StructInfo shape_si_ndim(int ndim) { return std::make_shared<ShapeSI>(ndim < 0 ? -1 : ndim, std::nullopt); }

StructInfo tensor_si(DataType dtype, std::vector<SymExpr> shape) {
  int nd = int(shape.size());
  return std::make_shared<TensorSI>(dtype, nd, std::move(shape));
}

StructInfo tensor_si_ndim(DataType dtype, int ndim) {
  return std::make_shared<TensorSI>(dtype, ndim < 0 ? -1 : ndim, std::nullopt);
}

StructInfo tuple_si(std::vector<StructInfo> fields) { return std::make_shared<TupleSI>(std::move(fields)); }

StructInfo list_si(StructInfo elem) {
  if (const auto* t = as<TensorSI>(elem); t && t->shape) {
    bool constant = std::all_of(t->shape->begin(), t->shape->end(), [](const SymExpr& d) { return d.is_const(); });
    if (!constant) elem = tensor_si_ndim(t->dtype, t->ndim);
  } else if (elem && !as<TensorSI>(elem)) {
    elem = object_si();  // lists hold tensors; anything else is not tracked
  }
  return std::make_shared<ListSI>(std::move(elem));
}

StructInfo func_si(std::vector<StructInfo> params, StructInfo ret, bool pure) {
  return std::make_shared<FuncSI>(std::move(params), std::move(ret), pure);
}

StructInfo opaque_func_si(StructInfo ret, bool pure) {
  return std::make_shared<FuncSI>(std::nullopt, std::move(ret), pure);
}

// ---- Three-valued logic --------------------------------------------------------

namespace {

// Conjunction: No dominates, then Unknown.
Tri tri_and(Tri a, Tri b) {
  if (a == Tri::No || b == Tri::No) return Tri::No;
  if (a == Tri::Unknown || b == Tri::Unknown) return Tri::Unknown;
  return Tri::Yes;
}

Tri dims_equal(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b, const Analyzer& ana) {
  if (a.size() != b.size()) return Tri::No;
  Tri r = Tri::Yes;
  for (size_t i = 0; i < a.size() && r != Tri::No; ++i) r = tri_and(r, ana.prove_equal(a[i], b[i]));
  return r;
}

bool dims_provably_equal(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b, const Analyzer& ana) {
  return dims_equal(a, b, ana) == Tri::Yes;
}

// Binds the variables that appear alone in `pattern` dims to the dims of
// `actual` at the same positions (first binding wins). Used to rename the
// symbolic parameters of one function signature into another's.
void bind_lone_vars(const StructInfo& pattern, const StructInfo& actual, SymMap<SymExpr>& map);

void bind_dims(const std::optional<std::vector<SymExpr>>& p, const std::optional<std::vector<SymExpr>>& a,
               SymMap<SymExpr>& map) {
  if (!p || !a || p->size() != a->size()) return;
  for (size_t i = 0; i < p->size(); ++i)
    if ((*p)[i].is_var() && !map.count((*p)[i])) map.emplace((*p)[i], (*a)[i]);
}

void bind_lone_vars(const StructInfo& pattern, const StructInfo& actual, SymMap<SymExpr>& map) {
  if (!pattern || !actual || pattern->kind != actual->kind) return;
  switch (pattern->kind) {
    case SIKind::Prim: {
      auto p = as<PrimSI>(pattern), a = as<PrimSI>(actual);
      if (p->value.is_var() && a->value.defined() && !map.count(p->value)) map.emplace(p->value, a->value);
      return;
    }
    case SIKind::Shape: return bind_dims(as<ShapeSI>(pattern)->values, as<ShapeSI>(actual)->values, map);
    case SIKind::Tensor: return bind_dims(as<TensorSI>(pattern)->shape, as<TensorSI>(actual)->shape, map);
    case SIKind::Tuple: {
      auto& pf = as<TupleSI>(pattern)->fields;
      auto& af = as<TupleSI>(actual)->fields;
      if (pf.size() != af.size()) return;
      for (size_t i = 0; i < pf.size(); ++i) bind_lone_vars(pf[i], af[i], map);
      return;
    }
    default: return;
  }
}

// Renames `derived`'s signature variables to `base`'s, so that
// Func[(Tensor[(m,)]) -> Tensor[(m,)]] compares equal to the same signature
// written with n. Returns `derived` unchanged when nothing maps.
const FuncSI* as_func(const StructInfo& si) { return as<FuncSI>(si); }

StructInfo rename_signature(const FuncSI& base, const StructInfo& derived) {
  auto d = as_func(derived);
  if (!base.params || !d->params || base.params->size() != d->params->size()) return derived;
  SymMap<SymExpr> map;
  for (size_t i = 0; i < base.params->size(); ++i) bind_lone_vars((*d->params)[i], (*base.params)[i], map);
  return map.empty() ? derived : substitute(derived, map);
}

}  // namespace

// ---- Equality ---------------------------------------------------------------------

namespace {

Tri prim_equal(const PrimSI& a, const PrimSI& b, const Analyzer& ana) {
  if (a.dtype != b.dtype) return Tri::No;
  if (a.value.defined() != b.value.defined()) return Tri::No;
  return a.value.defined() ? ana.prove_equal(a.value, b.value) : Tri::Yes;
}

// Shapes and tensors share this: rank, then presence of dims, then dims.
Tri shaped_equal(int nda, const std::optional<std::vector<SymExpr>>& a, int ndb,
                 const std::optional<std::vector<SymExpr>>& b, const Analyzer& ana) {
  if (nda != ndb) return Tri::No;
  if (a.has_value() != b.has_value()) return Tri::No;
  return a ? dims_equal(*a, *b, ana) : Tri::Yes;
}

Tri list_equal(const std::vector<StructInfo>& a, const std::vector<StructInfo>& b, const Analyzer& ana) {
  if (a.size() != b.size()) return Tri::No;
  Tri r = Tri::Yes;
  for (size_t i = 0; i < a.size() && r != Tri::No; ++i) r = tri_and(r, struct_info_equal(a[i], b[i], ana));
  return r;
}

Tri func_equal(const FuncSI& a, const StructInfo& b_si, const Analyzer& ana) {
  StructInfo renamed = rename_signature(a, b_si);
  auto b = as_func(renamed);
  if (a.pure != b->pure || a.params.has_value() != b->params.has_value()) return Tri::No;
  Tri r = a.params ? list_equal(*a.params, *b->params, ana) : Tri::Yes;
  return tri_and(r, struct_info_equal(a.ret, b->ret, ana));
}

}  // namespace

Tri struct_info_equal(const StructInfo& a, const StructInfo& b, const Analyzer& ana) {
  RELAX_CHECK(a && b, "struct_info_equal on a null struct info");
  if (a == b) return Tri::Yes;
  if (a->kind != b->kind) return Tri::No;
  switch (a->kind) {
    case SIKind::Object: return Tri::Yes;
    case SIKind::Prim: return prim_equal(*as<PrimSI>(a), *as<PrimSI>(b), ana);
    case SIKind::Shape: {
      auto x = as<ShapeSI>(a), y = as<ShapeSI>(b);
      return shaped_equal(x->ndim, x->values, y->ndim, y->values, ana);
    }
    case SIKind::Tensor: {
      auto x = as<TensorSI>(a), y = as<TensorSI>(b);
      if (x->dtype != y->dtype) return Tri::No;
      return shaped_equal(x->ndim, x->shape, y->ndim, y->shape, ana);
    }
    case SIKind::Tuple: return list_equal(as<TupleSI>(a)->fields, as<TupleSI>(b)->fields, ana);
    case SIKind::Func: return func_equal(*as<FuncSI>(a), b, ana);
    case SIKind::List: {
      const StructInfo &x = as<ListSI>(a)->elem, &y = as<ListSI>(b)->elem;
      if (!x || !y) return !x && !y ? Tri::Yes : Tri::No;
      return struct_info_equal(x, y, ana);
    }
  }
  return Tri::No;
}

// ---- Base-of ------------------------------------------------------------------------

namespace {

// A dtype slot: Void in the base accepts anything; Void in the derived may
// be anything (Unknown).
Tri dtype_base_of(DataType base, DataType derived) {
  if (base.is_void()) return Tri::Yes;
  if (derived.is_void()) return Tri::Unknown;
  return base == derived ? Tri::Yes : Tri::No;
}

// Rank and dims of a shape or tensor: unknown rank accepts any rank,
// ndim-only accepts any dims of that rank, dims must be provably equal.
Tri shaped_base_of(int bnd, const std::optional<std::vector<SymExpr>>& b, int dnd,
                   const std::optional<std::vector<SymExpr>>& d, const Analyzer& ana) {
  if (bnd < 0) return Tri::Yes;
  if (dnd < 0) return Tri::Unknown;
  if (bnd != dnd) return Tri::No;
  if (!b) return Tri::Yes;
  if (!d) return Tri::Unknown;
  return dims_equal(*b, *d, ana);
}

Tri prim_base_of(const PrimSI& b, const PrimSI& d, const Analyzer& ana) {
  Tri r = dtype_base_of(b.dtype, d.dtype);
  if (r == Tri::No || !b.value.defined()) return r;
  if (!d.value.defined()) return tri_and(r, Tri::Unknown);
  return tri_and(r, ana.prove_equal(b.value, d.value));
}

Tri tuple_base_of(const TupleSI& b, const TupleSI& d, const Analyzer& ana) {
  if (b.fields.size() != d.fields.size()) return Tri::No;
  Tri r = Tri::Yes;
  for (size_t i = 0; i < b.fields.size() && r != Tri::No; ++i)
    r = tri_and(r, is_base_of(b.fields[i], d.fields[i], ana));
  return r;
}

// Functions: an impure base accepts pure functions, not the reverse; params
// are contravariant, the result covariant; an opaque base checks the result
// only; an opaque derived may have any params (Unknown).
Tri func_base_of(const FuncSI& b, const StructInfo& d_si, const Analyzer& ana) {
  StructInfo renamed = rename_signature(b, d_si);
  auto d = as_func(renamed);
  Tri r = (b.pure && !d->pure) ? Tri::No : Tri::Yes;
  if (b.params) {
    if (!d->params) {
      r = tri_and(r, Tri::Unknown);
    } else if (b.params->size() != d->params->size()) {
      return Tri::No;
    } else {
      for (size_t i = 0; i < b.params->size(); ++i) r = tri_and(r, is_base_of((*d->params)[i], (*b.params)[i], ana));
    }
  }
  return tri_and(r, is_base_of(b.ret, d->ret, ana));
}

}  // namespace

Tri is_base_of(const StructInfo& base, const StructInfo& derived, const Analyzer& ana) {
  RELAX_CHECK(base && derived, "is_base_of on a null struct info");
  if (base->kind == SIKind::Object) return Tri::Yes;
  if (derived->kind == SIKind::Object) return Tri::Unknown;  // the object may fit at run time
  if (const auto* l = as<ListSI>(base)) {
    // A tuple fits a list when each of its fields fits the list's element.
    if (const auto* t = as<TupleSI>(derived)) {
      Tri r = Tri::Yes;
      for (const StructInfo& f : t->fields) r = tri_and(r, l->elem ? is_base_of(l->elem, f, ana) : Tri::No);
      return r;
    }
  }
  if (as<TupleSI>(base) && as<ListSI>(derived)) return Tri::Unknown;  // a list may have the tuple's length
  if (base->kind != derived->kind) return Tri::No;
  switch (base->kind) {
    case SIKind::Prim: return prim_base_of(*as<PrimSI>(base), *as<PrimSI>(derived), ana);
    case SIKind::Shape: {
      auto b = as<ShapeSI>(base), d = as<ShapeSI>(derived);
      return shaped_base_of(b->ndim, b->values, d->ndim, d->values, ana);
    }
    case SIKind::Tensor: {
      auto b = as<TensorSI>(base), d = as<TensorSI>(derived);
      Tri r = dtype_base_of(b->dtype, d->dtype);
      if (r == Tri::No) return r;
      return tri_and(r, shaped_base_of(b->ndim, b->shape, d->ndim, d->shape, ana));
    }
    case SIKind::Tuple: return tuple_base_of(*as<TupleSI>(base), *as<TupleSI>(derived), ana);
    case SIKind::Func: return func_base_of(*as<FuncSI>(base), derived, ana);
    case SIKind::List: {
      const StructInfo &b = as<ListSI>(base)->elem, &d = as<ListSI>(derived)->elem;
      if (!d) return Tri::Yes;
      return b ? is_base_of(b, d, ana) : Tri::No;
    }
    case SIKind::Object: break;
  }
  return Tri::Yes;
}

// ---- Unification ---------------------------------------------------------------------

namespace {

// Rank and dims of the least upper bound of two shapes or tensors: the same
// rank keeps dims only when all are provably equal (TensorSI has no partial
// shapes), otherwise ndim only; different ranks give unknown rank.
std::pair<int, std::optional<std::vector<SymExpr>>> unify_dims(int nda, const std::optional<std::vector<SymExpr>>& a,
                                                               int ndb, const std::optional<std::vector<SymExpr>>& b,
                                                               const Analyzer& ana) {
  if (nda < 0 || nda != ndb) return {-1, std::nullopt};
  if (a && b && dims_provably_equal(*a, *b, ana)) return {nda, a};
  return {nda, std::nullopt};
}

StructInfo unify_func(const FuncSI& a, const StructInfo& b_si, const Analyzer& ana) {
  StructInfo renamed = rename_signature(a, b_si);
  auto b = as_func(renamed);
  bool pure = a.pure && b->pure;
  StructInfo ret = unify(a.ret, b->ret, ana);
  // Params are contravariant: keep them only when both sides agree exactly.
  if (a.params && b->params && list_equal(*a.params, *b->params, ana) == Tri::Yes) return func_si(*a.params, ret, pure);
  return opaque_func_si(ret, pure);
}

}  // namespace

StructInfo unify(const StructInfo& a, const StructInfo& b, const Analyzer& ana) {
  RELAX_CHECK(a && b, "unify on a null struct info");
  if (a == b) return a;
  // Lists, and tuples of tensors of different lengths, unify as a list of
  // what all their values fit.
  auto list_items = [](const StructInfo& s, std::vector<StructInfo>& out) {
    if (const auto* l = as<ListSI>(s)) {
      if (l->elem) out.push_back(l->elem);
      return true;
    }
    const auto* t = as<TupleSI>(s);
    if (!t || !std::all_of(t->fields.begin(), t->fields.end(), [](const StructInfo& f) { return as<TensorSI>(f); }))
      return false;
    out.insert(out.end(), t->fields.begin(), t->fields.end());
    return true;
  };
  bool same_tuples = as<TupleSI>(a) && as<TupleSI>(b) && as<TupleSI>(a)->fields.size() == as<TupleSI>(b)->fields.size();
  if ((as<ListSI>(a) || as<ListSI>(b) || (as<TupleSI>(a) && as<TupleSI>(b))) && !same_tuples) {
    std::vector<StructInfo> items;
    if (!list_items(a, items) || !list_items(b, items)) return object_si();
    StructInfo elem;
    for (const StructInfo& e : items) elem = elem ? unify(elem, e, ana) : e;
    return list_si(elem);
  }
  if (a->kind != b->kind || a->kind == SIKind::Object) return object_si();
  switch (a->kind) {
    case SIKind::Prim: {
      auto x = as<PrimSI>(a), y = as<PrimSI>(b);
      if (x->dtype != y->dtype) return prim_si(DataType::void_());
      bool same = x->value.defined() && y->value.defined() && ana.can_prove_equal(x->value, y->value);
      return prim_si(x->dtype, same ? x->value : SymExpr());
    }
    case SIKind::Shape: {
      auto x = as<ShapeSI>(a), y = as<ShapeSI>(b);
      auto [nd, dims] = unify_dims(x->ndim, x->values, y->ndim, y->values, ana);
      return std::make_shared<ShapeSI>(nd, std::move(dims));
    }
    case SIKind::Tensor: {
      auto x = as<TensorSI>(a), y = as<TensorSI>(b);
      DataType dt = x->dtype == y->dtype ? x->dtype : DataType::void_();
      auto [nd, dims] = unify_dims(x->ndim, x->shape, y->ndim, y->shape, ana);
      return std::make_shared<TensorSI>(dt, nd, std::move(dims));
    }
    case SIKind::Tuple: {
      auto& xf = as<TupleSI>(a)->fields;
      auto& yf = as<TupleSI>(b)->fields;
      if (xf.size() != yf.size()) return object_si();
      std::vector<StructInfo> f;
      for (size_t i = 0; i < xf.size(); ++i) f.push_back(unify(xf[i], yf[i], ana));
      return tuple_si(std::move(f));
    }
    case SIKind::Func: return unify_func(*as<FuncSI>(a), b, ana);
    case SIKind::Object:
    case SIKind::List: break;
  }
  return object_si();
}

// ---- Rewriting: erasure and substitution ------------------------------------------------

namespace {

using VarPred = std::function<bool(const SymExpr&)>;

bool mentions_only(const SymExpr& e, const VarPred& in_scope) {
  for (const SymExpr& v : free_vars(e))
    if (!in_scope(v)) return false;
  return true;
}

bool dims_in_scope(const std::vector<SymExpr>& dims, const VarPred& in_scope) {
  return std::all_of(dims.begin(), dims.end(), [&](const SymExpr& d) { return mentions_only(d, in_scope); });
}

// Rebuilds a tuple or function only when a part changed, so unchanged
// struct info keeps its identity.
template <typename F>
std::optional<std::vector<StructInfo>> map_list(const std::vector<StructInfo>& in, F&& f) {
  std::vector<StructInfo> out;
  bool changed = false;
  for (const StructInfo& s : in) {
    out.push_back(f(s));
    changed |= out.back() != s;
  }
  if (!changed) return std::nullopt;
  return out;
}

std::vector<SymExpr> definable_in_params(const FuncSI& f) {
  std::vector<SymExpr> vars;
  if (f.params)
    for (const StructInfo& p : *f.params) collect_definable_vars(p, vars);
  return vars;
}

}  // namespace

StructInfo erase_vars(const StructInfo& si, const VarPred& in_scope) {
  if (!si) return si;
  switch (si->kind) {
    case SIKind::Object:
    case SIKind::List: return si;  // a list's element mentions no variable
    case SIKind::Prim: {
      auto p = as<PrimSI>(si);
      if (!p->value.defined() || mentions_only(p->value, in_scope)) return si;
      return prim_si(p->dtype);
    }
    case SIKind::Shape: {
      auto s = as<ShapeSI>(si);
      if (!s->values || dims_in_scope(*s->values, in_scope)) return si;
      return shape_si_ndim(s->ndim);
    }
    case SIKind::Tensor: {
      auto t = as<TensorSI>(si);
      if (!t->shape || dims_in_scope(*t->shape, in_scope)) return si;
      return tensor_si_ndim(t->dtype, t->ndim);
    }
    case SIKind::Tuple: {
      auto f = map_list(as<TupleSI>(si)->fields, [&](const StructInfo& x) { return erase_vars(x, in_scope); });
      return f ? tuple_si(std::move(*f)) : si;
    }
    case SIKind::Func: {
      // A signature's own variables (those its params define) stay.
      auto fn = as<FuncSI>(si);
      std::vector<SymExpr> own = definable_in_params(*fn);
      VarPred inner = [&](const SymExpr& v) {
        return in_scope(v) || std::find(own.begin(), own.end(), v) != own.end();
      };
      std::optional<std::vector<StructInfo>> params = fn->params;
      bool changed = false;
      if (fn->params) {
        if (auto p = map_list(*fn->params, [&](const StructInfo& x) { return erase_vars(x, inner); })) {
          params = std::move(p);
          changed = true;
        }
      }
      StructInfo ret = erase_vars(fn->ret, inner);
      if (!changed && ret == fn->ret) return si;
      return std::make_shared<FuncSI>(std::move(params), std::move(ret), fn->pure);
    }
  }
  return si;
}

namespace {

std::vector<SymExpr> subst_dims(const std::vector<SymExpr>& dims, const SymMap<SymExpr>& map, bool& changed) {
  std::vector<SymExpr> out;
  for (const SymExpr& d : dims) {
    out.push_back(substitute(d, map));
    changed |= out.back() != d;
  }
  return out;
}

}  // namespace

StructInfo substitute(const StructInfo& si, const SymMap<SymExpr>& map) {
  if (!si || map.empty()) return si;
  bool changed = false;
  switch (si->kind) {
    case SIKind::Object:
    case SIKind::List: return si;
    case SIKind::Prim: {
      auto p = as<PrimSI>(si);
      if (!p->value.defined()) return si;
      SymExpr v = substitute(p->value, map);
      return v == p->value ? si : prim_si(p->dtype, v);
    }
    case SIKind::Shape: {
      auto s = as<ShapeSI>(si);
      if (!s->values) return si;
      auto v = subst_dims(*s->values, map, changed);
      return changed ? shape_si(std::move(v)) : si;
    }
    case SIKind::Tensor: {
      auto t = as<TensorSI>(si);
      if (!t->shape) return si;
      auto v = subst_dims(*t->shape, map, changed);
      return changed ? tensor_si(t->dtype, std::move(v)) : si;
    }
    case SIKind::Tuple: {
      auto f = map_list(as<TupleSI>(si)->fields, [&](const StructInfo& x) { return substitute(x, map); });
      return f ? tuple_si(std::move(*f)) : si;
    }
    case SIKind::Func: {
      auto fn = as<FuncSI>(si);
      std::optional<std::vector<StructInfo>> params = fn->params;
      if (fn->params) {
        if (auto p = map_list(*fn->params, [&](const StructInfo& x) { return substitute(x, map); })) {
          params = std::move(p);
          changed = true;
        }
      }
      StructInfo ret = substitute(fn->ret, map);
      if (!changed && ret == fn->ret) return si;
      return std::make_shared<FuncSI>(std::move(params), std::move(ret), fn->pure);
    }
  }
  return si;
}

// ---- Variable collection -------------------------------------------------------------

namespace {

void add_once(const SymExpr& v, std::vector<SymExpr>& out) {
  if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
}

void collect_dims(const std::optional<std::vector<SymExpr>>& dims, std::vector<SymExpr>& out) {
  if (!dims) return;
  for (const SymExpr& d : *dims) relax::collect_vars(d, out);
}

void collect_lone_dims(const std::optional<std::vector<SymExpr>>& dims, std::vector<SymExpr>& out) {
  if (!dims) return;
  for (const SymExpr& d : *dims)
    if (d.is_var()) add_once(d, out);
}

}  // namespace

void collect_vars(const StructInfo& si, std::vector<SymExpr>& out) {
  if (!si) return;
  switch (si->kind) {
    case SIKind::Object:
    case SIKind::List: return;
    case SIKind::Prim:
      if (as<PrimSI>(si)->value.defined()) relax::collect_vars(as<PrimSI>(si)->value, out);
      return;
    case SIKind::Shape: return collect_dims(as<ShapeSI>(si)->values, out);
    case SIKind::Tensor: return collect_dims(as<TensorSI>(si)->shape, out);
    case SIKind::Tuple:
      for (const StructInfo& f : as<TupleSI>(si)->fields) collect_vars(f, out);
      return;
    case SIKind::Func: {
      auto fn = as<FuncSI>(si);
      if (fn->params)
        for (const StructInfo& p : *fn->params) collect_vars(p, out);
      collect_vars(fn->ret, out);
      return;
    }
  }
}

std::vector<StructInfo> fields_or_self(const StructInfo& si) {
  if (const auto* t = as<TupleSI>(si)) return t->fields;
  return {si};
}

// A function signature's own variables are not definable from outside, so
// Func struct info contributes nothing.
void collect_definable_vars(const StructInfo& si, std::vector<SymExpr>& out) {
  if (!si) return;
  switch (si->kind) {
    case SIKind::Prim:
      if (as<PrimSI>(si)->value.is_var()) add_once(as<PrimSI>(si)->value, out);
      return;
    case SIKind::Shape: return collect_lone_dims(as<ShapeSI>(si)->values, out);
    case SIKind::Tensor: return collect_lone_dims(as<TensorSI>(si)->shape, out);
    case SIKind::Tuple:
      for (const StructInfo& f : as<TupleSI>(si)->fields) collect_definable_vars(f, out);
      return;
    case SIKind::Object:
    case SIKind::List:
    case SIKind::Func: return;
  }
}

// ---- Textual sameness --------------------------------------------------------------------

namespace {

bool list_same(const std::vector<StructInfo>& a, const std::vector<StructInfo>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!struct_info_same(a[i], b[i])) return false;
  return true;
}

}  // namespace

bool struct_info_same(const StructInfo& a, const StructInfo& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind) return false;
  switch (a->kind) {
    case SIKind::Object: return true;
    case SIKind::Prim: {
      auto x = as<PrimSI>(a), y = as<PrimSI>(b);
      return x->dtype == y->dtype && x->value == y->value;
    }
    case SIKind::Shape: {
      auto x = as<ShapeSI>(a), y = as<ShapeSI>(b);
      return x->ndim == y->ndim && x->values == y->values;
    }
    case SIKind::Tensor: {
      auto x = as<TensorSI>(a), y = as<TensorSI>(b);
      return x->dtype == y->dtype && x->ndim == y->ndim && x->shape == y->shape;
    }
    case SIKind::Tuple: return list_same(as<TupleSI>(a)->fields, as<TupleSI>(b)->fields);
    case SIKind::List: {
      const StructInfo &x = as<ListSI>(a)->elem, &y = as<ListSI>(b)->elem;
      return x && y ? struct_info_same(x, y) : !x && !y;
    }
    case SIKind::Func: {
      auto x = as<FuncSI>(a), y = as<FuncSI>(b);
      if (x->pure != y->pure || x->params.has_value() != y->params.has_value()) return false;
      if (x->params && !list_same(*x->params, *y->params)) return false;
      return struct_info_same(x->ret, y->ret);
    }
  }
  return false;
}

}  // namespace relax
