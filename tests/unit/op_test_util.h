// Helpers shared by the op-rule unit tests: operands with a given struct
// info, and the text (or error) a rule produces for a call.
#pragma once

#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"

namespace relax::testing {

// A variable holding a tensor of these dims.
inline Expr tensor(std::vector<SymExpr> dims, DataType dtype = DataType::f32()) {
  return make_var("x", tensor_si(dtype, std::move(dims)));
}

// The struct info the op's rule deduces for the call, in IR text.
inline std::string infer(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  return print_sinfo(c->op()->infer(*c, InferContext{ana, nullptr}));
}

// The tensor the rule deduces, shortly: "(n, 8, h * 2), f32", or
// "ndim=4, f32" without a shape.
inline std::string infer_tensor(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  Expr call = make_op_call(op, std::move(args), std::move(attrs));
  const auto* c = as<CallNode>(call);
  Analyzer ana;
  StructInfo si = c->op()->infer(*c, InferContext{ana, nullptr});
  const auto* t = as<TensorSI>(si);
  if (!t) return "not a tensor: " + print_sinfo(si);
  std::string s;
  if (t->shape) {
    s = "(";
    for (size_t i = 0; i < t->shape->size(); ++i) s += (i ? ", " : "") + to_string((*t->shape)[i]);
    s += ")";
  } else {
    s = "ndim=" + std::to_string(t->ndim);
  }
  return s + ", " + t->dtype.str();
}

// The message of the Error the rule raises, or "" when none.
inline std::string infer_error(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  try {
    infer(op, std::move(args), std::move(attrs));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace relax::testing
