// static-plan-memory: the activation tensors of each graph function's top
// level get storage planned at compile time instead of a fresh allocation
// per kernel call.
//
// Every output of a call_tir / call_library whose alias set does not escape
// the function (passes/analysis/memory_plan.h) becomes
//   s = alloc_storage(shape(nbytes))          (once per storage)
//   t = alloc_tensor(s, shape(dims), dtype=D)
//   y = call_tir_dps(@prog, (inputs...), (t, ...)[, shape(syms)])
// and storages are reused by tensors whose lifetimes do not overlap:
//  - a symbolic size reuses a free storage whose size is provably equal,
//    else one that provably holds it (batch * 20 bytes in a free batch * 64:
//    after the library epilogues an MLP's activations differ in size);
//  - a constant size takes the smallest free constant storage that holds
//    it, else grows the largest free one (sizes settle at the end);
//  - with upper bounds (attribute sym_bounds, from relax-build --bound) a
//    symbolic size is planned at its upper bound, a constant, so tensors of
//    different symbolic sizes share storage. The VM checks the bounds when
//    inputs bind the variables, and alloc_tensor checks the fit.
// Escaping tensors (the result, what a returned tuple or closure holds) keep
// their own allocation (a storage of their own when the same call also
// writes an activation: a kernel's workspace or internal result); tensors
// inside If branches and nested functions keep their own
// allocation. The function body becomes one non-dataflow block: the
// explicit memory ops are impure.
#include <algorithm>
#include <unordered_map>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/memory_plan.h"
#include "passes/passes.h"

namespace relax {
namespace {

struct Storage {
  SymExpr size;  // bytes: a constant (the largest of its tensors) or a symbolic size
  size_t first_binding = 0;
};

class Planner : public ExprMutator {
 public:
  explicit Planner(const IRModule& mod) : ExprMutator(&mod) {}

  Function run(const Function& f) {
    MemoryAnalysis m = analyze_memory(f);
    std::map<std::string, Interval> bounds = function_bounds(f);
    Analyzer ana;
    for (const Var& p : f->params) bind_bounds(p->sinfo, bounds, ana);
    for (const Binding& b : m.bindings)
      if (b.is_match_cast()) bind_bounds(b.cast, bounds, ana);

    // binding -> its tensors (all of a binding's outputs share one alias
    // set, so either all or none are planned).
    std::unordered_map<size_t, std::vector<size_t>> defined_at;
    std::unordered_map<size_t, std::vector<size_t>> dies_at;
    for (size_t t = 0; t < m.tensors.size(); ++t) {
      defined_at[m.tensors[t].binding].push_back(t);
      dies_at[m.tensors[t].last_use].push_back(t);
    }
    std::vector<int> storage_of(m.tensors.size(), -1);
    std::vector<Storage> storages;
    std::vector<int> free_list;
    for (size_t i = 0; i < m.bindings.size(); ++i) {
      auto it = defined_at.find(i);
      if (it != defined_at.end() && plannable(m, it->second)) {
        // Symbolic sizes take a free storage of provably the same size
        // first, all of the call's outputs, and only then one that provably
        // holds them: a call's small output would otherwise take the
        // storage its large one could have had.
        for (bool larger : {false, true})
          for (size_t t : it->second) {
            const ActivationTensor& a = m.tensors[t];
            if (storage_of[t] >= 0 || (!larger && (a.escapes || a.nbytes.is_const()))) continue;
            if (a.escapes) {  // the caller's: a storage of its own, exact size, never reused
              storage_of[t] = int(storages.size());
              storages.push_back(Storage{a.nbytes, i});
              continue;
            }
            // At its upper bound only where every variable of the size has
            // a declared one: a clamp in the size (a slice to min(n, 2^62))
            // bounds it too, at what no machine holds.
            SymExpr size = a.nbytes;
            int64_t hi = ana.bound(size).hi;
            if (!size.is_const() && hi != Interval::kPosInf && all_bounded(size, bounds)) size = SymExpr(hi);
            if (!larger && size.is_const()) continue;  // at its bound: planned with the constants
            storage_of[t] = pick(size, i, storages, free_list, ana, larger);
          }
      }
      auto d = dies_at.find(i);
      if (d != dies_at.end())
        for (size_t t : d->second)
          if (storage_of[t] >= 0 && !m.tensors[t].escapes) free_list.push_back(storage_of[t]);
    }
    if (storages.empty()) return f;

    // Rewrite: one non-dataflow block; dataflow variables become variables.
    std::unordered_map<size_t, std::vector<size_t>> storages_at;
    for (size_t s = 0; s < storages.size(); ++s) storages_at[storages[s].first_binding].push_back(s);
    std::vector<Var> storage_vars(storages.size());
    std::vector<Binding> out;
    for (size_t i = 0; i < m.bindings.size(); ++i) {
      const Binding& b = m.bindings[i];
      Var var = is_dataflow_var(b.var) ? make_var(b.var->name, b.var->sinfo) : b.var;
      for (size_t s : storages_at[i]) {
        storage_vars[s] = make_var("storage" + std::to_string(s), object_si());
        out.push_back(
            Binding{storage_vars[s], make_op_call("alloc_storage", {make_shape({storages[s].size})}), nullptr});
      }
      Expr value = visit(b.value);
      auto it = defined_at.find(i);
      if (it != defined_at.end() && storage_of[it->second[0]] >= 0) {
        std::vector<Expr> dests;
        for (size_t t : it->second) {
          const ActivationTensor& a = m.tensors[t];
          std::string name = b.var->name + "_buf" + (it->second.size() > 1 ? std::to_string(a.field) : "");
          Var buf = make_var(name, tensor_si(a.dtype, a.shape));
          Attrs attrs{{"dtype", a.dtype}};
          out.push_back(Binding{
              buf, make_op_call("alloc_tensor", {storage_vars[size_t(storage_of[t])], make_shape(a.shape)}, attrs),
              nullptr});
          dests.push_back(buf);
        }
        value = to_dps(*as<CallNode>(value), std::move(dests));
      }
      out.push_back(Binding{var, value, b.cast});
      if (var != b.var) var_remap_[b.var.get()] = var;
    }
    Expr body = visit(f->body->body);
    SeqExpr seq = make_seq({BindingBlock{false, std::move(out)}}, body);
    return make_function(f->params, seq, f->ret, f->attrs);
  }

