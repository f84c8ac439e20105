// fuse-ops: groups call_tir bindings of a dataflow block that one kernel
// can compute, by the patterns of their tensor programs (op_pattern.h),
// and moves each group of two or more into a private function marked
// primitive=true that the block calls instead. fuse-tir then merges each
// such function into one tensor program.
//
// The rules, applied to each producer P, last binding first (so that P's
// users are already grouped):
//   - P elementwise, broadcast or injective, each output a plain compute:
//     P joins the groups of all its users when every use of P is an input
//     of a tensor program that is not output-fusable or opaque. P will be
//     inlined into its users (injective chains merge; a reduction takes its
//     prologue).
//   - P output-fusable, a reduction, or injective but not inlinable, with
//     one output read by exactly one user C that is elementwise or
//     broadcast, reads P at its own index and has P's shape and dtype: P
//     joins C's group if that group has no such anchor yet, and computes
//     into the group's output in place (an epilogue).
// A group holds at most one anchor, and stays convex: no path leaves the
// group and comes back, so calling it cannot form a cycle.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/analyzer.h"
#include "ir/error.h"
#include "ir/mutator.h"
#include "ir/op.h"
#include "ir/tir_functor.h"
#include "passes/analysis/graph_util.h"
#include "passes/analysis/op_pattern.h"
#include "passes/passes.h"

namespace relax {
namespace {

struct Node {
  const CallNode* call = nullptr;  // a call_tir, or null (any other binding)
  std::string program;
  ProgramPattern pattern;
  bool anchor = false;  // output-fusable, reduction, or injective not inlinable
  int alias_of = -1;    // a tuple item of binding `alias_of`'s call_tir result
  bool costly = false;  // its program calls a transcendental function (exp, log, erf, sin, ...)
  std::optional<SymExpr> elements;  // the elements its call writes (its first output's), if known
};

// Whether `p` calls a transcendental function: any intrinsic but the few
// that cost an instruction or two.
bool calls_transcendental(const tir::Program& p) {
  bool found = false;
  tir::visit_exprs(p->body, [&](const tir::TExpr& e) {
    if (e->kind != tir::TKind::Call) return;
    switch (static_cast<const tir::CallNodeT*>(e.get())->fn) {
      case tir::Intrinsic::sqrt:
      case tir::Intrinsic::rsqrt:
      case tir::Intrinsic::abs:
      case tir::Intrinsic::floor:
      case tir::Intrinsic::ceil:
      case tir::Intrinsic::round:
      case tir::Intrinsic::trunc:
      case tir::Intrinsic::isnan:
      case tir::Intrinsic::isinf:
      case tir::Intrinsic::isfinite:
      case tir::Intrinsic::popcount:
      case tir::Intrinsic::copysign:
      case tir::Intrinsic::fma:
      case tir::Intrinsic::shfl_xor:
        return;
      default:
        found = true;
    }
  });
  return found;
}

// The elements a call_tir writes (its first output's), if known.
std::optional<SymExpr> output_elements(const CallNode& c) {
  if (c.sinfo_args.empty()) return std::nullopt;
  const StructInfo& si = c.sinfo_args[0];
  const auto* tuple = as<TupleSI>(si);
  if (tuple && tuple->fields.empty()) return std::nullopt;
  const auto* t = as<TensorSI>(tuple ? tuple->fields[0] : si);
  if (!t || !t->shape) return std::nullopt;
  SymExpr n(1);
  for (const SymExpr& d : *t->shape) n = n * d;
  return n;
}

class BlockFuser {
 public:
  BlockFuser(IRModule& mod, const BindingBlock& block, const std::unordered_set<const VarNode*>& used_later)
      : mod_(mod), block_(block), used_later_(used_later) {}

  // The block with each group of two or more bindings replaced by a call.
  BindingBlock run() {
    analyse();
    group();
    return rewrite();
  }

