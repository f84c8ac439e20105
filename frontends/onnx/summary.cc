// The JSON summary relax-import prints with --json.
#include <nlohmann/json.hpp>

#include "frontends/onnx/importer.h"

namespace relax::onnx_fe {
namespace {

nlohmann::ordered_json value_json(const NamedValueInfo& v) {
  nlohmann::ordered_json j;
  j["name"] = v.name;
  auto* t = as<TensorSI>(v.sinfo);
  if (as<ListSI>(v.sinfo) || as<TupleSI>(v.sinfo)) j["sequence"] = true;
  if (!t) {
    j["dtype"] = nullptr;
    j["shape"] = nullptr;
    return j;
  }
  j["dtype"] = t->dtype.is_void() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(t->dtype.str());
  if (t->unknown_rank()) {
    j["shape"] = nullptr;
  } else if (!t->shape) {
    j["shape"] = std::vector<std::nullptr_t>(size_t(t->ndim), nullptr);
  } else {
    auto dims = nlohmann::ordered_json::array();
    for (const SymExpr& d : *t->shape) {
      if (d.is_const())
        dims.push_back(d.const_value());
      else
        dims.push_back(to_string(d));
    }
    j["shape"] = dims;
  }
  return j;
}

}  // namespace

std::string summary_json(const std::string& model_path, const ImportedModel* m, const UnsupportedModel* unsupported,
                         const std::string& error) {
  nlohmann::ordered_json j;
  j["model"] = model_path;
  if (m) {
    nlohmann::ordered_json opsets = nlohmann::ordered_json::object();
    for (const auto& [d, v] : m->opsets) opsets[d] = v;
    j["opset"] = opsets;
    auto ins = nlohmann::ordered_json::array(), outs = nlohmann::ordered_json::array();
    for (const auto& v : m->inputs) ins.push_back(value_json(v));
    for (const auto& v : m->outputs) outs.push_back(value_json(v));
    j["inputs"] = ins;
    j["outputs"] = outs;
    nlohmann::ordered_json ops = nlohmann::ordered_json::object();
    for (const auto& [op, n] : m->op_counts) ops[op] = n;
    j["ops"] = ops;
    if (!m->notes.empty()) j["notes"] = m->notes;
  }
  auto u = nlohmann::ordered_json::array();
  if (unsupported) {
    for (const Unsupported& x : unsupported->items) {
      nlohmann::ordered_json e;
      e["domain"] = x.domain.empty() ? "ai.onnx" : x.domain;
      e["op"] = x.op_type;
      e["opset"] = x.opset;
      if (!x.detail.empty()) e["detail"] = x.detail;
      e["nodes"] = x.nodes;
      u.push_back(e);
    }
  }
  j["unsupported"] = u;
  if (!error.empty()) j["error"] = error;
  return j.dump(2) + "\n";
}

}  // namespace relax::onnx_fe
