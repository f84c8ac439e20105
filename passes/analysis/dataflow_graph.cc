#include "passes/analysis/dataflow_graph.h"

#include <map>
#include <sstream>

#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "passes/analysis/op_pattern.h"

namespace relax {
namespace {

using nlohmann::json;

// "f32[batch, 8]" for a tensor; the struct info's text otherwise.
std::string type_text(const StructInfo& si) {
  if (const auto* t = as<TensorSI>(si)) {
    std::string s = t->dtype.str() + "[";
    if (!t->shape) return s + "ndim " + std::to_string(t->ndim) + "]";
    for (size_t i = 0; i < t->shape->size(); ++i) s += (i ? ", " : "") + to_string((*t->shape)[i]);
    return s + "]";
  }
  return print_sinfo(si);
}

class GraphBuilder {
 public:
  explicit GraphBuilder(const IRModule& mod) : mod_(mod) {}

  json build(const Function& main) {
    for (const Var& p : main->params) from_[p.get()] = {node("input", p->name)};
    walk(main->body);
    std::vector<const ExprNode*> results;
    if (const auto* t = as<TupleNode>(main->body->body))
      for (const Expr& f : t->fields) results.push_back(f.get());
    else
      results.push_back(main->body->body.get());
    for (size_t k = 0; k < results.size(); ++k) {
      int id = node("output", results.size() == 1 ? "output" : "output " + std::to_string(k));
      add_edges(results[k], id);
    }
    return {{"nodes", nodes_}, {"edges", edges_}};
  }

 private:
  int node(const std::string& kind, const std::string& name) {
    int id = int(nodes_.size());
    nodes_.push_back({{"id", id}, {"kind", kind}, {"name", name}});
    if (!region_.empty()) nodes_.back()["cuda_graph"] = region_;
    return id;
  }

  // Edges into `to` from whatever produced the value `e` (a variable, a
  // tuple of them); constants count as the node's weights.
  void add_edges(const ExprNode* e, int to) {
    if (!e) return;
    if (e->kind == ExprKind::Constant) {
      nodes_[size_t(to)]["weights"] = nodes_[size_t(to)].value("weights", 0) + 1;
      return;
    }
    if (e->kind == ExprKind::Tuple) {
      for (const Expr& f : static_cast<const TupleNode*>(e)->fields) add_edges(f.get(), to);
      return;
    }
    auto it = from_.find(e);
    if (it == from_.end()) return;
    for (int f : it->second) edges_.push_back({{"from", f}, {"to", to}, {"type", type_text(e->sinfo)}});
  }

  void walk(const SeqExpr& seq) {
    for (const BindingBlock& b : seq->blocks)
      for (const Binding& bd : b.bindings) {
        // A CUDA graph region (passes/rewrite_cuda_graph.cc): its launches
        // in place, marked with the region; its run is no node of its own.
        const auto* f = as<FunctionNode>(bd.value);
        if (f && f->attrs.has("cuda_graph")) {
          region_ = f->attrs.get_string("cuda_graph");
          walk(f->body);
          region_.clear();
          continue;
        }
        bind(bd.var, bd.value);
      }
  }

  void bind(const Var& var, const Expr& value) {
    const ExprNode* v = value.get();
    switch (value->kind) {
      case ExprKind::Var:
      case ExprKind::DataflowVar:
        if (from_.count(v)) from_[var.get()] = from_[v];
        return;
      case ExprKind::TupleGetItem: {
        const auto* g = as<TupleGetItemNode>(value);
        auto it = parts_.find(g->tuple.get());
        if (it != parts_.end() && size_t(g->index) < it->second.size()) {
          if (from_.count(it->second[size_t(g->index)])) from_[var.get()] = from_[it->second[size_t(g->index)]];
        } else if (from_.count(g->tuple.get())) {
          from_[var.get()] = from_[g->tuple.get()];
        }
        return;
      }
      case ExprKind::Tuple: {
        std::vector<const ExprNode*> fields;
        std::vector<int> all;
        for (const Expr& f : as<TupleNode>(value)->fields) {
          fields.push_back(f.get());
          if (from_.count(f.get())) all.insert(all.end(), from_[f.get()].begin(), from_[f.get()].end());
        }
        parts_[var.get()] = fields;
        from_[var.get()] = all;
        return;
      }
      case ExprKind::If: {
        const auto* i = as<IfNode>(value);
        int id = node("if", var->name);
        add_edges(i->cond.get(), id);
        walk(i->then_branch);
        walk(i->else_branch);
        add_edges(i->then_branch->body.get(), id);
        add_edges(i->else_branch->body.get(), id);
        from_[var.get()] = {id};
        return;
      }
      case ExprKind::Call:
        call(var, *as<CallNode>(value));
        return;
      default:
        return;  // shapes, scalars, constants: not tensors in flight
    }
  }