 private:
  void analyse() {
    size_t n = block_.bindings.size();
    nodes_.resize(n);
    uses_.resize(n);
    parent_.resize(n);
    std::iota(parent_.begin(), parent_.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      const Binding& b = block_.bindings[i];
      def_[b.var.get()] = int(i);
      Node& node = nodes_[i];
      if (b.is_match_cast()) continue;
      if (const CallNode* c = as_op_call(b.value, "call_tir")) {
        node.call = c;
        node.program = static_cast<const GlobalVarNode*>(c->args[0].get())->name;
        if (tir::Program p = mod_.program(node.program)) {
          node.pattern = analyze_pattern(p);
          node.anchor = !node.pattern.inlinable() && node.pattern.kind != OpPattern::Opaque;
          node.costly = calls_transcendental(p);
        }
        node.elements = output_elements(*c);
      } else if (const auto* g = as<TupleGetItemNode>(b.value)) {
        if (const auto* v = as<VarNode>(g->tuple); v && def_.count(v) && nodes_[def_[v]].call) {
          node.alias_of = def_[v];
          parent_[i] = find(node.alias_of);  // a tuple item goes where its call goes
        }
      }
    }
    // Symbolic variables a match_cast defines: later bindings that mention
    // them use it as much as they use variables.
    std::unordered_map<const SymNode*, int> sym_def;
    for (size_t i = 0; i < n; ++i) {
      const Binding& b = block_.bindings[i];
      std::set<const SymNode*> syms;
      collect_syms(b.var->sinfo, syms);
      visit_exprs(b.value, [&](const Expr& e) {
        if (const auto* sh = as<ShapeExprNode>(e))
          for (const SymExpr& d : sh->values)
            for (const SymExpr& v : free_vars(d)) syms.insert(v.get());
        if (const auto* c = as<CallNode>(e))
          for (const StructInfo& si : c->sinfo_args) collect_syms(si, syms);
      });
      std::unordered_set<const VarNode*> vars;
      collect_used_vars(b.value, vars);
      std::set<int> from;
      for (const VarNode* v : vars)
        if (auto it = def_.find(v); it != def_.end()) from.insert(it->second);
      for (const SymNode* v : syms)
        if (auto it = sym_def.find(v); it != sym_def.end()) from.insert(it->second);
      for (int f : from)
        if (f < int(i)) uses_[f].push_back(int(i));
      if (b.is_match_cast()) {
        std::set<const SymNode*> defined;
        collect_syms(b.cast, defined);
        for (const SymNode* v : defined) sym_def.emplace(v, int(i));
      }
    }
    for (auto& u : uses_) std::sort(u.begin(), u.end());
  }

  // The variables of `si` (ir/struct_info.h's collect_vars), by node.
  static void collect_syms(const StructInfo& si, std::set<const SymNode*>& out) {
    std::vector<SymExpr> vars;
    collect_vars(si, vars);
    for (const SymExpr& v : vars) out.insert(v.get());
  }

  int find(int i) { return parent_[i] == i ? i : parent_[i] = find(parent_[i]); }

  // The tensor users of node i: through tuple items for a tuple result.
  // False when some use is not an input of a call_tir in this block.
  bool tensor_users(int i, std::vector<int>& users) {
    if (used_later_.count(block_.bindings[i].var.get())) return false;
    for (int u : uses_[i]) {
      if (nodes_[u].alias_of == i) {
        if (!tensor_users(u, users)) return false;
        continue;
      }
      if (!nodes_[u].call) return false;
      // Used as an input, not as the callee or a symbolic argument.
      users.push_back(u);
    }
    return true;
  }

