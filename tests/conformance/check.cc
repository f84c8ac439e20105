#include "tests/conformance/check.h"

#include <regex>
#include <string>
#include <vector>

#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/model.h"

namespace relax::conformance {
namespace {

// Cases whose expected values come from a random generator: only the dtype
// and shape of their outputs can be compared.
bool shape_only(const std::string& name) {
  static const std::regex re("node/test_(bernoulli.*|training_dropout(_default|_mask|_default_mask)?)$");
  return std::regex_match(name, re);
}

// Cases that need their own tolerance, each with the reason. Never loosen
// the default for all.
struct CaseTolerance {
  const char* name;
  rt::Tolerance tol;
  const char* why;
};
const CaseTolerance kTolerances[] = {
    {"node/test_dft_inverse",
     {1e-3, 1e-6},
     "the expected file holds float32 rounding noise (2e-7) where the result is 0"},
    {"node/test_dft_inverse_opset19",
     {1e-3, 1e-6},
     "the expected file holds float32 rounding noise (2e-7) where the result is 0"},
};

rt::Tolerance tolerance_of(const std::string& name) {
  for (const CaseTolerance& t : kTolerances)
    if (name == t.name) return t.tol;
  return {};
}

// The input ONNX builds for the light models: arange(n).reshape(shape) / n.
rt::Tensor light_input(const rt::TensorDesc& d) {
  std::vector<int64_t> shape;
  for (const std::string& s : d.dims) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
      rt::rt_fail("light model input '", d.name, "' has a symbolic dim ", s);
    shape.push_back(std::stoll(s));
  }
  rt::Tensor t = rt::Tensor::empty(rt::DType::f32(), shape);
  int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = float(double(i) / double(n));
  return t;
}

}  // namespace

std::string package_file_name(const Case& c) {
  std::string s = c.name;
  for (size_t p; (p = s.find('/')) != std::string::npos;) s.replace(p, 1, "__");
  return s + ".rpkg";
}

namespace {

// `got` against `want`: "" when they agree.
std::string compare_value(const rt::Value& got, const rt::Value& want, bool only_shape, const rt::Tolerance& tol) {
  if (want.is_tuple()) {
    if (!got.is_tuple()) return std::string("a ") + got.kind_name() + ", expected a sequence";
    const auto &g = got.tuple(), &w = want.tuple();
    if (g.size() != w.size())
      return "a sequence of " + std::to_string(g.size()) + " tensors, expected " + std::to_string(w.size());
    for (size_t i = 0; i < g.size(); ++i)
      if (std::string d = compare_value(g[i], w[i], only_shape, tol); !d.empty())
        return "element " + std::to_string(i) + ": " + d;
    return "";
  }
  if (!got.is_tensor()) return std::string("a ") + got.kind_name() + ", expected a tensor";
  const rt::Tensor &g = got.tensor(), &w = want.tensor();
  if (only_shape) {
    if (!(g.dtype() == w.dtype()) || g.shape() != w.shape()) return g.type_str() + ", expected " + w.type_str();
    return "";
  }
  rt::Comparison cmp = rt::compare_tensors(g, w, tol);
  return cmp.ok ? "" : cmp.detail;
}

}  // namespace

Result check_package(const Case& c, const std::string& package) {
  std::vector<rt::Value> outputs, expected;
  try {
    auto model = rt::Model::load(package);
    std::vector<rt::Value> inputs;
    if (c.folder == "light") {
      for (const auto& d : model->inputs()) inputs.emplace_back(light_input(d));
    } else {
      if (c.inputs.size() != model->inputs().size())
        return {"run-error", "the case has " + std::to_string(c.inputs.size()) + " inputs, the model " +
                                 std::to_string(model->inputs().size())};
      for (size_t i = 0; i < c.inputs.size(); ++i)
        inputs.push_back(rt::read_test_value(c.inputs[i], model->inputs()[i]));
    }
    for (size_t i = 0; i < c.outputs.size(); ++i)
      expected.push_back(
          rt::read_test_value(c.outputs[i], i < model->outputs().size() ? model->outputs()[i] : rt::TensorDesc{}));
    outputs = model->run_values(std::move(inputs));
  } catch (const std::exception& e) {
    return {"run-error", first_line(e.what())};
  }
  if (outputs.size() != expected.size())
    return {"wrong",
            "produced " + std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size())};
  bool only_shape = shape_only(c.name);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (std::string d = compare_value(outputs[i], expected[i], only_shape, tolerance_of(c.name)); !d.empty())
      return {"wrong", "output " + std::to_string(i) + ": " + d};
  return {"pass", only_shape ? "random values: dtype and shape compared" : ""};
}


}  // namespace relax::conformance
