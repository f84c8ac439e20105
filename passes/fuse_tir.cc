// fuse-tir: merges each function fuse-ops marked primitive=true into one
// tensor program, and replaces its calls by call_tir of that program.
//
// The members' programs are rewritten into the function's symbolic
// variables (matched through the call's struct info), with fresh loop
// variables, and put one after another:
//   - a member whose outputs are plain computes (op_pattern.h) and are not
//     returned is not emitted at all: each load of its result is replaced
//     by its computation at that index (inlining);
//   - any other member is emitted; its result goes to a buffer. A result
//     that is not returned and is read by exactly one later statement, a
//     nest that reads it at its own index into a result of the same shape
//     and dtype, shares that result's buffer: the epilogue runs in place.
//   - a result still left internal becomes an extra output of the program
//     (the caller allocates it and drops it);
//   - a member's prelude (op_pattern.h split_prelude: checks of its
//     indices) is emitted where the member stands, whether the rest is
//     inlined or not.
// Symbolic variables no buffer dim binds are passed as the program's
// symbolic parameters.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/tir_functor.h"
#include "passes/analysis/graph_util.h"
#include "passes/analysis/op_pattern.h"
#include "passes/passes.h"

namespace relax {
namespace {

using tir::Buffer;
using tir::BufferNode;
using tir::Stmt;
using tir::TExpr;

bool is_primitive(const IRModule& mod, const Expr& callee) {
  const auto* g = as<GlobalVarNode>(callee);
  if (!g) return false;
  Function f = mod.function(g->name);
  return f && f->attrs.get_bool("primitive", false);
}

const TensorSI& tensor_of(const StructInfo& si, const std::string& what) {
  const auto* t = as<TensorSI>(si);
  if (!t || !t->shape || t->dtype.is_void()) fail("fuse-tir: ", what, " is not a tensor of known shape and dtype");
  return *t;
}

std::string buffer_name(const std::string& var) {
  std::string s;
  for (char c : var) s += isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  while (!s.empty() && s[0] == '_') s.erase(0, 1);
  return s.empty() || isdigit(static_cast<unsigned char>(s[0])) ? "t" + s : s;
}

// A member result inside the group.
struct Value {
  Buffer buffer;                  // where it lives (an input or a materialised result)
  std::optional<ComputeDef> def;  // or how to compute it (inlined)
};

struct Fused {
  tir::Program program;
  std::vector<std::string> constants;   // constants appended to the call's inputs, by name
  std::vector<StructInfo> const_sinfo;  // ... and their struct info
  size_t num_returned = 0;              // outputs the function returns; the rest are extra
};

class Merger {
 public:
  Merger(const IRModule& mod, const std::string& name, const Function& f) : mod_(mod), name_(name), f_(f) {}

  Fused run() {
    bind_params();
    find_returned();
    for (const BindingBlock& block : f_->body->blocks)
      for (const Binding& b : block.bindings) member(b);
    place_in_place();
    return finish();
  }

 private:
  void bind_params() {
    for (const Var& p : f_->params) {
      if (const auto* s = as<ShapeSI>(p->sinfo)) {
        if (!s->values) fail("fuse-tir: @", name_, ": the shape parameter '", p->name, "' has no values");
        continue;
      }
      const TensorSI& t = tensor_of(p->sinfo, "@" + name_ + "'s parameter '" + p->name + "'");
      Buffer b = tir::make_buffer(buffer_name(p->name), t.dtype, *t.shape);
      inputs_.push_back(b);
      values_[p.get()] = {Value{b, std::nullopt}};
    }
  }

  void find_returned() {
    const Expr& body = f_->body->body;
    std::unordered_map<const VarNode*, Expr> bound;
    for (const BindingBlock& block : f_->body->blocks)
      for (const Binding& b : block.bindings) bound[b.var.get()] = b.value;
    const auto* v = as<VarNode>(body);
    if (!v) fail("fuse-tir: @", name_, " must return a variable");
    auto it = bound.find(v);
    if (it != bound.end() && as<TupleNode>(it->second)) {
      for (const Expr& f : as<TupleNode>(it->second)->fields) {
        const auto* fv = as<VarNode>(f);
        if (!fv) fail("fuse-tir: @", name_, " must return a tuple of variables");
        returned_.push_back(fv);
      }
      return_tuple_ = v;
    } else {
      returned_.push_back(v);
    }
  }

