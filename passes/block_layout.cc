// block-layout: host targets keep a CNN's activations in the blocked
// channel layout between its convolutions. A tensor (N, C, H, W) is held as
// (N, ceil(C / 16), H, W, 16), channel b * 16 + l at [n, b, h, w, l], zeros
// past C (runtime/conv_blocked.h): a convolution then reads and writes
// whole 16-channel vectors whatever its plane's width, and its bias and
// activation fuse as an epilogue on those vectors.
//
// A 2-D f32 convolution by a constant weight, dense (groups 1) or
// depthwise, whose input already has a blocked twin or has at least 16
// channels, becomes (a dense one of fewer input channels and at least 16
// outputs, a network's first, reads its x plain instead)
//
//   xb = the twin of x, or x converted (channels padded to a multiple of 16,
//        reshaped to (N, Cb, 16, H, W), the 16 moved last)
//   yb = conv_blocked(xb, w)           (the twin of y)
//   y  = yb converted back             (dead unless something plain reads y)
//
// and what follows it stays blocked where the layout does not change its
// meaning: elementwise ops whose operands are twins, per-channel constants
// (padded and reshaped to (1, Cb, 1, 1, 16); a divisor's padding 1),
// scalars, (N, 1, H, W) maps (to (N, 1, H, W, 1)) or other plain tensors of
// the output's channels (converted); a sum, mean, max or min over the
// plane (axes 2 and 3, kept); a concat along the channels of twins whose
// channel counts are multiples of 16. Every other reader gets the value
// converted back, once. The padded lanes stay finite (the ops above map
// finite values to finite ones), so the zero-padded weights of the next
// convolution cancel them.
//
// The choice per model: the module's attribute `channel_layout` (relax-build
// --layout): "blocked" always, "plain" never, "auto" (the default) where a
// function has at least 3 such convolutions. --explain block-layout says
// what it chose and why.
#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/explain.h"
#include "ir/mutator.h"
#include "ir/normalize.h"
#include "ir/visitor.h"
#include "ir/op.h"
#include "ir/ops/common.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr int64_t kBlock = 16;
constexpr const char* kTopic = "block-layout";  // --explain

int64_t blocks_of(int64_t c) { return (c + kBlock - 1) / kBlock; }

const TensorSI* tensor_of(const Expr& e) { return e && e->sinfo ? as<TensorSI>(e->sinfo) : nullptr; }

// A 2-D f32 convolution by a constant weight of known shape, dense or
// depthwise, whose output has known channels.
bool blockable_conv(const CallNode& c) {
  if (!c.op() || c.op()->name != "conv" || c.args.size() != 2) return false;
  const TensorSI *x = tensor_of(c.args[0]), *w = tensor_of(c.args[1]), *y = as<TensorSI>(c.sinfo);
  if (!x || !w || !y || !x->shape || !w->shape || !y->shape) return false;
  if (x->shape->size() != 4 || w->shape->size() != 4 || y->shape->size() != 4) return false;
  if (x->dtype != DataType::f32() || w->dtype != DataType::f32() || y->dtype != DataType::f32()) return false;
  if (c.args[1]->kind != ExprKind::Constant) return false;
  for (const SymExpr& d : *w->shape)
    if (!d.is_const()) return false;
  if (!(*x->shape)[1].is_const()) return false;
  const int64_t groups = c.attrs.get_int("groups");
  const int64_t O = (*w->shape)[0].const_value(), Cg = (*w->shape)[1].const_value();
  return groups == 1 || (Cg == 1 && O == groups && (*x->shape)[1].is_const(groups));
}