  // Whether merging the groups of `roots` keeps at most one anchor and
  // no path out of the group and back in.
  bool can_merge(const std::vector<int>& roots) {
    std::unordered_set<int> rs;
    for (int r : roots) rs.insert(find(r));
    std::vector<char> in(nodes_.size(), 0), tainted(nodes_.size(), 0);
    int anchors = 0;
    for (int i = 0; i < int(nodes_.size()); ++i)
      if (rs.count(find(i))) {
        in[i] = 1;
        anchors += nodes_[i].anchor;
      }
    if (anchors > 1 || repeats_costly_work(in)) return false;
    for (int i = 0; i < int(nodes_.size()); ++i)
      for (int u : uses_[i])
        if (!in[u] && (in[i] || tainted[i])) tainted[u] = 1;
    for (int i = 0; i < int(nodes_.size()); ++i)
      for (int u : uses_[i])
        if (in[u] && tainted[i]) return false;
    return true;
  }

  // Whether the group `in` marks would compute a member's transcendental
  // functions (exp, log, erf, sin, ...) more often than that member has
  // outputs: another member writes more elements, or not provably as few
  // (inlined, a member is computed once per element of the kernel that
  // reads it). T5's relative position buckets (a log per query and key)
  // inlined into the bias add over (batch, heads, query, key) took 40% of
  // the encoder's time; rotary embeddings' sin and cos over (sequence,
  // dim) read by the rotation over (batch, heads, sequence, dim) are the
  // same. Such a member stays out of the group, a kernel of its own whose
  // result the group reads.
  bool repeats_costly_work(const std::vector<char>& in) {
    std::vector<SymExpr> costly_sizes;
    for (int i = 0; i < int(nodes_.size()); ++i)
      if (in[i] && nodes_[i].costly) {
        if (!nodes_[i].elements) return true;
        costly_sizes.push_back(*nodes_[i].elements);
      }
    if (costly_sizes.empty()) return false;
    std::vector<std::optional<SymExpr>> sizes;
    for (int i = 0; i < int(nodes_.size()); ++i)
      if (in[i] && nodes_[i].call) sizes.push_back(nodes_[i].elements);
    // Dims of at least 1 (an empty tensor costs nothing either way): a
    // bias of 8 is then no larger than the (n, 8, h, w) it is added to.
    Analyzer ana;
    for (const std::optional<SymExpr>& n : sizes)
      if (n)
        for (const SymExpr& v : free_vars(*n)) ana.bind(v, 1, std::numeric_limits<int64_t>::max());
    for (const std::optional<SymExpr>& n : sizes)
      for (const SymExpr& c : costly_sizes)
        if (!n || !ana.can_prove_less_equal(*n, c)) return true;
    return false;
  }

  void merge(const std::vector<int>& roots) {
    int r0 = find(roots[0]);
    for (int r : roots) parent_[find(r)] = r0;
  }

  void group() {
    for (int p = int(nodes_.size()) - 1; p >= 0; --p) {
      const Node& n = nodes_[p];
      if (!n.call || n.pattern.kind == OpPattern::Opaque) continue;
      std::vector<int> users;
      if (!tensor_users(p, users) || users.empty()) continue;
      if (n.pattern.inlinable()) {
        bool ok = std::all_of(users.begin(), users.end(), [&](int u) {
          OpPattern k = nodes_[u].pattern.kind;
          return k != OpPattern::OutputFusable && k != OpPattern::Opaque && inlinable_into(p, u);
        });
        std::vector<int> roots{p};
        roots.insert(roots.end(), users.begin(), users.end());
        if (ok && can_merge(roots)) merge(roots);
        continue;
      }
      // An anchor: fuse its one elementwise user as an epilogue.
      if (users.size() != 1 || n.call->sinfo_args.empty() || as<TupleSI>(n.call->sinfo_args[0])) continue;
      int c = users[0];
      if (!epilogue_of(p, c)) continue;
      if (can_merge({p, c})) merge({p, c});
    }
  }

