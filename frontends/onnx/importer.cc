#include "frontends/onnx/importer.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "frontends/onnx/context.h"
#include "frontends/onnx/onnx_proto.h"
#include "ir/normalize.h"
#include "ir/op.h"
#include "ir/parser.h"
#include "ir/visitor.h"

namespace relax::onnx_fe {

namespace {

std::string domain_key(const std::string& d) { return d == "ai.onnx" ? "" : d; }

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "v" + out;
  return out;
}

}  // namespace

// ---- The importer ------------------------------------------------------------

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string dir) : model_(model), dir_(std::move(dir)) {}

  ImportedModel run();

  // State the Context reaches into.
  Analyzer ana_;
  std::vector<Binding>* block_ = nullptr;

  Expr emit(Expr value, const std::string& hint) {
    ensure_struct_info(value, InferContext{ana_, &mod_});
    Var v = make_var(sanitize(hint.empty() ? "lv" : hint), value->sinfo);
    block_->push_back(Binding{v, value, nullptr});
    return v;
  }

  Expr emit_match_cast(Expr value, StructInfo si, const std::string& hint) {
    ensure_struct_info(value, InferContext{ana_, &mod_});
    Var v = make_var(sanitize(hint.empty() ? "lv" : hint), si);
    block_->push_back(Binding{v, value, si});
    return v;
  }

  // Value `name` refined (its dims bound by a match_cast) for the nodes after
  // this one in the current graph: every Shape of it then reads the same dims.
  void refine(const std::string& name, Value v) {
    if (!name.empty()) scopes_.back()[name] = std::move(v);
  }

  Expr add_weight(HostTensor t, const std::string& hint) {
    std::string name = hint.empty() ? "const" : hint;
    if (weight_names_.count(name)) {
      int k = 1;
      while (weight_names_.count(name + "_" + std::to_string(k))) ++k;
      name += "_" + std::to_string(k);
    }
    weight_names_.insert(name);
    std::vector<SymExpr> dims(t.shape.begin(), t.shape.end());
    Expr c = make_constant(name, tensor_si(t.dtype, dims));
    weights_.emplace_back(name, std::move(t));
    return c;
  }

  Expr materialize(const Value& v, const std::string& hint);
  Expr import_subgraph(const onnx::GraphProto& g, const std::vector<StructInfo>& params);
  std::vector<Value> expand(const onnx::GraphProto& g, const std::vector<Value>& inputs);
  SymExpr fresh_sym(const std::string& hint) { return SymExpr::var(sanitize(hint)); }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  void read_opsets();
  void check_supported();
  void scan_graph(const onnx::GraphProto& g, std::map<std::tuple<std::string, std::string, int>, Unsupported>& out);
  SymExpr dim_var(const std::string& name);
  StructInfo sinfo_of_type(const onnx::TypeProto& type, const std::string& value_name);
  std::vector<const onnx::NodeProto*> topo_sort(const onnx::GraphProto& g);
  void add_initializers(const onnx::GraphProto& g, Scope& scope);
  void convert_nodes(const onnx::GraphProto& g);
  void convert_node(const onnx::NodeProto& node);
  const Value* lookup(const std::string& name) const;
  Expr graph_outputs(const onnx::GraphProto& g, bool top = false);
  std::vector<std::pair<std::string, HostTensor>> referenced_weights(const Function& main);

  const onnx::ModelProto& model_;
  std::string dir_;
  IRModule mod_;
  std::map<std::string, int> opsets_;
  std::map<std::string, int> op_counts_;
  std::unordered_map<std::string, SymExpr> dim_vars_;
  std::vector<Scope> scopes_;
  std::vector<std::pair<std::string, HostTensor>> weights_;
  std::unordered_set<std::string> weight_names_;
  std::vector<Unsupported> late_unsupported_;
  std::unordered_set<std::string> poisoned_;  // outputs of nodes that could not be converted
  std::set<std::string> data_files_;          // external data locations read
  std::vector<std::string> notes_;            // Context::note
  friend class Context;
};

void Importer::read_opsets() {
  for (const auto& o : model_.opset_import()) opsets_[domain_key(o.domain())] = int(o.version());
  // IR version 3 introduced opset_import; older models are opset 1.
  if (!opsets_.count("")) {
    if (model_.ir_version() >= 3 && model_.opset_import_size() == 0)
      fail("the model (IR version ", model_.ir_version(), ") declares no opset (opset_import is empty)");
    opsets_[""] = 1;
  }
}