  bool is_returned(const VarNode* v) const {
    return std::find(returned_.begin(), returned_.end(), v) != returned_.end();
  }

  // Every use of `v` in the function is an input of a call_tir that loads
  // it at symbolic indices (so it can be inlined there).
  bool only_inlinable_uses(const VarNode* v) const {
    for (const BindingBlock& block : f_->body->blocks)
      for (const Binding& b : block.bindings) {
        std::unordered_set<const VarNode*> used;
        collect_used_vars(b.value, used);
        if (!used.count(v)) continue;
        if (as<TupleGetItemNode>(b.value)) {
          if (!only_inlinable_uses(b.var.get())) return false;
          continue;
        }
        const CallNode* c = as_op_call(b.value, "call_tir");
        if (!c) return false;
        tir::Program prog = mod_.program(static_cast<const GlobalVarNode*>(c->args[0].get())->name);
        const auto* in = as<TupleNode>(c->args[1]);
        if (!prog || !in) return false;
        for (size_t i = 0; i < in->fields.size(); ++i)
          if (as<VarNode>(in->fields[i]) == v && !loads_at_symbolic_indices(prog, prog->inputs[i].get())) return false;
      }
    return true;
  }

  // The value an argument of a member refers to.
  Value arg_value(const Expr& a, const std::string& what) {
    if (const auto* v = as<VarNode>(a)) {
      auto it = values_.find(v);
      if (it == values_.end() || it->second.size() != 1)
        fail("fuse-tir: @", name_, ": ", what, " reads '", v->name, "', which is not a tensor bound in the group");
      return it->second[0];
    }
    if (const auto* c = as<ConstantNode>(a)) {
      auto it = constants_.find(c->name);
      if (it != constants_.end()) return Value{it->second, std::nullopt};
      const TensorSI& t = tensor_of(c->sinfo, "the constant '" + c->name + "'");
      Buffer b = tir::make_buffer(buffer_name(c->name), t.dtype, *t.shape);
      constants_[c->name] = b;
      const_order_.push_back(c->name);
      const_sinfo_.push_back(c->sinfo);
      return Value{b, std::nullopt};
    }
    fail("fuse-tir: @", name_, ": ", what, " has an input that is not a variable or a constant");
  }

