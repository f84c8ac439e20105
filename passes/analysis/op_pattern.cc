#include "passes/analysis/op_pattern.h"

#include <algorithm>

#include "ir/tir_functor.h"

namespace relax {

using namespace tir;

const char* op_pattern_name(OpPattern p) {
  switch (p) {
    case OpPattern::Elementwise:
      return "elementwise";
    case OpPattern::Broadcast:
      return "broadcast";
    case OpPattern::Injective:
      return "injective";
    case OpPattern::Reduction:
      return "reduction";
    case OpPattern::OutputFusable:
      return "output-fusable";
    case OpPattern::Opaque:
      return "opaque";
  }
  return "?";
}

bool ProgramPattern::inlinable() const {
  return !outputs.empty() && std::all_of(outputs.begin(), outputs.end(), [](const auto& d) { return d.has_value(); });
}

namespace {

bool contains(const std::vector<Buffer>& bs, const BufferNode* b) {
  return std::any_of(bs.begin(), bs.end(), [&](const Buffer& x) { return x.get() == b; });
}

// The statements of the body's top level.
std::vector<Stmt> top_level(const Stmt& body) {
  if (const auto* s = as<SeqNode>(body)) return s->stmts;
  return {body};
}

// A store nest writing an output and reading only inputs.
std::optional<std::pair<const BufferNode*, ComputeDef>> as_compute(const Program& p, const Stmt& s) {
  std::optional<StoreNest> n = as_store_nest(s);
  if (!n || !contains(p->outputs, n->store->buffer.get())) return std::nullopt;
  bool reads_only_inputs = true;
  visit_exprs(n->def.value, [&](const TExpr& e) {
    if (const auto* l = as<LoadNode>(e); l && !contains(p->inputs, l->buffer.get())) reads_only_inputs = false;
  });
  if (!reads_only_inputs) return std::nullopt;
  return std::make_pair(n->store->buffer.get(), n->def);
}

// How a compute def reads its inputs: elementwise, broadcast or injective.
OpPattern read_pattern(const ComputeDef& def, const std::vector<SymExpr>& out_shape) {
  OpPattern kind = OpPattern::Elementwise;
  visit_exprs(def.value, [&](const TExpr& e) {
    const auto* l = as<LoadNode>(e);
    if (!l) return;
    if (reads_at_identity(def, l->buffer.get(), out_shape)) return;
    // Broadcast: each index a distinct loop variable in increasing order, or 0.
    size_t next = 0;
    bool broadcast = true;
    for (const TExpr& i : l->indices) {
      const auto* s = as<SymNodeT>(i);
      if (!s) {
        broadcast = false;
        break;
      }
      if (s->value.is_const(0)) continue;
      auto it = std::find(def.vars.begin() + long(next), def.vars.end(), s->value);
      if (it == def.vars.end()) {
        broadcast = false;
        break;
      }
      next = size_t(it - def.vars.begin()) + 1;
    }
    kind = std::max(kind, broadcast ? OpPattern::Broadcast : OpPattern::Injective);
  });
  return kind;
}

// Whether `e` multiplies something read from one input by something read
// from another: the shape of a contraction's update.
bool is_product_of_inputs(const Program& p, const TExpr& e) {
  bool found = false;
  visit_exprs(e, [&](const TExpr& x) {
    const auto* b = as<BinaryNode>(x);
    if (!b || b->op != BinOp::Mul || found) return;
    std::vector<const BufferNode*> left, right;
    visit_exprs(b->a, [&](const TExpr& y) {
      if (const auto* l = as<LoadNode>(y); l && contains(p->inputs, l->buffer.get())) left.push_back(l->buffer.get());
    });
    visit_exprs(b->b, [&](const TExpr& y) {
      if (const auto* l = as<LoadNode>(y); l && contains(p->inputs, l->buffer.get())) right.push_back(l->buffer.get());
    });
    for (const BufferNode* l : left)
      for (const BufferNode* r : right)
        if (l != r) found = true;
  });
  return found;
}

}  // namespace

std::optional<StoreNest> as_store_nest(const Stmt& s) {
  std::vector<SymExpr> vars, extents;
  Stmt cur = s;
  while (const auto* f = as<ForNode>(cur)) {
    vars.push_back(f->var);
    extents.push_back(f->extent);
    cur = f->body;
  }
  const auto* st = as<StoreNode>(cur);
  if (!st || st->indices.size() != vars.size() || st->buffer->shape.size() != vars.size()) return std::nullopt;
  for (size_t i = 0; i < vars.size(); ++i) {
    const auto* idx = as<SymNodeT>(st->indices[i]);
    if (!idx || idx->value != vars[i] || extents[i] != st->buffer->shape[i]) return std::nullopt;
  }
  return StoreNest{st, ComputeDef{vars, st->value}};
}

bool reads_at_identity(const ComputeDef& def, const BufferNode* input, const std::vector<SymExpr>& out_shape) {
  if (input->shape != out_shape) return false;
  bool identity = true;
  visit_exprs(def.value, [&](const TExpr& e) {
    const auto* l = as<LoadNode>(e);
    if (!l || l->buffer.get() != input) return;
    if (l->indices.size() != def.vars.size()) {
      identity = false;
      return;
    }
    for (size_t i = 0; i < def.vars.size(); ++i) {
      const auto* s = as<SymNodeT>(l->indices[i]);
      if (!s || s->value != def.vars[i]) identity = false;
    }
  });
  return identity;
}

std::vector<std::string> program_ops(const Program& p) {
  if (const AttrValue* v = p->attrs.find("fused"))
    if (const auto* list = std::get_if<std::vector<std::string>>(v)) return *list;
  const std::string& name = p->name;
  size_t u = name.rfind('_');
  if (u == std::string::npos || u + 1 == name.size()) return {name};
  for (size_t i = u + 1; i < name.size(); ++i)
    if (!isdigit(static_cast<unsigned char>(name[i]))) return {name};
  return {name.substr(0, u)};
}

bool loads_at_symbolic_indices(const Program& p, const BufferNode* input) {
  bool ok = true;
  visit_exprs(p->body, [&](const TExpr& e) {
    if (const auto* l = as<LoadNode>(e); l && l->buffer.get() == input)
      for (const TExpr& i : l->indices)
        if (!as<SymNodeT>(i)) ok = false;
  });
  return ok;
}

PreludeSplit split_prelude(const Program& p) {
  int64_t n = p->attrs.get_int("prelude", 0);
  std::vector<Stmt> top = top_level(p->body);
  if (n <= 0 || size_t(n) >= top.size()) return {{}, p};
  // Each statement of the prelude writes inputs (and its own locals) only, and reads no output.
  auto own = [&](const Buffer& b) { return b->scope == Scope::Local || contains(p->inputs, b.get()); };
  for (size_t k = 0; k < size_t(n); ++k) {
    bool ok = true;
    visit_stmts(top[k], [&](const Stmt& s) {
      if (const auto* st = as<StoreNode>(s); st && !own(st->buffer)) ok = false;
    });
    visit_exprs(top[k], [&](const TExpr& e) {
      if (const auto* l = as<LoadNode>(e); l && !own(l->buffer)) ok = false;
    });
    if (!ok) return {{}, p};
  }
  Attrs attrs;
  for (const auto& [k, v] : p->attrs)
    if (k != "prelude") attrs.set(k, v);
  PreludeSplit out;
  out.prelude.assign(top.begin(), top.begin() + n);
  out.main = make_program(p->name, p->inputs, p->outputs, p->sym_params,
                          make_seq(std::vector<Stmt>(top.begin() + n, top.end())), std::move(attrs));
  return out;
}

ProgramPattern analyze_pattern(const Program& p) {
  if (PreludeSplit s = split_prelude(p); !s.prelude.empty()) return analyze_pattern(s.main);
  ProgramPattern out;
  out.outputs.resize(p->outputs.size());

  // Opaque: barriers, writes to inputs, stores at data-dependent indices.
  bool opaque = p->attrs.get_bool("opaque", false);
  bool accumulates = false, contraction = false;
  visit_stmts(p->body, [&](const Stmt& s) {
    if (as<BarrierNode>(s)) opaque = true;
    if (const auto* a = as<AllocateNode>(s); a && a->buffer->scope == Scope::Shared) opaque = true;
    const auto* st = as<StoreNode>(s);
    if (!st) return;
    if (contains(p->inputs, st->buffer.get())) opaque = true;
    for (const TExpr& i : st->indices)
      if (!as<SymNodeT>(i)) opaque = true;
    if (reads_buffer(s, st->buffer.get())) {
      accumulates = true;
      if (is_product_of_inputs(p, st->value)) contraction = true;
    }
    if (st->buffer->scope == Scope::Local) accumulates = true;
  });
  if (opaque) return out;

  // Each output defined by one nest of its own?
  std::vector<int> stores_per_output(p->outputs.size(), 0);
  visit_stmts(p->body, [&](const Stmt& s) {
    if (const auto* st = as<StoreNode>(s))
      for (size_t i = 0; i < p->outputs.size(); ++i)
        if (st->buffer == p->outputs[i]) ++stores_per_output[i];
  });
  for (const Stmt& s : top_level(p->body)) {
    auto c = as_compute(p, s);
    if (!c) continue;
    for (size_t i = 0; i < p->outputs.size(); ++i)
      if (p->outputs[i].get() == c->first && stores_per_output[i] == 1) out.outputs[i] = c->second;
  }
  if (out.inlinable()) {
    OpPattern kind = OpPattern::Elementwise;
    for (size_t i = 0; i < p->outputs.size(); ++i)
      kind = std::max(kind, read_pattern(*out.outputs[i], p->outputs[i]->shape));
    out.kind = kind;
    return out;
  }
  if (contraction)
    out.kind = OpPattern::OutputFusable;
  else if (accumulates)
    out.kind = OpPattern::Reduction;
  else
    out.kind = OpPattern::Injective;
  return out;
}

}  // namespace relax
