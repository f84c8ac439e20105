// The legaliser registry, LegalizeContext and ProgramBuilder.
#include "passes/legalize/legalize.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/normalize.h"
#include "ir/printer.h"
#include "ir/target_traits.h"
#include "passes/legalize/te.h"

namespace relax {

// ---- registry ------------------------------------------------------------------------

void register_all_legalizers(LegalizerRegistry& reg) {
  register_elementwise_legalizers(reg);
  register_reduce_legalizers(reg);
  register_matmul_legalizers(reg);
  register_manipulate_legalizers(reg);
  register_index_legalizers(reg);
  register_scan_sort_legalizers(reg);
  register_linalg_legalizers(reg);
  register_signal_legalizers(reg);
  register_random_legalizers(reg);
  register_attention_legalizers(reg);
  register_dynamic_legalizers(reg);
  register_nn_legalizers(reg);
  register_pool_legalizers(reg);
  register_image_legalizers(reg);
  register_quant_legalizers(reg);
  register_recurrent_legalizers(reg);
}

void LegalizerRegistry::add(const std::string& op, LegalizeFn fn) {
  if (!fns_.emplace(op, std::move(fn)).second) fail("legalize: op '", op, "' has two legalisers");
}

const LegalizeFn* LegalizerRegistry::find(const std::string& op) const {
  auto it = fns_.find(op);
  return it == fns_.end() ? nullptr : &it->second;
}

std::vector<std::string> LegalizerRegistry::ops() const {
  std::vector<std::string> out;
  for (const auto& [name, fn] : fns_) out.push_back(name);
  return out;
}

const LegalizerRegistry& LegalizerRegistry::global() {
  static const LegalizerRegistry reg = [] {
    LegalizerRegistry r;
    register_all_legalizers(r);
    return r;
  }();
  return reg;
}

// ---- context -------------------------------------------------------------------------

namespace {

// A program's text without its name: equal texts compile to the same code.
std::string program_key(const tir::Program& p) { return print_program("_", p); }

}  // namespace

LegalizeContext::LegalizeContext(IRModule& mod, Analyzer& ana) : mod_(mod), ana_(ana), traits_(TargetTraits::of(mod)) {
  for (const std::string& name : mod_.program_names()) by_text_.emplace(program_key(mod_.program(name)), name);
}

Expr LegalizeContext::add_program(const tir::Program& p) {
  std::string key = program_key(p);
  auto it = by_text_.find(key);
  if (it != by_text_.end()) return make_global_var(it->second);
  std::string name = mod_.fresh_name(p->name.empty() ? "prog" : p->name);
  mod_.add_program(name, tir::make_program(name, p->inputs, p->outputs, p->sym_params, p->body, p->attrs));
  by_text_.emplace(std::move(key), name);
  return make_global_var(name);
}

Expr LegalizeContext::call_tir(const Expr& prog, std::vector<Expr> inputs, const StructInfo& out,
                               const std::vector<SymExpr>& sym_args) {
  std::vector<Expr> args{prog, make_tuple(std::move(inputs))};
  if (!sym_args.empty()) args.push_back(make_shape(sym_args));
  Expr call = make_op_call("call_tir", std::move(args), {}, {out});
  call->sinfo = out;
  return call;
}

bool LegalizeContext::index_checks() const { return mod_.attrs.get_string("index_checks", "1") != "0"; }

Expr LegalizeContext::call_pure_builtin(const std::string& name, std::vector<Expr> args, const StructInfo& out) {
  Expr call = make_op_call("call_pure_builtin", {make_string(name), make_tuple(std::move(args))}, {}, {out});
  call->sinfo = out;
  return call;
}

Var LegalizeContext::emit(const Expr& value, const std::string& hint) {
  ensure_struct_info(value, InferContext{ana_, &mod_});
  Var v = in_dataflow_ ? make_dataflow_var(hint, value->sinfo) : make_var(hint, value->sinfo);
  pending_.push_back(Binding{v, value, nullptr});
  return v;
}

Var LegalizeContext::emit_match_cast(const Expr& value, const StructInfo& si, const std::string& hint) {
  Var v = in_dataflow_ ? make_dataflow_var(hint, si) : make_var(hint, si);
  pending_.push_back(Binding{v, value, si});
  return v;
}

namespace {
std::vector<SymExpr> fresh_dims(const std::string& hint, int ndim) {
  std::vector<SymExpr> dims;
  for (int i = 0; i < ndim; ++i) dims.push_back(SymExpr::var(hint + "_d" + std::to_string(i)));
  return dims;
}
std::string hint_of(const Expr& e, const std::string& def) {
  if (auto* v = as<VarNode>(e)) return v->name;
  return def;
}
}  // namespace

std::optional<Expr> LegalizeContext::bind_tensor(const Expr& e, const std::string& hint) {
  const auto* t = as<TensorSI>(e->sinfo);
  if (!t || t->ndim < 0) return std::nullopt;
  if (t->shape) return e;
  if (t->dtype.is_void()) return std::nullopt;
  std::string h = hint_of(e, hint);
  return emit_match_cast(e, tensor_si(t->dtype, fresh_dims(h, t->ndim)), h);
}

std::optional<std::vector<SymExpr>> LegalizeContext::bind_shape(const Expr& e, const std::string& hint) {
  if (auto* s = as<ShapeExprNode>(e)) return s->values;
  const auto* s = as<ShapeSI>(e->sinfo);
  if (!s) return std::nullopt;
  if (s->values) return *s->values;
  if (s->ndim < 0) return std::nullopt;
  std::string h = hint_of(e, hint);
  std::vector<SymExpr> dims = fresh_dims(h, s->ndim);
  emit_match_cast(e, shape_si(dims), h);
  return dims;
}

std::optional<std::vector<Expr>> LegalizeContext::tuple_fields(const Expr& e, const std::string& hint) {
  if (auto* t = as<TupleNode>(e)) return t->fields;
  const auto* t = as<TupleSI>(e->sinfo);
  if (!t) return std::nullopt;
  std::vector<Expr> out;
  for (size_t i = 0; i < t->fields.size(); ++i)
    out.push_back(emit(make_tuple_get_item(e, int(i)), hint_of(e, hint) + "_" + std::to_string(i)));
  return out;
}

void LegalizeContext::begin_call(bool in_dataflow, std::string name) {
  in_dataflow_ = in_dataflow;
  name_ = std::move(name);
  declined_.clear();
  pending_.clear();
}

void LegalizeContext::check_broadcast(const std::vector<Expr>& operands, const std::vector<SymExpr>& dims) {
  std::vector<Expr> shapes;  // the operands' shapes as shape values: the check reads no tensor
  bool proven = true;
  for (const Expr& e : operands) {
    const auto* t = as<TensorSI>(e->sinfo);
    if (!t) continue;
    if (!t->shape || t->ndim > int(dims.size())) return;  // not this function's case
    shapes.push_back(make_shape(*t->shape));
    const std::vector<SymExpr>& s = *t->shape;
    for (size_t k = 0; k < s.size(); ++k) {
      const SymExpr& od = dims[dims.size() - s.size() + k];
      if (!(s[k].is_const(1) || s[k] == od || ana_.can_prove_equal(s[k], od))) proven = false;
    }
  }
  if (proven || shapes.size() < 2) return;
  shapes.push_back(make_string(name_));
  Expr shape = call_pure_builtin("relax.broadcast_shape", shapes, shape_si_ndim(int(dims.size())));
  emit_match_cast(emit(shape, name_ + "_broadcast"), shape_si(dims), name_ + "_broadcast_checked");
}

std::vector<Binding> LegalizeContext::take_pending() { return std::exchange(pending_, {}); }

// ---- program builder ------------------------------------------------------------------

ProgramBuilder::ProgramBuilder(LegalizeContext& ctx, std::string name_hint) : ctx_(ctx), name_(std::move(name_hint)) {}

ProgramBuilder::ProgramBuilder(LegalizeContext& ctx, const CallNode& call, std::string name_hint)
    : ctx_(ctx), call_(&call), name_(std::move(name_hint)) {}

tir::Buffer ProgramBuilder::arg(size_t k, const std::string& name) {
  RELAX_CHECK(call_, "ProgramBuilder::arg without a call");
  if (k >= call_->args.size()) return nullptr;
  tir::Buffer b = input(call_->args[k], name);
  if (!b) unknown_.push_back(name);
  return b;
}

tir::Buffer ProgramBuilder::result(const std::string& name) {
  RELAX_CHECK(call_, "ProgramBuilder::result without a call");
  tir::Buffer b = output(call_->sinfo, name);
  if (!b) unknown_.push_back(name);
  return b;
}

std::nullopt_t ProgramBuilder::unknown() {
  if (unknown_.empty()) return ctx_.decline("an operand has no known shape or value");
  std::string names;
  for (const std::string& n : unknown_) names += (names.empty() ? "" : ", ") + n;
  return ctx_.decline(names + (unknown_.size() == 1 ? " has" : " have") + " no known shape");
}

SymExpr ProgramBuilder::dim(const SymExpr& d) {
  if (d.is_const()) return d;
  auto it = dims_.find(d);
  if (it != dims_.end()) return it->second;
  SymExpr v = d.is_var() ? d : SymExpr::var("d" + std::to_string(fresh_dims_++));
  dims_.emplace(d, v);
  bound_.push_back(v);
  return v;
}

tir::Buffer ProgramBuilder::input(const Expr& arg, const std::string& name) {
  std::optional<Expr> bound = ctx_.bind_tensor(arg, name);
  if (!bound) return nullptr;
  const auto* t = as<TensorSI>((*bound)->sinfo);
  if (!t || !t->shape || t->dtype.is_void()) return nullptr;
  std::vector<SymExpr> shape;
  for (const SymExpr& d : *t->shape) shape.push_back(dim(d));
  tir::Buffer b = tir::make_buffer(name, t->dtype, std::move(shape));
  inputs_.push_back(b);
  args_.push_back(*bound);
  return b;
}

bool ProgramBuilder::check_indices(const tir::Buffer& x, const tir::Buffer& ind, const std::string& op,
                                   const std::vector<int64_t>& axes, const tir::TExpr& scalar) {
  using namespace te;
  RELAX_CHECK(!axes.empty() && x && (ind || (scalar && axes.size() == 1)));
  if (!ctx_.index_checks()) return true;
  if (scalar && tir::as<tir::ImmNode>(scalar)) return true;  // a constant: the importer checked it
  if (ind && axes.size() > 1 && (ind->shape.empty() || !ind->shape.back().is_const(int64_t(axes.size())))) return false;
  for (int64_t a : axes)
    if (a < 0 || a >= int64_t(x->shape.size())) return false;
  std::string what = op + " '" + ctx_.call_name() + "'";
  Expr site = ctx_.call_pure_builtin("relax.kernel_status", {make_string(what)},
                                     tensor_si(DataType::i64(), std::vector<SymExpr>{SymExpr(4)}));
  Buffer st = input(ctx_.emit(site, ctx_.call_name() + "_status"), "status");
  if (!st) return false;
  // Element i's index, its axis's size and the axis (GatherND: by i's last coordinate).
  struct At {
    TExpr value, size, axis;
  };
  auto at = [&](const Index& i) {
    TExpr size = idx(x->shape[size_t(axes.back())]), axis = idx(axes.back());
    for (size_t k = axes.size() - 1; k-- > 0;) {
      TExpr is_k = eq(i.back(), idx(int64_t(k)));
      size = select(is_k, idx(x->shape[size_t(axes[k])]), size);
      axis = select(is_k, idx(axes[k]), axis);
    }
    return At{as_index(load(ind, i)), size, axis};
  };
  auto bad = [](const At& a) { return or_(lt(a.value, idx(0) - a.size), ge(a.value, a.size)); };
  auto record = [&](const At& a) {
    return tir::make_if(bad(a),
                        tir::make_seq({tir::make_store(st, {idx(1)}, a.value), tir::make_store(st, {idx(2)}, a.size),
                                       tir::make_store(st, {idx(3)}, a.axis), tir::make_store(st, {idx(0)}, idx(1))}));
  };
  if (!ind) {  // one index, a symbolic value
    prelude_.push_back(record(At{as_index(scalar), idx(x->shape[size_t(axes[0])]), idx(axes[0])}));
    return true;
  }
  LoopHints hints;
  hints.vectorize = false;
  if (ctx_.gpu()) {  // a thread per index
    prelude_.push_back(loop_nest(
        ind->shape, [&](const Index& i) { return record(at(i)); }, hints, "c"));
    return true;
  }
  // On the host each row (the last dim) is scanned first for any bad index,
  // a loop with no stores that vectorises (its indices may be computed,
  // inlined from the fused ops that made them); only a row with one is
  // scanned again to record it. Rows run in parallel.
  LoopHints serial{false, false, 1};
  auto row = [&](const Index& outer) -> Stmt {
    std::vector<SymExpr> last;
    if (!ind->shape.empty()) last.push_back(ind->shape.back());
    auto full = [&](const Index& j) {
      Index i = outer;
      i.insert(i.end(), j.begin(), j.end());
      return i;
    };
    Local any = local("any", DataType::i(32));
    Stmt scan = loop_nest(
        last, [&](const Index& j) { return any.set(max_(any.get(), cast(DataType::i(32), bad(at(full(j)))))); }, serial,
        "k");
    Stmt report = loop_nest(
        last, [&](const Index& j) { return record(at(full(j))); }, serial, "r");
    return with_locals({any}, tir::make_seq({any.set(zero(DataType::i(32))), scan,
                                             tir::make_if(ne(any.get(), zero(DataType::i(32))), report)}));
  };
  std::vector<SymExpr> rows(ind->shape.begin(), ind->shape.empty() ? ind->shape.end() : ind->shape.end() - 1);
  hints.work = ind->shape.empty() ? SymExpr(1) : ind->shape.back();
  prelude_.push_back(rows.empty() ? row({}) : loop_nest(rows, row, hints, "c"));
  return true;
}

tir::Buffer ProgramBuilder::output(const StructInfo& si, const std::string& name) {
  const auto* t = as<TensorSI>(si);
  if (!t || !t->shape || t->dtype.is_void()) return nullptr;
  std::vector<SymExpr> shape;
  for (const SymExpr& d : *t->shape) shape.push_back(dim(d));
  tir::Buffer b = tir::make_buffer(name, t->dtype, std::move(shape));
  outputs_.push_back(b);
  out_sinfo_.push_back(si);
  return b;
}

SymExpr ProgramBuilder::sym(const SymExpr& g) {
  if (g.is_const()) return g;
  if (auto it = dims_.find(g); it != dims_.end()) return it->second;
  if (auto it = sym_map_.find(g); it != sym_map_.end()) return it->second;
  bool all_bound = true;
  for (const SymExpr& v : free_vars(g))
    all_bound = all_bound && std::find(bound_.begin(), bound_.end(), v) != bound_.end();
  if (all_bound) return g;
  SymExpr p = g.is_var() ? g : SymExpr::var("s" + std::to_string(sym_params_.size()));
  sym_map_.emplace(g, p);
  sym_params_.push_back(p);
  sym_args_.push_back(g);
  return p;
}

std::optional<tir::TExpr> ProgramBuilder::scalar(const Expr& arg, DataType dtype) {
  auto convert = [&](tir::TExpr v) { return tir::cast(dtype, v); };
  if (auto* p = as<PrimValueNode>(arg)) {
    if (p->dtype.is_float()) return convert(tir::imm(p->dtype, p->float_value));
    if (!p->int_value.defined()) return std::nullopt;
    if (p->int_value.is_const()) return convert(tir::imm_int(p->dtype, p->int_value.const_value()));
    return convert(tir::cast(p->dtype, tir::sym(sym(p->int_value))));
  }
  const auto* si = as<PrimSI>(arg->sinfo);
  if (!si || !si->value.defined()) return std::nullopt;
  if (si->value.is_const()) return convert(tir::imm_int(si->dtype, si->value.const_value()));
  return convert(tir::cast(si->dtype, tir::sym(sym(si->value))));
}

Expr ProgramBuilder::finish(tir::Stmt body, const std::string& name_hint, Attrs attrs) {
  RELAX_CHECK(!outputs_.empty(), "a program without outputs");
  if (!prelude_.empty()) {
    attrs.set("prelude", int64_t(prelude_.size()));
    std::vector<tir::Stmt> all = prelude_;
    all.push_back(body);
    body = tir::make_seq(std::move(all));
  }
  tir::Program p =
      tir::make_program(name_hint.empty() ? name_ : name_hint, inputs_, outputs_, sym_params_, body, std::move(attrs));
  Expr gv = ctx_.add_program(p);
  StructInfo out = out_sinfo_.size() == 1 ? out_sinfo_[0] : tuple_si(out_sinfo_);
  return ctx_.call_tir(gv, args_, out, sym_args_);
}

}  // namespace relax