void Importer::scan_graph(const onnx::GraphProto& g,
                          std::map<std::tuple<std::string, std::string, int>, Unsupported>& out) {
  for (const auto& node : g.node()) {
    std::string domain = domain_key(node.domain());
    int opset = opsets_.count(domain) ? opsets_[domain] : 0;
    op_counts_[domain.empty() ? node.op_type() : domain + "." + node.op_type()]++;
    const ConverterInfo* c = converters().find(domain, node.op_type());
    if (!c || opset < c->min_opset) {
      Unsupported& u = out[{domain, node.op_type(), opset}];
      u.domain = domain;
      u.op_type = node.op_type();
      u.opset = opset;
      if (c) u.detail = cat("opset ", opset, " is older than the oldest handled (", c->min_opset, ")");
      u.nodes.push_back(node.name().empty() ? "(unnamed)" : node.name());
    }
    for (const auto& a : node.attribute()) {
      if (a.has_g()) scan_graph(a.g(), out);
      for (const auto& sub : a.graphs()) scan_graph(sub, out);
    }
  }
}

void Importer::check_supported() {
  std::map<std::tuple<std::string, std::string, int>, Unsupported> found;
  scan_graph(model_.graph(), found);
  // Inputs and outputs of types the IR cannot hold yet.
  auto check_value = [&](const onnx::ValueInfoProto& v, const char* what) {
    const onnx::TypeProto& t = v.type();
    std::string why;
    if (t.has_sequence_type() && !t.sequence_type().elem_type().has_tensor_type())
      why = "non-tensor-sequence-typed";
    else if (t.has_optional_type())
      why = "optional-typed";
    else if (t.has_map_type())
      why = "map-typed";
    else if (t.has_tensor_type() && !dtype_of(t.tensor_type().elem_type()))
      why = onnx_type_name(t.tensor_type().elem_type()) + "-typed";
    else if (t.has_sparse_tensor_type())
      why = "sparse-tensor-typed";
    if (why.empty()) return;
    Unsupported& u = found[{"", std::string(what), 0}];
    u.op_type = what;
    u.detail = why + " " + what;
    u.nodes.push_back(v.name());
  };
  for (const auto& v : model_.graph().input()) check_value(v, "graph input");
  for (const auto& v : model_.graph().output()) check_value(v, "graph output");
  if (found.empty()) return;
  std::vector<Unsupported> items;
  std::string msg = "the model uses what is not supported:";
  for (auto& [k, u] : found) {
    msg += "\n  " + (u.domain.empty() ? std::string() : u.domain + ".") + u.op_type;
    if (u.opset) msg += cat(" (opset ", u.opset, ")");
    if (!u.detail.empty()) msg += ": " + u.detail;
    msg += " at ";
    for (size_t i = 0; i < u.nodes.size() && i < 5; ++i) msg += (i ? ", " : "") + ("'" + u.nodes[i] + "'");
    if (u.nodes.size() > 5) msg += cat(" and ", u.nodes.size() - 5, " more");
    items.push_back(u);
  }
  throw UnsupportedModel(msg, items);
}

SymExpr Importer::dim_var(const std::string& name) {
  auto it = dim_vars_.find(name);
  if (it != dim_vars_.end()) return it->second;
  return dim_vars_[name] = SymExpr::var(sanitize(name));
}

