// The C API (relax_runtime.h) over rt::Model: every entry point catches
// what the runtime throws and turns it into a return value and a message.
#include "runtime/capi/relax_runtime.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/model.h"
#include "runtime/tensor.h"

using namespace relax::rt;

namespace {

thread_local std::string g_error;

// One side of the signature, with the C strings the API hands out.
struct Signature {
  std::vector<TensorDesc> descs;
  std::vector<std::vector<const char*>> dims;

  void init(const std::vector<TensorDesc>& d) {
    descs = d;
    for (const TensorDesc& t : descs) {
      dims.emplace_back();
      for (const std::string& s : t.dims) dims.back().push_back(s.c_str());
    }
  }

  int get(int32_t i, const char** name, const char** dtype, int32_t* ndim, const char* const** out) const {
    if (i < 0 || size_t(i) >= descs.size()) {
      g_error = "index " + std::to_string(i) + " is out of range (" + std::to_string(descs.size()) + " tensors)";
      return 1;
    }
    const TensorDesc& t = descs[size_t(i)];
    if (name) *name = t.name.c_str();
    if (dtype) *dtype = t.dtype.c_str();
    if (ndim) *ndim = t.ndim;
    if (out) *out = dims[size_t(i)].data();
    return 0;
  }
};

// Runs `f`, returning `fallback` with the message recorded when it throws.
template <class F, class R>
R guarded(F&& f, R fallback) {
  try {
    g_error.clear();
    return f();
  } catch (const std::exception& e) {
    g_error = e.what();
  } catch (...) {
    g_error = "unknown error";
  }
  return fallback;
}

}  // namespace

struct relax_model {
  std::unique_ptr<Model> model;
  Signature inputs, outputs;
};

struct relax_result {
  std::vector<Tensor> tensors;
  std::vector<std::string> dtypes;
};

extern "C" {

const char* relax_version(void) { return "relax " RELAX_VERSION; }

const char* relax_last_error(void) { return g_error.c_str(); }

relax_model* relax_model_load(const char* path, int32_t device) {
  return guarded(
      [&]() -> relax_model* {
        if (!path) rt_fail("relax_model_load: no path");
        auto m = std::make_unique<relax_model>();
        m->model = Model::load(path, device);
        m->inputs.init(m->model->inputs());
        m->outputs.init(m->model->outputs());
        return m.release();
      },
      static_cast<relax_model*>(nullptr));
}

void relax_model_free(relax_model* model) { delete model; }

int32_t relax_model_num_inputs(const relax_model* model) { return model ? int32_t(model->inputs.descs.size()) : 0; }

int32_t relax_model_num_outputs(const relax_model* model) { return model ? int32_t(model->outputs.descs.size()) : 0; }

int relax_model_input(const relax_model* model, int32_t i, const char** name, const char** dtype, int32_t* ndim,
                      const char* const** dims) {
  if (!model) return g_error = "no model", 1;
  return model->inputs.get(i, name, dtype, ndim, dims);
}

int relax_model_output(const relax_model* model, int32_t i, const char** name, const char** dtype, int32_t* ndim,
                       const char* const** dims) {
  if (!model) return g_error = "no model", 1;
  return model->outputs.get(i, name, dtype, ndim, dims);
}

relax_result* relax_model_run(relax_model* model, const relax_tensor* inputs, int32_t num_inputs) {
  return guarded(
      [&]() -> relax_result* {
        if (!model) rt_fail("relax_model_run: no model");
        if (num_inputs < 0 || (num_inputs > 0 && !inputs)) rt_fail("relax_model_run: no inputs");
        std::vector<Tensor> in;
        for (int32_t k = 0; k < num_inputs; ++k) {
          const relax_tensor& t = inputs[k];
          const std::string name =
              size_t(k) < model->inputs.descs.size() ? model->inputs.descs[size_t(k)].name : "#" + std::to_string(k);
          std::optional<DType> dt = DType::parse(t.dtype ? t.dtype : "");
          if (!dt) rt_fail("input '", name, "': unknown dtype '", t.dtype ? t.dtype : "(null)", "'");
          if (t.ndim < 0 || (t.ndim > 0 && !t.shape)) rt_fail("input '", name, "': no shape");
          std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
          Tensor x = Tensor::empty(*dt, shape);
          if (x.nbytes() > 0) {
            if (!t.data) rt_fail("input '", name, "': no data");
            std::memcpy(x.data(), t.data, x.nbytes());
          }
          in.push_back(std::move(x));
        }
        auto r = std::make_unique<relax_result>();
        r->tensors = model->model->run(in);
        for (const Tensor& t : r->tensors) r->dtypes.push_back(t.dtype().str());
        return r.release();
      },
      static_cast<relax_result*>(nullptr));
}

void relax_set_max_memory(uint64_t bytes) { set_memory_cap(size_t(bytes)); }

int32_t relax_result_count(const relax_result* result) { return result ? int32_t(result->tensors.size()) : 0; }

int relax_result_get(const relax_result* result, int32_t i, relax_tensor* out) {
  if (!result || !out) return g_error = "no result", 1;
  if (i < 0 || size_t(i) >= result->tensors.size()) {
    g_error = "output " + std::to_string(i) + " is out of range (" + std::to_string(result->tensors.size()) + ")";
    return 1;
  }
  const Tensor& t = result->tensors[size_t(i)];
  out->dtype = result->dtypes[size_t(i)].c_str();
  out->ndim = t.ndim();
  out->shape = t.shape().data();
  out->data = t.data();
  return 0;
}

void relax_result_free(relax_result* result) { delete result; }

}  // extern "C"
