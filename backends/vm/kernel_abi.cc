#include "backends/vm/kernel_abi.h"

#include "runtime/bytecode.h"

namespace relax {

namespace P = rt::ShapePattern;

std::vector<ShapeSlot> kernel_shape_slots(const tir::ProgramNode& p) {
  std::vector<ShapeSlot> slots;
  SymMap<bool> bound;
  for (const auto* list : {&p.inputs, &p.outputs})
    for (const tir::Buffer& b : *list)
      for (const SymExpr& d : b->shape) {
        bool binds = d.is_var() && !bound.count(d);
        if (binds) bound[d] = true;
        slots.push_back({d, binds ? ShapeSlot::Role::Bind : ShapeSlot::Role::Check});
      }
  for (const SymExpr& s : p.sym_params) {
    bool binds = !bound.count(s);
    if (binds) bound[s] = true;
    slots.push_back({s, binds ? ShapeSlot::Role::Bind : ShapeSlot::Role::Unused});
  }
  return slots;
}

SymMap<int64_t> shape_arg_slots(const tir::ProgramNode& p, int64_t* num_slots) {
  std::vector<ShapeSlot> slots = kernel_shape_slots(p);
  SymMap<int64_t> slot;
  for (size_t k = 0; k < slots.size(); ++k)
    if (slots[k].role == ShapeSlot::Role::Bind) slot[slots[k].value] = int64_t(k);
  if (num_slots) *num_slots = int64_t(slots.size());
  return slot;
}

void sym_to_code(const SymExpr& e, const std::function<int64_t(const SymExpr&)>& slot, std::vector<int64_t>& code) {
  const SymNode& n = *e.get();
  auto binop = [&](int64_t op) {
    sym_to_code(n.operands[0], slot, code);
    sym_to_code(n.operands[1], slot, code);
    code.push_back(op);
  };
  switch (n.kind) {
    case SymKind::Const:
      code.insert(code.end(), {P::kPushConst, n.value});
      break;
    case SymKind::Var:
      code.insert(code.end(), {P::kPushSlot, slot(e)});
      break;
    case SymKind::Sum: {
      code.insert(code.end(), {P::kPushConst, n.constant});
      for (const SymTerm& t : n.terms) {
        sym_to_code(t.term, slot, code);
        if (t.coeff != 1) code.insert(code.end(), {P::kPushConst, t.coeff, P::kMul});
        code.push_back(P::kAdd);
      }
      break;
    }
    case SymKind::Mul: {
      sym_to_code(n.operands[0], slot, code);
      for (size_t i = 1; i < n.operands.size(); ++i) {
        sym_to_code(n.operands[i], slot, code);
        code.push_back(P::kMul);
      }
      break;
    }
    case SymKind::FloorDiv:
      binop(P::kFloorDiv);
      break;
    case SymKind::FloorMod:
      binop(P::kFloorMod);
      break;
    case SymKind::Min:
      binop(P::kMin);
      break;
    case SymKind::Max:
      binop(P::kMax);
      break;
  }
}

}  // namespace relax