StructInfo Importer::sinfo_of_type(const onnx::TypeProto& type, const std::string& value_name) {
  // A sequence of tensors: a List (its element keeps constant dims only).
  if (type.has_sequence_type() && type.sequence_type().elem_type().has_tensor_type())
    return list_si(sinfo_of_type(type.sequence_type().elem_type(), value_name));
  if (!type.has_tensor_type()) fail("value '", value_name, "' is not a tensor");
  const auto& tt = type.tensor_type();
  DataType dtype;
  if (tt.elem_type() != 0) {
    auto d = dtype_of(tt.elem_type());
    if (!d) fail("value '", value_name, "' has unsupported element type ", onnx_type_name(tt.elem_type()));
    dtype = *d;
  }
  if (!tt.has_shape()) return tensor_si_ndim(dtype, -1);
  std::vector<SymExpr> dims;
  for (int k = 0; k < tt.shape().dim_size(); ++k) {
    const auto& d = tt.shape().dim(k);
    if (d.has_dim_value() && d.dim_value() > 0) {
      dims.push_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty() && d.dim_param() != "?") {
      const std::string& p = d.dim_param();
      auto it = dim_vars_.find(p);
      if (it != dim_vars_.end()) {
        dims.push_back(it->second);
        continue;
      }
      bool simple = std::all_of(p.begin(), p.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
      std::optional<SymExpr> e;
      if (!simple) e = parse_sym_expr(p, [&](const std::string& n) { return dim_var(n); });
      dims.push_back(e ? *e : dim_var(p));
    } else {
      dims.push_back(SymExpr::var(sanitize(value_name) + "_d" + std::to_string(k)));
    }
  }
  return tensor_si(dtype, dims);
}

std::vector<const onnx::NodeProto*> Importer::topo_sort(const onnx::GraphProto& g) {
  // Kahn's algorithm over the graph's own values, keeping the file order
  // among ready nodes. Names produced outside the graph (inputs,
  // initializers, enclosing graphs) are ready from the start.
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < size_t(g.node_size()); ++i)
    for (const auto& o : g.node(int(i)).output())
      if (!o.empty()) producer[o] = i;
  std::vector<int> pending(size_t(g.node_size()), 0);
  std::vector<std::vector<size_t>> users(size_t(g.node_size()));
  auto deps = [&](const onnx::NodeProto& n, const std::function<void(const std::string&)>& f) {
    for (const auto& in : n.input()) f(in);
    // Values captured by subgraphs are dependencies too.
    std::function<void(const onnx::GraphProto&)> sub = [&](const onnx::GraphProto& sg) {
      for (const auto& sn : sg.node()) {
        for (const auto& in : sn.input()) f(in);
        for (const auto& a : sn.attribute()) {
          if (a.has_g()) sub(a.g());
          for (const auto& gg : a.graphs()) sub(gg);
        }
      }
    };
    for (const auto& a : n.attribute()) {
      if (a.has_g()) sub(a.g());
      for (const auto& gg : a.graphs()) sub(gg);
    }
  };
  for (size_t i = 0; i < size_t(g.node_size()); ++i) {
    std::set<size_t> seen;
    deps(g.node(int(i)), [&](const std::string& in) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end() || it->second == i || !seen.insert(it->second).second) return;
      ++pending[i];
      users[it->second].push_back(i);
    });
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < pending.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<const onnx::NodeProto*> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(&g.node(int(i)));
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != size_t(g.node_size())) {
    std::string names;
    for (size_t i = 0; i < pending.size(); ++i)
      if (pending[i] > 0 && names.size() < 200) names += (names.empty() ? "'" : ", '") + g.node(int(i)).name() + "'";
    fail("the graph has a cycle through the nodes ", names);
  }
  return order;
}

// Initializers up to this size keep their data beside their constant.
constexpr size_t kKeptDataBytes = size_t(64) << 10;

void Importer::add_initializers(const onnx::GraphProto& g, Scope& scope) {
  for (const auto& init : g.initializer()) {
    if (init.name().empty()) fail("an initializer has no name");
    if (init.data_location() == onnx::TensorProto::EXTERNAL)
      for (const auto& kv : init.external_data())
        if (kv.key() == "location") data_files_.insert(kv.value());
    HostTensor t = decode_tensor(init, dir_);
    // The converters read data only of small tensors (shapes, axes,
    // scalars): a large weight is not copied a second time for them.
    std::shared_ptr<const HostTensor> data;
    if (t.bytes.size() <= kKeptDataBytes) data = std::make_shared<const HostTensor>(t);
    Value v;
    v.expr = add_weight(std::move(t), init.name());
    v.data = std::move(data);
    scope[init.name()] = v;
  }
  if (g.sparse_initializer_size() > 0) fail("sparse initializers are not supported");
}

const Value* Importer::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

