// ONNX converters: sequences (SequenceConstruct, SequenceEmpty,
// SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
// SplitToSequence, ConcatFromSequence).
//
// A sequence whose elements are known at import time stays a list of
// Values (Value::seq): SequenceAt at a constant position is the element
// itself, ConcatFromSequence a concat, SequenceLength a constant, and every
// element keeps its shape. That covers what torch.onnx writes for a Python
// list of known length. A sequence whose length is known only at run time
// (carried through a Loop, split into a data-dependent number of parts, or
// indexed at a run-time position) is a value of List struct info, handled by
// the list ops (ir/ops/list.cc), which the runtime implements on VM tuples.
// A tensor read from such a list gets fresh dims bound at run time, so
// shapes downstream stay symbolic.
#include "frontends/onnx/compose.h"
#include "frontends/onnx/context.h"
#include "frontends/onnx/shape_util.h"
#include "ir/struct_info.h"

namespace relax::onnx_fe {
namespace {

using shape::axis_of;
using shape::settle;

Value static_seq(std::vector<Value> items) {
  Value v;
  v.seq = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

// The elements of sequence input i when its length is known at import time:
// a static sequence's, or a tuple's fields.
std::optional<std::vector<Value>> known_elements(Context& ctx, size_t i) {
  const Value& v = ctx.input(i);
  if (v.seq) return *v.seq;
  if (!v.expr) ctx.fail("input ", i, " is not a sequence");
  StructInfo si = sinfo_of(v.expr);
  if (const auto* t = as<TupleSI>(si)) {
    std::vector<Value> out;
    for (size_t k = 0; k < t->fields.size(); ++k)
      out.push_back(expr_value(ctx.emit(make_tuple_get_item(v.expr, int(k)), cat(ctx.node().input(int(i)), "_", k))));
    return out;
  }
  if (!as<ListSI>(si) && !as<ObjectSI>(si)) ctx.fail("input ", i, " is not a sequence");
  return std::nullopt;
}

// A position input known at import time, in [0, size) (or [0, size] for an
// insertion), from the end when negative.
std::optional<size_t> known_position(Context& ctx, size_t i, size_t size, bool end_ok) {
  auto p = ctx.const_ints(i);
  if (!p) return std::nullopt;
  if (p->size() != 1) ctx.fail("the position must be a scalar, got ", p->size(), " values");
  int64_t n = int64_t(size), q = (*p)[0] < 0 ? (*p)[0] + n : (*p)[0];
  if (q < 0 || q > n || (q == n && !end_ok))
    ctx.fail("position ", (*p)[0], " is out of range for a sequence of length ", n);
  return size_t(q);
}

std::vector<Value> convert_sequence_construct(Context& ctx) {
  std::vector<Value> items;
  DataType dt;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    DataType d = ctx.dtype(i);
    if (i > 0 && !d.is_void() && !dt.is_void() && d != dt)
      ctx.fail("input ", i, " is ", d, " but input 0 is ", dt, "; a sequence's tensors share one dtype");
    if (i == 0) dt = d;
    items.push_back(ctx.input(i));
  }
  return {static_seq(std::move(items))};
}

std::vector<Value> convert_sequence_empty(Context&) { return {static_seq({})}; }

std::vector<Value> convert_sequence_length(Context& ctx) {
  if (auto items = known_elements(ctx, 0)) return {sym_value({int64_t(items->size())}, true)};
  return {expr_value(ctx.emit_op("list_length", {ctx.expr(0)}))};
}

std::vector<Value> convert_sequence_at(Context& ctx) {
  auto items = known_elements(ctx, 0);
  if (items) {
    if (auto p = known_position(ctx, 1, items->size(), false)) return {(*items)[*p]};
  }
  return {expr_value(settle(ctx, ctx.emit_op("list_at", {ctx.expr(0), ctx.expr(1)})))};
}

std::vector<Value> convert_sequence_insert(Context& ctx) {
  auto items = known_elements(ctx, 0);
  if (items) {
    std::optional<size_t> at = ctx.has_input(2) ? known_position(ctx, 2, items->size(), true) : items->size();
    if (at) {
      items->insert(items->begin() + std::ptrdiff_t(*at), ctx.input(1));
      return {static_seq(std::move(*items))};
    }
  }
  std::vector<Expr> args{ctx.expr(0), ctx.expr(1)};
  if (ctx.has_input(2)) args.push_back(ctx.expr(2));
  return {expr_value(ctx.emit_op("list_insert", std::move(args)))};
}

std::vector<Value> convert_sequence_erase(Context& ctx) {
  auto items = known_elements(ctx, 0);
  if (items) {
    if (items->empty()) ctx.fail("the sequence is empty");
    std::optional<size_t> at = ctx.has_input(1) ? known_position(ctx, 1, items->size(), false) : items->size() - 1;
    if (at) {
      items->erase(items->begin() + std::ptrdiff_t(*at));
      return {static_seq(std::move(*items))};
    }
  }
  std::vector<Expr> args{ctx.expr(0)};
  if (ctx.has_input(1)) args.push_back(ctx.expr(1));
  return {expr_value(ctx.emit_op("list_erase", std::move(args)))};
}

std::vector<Value> convert_split_to_sequence(Context& ctx) {
  int64_t axis = ctx.attr_int("axis", 0);
  bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  int r = ctx.ndim(0);
  auto shape = ctx.shape(0);
  // The parts' lengths when their number is known: from a constant 1-D
  // split, or from a constant axis length.
  std::optional<Dims> lengths;
  if (r > 0 && shape) {
    axis = axis_of(ctx, axis, r);
    SymExpr len = (*shape)[size_t(axis)];
    auto split = ctx.has_input(1) ? ctx.sym_values(1) : std::nullopt;
    if (split && ctx.ndim(1) == 1) {
      lengths = *split;
    } else if (len.is_const() && len.const_value() <= 4096) {
      int64_t n = len.const_value(), k = 1;
      if (ctx.has_input(1)) {
        auto c = ctx.const_ints(1);
        k = c && c->size() == 1 ? (*c)[0] : 0;
        if (c && k <= 0) ctx.fail("split ", k, " must be positive");
      }
      if (k > 0) {
        lengths.emplace();
        for (int64_t at = 0; at < n; at += k) lengths->push_back(std::min(k, n - at));
      }
    }
  }
  // keepdims 0 drops the axis when split is absent or a scalar (of 1), as
  // ONNX Runtime reads it and torch.onnx's unbind relies on.
  bool drop = !keepdims && (!ctx.has_input(1) || ctx.ndim(1) == 0);
  if (lengths && drop)
    for (const SymExpr& n : *lengths)
      if (!n.is_const() || n.const_value() != 1) ctx.fail("keepdims 0 needs parts of length 1");
  if (lengths) {
    std::vector<Value> parts;
    SymExpr at = 0;
    Expr x = ctx.expr(0);
    for (const SymExpr& n : *lengths) {
      SymExpr end = simplify(ctx, at + n);
      Expr p = slice_axis(ctx, x, axis, at, end);
      if (drop) p = ctx.emit_op("squeeze", {p}, {{"axis", std::vector<int64_t>{axis}}});
      parts.push_back(expr_value(p));
      at = end;
    }
    return {static_seq(std::move(parts))};
  }
  std::vector<Expr> args{ctx.expr(0)};
  if (ctx.has_input(1)) args.push_back(ctx.expr(1));
  return {expr_value(ctx.emit_op("list_split", std::move(args), {{"axis", axis}, {"keepdims", keepdims}}))};
}

std::vector<Value> convert_concat_from_sequence(Context& ctx) {
  int64_t axis = ctx.attr_int("axis", 0);
  bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  if (auto items = known_elements(ctx, 0)) {
    if (items->empty()) ctx.fail("the sequence is empty");
    std::vector<Expr> parts;
    for (const Value& v : *items) {
      Expr e = ctx.expr_of(v);
      if (new_axis) e = ctx.emit_op("expand_dims", {e}, {{"axis", std::vector<int64_t>{axis}}});
      parts.push_back(e);
    }
    return {expr_value(ctx.emit_op("concat", {make_tuple(parts)}, {{"axis", axis}}))};
  }
  return {expr_value(
      settle(ctx, ctx.emit_op("list_concat", {ctx.expr(0)}, {{"axis", axis}, {"new_axis", new_axis}})))};
}

// ---- SequenceMap ----------------------------------------------------------------

// Whether input i is a sequence (a value of known elements, a tuple or a list).
bool is_sequence(Context& ctx, size_t i) {
  const Value& v = ctx.input(i);
  if (v.seq) return true;
  if (!v.expr) return false;
  StructInfo si = sinfo_of(v.expr);
  return as<TupleSI>(si) || as<ListSI>(si);
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(outs.at(0));
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

// SequenceMap as the ONNX function defines it: a Loop over the first
// sequence's length whose body takes element i of each sequence input (the
// tensor inputs whole), runs `body`, and appends its outputs to one
// sequence each. Built as ONNX nodes and converted like the model's own.
std::vector<Value> convert_sequence_map(Context& ctx) {
  const onnx::GraphProto* body = ctx.attr_graph("body");
  if (!body) ctx.fail("needs the body attribute");
  size_t n = ctx.num_inputs();
  if (size_t(body->input_size()) != n)
    ctx.fail("the body has ", body->input_size(), " inputs for ", n, " node inputs");
  if (!is_sequence(ctx, 0)) ctx.fail("input 0 must be a sequence");
  std::string p = (ctx.output_used(0) ? ctx.node().output(0) : ctx.op_type()) + "/SequenceMap/";
  onnx::GraphProto g, loop;
  std::vector<std::string> empties;
  for (size_t j = 0; j < n; ++j) g.add_input()->set_name(p + "in" + std::to_string(j));
  add_node(g, "SequenceLength", {p + "in0"}, {p + "len"});
  onnx::NodeProto* t = add_node(g, "Constant", {}, {p + "true"});
  onnx::AttributeProto* tv = t->add_attribute();
  tv->set_name("value");
  tv->set_type(onnx::AttributeProto::TENSOR);
  tv->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  tv->mutable_t()->add_int32_data(1);
  // The loop body: element i of each sequence, the body's nodes, appends.
  loop.add_input()->set_name(p + "i");
  loop.add_input()->set_name(p + "cond");
  for (int k = 0; k < body->output_size(); ++k) {
    std::string acc = p + "acc" + std::to_string(k);
    loop.add_input()->set_name(acc);
    int elem = body->output(k).type().tensor_type().elem_type();
    onnx::NodeProto* e = add_node(g, "SequenceEmpty", {}, {p + "empty" + std::to_string(k)});
    onnx::AttributeProto* dt = e->add_attribute();
    dt->set_name("dtype");
    dt->set_type(onnx::AttributeProto::INT);
    dt->set_i(elem ? elem : onnx::TensorProto::FLOAT);
    empties.push_back(e->output(0));
  }
  for (size_t j = 0; j < n; ++j) {
    std::string in = p + "in" + std::to_string(j);
    if (is_sequence(ctx, j))
      add_node(loop, "SequenceAt", {in, p + "i"}, {body->input(int(j)).name()});
    else
      add_node(loop, "Identity", {in}, {body->input(int(j)).name()});
  }
  for (const auto& node : body->node()) *loop.add_node() = node;
  for (const auto& init : body->initializer()) *loop.add_initializer() = init;
  add_node(loop, "Identity", {p + "cond"}, {p + "cond_out"});
  loop.add_output()->set_name(p + "cond_out");
  for (int k = 0; k < body->output_size(); ++k) {
    std::string out = p + "acc_out" + std::to_string(k);
    add_node(loop, "SequenceInsert", {p + "acc" + std::to_string(k), body->output(k).name()}, {out});
    loop.add_output()->set_name(out);
  }
  std::vector<std::string> loop_ins{p + "len", p + "true"}, outs;
  loop_ins.insert(loop_ins.end(), empties.begin(), empties.end());
  for (int k = 0; k < body->output_size(); ++k) outs.push_back(p + "out" + std::to_string(k));
  onnx::NodeProto* l = add_node(g, "Loop", loop_ins, outs);
  onnx::AttributeProto* b = l->add_attribute();
  b->set_name("body");
  b->set_type(onnx::AttributeProto::GRAPH);
  *b->mutable_g() = loop;
  for (const auto& o : outs) g.add_output()->set_name(o);
  std::vector<Value> r = ctx.expand(g);
  for (const Value& v : r)
    if (v.absent()) ctx.unsupported("its body uses what is not supported");
  return r;
}

}  // namespace

void register_sequence_converters(ConverterRegistry& r) {
  r.add("SequenceMap", 17, convert_sequence_map);
  r.add("SequenceConstruct", 11, convert_sequence_construct);
  r.add("SequenceEmpty", 11, convert_sequence_empty);
  r.add("SequenceLength", 11, convert_sequence_length);
  r.add("SequenceAt", 11, convert_sequence_at);
  r.add("SequenceInsert", 11, convert_sequence_insert);
  r.add("SequenceErase", 11, convert_sequence_erase);
  r.add("SplitToSequence", 11, convert_split_to_sequence);
  r.add("ConcatFromSequence", 11, convert_concat_from_sequence);
}

}  // namespace relax::onnx_fe
