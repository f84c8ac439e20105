// lift-workspaces: a tensor program's workspace (global buffers allocated
// at the root of its body: scratch for the whole call, which the kernel
// would otherwise allocate itself on every call, on the heap when it is
// large or of symbolic size) becomes extra outputs of the program. Each
// call_tir of it declares them, in the caller's terms, and drops them:
//   y_all = call_tir(@p, (x...), out=(Y, W1, ...))
//   y = y_all.0
// so the workspace is an activation like any other, dead right after the
// call, and static-plan-memory gives it storage that other tensors share.
//
// A program is lifted only when every call of it is a call_tir whose
// arguments determine the workspace's shape (the variables of the shape
// are bound by parameter dims or symbolic parameters, matched against the
// call's shapes); otherwise it keeps its workspace. Library kernels take
// their scratch as outputs from the start (passes/legalize/*.cc),
// so there is nothing to lift for them.
#include <map>
#include <set>

#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

using tir::Buffer;

// The program's workspaces: the global allocations at the root of its body.
std::vector<Buffer> workspaces_of(const tir::Program& p, tir::Stmt* inner = nullptr) {
  std::vector<Buffer> out;
  tir::Stmt s = p->body;
  while (const auto* a = tir::as<tir::AllocateNode>(s)) {
    if (a->buffer->scope != tir::Scope::Global) break;
    out.push_back(a->buffer);
    s = a->body;
  }
  if (inner) *inner = s;
  return out;
}

// The workspace shapes in the terms of `call`, or nullopt when the call does
// not determine one of their variables.
std::optional<std::vector<StructInfo>> workspace_sinfo(const tir::Program& p, const std::vector<Buffer>& ws,
                                                       const CallNode& call) {
  SymMap<SymExpr> map = program_vars_at(p, call);
  std::vector<StructInfo> out;
  for (const Buffer& b : ws) {
    std::vector<SymExpr> shape;
    for (const SymExpr& d : b->shape) {
      for (const SymExpr& v : free_vars(d))
        if (!map.count(v)) return std::nullopt;
      shape.push_back(substitute(d, map));
    }
    out.push_back(tensor_si(b->dtype, shape));
  }
  return out;
}

// Rewrites the calls of the lifted programs.
class CallRewriter : public ExprMutator {
 public:
  CallRewriter(const IRModule& mod, const std::map<std::string, tir::Program>& lifted)
      : ExprMutator(&mod), lifted_(lifted) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    const CallNode* c = as_op_call(b.value, "call_tir");
    const auto* g = c ? as<GlobalVarNode>(c->args[0]) : nullptr;
    auto it = g ? lifted_.find(g->name) : lifted_.end();
    if (it == lifted_.end() || b.is_match_cast()) return ExprMutator::visit_binding(b, out);
    const tir::Program& old = mod_->program(g->name);
    std::vector<StructInfo> outs = fields_or_self(c->sinfo_args[0]);
    std::vector<StructInfo> ws = *workspace_sinfo(old, workspaces_of(old), *c);
    size_t kept = outs.size();
    outs.insert(outs.end(), ws.begin(), ws.end());
    StructInfo all = tuple_si(outs);
    std::vector<Expr> args;
    for (const Expr& a : c->args) args.push_back(visit(a));
    Expr call = make_op_call("call_tir", args, c->attrs, {all});
    call->sinfo = all;
    Var var = b.var;
    if (auto r = var_remap_.find(var.get()); r != var_remap_.end())
      var = std::static_pointer_cast<const VarNode>(r->second);
    for (Binding& x : bind_leading_outputs(var, call, kept)) out.push_back(std::move(x));
  }

 private:
  const std::map<std::string, tir::Program>& lifted_;
};

}  // namespace

IRModule lift_workspaces(const IRModule& mod) {
  // Programs with a workspace, and whether every call of each can declare it.
  std::map<std::string, bool> candidates;
  for (const std::string& name : mod.program_names())
    if (!workspaces_of(mod.program(name)).empty()) candidates[name] = true;
  if (candidates.empty()) return mod;
  for (const std::string& fname : mod.function_names()) {
    visit_exprs(mod.function(fname), [&](const Expr& e) {
      // Every reference must be the callee of a call_tir that determines the
      // workspace shapes.
      const auto* c = as<CallNode>(e);
      if (!c || !c->op()) return;
      for (size_t i = 0; i < c->args.size(); ++i) {
        const auto* g = as<GlobalVarNode>(c->args[i]);
        auto it = g ? candidates.find(g->name) : candidates.end();
        if (it == candidates.end()) continue;
        if (c->op()->name != "call_tir" || i != 0 || c->sinfo_args.empty()) {
          it->second = false;
          continue;
        }
        tir::Program p = mod.program(g->name);
        if (!workspace_sinfo(p, workspaces_of(p), *c)) it->second = false;
      }
    });
  }
  std::map<std::string, tir::Program> lifted;
  for (const auto& [name, ok] : candidates)
    if (ok) lifted[name] = mod.program(name);
  if (lifted.empty()) return mod;

  CallRewriter rewriter(mod, lifted);
  IRModule out = map_functions(mod, [&](const std::string&, const Function& f) { return rewriter.visit_function(f); });
  for (const auto& [name, p] : lifted) {
    tir::Stmt inner;
    std::vector<Buffer> ws = workspaces_of(p, &inner);
    std::vector<Buffer> outputs = p->outputs;
    outputs.insert(outputs.end(), ws.begin(), ws.end());
    Attrs attrs = p->attrs;
    attrs.set("workspaces", int64_t(ws.size()));
    out.add_program(name, tir::make_program(p->name, p->inputs, outputs, p->sym_params, inner, attrs));
  }
  return out;
}

}  // namespace relax