  // Whether user u reads p's results (directly or as tuple items) at
  // symbolic indices only, so they can be replaced by p's computation.
  bool inlinable_into(int p, int u) {
    tir::Program prog = mod_.program(nodes_[u].program);
    const auto* inputs = as<TupleNode>(nodes_[u].call->args[1]);
    if (!prog || !inputs) return false;
    for (size_t i = 0; i < inputs->fields.size(); ++i) {
      const auto* v = as<VarNode>(inputs->fields[i]);
      auto it = v ? def_.find(v) : def_.end();
      if (it == def_.end()) continue;
      int d = it->second;
      if (d == p || nodes_[d].alias_of == p)
        if (!loads_at_symbolic_indices(prog, prog->inputs[i].get())) return false;
    }
    return true;
  }

  // Whether user c reads p's result elementwise at its own index, with the
  // same shape and dtype, so that it can compute in place.
  bool epilogue_of(int p, int c) {
    const Node& user = nodes_[c];
    if (!user.pattern.inlinable() || user.pattern.outputs.size() != 1 || user.pattern.kind > OpPattern::Broadcast)
      return false;
    const auto* a = as<TensorSI>(nodes_[p].call->sinfo_args[0]);
    const auto* b = user.call->sinfo_args.empty() ? nullptr : as<TensorSI>(user.call->sinfo_args[0]);
    if (!a || !b || !a->shape || !b->shape || a->dtype != b->dtype || *a->shape != *b->shape) return false;
    tir::Program prog = mod_.program(user.program);
    const auto* inputs = as<TupleNode>(user.call->args[1]);
    if (!prog || !inputs) return false;
    const VarNode* pv = block_.bindings[p].var.get();
    bool reads = false;
    for (size_t i = 0; i < inputs->fields.size(); ++i) {
      if (as<VarNode>(inputs->fields[i]) != pv) continue;
      reads = true;
      if (!reads_at_identity(*user.pattern.outputs[0], prog->inputs[i].get(), prog->outputs[0]->shape)) return false;
    }
    return reads;
  }

  BindingBlock rewrite() {
    std::map<int, std::vector<int>> groups;
    for (int i = 0; i < int(nodes_.size()); ++i) groups[find(i)].push_back(i);
    // Items: a group of two or more calls, or one binding.
    std::vector<std::vector<int>> items;
    std::vector<int> item_of(nodes_.size(), -1);
    for (auto& [root, ms] : groups) {
      if (ms.empty()) continue;
      std::sort(ms.begin(), ms.end());
      size_t calls = std::count_if(ms.begin(), ms.end(), [&](int i) { return nodes_[i].call != nullptr; });
      if (calls > 1) {
        for (int i : ms) item_of[i] = int(items.size());
        items.push_back(ms);
      } else {
        for (int i : ms) {
          item_of[i] = int(items.size());
          items.push_back({i});
        }
      }
    }
    // Emit items in a topological order that keeps the original order where
    // it can: an item goes once everything it uses is out. Groups are
    // convex, so the items form no cycle.
    std::vector<std::set<int>> deps(items.size());
    std::vector<int> waiting(items.size(), 0);
    std::vector<std::vector<int>> users(items.size());
    for (int i = 0; i < int(nodes_.size()); ++i)
      for (int u : uses_[i])
        if (item_of[u] != item_of[i] && deps[item_of[u]].insert(item_of[i]).second) {
          ++waiting[item_of[u]];
          users[item_of[i]].push_back(item_of[u]);
        }
    std::set<std::pair<int, int>> ready;  // (first binding, item)
    for (int k = 0; k < int(items.size()); ++k)
      if (!waiting[k]) ready.insert({items[k][0], k});
    BindingBlock out{block_.dataflow, {}};
    size_t done = 0;
    while (!ready.empty()) {
      int k = ready.begin()->second;
      ready.erase(ready.begin());
      ++done;
      if (items[k].size() == 1)
        out.bindings.push_back(block_.bindings[items[k][0]]);
      else
        emit_group(items[k], out.bindings);
      for (int u : users[k])
        if (--waiting[u] == 0) ready.insert({items[u][0], u});
    }
    RELAX_CHECK(done == items.size(), "fuse-ops: the groups formed a cycle");
    return out;
  }

