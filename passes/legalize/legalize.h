// Legalisation: every graph op call becomes a call of a tensor program of
// the same module (docs/runtime_abi.md, section 1).
//
// A legaliser is registered per op name. It gets the call (its arguments and
// its deduced struct info) and a LegalizeContext, writes a tir::Program with
// a ProgramBuilder, which maps the graph's dims onto buffer dims by the ABI's
// convention, and returns the `call_tir(...)` that replaces the call, or
// ctx.decline(why) (a nullopt) to leave the call as it is: the VM lowering
// then reports it, and relax-build --explain legalize prints why.
//
// How to write one (passes/legalize/<family>.cc):
//
//   std::optional<Expr> legalize_relu(LegalizeContext& ctx, const CallNode& call) {
//     ProgramBuilder pb(ctx, "relu");
//     tir::Buffer x = pb.input(call.args[0], "x");         // nullptr: no known shape
//     tir::Buffer y = pb.output(call.sinfo, "y");
//     if (!x || !y) return ctx.decline("an operand has no known shape");
//     return pb.finish(te::compute(y, [&](const te::Index& i) {
//       return te::max_(te::load(x, i), te::zero(x->dtype));
//     }));
//   }
//   void register_foo_legalizers(LegalizerRegistry& reg) { reg.add("relu", legalize_relu); }
//
// then list register_foo_legalizers once in register_all_legalizers
// (passes/legalize/legalize.cc). Rules: write the body in terms of the buffers' dims
// (`x->shape`), never the graph's; a graph-level value the body needs (a
// slice start `k`) goes through pb.sym(k), which makes it a sym_param when
// no buffer binds it. Attributes are read with ops::attrs_of(call) (defaults
// filled). The helpers for loop nests, broadcasting and reductions are in
// passes/legalize/te.h. Throw relax::Error only for an IR the op's rule
// should have rejected; decline what is merely unsupported.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/analyzer.h"
#include "ir/expr.h"
#include "ir/module.h"
#include "ir/target_traits.h"
#include "ir/tir.h"

namespace relax {

class LegalizeContext;
using LegalizeFn = std::function<std::optional<Expr>(LegalizeContext& ctx, const CallNode& call)>;

class LegalizerRegistry {
 public:
  // Registers the legaliser of `op`; an op registered twice is an Error.
  void add(const std::string& op, LegalizeFn fn);
  const LegalizeFn* find(const std::string& op) const;  // nullptr when none
  std::vector<std::string> ops() const;                 // sorted

  // Every family, registered once (register_all_legalizers).
  static const LegalizerRegistry& global();

 private:
  std::map<std::string, LegalizeFn> fns_;
};

// The families, one file each, listed once in legalize.cc.
void register_all_legalizers(LegalizerRegistry& reg);
void register_elementwise_legalizers(LegalizerRegistry& reg);  // elementwise.cc (+ math.cc ops)
void register_reduce_legalizers(LegalizerRegistry& reg);       // reduce.cc
void register_matmul_legalizers(LegalizerRegistry& reg);       // matmul.cc
void register_manipulate_legalizers(LegalizerRegistry& reg);   // manipulate.cc
void register_index_legalizers(LegalizerRegistry& reg);        // index.cc (+ col2im, reverse_sequence)
void register_scan_sort_legalizers(LegalizerRegistry& reg);    // scan_sort.cc (cumsum, cumprod, hardmax)
void register_linalg_legalizers(LegalizerRegistry& reg);       // linalg.cc (einsum, det)
void register_signal_legalizers(LegalizerRegistry& reg);       // signal.cc (dft, stft, window, mel)
void register_random_legalizers(LegalizerRegistry& reg);       // random.cc
void register_attention_legalizers(LegalizerRegistry& reg);    // attention.cc
void register_dynamic_legalizers(LegalizerRegistry& reg);      // dynamic.cc (call_builtin)
void register_nn_legalizers(LegalizerRegistry& reg);           // nn.cc (convolutions)
void register_pool_legalizers(LegalizerRegistry& reg);         // pool.cc
void register_image_legalizers(LegalizerRegistry& reg);        // image.cc
void register_quant_legalizers(LegalizerRegistry& reg);        // quant.cc
void register_recurrent_legalizers(LegalizerRegistry& reg);    // recurrent.cc (rnn, gru, lstm)

// What a legaliser sees besides the call: the module being built, the
// analyser, and a place for bindings that must come before the call.
class LegalizeContext {
 public:
  LegalizeContext(IRModule& mod, Analyzer& ana);

