#include "backends/vm/lower.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "backends/vm/kernel_abi.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "ir/visitor.h"
#include "passes/analysis/memory_plan.h"

namespace relax {
namespace {

namespace P = rt::ShapePattern;
using rt::Arg;

// A dtype as the runtime packs it (rt::DType::pack).
int64_t packed(DataType d) { return int64_t(d.code) | int64_t(d.bits) << 8 | int64_t(d.lanes) << 16; }

// Module-wide tables: functions, kernels, builtins and constants, each
// entered once.
class ModuleLowering {
 public:
  explicit ModuleLowering(const IRModule& mod) : mod_(mod) {}

  VMLowered run();

  int function_index(const std::string& name) {
    auto it = function_index_.find(name);
    if (it == function_index_.end()) fail("vm lowering: @", name, " is not a graph function of the module");
    return it->second;
  }
  int kernel_index(const std::string& program) {
    auto [it, fresh] = kernel_index_.emplace(program, int(out_.programs.size()));
    if (fresh) {
      out_.programs.push_back(program);
      out_.exe.kernels.push_back(program);
      out_.exe.kernel_signatures.push_back(signature(program));
    }
    return it->second;
  }
  rt::KernelSignature signature(const std::string& program) const {
    tir::Program p = mod_.program(program);
    if (!p) fail("vm lowering: the module has no tensor program @", program);
    rt::KernelSignature sig;
    for (const auto* list : {&p->inputs, &p->outputs})
      for (const tir::Buffer& b : *list) {
        sig.dtypes.push_back(packed(b->dtype));
        sig.ranks.push_back(int64_t(b->shape.size()));
      }
    shape_arg_slots(*p, &sig.num_shape_args);
    return sig;
  }
  // A slot for a function lowered later (nested functions, lifted).
  int reserve_function() {
    out_.exe.functions.emplace_back();
    return int(out_.exe.functions.size() - 1);
  }
  void set_function(int index, rt::Function f, std::vector<std::string> sources) {
    out_.exe.functions[size_t(index)] = std::move(f);
    sources_[out_.exe.functions[size_t(index)].name] = std::move(sources);
  }

  int builtin_index(const std::string& name) {
    auto [it, fresh] = builtin_index_.emplace(name, int(out_.exe.builtins.size()));
    if (fresh) out_.exe.builtins.push_back(name);
    return it->second;
  }
  Arg constant(rt::Constant c) {
    std::ostringstream key;
    key << int(c.kind) << '|' << c.i << '|' << c.f << '|' << c.s << '|';
    for (int64_t v : c.list) key << v << ',';
    auto [it, fresh] = const_index_.emplace(key.str(), int64_t(out_.exe.constants.size()));
    if (fresh) {
      if (c.kind == rt::Constant::Kind::Weight) out_.weights.push_back(c.s);
      out_.exe.constants.push_back(std::move(c));
    }
    return Arg::constant(it->second);
  }
  Arg string_const(const std::string& s) {
    rt::Constant c;
    c.kind = rt::Constant::Kind::String;
    c.s = s;
    return constant(std::move(c));
  }
  Arg list_const(std::vector<int64_t> v) {
    rt::Constant c;
    c.kind = rt::Constant::Kind::IntList;
    c.list = std::move(v);
    return constant(std::move(c));
  }
  Arg dtype_const(DataType d) {
    rt::Constant c;
    c.kind = rt::Constant::Kind::DType;
    c.i = packed(d);
    return constant(std::move(c));
  }

  const IRModule& mod() const { return mod_; }

 private:
  void check_readable() const;

  const IRModule& mod_;
  VMLowered out_;
  std::map<std::string, std::vector<std::string>> sources_;  // function -> the variable of each instruction
  std::map<std::string, int> function_index_, kernel_index_, builtin_index_;
  std::map<std::string, int64_t> const_index_;
};

std::string sinfo_text(const StructInfo& si) { return print_sinfo(si); }

// The variables a nested function uses that it does not bind, in order of
// first use: what its closure captures.
class FreeVars : public ExprVisitor {
 public:
  static std::vector<const VarNode*> of(const Expr& e) {
    FreeVars v;
    v.visit(e);
    return std::move(v.out_);
  }

 private:
  void visit_var(const VarNode& v) override {
    if (!bound_.count(&v) && std::find(out_.begin(), out_.end(), &v) == out_.end()) out_.push_back(&v);
  }
  void visit_binding(const Binding& b) override {
    visit(b.value);
    bound_.insert(b.var.get());
  }
  void visit_function(const FunctionNode& f) override {
    for (const Var& p : f.params) bound_.insert(p.get());
    visit(f.body);
  }