  void emit_group(const std::vector<int>& ms, std::vector<Binding>& out) {
    std::unordered_set<const VarNode*> member_vars;
    for (int i : ms) member_vars.insert(block_.bindings[i].var.get());
    // Inputs: variables from outside the group, in order of first use.
    std::vector<Var> inputs;
    std::unordered_set<const VarNode*> seen;
    for (int i : ms) {
      visit_exprs(block_.bindings[i].value, [&](const Expr& e) {
        const auto* v = as<VarNode>(e);
        if (!v || member_vars.count(v) || !seen.insert(v).second) return;
        inputs.push_back(std::static_pointer_cast<const VarNode>(e));
      });
    }
    // Outputs: members used after the group or outside the block.
    std::vector<Var> outputs;
    for (int i : ms) {
      const Var& v = block_.bindings[i].var;
      bool outside = used_later_.count(v.get()) > 0;
      for (int u : uses_[i])
        if (std::find(ms.begin(), ms.end(), u) == ms.end()) outside = true;
      if (outside) outputs.push_back(v);
    }
    // The function: fresh variables for everything it binds.
    std::unordered_map<const VarNode*, Expr> remap;
    std::vector<Var> params;
    std::set<const SymNode*> plain_dims;
    for (const Var& v : inputs) {
      Var p = make_var(v->name, v->sinfo);
      params.push_back(p);
      remap[v.get()] = p;
      if (const auto* t = as<TensorSI>(v->sinfo); t && t->shape)
        for (const SymExpr& d : *t->shape)
          if (d.is_var()) plain_dims.insert(d.get());
    }
    // Symbolic variables the group uses that no input dim binds are passed
    // as a shape parameter.
    std::vector<SymExpr> extra;
    std::set<const SymNode*> extra_seen;
    auto need = [&](const SymExpr& e) {
      for (const SymExpr& v : free_vars(e))
        if (!plain_dims.count(v.get()) && extra_seen.insert(v.get()).second) extra.push_back(v);
    };
    std::vector<std::string> ops;
    std::vector<Binding> body;
    for (int i : ms) {
      const Binding& b = block_.bindings[i];
      visit_exprs(b.value, [&](const Expr& e) {
        if (const auto* s = as<ShapeExprNode>(e))
          for (const SymExpr& d : s->values) need(d);
      });
      for (const StructInfo& si : fields_or_self(b.var->sinfo))
        if (const auto* t = as<TensorSI>(si); t && t->shape)
          for (const SymExpr& d : *t->shape) need(d);
      if (nodes_[i].call)
        if (tir::Program p = mod_.program(nodes_[i].program))
          for (const std::string& op : program_ops(p)) ops.push_back(op);
      Expr value = substitute_vars(b.value, remap);
      // The one returned value leaves the block: a plain variable.
      bool leaves = outputs.size() == 1 && outputs[0] == b.var;
      Var nv = leaves ? make_var(b.var->name, b.var->sinfo) : make_dataflow_var(b.var->name, b.var->sinfo);
      remap[b.var.get()] = nv;
      body.push_back(Binding{nv, value, nullptr});
    }
    std::vector<Expr> call_args(inputs.begin(), inputs.end());
    if (!extra.empty()) {
      Var s = make_var("syms", std::make_shared<ShapeSI>(int(extra.size()), extra));
      params.push_back(s);
      call_args.push_back(make_shape(extra));
    }
    Expr ret;
    StructInfo ret_si;
    if (outputs.size() == 1) {
      ret = remap.at(outputs[0].get());
      ret_si = outputs[0]->sinfo;
    } else {
      std::vector<Expr> fields;
      std::vector<StructInfo> sis;
      for (const Var& o : outputs) {
        fields.push_back(remap.at(o.get()));
        sis.push_back(o->sinfo);
      }
      Var t = make_var("out", std::make_shared<TupleSI>(sis));
      body.push_back(Binding{t, make_tuple(fields), nullptr});
      ret = t;
      ret_si = t->sinfo;
    }
    // Return a Var bound in the block, as in normal form.
    SeqExpr seq = make_seq({BindingBlock{true, body}}, ret);
    seq->sinfo = ret_si;
    std::string name = "fused";
    for (const std::string& op : ops) {
      if (name.size() > 48) break;
      name += "_" + op;
    }
    name = mod_.fresh_name(name);
    Attrs attrs{{"primitive", true}, {"private", true}};
    Function f = make_function(params, seq, ret_si, attrs);
    mod_.add_function(name, f);

    Expr call = make_call(make_global_var(name), call_args);
    call->sinfo = ret_si;
    if (outputs.size() == 1) {
      out.push_back(Binding{outputs[0], call, nullptr});
      return;
    }
    Var t = make_dataflow_var(name + "_out", ret_si);
    out.push_back(Binding{t, call, nullptr});
    for (size_t k = 0; k < outputs.size(); ++k) {
      Expr item = make_tuple_get_item(t, int(k));
      item->sinfo = outputs[k]->sinfo;
      out.push_back(Binding{outputs[k], item, nullptr});
    }
  }

