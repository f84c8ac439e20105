// rewrite-cuda-graph (the paper's RewriteCUDAGraph), for the cuda target
// after static-plan-memory: a run of kernel launches that the host need not
// watch becomes a region the CUDA runtime captures once as a CUDA graph and
// replays, one graph per binding of what the kernels see (pointers, shapes,
// symbolic values).
//
// A region is a run of bindings of one (non-dataflow) block, each either
//   - a kernel launch: call_tir_dps, or call_library_dps of a device
//     library (cublas.*), whose outputs are planned storage;
//   - an item of such a launch's tuple (out_all[1]);
// interleaved with allocations (alloc_storage, alloc_tensor, a call site's
// status tensor from relax.kernel_status), which move to
// before the region: they only carve storage, and a capture must not
// allocate. A launch whose outputs the VM would allocate (call_tir, a
// cuBLAS call_library: outputs the caller gets) becomes one into fresh
// storage allocated before the region, so it joins it too. Anything else
// (a builtin that reads tensor data on the host, control flow, a shape
// computation) ends the region. A region of at least two launches becomes
//   cuda_graph_K = fn() { <the launches> ; () }
//   cuda_graph_K_run = call_builtin("cuda.graph_run", (cuda_graph_K, "@main/K"))
// The function is a closure over the tensors and symbolic values its
// launches use, which is the key the runtime keeps a graph for
// (runtime/cuda.cc); later uses of a launch's result use its destinations,
// which are the same tensors. The planned storages of a function with
// regions become persistent (alloc_storage(..., persistent="@main/storage3")):
// the same blocks every call, so the keys match and the graphs replay; a
// storage that holds an output the caller keeps stays fresh every call.
//
// The module attribute cuda_graph="0" (relax-build --no-cuda-graph), or a
// target other than cuda, leaves the module as it is; cuda_graph="1" set
// explicitly rewrites it on any target, where the runtime runs each region
// directly (tests check the rewrite on the cpu target that way).
#include <map>
#include <set>

#include "ir/target_traits.h"
#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/analysis/memory_plan.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr size_t kMinLaunches = 2;

// A library kernel that runs on the device, on the runtime's stream (one a
// graph can capture): cuBLAS's.
bool device_library(const CallNode& c) {
  const auto* name = !c.args.empty() ? as<StringImmNode>(c.args[0]) : nullptr;
  return name && name->value.rfind("cublas.", 0) == 0;
}

// The destinations of a launch (call_tir_dps or a device call_library_dps),
// or null when `b` is not one.
const TupleNode* launch_dests(const Binding& b) {
  if (b.is_match_cast()) return nullptr;
  const CallNode* c = as_op_call(b.value, "call_tir_dps");
  if (!c) c = as_op_call(b.value, "call_library_dps");
  if (!c || c->args.size() < 3 || (c->op()->name == "call_library_dps" && !device_library(*c))) return nullptr;
  return as<TupleNode>(c->args[2]);
}

// An allocation, or a call site's status tensor (relax.kernel_status: the
// same tensor every call, which kernels of a region may write).
bool is_allocation(const Binding& b) {
  if (b.is_match_cast()) return false;
  if (as_op_call(b.value, "alloc_storage") || as_op_call(b.value, "alloc_tensor")) return true;
  const CallNode* c = as_op_call(b.value, "call_pure_builtin");
  const auto* name = c && !c->args.empty() ? as<StringImmNode>(c->args[0]) : nullptr;
  return name && name->value == "relax.kernel_status";
}

class GraphRewriter : public ExprMutator {
 public:
  GraphRewriter(const IRModule& mod, std::string fname) : ExprMutator(&mod), fname_(std::move(fname)) {}

  SeqExpr visit_seq(const SeqExpr& seq) override {
    std::vector<BindingBlock> blocks;
    for (const BindingBlock& block : seq->blocks) {
      if (block.dataflow) {
        BindingBlock nb{true, {}};
        for (const Binding& b : block.bindings) visit_binding(b, nb.bindings);
        blocks.push_back(std::move(nb));
        continue;
      }
      blocks.push_back({false, rewrite_block(block)});
    }
    Expr body = visit(seq->body);
    SeqExpr out = make_seq(std::move(blocks), body);
    out->sinfo = seq->sinfo;
    return out;
  }

  int regions() const { return next_; }