namespace {

// The node's input and output counts against its ONNX schema (ai.onnx and
// ai.onnx.ml; contrib ops have none here), so that no converter reads an
// input or output the node lacks.
void check_arity(Context& ctx, const onnx::NodeProto& node, const std::string& domain) {
  // libonnx knows the opsets up to its own release; past them an op's
  // newest schema there may be an older version's (ReduceMax took its axes
  // as an input from opset 18): no check then.
  const auto& known = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto range_of = known.find(domain);
  if (range_of == known.end() || ctx.opset() > range_of->second.second) return;
  const auto* schema = ::onnx::OpSchemaRegistry::Schema(node.op_type(), ctx.opset(), domain);
  if (!schema) return;
  auto range = [](int lo, int hi) {
    return hi == lo ? std::to_string(lo) : hi == std::numeric_limits<int>::max() ? cat(lo, " or more") : cat(lo, " to ", hi);
  };
  if (node.input_size() < schema->min_input() || node.input_size() > schema->max_input())
    ctx.fail("takes ", range(schema->min_input(), schema->max_input()), " inputs, the node has ", node.input_size());
  if (node.output_size() < schema->min_output() || node.output_size() > schema->max_output())
    ctx.fail("gives ", range(schema->min_output(), schema->max_output()), " outputs, the node has ", node.output_size());
}

}  // namespace

void Importer::convert_node(const onnx::NodeProto& node) {
  std::string domain = domain_key(node.domain());
  std::string where = cat("node '", node.name().empty() ? std::string("(unnamed)") : node.name(), "' (",
                          domain.empty() ? "" : domain + ".", node.op_type(), ", opset ", opsets_[domain], ")");
  std::vector<Value> inputs;
  bool poisoned = false;
  for (const auto& in : node.input()) {
    if (in.empty()) {
      inputs.emplace_back();
      continue;
    }
    if (poisoned_.count(in)) poisoned = true;
    const Value* v = lookup(in);
    if (!v && !poisoned) fail(where, ": input '", in, "' is not produced by any node, initializer or graph input");
    inputs.push_back(v ? *v : Value{});
  }
  if (poisoned) {
    for (const auto& o : node.output()) poisoned_.insert(o);
    return;
  }
  const ConverterInfo* conv = converters().find(domain, node.op_type());
  RELAX_CHECK(conv, "unsupported ops are found before conversion");
  Context ctx(*this, node, opsets_[domain], std::move(inputs));
  check_arity(ctx, node, domain);
  std::vector<Value> outs;
  try {
    outs = conv->fn(ctx);
  } catch (const UnsupportedError& e) {
    late_unsupported_.push_back(Unsupported{domain, node.op_type(), opsets_[domain], e.what(), {node.name()}});
    for (const auto& o : node.output()) poisoned_.insert(o);
    return;
  } catch (const UnsupportedModel&) {
    throw;
  } catch (const Error& e) {
    fail(where, ": ", e.what());
  }
  for (int k = 0; k < node.output_size(); ++k) {
    const std::string& name = node.output(k);
    if (name.empty()) continue;
    if (size_t(k) >= outs.size() || outs[size_t(k)].absent()) {
      // An output the converter does not produce is only an error if used.
      continue;
    }
    scopes_.back()[name] = outs[size_t(k)];
  }
}

void Importer::convert_nodes(const onnx::GraphProto& g) {
  for (const onnx::NodeProto* n : topo_sort(g)) convert_node(*n);
}

Expr Importer::graph_outputs(const onnx::GraphProto& g, bool top) {
  std::vector<Expr> outs;
  for (const auto& o : g.output()) {
    const Value* v = lookup(o.name());
    if (!v) {
      if (poisoned_.count(o.name())) return nullptr;
      fail("graph output '", o.name(), "' is not produced by any node, initializer or graph input");
    }
    outs.push_back(materialize(*v, o.name()));
  }
  // The model's one output that is a sequence (a tuple or list) is still
  // wrapped, so that a tuple result of @main always means several outputs.
  bool sequence = top && outs.size() == 1 && (as<TupleSI>(sinfo_of(outs[0])) || as<ListSI>(sinfo_of(outs[0])));
  if (outs.size() == 1 && !sequence) return outs[0];
  Expr t = make_tuple(outs);
  ensure_struct_info(t, InferContext{ana_, &mod_});
  return t;
}

std::vector<Value> Importer::expand(const onnx::GraphProto& g, const std::vector<Value>& inputs) {
  scopes_.emplace_back();
  for (int k = 0; k < g.input_size() && size_t(k) < inputs.size(); ++k) scopes_.back()[g.input(k).name()] = inputs[size_t(k)];
  add_initializers(g, scopes_.back());
  convert_nodes(g);
  std::vector<Value> out;
  for (const auto& o : g.output()) {
    const Value* v = lookup(o.name());
    out.push_back(v ? *v : Value{});
  }
  scopes_.pop_back();
  return out;
}

