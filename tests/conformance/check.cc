#include "tests/conformance/check.h"

#include <regex>
#include <string>
#include <vector>

#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/tensor_proto.h"

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

Result check_package(const Case& c, const std::string& package) {
  std::vector<rt::Tensor> outputs, expected;
  try {
    auto model = rt::Model::load(package);
    std::vector<rt::Tensor> inputs;
    if (c.folder == "light") {
      for (const auto& d : model->inputs()) inputs.push_back(light_input(d));
    } else {
      for (const std::string& p : c.inputs) inputs.push_back(rt::read_tensor_proto(p).tensor);
    }
    for (const std::string& p : c.outputs) expected.push_back(rt::read_tensor_proto(p).tensor);
    outputs = model->run(inputs);
  } catch (const std::exception& e) {
    return {"run-error", first_line(e.what())};
  }
  if (outputs.size() != expected.size())
    return {"wrong",
            "produced " + std::to_string(outputs.size()) + " outputs, expected " + std::to_string(expected.size())};
  bool only_shape = shape_only(c.name);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (only_shape) {
      if (!(outputs[i].dtype() == expected[i].dtype()) || outputs[i].shape() != expected[i].shape())
        return {"wrong",
                "output " + std::to_string(i) + ": " + outputs[i].type_str() + ", expected " + expected[i].type_str()};
      continue;
    }
    rt::Comparison cmp = rt::compare_tensors(outputs[i], expected[i], tolerance_of(c.name));
    if (!cmp.ok) return {"wrong", "output " + std::to_string(i) + ": " + cmp.detail};
  }
  return {"pass", only_shape ? "random values: dtype and shape compared" : ""};
}


}  // namespace relax::conformance