 private:
  // The pending run: its bindings in order (already rewritten), which of
  // them are launches or their items, and the variables they bind.
  struct Run {
    std::vector<Binding> bindings;
    std::vector<bool> in_region;
    std::set<const VarNode*> vars;
    std::vector<std::pair<const VarNode*, std::vector<Expr>>> dests;  // launch var, its destinations
    size_t launches = 0;
  };

  // A launch whose outputs the VM allocates (call_tir, a cuBLAS
  // call_library: outputs the caller gets) as allocations of fresh
  // storage, which move before a region, and the launch into them, which
  // joins it. nullopt when `b` is no such launch or an output's size is
  // unknown.
  static std::optional<std::vector<Binding>> fresh_outputs(const Binding& b) {
    if (b.is_match_cast()) return std::nullopt;
    const CallNode* c = as_op_call(b.value, "call_tir");
    if (!c) c = as_op_call(b.value, "call_library");
    if (!c || c->sinfo_args.empty() || (c->op()->name == "call_library" && !device_library(*c))) return std::nullopt;
    std::vector<StructInfo> outs = fields_or_self(c->sinfo_args[0]);
    std::vector<Binding> bindings;
    std::vector<Expr> dests;
    for (size_t i = 0; i < outs.size(); ++i) {
      const auto* t = as<TensorSI>(outs[i]);
      if (!t || !t->shape) return std::nullopt;
      SymExpr nbytes = tensor_nbytes(t->dtype, *t->shape);
      if (!nbytes.defined()) return std::nullopt;
      std::string base = b.var->name + (outs.size() > 1 ? "_out" + std::to_string(i) : "_out");
      Expr storage = make_op_call("alloc_storage", {make_shape({nbytes})});
      storage->sinfo = object_si();
      Var sv = make_var(base + "_storage", object_si());
      Attrs attrs;
      attrs.set("dtype", t->dtype);
      Expr tensor = make_op_call("alloc_tensor", {sv, make_shape(*t->shape)}, attrs);
      tensor->sinfo = outs[i];
      Var tv = make_var(base, outs[i]);
      bindings.push_back(Binding{sv, storage, nullptr});
      bindings.push_back(Binding{tv, tensor, nullptr});
      dests.push_back(tv);
    }
    Expr call = to_dps(*c, std::move(dests));
    call->sinfo = b.value->sinfo;
    bindings.push_back(Binding{b.var, call, nullptr});
    return bindings;
  }

  std::vector<Binding> rewrite_block(const BindingBlock& block) {
    std::vector<Binding> out;
    Run run;
    std::vector<Binding> expanded;
    for (const Binding& b : block.bindings) {
      std::optional<std::vector<Binding>> f = fresh_outputs(b);
      if (!f) {
        expanded.push_back(b);
        continue;
      }
      for (size_t i = 0; i + 1 < f->size(); ++i) made_.insert((*f)[i].var.get());
      original_[b.var.get()] = b;
      expanded.insert(expanded.end(), f->begin(), f->end());
    }
    for (const Binding& b : expanded) {
      // Classified as written (the variables of the run are the original
      // ones); rewritten after a flush, which remaps the run's results.
      const auto* item = as<TupleGetItemNode>(b.value);
      const auto* tuple = item ? as<VarNode>(item->tuple) : nullptr;
      bool launch = launch_dests(b) != nullptr;
      bool in_region = launch || (!b.is_match_cast() && tuple && run.vars.count(tuple));
      bool hoisted = !in_region && is_allocation(b) && !uses_any(b.value, run.vars);
      if (!in_region && !hoisted) flush(run, out);
      std::vector<Binding> nb;
      visit_binding(b, nb);
      for (const Binding& x : nb) {
        if (!in_region && !hoisted) {
          out.push_back(x);
          continue;
        }
        run.bindings.push_back(x);
        run.in_region.push_back(in_region);
        if (!in_region) continue;
        run.vars.insert(x.var.get());
        if (const TupleNode* d = launch ? launch_dests(x) : nullptr) {
          run.dests.emplace_back(x.var.get(), d->fields);
          ++run.launches;
        }
      }
    }
    flush(run, out);
    return out;
  }

  static bool uses_any(const Expr& e, const std::set<const VarNode*>& vars) {
    bool found = false;
    visit_exprs(e, [&](const Expr& x) {
      if (const auto* v = as<VarNode>(x)) found = found || vars.count(v);
    });
    return found;
  }

