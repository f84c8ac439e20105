// Cross-level calls: from the graph into tensor programs, libraries and
// runtime builtins. The callee's result cannot be deduced from its
// arguments, so each call states it (`out=SINFO`, the call's one sinfo_arg).
#include "ir/module.h"
#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

const StructInfo& declared_out(const CallNode& call) {
  const std::string& op = op_name(call);
  if (call.sinfo_args.empty()) fail(op, " needs out=...");
  if (call.sinfo_args.size() > 1) fail(op, " takes one out=..., got ", call.sinfo_args.size());
  if (!call.sinfo_args[0]) fail(op, ": out=... is empty");
  return call.sinfo_args[0];
}

StructInfo infer_call_tir(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  const StructInfo& out = declared_out(call);
  size_t num_outputs = 1;
  if (const auto* t = as<TupleSI>(out)) {
    for (const StructInfo& f : t->fields)
      if (!as<TensorSI>(f))
        fail(op, ": out must be a tensor or a tuple of tensors, got a tuple holding ", kind_name(f));
    num_outputs = t->fields.size();
  } else if (!as<TensorSI>(out)) {
    fail(op, ": out must be a tensor or a tuple of tensors, got ", kind_name(out));
  }
  const auto* callee = as<GlobalVarNode>(call.args[0]);
  if (!callee) fail(op, ": the callee must be a tensor program @name, got a ", expr_kind_name(call.args[0]->kind));
  size_t num_inputs = tuple_arg(call, 1).size();
  int num_syms = call.args.size() == 3 ? shape_arg(call, 2).ndim : 0;
  if (!ctx.mod) return out;

  const std::string& name = callee->name;
  tir::Program prog = ctx.mod->program(name);
  if (!prog) fail(op, ": @", name, " is not a tensor program in the module");
  if (prog->inputs.size() != num_inputs)
    fail(op, ": @", name, " takes ", prog->inputs.size(), " inputs, got ", num_inputs);
  if (prog->outputs.size() != num_outputs)
    fail(op, ": @", name, " writes ", prog->outputs.size(), " outputs, but out=... describes ", num_outputs);
  if (num_syms >= 0 && size_t(num_syms) != prog->sym_params.size())
    fail(op, ": @", name, " takes ", prog->sym_params.size(), " symbolic arguments, got ", num_syms);
  return out;
}

StructInfo infer_named_call(const CallNode& call, const InferContext&) {
  attrs_of(call);
  const std::string& op = op_name(call);
  const StructInfo& out = declared_out(call);
  if (!as<StringImmNode>(call.args[0]))
    fail(op, ": the callee must be a name string, got a ", expr_kind_name(call.args[0]->kind));
  tuple_arg(call, 1);
  return out;
}

// call_tir_dps / call_library_dps: the destinations are given; the call
// returns them (one tensor, or a tuple of several).
StructInfo infer_call_dps(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  std::vector<StructInfo> outs = tuple_arg(call, 2);
  if (outs.empty()) fail(op, ": needs at least one destination tensor");
  for (const StructInfo& o : outs)
    if (!as<TensorSI>(o)) fail(op, ": destinations must be tensors, got ", kind_name(o));
  size_t num_inputs = tuple_arg(call, 1).size();
  if (op == "call_library_dps") {
    if (!as<StringImmNode>(call.args[0]))
      fail(op, ": the callee must be a name string, got a ", expr_kind_name(call.args[0]->kind));
  } else {
    const auto* callee = as<GlobalVarNode>(call.args[0]);
    if (!callee) fail(op, ": the callee must be a tensor program @name, got a ", expr_kind_name(call.args[0]->kind));
    int num_syms = call.args.size() == 4 ? shape_arg(call, 3).ndim : 0;
    if (ctx.mod) {
      tir::Program prog = ctx.mod->program(callee->name);
      if (!prog) fail(op, ": @", callee->name, " is not a tensor program in the module");
      if (prog->inputs.size() != num_inputs)
        fail(op, ": @", callee->name, " takes ", prog->inputs.size(), " inputs, got ", num_inputs);
      if (prog->outputs.size() != outs.size())
        fail(op, ": @", callee->name, " writes ", prog->outputs.size(), " outputs, got ", outs.size(), " destinations");
      if (num_syms >= 0 && size_t(num_syms) != prog->sym_params.size())
        fail(op, ": @", callee->name, " takes ", prog->sym_params.size(), " symbolic arguments, got ", num_syms);
    }
  }
  return outs.size() == 1 ? outs[0] : tuple_si(outs);
}