  void member(const Binding& b) {
    const VarNode* var = b.var.get();
    if (var == return_tuple_) return;
    if (const auto* g = as<TupleGetItemNode>(b.value)) {
      const auto* t = as<VarNode>(g->tuple);
      auto it = t ? values_.find(t) : values_.end();
      if (it == values_.end() || g->index < 0 || size_t(g->index) >= it->second.size())
        fail("fuse-tir: @", name_, ": '", var->name, "' takes an item of something the group does not bind");
      values_[var] = {it->second[size_t(g->index)]};
      return;
    }
    const CallNode* call = as_op_call(b.value, "call_tir");
    if (!call) fail("fuse-tir: @", name_, ": the binding '", var->name, "' is not a call_tir");
    const std::string& pname = static_cast<const GlobalVarNode*>(call->args[0].get())->name;
    tir::Program prog = mod_.program(pname);
    if (!prog) fail("fuse-tir: @", name_, ": @", pname, " is not a tensor program");
    for (const std::string& op : program_ops(prog)) ops_.push_back(op);
    const auto* in = as<TupleNode>(call->args[1]);
    if (!in || in->fields.size() != prog->inputs.size())
      fail("fuse-tir: @", name_, ": the call of @", pname, " does not match its inputs");
    std::vector<StructInfo> outs = fields_or_self(call->sinfo_args[0]);

    // The program's variables in the function's terms.
    for (size_t i = 0; i < prog->inputs.size(); ++i) tensor_of(in->fields[i]->sinfo, "an input of @" + pname);
    for (size_t k = 0; k < prog->outputs.size(); ++k) tensor_of(outs[k], "an output of @" + pname);
    SymMap<SymExpr> map = program_vars_at(prog, *call);
    tir::visit_stmts(prog->body, [&](const Stmt& s) {
      if (const auto* f = tir::as<tir::ForNode>(s); f && !map.count(f->var)) map[f->var] = SymExpr::var(f->var.name());
    });

    // Buffers: inputs to what the arguments hold; inlined ones to a
    // placeholder whose loads become the computation.
    std::unordered_map<const BufferNode*, Buffer> buffers;
    std::unordered_map<const BufferNode*, const ComputeDef*> inline_defs;
    std::vector<Value> args;
    args.reserve(in->fields.size());
    for (size_t i = 0; i < in->fields.size(); ++i) {
      args.push_back(arg_value(in->fields[i], "@" + pname));
      if (args.back().def) {
        Buffer placeholder = tir::make_buffer(prog->inputs[i]->name, prog->inputs[i]->dtype, {});
        buffers[prog->inputs[i].get()] = placeholder;
        inline_defs[placeholder.get()] = &*args.back().def;
      } else {
        buffers[prog->inputs[i].get()] = args.back().buffer;
      }
    }
    // A prelude (checks of the inputs) runs where the member stands, inlined or not.
    PreludeSplit split = split_prelude(prog);
    bool inline_it = false;
    ProgramPattern pat = analyze_pattern(split.main);
    if (pat.inlinable() && pat.kind <= OpPattern::Injective) {
      inline_it = true;
      std::vector<const VarNode*> results{var};
      if (as<TupleSI>(call->sinfo_args[0])) results = items_of(var);
      if (is_returned(var)) inline_it = false;
      for (const VarNode* r : results)
        if (is_returned(r) || !only_inlinable_uses(r)) inline_it = false;
      if (!only_inlinable_uses(var)) inline_it = false;
    }
    std::vector<Buffer> out_buffers;
    for (size_t k = 0; k < prog->outputs.size(); ++k) {
      const TensorSI& t = tensor_of(outs[k], "an output of @" + pname);
      std::string n = buffer_name(var->name) + (prog->outputs.size() > 1 ? "_" + std::to_string(k) : "");
      out_buffers.push_back(tir::make_buffer(n, t.dtype, *t.shape));
      buffers[prog->outputs[k].get()] = out_buffers.back();
    }

    tir::TirRewriter r;
    r.sym = [&](const SymExpr& e) { return substitute(e, map); };
    r.buffer = [&](const Buffer& b) -> Buffer {
      auto it = buffers.find(b.get());
      return it == buffers.end() ? nullptr : it->second;
    };
    r.load = [&](const Buffer& b, const std::vector<TExpr>& idx) -> TExpr {
      auto it = inline_defs.find(b.get());
      if (it == inline_defs.end()) return nullptr;
      const ComputeDef& d = *it->second;
      SymMap<SymExpr> at;
      for (size_t i = 0; i < d.vars.size(); ++i) {
        const auto* s = tir::as<tir::SymNodeT>(idx[i]);
        RELAX_CHECK(s, "fuse-tir: an inlined value is loaded at a data-dependent index");
        at[d.vars[i]] = s->value;
      }
      return tir::substitute(d.value, at);
    };

    for (const Stmt& s : split.prelude) stmts_.push_back(r.stmt(s));
    std::vector<Value> results;
    if (inline_it) {
      for (size_t k = 0; k < prog->outputs.size(); ++k) {
        const ComputeDef& d = *pat.outputs[k];
        ComputeDef nd;
        for (const SymExpr& v : d.vars) nd.vars.push_back(map.at(v));
        nd.value = r.expr(d.value);
        results.push_back(Value{out_buffers[k], nd});
      }
    } else {
      stmts_.push_back(r.stmt(split.main->body));
      for (const Buffer& ob : out_buffers) {
        results.push_back(Value{ob, std::nullopt});
        materialised_.push_back(ob);
        writer_[ob.get()] = stmts_.size() - 1;
      }
    }
    values_[var] = results;
    for (size_t k = 0; k < results.size(); ++k) result_var_[results[k].buffer.get()] = var;
  }

  // The variables bound to items of tuple `t`.
  std::vector<const VarNode*> items_of(const VarNode* t) const {
    std::vector<const VarNode*> out;
    for (const BindingBlock& block : f_->body->blocks)
      for (const Binding& b : block.bindings)
        if (const auto* g = as<TupleGetItemNode>(b.value); g && as<VarNode>(g->tuple) == t) out.push_back(b.var.get());
    return out;
  }

  std::set<const BufferNode*> returned_buffers() const {
    std::set<const BufferNode*> out;
    for (const VarNode* v : returned_) {
      auto it = values_.find(v);
      if (it != values_.end() && it->second.size() == 1) out.insert(it->second[0].buffer.get());
    }
    return out;
  }