  void flush(Run& run, std::vector<Binding>& out) {
    if (run.launches < kMinLaunches) {
      // No region: a launch into fresh storage goes back to what it was.
      for (const Binding& b : run.bindings) {
        if (made_.count(b.var.get())) continue;
        if (auto it = original_.find(b.var.get()); it != original_.end())
          visit_binding(it->second, out);
        else
          out.push_back(b);
      }
      run = Run{};
      return;
    }
    std::vector<Binding> region;
    for (size_t i = 0; i < run.bindings.size(); ++i) {
      if (run.in_region[i])
        region.push_back(run.bindings[i]);
      else
        out.push_back(run.bindings[i]);  // an allocation, now before the region
    }
    // Later uses of a launch's result, or of an item of it, use the
    // destinations.
    std::map<const VarNode*, std::vector<Expr>> dests(run.dests.begin(), run.dests.end());
    for (const Binding& b : region) {
      if (auto it = dests.find(b.var.get()); it != dests.end()) {
        var_remap_[b.var.get()] = it->second.size() == 1 ? it->second[0] : tuple_of(it->second);
        continue;
      }
      const auto* item = as<TupleGetItemNode>(b.value);
      auto it = dests.find(as<VarNode>(item->tuple));
      var_remap_[b.var.get()] = it->second.at(size_t(item->index));
    }
    std::string name = "cuda_graph_" + std::to_string(next_);
    std::string key = "@" + fname_ + "/" + std::to_string(next_++);
    StructInfo none = tuple_si({});
    Expr unit = make_tuple(std::vector<Expr>{});
    unit->sinfo = none;
    SeqExpr body = make_seq({BindingBlock{false, std::move(region)}}, unit);
    body->sinfo = none;
    Attrs attrs;
    attrs.set("pure", false);
    attrs.set("cuda_graph", key);
    Function fn = make_function(std::vector<Var>{}, body, none, attrs);
    fn->sinfo = func_si(std::vector<StructInfo>{}, none, false);
    Var fvar = make_var(name, fn->sinfo);
    out.push_back(Binding{fvar, fn, nullptr});
    Expr call =
        make_op_call("call_builtin", {make_string("cuda.graph_run"), make_tuple({fvar, make_string(key)})}, {}, {none});
    call->sinfo = none;
    out.push_back(Binding{make_var(name + "_run", none), call, nullptr});
    run = Run{};
  }

  static Expr tuple_of(const std::vector<Expr>& fields) {
    std::vector<StructInfo> si;
    for (const Expr& f : fields) si.push_back(f->sinfo);
    Expr t = make_tuple(fields);
    t->sinfo = tuple_si(si);
    return t;
  }

  std::string fname_;
  int next_ = 0;
  // Launches rewritten into fresh storage (fresh_outputs): the original
  // binding by variable, and the allocations made for them.
  std::map<const VarNode*, Binding> original_;
  std::set<const VarNode*> made_;
};

// Every planned storage of a function with regions becomes persistent (the
// same block every call while big enough): a region's graph is keyed by
// the addresses it sees, which would otherwise change with the pool's
// order of reuse. Not a storage that holds an escaping tensor (an output
// the caller keeps: the next call must not write over it).
class PersistStorage : public ExprMutator {
 public:
  PersistStorage(const IRModule& mod, std::string fname, const Function& f)
      : ExprMutator(&mod), fname_(std::move(fname)) {
    MemoryAnalysis m = analyze_memory(f);
    for (const ActivationTensor& t : m.tensors)
      if (t.escapes && t.storage >= 0) held_.insert(m.bindings[m.storages[size_t(t.storage)].binding].var.get());
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    const CallNode* c = b.is_match_cast() ? nullptr : as_op_call(b.value, "alloc_storage");
    if (!c || held_.count(b.var.get()) || !c->attrs.get_string("persistent", "").empty())
      return ExprMutator::visit_binding(b, out);
    Attrs attrs = c->attrs;
    attrs.set("persistent", "@" + fname_ + "/" + b.var->name);
    Expr call = make_op_call("alloc_storage", c->args, attrs);
    call->sinfo = b.value->sinfo;
    out.push_back(Binding{b.var, call, nullptr});
  }

 private:
  std::string fname_;
  std::set<const VarNode*> held_;  // storages of escaping tensors
};

}  // namespace

IRModule rewrite_cuda_graph(const IRModule& mod) {
  if (!TargetTraits::of(mod).capture) return mod;
  return map_functions(mod, [&](const std::string& name, const Function& f) {
    if (f->attrs.get_bool("primitive", false)) return f;
    GraphRewriter r(mod, name);
    Function out = r.visit_function(f);
    if (r.regions() == 0) return f;
    return PersistStorage(mod, name, out).visit_function(out);
  });
}

}  // namespace relax