  std::set<const VarNode*> bound_;
  std::vector<const VarNode*> out_;
};

// The symbolic variables mentioned anywhere in an expression: struct info,
// shapes, prim values, match_casts, signatures.
class SymVars : public ExprVisitor {
 public:
  static std::vector<SymExpr> of(const Expr& e) {
    SymVars v;
    v.visit(e);
    return std::move(v.out_);
  }

 private:
  void visit(const Expr& e) override {
    if (e && e->sinfo) collect_vars(e->sinfo, out_);
    ExprVisitor::visit(e);
  }
  void visit_leaf(const Expr& e) override {
    if (const auto* s = as<ShapeExprNode>(e))
      for (const SymExpr& v : s->values) collect_vars(v, out_);
    if (const auto* p = as<PrimValueNode>(e); p && p->int_value.defined()) collect_vars(p->int_value, out_);
  }
  void visit_call(const CallNode& c) override {  // not the callee
    for (const Expr& a : c.args) visit(a);
    for (const StructInfo& si : c.sinfo_args)
      if (si) collect_vars(si, out_);
  }
  void visit_binding(const Binding& b) override {
    if (b.var->sinfo) collect_vars(b.var->sinfo, out_);
    if (b.cast) collect_vars(b.cast, out_);
    visit(b.value);
  }
  void visit_function(const FunctionNode& f) override {
    for (const Var& p : f.params) collect_vars(p->sinfo, out_);
    if (f.ret) collect_vars(f.ret, out_);
    visit(f.body);
  }

  std::vector<SymExpr> out_;
};

// One graph function -> one VM function.
class FunctionLowering {
 public:
  // The ops lower_call implements (vm_lowered_ops).
  static std::vector<std::string> lowered_ops() {
    std::vector<std::string> out;
    for (const auto& [op, fn] : op_lowerings()) out.push_back(op);
    return out;
  }

  explicit FunctionLowering(ModuleLowering& m) : m_(m) {}
  rt::Function take() { return std::move(fn_); }
  // The variable each instruction was lowered for ("" for the entry
  // checks), parallel to the code take() returns.
  std::vector<std::string> take_sources() {
    sources_.resize(fn_.code.size());
    return std::move(sources_);
  }

  // A nested function lifted to the module: the values it captures come
  // first, then (when it uses symbolic variables of the enclosing scope) a
  // shape holding their values, then its own parameters.
  void lower_lifted(const std::string& name, const Function& f, const std::vector<const VarNode*>& captured,
                    const std::vector<SymExpr>& syms) {
    fn_.name = name;
    for (const VarNode* v : captured) {
      fn_.params.push_back(v->name);
      reg_of_[v] = new_reg();
    }
    if (!syms.empty()) {
      fn_.params.push_back("captured shape variables");
      int r = new_reg();
      std::vector<int64_t> pattern{int64_t(syms.size())};
      std::vector<std::string> names;
      for (const SymExpr& v : syms) {
        int64_t slot = next_slot_++;
        slot_of_.emplace(v, slot);
        pattern.insert(pattern.end(), {P::kBind, slot, Interval::kNegInf, Interval::kPosInf});
        names.push_back(v.name());
      }
      emit_match(Arg::reg(r), std::move(pattern), name, names, DataType::void_());
    }
    lower(name, f);
  }

  void lower(const std::string& name, const Function& f) {
    fn_.name = name;
    // Bounds recorded on the function (relax-build --bound): storage may
    // have been planned for them.
    for (const auto& [var, b] : function_bounds(f)) bounds_.emplace(var, b);
    for (const Var& p : f->params) {
      fn_.params.push_back(p->name);
      reg_of_[p.get()] = new_reg();
    }
    // Two rounds, so a dim `n + 1` of the first parameter can be checked
    // after a later parameter binds n.
    std::vector<std::function<void()>> deferred;
    // The model's names of the inputs (attribute input_names, set by the
    // importer where the IR's differ) name them in the checks' errors.
    const AttrValue* given = f->attrs.find("input_names");
    const auto* names = given ? std::get_if<std::vector<std::string>>(given) : nullptr;
    for (size_t i = 0; i < f->params.size(); ++i) {
      const Var& p = f->params[i];
      std::string name = names && names->size() == f->params.size() ? (*names)[i] : p->name;
      std::string ctx = "input '" + name + "' (" + sinfo_text(p->sinfo) + ")";
      match(Arg::reg(reg_of_[p.get()]), p->sinfo, ctx, &deferred);
    }
    for (auto& d : deferred) d();
    int result = lower_seq(f->body);
    emit_ret(result);
    fn_.heap_size = int32_t(next_slot_);
  }