  void call(const Var& var, const CallNode& c) {
    const OpInfo* op = c.op();
    std::string name = op ? op->name : "call";
    if (name == "alloc_storage" || name == "alloc_tensor") return;
    if (name == "call_builtin" && !c.args.empty()) {
      const auto* s = as<StringImmNode>(c.args[0]);
      if (s && s->value == "cuda.graph_run") return;
    }
    auto string_arg = [&](size_t k) {
      const auto* s = k < c.args.size() ? as<StringImmNode>(c.args[k]) : nullptr;
      return s ? s->value : std::string("?");
    };
    int id;
    size_t first_input = 0, last_input = c.args.size();
    if (name == "call_tir" || name == "call_tir_dps") {
      const auto* g = !c.args.empty() ? as<GlobalVarNode>(c.args[0]) : nullptr;
      id = node("kernel", g ? g->name : "?");
      if (g) {
        if (tir::Program p = mod_.program(g->name)) nodes_[size_t(id)]["ops"] = program_ops(p);
      }
      first_input = 1, last_input = std::min<size_t>(2, c.args.size());
    } else if (name == "call_library" || name == "call_library_dps") {
      id = node("library", string_arg(0));
      first_input = 1, last_input = std::min<size_t>(2, c.args.size());
    } else if (name == "call_builtin" || name == "call_pure_builtin") {
      id = node("builtin", string_arg(0));
      first_input = 1;
    } else {
      id = node("op", name);
    }
    for (size_t k = first_input; k < last_input; ++k) add_edges(c.args[k].get(), id);
    from_[var.get()] = {id};
    // A destination-passing call produces its destinations too (what later
    // bindings read after a CUDA graph region).
    if ((name == "call_tir_dps" || name == "call_library_dps") && c.args.size() > 2)
      if (const auto* dests = as<TupleNode>(c.args[2]))
        for (const Expr& d : dests->fields) from_[d.get()] = {id};
  }

  const IRModule& mod_;
  json nodes_ = json::array(), edges_ = json::array();
  std::map<const ExprNode*, std::vector<int>> from_;               // value -> the nodes that produce it
  std::map<const ExprNode*, std::vector<const ExprNode*>> parts_;  // tuple variable -> its fields
  std::string region_;                                             // the CUDA graph region being walked
};

// Escapes a string for a dot label in double quotes.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

json dataflow_graph(const IRModule& mod) {
  Function main = mod.function("main");
  if (!main) fail("the module has no @main function");
  return GraphBuilder(mod).build(main);
}

std::string dataflow_dot(const json& graph, const std::string& title) {
  std::ostringstream os;
  os << "digraph \"" << dot_escape(title) << "\" {\n"
     << "  rankdir=TB;\n"
     << "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#e8eefc\", fontname=\"Helvetica\", fontsize=11];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#555555\"];\n";
  std::map<std::string, std::string> regions;  // name -> its nodes' lines
  for (const json& n : graph.at("nodes")) {
    std::string kind = n.value("kind", "op"), label = n.value("name", "?");
    std::string attrs;
    if (kind == "input" || kind == "output") {
      attrs = ", shape=ellipse, fillcolor=\"#ffffff\"";
      if (kind == "input") label = "input " + label;
    } else if (kind == "library") {
      attrs = ", fillcolor=\"#fde8c8\"";
      label = "library " + label;
    } else if (kind == "builtin" || kind == "if") {
      attrs = ", fillcolor=\"#e4e4e4\"";
      label = kind + " " + label;
    }
    if (n.contains("ops") && n["ops"].size() > 1) {
      std::string ops;
      for (const json& o : n["ops"]) ops += (ops.empty() ? "" : " + ") + o.get<std::string>();
      label += "\n" + ops;
    }
    if (int w = n.value("weights", 0); w > 0) label += "\n(" + std::to_string(w) + (w == 1 ? " weight)" : " weights)");
    std::string line =
        "  n" + std::to_string(n.value("id", 0)) + " [label=\"" + dot_escape(label) + "\"" + attrs + "];\n";
    if (n.contains("cuda_graph"))
      regions[n["cuda_graph"].get<std::string>()] += "  " + line;
    else
      os << line;
  }
  // The launches of each CUDA graph region in a box of their own.
  int k = 0;
  for (const auto& [name, lines] : regions)
    os << "  subgraph cluster_" << k++ << " {\n    label=\"CUDA graph " << dot_escape(name)
       << "\";\n    style=dashed;\n    color=\"#76b900\";\n    fontname=\"Helvetica\";\n"
       << lines << "  }\n";
  for (const json& e : graph.at("edges"))
    os << "  n" << e.value("from", 0) << " -> n" << e.value("to", 0) << " [label=\" " << dot_escape(e.value("type", ""))
       << "\"];\n";
  os << "}\n";
  return os.str();
}

}  // namespace relax
