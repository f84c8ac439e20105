// Linear algebra: einsum and det.
#include <algorithm>
#include <cctype>
#include <map>

#include "ir/ops/common.h"

namespace relax {
namespace {

using namespace ops;

// ---- einsum -------------------------------------------------------------------------

// One side of an equation: its index letters, with the position among them
// where "..." stands (-1: none).
struct EinsumTerm {
  std::string letters;
  int ellipsis = -1;
};

EinsumTerm parse_term(const std::string& op, const std::string& s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      t.letters += c;
    } else if (c == '.' && s.compare(i, 3, "...") == 0 && t.ellipsis < 0) {
      t.ellipsis = int(t.letters.size());
      i += 2;
    } else {
      fail(op, ": bad subscripts '", s, "'");
    }
  }
  return t;
}

struct EinsumEquation {
  std::vector<EinsumTerm> inputs;
  EinsumTerm output;
};

// Parses "ij,jk->ik"; without "->" the output is numpy's implicit one: the
// ellipsis dims, then the letters used exactly once, in ASCII order.
EinsumEquation parse_einsum(const std::string& op, const std::string& equation) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  EinsumEquation out;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    out.inputs.push_back(parse_term(op, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    out.output = parse_term(op, eq.substr(arrow + 2));
    for (size_t i = 0; i < out.output.letters.size(); ++i) {
      char c = out.output.letters[i];
      if (out.output.letters.find(c, i + 1) != std::string::npos) fail(op, ": output index '", c, "' repeats");
      bool used = std::any_of(out.inputs.begin(), out.inputs.end(),
                              [&](const EinsumTerm& t) { return t.letters.find(c) != std::string::npos; });
      if (!used) fail(op, ": output index '", c, "' appears in no input");
    }
    return out;
  }
  std::map<char, int> count;
  bool ellipsis = false;
  for (const EinsumTerm& t : out.inputs) {
    for (char c : t.letters) ++count[c];
    ellipsis = ellipsis || t.ellipsis >= 0;
  }
  if (ellipsis) out.output.ellipsis = 0;
  for (auto [c, n] : count)  // std::map iterates in ASCII order
    if (n == 1) out.output.letters += c;
  return out;
}

// Unifies the sizes one index letter takes in different places: equal, or
// one of them 1 (broadcast). Nullopt when it cannot be proven.
std::optional<SymExpr> unify_index(const std::string& op, char c, const SymExpr& a, const SymExpr& b,
                                   const Analyzer& ana) {
  if (a == b || ana.can_prove_equal(a, b)) return a;
  if (a.is_const(1)) return b;
  if (b.is_const(1)) return a;
  if (ana.can_prove_not_equal(a, b) && ana.can_prove_not_equal(a, 1) && ana.can_prove_not_equal(b, 1))
    fail(op, ": index '", c, "' has sizes ", a, " and ", b);
  return std::nullopt;
}

