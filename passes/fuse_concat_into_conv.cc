// fuse-concat-into-conv (cpu): a concat along the channels that only a
// direct library convolution reads is never made; the convolution reads
// its parts instead:
//
//   x = call_tir(@concat, (a, b), out=T)          (@concat attrs {concat_axis=1})
//   y = call_library("gemm.conv2d_packed", (x, w, shape(p..., 0), ...), out=U)
//
// becomes
//
//   y = call_library("gemm.conv2d_packed", ((a, b), w, shape(p..., 0), ...), out=U)
//
// and the concat dies (dead-code-elimination). The direct kernel copies
// its input anyway where the convolution pads (a zero-padded copy of each
// plane, runtime/conv_direct.cc): it reads each plane from its part for
// that copy, so the concat's pass over memory, and its tensor, are gone
// (UNet's decoder: skip connection and upsampled features, concatenated,
// then a 3x3 convolution). Unpadded, the kernel makes the copy from the
// parts, where the concat made it before.
//
// Only programs the legaliser wrote as a concat (their attribute
// concat_axis; a concat fused with other ops is another program) along
// dim 1 of a rank-3 or rank-4 f32 tensor, its parts of its other dims,
// read by nothing else, in the same block; only convolutions in the direct layout (parameter 9 is 0), the
// one whose kernel takes parts. Runs after fuse-library-epilogues, so the
// convolution's epilogue, if any, is already in the call; it keeps it.
#include <unordered_map>

#include "ir/target_traits.h"
#include "ir/analyzer.h"
#include "ir/mutator.h"
#include "ir/op.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr const char* kConv = "gemm.conv2d_packed";

// The parts of `value` when it is a call of a program the legaliser wrote
// as a concat along dim 1.
std::optional<std::vector<Expr>> channel_concat_parts(const IRModule& mod, const Expr& value) {
  const CallNode* c = as_op_call(value, "call_tir");
  if (!c || c->args.size() < 2) return std::nullopt;
  const auto* g = as<GlobalVarNode>(c->args[0]);
  const auto* args = as<TupleNode>(c->args[1]);
  const tir::Program prog = g ? mod.program(g->name) : nullptr;
  if (!args || !prog || prog->outputs.size() != 1 || prog->inputs.size() != args->fields.size()) return std::nullopt;
  if (prog->attrs.get_int("concat_axis", -1) != 1) return std::nullopt;
  const auto* t = as<TensorSI>(value->sinfo);
  if (!t || t->dtype != DataType::f32() || (t->ndim != 4 && t->ndim != 3) || !t->shape) return std::nullopt;
  // Each part the result's dims but dim 1 (what the runtime checks again).
  Analyzer ana;
  for (const Expr& part : args->fields) {
    const auto* p = as<TensorSI>(part->sinfo);
    if (!p || p->dtype != t->dtype || !p->shape || p->shape->size() != t->shape->size()) return std::nullopt;
    for (size_t d = 0; d < p->shape->size(); ++d)
      if (d != 1 && !ana.can_prove_equal((*p->shape)[d], (*t->shape)[d])) return std::nullopt;
  }
  return args->fields;
}

// The arguments of `value` when it is a library convolution in the direct
// layout (its x first); null otherwise.
const TupleNode* direct_conv_args(const Expr& value) {
  const CallNode* c = as_op_call(value, "call_library");
  if (!c || c->args.size() != 2) return nullptr;
  const auto* name = as<StringImmNode>(c->args[0]);
  const auto* args = as<TupleNode>(c->args[1]);
  if (!name || name->value != kConv || !args || args->fields.size() < 3) return nullptr;
  const auto* params = as<ShapeExprNode>(args->fields[2]);
  if (!params || params->values.size() < 10 || !params->values[9].is_const(0)) return nullptr;
  return args;
}

class Fuser : public ExprMutator {
 public:
  explicit Fuser(const IRModule& mod) : ExprMutator(&mod) {}

  Function run(const Function& f) {
    uses_.clear(), rewritten_.clear();
    visit_exprs(f->body, [&](const Expr& e) {
      if (const auto* v = as<VarNode>(e)) ++uses_[v];
    });
    visit_exprs(f->body, [&](const Expr& e) {
      if (const auto* seq = as<SeqExprNode>(e))
        for (const BindingBlock& block : seq->blocks) plan(block);
    });
    if (rewritten_.empty()) return f;
    return visit_function(f);
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    auto it = rewritten_.find(b.var.get());
    if (it == rewritten_.end()) return ExprMutator::visit_binding(b, out);
    out.push_back(Binding{b.var, visit(it->second), nullptr});
  }

 private:
  void plan(const BindingBlock& block) {
    std::unordered_map<const VarNode*, std::vector<Expr>> concats;  // in this block
    for (const Binding& b : block.bindings) {
      if (b.is_match_cast()) continue;
      if (std::optional<std::vector<Expr>> parts = channel_concat_parts(*mod_, b.value)) {
        concats.emplace(b.var.get(), std::move(*parts));
        continue;
      }
      const TupleNode* args = direct_conv_args(b.value);
      const auto* x = args ? as<VarNode>(args->fields[0]) : nullptr;
      auto concat = x ? concats.find(x) : concats.end();
      if (concat == concats.end() || uses_[x] != 1) continue;
      std::vector<Expr> fields = args->fields;
      fields[0] = make_tuple(concat->second);
      const auto* c = as<CallNode>(b.value);
      Expr call = make_op_call("call_library", {c->args[0], make_tuple(fields)}, {}, c->sinfo_args);
      call->sinfo = b.value->sinfo;
      rewritten_[b.var.get()] = call;
    }
  }

  std::unordered_map<const VarNode*, int> uses_;
  std::unordered_map<const VarNode*, Expr> rewritten_;
};

}  // namespace

IRModule fuse_concat_into_conv(const IRModule& mod) {
  if (!TargetTraits::of(mod).host_kernels) return mod;  // the direct convolution is a host kernel
  Fuser fuser(mod);
  return map_functions(mod, [&](const std::string&, const Function& f) { return fuser.run(f); });
}

}  // namespace relax