  // `e` with variables replaced; the struct info of rebuilt nodes is kept.
  static Expr substitute_vars(const Expr& e, const std::unordered_map<const VarNode*, Expr>& remap) {
    if (const auto* v = as<VarNode>(e)) {
      auto it = remap.find(v);
      return it == remap.end() ? e : it->second;
    }
    Expr out = e;
    if (const auto* c = as<CallNode>(e)) {
      std::vector<Expr> args;
      for (const Expr& a : c->args) args.push_back(substitute_vars(a, remap));
      out = make_call(c->callee, args, c->attrs, c->sinfo_args);
    } else if (const auto* t = as<TupleNode>(e)) {
      std::vector<Expr> fields;
      for (const Expr& f : t->fields) fields.push_back(substitute_vars(f, remap));
      out = make_tuple(fields);
    } else if (const auto* g = as<TupleGetItemNode>(e)) {
      out = make_tuple_get_item(substitute_vars(g->tuple, remap), g->index);
    } else {
      return e;
    }
    out->sinfo = e->sinfo;
    return out;
  }

  IRModule& mod_;
  const BindingBlock& block_;
  const std::unordered_set<const VarNode*>& used_later_;
  std::vector<Node> nodes_;
  std::vector<std::vector<int>> uses_;
  std::vector<int> parent_;
  std::unordered_map<const VarNode*, int> def_;
};

SeqExpr fuse_seq(IRModule& mod, const SeqExpr& seq) {
  std::vector<BindingBlock> blocks;
  bool changed = false;
  for (size_t bi = 0; bi < seq->blocks.size(); ++bi) {
    const BindingBlock& block = seq->blocks[bi];
    if (!block.dataflow) {
      blocks.push_back(block);
      continue;
    }
    // Variables used outside this block.
    std::unordered_set<const VarNode*> later;
    for (size_t bj = 0; bj < seq->blocks.size(); ++bj)
      if (bj != bi)
        for (const Binding& b : seq->blocks[bj].bindings) collect_used_vars(b.value, later);
    collect_used_vars(seq->body, later);
    BindingBlock nb = BlockFuser(mod, block, later).run();
    changed |= nb.bindings.size() != block.bindings.size();
    blocks.push_back(std::move(nb));
  }
  if (!changed) return seq;
  SeqExpr out = make_seq(std::move(blocks), seq->body);
  out->sinfo = seq->sinfo;
  return out;
}

}  // namespace

IRModule fuse_ops(const IRModule& mod) {
  IRModule out = mod;
  for (const std::string& name : mod.function_names()) {
    Function f = mod.function(name);
    if (f->attrs.get_bool("primitive", false)) continue;
    SeqExpr body = fuse_seq(out, f->body);
    if (body != f->body) out.add_function(name, make_function(f->params, body, f->ret, f->attrs));
  }
  return out;
}

}  // namespace relax