Expr Importer::materialize(const Value& v, const std::string& hint) {
  if (v.expr) return v.expr;
  if (v.seq) {
    std::vector<Expr> items;
    for (const Value& e : *v.seq) items.push_back(materialize(e, hint));
    return emit(make_tuple(std::move(items)), hint);
  }
  if (v.data) return add_weight(*v.data, hint);
  if (v.sym) {
    const std::vector<SymExpr>& s = *v.sym;
    bool all_const = std::all_of(s.begin(), s.end(), [](const SymExpr& e) { return e.is_const(); });
    if (all_const) {
      std::vector<int64_t> vals;
      for (const SymExpr& e : s) vals.push_back(e.const_value());
      return add_weight(HostTensor::from_ints(v.sym_dtype, v.sym_shape, vals), hint);
    }
    if (!find_op("shape_to_tensor")) fail("internal: the graph op shape_to_tensor is not registered");
    Expr t = emit(make_op_call("shape_to_tensor", {make_shape(s)}), hint);
    if (v.sym_dtype != DataType::i64()) t = emit(make_op_call("astype", {t}, Attrs{{"dtype", v.sym_dtype}}), hint);
    if (v.sym_shape.size() != 1)
      t = emit(make_op_call("reshape", {t, make_shape(std::vector<SymExpr>(v.sym_shape.begin(), v.sym_shape.end()))}),
               hint);
    return t;
  }
  fail("a required input is missing");
}

Expr Importer::import_subgraph(const onnx::GraphProto& g, const std::vector<StructInfo>& params) {
  if (!params.empty() && params.size() != size_t(g.input_size()))
    fail("subgraph '", g.name(), "' has ", g.input_size(), " inputs but ", params.size(), " were given");
  std::vector<Binding> bindings;
  // Restored however the subgraph's import ends (an If may import a branch
  // that fails and carry on with the other: convert_control.cc).
  struct Restore {
    Importer& imp;
    std::vector<Binding>* block;
    size_t depth;
    ~Restore() {
      imp.block_ = block;
      imp.scopes_.resize(depth);
    }
  } restore{*this, block_, scopes_.size()};
  block_ = &bindings;
  scopes_.emplace_back();
  std::vector<Var> vars;
  for (int k = 0; k < g.input_size(); ++k) {
    const auto& in = g.input(k);
    StructInfo si = params.empty() || !params[size_t(k)] ? sinfo_of_type(in.type(), in.name()) : params[size_t(k)];
    Var p = make_var(sanitize(in.name()), si);
    vars.push_back(p);
    scopes_.back()[in.name()] = expr_value(p);
  }
  add_initializers(g, scopes_.back());
  convert_nodes(g);
  Expr body = graph_outputs(g);
  if (!body) throw UnsupportedError("a subgraph uses what is not supported");
  std::vector<BindingBlock> blocks;
  if (!bindings.empty()) blocks.push_back(BindingBlock{false, std::move(bindings)});
  SeqExpr seq = make_seq(std::move(blocks), body);
  ensure_struct_info(seq, InferContext{ana_, &mod_});
  Function f = make_function(vars, seq, seq->sinfo);
  return f;
}

