// A loaded package, ready to run: the manifest read, the kernels loaded,
// the weights mapped (not copied) and the VM built. This is what relax-run
// and the C API hold.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/kernel_library.h"
#include "runtime/package.h"
#include "runtime/vm.h"

namespace relax::rt {

struct TensorDesc {
  std::string name;
  std::string dtype;              // "f32"; empty when unknown
  std::vector<std::string> dims;  // "3", "batch", "n + 1"; empty with ndim -1 when unknown
  int ndim = -1;
  // An ONNX sequence (a list of tensors, a VM tuple): dtype and ndim are its
  // tensors'; dims are empty.
  bool sequence = false;
};

// A backend-test data file (input_K.pb, output_K.pb) as the value `desc`
// describes: a TensorProto, or for a sequence a SequenceProto read as a
// tuple of tensors. Throws rt::Error naming the file.
Value read_test_value(const std::string& path, const TensorDesc& desc);

class Model {
 public:
  // Opens and validates `path` (throws rt::Error naming the file). Its
  // kernels go to the device its kernel section selects (runtime/device.h);
  // a GPU package runs on that kind's device `device` (relax-run
  // --list-devices numbers them).
  static std::unique_ptr<Model> load(const std::string& path, int device = 0);

  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  const nlohmann::json& manifest() const { return manifest_; }

  // Runs @main. Inputs in manifest order; outputs in manifest order. A
  // model with sequence inputs or outputs needs run_values.
  //
  // Safe to call from several threads at once. A cpu package runs them
  // side by side: each run takes a VM of its own (registers, memo slots,
  // allocator), made the first time that many run at once and kept for
  // the next, over the one copy of the weights and kernels. A vulkan or
  // cuda package runs them one at a time (one queue, one stream).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // The same with any values: a sequence is a tuple of tensors.
  std::vector<Value> run_values(std::vector<Value> inputs);

  // The first VM: the one a run takes when no other run is in flight
  // (relax-run's --profile reads its timings).
  VirtualMachine& vm() { return *vm_; }
  // The package's kernels (cpu shared object, Vulkan pipelines, CUDA
  // module); null when it has none.
  const Kernels* kernels() const { return kernels_.get(); }

 private:
  Package pkg_;
  nlohmann::json manifest_;
  std::vector<TensorDesc> inputs_, outputs_;
  bool output_is_tuple_ = false;
  std::unique_ptr<Kernels> kernels_;
  std::unique_ptr<VirtualMachine> vm_;

  // What every VM is made from: the bytecode and the weights (the lifted
  // constants computed by the first VM at load).
  Executable exe_;
  std::map<std::string, Tensor> weights_;
  bool side_by_side_ = false;  // a host device (Device::host): overlapping runs each take a VM
  std::mutex vms_mu_;
  std::condition_variable vm_free_;
  bool vm_busy_ = false;                               // vm_ is running
  std::vector<std::unique_ptr<VirtualMachine>> idle_;  // the others, not running

  std::unique_ptr<VirtualMachine> make_vm(std::shared_ptr<PoolAllocator> pool) const;
  VirtualMachine* acquire_vm();
  void release_vm(VirtualMachine* vm);
};

}  // namespace relax::rt