 private:
  int new_reg() { return fn_.num_registers++; }

  void emit_builtin(const std::string& name, std::vector<Arg> args, int dst = -1) {
    rt::Instr in;
    in.op = rt::Opcode::Call;
    in.dst = dst;
    in.callee_kind = rt::CalleeKind::Builtin;
    in.callee = m_.builtin_index(name);
    in.args = std::move(args);
    fn_.code.push_back(std::move(in));
  }
  void emit_ret(int reg) {
    rt::Instr in;
    in.op = rt::Opcode::Ret;
    in.dst = reg;
    fn_.code.push_back(std::move(in));
  }

  // ---- Symbolic shapes ------------------------------------------------------

  bool bound(const SymExpr& v) const { return slot_of_.count(v) != 0; }
  bool all_bound(const SymExpr& e) const {
    for (const SymExpr& v : free_vars(e))
      if (!bound(v)) return false;
    return true;
  }

  void emit_code(const SymExpr& e, std::vector<int64_t>& code) {
    sym_to_code(
        e,
        [&](const SymExpr& v) {
          auto it = slot_of_.find(v);
          if (it == slot_of_.end())
            fail("vm lowering: in @", fn_.name, ": the symbolic variable ", v.name(),
                 " is used before any input or match_cast binds it");
          return it->second;
        },
        code);
  }
  void emit_dim_expr(const SymExpr& e, std::vector<int64_t>& pattern) {
    std::vector<int64_t> code;
    emit_code(e, code);
    pattern.push_back(P::kExpr);
    pattern.push_back(int64_t(code.size()));
    pattern.insert(pattern.end(), code.begin(), code.end());
  }

  // A shape value computed from the heap; a constant when it can be.
  Arg shape_arg(const std::vector<SymExpr>& dims) {
    bool constant = true;
    for (const SymExpr& d : dims) constant = constant && d.is_const();
    if (constant) {
      std::vector<int64_t> v;
      for (const SymExpr& d : dims) v.push_back(d.const_value());
      return m_.list_const(std::move(v));
    }
    std::vector<int64_t> pattern{int64_t(dims.size())};
    for (const SymExpr& d : dims) emit_dim_expr(d, pattern);
    int r = new_reg();
    emit_builtin("relax.make_shape", {m_.list_const(std::move(pattern))}, r);
    return Arg::reg(r);
  }

  // Checks `value` against `si` and binds the variables it introduces.
  // Dims whose variables are not bound yet are deferred (when `deferred`
  // is given) or an error.
  void match(Arg value, const StructInfo& si, const std::string& ctx,
             std::vector<std::function<void()>>* deferred = nullptr) {
    if (const auto* t = as<TensorSI>(si)) {
      match_dims(value, t->ndim, t->shape, t->dtype, ctx, deferred);
    } else if (const auto* s = as<ShapeSI>(si)) {
      match_dims(value, s->ndim, s->values, DataType::void_(), ctx, deferred);
    } else if (const auto* p = as<PrimSI>(si)) {
      if (p->value.defined()) {
        std::optional<std::vector<SymExpr>> v = std::vector<SymExpr>{p->value};
        match_dims(value, -2, v, p->dtype, ctx, deferred);
      }
    } else if (const auto* tu = as<TupleSI>(si)) {
      for (size_t i = 0; i < tu->fields.size(); ++i) {
        if (as<ObjectSI>(tu->fields[i])) continue;
        int r = new_reg();
        emit_builtin("relax.tuple_get", {value, Arg::imm(int64_t(i))}, r);
        match(Arg::reg(r), tu->fields[i], ctx + " field " + std::to_string(i), deferred);
      }
    }
  }

  // Emits relax.match_shape of `value` against `pattern`; `names` spell the
  // dims for messages.
  void emit_match(Arg value, std::vector<int64_t> pattern, const std::string& ctx,
                  const std::vector<std::string>& names, DataType dtype) {
    std::string joined;
    for (size_t i = 0; i < names.size(); ++i) joined += (i ? "\x1f" : "") + names[i];
    emit_builtin("relax.match_shape", {value, m_.list_const(std::move(pattern)), m_.string_const(ctx),
                                       m_.string_const(joined), m_.dtype_const(dtype)});
  }