ImportedModel Importer::run() {
  if (!model_.has_graph()) fail("the model has no graph");
  if (model_.graph().output_size() == 0) fail("the graph has no outputs");
  read_opsets();
  check_supported();
  const onnx::GraphProto& g = model_.graph();
  std::vector<Binding> bindings;
  block_ = &bindings;
  scopes_.emplace_back();
  add_initializers(g, scopes_.back());
  ImportedModel out;
  std::vector<Var> params;
  for (const auto& in : g.input()) {
    if (scopes_.back().count(in.name())) continue;  // an initializer listed as input (IR < 4)
    StructInfo si = sinfo_of_type(in.type(), in.name());
    Var p = make_var(sanitize(in.name()), si);
    params.push_back(p);
    scopes_.back()[in.name()] = expr_value(p);
    out.inputs.push_back({in.name(), si});
  }
  convert_nodes(g);
  Expr body = graph_outputs(g, /*top=*/true);
  if (!late_unsupported_.empty()) {
    std::string msg = "the model uses what is not supported:";
    for (const Unsupported& u : late_unsupported_)
      msg += cat("\n  ", u.domain.empty() ? "" : u.domain + ".", u.op_type, " (opset ", u.opset, "): ", u.detail,
                 " at '", u.nodes[0], "'");
    throw UnsupportedModel(msg, late_unsupported_);
  }
  RELAX_CHECK(body);
  std::vector<BindingBlock> blocks;
  if (!bindings.empty()) blocks.push_back(BindingBlock{false, std::move(bindings)});
  SeqExpr seq = make_seq(std::move(blocks), body);
  ensure_struct_info(seq, InferContext{ana_, &mod_});
  // The model's own input names where the IR's differ (input.1 -> input_1):
  // packages, relax-run and the VM's checks speak the model's.
  Attrs attrs;
  std::vector<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) names.push_back(out.inputs[i].name);
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i]->name != names[i]) attrs.set("input_names", names);
  mod_.add_function("main", make_function(params, seq, seq->sinfo, attrs));
  // The outputs as the body computes them: dims bound by match_cast inside
  // the function (data-dependent ones) keep their names here, while the
  // function's declared return erases them.
  StructInfo body_si = sinfo_of(body);
  auto ret = as<TupleSI>(body_si);
  // Several outputs, or one sequence (wrapped by graph_outputs), are a tuple's fields.
  bool wrapped = ret && ret->fields.size() == size_t(g.output_size()) &&
                 (g.output_size() > 1 || as<ListSI>(ret->fields[0]) || as<TupleSI>(ret->fields[0]));
  for (int k = 0; k < g.output_size(); ++k)
    out.outputs.push_back({g.output(k).name(), wrapped ? ret->fields[size_t(k)] : body_si});
  out.mod = mod_;
  out.weights = referenced_weights(mod_.function("main"));
  out.opsets = opsets_;
  out.op_counts = op_counts_;
  out.data_files = data_files_;
  out.notes = notes_;
  return out;
}

// The weights the function refers to: a subgraph imported more than once
// (a Loop body whose carried shapes widen) leaves constants of the discarded
// attempts behind.
std::vector<std::pair<std::string, HostTensor>> Importer::referenced_weights(const Function& main) {
  std::unordered_set<std::string> used;
  visit_exprs(main, [&](const Expr& e) {
    if (auto* c = as<ConstantNode>(e)) used.insert(c->name);
  });
  std::vector<std::pair<std::string, HostTensor>> out;
  for (auto& [name, t] : weights_)
    if (used.count(name)) out.emplace_back(name, std::move(t));
  return out;
}

ImportedModel import_onnx(const std::string& path, const ImportOptions& opts) {
  onnx::ModelProto model = load_model(path);
  return import_onnx_model(model, path, std::filesystem::path(path).parent_path().string(), opts);
}

ImportedModel import_onnx_model(onnx::ModelProto& model, const std::string& label, const std::string& dir,
                                const ImportOptions& opts) {
  opts.apply_to(model, label);
  Importer imp(model, dir);
  try {
    return imp.run();
  } catch (const UnsupportedModel&) {
    throw;
  } catch (const Error& e) {
    fail(label, ": ", e.what());
  }
}

// ---- Value and Context -----------------------------------------------------------

Value sym_value(std::vector<SymExpr> v, bool scalar, DataType dtype) {
  Value out;
  out.sym = std::move(v);
  if (!scalar) out.sym_shape = {int64_t(out.sym->size())};
  out.sym_dtype = dtype;
  return out;
}

Value sym_tensor_value(SymTensor t) {
  Value out = sym_value(std::move(t.elems), false, t.dtype);
  out.sym_shape = std::move(t.shape);
  return out;
}

Value expr_value(Expr e) {
  Value out;
  out.expr = std::move(e);
  return out;
}

Context::Context(Importer& imp, const onnx::NodeProto& node, int opset, std::vector<Value> inputs)
    : imp_(imp), node_(node), opset_(opset), inputs_(std::move(inputs)) {}

bool Context::output_used(size_t i) const { return int(i) < node_.output_size() && !node_.output(int(i)).empty(); }

const Value& Context::input(size_t i) const {
  static const Value kAbsent;
  return i < inputs_.size() ? inputs_[i] : kAbsent;
}

