#include "runtime/model.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <sstream>

#include "runtime/bytecode.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/tensor_proto.h"

namespace relax::rt {
namespace {

// Numbers of the manifest as integers: json converts a float (1.5, 4e34)
// to an integer with undefined behaviour, so anything else is refused.
int64_t json_int(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_integer()) rt_fail(what, " is ", v.dump(), ", not an integer");
  return v.get<int64_t>();
}

std::vector<int64_t> json_ints(const nlohmann::json& v, const std::string& what) {
  if (!v.is_array()) rt_fail(what, " is ", v.dump(), ", not a list of integers");
  std::vector<int64_t> out;
  for (const auto& e : v) out.push_back(json_int(e, what));
  return out;
}

std::vector<TensorDesc> descs(const nlohmann::json& list) {
  std::vector<TensorDesc> out;
  for (const auto& j : list) {
    TensorDesc d;
    d.name = j.value("name", "");
    d.dtype = j.value("dtype", "");
    d.sequence = j.value("kind", std::string("tensor")) == "sequence";
    if (j.contains("shape")) {
      for (const auto& dim : j["shape"]) d.dims.push_back(dim.is_string() ? dim.get<std::string>() : dim.dump());
      d.ndim = int(d.dims.size());
    } else {
      int64_t ndim = j.contains("ndim") ? json_int(j["ndim"], "a tensor's ndim") : -1;
      if (ndim < -1 || ndim > kMaxRank)
        rt_fail("a tensor's ndim is ", ndim, ": not -1 (unknown) or a rank up to ", kMaxRank);
      d.ndim = int(ndim);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, int device) {
  auto m = std::unique_ptr<Model>(new Model);
  m->pkg_ = Package::open(path);
  int format = 0;
  std::string target;
  try {
    m->manifest_ = nlohmann::json::parse(m->pkg_.section_text("manifest"));
    m->inputs_ = descs(m->manifest_.at("inputs"));
    m->outputs_ = descs(m->manifest_.at("outputs"));
    m->output_is_tuple_ = m->manifest_.value("output_is_tuple", false);
    format = m->manifest_.value("format", 0);
    target = m->manifest_.value("/target/kind"_json_pointer, std::string("?"));
  } catch (const nlohmann::json::exception& e) {
    rt_fail(path, ": the manifest is malformed: ", e.what());
  }
  if (format != 1) rt_fail(path, ": manifest format ", format, " is not supported by this runtime (1)");
  const Package& pkg = m->pkg_;
  SectionLookup sections = [&pkg](const std::string& name) { return pkg.find(name); };
  const Device& dev = device_for(sections, target, path);
  m->kernels_ = dev.load(sections, m->manifest_, device, path);

  // Weights are views of the mapping; the package stays mapped while any lives.
  std::map<std::string, Tensor>& weights = m->weights_;
  std::span<const uint8_t> wsec = m->pkg_.section("weights");
  auto keep = m->pkg_.keep_alive();
  try {
    for (const auto& w : m->manifest_.at("weights")) {
      std::string name = w.at("name");
      auto dtype = DType::parse(w.at("dtype").get<std::string>());
      if (!dtype) rt_fail(path, ": weight '", name, "' has unknown dtype ", w.at("dtype").dump());
      auto count = [&](const char* key) {
        int64_t v = json_int(w.at(key), rt_str(path, ": weight '", name, "': ", key));
        if (v < 0) rt_fail(path, ": weight '", name, "' has ", key, " ", v, ", not a count");
        return uint64_t(v);
      };
      uint64_t off = count("offset"), nbytes = count("nbytes");
      if (off > wsec.size() || nbytes > wsec.size() - off)
        rt_fail(path, ": weight '", name, "' lies outside the weights section");
      // The kernels load elements aligned (the writer aligns every weight to 64).
      const uint64_t align = std::bit_ceil(uint64_t(std::max(1, (dtype->bits + 7) / 8)));
      if ((uintptr_t(wsec.data()) + off) % align != 0)
        rt_fail(path, ": weight '", name, "' at offset ", off, " is not aligned to its ", align, "-byte elements");
      auto storage = Storage::wrap(wsec.data() + off, size_t(nbytes), keep);
      Tensor t(storage, *dtype, json_ints(w.at("shape"), rt_str(path, ": weight '", name, "': shape")));
      weights[name] = m->kernels_ ? m->kernels_->place_constant(t) : t;
    }
  } catch (const nlohmann::json::exception& e) {
    rt_fail(path, ": the weights index is malformed: ", e.what());
  }
  // Lifted constants: @transform_params computes them once, here; until it
  // has, they are uninitialised tensors of their recorded type, in the
  // memory the kernels use.
  std::shared_ptr<PoolAllocator> pool = m->kernels_ ? m->kernels_->make_pool() : nullptr;
  std::vector<std::pair<size_t, Tensor>> lifted;
  try {
    for (const auto& l : m->manifest_.value("lifted", nlohmann::json::array())) {
      std::string name = l.at("name");
      auto dtype = DType::parse(l.at("dtype").get<std::string>());
      if (!dtype) rt_fail(path, ": lifted constant '", name, "' has unknown dtype ", l.at("dtype").dump());
      Tensor t = Tensor::empty(*dtype, json_ints(l.at("shape"), rt_str(path, ": lifted '", name, "': shape")), pool.get());
      weights[name] = t;
      int64_t field = json_int(l.at("field"), rt_str(path, ": lifted '", name, "': field"));
      if (field < 0) rt_fail(path, ": lifted constant '", name, "' has field ", field);
      lifted.emplace_back(size_t(field), t);
    }
  } catch (const nlohmann::json::exception& e) {
    rt_fail(path, ": the lifted constants' index is malformed: ", e.what());
  }
  m->exe_ = Executable::deserialize(std::string_view(reinterpret_cast<const char*>(m->pkg_.section("bytecode").data()),
                                                     m->pkg_.section("bytecode").size()));
  m->vm_ = m->make_vm(pool);
  if (!lifted.empty()) {
    if (m->vm_->exe().find_function("transform_params") < 0)
      rt_fail(path, ": the package lists lifted constants but has no @transform_params");
    Value r = m->vm_->invoke("transform_params", {});
    const std::vector<Value>& fields = r.tuple("@transform_params' result");
    for (auto& [field, t] : lifted) {
      if (field >= fields.size())
        rt_fail(path, ": @transform_params returned ", fields.size(), " values, fewer than listed");
      const Tensor& v = fields[field].tensor("a lifted constant");
      if (!(v.dtype() == t.dtype()) || v.shape() != t.shape())
        rt_fail(path, ": @transform_params' field ", field, " is ", v.type_str(), ", the manifest says ", t.type_str());
      std::memcpy(t.data(), v.data(), t.nbytes());
    }
  }
  m->side_by_side_ = dev.host;
  return m;
}

std::unique_ptr<VirtualMachine> Model::make_vm(std::shared_ptr<PoolAllocator> pool) const {
  return std::make_unique<VirtualMachine>(
      exe_,
      [&](const std::string& name) {
        auto it = weights_.find(name);
        return it == weights_.end() ? Tensor() : it->second;
      },
      kernels_.get(), std::move(pool));
}

VirtualMachine* Model::acquire_vm() {
  {
    std::unique_lock lock(vms_mu_);
    if (!side_by_side_) vm_free_.wait(lock, [&] { return !vm_busy_; });
    if (!vm_busy_) {
      vm_busy_ = true;
      return vm_.get();
    }
    if (!idle_.empty()) {
      VirtualMachine* vm = idle_.back().release();
      idle_.pop_back();
      return vm;
    }
  }
  // A run overlaps the others: a VM of its own over the same weights and
  // kernels (made outside the lock; its allocator is its own).
  return make_vm(kernels_ ? kernels_->make_pool() : nullptr).release();
}

void Model::release_vm(VirtualMachine* vm) {
  {
    std::lock_guard lock(vms_mu_);
    if (vm == vm_.get()) {
      vm_busy_ = false;
    } else {
      idle_.emplace_back(vm);
      return;
    }
  }
  vm_free_.notify_one();
}

Value read_test_value(const std::string& path, const TensorDesc& desc) {
  if (!desc.sequence) return read_tensor_proto(path).tensor;
  std::vector<Value> items;
  for (NamedTensor& t : read_sequence_proto(path)) items.emplace_back(std::move(t.tensor));
  return make_tuple(std::move(items));
}

std::vector<Value> Model::run_values(std::vector<Value> inputs) {
  if (inputs.size() != inputs_.size()) rt_fail("the model takes ", inputs_.size(), " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool seq = inputs[i].is_tuple();
    if (seq != inputs_[i].sequence)
      rt_fail("input '", inputs_[i].name, "' is a ", inputs_[i].sequence ? "sequence" : "tensor", ", got a ",
              seq ? "sequence" : inputs[i].kind_name());
    if (seq)
      for (const Value& e : inputs[i].tuple())
        if (!inputs_[i].dtype.empty() && e.tensor("a sequence's element").dtype().str() != inputs_[i].dtype)
          rt_fail("input '", inputs_[i].name, "' is a sequence of ", inputs_[i].dtype, ", got a ",
                  e.tensor().dtype().str(), " element");
  }
  VirtualMachine* vm = acquire_vm();
  struct Release {
    Model* m;
    VirtualMachine* vm;
    ~Release() { m->release_vm(vm); }
  } release{this, vm};
  Value r = vm->invoke(0, std::move(inputs));
  if (output_is_tuple_) return r.tuple("the model's result");
  return {r};
}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outs;
  for (const Value& v : run_values(std::vector<Value>(inputs.begin(), inputs.end())))
    outs.push_back(v.tensor("an output (a sequence output needs run_values)"));
  return outs;
}

}  // namespace relax::rt
