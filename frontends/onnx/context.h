// What an ONNX op converter sees and uses.
//
// A converter turns one NodeProto into graph IR: it reads its inputs as
// Values, emits bindings through the Context, and returns one Value per
// node output. Converters are registered per (domain, op type) in
// frontends/onnx/converters.cc, which lists every family once.
//
// Shape computations are evaluated at import time: a Value whose elements
// are known symbolically (the output of Shape, Size, a constant int
// tensor, arithmetic on those, ...) carries them in `sym`, and converters of
// Reshape, Expand, ConstantOfShape, Range, Tile, Slice, ... read them to
// produce symbolic shapes instead of run-time ones. Such a Value gets a
// graph expression only when something needs it as a tensor.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontends/onnx/host_tensor.h"
#include "ir/analyzer.h"
#include "ir/error.h"
#include "ir/expr.h"

namespace relax::onnx_fe {

struct Value {
  // The graph expression (a Var, a Constant, or null while only `sym` or
  // `data` is known; null with neither for an omitted optional input).
  Expr expr;
  // Known concrete data (initializers, Constant nodes, folded results).
  std::shared_ptr<const HostTensor> data;
  // For integer tensors of rank 0 or 1: the elements as symbolic integers.
  std::optional<std::vector<SymExpr>> sym;
  // With `sym`: the dtype and shape of the tensor it stands for, its
  // elements in row-major order. Rank 0 or 1 mostly; rank 2 or more for a
  // pads vector reshaped to pairs, as torch.onnx writes F.pad.
  DataType sym_dtype = DataType::i64();
  std::vector<int64_t> sym_shape;
  // An ONNX sequence whose elements are known at import time
  // (SequenceConstruct, a split into known parts, ...): they keep their
  // shapes and symbolic values. A sequence known only at run time is an
  // `expr` of List struct info (convert_sequence.cc).
  std::shared_ptr<const std::vector<Value>> seq;

  bool absent() const { return !expr && !data && !sym && !seq; }
};

// Builds a symbolic Value: the elements `v` of a rank-1 (or, with scalar,
// rank-0) integer tensor.
Value sym_value(std::vector<SymExpr> v, bool scalar = false, DataType dtype = DataType::i64());

// An integer tensor of any rank whose elements are known symbolically.
struct SymTensor {
  std::vector<int64_t> shape;
  std::vector<SymExpr> elems;  // row-major
  DataType dtype;
};
// The Value of `t` (a plain symbolic vector or scalar when its rank is 0 or 1).
Value sym_tensor_value(SymTensor t);
Value expr_value(Expr e);

class Importer;

class Context {
 public:
  Context(Importer& imp, const onnx::NodeProto& node, int opset, std::vector<Value> inputs);

  // ---- The node -------------------------------------------------------------
  const onnx::NodeProto& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type(); }
  // The opset version of the node's domain in this model.
  int opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return size_t(node_.output_size()); }
  // Whether output i is wanted (present and named).
  bool output_used(size_t i) const;
  // Output i's name, or "" when the node has no such output (a name hint).
  std::string output_name(size_t i) const { return output_used(i) ? node_.output(int(i)) : std::string(); }
  // Input i; absent (Value::absent()) when omitted or out of range.
  const Value& input(size_t i) const;
  bool has_input(size_t i) const { return !input(i).absent(); }

  // ---- Attributes (defaults when absent; a wrong type is an error) ---------
  bool has_attr(const std::string& name) const;
  int64_t attr_int(const std::string& name, int64_t def = 0) const;
  float attr_float(const std::string& name, float def = 0) const;
  std::string attr_string(const std::string& name, const std::string& def = "") const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> def = {}) const;
  std::vector<std::string> attr_strings(const std::string& name) const;
  std::optional<HostTensor> attr_tensor(const std::string& name) const;
  const onnx::GraphProto* attr_graph(const std::string& name) const;
  const onnx::AttributeProto* attr(const std::string& name) const;

  // ---- Reading inputs ----------------------------------------------------------
  // Input i as a graph expression, materializing a symbolic or constant value
  // (an error when the input is absent).
  Expr expr(size_t i);
  Expr expr_of(const Value& v);
  // The struct info of input i (materializes only when needed).
  StructInfo sinfo(size_t i);
  // Input i as a tensor: dtype (Void unknown), rank (-1 unknown), dims.
  DataType dtype(size_t i);
  int ndim(size_t i);  // -1: unknown rank
  std::optional<std::vector<SymExpr>> shape(size_t i);
  // Input i's dims where the converter cannot do without them: its shape,
  // or, where only its rank is known (or `rank` gives it: the op fixes it),
  // fresh variables bound at run time by a match_cast of the input, which
  // then stands for input i, here and in the nodes after this one (each
  // Shape of one value reads the same dims). No gap in shape deduction stops
  // an import where the rank is known; an unknown rank is unsupported. A
  // known rank other than `rank` (when given) is an error.
  std::vector<SymExpr> bound_shape(size_t i, int rank = -1);
  // Elements of input i when known symbolically (from `sym`, or from small
  // integer constant data); nullopt otherwise.
  std::optional<std::vector<SymExpr>> sym_values(size_t i) const;
  // Input i as a symbolic tensor of any rank (symbolic, or small integer
  // constant data); nullopt otherwise.
  std::optional<SymTensor> sym_tensor(size_t i) const;
  // Concrete data of input i when known.
  const HostTensor* data(size_t i) const;
  std::optional<std::vector<int64_t>> const_ints(size_t i) const;
  std::optional<std::vector<double>> const_floats(size_t i) const;

  // ---- Emitting IR ---------------------------------------------------------------
  // Binds `value` to a fresh variable named after the node output (or `hint`),
  // deducing its struct info; returns the variable.
  Expr emit(Expr value, const std::string& hint = "");
  // emit(op(args..., attrs)).
  Expr emit_op(const std::string& op, std::vector<Expr> args, Attrs attrs = {});
  // Binds `value` with match_cast to `si` (fresh symbolic variables in `si`
  // become defined): how data-dependent shapes enter the IR.
  Expr emit_match_cast(Expr value, StructInfo si, const std::string& hint = "");
  // A weight constant holding `t`, stored with the model's weights.
  Expr constant(HostTensor t, const std::string& hint = "");
  // A scalar literal of `dtype` as a rank-0 tensor constant.
  Expr scalar(DataType dtype, double v);
  // A fresh symbolic variable (for data-dependent dims).
  SymExpr fresh_sym(const std::string& hint);
  // Imports a subgraph (If/Loop/Scan bodies) as a function whose parameters
  // are `params` (named after the graph's inputs); values of enclosing
  // graphs are captured. Returns the function expression.
  Expr import_subgraph(const onnx::GraphProto& g, const std::vector<StructInfo>& params);
  // Converts the nodes of `g`, a graph this converter built (the expansion
  // of a function op), in the current scope with its inputs bound to this
  // node's; returns the values of its outputs. `g` names must not collide
  // with the enclosing graph's; prefix them with the node's output.
  std::vector<Value> expand(const onnx::GraphProto& g);
  // Records something the user should know about the import (a branch
  // left to fail at run time); relax-import and relax-build print it.
  void note(const std::string& text);

  const Analyzer& ana() const;

  // ---- Errors ------------------------------------------------------------------------
  // Raises an Error; the importer prefixes the node's name, op and opset.
  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const;
  // The op (or this form of it: an attribute value, a dtype) is not supported:
  // reported like an unsupported op (exit code 2), with `what`.
  [[noreturn]] void unsupported(const std::string& what) const;

 private:
  Importer& imp_;
  const onnx::NodeProto& node_;
  int opset_;
  std::vector<Value> inputs_;
};