  // ndim -2 marks a prim value (one "dim": the value itself).
  void match_dims(Arg value, int ndim, const std::optional<std::vector<SymExpr>>& dims, DataType dtype,
                  const std::string& ctx, std::vector<std::function<void()>>* deferred) {
    std::vector<int64_t> pattern{ndim};
    std::vector<std::string> names;
    std::vector<size_t> later;  // compound dims whose variables are bound later
    if (dims) {
      for (size_t i = 0; i < dims->size(); ++i) {
        const SymExpr& d = (*dims)[i];
        names.push_back(to_string(d));
        if (d.is_var() && !bound(d)) {
          int64_t slot = next_slot_++;
          slot_of_.emplace(d, slot);
          Interval b{0, Interval::kPosInf};
          if (auto it = bounds_.find(d.name()); it != bounds_.end()) b = it->second;
          pattern.insert(pattern.end(), {P::kBind, slot, b.lo, b.hi});
        } else if (all_bound(d)) {
          emit_dim_expr(d, pattern);
        } else {
          pattern.push_back(P::kAny);
          later.push_back(i);
        }
      }
    } else if (ndim >= 0) {
      pattern.insert(pattern.end(), size_t(ndim), P::kAny);
      names.assign(size_t(ndim), "?");
    }
    emit_match(value, std::move(pattern), ctx, names, dtype);
    if (later.empty()) return;
    // Check those dims once their variables are bound.
    auto check = [this, value, ndim, later, dims, ctx, names]() {
      std::vector<int64_t> pattern{ndim};
      for (size_t i = 0; i < dims->size(); ++i) {
        if (std::find(later.begin(), later.end(), i) == later.end()) {
          pattern.push_back(P::kAny);
          continue;
        }
        if (!all_bound((*dims)[i]))
          fail("vm lowering: ", ctx, ": dim ", i, " (", names[i],
               ") uses a variable that nothing binds; give it a plain variable or a constant");
        emit_dim_expr((*dims)[i], pattern);
      }
      emit_match(value, std::move(pattern), ctx, names, DataType::void_());
    };
    if (deferred)
      deferred->push_back(check);
    else
      check();
  }

  // ---- Expressions ----------------------------------------------------------

  int lower_seq(const SeqExpr& seq) {
    for (const BindingBlock& block : seq->blocks)
      for (const Binding& b : block.bindings) lower_binding(b);
    return to_reg(lower_value(seq->body, ""));
  }

  int to_reg(Arg a) {
    if (a.kind == rt::ArgKind::Register) return int(a.value);
    int r = new_reg();
    emit_builtin("relax.move", {a}, r);
    return r;
  }

  void lower_binding(const Binding& b) {
    current_ = b.var->name;
    size_t first = fn_.code.size();
    Arg value = lower_value(b.value, b.var->name);
    if (b.is_match_cast()) {
      match(value, b.cast, "match_cast of '" + b.var->name + "' (" + sinfo_text(b.cast) + ")");
    }
    reg_of_[b.var.get()] = to_reg(value);
    // Instructions of bindings nested in this one (an If's branches) keep
    // their own names.
    sources_.resize(fn_.code.size());
    for (size_t pc = first; pc < sources_.size(); ++pc)
      if (sources_[pc].empty()) sources_[pc] = b.var->name;
  }

  // Lowers an expression; `name` is the variable it binds (for messages).
  Arg lower_value(const Expr& e, const std::string& name) {
    switch (e->kind) {
      case ExprKind::Var:
      case ExprKind::DataflowVar: {
        auto it = reg_of_.find(static_cast<const VarNode*>(e.get()));
        if (it == reg_of_.end())
          fail("vm lowering: in @", fn_.name, ": '", static_cast<const VarNode*>(e.get())->name,
               "' is not bound (nested functions are not supported yet)");
        return Arg::reg(it->second);
      }
      case ExprKind::Constant: {
        rt::Constant c;
        c.kind = rt::Constant::Kind::Weight;
        c.s = static_cast<const ConstantNode*>(e.get())->name;
        return m_.constant(std::move(c));
      }
      case ExprKind::PrimValue: {
        const auto* p = static_cast<const PrimValueNode*>(e.get());
        if (p->dtype.is_float()) {
          rt::Constant c;
          c.kind = rt::Constant::Kind::Float;
          c.f = p->float_value;
          return m_.constant(std::move(c));
        }
        if (p->int_value.is_const()) return Arg::imm(p->int_value.const_value());
        std::vector<int64_t> pattern{-2};
        emit_dim_expr(p->int_value, pattern);
        int r = new_reg();
        emit_builtin("relax.make_prim", {m_.list_const(std::move(pattern))}, r);
        return Arg::reg(r);
      }
      case ExprKind::StringImm:
        return m_.string_const(static_cast<const StringImmNode*>(e.get())->value);
      case ExprKind::ShapeExpr: {
        Arg s = shape_arg(static_cast<const ShapeExprNode*>(e.get())->values);
        if (s.kind == rt::ArgKind::Const) {
          int r = new_reg();
          emit_builtin("relax.move", {s}, r);
          return Arg::reg(r);
        }
        return s;
      }
      case ExprKind::Tuple: {
        std::vector<Arg> fields;
        for (const Expr& f : static_cast<const TupleNode*>(e.get())->fields) fields.push_back(lower_value(f, name));
        int r = new_reg();
        emit_builtin("relax.make_tuple", std::move(fields), r);
        return Arg::reg(r);
      }
      case ExprKind::TupleGetItem: {
        const auto* g = static_cast<const TupleGetItemNode*>(e.get());
        Arg t = lower_value(g->tuple, name);
        int r = new_reg();
        emit_builtin("relax.tuple_get", {t, Arg::imm(g->index)}, r);
        return Arg::reg(r);
      }
      case ExprKind::Call:
        return lower_call(*static_cast<const CallNode*>(e.get()), name);
      case ExprKind::If:
        return lower_if(*static_cast<const IfNode*>(e.get()), name);
      case ExprKind::SeqExpr:
        return Arg::reg(lower_seq(std::static_pointer_cast<const SeqExprNode>(e)));
      case ExprKind::Function:
        return lower_closure(std::static_pointer_cast<const FunctionNode>(e), name);
      default:
        fail("vm lowering: in @", fn_.name, ", '", name, "': cannot lower a ", expr_kind_name(e->kind),
             " (nested functions and closures are not supported yet)");
    }
  }