  void replace_buffer(const Buffer& from, const Buffer& to) {
    tir::TirRewriter r;
    r.buffer = [&](const Buffer& b) -> Buffer { return b == from ? to : nullptr; };
    for (Stmt& s : stmts_) s = r.stmt(s);
  }

  // Internal results read by one in-place epilogue share its buffer.
  void place_in_place() {
    bool changed = true;
    while (changed) {
      changed = false;
      std::set<const BufferNode*> keep = returned_buffers();
      for (size_t m = 0; m < materialised_.size(); ++m) {
        Buffer y = materialised_[m];
        if (keep.count(y.get()) || !writer_.count(y.get())) continue;
        std::vector<size_t> readers;
        for (size_t i = 0; i < stmts_.size(); ++i)
          if (i != writer_[y.get()] && tir::reads_buffer(stmts_[i], y.get())) readers.push_back(i);
        if (readers.size() != 1 || readers[0] < writer_[y.get()]) continue;
        // The reader must be a nest computing another result of y's shape
        // and dtype elementwise from y at its own index: it runs in place.
        std::optional<StoreNest> n = as_store_nest(stmts_[readers[0]]);
        if (!n) continue;
        const Buffer& o = n->store->buffer;
        if (o->dtype != y->dtype || o == y || !reads_at_identity(n->def, y.get(), o->shape)) continue;
        replace_buffer(y, o);
        materialised_.erase(materialised_.begin() + long(m));
        changed = true;
        break;
      }
    }
  }

  Fused finish() {
    std::vector<Buffer> outputs;
    std::set<const BufferNode*> seen;
    for (const VarNode* v : returned_) {
      auto it = values_.find(v);
      if (it == values_.end() || it->second.size() != 1 || it->second[0].def)
        fail("fuse-tir: @", name_, ": the returned '", v->name, "' is not a tensor the group computes");
      outputs.push_back(it->second[0].buffer);
      seen.insert(outputs.back().get());
    }
    Fused out;
    out.num_returned = outputs.size();
    for (const Buffer& b : materialised_)
      if (!seen.count(b.get())) outputs.push_back(b);
    std::vector<Buffer> inputs = inputs_;
    for (const std::string& c : const_order_) inputs.push_back(constants_.at(c));
    out.constants = const_order_;
    out.const_sinfo = const_sinfo_;

    // Symbolic parameters: variables no buffer dim binds.
    std::set<const SymNode*> bound, loop_vars;
    for (const auto& list : {inputs, outputs})
      for (const Buffer& b : list)
        for (const SymExpr& d : b->shape)
          if (d.is_var()) bound.insert(d.get());
    Stmt body = tir::make_seq(stmts_);
    std::vector<SymExpr> syms;
    std::set<const SymNode*> seen_syms;
    auto need = [&](const SymExpr& e) {
      for (const SymExpr& v : free_vars(e))
        if (!bound.count(v.get()) && !loop_vars.count(v.get()) && seen_syms.insert(v.get()).second) syms.push_back(v);
    };
    tir::visit_stmts(body, [&](const Stmt& s) {
      if (const auto* f = tir::as<tir::ForNode>(s)) loop_vars.insert(f->var.get());
    });
    for (const auto& list : {inputs, outputs})
      for (const Buffer& b : list)
        for (const SymExpr& d : b->shape) need(d);
    tir::visit_stmts(body, [&](const Stmt& s) {
      if (const auto* f = tir::as<tir::ForNode>(s)) need(f->extent);
    });
    tir::visit_exprs(body, [&](const TExpr& e) {
      if (const auto* s = tir::as<tir::SymNodeT>(e)) need(s->value);
    });
    Attrs attrs{{"fused", ops_}};
    out.program = tir::make_program(name_, inputs, outputs, syms, body, attrs);
    return out;
  }