 private:
  static bool all_bounded(const SymExpr& size, const std::map<std::string, Interval>& bounds) {
    for (const SymExpr& v : free_vars(size))
      if (!bounds.count(v.name())) return false;
    return true;
  }

  static void bind_bounds(const StructInfo& si, const std::map<std::string, Interval>& bounds, Analyzer& ana) {
    std::vector<SymExpr> vars;
    collect_vars(si, vars);
    for (const SymExpr& v : vars) {
      auto it = bounds.find(v.name());
      if (it != bounds.end()) ana.bind(v, it->second);
    }
  }

  // A call whose outputs all have a byte size and one of them an activation
  // (its other outputs, which escape, get storage of their own).
  static bool plannable(const MemoryAnalysis& m, const std::vector<size_t>& tensors) {
    bool activation = false;
    for (size_t t : tensors) {
      if (!m.tensors[t].nbytes.defined() || m.tensors[t].storage >= 0) return false;
      activation |= !m.tensors[t].escapes;
    }
    return activation;
  }

  // A free storage for `size`, or a new one.
  // `larger`: a symbolic size may take a free storage that provably holds
  // it; else only one of provably the same size, and -1 when there is none.
  static int pick(const SymExpr& size, size_t binding, std::vector<Storage>& storages, std::vector<int>& free_list,
                  const Analyzer& ana, bool larger) {
    int chosen = -1;
    if (size.is_const()) {
      // Best fit among the constant storages, else the largest one, grown.
      auto bytes = [&](int s) { return storages[size_t(s)].size.const_value(); };
      int64_t need = size.const_value();
      int best = -1, largest = -1;
      for (int s : free_list) {
        if (!storages[size_t(s)].size.is_const()) continue;
        if (bytes(s) >= need && (best < 0 || bytes(s) < bytes(best))) best = s;
        if (largest < 0 || bytes(s) > bytes(largest)) largest = s;
      }
      chosen = best >= 0 ? best : largest;
      if (chosen >= 0) storages[size_t(chosen)].size = SymExpr(std::max(bytes(chosen), need));
    } else {
      // Provably the same size, else the first that provably holds it.
      for (int s : free_list)
        if (ana.can_prove_equal(storages[size_t(s)].size, size)) {
          chosen = s;
          break;
        }
      for (size_t k = 0; larger && chosen < 0 && k < free_list.size(); ++k) {
        const SymExpr& have = storages[size_t(free_list[k])].size;
        if (!have.is_const() && ana.can_prove_less_equal(size, have)) chosen = free_list[k];
      }
      if (chosen < 0 && !larger) return -1;
    }
    if (chosen >= 0) {
      free_list.erase(std::find(free_list.begin(), free_list.end(), chosen));
      return chosen;
    }
    storages.push_back(Storage{size, binding});
    return int(storages.size() - 1);
  }
};

}  // namespace

IRModule static_plan_memory(const IRModule& mod) {
  return map_functions(mod, [&](const std::string&, const Function& f) -> Function {
    if (f->attrs.get_bool("primitive", false)) return f;
    return Planner(mod).run(f);
  });
}

}  // namespace relax