  // ---- Nested functions -----------------------------------------------------

  Arg lower_closure(const Function& f, const std::string& name) {
    std::vector<const VarNode*> captured = FreeVars::of(f);
    std::vector<SymExpr> syms;
    for (const SymExpr& v : SymVars::of(f))
      if (slot_of_.count(v)) syms.push_back(v);
    int index = m_.reserve_function();
    FunctionLowering sub(m_);
    sub.lower_lifted(fn_.name + "." + (name.empty() ? "fn" : name), f, captured, syms);
    std::vector<std::string> sources = sub.take_sources();  // before take(): it sizes them by the code
    m_.set_function(index, sub.take(), std::move(sources));
    std::vector<Arg> args{Arg::imm(index)};
    for (const VarNode* v : captured) {
      auto it = reg_of_.find(v);
      if (it == reg_of_.end())
        fail("vm lowering: in @", fn_.name, ": '", v->name, "' is used by a nested function before it is bound");
      args.push_back(Arg::reg(it->second));
    }
    if (!syms.empty()) args.push_back(shape_arg(syms));
    int r = new_reg();
    emit_builtin("relax.make_closure", std::move(args), r);
    return Arg::reg(r);
  }

  Arg lower_loop(const CallNode& call, const std::string& name) {
    Arg body = lower_value(call.args[0], name), trip = lower_value(call.args[1], name),
        cond = lower_value(call.args[2], name), init = lower_value(call.args[3], name);
    std::vector<int64_t> scan_dtypes;
    size_t carried = as<TupleNode>(call.args[3]) ? as<TupleNode>(call.args[3])->fields.size() : 0;
    if (const auto* t = as<TupleSI>(call.sinfo)) {
      for (size_t k = carried; k < t->fields.size(); ++k) {
        const auto* ts = as<TensorSI>(t->fields[k]);
        DataType d = ts ? ts->dtype : DataType::void_();
        scan_dtypes.push_back(int64_t(d.code) | int64_t(d.bits) << 8 | int64_t(d.lanes) << 16);
      }
    }
    int r = new_reg();
    emit_builtin("relax.loop", {body, trip, cond, init, m_.list_const(std::move(scan_dtypes))}, r);
    return Arg::reg(r);
  }

  Arg lower_scan(const CallNode& call, const std::string& name) {
    std::vector<Arg> args;
    for (const Expr& a : call.args) args.push_back(lower_value(a, name));
    for (const char* attr : {"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"})
      args.push_back(m_.list_const(call.attrs.get_ints(attr)));
    args.push_back(Arg::imm(call.attrs.get_bool("batched") ? 1 : 0));
    int r = new_reg();
    emit_builtin("relax.scan", std::move(args), r);
    return Arg::reg(r);
  }

