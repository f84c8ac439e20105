// Helpers shared by the struct-info rules of ir/ops/*.cc: reading operands
// and attributes, axis normalisation, dtype agreement and numpy
// broadcasting of symbolic shapes.
//
// Every helper that can fail raises an Error that starts with the op's name
// ("add: ..."), so a rule reads as a list of checks followed by the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/struct_info.h"

namespace relax {

// The op families, each defined in its own file and listed once in
// ir/ops/ops.cc (register_all_ops), which the registry calls lazily.
void register_all_ops(OpRegistry& reg);
void register_elementwise_ops(OpRegistry& reg);
void register_matmul_ops(OpRegistry& reg);
void register_manipulate_ops(OpRegistry& reg);
void register_reduce_ops(OpRegistry& reg);
void register_nn_ops(OpRegistry& reg);
void register_cross_level_ops(OpRegistry& reg);
void register_math_ops(OpRegistry& reg);       // further elementwise math (ir/ops/math.cc)
void register_index_ops(OpRegistry& reg);      // gather/scatter/one_hot/nonzero... (ir/ops/index.cc)
void register_image_ops(OpRegistry& reg);      // resize, grid sampling, roi_align, nms (ir/ops/image.cc)
void register_sequence_ops(OpRegistry& reg);   // topk, cumsum, cumprod, hardmax (ir/ops/scan_sort.cc)
void register_linalg_ops(OpRegistry& reg);     // einsum, det (ir/ops/linalg.cc)
void register_signal_ops(OpRegistry& reg);     // dft, stft, window, mel_weight_matrix (ir/ops/signal.cc)
void register_control_ops(OpRegistry& reg);    // loops, scans (ir/ops/control.cc)
void register_quant_ops(OpRegistry& reg);      // quantization, integer ops (ir/ops/quant.cc)
void register_recurrent_ops(OpRegistry& reg);  // rnn, gru, lstm (ir/ops/recurrent.cc)
void register_attention_ops(OpRegistry& reg);  // linear_attention (ir/ops/attention.cc)
void register_random_ops(OpRegistry& reg);     // random number generation (ir/ops/random.cc)
void register_list_ops(OpRegistry& reg);       // ONNX sequences: list_at, list_insert, ... (ir/ops/list.cc)

namespace ops {

using Dims = std::vector<SymExpr>;

// What a rule knows about a tensor operand (a Prim scalar reads as a rank-0
// tensor): dtype (Void: unknown), rank (-1: unknown) and dims when known.
struct TensorInfo {
  DataType dtype;
  int ndim = -1;
  std::optional<Dims> shape;
  bool is_prim = false;  // the operand was a Prim scalar
  bool unknown_rank() const { return ndim < 0; }
};

// The name of the op being called.
const std::string& op_name(const CallNode& call);
// The call's attributes checked against the op's declaration, defaults filled.
Attrs attrs_of(const CallNode& call);
// The struct info of argument i (tuples and shapes built without struct info
// are deduced from their fields).
StructInfo arg_sinfo(const CallNode& call, size_t i);
// Argument i as a tensor; an Error when it is not one (nor a Prim scalar,
// when allow_prim).
TensorInfo tensor_arg(const CallNode& call, size_t i, bool allow_prim = false);
TensorInfo tensor_info(const std::string& op, const StructInfo& si, const std::string& what, bool allow_prim);
// Argument i as a shape value: its dims, or only its rank (ndim -1: unknown).
struct ShapeInfo {
  int ndim = -1;
  std::optional<Dims> values;
};
ShapeInfo shape_arg(const CallNode& call, size_t i);
// Argument i as a tuple's field struct infos.
std::vector<StructInfo> tuple_arg(const CallNode& call, size_t i);

// Builds Tensor[(dims), dtype], Tensor[ndim=n, dtype] or Tensor[dtype].
StructInfo make_tensor(DataType dtype, int ndim, std::optional<Dims> shape);
inline StructInfo make_tensor(const TensorInfo& t) { return make_tensor(t.dtype, t.ndim, t.shape); }

// "Tensor", "Prim", ...: for error messages.
const char* kind_name(const StructInfo& si);

// Axis in [-ndim, ndim) -> [0, ndim); out of range is an Error.
int normalize_axis(const std::string& op, int64_t axis, int ndim);
// Each axis normalized; a repeated axis is an Error.
std::vector<int> normalize_axes(const std::string& op, const std::vector<int64_t>& axes, int ndim);

// The common dtype of two operands: an Error when both are known and differ,
// Void when either is unknown.
DataType common_dtype(const std::string& op, DataType a, DataType b);
// An 8-bit integer product's operand `name` (u8 or i8) and its zero point
// `zp_name` of the same dtype; unknown dtypes pass.
void check_8bit_operand(const std::string& op, const TensorInfo& v, const char* name, const TensorInfo& zp,
                        const char* zp_name);
// Errors unless `dtype` is unknown or satisfies the predicate.
void require_float(const std::string& op, DataType dtype, const std::string& what);
void require_bool(const std::string& op, DataType dtype, const std::string& what);
void require_integer(const std::string& op, DataType dtype, const std::string& what, bool allow_bool);

// Broadcasts one pair of dims: the common dim, nullopt when it cannot be
// proven, an Error when the dims provably differ and neither is 1. Where
// the dims are not provably equal but every valid broadcast of them gives
// the same dim (one cannot be 1, or one is at most the other), that dim;
// where one clamps (min/max, a slice of a fixed table) and the other does
// not, the plain one. The legaliser then checks at run time that the
// operands broadcast to it.
std::optional<SymExpr> broadcast_dim(const std::string& op, const SymExpr& a, const SymExpr& b, int axis,
                                     const Analyzer& ana);
// Numpy broadcasting of two operands' shapes (the result's dtype is left
// Void). Dims that cannot be proven make the result ndim-only.
TensorInfo broadcast(const std::string& op, const TensorInfo& a, const TensorInfo& b, const Analyzer& ana);

// A Syms attribute (check_op_attrs has already converted Ints to Syms).
std::vector<SymExpr> get_syms(const Attrs& attrs, const std::string& name);
// Errors when a dim of a requested shape is provably negative.
void check_dims_nonnegative(const std::string& op, const Dims& dims, const Analyzer& ana);

// The number of elements: the product of the dims.
SymExpr product(const Dims& dims);

// An Int-list attribute of spatial ops: empty -> `n` copies of `fill`, one
// value -> n copies of it, n values -> themselves; else an Error.
std::vector<int64_t> spatial_list(const std::string& op, const std::string& attr, std::vector<int64_t> v, int n,
                                  int64_t fill);

// Errors when `got` is provably not `want` ("OP: WHAT is GOT, expected WANT").
void check_dims_equal(const std::string& op, const SymExpr& got, const SymExpr& want, const std::string& what,
                      const Analyzer& ana);
// A Sym attribute (check_op_attrs has converted an Int to a Sym).
SymExpr get_sym(const Attrs& attrs, const std::string& name);
// Whether a Sym attribute holds the "default" marker -1.
bool is_unset(const SymExpr& s);
// Errors when `s` is provably negative (or, with positive, provably < 1).
void check_count(const std::string& op, const std::string& what, const SymExpr& s, const Analyzer& ana, bool positive);
// An optional scalar operand of `call` at `i` (rank 0, or rank 1 with one
// element); nothing when absent.
void check_scalar_arg(const CallNode& call, size_t i, const char* what, const Analyzer& ana);
// An optional axis operand at `i`: an integer scalar.
void check_axis_arg(const CallNode& call, size_t i, const Analyzer& ana);

}  // namespace ops
}  // namespace relax