  const IRModule& mod_;
  std::string name_;
  Function f_;
  std::vector<Buffer> inputs_;
  std::map<std::string, Buffer> constants_;
  std::vector<std::string> const_order_;
  std::vector<StructInfo> const_sinfo_;
  std::unordered_map<const VarNode*, std::vector<Value>> values_;
  std::unordered_map<const BufferNode*, const VarNode*> result_var_;
  std::vector<const VarNode*> returned_;
  const VarNode* return_tuple_ = nullptr;
  std::vector<Stmt> stmts_;
  std::vector<Buffer> materialised_;
  std::unordered_map<const BufferNode*, size_t> writer_;
  std::vector<std::string> ops_;
};

// Rewrites calls of primitive functions in `f`'s top-level blocks.
Function rewrite_calls(IRModule& mod, std::map<std::string, Fused>& fused, const Function& f) {
  std::vector<BindingBlock> blocks;
  bool changed = false;
  for (const BindingBlock& block : f->body->blocks) {
    BindingBlock nb{block.dataflow, {}};
    for (const Binding& b : block.bindings) {
      const auto* c = as<CallNode>(b.value);
      if (b.is_match_cast() || !c || !is_primitive(mod, c->callee)) {
        nb.bindings.push_back(b);
        continue;
      }
      const std::string& name = static_cast<const GlobalVarNode*>(c->callee.get())->name;
      Function callee = mod.function(name);
      auto it = fused.find(name);
      if (it == fused.end()) it = fused.emplace(name, Merger(mod, name, callee).run()).first;
      const Fused& fz = it->second;

      // The callee's variables in the caller's terms.
      SymMap<SymExpr> map;
      std::vector<Expr> inputs;
      for (size_t i = 0; i < callee->params.size() && i < c->args.size(); ++i) {
        const StructInfo& psi = callee->params[i]->sinfo;
        if (const auto* s = as<ShapeSI>(psi)) {
          const auto* a = as<ShapeExprNode>(c->args[i]);
          if (!a || !s->values || a->values.size() != s->values->size())
            fail("fuse-tir: the call of @", name, " passes no shape literal for '", callee->params[i]->name, "'");
          match_dims(*s->values, a->values, map);
          continue;
        }
        const auto* pt = as<TensorSI>(psi);
        const auto* at = as<TensorSI>(c->args[i]->sinfo);
        if (pt && at && pt->shape && at->shape) match_dims(*pt->shape, *at->shape, map);
        inputs.push_back(c->args[i]);
      }
      for (size_t k = 0; k < fz.constants.size(); ++k)
        inputs.push_back(make_constant(fz.constants[k], fz.const_sinfo[k]));
      std::vector<StructInfo> outs;
      for (const Buffer& o : fz.program->outputs) {
        std::vector<SymExpr> shape;
        for (const SymExpr& d : o->shape) shape.push_back(substitute(d, map));
        outs.push_back(std::make_shared<TensorSI>(o->dtype, int(shape.size()), shape));
      }
      std::vector<SymExpr> syms;
      for (const SymExpr& s : fz.program->sym_params) syms.push_back(substitute(s, map));
      StructInfo out_si = outs.size() == 1 ? outs[0] : std::make_shared<TupleSI>(outs);
      std::vector<Expr> args{make_global_var(name), make_tuple(inputs)};
      if (!syms.empty()) args.push_back(make_shape(syms));
      Expr ct = make_op_call("call_tir", args, {}, {out_si});
      ct->sinfo = out_si;
      changed = true;
      if (fz.num_returned == outs.size()) {
        nb.bindings.push_back(Binding{b.var, ct, nullptr});
        continue;
      }
      // Extra outputs: take the returned ones out of the result.
      for (Binding& x : bind_leading_outputs(b.var, ct, fz.num_returned)) nb.bindings.push_back(std::move(x));
    }
    blocks.push_back(std::move(nb));
  }
  if (!changed) return f;
  SeqExpr body = make_seq(std::move(blocks), f->body->body);
  body->sinfo = f->body->sinfo;
  return make_function(f->params, body, f->ret, f->attrs);
}

}  // namespace

IRModule fuse_tir(const IRModule& mod) {
  IRModule out = mod;
  std::map<std::string, Fused> fused;
  for (const std::string& name : mod.function_names()) {
    Function f = mod.function(name);
    if (f->attrs.get_bool("primitive", false)) continue;
    Function nf = rewrite_calls(out, fused, f);
    if (nf != f) out.add_function(name, nf);
  }
  // Each merged function becomes its program, under its name.
  for (auto& [name, fz] : fused) {
    out.remove(name);
    out.add_program(name, fz.program);
  }
  return out;
}

}  // namespace relax