StructInfo infer_alloc_storage(const CallNode& call, const InferContext&) {
  attrs_of(call);
  ShapeInfo size = shape_arg(call, 0);
  if (size.ndim != 1) fail("alloc_storage: the size must be a shape of one dim (bytes), got ndim ", size.ndim);
  return object_si();
}

StructInfo infer_alloc_tensor(const CallNode& call, const InferContext&) {
  Attrs attrs = attrs_of(call);
  if (!as<ObjectSI>(arg_sinfo(call, 0)))
    fail("alloc_tensor: the first argument must be a storage (Object), got ", kind_name(arg_sinfo(call, 0)));
  ShapeInfo shape = shape_arg(call, 1);
  DataType dtype = attrs.get_dtype("dtype");
  if (dtype.is_void()) fail("alloc_tensor: needs dtype=...");
  return make_tensor(dtype, shape.ndim, shape.values);
}

}  // namespace

void register_cross_level_ops(OpRegistry& reg) {
  reg.add("call_tir")
      .doc(
          "call_tir(@prog, (inputs...)[, shape(syms...)], out=S): calls tensor program @prog in "
          "destination-passing style: allocates the outputs described by S (a tensor or a tuple of tensors), "
          "runs @prog on the inputs, the extra symbolic arguments and the outputs, and returns the outputs.")
      .args(2, 3)
      .lowering(OpLowering::VM)
      .infer(infer_call_tir);
  reg.add("call_library")
      .doc(
          "call_library(\"name\", (args...), out=S): calls the external library kernel `name` "
          "(destination-passing: the outputs described by S are allocated and passed after the arguments) and "
          "returns them. Pure: the kernel writes only its outputs.")
      .args(2)
      .lowering(OpLowering::Library)
      .infer(infer_named_call);
  reg.add("call_builtin")
      .doc(
          "call_builtin(\"name\", (args...), out=S): calls the runtime builtin `name` with the arguments and "
          "returns its result, described by S. Impure: builtins may allocate, print or keep state.")
      .args(2)
      .impure()
      .lowering(OpLowering::Library)
      .infer(infer_named_call);
  reg.add("call_pure_builtin")
      .doc(
          "call_pure_builtin(\"name\", (args...), out=S): as call_builtin, for a runtime builtin whose result "
          "depends only on its arguments and that has no other effect (data-dependent ops: TopK, NonZero, "
          "Unique, shape functions), so it may sit in a dataflow block and be removed when unused.")
      .args(2)
      .lowering(OpLowering::Library)
      .infer(infer_named_call);
  // Memory planning's explicit form (passes/static_plan_memory.cc).
  reg.add("alloc_storage")
      .doc(
          "alloc_storage(shape(nbytes)[, persistent=\"site\"]): a block of nbytes bytes (64-byte aligned) that "
          "alloc_tensor carves tensors out of; the memory planner emits it. Impure: each call is a new block, "
          "except with `persistent`, where the block of the last call is kept and given again while it is big "
          "enough (CUDA graph regions need the same addresses every call: passes/rewrite_cuda_graph.cc).")
      .args(1)
      .attr("persistent", AttrType::String, std::string(""))
      .impure()
      .lowering(OpLowering::VM)
      .infer(infer_alloc_storage);
  reg.add("alloc_tensor")
      .doc(
          "alloc_tensor(storage, shape, dtype=D): an uninitialised tensor of the shape and dtype over the first "
          "bytes of `storage` (an error at run time when it does not fit). Tensors of one storage share its "
          "bytes: the planner gives a storage to tensors whose lifetimes do not overlap.")
      .args(2)
      .attr("dtype", AttrType::DType)
      .impure()
      .lowering(OpLowering::VM)
      .infer(infer_alloc_tensor);
  reg.add("call_tir_dps")
      .doc(
          "call_tir_dps(@prog, (inputs...), (dests...)[, shape(syms...)]): runs tensor program @prog writing "
          "the given destination tensors (planned memory) and returns them: one tensor, or a tuple of several. "
          "Impure: it writes its destinations.")
      .args(3, 4)
      .impure()
      .lowering(OpLowering::VM)
      .infer(infer_call_dps);
  reg.add("call_library_dps")
      .doc(
          "call_library_dps(\"name\", (args...), (dests...)): runs the library kernel `name` writing the given "
          "destination tensors and returns them, as call_tir_dps.")
      .args(3)
      .impure()
      .lowering(OpLowering::Library)
      .infer(infer_call_dps);
}

}  // namespace relax