const onnx::AttributeProto* Context::attr(const std::string& name) const {
  for (const auto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool Context::has_attr(const std::string& name) const { return attr(name) != nullptr; }

namespace {
const onnx::AttributeProto* typed_attr(const Context& c, const std::string& name, onnx::AttributeProto::AttributeType t,
                                       const char* what) {
  const onnx::AttributeProto* a = c.attr(name);
  if (!a) return nullptr;
  // Old models may leave the type unset; trust the field then.
  if (a->type() != onnx::AttributeProto::UNDEFINED && a->type() != t) c.fail("attribute '", name, "' should be ", what);
  return a;
}
}  // namespace

int64_t Context::attr_int(const std::string& name, int64_t def) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::INT, "an int");
  return a ? a->i() : def;
}
float Context::attr_float(const std::string& name, float def) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::FLOAT, "a float");
  return a ? a->f() : def;
}
std::string Context::attr_string(const std::string& name, const std::string& def) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::STRING, "a string");
  return a ? a->s() : def;
}
std::vector<int64_t> Context::attr_ints(const std::string& name, std::vector<int64_t> def) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::INTS, "a list of ints");
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : def;
}
std::vector<float> Context::attr_floats(const std::string& name, std::vector<float> def) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::FLOATS, "a list of floats");
  return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : def;
}
std::vector<std::string> Context::attr_strings(const std::string& name) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::STRINGS, "a list of strings");
  return a ? std::vector<std::string>(a->strings().begin(), a->strings().end()) : std::vector<std::string>{};
}
std::optional<HostTensor> Context::attr_tensor(const std::string& name) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::TENSOR, "a tensor");
  if (!a) return std::nullopt;
  return decode_tensor(a->t(), "");
}
const onnx::GraphProto* Context::attr_graph(const std::string& name) const {
  auto* a = typed_attr(*this, name, onnx::AttributeProto::GRAPH, "a graph");
  return a ? &a->g() : nullptr;
}

Expr Context::expr_of(const Value& v) {
  if (v.absent()) fail("a required input is missing");
  return imp_.materialize(v, output_used(0) ? node_.output(0) : op_type());
}

Expr Context::expr(size_t i) {
  if (!has_input(i)) fail("input ", i, " is required");
  Expr e = expr_of(inputs_[i]);
  inputs_[i].expr = e;  // materialize once per node
  return e;
}

StructInfo Context::sinfo(size_t i) {
  const Value& v = input(i);
  if (v.expr || v.seq) return sinfo_of(expr(i));
  if (v.data) return tensor_si(v.data->dtype, std::vector<SymExpr>(v.data->shape.begin(), v.data->shape.end()));
  if (v.sym) {
    return tensor_si(v.sym_dtype, std::vector<SymExpr>(v.sym_shape.begin(), v.sym_shape.end()));
  }
  fail("input ", i, " is required");
}

// (The struct info is held while it is read: sinfo returns it by value.)
DataType Context::dtype(size_t i) {
  StructInfo si = sinfo(i);
  auto* t = as<TensorSI>(si);
  return t ? t->dtype : DataType();
}
int Context::ndim(size_t i) {
  StructInfo si = sinfo(i);
  auto* t = as<TensorSI>(si);
  return t ? t->ndim : -1;
}
std::optional<std::vector<SymExpr>> Context::shape(size_t i) {
  StructInfo si = sinfo(i);
  auto* t = as<TensorSI>(si);
  if (!t || !t->shape) return std::nullopt;
  return *t->shape;
}

std::vector<SymExpr> Context::bound_shape(size_t i, int rank) {
  if (rank >= 0 && ndim(i) >= 0 && ndim(i) != rank) fail("input ", i, " must have rank ", rank, ", got ", ndim(i));
  if (auto s = shape(i)) return *s;
  int r = ndim(i) >= 0 ? ndim(i) : rank;
  if (r < 0) unsupported(cat("input ", i, " of unknown rank"));
  std::string name = node_.input(int(i));
  std::vector<SymExpr> dims;
  for (int k = 0; k < r; ++k) dims.push_back(fresh_sym(cat(name, "_d", k)));
  inputs_[i] = expr_value(emit_match_cast(expr(i), tensor_si(dtype(i), dims), name));
  imp_.refine(name, inputs_[i]);
  return dims;
}

