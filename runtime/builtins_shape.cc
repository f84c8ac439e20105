// Shape builtins the legalisers call when a result's dims are known only at
// run time (passes/legalize/elementwise.cc):
//
//   relax.broadcast_shape(operands... [, "label"])
//       -> shape: the numpy broadcast of the operands' shapes (a tensor's
//          shape, a shape value itself, a scalar as rank 0); an rt::Error
//          naming the dims (and the label: the value the legaliser checks,
//          named after its ONNX node) when two of them differ and neither
//          is 1
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

std::vector<int64_t> operand_shape(const Value& v, size_t k) {
  if (v.is_tensor()) return v.tensor().shape();
  if (v.is_shape()) return v.shape();
  if (v.is_int() || std::holds_alternative<double>(v.v)) return {};
  rt_fail("broadcast_shape: operand ", k, " is a ", v.kind_name(), ", expected a tensor, a shape or a scalar");
}

void broadcast_shape(BuiltinCall& c) {
  std::vector<std::vector<int64_t>> shapes;
  size_t rank = 0, n = c.num_args;
  std::string label;
  if (n > 0 && std::holds_alternative<std::string>(c.arg(n - 1).v)) label = c.arg(--n).str();
  for (size_t k = 0; k < n; ++k) {
    shapes.push_back(operand_shape(c.arg(k), k));
    rank = std::max(rank, shapes.back().size());
  }
  std::vector<int64_t> out(rank, 1);
  std::vector<size_t> from(rank, 0);  // the operand that set out[i] (when not 1)
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::vector<int64_t>& s = shapes[k];
    for (size_t j = 0; j < s.size(); ++j) {
      size_t i = rank - s.size() + j;
      int64_t d = s[j];
      if (d == 1 || d == out[i]) continue;
      if (out[i] != 1)
        rt_fail("broadcast_shape", label.empty() ? "" : " of '" + label + "'", ": dim ", i, " of the result: operand ", from[i], " has ", out[i], " and operand ", k,
                " has ", d, ", which do not broadcast (shapes ", shape_str(shapes[from[i]]), " and ", shape_str(s),
                ")");
      out[i] = d;
      from[i] = k;
    }
  }
  c.out = make_shape(std::move(out));
}

}  // namespace

void register_shape_builtins() { register_builtin("relax.broadcast_shape", broadcast_shape, /*touches_data=*/false); }

}  // namespace relax::rt
