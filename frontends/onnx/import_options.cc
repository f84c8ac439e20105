// The user's input shapes (relax-import and relax-build --dim and --shape):
// parsing the options, and putting them into a model's declared inputs
// before import (ImportOptions in importer.h).
#include <algorithm>
#include <cctype>
#include <set>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/onnx_proto.h"

namespace relax::onnx_fe {

namespace {

bool is_dim_name(const std::string& s) {
  return !s.empty() && !std::isdigit((unsigned char)s[0]) &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_'; });
}

int64_t positive_dim(const std::string& s, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || v < 1) fail(what, ": '", s, "' is not a dim (a positive integer or a name)");
  return int64_t(v);
}

std::pair<std::string, std::string> split_option(const std::string& text, const std::string& what,
                                                  const std::string& form) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    fail(what, ": '", text, "' is not of the form ", form);
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// The graph inputs that are not initializers (older exporters list the
// weights as inputs too).
std::vector<onnx::ValueInfoProto*> fed_inputs(onnx::GraphProto& g) {
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<onnx::ValueInfoProto*> out;
  for (auto& vi : *g.mutable_input())
    if (!inits.count(vi.name())) out.push_back(&vi);
  return out;
}

std::string input_list(const std::vector<onnx::ValueInfoProto*>& ins) {
  std::string s;
  for (const auto* vi : ins) s += (s.empty() ? "" : ", ") + vi->name();
  return s.empty() ? "none" : s;
}

// Every dim named `name` among `vis` set to `value`; whether there was one.
bool fix_dim(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>& vis, const std::string& name, int64_t value) {
  bool found = false;
  for (auto& vi : vis) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    for (auto& d : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
      if (d.has_dim_param() && d.dim_param() == name) {
        d.set_dim_value(value);
        found = true;
      }
  }
  return found;
}

}  // namespace

void ImportOptions::apply_to(onnx::ModelProto& model, const std::string& path) const {
  onnx::GraphProto& g = *model.mutable_graph();
  std::vector<onnx::ValueInfoProto*> ins = fed_inputs(g);
  for (const auto& [name, value] : dims) {
    if (!fix_dim(*g.mutable_input(), name, value))
      fail(path, ": --dim ", name, ": no input of the model has a dim of that name (inputs: ", input_list(ins), ")");
    // The outputs and intermediate values that name it are that value too.
    fix_dim(*g.mutable_output(), name, value);
    fix_dim(*g.mutable_value_info(), name, value);
  }
  for (const auto& [input, want] : shapes) {
    auto it = std::find_if(ins.begin(), ins.end(), [&](const auto* vi) { return vi->name() == input; });
    if (it == ins.end())
      fail(path, ": --shape ", input, ": the model has no input of that name (inputs: ", input_list(ins), ")");
    if (!(*it)->type().has_tensor_type()) fail(path, ": --shape ", input, ": the input is not a tensor");
    auto* tt = (*it)->mutable_type()->mutable_tensor_type();
    if (tt->has_shape() && size_t(tt->shape().dim_size()) != want.size())
      fail(path, ": --shape ", input, ": the model gives the input rank ", tt->shape().dim_size(), ", not ",
           want.size());
    tt->mutable_shape()->clear_dim();
    for (const std::string& d : want) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (is_dim_name(d))
        dim->set_dim_param(d);
      else
        dim->set_dim_value(positive_dim(d, "--shape " + input));
    }
  }
}

void ImportOptions::add_dim(const std::string& text) {
  auto [name, value] = split_option(text, "--dim", "NAME=VALUE");
  if (!is_dim_name(name)) fail("--dim: '", name, "' is not a dim name");
  dims[name] = positive_dim(value, "--dim " + name);
}

void ImportOptions::add_shape(const std::string& text) {
  auto [input, list] = split_option(text, "--shape", "INPUT=D0,D1,...");
  std::vector<std::string> dims;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string d = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!is_dim_name(d)) positive_dim(d, "--shape " + input);
    dims.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  for (const auto& s : shapes)
    if (s.first == input) fail("--shape ", input, ": given twice");
  shapes.emplace_back(input, dims);
}

std::vector<std::string> ImportOptions::args() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : dims) out.insert(out.end(), {"--dim", cat(name, "=", value)});
  for (const auto& [input, ds] : shapes) {
    std::string list;
    for (const std::string& d : ds) list += (list.empty() ? "" : ",") + d;
    out.insert(out.end(), {"--shape", input + "=" + list});
  }
  return out;
}

std::string ImportOptions::key() const {
  std::string k;
  std::vector<std::string> a = args();
  for (size_t i = 0; i + 1 < a.size(); i += 2) k += (k.empty() ? "" : " ") + a[i].substr(2) + ":" + a[i + 1];
  return k;
}

}  // namespace relax::onnx_fe
