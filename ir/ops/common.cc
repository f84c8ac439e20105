#include "ir/ops/common.h"

#include <algorithm>

namespace relax::ops {

const std::string& op_name(const CallNode& call) {
  const OpInfo* op = call.op();
  RELAX_CHECK(op, "an op rule was called on a call to a non-op");
  return op->name;
}

Attrs attrs_of(const CallNode& call) {
  const OpInfo* op = call.op();
  RELAX_CHECK(op, "an op rule was called on a call to a non-op");
  return check_op_attrs(*op, call.attrs, call.args.size());
}

namespace {
StructInfo sinfo_or_deduce(const Expr& e) {
  if (e->sinfo) return e->sinfo;
  if (const auto* t = as<TupleNode>(e)) {
    std::vector<StructInfo> fields;
    for (const Expr& f : t->fields) fields.push_back(sinfo_or_deduce(f));
    return tuple_si(std::move(fields));
  }
  if (const auto* s = as<ShapeExprNode>(e)) return shape_si(s->values);
  return sinfo_of(e);  // raises the "no struct info" error
}
}  // namespace

StructInfo arg_sinfo(const CallNode& call, size_t i) {
  RELAX_CHECK(i < call.args.size(), "argument ", i, " of a call to ", op_name(call));
  return sinfo_or_deduce(call.args[i]);
}

const char* kind_name(const StructInfo& si) {
  if (!si) return "nothing";
  switch (si->kind) {
    case SIKind::Object:
      return "Object";
    case SIKind::Prim:
      return "Prim";
    case SIKind::Shape:
      return "Shape";
    case SIKind::Tensor:
      return "Tensor";
    case SIKind::Tuple:
      return "Tuple";
    case SIKind::Func:
      return "Func";
    case SIKind::List:
      return "List";
  }
  return "?";
}

TensorInfo tensor_info(const std::string& op, const StructInfo& si, const std::string& what, bool allow_prim) {
  if (const auto* t = as<TensorSI>(si)) return TensorInfo{t->dtype, t->ndim, t->shape, false};
  if (const auto* p = as<PrimSI>(si); p && allow_prim) return TensorInfo{p->dtype, 0, Dims{}, true};
  fail(op, ": ", what, " must be a tensor", allow_prim ? " or a scalar" : "", ", got ", kind_name(si));
}

TensorInfo tensor_arg(const CallNode& call, size_t i, bool allow_prim) {
  return tensor_info(op_name(call), arg_sinfo(call, i), cat("argument ", i), allow_prim);
}

ShapeInfo shape_arg(const CallNode& call, size_t i) {
  if (const auto* s = as<ShapeExprNode>(call.args.at(i))) return ShapeInfo{int(s->values.size()), s->values};
  StructInfo si = arg_sinfo(call, i);
  if (const auto* s = as<ShapeSI>(si)) return ShapeInfo{s->values ? int(s->values->size()) : s->ndim, s->values};
  fail(op_name(call), ": argument ", i, " must be a shape, got ", kind_name(si));
}

std::vector<StructInfo> tuple_arg(const CallNode& call, size_t i) {
  StructInfo si = arg_sinfo(call, i);
  if (const auto* t = as<TupleSI>(si)) return t->fields;
  fail(op_name(call), ": argument ", i, " must be a tuple, got ", kind_name(si));
}

StructInfo make_tensor(DataType dtype, int ndim, std::optional<Dims> shape) {
  if (shape) return tensor_si(dtype, std::move(*shape));
  return tensor_si_ndim(dtype, ndim);
}

int normalize_axis(const std::string& op, int64_t axis, int ndim) {
  if (axis < -ndim || axis >= ndim) fail(op, ": axis ", axis, " is out of range for a tensor of rank ", ndim);
  return int(axis < 0 ? axis + ndim : axis);
}

std::vector<int> normalize_axes(const std::string& op, const std::vector<int64_t>& axes, int ndim) {
  std::vector<int> out;
  for (int64_t a : axes) {
    int n = normalize_axis(op, a, ndim);
    if (std::find(out.begin(), out.end(), n) != out.end()) fail(op, ": axis ", a, " is repeated");
    out.push_back(n);
  }
  return out;
}

DataType common_dtype(const std::string& op, DataType a, DataType b) {
  if (a.is_void() || b.is_void()) return DataType::void_();
  if (a != b) fail(op, ": dtypes ", a, " and ", b, " differ");
  return a;
}

void check_8bit_operand(const std::string& op, const TensorInfo& v, const char* name, const TensorInfo& zp,
                        const char* zp_name) {
  if (!v.dtype.is_void() && !((v.dtype.is_int() || v.dtype.is_uint()) && v.dtype.bits == 8))
    fail(op, ": ", name, " must be u8 or i8, got ", v.dtype);
  if (!zp.dtype.is_void() && !v.dtype.is_void() && zp.dtype != v.dtype)
    fail(op, ": ", zp_name, "'s dtype ", zp.dtype, " differs from ", name, "'s ", v.dtype);
}

void require_float(const std::string& op, DataType dtype, const std::string& what) {
  if (!dtype.is_void() && !dtype.is_float()) fail(op, ": ", what, " must have a float dtype, got ", dtype);
}

void require_bool(const std::string& op, DataType dtype, const std::string& what) {
  if (!dtype.is_void() && !dtype.is_bool()) fail(op, ": ", what, " must have dtype bool, got ", dtype);
}

void require_integer(const std::string& op, DataType dtype, const std::string& what, bool allow_bool) {
  if (dtype.is_void() || dtype.is_integer() || (allow_bool && dtype.is_bool())) return;
  fail(op, ": ", what, " must have an integer dtype, got ", dtype);
}

namespace {
bool has_min_max(const SymExpr& e) {
  if (e.kind() == SymKind::Min || e.kind() == SymKind::Max) return true;
  for (const SymTerm& t : e->terms)
    if (has_min_max(t.term)) return true;
  for (const SymExpr& o : e->operands)
    if (has_min_max(o)) return true;
  return false;
}
}  // namespace

std::optional<SymExpr> broadcast_dim(const std::string& op, const SymExpr& a, const SymExpr& b, int axis,
                                     const Analyzer& ana) {
  if (a == b || ana.can_prove_equal(a, b)) return a;
  if (a.is_const(1)) return b;
  if (b.is_const(1)) return a;
  bool a_not_1 = ana.can_prove_not_equal(a, 1), b_not_1 = ana.can_prove_not_equal(b, 1);
  if (ana.can_prove_not_equal(a, b) && a_not_1 && b_not_1)
    fail(op, ": cannot broadcast dims ", a, " and ", b, " at axis ", axis);
  // Not provably equal, but every valid broadcast gives one answer: a dim
  // that cannot be 1 (the other must be 1 or equal to it), or the larger of
  // two ordered dims when the smaller is 1 wherever the larger is (`s`
  // against a table slice `min(s, 512)`). The legaliser checks at run time
  // that the operands do broadcast to it (LegalizeContext::check_broadcast).
  if (a_not_1 && !b_not_1) return a;
  if (b_not_1 && !a_not_1) return b;
  auto larger = [&](const SymExpr& big, const SymExpr& small) {
    if (!ana.can_prove_less_equal(small, big)) return false;
    if (ana.can_prove_less_equal(1, small)) return true;  // big == 1 leaves small == 1
    if (!big.is_var()) return false;
    SymExpr at_1 = ana.simplify(substitute(small, SymMap<SymExpr>{{big, SymExpr(1)}}));
    return at_1.is_const(1);
  };
  if (larger(a, b)) return a;
  if (larger(b, a)) return b;
  // Still unproven, where one dim clamps (min or max: a slice of a fixed
  // table, GPT-2's causal mask `bias[:, :, k - q : k, :k]` sliced to
  // max(min(p + s, 64) - min(p, 64), 0) against the scores' s) and the
  // other does not: the plain one, which the clamp equals whenever the
  // model is used within its table. Checked at run time like the others.
  bool clamp_a = has_min_max(a), clamp_b = has_min_max(b);
  if (clamp_a != clamp_b) return clamp_a ? b : a;
  return std::nullopt;
}

TensorInfo broadcast(const std::string& op, const TensorInfo& a, const TensorInfo& b, const Analyzer& ana) {
  TensorInfo out;
  if (a.unknown_rank() || b.unknown_rank()) return out;
  out.ndim = std::max(a.ndim, b.ndim);
  if (!a.shape || !b.shape) return out;
  Dims dims(out.ndim);
  bool known = true;
  for (int i = 0; i < out.ndim; ++i) {
    int ia = i - (out.ndim - a.ndim), ib = i - (out.ndim - b.ndim);
    if (ia < 0) {
      dims[i] = (*b.shape)[ib];
    } else if (ib < 0) {
      dims[i] = (*a.shape)[ia];
    } else if (auto d = broadcast_dim(op, (*a.shape)[ia], (*b.shape)[ib], i, ana)) {
      dims[i] = *d;
    } else {
      known = false;  // keep going: a later axis may still be a provable mismatch
    }
  }
  if (known) out.shape = std::move(dims);
  return out;
}

std::vector<SymExpr> get_syms(const Attrs& attrs, const std::string& name) {
  const AttrValue* v = attrs.find(name);
  if (!v) return {};
  if (const auto* syms = std::get_if<std::vector<SymExpr>>(v)) return *syms;
  std::vector<SymExpr> out;
  for (int64_t i : std::get<std::vector<int64_t>>(*v)) out.push_back(SymExpr(i));
  return out;
}

void check_dims_nonnegative(const std::string& op, const Dims& dims, const Analyzer& ana) {
  for (const SymExpr& d : dims)
    if (ana.prove_less(d, 0) == Tri::Yes) fail(op, ": negative dim ", d, " in the requested shape");
}

SymExpr product(const Dims& dims) {
  SymExpr p = 1;
  for (const SymExpr& d : dims) p = p * d;
  return p;
}

std::vector<int64_t> spatial_list(const std::string& op, const std::string& attr, std::vector<int64_t> v, int n,
                                  int64_t fill) {
  if (v.empty()) return std::vector<int64_t>(n, fill);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (int(v.size()) != n) fail(op, ": ", attr, " has ", v.size(), " values, expected ", n);
  return v;
}

SymExpr get_sym(const Attrs& attrs, const std::string& name) {
  const AttrValue* v = attrs.find(name);
  if (!v) return {};
  if (const auto* s = std::get_if<SymExpr>(v)) return *s;
  return SymExpr(std::get<int64_t>(*v));
}

bool is_unset(const SymExpr& s) { return !s.defined() || s.is_const(-1); }

void check_count(const std::string& op, const std::string& what, const SymExpr& s, const Analyzer& ana, bool positive) {
  if (ana.prove_less(s, positive ? 1 : 0) == Tri::Yes)
    fail(op, ": ", what, " must be ", positive ? "positive" : "non-negative", ", got ", s);
}

void check_scalar_arg(const CallNode& call, size_t i, const char* what, const Analyzer& ana) {
  if (call.args.size() <= i) return;
  const std::string& op = op_name(call);
  TensorInfo t = tensor_arg(call, i, true);
  if (t.ndim > 1) fail(op, ": ", what, " must be a scalar, got a rank-", t.ndim, " tensor");
  if (t.ndim == 1 && t.shape && ana.can_prove_not_equal((*t.shape)[0], 1))
    fail(op, ": ", what, " must have one element, got ", (*t.shape)[0]);
}

void check_dims_equal(const std::string& op, const SymExpr& got, const SymExpr& want, const std::string& what,
                      const Analyzer& ana) {
  if (got.defined() && want.defined() && ana.can_prove_not_equal(got, want))
    fail(op, ": ", what, " is ", got, ", expected ", want);
}

void check_axis_arg(const CallNode& call, size_t i, const Analyzer& ana) {
  if (call.args.size() <= i) return;
  check_scalar_arg(call, i, "the axis operand", ana);
  require_integer(op_name(call), tensor_arg(call, i, true).dtype, "the axis operand", false);
}

}  // namespace relax::ops