// Raised by Context::unsupported.
struct UnsupportedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
void Context::fail(const Args&... args) const {
  throw Error(cat(args...));
}

// A converter returns one Value per node output (trailing unused outputs
// may be left out).
using Converter = std::function<std::vector<Value>(Context& ctx)>;

struct ConverterInfo {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int min_opset;  // the oldest opset version handled
  Converter fn;
};

class ConverterRegistry {
 public:
  void add(const std::string& op_type, int min_opset, Converter fn) { add("", op_type, min_opset, std::move(fn)); }
  void add(const std::string& domain, const std::string& op_type, int min_opset, Converter fn);
  const ConverterInfo* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const ConverterInfo*> all() const;

 private:
  std::map<std::pair<std::string, std::string>, ConverterInfo> table_;
};

// The registry with every family registered (built once).
const ConverterRegistry& converters();

// The families, each in its own file, listed once in converters.cc:
//   elementwise  arithmetic, comparisons, activations, Cast
//   shape        Shape, Reshape, Slice, Concat, ... (import-time shape folding)
//   tensor       Gather/Scatter, Expand, Tile, Pad, generators, NonZero, Unique
//   nn           Conv, pooling, normalizations, sampling, losses
//   resize       Resize, Upsample
//   attention    Attention, RotaryEmbedding, LinearAttention, FlexAttention
//   reduce       reductions, softmax, ArgMax, TopK, CumSum, Einsum, DFT
//   control      If, Loop, Scan
//   quant        QuantizeLinear, DequantizeLinear, QLinear*, *Integer
//   rnn          LSTM, GRU, RNN
//   ml           ai.onnx.ml: Binarizer, ArrayFeatureExtractor, LabelEncoder,
//                TreeEnsemble
//   contrib      com.microsoft: Gelu variants, FusedMatMul, layer norms, Attention
//   random       random generators, Dropout, Optional on plain tensors
//   sequence     SequenceConstruct/At/Insert/Erase/Length/Empty,
//                SplitToSequence, ConcatFromSequence
void register_elementwise_converters(ConverterRegistry& r);
void register_shape_converters(ConverterRegistry& r);
void register_tensor_converters(ConverterRegistry& r);
void register_nn_converters(ConverterRegistry& r);
void register_resize_converters(ConverterRegistry& r);
void register_attention_converters(ConverterRegistry& r);
void register_reduce_converters(ConverterRegistry& r);
void register_control_converters(ConverterRegistry& r);
void register_quant_converters(ConverterRegistry& r);
void register_rnn_converters(ConverterRegistry& r);
void register_ml_converters(ConverterRegistry& r);
void register_contrib_converters(ConverterRegistry& r);
void register_random_converters(ConverterRegistry& r);
void register_sequence_converters(ConverterRegistry& r);

}  // namespace relax::onnx_fe