  Arg lower_if(const IfNode& n, const std::string& name) {
    Arg cond = lower_value(n.cond, name);
    int dst = new_reg();
    size_t branch_pc = fn_.code.size();
    rt::Instr br;
    br.op = rt::Opcode::If;
    br.dst = to_reg(cond);
    fn_.code.push_back(br);
    auto saved = slot_of_;
    int then_reg = lower_seq(n.then_branch);
    emit_builtin("relax.move", {Arg::reg(then_reg)}, dst);
    size_t goto_pc = fn_.code.size();
    rt::Instr go;
    go.op = rt::Opcode::Goto;
    fn_.code.push_back(go);
    fn_.code[branch_pc].offset = int64_t(fn_.code.size() - branch_pc);
    slot_of_ = saved;
    int else_reg = lower_seq(n.else_branch);
    emit_builtin("relax.move", {Arg::reg(else_reg)}, dst);
    fn_.code[goto_pc].offset = int64_t(fn_.code.size() - goto_pc);
    // What a branch bound is forgotten after it, so nothing reads a slot the
    // other branch skipped; the slots themselves are not reused.
    slot_of_ = saved;
    return Arg::reg(dst);
  }

  std::vector<Arg> lower_args(const Expr& tuple, const std::string& name) {
    std::vector<Arg> out;
    if (const auto* t = as<TupleNode>(tuple)) {
      for (const Expr& f : t->fields) out.push_back(lower_value(f, name));
    } else {
      out.push_back(lower_value(tuple, name));
    }
    return out;
  }

  // Allocates the outputs an out=... struct info describes.
  std::vector<int> alloc_outputs(const StructInfo& out, const std::string& what) {
    std::vector<int> regs;
    for (const StructInfo& f : fields_or_self(out)) {
      const auto* t = as<TensorSI>(f);
      if (!t || !t->shape || t->dtype.is_void())
        fail("vm lowering: in @", fn_.name, ", '", current_, "': ", what, " has an output of unknown shape or dtype (",
             sinfo_text(f), "); it must be bound by a match_cast first");
      Arg shape = shape_arg(*t->shape);
      int r = new_reg();
      emit_builtin("relax.alloc_tensor", {shape, m_.dtype_const(t->dtype), m_.string_const(current_)}, r);
      regs.push_back(r);
    }
    return regs;
  }
  Arg pack_outputs(const StructInfo& out, const std::vector<int>& regs) {
    if (!as<TupleSI>(out)) return Arg::reg(regs[0]);
    std::vector<Arg> fields;
    for (int r : regs) fields.push_back(Arg::reg(r));
    int t = new_reg();
    emit_builtin("relax.make_tuple", std::move(fields), t);
    return Arg::reg(t);
  }

  Arg lower_call(const CallNode& call, const std::string& name) {
    if (const auto* g = as<GlobalVarNode>(call.callee)) {
      std::vector<Arg> args;
      for (const Expr& a : call.args) args.push_back(lower_value(a, name));
      int r = new_reg();
      rt::Instr in;
      in.op = rt::Opcode::Call;
      in.dst = r;
      in.callee_kind = rt::CalleeKind::Function;
      in.callee = m_.function_index(g->name);
      in.args = std::move(args);
      fn_.code.push_back(std::move(in));
      return Arg::reg(r);
    }
    if (is_var(call.callee)) {  // a function value: a closure
      std::vector<Arg> args{lower_value(call.callee, name)};
      for (const Expr& a : call.args) args.push_back(lower_value(a, name));
      int r = new_reg();
      emit_builtin("relax.call_closure", std::move(args), r);
      return Arg::reg(r);
    }
    const OpInfo* op = call.op();
    if (!op)
      fail("vm lowering: in @", fn_.name, ", '", name, "': calls of ", expr_kind_name(call.callee->kind),
           " are not supported yet");
    const auto& table = op_lowerings();
    auto it = table.find(op->name);
    if (it == table.end())
      fail("vm lowering: in @", fn_.name, ", '", name, "': op ", op->name,
           " was not legalised (no tensor program or builtin implements it yet)");
    return (this->*(it->second))(call, name);
  }

  // ---- The ops the VM lowers itself (OpInfo::lowering Library or VM) ------------

  using OpLowerer = Arg (FunctionLowering::*)(const CallNode&, const std::string&);
  static const std::map<std::string, OpLowerer>& op_lowerings() {
    static const std::map<std::string, OpLowerer> table = {
        {"call_tir", &FunctionLowering::lower_call_tir},
        {"call_library", &FunctionLowering::lower_call_library},
        {"call_tir_dps", &FunctionLowering::lower_call_tir_dps},
        {"call_library_dps", &FunctionLowering::lower_call_library_dps},
        {"alloc_storage", &FunctionLowering::lower_alloc_storage},
        {"alloc_tensor", &FunctionLowering::lower_alloc_tensor},
        {"call_builtin", &FunctionLowering::lower_call_builtin},
        {"call_pure_builtin", &FunctionLowering::lower_call_builtin},
        {"loop", &FunctionLowering::lower_loop},
        {"scan", &FunctionLowering::lower_scan},
        {"shape_of", &FunctionLowering::lower_shape_op},
        {"tensor_to_shape", &FunctionLowering::lower_shape_op},
        {"shape_to_tensor", &FunctionLowering::lower_shape_op},
    };
    return table;
  }