  IRModule& module() { return mod_; }
  Analyzer& analyzer() { return ana_; }
  // The target's traits (ir/target_traits.h), as the module records them.
  const TargetTraits& traits() const { return traits_; }
  // Whether ops may become calls of the runtime's host kernels (BLAS, the
  // runtime's GEMM, direct convolutions) and programs take host forms: a
  // host target's trait host_kernels. A GPU target's kernels are all
  // generated.
  bool libraries() const { return traits_.host_kernels; }
  // The device library large matmuls may go to ("cublas"; empty: none):
  // the trait matmul, absent with relax-build --no-cublas.
  const std::string& matmul_library() const { return traits_.matmul_library; }
  // Whether the target is a GPU: legalisers then prefer forms with one
  // output element per iteration over in-place row nests, which the GPU
  // schedules spread over threads and tile (backends/gpu/schedule.h).
  bool gpu() const { return traits_.gpu; }
  // Whether gathers and scatters check their indices at run time
  // (ProgramBuilder::check_indices): unless the module's attribute
  // `index_checks` is "0" (relax-build --no-index-checks).
  bool index_checks() const;

  // Adds `p` to the module under a fresh name built from p->name ("add",
  // "add_1", ...) unless a program with the same text is already there;
  // returns the GlobalVar (@name) of the program to call.
  Expr add_program(const tir::Program& p);

  // `call_tir(prog, (inputs...)[, shape(sym_args...)], out=out)` with its
  // struct info set (`out`).
  Expr call_tir(const Expr& prog, std::vector<Expr> inputs, const StructInfo& out,
                const std::vector<SymExpr>& sym_args = {});

  // `call_pure_builtin("name", (args...), out=out)` with its struct info set:
  // a runtime builtin whose result depends only on its arguments (the
  // data-dependent ops, shape functions), so it may sit in a dataflow block.
  Expr call_pure_builtin(const std::string& name, std::vector<Expr> args, const StructInfo& out);

  // Bindings placed before the call being legalised; they are dropped when
  // its legaliser returns nullopt. Each returns the new variable (a dataflow
  // variable inside a dataflow block).
  Var emit(const Expr& value, const std::string& hint);
  Var emit_match_cast(const Expr& value, const StructInfo& si, const std::string& hint);

  // `e` with a full shape: `e` itself, or a match_cast of it to fresh graph
  // variables (hint_d0, hint_d1, ...). nullopt for an unknown rank.
  std::optional<Expr> bind_tensor(const Expr& e, const std::string& hint = "t");
  // The values of a shape argument: a ShapeExpr's, the struct info's, or
  // fresh graph variables bound by a match_cast. nullopt for an unknown rank.
  std::optional<std::vector<SymExpr>> bind_shape(const Expr& e, const std::string& hint = "s");
  // The fields of a tuple-valued expression: a Tuple's fields, or
  // TupleGetItem bindings. nullopt when it is not a tuple.
  std::optional<std::vector<Expr>> tuple_fields(const Expr& e, const std::string& hint = "t");

  // Checks at run time that tensor operands (scalars are skipped) broadcast
  // to `dims`, where the struct info alone does not prove it: a dim that
  // is neither 1 nor provably the result's (ops::broadcast_dim chose it by
  // order). Emits relax.broadcast_shape of the operands' shapes (shape
  // values: no tensor is read, fusion is untouched) and a match_cast of
  // it to `dims`, named after the call's variable, so that a bad input
  // stops with the node's name instead of reading out of bounds.
  void check_broadcast(const std::vector<Expr>& operands, const std::vector<SymExpr>& dims);

  // Used by the pass around each legaliser call; `name` is the variable
  // the call is bound to.
  void begin_call(bool in_dataflow, std::string name);
  // The variable the call being legalised is bound to (for run-time messages).
  const std::string& call_name() const { return name_; }
  // Leaves the call as it is (a legaliser returns this), saying why: the
  // pass prints the reason under relax-build --explain legalize.
  std::nullopt_t decline(std::string why) {
    declined_ = std::move(why);
    return std::nullopt;
  }
  const std::string& declined() const { return declined_; }
  std::vector<Binding> take_pending();

 private:
  IRModule& mod_;
  Analyzer& ana_;
  TargetTraits traits_;
  bool in_dataflow_ = false;
  std::string name_, declined_;
  std::vector<Binding> pending_;
  std::unordered_map<std::string, std::string> by_text_;  // printed program (no name) -> its name
  int fresh_ = 0;
};

// Builds one tensor program by the buffer-dim convention of
// docs/runtime_abi.md: a graph dim that is a constant or a plain variable is
// kept; a compound one (`p + s`) becomes a fresh program variable (d0, d1,
// ...), the same one wherever that dim appears. Variables that no buffer dim
// binds become sym_params, passed by the call's shape(...) argument.
class ProgramBuilder {
 public:
  ProgramBuilder(LegalizeContext& ctx, std::string name_hint);
  // A program over `call`'s operands and result, which arg() and result()
  // bind by the program's names, so that a legaliser opens as its op's
  // signature:
  //   ProgramBuilder pb(ctx, call, "conv");
  //   Buffer x = pb.arg(0, "x"), w = pb.arg(1, "w"), y = pb.result("y");
  //   if (!pb.known()) return pb.unknown();
  ProgramBuilder(LegalizeContext& ctx, const CallNode& call, std::string name_hint);