// Elementwise ops that map finite values to finite ones (so padded lanes
// stay harmless); `divide` only by a plain divisor (padded with 1).
bool elementwise(std::string_view op) {
  static const std::unordered_set<std::string_view> ops = {
      "add",   "subtract", "multiply", "divide",  "maximum", "minimum",   "neg",        "abs",
      "exp",   "tanh",     "sigmoid",  "relu",    "gelu",    "silu",      "softplus",   "erf",
      "clip",  "where",    "less",     "greater", "less_equal", "greater_equal"};
  return ops.count(op) != 0;
}
bool plane_reduction(const CallNode& c) {
  static const std::unordered_set<std::string_view> ops = {"sum", "mean", "max", "min"};
  if (!c.op() || !ops.count(c.op()->name) || c.args.size() != 1 || !c.attrs.get_bool("keepdims")) return false;
  std::vector<int64_t> axes = c.attrs.get_ints("axis");
  for (int64_t& a : axes)
    if (a < 0) a += 4;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

class Blocker : public ExprMutator {
 public:
  explicit Blocker(const IRModule& mod) : ExprMutator(&mod) {}

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    Expr value = visit(b.value);
    if (!b.is_match_cast())
      if (std::optional<Expr> r = block(value, b.var, out)) value = *r;
    out.push_back(value == b.value ? b : Binding{b.var, value, b.cast});
  }

  int blocked_convs = 0, conversions_in = 0;
  std::map<std::string, int> plain_readers;  // ops that read a blocked value converted back, by name

 private:
  struct Twin {
    Expr value;  // (N, Cb, H, W, 16)
    int64_t C;   // the channels it holds (the rest of the last block: padding)
  };

  Expr emit(Expr value, const Var& like, const std::string& suffix, std::vector<Binding>& out) {
    value->sinfo = infer_struct_info(value, InferContext{ana_, mod_});
    const std::string name = like->name + suffix;
    Var v = is_dataflow_var(like) ? make_dataflow_var(name, value->sinfo) : make_var(name, value->sinfo);
    out.push_back(Binding{v, value, nullptr});
    return v;
  }
  Expr finish(Expr value) {
    value->sinfo = infer_struct_info(value, InferContext{ana_, mod_});
    return value;
  }

  void note_plain_readers(const CallNode& c) {
    for (const Expr& a : c.args) {
      bool reads = twin_of(a) != nullptr;
      if (const auto* t = as<TupleNode>(a))
        for (const Expr& f : t->fields) reads = reads || twin_of(f);
      if (reads) {
        ++plain_readers[c.op()->name];
        return;
      }
    }
  }

  const Twin* twin_of(const Expr& e) const {
    const auto* v = as<VarNode>(e);
    auto it = v ? twins_.find(v) : twins_.end();
    return it == twins_.end() ? nullptr : &it->second;
  }

  // x (N, C, H, W) blocked: padded, reshaped, the 16 moved last (once per value).
  Expr to_blocked(const Expr& x, const Var& like, std::vector<Binding>& out) {
    const auto* v = as<VarNode>(x);
    if (v)
      if (auto it = converted_.find(v); it != converted_.end()) return it->second;
    const std::vector<SymExpr>& s = *tensor_of(x)->shape;
    const int64_t C = s[1].const_value(), Cb = blocks_of(C);
    Expr e = x;
    if (C % kBlock) {
      std::vector<SymExpr> pads(8, SymExpr(0));
      pads[5] = SymExpr(Cb * kBlock - C);
      e = emit(make_op_call("pad", {e, make_shape(pads), make_prim_float(0.0)}), like, "_cpad", out);
    }
    e = emit(make_op_call("reshape", {e, make_shape({s[0], SymExpr(Cb), SymExpr(kBlock), s[2], s[3]})}), like,
             "_csplit", out);
    e = emit(make_op_call("permute_dims", {e}, {{"axes", std::vector<int64_t>{0, 1, 3, 4, 2}}}), like, "_blocked",
             out);
    ++conversions_in;
    if (v) converted_[v] = e;
    return e;
  }

  // A twin back in the plain layout: the binding's value (its steps before
  // it emitted).
  Expr from_blocked(const Twin& t, const std::vector<SymExpr>& s, const Var& like, std::vector<Binding>& out) {
    const int64_t Cb = blocks_of(t.C);
    Expr e = emit(make_op_call("permute_dims", {t.value}, {{"axes", std::vector<int64_t>{0, 1, 4, 2, 3}}}), like,
                  "_cfirst", out);
    Expr r = make_op_call("reshape", {e, make_shape({s[0], SymExpr(Cb * kBlock), s[2], s[3]})});
    if (t.C % kBlock == 0) return finish(r);
    e = emit(r, like, "_cjoin", out);
    return finish(make_op_call("strided_slice", {e},
                               {{"axes", std::vector<int64_t>{1}},
                                {"begin", std::vector<SymExpr>{SymExpr(0)}},
                                {"end", std::vector<SymExpr>{SymExpr(t.C)}}}));
  }

  // An operand of a blocked elementwise op of C channels that has no
  // twin, in the blocked form: a scalar as it is, a per-channel tensor
  // padded (with `pad`) and reshaped, an (N, 1, H, W) map with a unit lane
  // dim, a plain tensor of C channels converted; nullopt otherwise.
  std::optional<Expr> adapt(const Expr& a, int64_t C, double pad, const Var& like, std::vector<Binding>& out) {
    const TensorSI* t = tensor_of(a);
    if (!t) return a;  // a prim value
    if (!t->shape) return std::nullopt;
    const std::vector<SymExpr>& s = *t->shape;
    if (s.size() > 4) return std::nullopt;
    bool scalar = true;
    for (const SymExpr& d : s) scalar = scalar && d.is_const(1);
    if (scalar) return a;
    if (t->dtype != DataType::f32()) return std::nullopt;  // (padded with f32 values)
    // (C, 1, 1) or (1, C, 1, 1): per channel.
    if (s.size() >= 3 && s[s.size() - 3].is_const(C) && s[s.size() - 2].is_const(1) && s.back().is_const(1) &&
        (s.size() == 3 || s[0].is_const(1))) {
      const int64_t Cb = blocks_of(C);
      Expr e = emit(make_op_call("reshape", {a, make_shape({SymExpr(C)})}), like, "_cvec", out);
      if (C % kBlock)
        e = emit(make_op_call("pad", {e, make_shape({SymExpr(0), SymExpr(Cb * kBlock - C)}), make_prim_float(pad)}),
                 like, "_cvecpad", out);
      return emit(make_op_call("reshape", {e, make_shape({SymExpr(1), SymExpr(Cb), SymExpr(1), SymExpr(1),
                                                          SymExpr(kBlock)})}),
                  like, "_cblocks", out);
    }
    if (s.size() != 4) return std::nullopt;
    if (s[1].is_const(1))
      return emit(make_op_call("reshape", {a, make_shape({s[0], SymExpr(1), s[2], s[3], SymExpr(1)})}), like,
                  "_cmap", out);
    if (s[1].is_const(C) && pad == 0.0) return to_blocked(a, like, out);
    return std::nullopt;
  }

  std::optional<Expr> block(const Expr& value, const Var& var, std::vector<Binding>& out) {
    if (const auto* g = as<TupleGetItemNode>(value)) return tuple_item(*g, var, out);
    const auto* c = as<CallNode>(value);
    const auto* y = as<TensorSI>(value->sinfo);
    if (!c || !c->op()) return std::nullopt;
    if (c->op()->name == "split") {
      split(*c, var, out);
      return std::nullopt;  // the plain split stays, dead unless something reads its parts plain
    }
    if (!y || !y->shape || y->shape->size() != 4 || !(*y->shape)[1].is_const()) {
      note_plain_readers(*c);
      return std::nullopt;
    }
    const std::string& op = c->op()->name;
    const int64_t C = (*y->shape)[1].const_value();
    std::optional<Twin> twin;
    if (blockable_conv(*c)) {
      const Twin* xt = twin_of(c->args[0]);
      const int64_t Cin = (*tensor_of(c->args[0])->shape)[1].const_value();
      if (xt && xt->C != Cin) return std::nullopt;
      // Few input channels (a network's first convolution): read plain,
      // where padding them to a block would multiply the work.
      const bool plain_x = !xt && Cin < kBlock;
      if (plain_x && (c->attrs.get_int("groups") != 1 || C < kBlock)) return std::nullopt;
      Expr xb = xt ? xt->value : plain_x ? c->args[0] : to_blocked(c->args[0], var, out);
      Attrs attrs;
      for (const char* k : {"strides", "padding", "dilation"}) attrs.set(k, c->attrs.get_ints(k));
      attrs.set("groups", c->attrs.get_int("groups"));
      twin = Twin{emit(make_op_call("conv_blocked", {xb, c->args[1]}, std::move(attrs)), var, "_b", out), C};
      ++blocked_convs;
    } else if (elementwise(op)) {
      bool any = false;
      for (const Expr& a : c->args) {
        const Twin* t = twin_of(a);
        if (t && t->C != C) return std::nullopt;
        any = any || t;
      }
      if (!any) return std::nullopt;
      // Every operand first (nothing emitted unless all fit).
      for (size_t k = 0; k < c->args.size(); ++k) {
        if (twin_of(c->args[k])) {
          if (op == "divide" && k == 1) return std::nullopt;  // padded lanes would divide by 0
          continue;
        }
        const TensorSI* t = tensor_of(c->args[k]);
        if (t && (!t->shape || t->shape->size() > 4)) return std::nullopt;
      }
      std::vector<Expr> args;
      for (size_t k = 0; k < c->args.size(); ++k) {
        if (const Twin* t = twin_of(c->args[k])) {
          args.push_back(t->value);
          continue;
        }
        std::optional<Expr> a = adapt(c->args[k], C, op == "divide" && k == 1 ? 1.0 : 0.0, var, out);
        if (!a) return std::nullopt;  // (what adapt emitted is dead: dead-code-elimination drops it)
        args.push_back(*a);
      }
      twin = Twin{emit(make_op_call(op, args, c->attrs), var, "_b", out), C};
    } else if (plane_reduction(*c)) {
      const Twin* t = twin_of(c->args[0]);
      if (!t || t->C != C) return std::nullopt;
      twin = Twin{emit(make_op_call(op, {t->value}, c->attrs), var, "_b", out), C};
    } else if (op == "concat" && c->attrs.get_int("axis") == 1) {
      const auto* parts = as<TupleNode>(c->args[0]);
      if (!parts) return std::nullopt;
      std::vector<Expr> fields;
      for (const Expr& p : parts->fields) {
        const Twin* t = twin_of(p);
        if (!t || t->C % kBlock) return std::nullopt;
        fields.push_back(t->value);
      }
      twin = Twin{emit(make_op_call("concat", {make_tuple(fields)}, c->attrs), var, "_b", out), C};
    }
    else if (op == "strided_slice") {
      // Along the channels only, from block to block.
      const Twin* t = twin_of(c->args[0]);
      const std::vector<int64_t> strides = c->attrs.get_ints("strides");
      const std::vector<SymExpr> begin = ops::get_syms(c->attrs, "begin"), end = ops::get_syms(c->attrs, "end");
      if (t && c->attrs.get_ints("axes") == std::vector<int64_t>{1} && begin.size() == 1 && end.size() == 1 &&
          begin[0].is_const() && end[0].is_const() && (strides.empty() || strides == std::vector<int64_t>{1})) {
        const int64_t b0 = begin[0].const_value(), e0 = std::min(end[0].const_value(), t->C);
        if (b0 % kBlock == 0 && (e0 % kBlock == 0 || e0 == t->C) && e0 - b0 == C) {
          Attrs attrs = c->attrs;
          attrs.set("begin", std::vector<SymExpr>{SymExpr(b0 / kBlock)});
          attrs.set("end", std::vector<SymExpr>{SymExpr(blocks_of(e0))});
          twin = Twin{emit(make_op_call("strided_slice", {t->value}, std::move(attrs)), var, "_b", out), C};
        }
      }
    } else if (op == "max_pool") {
      // A 2-D max pool as a 3-D one whose window is 1 along the lanes
      // (the cpu legaliser's pool.max2d over lanes).
      const Twin* t = twin_of(c->args[0]);
      const std::vector<int64_t> size = c->attrs.get_ints("pool_size"), st = c->attrs.get_ints("strides"),
                                 dil = c->attrs.get_ints("dilation"), pad = c->attrs.get_ints("padding");
      if (t && t->C == C && size.size() == 2 && (st.empty() || st.size() == 2) && (dil.empty() || dil.size() == 2) &&
          (pad.empty() || pad.size() == 4)) {
        Attrs attrs = c->attrs;
        attrs.set("pool_size", std::vector<int64_t>{size[0], size[1], 1});
        attrs.set("strides", st.empty() ? std::vector<int64_t>{1, 1, 1} : std::vector<int64_t>{st[0], st[1], 1});
        attrs.set("dilation", dil.empty() ? std::vector<int64_t>{1, 1, 1} : std::vector<int64_t>{dil[0], dil[1], 1});
        attrs.set("padding", pad.empty() ? std::vector<int64_t>(6, 0)
                                         : std::vector<int64_t>{pad[0], pad[1], 0, pad[2], pad[3], 0});
        twin = Twin{emit(make_op_call("max_pool", {t->value}, std::move(attrs)), var, "_b", out), C};
      }
    }
    if (!twin) {
      note_plain_readers(*c);
      return std::nullopt;
    }
    twins_[var.get()] = *twin;
    return from_blocked(*twin, *y->shape, var, out);
  }

  // A split along the channels of a twin into parts of whole blocks: its
  // blocked twin, a tuple of twins.
  void split(const CallNode& c, const Var& var, std::vector<Binding>& out) {
    const Twin* t = twin_of(c.args[0]);
    const auto* parts = as<TupleSI>(c.sinfo);
    if (!t || !parts || c.attrs.get_int("axis") != 1) return note_plain_readers(c);
    std::vector<int64_t> channels, bounds;
    int64_t at = 0;
    for (const StructInfo& f : parts->fields) {
      const auto* p = as<TensorSI>(f);
      if (!p || !p->shape || p->shape->size() != 4 || !(*p->shape)[1].is_const()) return note_plain_readers(c);
      const int64_t n = (*p->shape)[1].const_value();
      if (at % kBlock) return note_plain_readers(c);
      if (at) bounds.push_back(at / kBlock);
      channels.push_back(n);
      at += n;
    }
    if (at != t->C) return note_plain_readers(c);
    Attrs attrs;
    attrs.set("indices", bounds);
    attrs.set("axis", int64_t(1));
    Expr tb = emit(make_op_call("split", {t->value}, std::move(attrs)), var, "_b", out);
    tuple_twins_[var.get()] = {tb, channels};
  }
  std::optional<Expr> tuple_item(const TupleGetItemNode& g, const Var& var, std::vector<Binding>& out) {
    const auto* tv = as<VarNode>(g.tuple);
    auto it = tv ? tuple_twins_.find(tv) : tuple_twins_.end();
    if (it == tuple_twins_.end() || g.index < 0 || size_t(g.index) >= it->second.channels.size()) return std::nullopt;
    const auto* si = var->sinfo ? as<TensorSI>(var->sinfo) : nullptr;
    if (!si || !si->shape) return std::nullopt;
    Twin t{emit(make_tuple_get_item(it->second.value, g.index), var, "_b", out), it->second.channels[size_t(g.index)]};
    twins_[var.get()] = t;
    return from_blocked(t, *si->shape, var, out);
  }

  struct TupleTwin {
    Expr value;
    std::vector<int64_t> channels;
  };
  std::unordered_map<const VarNode*, TupleTwin> tuple_twins_;  // a split's tuple -> its blocked twin
  std::unordered_map<const VarNode*, Twin> twins_;      // a blocked op's plain result -> its twin
  std::unordered_map<const VarNode*, Expr> converted_;  // a plain value -> its blocked conversion
};