  // A kernel call: the arguments, the outputs, then the symbolic arguments
  // (a shape(...) literal) when `syms` is set.
  void emit_kernel_call(const std::string& program, std::vector<Arg> args, const Expr& syms, const char* what) {
    if (syms) {
      const auto* values = as<ShapeExprNode>(syms);
      if (!values) fail("vm lowering: ", what, "'s symbolic arguments must be a shape(...) literal");
      args.push_back(shape_arg(values->values));
    }
    rt::Instr in;
    in.op = rt::Opcode::Call;
    in.callee_kind = rt::CalleeKind::Kernel;
    in.callee = m_.kernel_index(program);
    in.args = std::move(args);
    fn_.code.push_back(std::move(in));
  }

  Arg lower_call_tir(const CallNode& call, const std::string& name) {
    const auto* prog = as<GlobalVarNode>(call.args[0]);
    std::vector<Arg> args = lower_args(call.args[1], name);
    std::vector<int> outs = alloc_outputs(call.sinfo_args[0], "call_tir(@" + prog->name + ")");
    for (int r : outs) args.push_back(Arg::reg(r));
    emit_kernel_call(prog->name, std::move(args), call.args.size() == 3 ? call.args[2] : Expr(), "call_tir");
    return pack_outputs(call.sinfo_args[0], outs);
  }

  Arg lower_call_library(const CallNode& call, const std::string& name) {
    const std::string& lib = static_cast<const StringImmNode*>(call.args[0].get())->value;
    std::vector<Arg> args = lower_args(call.args[1], name);
    std::vector<int> outs = alloc_outputs(call.sinfo_args[0], "call_library(\"" + lib + "\")");
    for (int r : outs) args.push_back(Arg::reg(r));
    emit_builtin(lib, std::move(args));
    return pack_outputs(call.sinfo_args[0], outs);
  }

  // call_tir_dps and call_library_dps: the destinations are given and
  // returned (one tensor, or a tuple of several).
  Arg lower_call_tir_dps(const CallNode& call, const std::string& name) {
    std::vector<Arg> dests;
    std::vector<Arg> args = dps_args(call, name, dests);
    emit_kernel_call(as<GlobalVarNode>(call.args[0])->name, std::move(args),
                     call.args.size() == 4 ? call.args[3] : Expr(), "call_tir_dps");
    return dps_result(std::move(dests));
  }
  Arg lower_call_library_dps(const CallNode& call, const std::string& name) {
    std::vector<Arg> dests;
    std::vector<Arg> args = dps_args(call, name, dests);
    emit_builtin(static_cast<const StringImmNode*>(call.args[0].get())->value, std::move(args));
    return dps_result(std::move(dests));
  }
  // The arguments then the destinations, as a dps call passes them.
  std::vector<Arg> dps_args(const CallNode& call, const std::string& name, std::vector<Arg>& dests) {
    std::vector<Arg> args = lower_args(call.args[1], name);
    dests = lower_args(call.args[2], name);
    args.insert(args.end(), dests.begin(), dests.end());
    return args;
  }
  Arg dps_result(std::vector<Arg> dests) {
    if (dests.size() == 1) return dests[0];
    int t = new_reg();
    emit_builtin("relax.make_tuple", std::move(dests), t);
    return Arg::reg(t);
  }

  Arg lower_alloc_storage(const CallNode& call, const std::string& name) {
    int r = new_reg();
    std::string site = call.attrs.get_string("persistent", "");
    if (site.empty())
      emit_builtin("relax.alloc_storage", {lower_value(call.args[0], name), m_.string_const(name)}, r);
    else
      emit_builtin("relax.alloc_storage_persistent", {lower_value(call.args[0], name), m_.string_const(site)}, r);
    return Arg::reg(r);
  }

  Arg lower_alloc_tensor(const CallNode& call, const std::string& name) {
    Arg storage = lower_value(call.args[0], name), shape = lower_value(call.args[1], name);
    int r = new_reg();
    emit_builtin("relax.alloc_tensor_in", {storage, shape, m_.dtype_const(call.attrs.get_dtype("dtype"))}, r);
    return Arg::reg(r);
  }