  // input(call.args[k], name); nullptr when the call has no operand k (an
  // optional one left out).
  tir::Buffer arg(size_t k, const std::string& name);
  // output(call.sinfo, name).
  tir::Buffer result(const std::string& name);
  // Whether every operand and result arg() and result() were asked for has
  // a known shape; unknown() declines the call naming those that do not
  // (or, when all did, saying an operand is not known).
  bool known() const { return unknown_.empty(); }
  std::nullopt_t unknown();

  // An input buffer for graph value `arg` (a tensor, or a Prim scalar as a
  // rank-0 buffer is NOT allowed: use scalar()); nullptr when its shape is
  // unknown (after trying ctx.bind_tensor). The argument is remembered as
  // the call's next input.
  tir::Buffer input(const Expr& arg, const std::string& name);
  // An output buffer for a tensor struct info with a shape; nullptr otherwise.
  tir::Buffer output(const StructInfo& si, const std::string& name);

  // The program-level counterpart of a graph-level symbolic value.
  SymExpr sym(const SymExpr& graph_value);
  // A Prim scalar operand as an immediate (constant) or a sym_param (an
  // integer SymExpr) of `dtype`; nullopt when its value is unknown.
  std::optional<tir::TExpr> scalar(const Expr& arg, DataType dtype);
  // A graph dim mapped by the convention (what input/output use).
  SymExpr dim(const SymExpr& graph_dim);

  // Checks the indices `indices` (this program's input buffer; negative
  // ones count from the end) into `data` (another input) before the
  // program uses them: every element for axis axes[0], or, with several
  // axes, the element at position k of the indices' last dim for axes[k]
  // (GatherND's tuples); each axis's size is data's. The check is a loop
  // nest that finish() puts ahead of the body, the program's prelude (its
  // attribute "prelude" counts them; op_pattern.h split_prelude): fusion
  // reads the pattern of the rest, so a gather still fuses and inlines as a
  // plain compute, and its check goes with it into the fused kernel. An
  // index out of range sets this call's status (an extra input, from
  // relax.kernel_status, named after `op` and the call's variable), and the
  // run fails naming the node, the index and the axis when its kernels have
  // finished (docs/runtime_abi.md). The program must still keep every
  // access in bounds (clamp or skip): kernels run on before the VM looks.
  // False when the indices' last dim does not match several axes.
  // `indices` null: the one index `scalar` (a Prim operand, one axis); a
  // constant one is not checked (the importer refuses one out of range).
  bool check_indices(const tir::Buffer& data, const tir::Buffer& indices, const std::string& op,
                     const std::vector<int64_t>& axes, const tir::TExpr& scalar = nullptr);

  // Finishes the program, adds it to the module and returns the call_tir.
  // The call's out= is the outputs' struct info (a tuple for several).
  // `attrs`: the program's (what later passes may read of it).
  Expr finish(tir::Stmt body, const std::string& name_hint = "", Attrs attrs = {});

  LegalizeContext& ctx() { return ctx_; }

 private:
  LegalizeContext& ctx_;
  const CallNode* call_ = nullptr;
  std::string name_;
  std::vector<std::string> unknown_;  // what arg() and result() could not bind
  std::vector<tir::Buffer> inputs_, outputs_;
  std::vector<tir::Stmt> prelude_;  // check_indices' nests, run before the body
  std::vector<Expr> args_;
  std::vector<StructInfo> out_sinfo_;
  SymMap<SymExpr> dims_;             // graph dim -> program dim
  std::vector<SymExpr> bound_;       // program variables bound by buffer dims
  std::vector<SymExpr> sym_params_;  // program side
  std::vector<SymExpr> sym_args_;    // graph side
  SymMap<SymExpr> sym_map_;          // graph value -> sym_param var
  int fresh_dims_ = 0;
};

// The bytes of a K x N 8-bit weight packed for the runtime's integer
// product (runtime/qgemm.h qgemm_packed_b_size, which checks it): panels
// of 16 columns by K rounded up to 4, then two i32 per column.
inline int64_t qgemm_packed_b_bytes(int64_t K, int64_t N) {
  return (N + 15) / 16 * ((K + 3) / 4) * 64 + (N + 15) / 16 * 16 * 8;
}

// The floats of a K x N f32 weight packed for the runtime's product
// (runtime/gemm.h gemm_packed_b_size, which checks it): K rows of its
// columns rounded up to panels of 32.
inline int64_t gemm_packed_b_floats(int64_t K, int64_t N) { return K * ((N + 31) / 32 * 32); }

}  // namespace relax