StructInfo infer_einsum(const CallNode& call, const InferContext& ctx) {
  std::string equation = attrs_of(call).get_string("subscripts");
  const std::string& op = op_name(call);
  std::vector<StructInfo> fields = tuple_arg(call, 0);
  EinsumEquation eq = parse_einsum(op, equation);
  if (eq.inputs.size() != fields.size())
    fail(op, ": '", equation, "' names ", eq.inputs.size(), " operands but ", fields.size(), " are given");

  DataType dtype;
  bool all_known = true;  // every operand's dims are known
  int ellipsis_ndim = 0;  // the broadcast rank of the "..." dims; -1 unknown
  TensorInfo ellipsis_dims{DataType(), 0, Dims{}};
  std::map<char, std::optional<SymExpr>> sizes;
  for (size_t i = 0; i < fields.size(); ++i) {
    TensorInfo t = tensor_info(op, fields[i], cat("operand ", i), false);
    dtype = i == 0 ? t.dtype : common_dtype(op, dtype, t.dtype);
    const EinsumTerm& term = eq.inputs[i];
    int nletters = int(term.letters.size());
    if (!t.unknown_rank()) {
      if (term.ellipsis < 0 && t.ndim != nletters)
        fail(op, ": operand ", i, " has rank ", t.ndim, " but '", equation, "' gives it ", nletters, " indices");
      if (term.ellipsis >= 0 && t.ndim < nletters)
        fail(op, ": operand ", i, " has rank ", t.ndim, ", fewer than its ", nletters, " indices");
    }
    if (!t.shape) {
      all_known = false;
      if (term.ellipsis >= 0)
        ellipsis_ndim = t.unknown_rank() || ellipsis_ndim < 0 ? -1 : std::max(ellipsis_ndim, t.ndim - nletters);
      continue;
    }
    const Dims& d = *t.shape;
    int nell = term.ellipsis < 0 ? 0 : t.ndim - nletters;
    for (int j = 0; j < nletters; ++j) {
      char c = term.letters[j];
      const SymExpr& dim = d[j < term.ellipsis || term.ellipsis < 0 ? j : j + nell];
      auto it = sizes.find(c);
      if (it == sizes.end()) {
        sizes[c] = dim;
      } else if (it->second) {
        it->second = unify_index(op, c, *it->second, dim, ctx.ana);
      }
    }
    if (term.ellipsis >= 0) {
      TensorInfo e{DataType(), nell, Dims(d.begin() + term.ellipsis, d.begin() + term.ellipsis + nell)};
      if (ellipsis_ndim >= 0) ellipsis_ndim = std::max(ellipsis_ndim, nell);
      if (ellipsis_dims.shape) ellipsis_dims = broadcast(op, ellipsis_dims, e, ctx.ana);
    }
  }

  const EinsumTerm& outt = eq.output;
  int out_ell = outt.ellipsis < 0 ? 0 : ellipsis_ndim;
  if (outt.ellipsis < 0 && ellipsis_ndim > 0)
    fail(op, ": '", equation, "' drops the ", ellipsis_ndim, " dims of '...' from the output");
  if (out_ell < 0) return tensor_si_ndim(dtype, -1);
  int ndim = int(outt.letters.size()) + out_ell;
  if (!all_known || !ellipsis_dims.shape) return tensor_si_ndim(dtype, ndim);
  Dims out;
  for (int j = 0; j <= int(outt.letters.size()); ++j) {
    if (j == outt.ellipsis) out.insert(out.end(), ellipsis_dims.shape->begin(), ellipsis_dims.shape->end());
    if (j == int(outt.letters.size())) break;
    const std::optional<SymExpr>& s = sizes[outt.letters[j]];
    if (!s) return tensor_si_ndim(dtype, ndim);
    out.push_back(*s);
  }
  return tensor_si(dtype, std::move(out));
}

// ---- det ------------------------------------------------------------------------------

StructInfo infer_det(const CallNode& call, const InferContext& ctx) {
  attrs_of(call);
  const std::string& op = op_name(call);
  TensorInfo x = tensor_arg(call, 0);
  require_float(op, x.dtype, "the operand");
  if (x.unknown_rank()) return tensor_si_ndim(x.dtype, -1);
  if (x.ndim < 2) fail(op, ": needs a tensor of rank >= 2, got rank ", x.ndim);
  if (!x.shape) return tensor_si_ndim(x.dtype, x.ndim - 2);
  const Dims& d = *x.shape;
  if (ctx.ana.can_prove_not_equal(d[x.ndim - 1], d[x.ndim - 2]))
    fail(op, ": the matrices are ", d[x.ndim - 2], " x ", d[x.ndim - 1], ", not square");
  return tensor_si(x.dtype, Dims(d.begin(), d.end() - 2));
}

}  // namespace

void register_linalg_ops(OpRegistry& reg) {
  using T = AttrType;
  reg.add("einsum")
      .doc(
          "einsum((x0, x1, ...), subscripts=s): Einstein summation as numpy.einsum: each operand's dims are "
          "named by the letters of its term of s ('...' stands for broadcast leading dims); the result has "
          "the dims named after '->' (without '->': the '...' dims, then the letters used once, in ASCII "
          "order) and sums the product of the operands over every other letter. A letter repeated within "
          "a term takes the diagonal.")
      .args(1)
      .attr("subscripts", T::String)
      .infer(infer_einsum);
  reg.add("det")
      .doc("det(x): the determinant of each square matrix in x's last two dims; the result has x's batch dims.")
      .args(1)
      .infer(infer_det);
}

}  // namespace relax