  // call_builtin and call_pure_builtin.
  Arg lower_call_builtin(const CallNode& call, const std::string& name) {
    const std::string& fnname = static_cast<const StringImmNode*>(call.args[0].get())->value;
    std::vector<Arg> args = lower_args(call.args[1], name);
    int r = new_reg();
    emit_builtin(fnname, std::move(args), r);
    return Arg::reg(r);
  }

  // shape_of, tensor_to_shape, shape_to_tensor: the runtime's relax.<op>.
  Arg lower_shape_op(const CallNode& call, const std::string& name) {
    std::vector<Arg> args;
    for (const Expr& a : call.args) args.push_back(lower_value(a, name));
    int r = new_reg();
    emit_builtin("relax." + call.op()->name, std::move(args), r);
    return Arg::reg(r);
  }

  ModuleLowering& m_;
  rt::Function fn_;
  std::vector<std::string> sources_;  // the variable each instruction of fn_ was lowered for
  std::unordered_map<const VarNode*, int> reg_of_;
  SymMap<int64_t> slot_of_;
  int64_t next_slot_ = 0;
  std::string current_;
  std::map<std::string, Interval> bounds_;
};

// The ops no lowering implements, each with the variables it binds (the
// ONNX node outputs).
class Unlowered : public ExprVisitor {
 public:
  std::map<std::string, std::vector<std::string>> ops;
  std::string var;

 private:
  void visit_binding(const Binding& b) override {
    std::string saved = std::exchange(var, b.var->name);
    visit(b.value);
    var = std::move(saved);
  }
  void visit_call(const CallNode& c) override {
    if (const OpInfo* op = c.op(); op && !op->lowered_by_vm()) ops[op->name].push_back(var);
    for (const Expr& a : c.args) visit(a);
  }
};

VMLowered ModuleLowering::run() {
  Unlowered unlowered;
  for (const auto& [name, item] : mod_.items())
    if (const auto* f = std::get_if<Function>(&item)) {
      unlowered.var = name;
      unlowered.visit((*f)->body);
    }
  std::map<std::string, std::vector<std::string>> left = std::move(unlowered.ops);
  if (!left.empty()) {
    std::ostringstream msg;
    msg << "no tensor program or builtin implements " << (left.size() == 1 ? "this op" : "these ops") << " yet:";
    for (const auto& [op, vars] : left) {
      msg << "\n  " << op << " (" << vars.size() << (vars.size() == 1 ? " use" : " uses") << ": ";
      for (size_t i = 0; i < vars.size() && i < 5; ++i) msg << (i ? ", " : "") << vars[i];
      if (vars.size() > 5) msg << ", ...";
      msg << ")";
    }
    throw NotLowered(msg.str(), std::move(left));
  }

  std::vector<std::pair<std::string, Function>> fns;
  for (const auto& [name, item] : mod_.items())
    if (const auto* f = std::get_if<Function>(&item)) fns.emplace_back(name, *f);
  // `main` first, so it is function 0 and the default entry.
  std::stable_partition(fns.begin(), fns.end(), [](const auto& p) { return p.first == "main"; });
  out_.exe.functions.resize(fns.size());
  for (size_t i = 0; i < fns.size(); ++i) function_index_[fns[i].first] = int(i);
  for (size_t i = 0; i < fns.size(); ++i) {
    FunctionLowering fl(*this);
    fl.lower(fns[i].first, fns[i].second);
    std::vector<std::string> sources = fl.take_sources();
    set_function(int(i), fl.take(), std::move(sources));
  }
  check_readable();
  return std::move(out_);
}

// The bytecode read back by the runtime's own reader (the code relax-run
// runs on a package): a limit it enforces that this module passes is a
// build error naming the variable, not a package that cannot be loaded.
void ModuleLowering::check_readable() const {
  try {
    rt::Executable::deserialize(out_.exe.serialize());
  } catch (const rt::BytecodeError& e) {
    auto it = sources_.find(e.function);
    std::string var = it != sources_.end() && e.pc < it->second.size() ? it->second[e.pc] : "";
    fail("vm lowering: in @", e.function, ", ", var.empty() ? std::string("the parameter checks") : "'" + var + "'",
         ": the runtime would refuse the package: ", e.what_alone);
  } catch (const rt::Error& e) {
    fail("vm lowering: the runtime would refuse the package: ", e.what());
  }
}

}  // namespace

std::vector<std::string> vm_lowered_ops() { return FunctionLowering::lowered_ops(); }

VMLowered lower_to_vm(const IRModule& mod) {
  ModuleLowering m(mod);
  return m.run();
}

}  // namespace relax