// The convolutions block-layout could take in f, for the choice.
int blockable_convs(const Function& f) {
  int n = 0;
  visit_exprs(f->body, [&](const Expr& e) {
    if (const auto* c = as<CallNode>(e); c && blockable_conv(*c)) ++n;
  });
  return n;
}

}  // namespace

IRModule block_layout(const IRModule& mod) {
  const std::string mode = mod.attrs.has("channel_layout") ? mod.attrs.get_string("channel_layout") : "auto";
  if (mode != "auto" && mode != "blocked" && mode != "plain")
    fail("block-layout: channel_layout must be auto, blocked or plain, got '", mode, "'");
  const bool explaining_ = explaining(kTopic);
  return map_functions(mod, [&](const std::string& name, const Function& f) {
    const int candidates = blockable_convs(f);
    if (mode == "plain" || candidates == 0 || (mode == "auto" && candidates < 3)) {
      if (explaining_ && candidates > 0)
        explain(kTopic, cat("@", name, ": plain layout (",
                            mode == "plain" ? std::string("--layout plain")
                                            : cat(candidates, " convolutions it could block, fewer than 3"),
                            ")"));
      return f;
    }
    Blocker b(mod);
    Function r = b.visit_function(f);
    if (explaining_) {
      std::string readers;
      for (const auto& [op, n] : b.plain_readers) readers += cat(readers.empty() ? "" : ", ", op, " ", n);
      explain(kTopic, cat("@", name, ": blocked channel layout (NCHW16c) for ", b.blocked_convs, " of ", candidates,
                          " convolutions, ", b.conversions_in, " conversions into it",
                          readers.empty() ? std::string() : cat("; read back in the plain layout by ", readers)));
    }
    return r;
  });
}

}  // namespace relax