std::optional<std::vector<SymExpr>> Context::sym_values(size_t i) const {
  const Value& v = input(i);
  if (v.sym) return v.sym_shape.size() <= 1 ? v.sym : std::nullopt;
  if (v.data && v.data->shape.size() <= 1 && v.data->numel() <= 256) {
    auto ints = v.data->to_ints();
    if (!ints) return std::nullopt;
    return std::vector<SymExpr>(ints->begin(), ints->end());
  }
  return std::nullopt;
}

std::optional<SymTensor> Context::sym_tensor(size_t i) const {
  const Value& v = input(i);
  if (v.sym) {
    return SymTensor{v.sym_shape, *v.sym, v.sym_dtype};
  }
  if (v.data && v.data->numel() <= 256) {
    auto ints = v.data->to_ints();
    if (!ints) return std::nullopt;
    return SymTensor{v.data->shape, std::vector<SymExpr>(ints->begin(), ints->end()), v.data->dtype};
  }
  return std::nullopt;
}

const HostTensor* Context::data(size_t i) const {
  const Value& v = input(i);
  return v.data.get();
}

std::optional<std::vector<int64_t>> Context::const_ints(size_t i) const {
  if (const HostTensor* d = data(i)) return d->to_ints();
  if (auto s = sym_values(i)) {
    std::vector<int64_t> out;
    for (const SymExpr& e : *s) {
      if (!e.is_const()) return std::nullopt;
      out.push_back(e.const_value());
    }
    return out;
  }
  return std::nullopt;
}

std::optional<std::vector<double>> Context::const_floats(size_t i) const {
  if (const HostTensor* d = data(i)) return d->to_floats();
  if (auto ints = const_ints(i)) return std::vector<double>(ints->begin(), ints->end());
  return std::nullopt;
}

Expr Context::emit(Expr value, const std::string& hint) {
  return imp_.emit(std::move(value), hint.empty() && output_used(0) ? node_.output(0) : hint);
}

Expr Context::emit_op(const std::string& op, std::vector<Expr> args, Attrs attrs) {
  return emit(make_op_call(op, std::move(args), std::move(attrs)));
}

Expr Context::emit_match_cast(Expr value, StructInfo si, const std::string& hint) {
  return imp_.emit_match_cast(std::move(value), std::move(si), hint.empty() && output_used(0) ? node_.output(0) : hint);
}

Expr Context::constant(HostTensor t, const std::string& hint) {
  return imp_.add_weight(std::move(t), hint.empty() && output_used(0) ? node_.output(0) : hint);
}

Expr Context::scalar(DataType dtype, double v) {
  HostTensor t = dtype.code == TypeCode::Float || dtype.code == TypeCode::BFloat
                     ? HostTensor::from_floats(dtype, {}, {v})
                     : HostTensor::from_ints(dtype, {}, {int64_t(v)});
  return constant(std::move(t), op_type() + "_scalar");
}

SymExpr Context::fresh_sym(const std::string& hint) { return imp_.fresh_sym(hint); }

std::vector<Value> Context::expand(const onnx::GraphProto& g) { return imp_.expand(g, inputs_); }

Expr Context::import_subgraph(const onnx::GraphProto& g, const std::vector<StructInfo>& params) {
  return imp_.import_subgraph(g, params);
}

void Context::note(const std::string& text) { imp_.notes_.push_back(text); }

const Analyzer& Context::ana() const { return imp_.ana_; }

void Context::unsupported(const std::string& what) const { throw UnsupportedError(what); }

// ---- The registry ------------------------------------------------------------------

void ConverterRegistry::add(const std::string& domain, const std::string& op_type, int min_opset, Converter fn) {
  table_[{domain_key(domain), op_type}] = ConverterInfo{domain_key(domain), op_type, min_opset, std::move(fn)};
}

const ConverterInfo* ConverterRegistry::find(const std::string& domain, const std::string& op_type) const {
  auto it = table_.find({domain_key(domain), op_type});
  return it == table_.end() ? nullptr : &it->second;
}

std::vector<const ConverterInfo*> ConverterRegistry::all() const {
  std::vector<const ConverterInfo*> out;
  for (const auto& [k, v] : table_) out.push_back(&v);
  return out;
}

}  // namespace relax::onnx_fe
