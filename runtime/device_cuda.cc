// The cuda device (runtime/device.h): kernels.cuda and kernels.cuda.ptx
// under the CUDA driver (runtime/cuda.h).
#include <nlohmann/json.hpp>
#include <ostream>

#include "runtime/cuda.h"
#include "runtime/device.h"

namespace relax::rt {

bool CudaKernels::time_calls(bool on) const {
  set_profiling(on);
  return true;
}

std::vector<KernelProfile> CudaKernels::call_times() const {
  std::vector<KernelProfile> rows;
  for (const CudaKernelTime& t : profile()) rows.push_back({t.name, t.calls, t.ms, t.bytes});
  return rows;
}

double CudaKernels::peak_bytes_per_s() const { return cuda_driver_status().peak_bytes_per_s; }

void CudaKernels::report(nlohmann::json& rep, int runs, std::ostream* text) const {
  CudaGraphStats g = graph_stats();
  rep["cuda_graphs"] = {
      {"runs", runs}, {"captures", g.captures}, {"replays", g.replays}, {"direct", g.direct}, {"failed", g.failed}};
  if (text)
    *text << "cuda graphs, all runs: " << g.captures << " captured, " << g.replays << " replays, " << g.direct
          << " regions run directly, " << g.failed << " captures refused by the driver\n";
}

Device cuda_device() {
  Device d;
  d.name = "cuda";
  d.section = "kernels.cuda";
  // Also without kernels: a package whose only work is cuBLAS calls runs
  // under the CUDA runtime, with its weights on the device.
  d.load = [](const SectionLookup& sections, const nlohmann::json&, int device,
              const std::string& label) -> std::unique_ptr<Kernels> {
    auto text = [&](const char* name) {
      auto s = sections(name);
      return s ? std::string_view(reinterpret_cast<const char*>(s->data()), s->size()) : std::string_view();
    };
    bool has = sections("kernels.cuda").has_value();
    return CudaKernels::load(has ? text("kernels.cuda") : R"({"kernels": []})", has ? text("kernels.cuda.ptx") : "",
                             device, label + ":kernels.cuda");
  };
  return d;
}

}  // namespace relax::rt
