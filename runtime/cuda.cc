#include "runtime/cuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/cuda_internal.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/tensor.h"
#include "runtime/vm.h"

namespace relax::rt {

using namespace cuda_api;

namespace {

// The process's driver, opened once.
const Driver& driver() {
  if (const Driver* fake = installed_fake_driver()) return *fake;
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!d.lib) {
      const char* e = dlerror();
      d.why_not = std::string("no CUDA driver (") + (e ? e : "libcuda.so.1 not found") + ")";
      return;
    }
#define X(member, symbol, type)                            \
  d.member = reinterpret_cast<type>(dlsym(d.lib, symbol)); \
  if (!d.member && d.why_not.empty()) d.why_not = std::string("libcuda.so.1 lacks ") + symbol;
    RELAX_CUDA_FUNCTIONS(X)
#undef X
    if (!d.why_not.empty()) return;
    d.mem_prefetch = reinterpret_cast<decltype(d.mem_prefetch)>(dlsym(d.lib, "cuMemPrefetchAsync"));
    if (CUresult r = d.init(0); r != 0) {
      d.why_not = "the CUDA driver failed to initialise: " + d.error(r);
      return;
    }
    d.driver_version(&d.version);
    d.device_count(&d.devices);
    if (d.devices == 0) d.why_not = "the CUDA driver sees no device";
  });
  return d;
}

// The process's cuBLAS, opened on first use (a package without library
// calls never needs it): RELAX_CUBLAS (a path), else the sonames of CUDA 13
// and 12, else the toolkit's lib64.
const Cublas& cublas() {
  static Cublas b;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> tries;
    if (const char* p = std::getenv("RELAX_CUBLAS"); p && *p) {
      tries.push_back(p);
    } else {
      tries = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
      for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* h = std::getenv(env); h && *h) tries.push_back(std::string(h) + "/lib64/libcublas.so");
      tries.push_back("/usr/local/cuda/lib64/libcublas.so");
    }
    std::string errors;
    for (const std::string& t : tries) {
      if ((b.lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        b.path = t;
        break;
      }
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + std::string(e ? e : t + ": not found");
    }
    if (!b.lib) {
      b.why_not = "no cuBLAS (" + errors + ")";
      return;
    }
#define X(member, symbol, type)                            \
  b.member = reinterpret_cast<type>(dlsym(b.lib, symbol)); \
  if (!b.member && b.why_not.empty()) b.why_not = b.path + " lacks " + symbol;
    RELAX_CUBLAS_FUNCTIONS(X)
#undef X
  });
  return b;
}

}  // namespace

CudaDriverStatus cuda_driver_status() {
  const Driver& d = driver();
  CudaDriverStatus s;
  s.present = d.lib && d.why_not.empty();
  s.devices = d.devices;
  s.detail = !d.why_not.empty()
                 ? d.why_not
                 : "CUDA driver " + std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10) +
                       ", " + std::to_string(d.devices) + (d.devices == 1 ? " device" : " devices");
  if (s.present) {
    CUdevice dev = 0;
    char name[256] = {};
    int clock = 0, bus = 0;
    if (d.device_get(&dev, 0) == 0) {
      if (d.device_name(name, sizeof name - 1, dev) == 0) s.name = name;
      if (d.device_attribute(&clock, kAttrMemoryClockKHz, dev) == 0 &&
          d.device_attribute(&bus, kAttrMemoryBusBits, dev) == 0)
        s.peak_bytes_per_s = 2.0 * clock * 1e3 * bus / 8;  // double data rate
    }
  }
  return s;
}

CublasMatmulPlan plan_cublas_matmul(std::vector<int64_t> as, std::vector<int64_t> bs) {
  const char* what = "cublas.matmul";
  if (as.empty() || bs.empty()) rt_fail(what, ": operands must have rank >= 1");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  CublasMatmulPlan p;
  p.M = as[as.size() - 2], p.K = as.back(), p.N = bs.back();
  const int64_t M = p.M, K = p.K, N = p.N;
  if (bs[bs.size() - 2] != K) rt_fail(what, ": inner dims ", K, " and ", bs[bs.size() - 2], " differ");
  std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t rank = std::max(ab.size(), bb.size());
  ab.insert(ab.begin(), rank - ab.size(), 1);
  bb.insert(bb.begin(), rank - bb.size(), 1);
  std::vector<int64_t> ob(rank);
  int64_t a_batch = 1, b_batch = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (ab[i] != bb[i] && ab[i] != 1 && bb[i] != 1)
      rt_fail(what, ": batch dims ", ab[i], " and ", bb[i], " do not broadcast");
    ob[i] = ab[i] == 1 ? bb[i] : ab[i];
    p.batch *= ob[i], a_batch *= ab[i], b_batch *= bb[i];
  }
  for (int64_t v : {M, N, K, p.batch})
    if (v > INT32_MAX) rt_fail(what, ": ", v, " is beyond cuBLAS's int dims");
  if (p.batch == 0 || M == 0 || N == 0 || K == 0) return p;  // nothing to multiply (K = 0: the caller zeroes)
  CublasGemm g;
  g.m = N, g.n = M, g.k = K;
  g.ld_a = std::max<int64_t>(K, 1), g.ld_b = std::max<int64_t>(N, 1), g.ld_c = std::max<int64_t>(N, 1);
  g.c_stride = M * N;
  // One call when each operand is either one matrix for every batch or
  // has the whole output batch; else one per output matrix.
  if ((a_batch == 1 || ab == ob) && (b_batch == 1 || bb == ob)) {
    g.a_stride = a_batch == 1 ? 0 : M * K;
    g.b_stride = b_batch == 1 ? 0 : K * N;
    g.batch = p.batch;
    p.calls.push_back(g);
    return p;
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < p.batch; ++i) {
    int64_t ia = 0, ib = 0;
    for (size_t k = 0; k < rank; ++k) {
      ia = ia * ab[k] + (ab[k] == 1 ? 0 : idx[k]);
      ib = ib * bb[k] + (bb[k] == 1 ? 0 : idx[k]);
    }
    CublasGemm one = g;
    one.a_offset = ia * M * K, one.b_offset = ib * K * N, one.c_offset = i * M * N;
    one.batch = 1;
    p.calls.push_back(one);
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < ob[k]) break;
      idx[k] = 0;
    }
  }
  return p;
}

CublasStatus cublas_status() {
  const Cublas& b = cublas();
  return {b.why_not.empty(), b.why_not.empty() ? b.path : b.why_not};
}

struct CudaKernels::Impl {
  const Driver* d = nullptr;
  CUdevice device = 0;
  Handle ctx = nullptr, module = nullptr;
  // Every launch, cuBLAS call and graph goes to this stream (the legacy
  // default stream cannot be captured).
  Handle stream = nullptr;
  std::string label;
  int block = 256;
  struct Stage {
    Handle fn = nullptr;
    std::vector<int64_t> threads;  // postfix code over the shape args
    // The stage without its register tile, when it has one.
    Handle plain_fn = nullptr;
    std::vector<int64_t> plain_threads;
    int64_t tile = 1;
    // The stage tiled through shared memory, when the compiler made it.
    Handle shared_fn = nullptr;
    std::vector<int64_t> blocks, rows, cols, depth;  // postfix code
    int64_t block_threads = 0, block_rows = 1, block_cols = 1, block_depth = 1;
    // The stage as a block per row (its loops over the block's threads).
    Handle rows_fn = nullptr;
    std::vector<int64_t> row_count, row_work;  // postfix code
    int64_t row_threads = 0;
  };
  int force_shared = -1;  // RELAX_CUDA_SHARED=0|1
  int force_rows = -1;    // RELAX_CUDA_ROWS=0|1
  struct Entry {
    std::string name;
    std::vector<std::pair<DType, size_t>> params;  // dtype, ndim
    size_t num_inputs = 0;
    int64_t slots = 0;
    std::vector<Stage> stages;
  };
  std::map<std::string, Entry, std::less<>> entries;
  // The managed memory this runtime allocated (pool blocks, weights): the
  // kernels take pointers into it as they are.
  mutable std::mutex mu;
  std::map<uintptr_t, size_t> ranges;
  Handle blas = nullptr;  // the cuBLAS handle, made on the first library call

  // CUDA graphs: per region (the compiler's name for it), the graphs
  // instantiated so far, most recently used first, by key (the pointers,
  // shapes and symbolic values the region's kernels see), and the staging
  // buffers that give a caller's host tensors a fixed device address.
  struct Graph {
    std::string key;
    Handle exec = nullptr;
  };
  struct Region {
    std::list<Graph> graphs;
    bool broken = false;  // the driver refused a capture, or graphs never repeat: run directly from then on
    int64_t captures = 0, hits = 0;
    std::vector<std::pair<void*, size_t>> staging;
  };
  static constexpr size_t kGraphsPerRegion = 32;
  static constexpr int64_t kNoRepeat = 4;
  bool graphs_on = true;  // RELAX_CUDA_GRAPH=0 turns them off
  bool capturing = false;  // a region's launches are being recorded into a graph
  // Managed blocks are migrated to the device in bulk before the launches
  // that use them (prefetch_to_device); RELAX_CUDA_PREFETCH=0 leaves it
  // to page faults.
  bool prefetch = true;
  std::map<std::string, Region, std::less<>> regions;
  CudaGraphStats stats;
  int uses_blas = -1;  // the package calls cuBLAS (-1: not known yet)

  // Profiling: each launch timed on its own between two events (graphs
  // off), with the bytes of its buffers.
  bool profiling = false;
  Handle ev_start = nullptr, ev_end = nullptr;
  std::map<std::string, CudaKernelTime> times;

  // Runs `go` (which enqueues on the stream), timed when profiling.
  template <typename F>
  void timed(const std::string& name, double bytes, F go) {
    if (!profiling) return go();
    if (!ev_start) {
      check(d->event_create(&ev_start, 0), "cuEventCreate");
      check(d->event_create(&ev_end, 0), "cuEventCreate");
    }
    check(d->event_record(ev_start, stream), "cuEventRecord");
    go();
    check(d->event_record(ev_end, stream), "cuEventRecord");
    check(d->event_synchronize(ev_end), "running " + name);
    float ms = 0;
    check(d->event_elapsed(&ms, ev_start, ev_end), "cuEventElapsedTime");
    CudaKernelTime& t = times[name];
    t.name = name;
    ++t.calls;
    t.ms += ms;
    t.bytes += bytes;
  }

  ~Impl() {
    for (auto& [name, r] : regions) {
      for (Graph& g : r.graphs) d->graph_exec_destroy(g.exec);
      for (auto& [p, bytes] : r.staging) free_managed(p);
    }
    if (blas) blas_api().destroy(blas);
    if (ev_start) d->event_destroy(ev_start);
    if (ev_end) d->event_destroy(ev_end);
    if (stream) d->stream_destroy(stream);
    if (module) d->module_unload(module);
    if (ctx) d->primary_release(device);
  }

  void check(CUresult r, const std::string& what) const {
    if (r != 0) rt_fail(label, ": ", what, ": ", d->error(r));
  }

  void* alloc_managed(size_t bytes) {
    CUdeviceptr p = 0;
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    check(d->mem_alloc_managed(&p, std::max<size_t>(bytes, 64), kAttachGlobal),
          "cannot allocate " + std::to_string(bytes) + " bytes of managed memory");
    std::lock_guard<std::mutex> lock(mu);
    ranges[uintptr_t(p)] = std::max<size_t>(bytes, 64);
    return reinterpret_cast<void*>(p);
  }

  void free_managed(void* p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ranges.erase(uintptr_t(p));
      resident.erase(uintptr_t(p));
    }
    d->mem_free(CUdeviceptr(reinterpret_cast<uintptr_t>(p)));
  }

  bool owns(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lock(mu);
    auto it = ranges.upper_bound(uintptr_t(p));
    if (it == ranges.begin()) return false;
    --it;
    return uintptr_t(p) + bytes <= it->first + it->second;
  }

  // A buffer from elsewhere (a caller's tensor on the host heap) goes
  // through managed memory for one call: copied in (an input), and back
  // after it (an output) by finish().
  struct Mirror {
    void* host;
    void* managed;
    size_t bytes;
    bool output;
  };
  using Mirrors = std::vector<Mirror>;
  CUdeviceptr device_ptr(void* p, size_t bytes, bool output, Mirrors& m) {
    if (!p || bytes == 0 || owns(p, bytes)) return CUdeviceptr(reinterpret_cast<uintptr_t>(p));
    void* managed = alloc_managed(bytes);
    if (!output) std::memcpy(managed, p, bytes);
    m.push_back({p, managed, bytes, output});
    return CUdeviceptr(reinterpret_cast<uintptr_t>(managed));
  }
  void finish(Mirrors& m, const std::string& what) {
    if (m.empty()) return;
    check(d->ctx_synchronize(), what);
    for (const Mirror& x : m) {
      if (x.output) std::memcpy(x.host, x.managed, x.bytes);
      free_managed(x.managed);
    }
    m.clear();
  }

  // Moves the managed blocks a launch touches to the device in bulk before
  // it runs, each once between two points where the host may have touched
  // data (synchronize() forgets them), so kernels do not fault pages over
  // one by one. Not while capturing: a replay is preceded by its own.
  std::set<uintptr_t> resident;
  void prefetch_to_device(const CUdeviceptr* ptrs, size_t n) {
    if (!prefetch || capturing || !d->mem_prefetch) return;
    for (size_t k = 0; k < n; ++k) {
      if (!ptrs[k]) continue;
      uintptr_t base = 0;
      size_t bytes = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = ranges.upper_bound(uintptr_t(ptrs[k]));
        if (it == ranges.begin()) continue;
        --it;
        if (uintptr_t(ptrs[k]) >= it->first + it->second || !resident.insert(it->first).second) continue;
        base = it->first, bytes = it->second;
      }
      if (d->mem_prefetch(CUdeviceptr(base), bytes, device, stream) != 0) {
        // A device without concurrent managed access refuses it: page faults then, as before.
        prefetch = false;
        if (std::getenv("RELAX_CUDA_GRAPH_VERBOSE"))
          std::fprintf(stderr, "%s: cuMemPrefetchAsync refused; kernels fault managed pages in\n", label.c_str());
        return;
      }
    }
  }
  void forget_resident() {
    std::lock_guard<std::mutex> lock(mu);
    resident.clear();
  }

  // Shared-memory tiles when the blocks are at least half used and a chunk
  // of reduction steps is full (as on Vulkan GPUs: runtime/vulkan_exec.cc).
  bool use_shared(const Stage& st, int64_t rows, int64_t cols, int64_t depth) const {
    if (force_shared >= 0) return force_shared;
    int64_t blocks = (rows + st.block_rows - 1) / st.block_rows * ((cols + st.block_cols - 1) / st.block_cols);
    return depth >= st.block_depth && 2 * rows * cols >= blocks * st.block_rows * st.block_cols;
  }

  // A block per row when the rows are too few to fill the GPU and have work
  // to split, or are long (Vulkan's rule for GPUs: runtime/vulkan_exec.cc).
  bool use_rows(int64_t rows, int64_t work) const {
    if (force_rows >= 0) return force_rows;
    return work > 16384 || (rows < 65536 && work >= 256);
  }

  // One launch of `fn` on `grid` blocks of `threads` (none when `grid` is
  // not positive), timed when profiling as the kernel and its variant.
  void launch(Handle fn, int64_t grid, int64_t threads, const std::string& kernel, const char* variant, void** args,
              double bytes) {
    if (grid <= 0) return;
    if (grid > INT32_MAX) rt_fail(label, ": kernel ", kernel, variant, ": ", grid, " blocks are beyond one launch");
    auto go = [&] {
      if (CUresult r = d->launch(fn, unsigned(grid), 1, 1, unsigned(threads), 1, 1, 0, stream, args, nullptr); r != 0)
        rt_fail(label, ": launching ", kernel, variant, ": ", d->error(r));
    };
    if (profiling)
      timed(kernel + variant, bytes, go);
    else
      go();
  }

  int32_t call(const Entry& e, void* const* buffers, const int64_t* shape_args) {
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    Mirrors mirrors;
    std::vector<CUdeviceptr> ptrs(e.params.size(), 0);
    int64_t slot = 0;
    double all_bytes = 0;  // read and written at least once: what a memory-bound kernel moves
    for (size_t k = 0; k < e.params.size(); ++k) {
      int64_t numel = 1;
      for (size_t i = 0; i < e.params[k].second; ++i) numel *= shape_args[slot++];
      size_t bytes = size_t(e.params[k].first.storage_bytes(numel));
      all_bytes += double(bytes);
      ptrs[k] = device_ptr(buffers[k], bytes, k >= e.num_inputs, mirrors);
    }
    prefetch_to_device(ptrs.data(), ptrs.size());
    std::vector<void*> args;
    for (CUdeviceptr& p : ptrs) args.push_back(&p);
    for (int64_t s = 0; s < e.slots; ++s) args.push_back(const_cast<int64_t*>(shape_args + s));
    auto eval = [&](const std::vector<int64_t>& code) {
      return eval_shape_code(code.data(), int64_t(code.size()), shape_args, e.slots);
    };
    for (const Stage& st : e.stages) {
      if (st.shared_fn && use_shared(st, eval(st.rows), eval(st.cols), eval(st.depth))) {
        launch(st.shared_fn, eval(st.blocks), st.block_threads, e.name, " (shared)", args.data(), all_bytes);
        continue;
      }
      if (st.rows_fn) {
        int64_t rows = eval(st.row_count);
        if (use_rows(rows, eval(st.row_work))) {
          launch(st.rows_fn, rows, st.row_threads, e.name, " (rows)", args.data(), all_bytes);
          continue;
        }
      }
      int64_t threads = eval(st.threads);
      if (st.plain_fn) {
        // Tiles mostly past the extents (a matmul of one row) compute
        // clamped copies for nothing: one row per thread then.
        int64_t plain = eval(st.plain_threads);
        if (threads * st.tile >= 2 * plain) {
          launch(st.plain_fn, (plain + block - 1) / block, block, e.name, " (plain)", args.data(), all_bytes);
          continue;
        }
      }
      launch(st.fn, (threads + block - 1) / block, block, e.name, "", args.data(), all_bytes);
    }
    finish(mirrors, "running " + e.name);
    return 0;
  }

  // ---- cuBLAS -----------------------------------------------------------------------

  // cuBLAS: the process's, or the fake of the driver this runtime was
  // loaded with (runtime/cuda_testing.h).
  const Cublas* fake_blas = nullptr;
  const Cublas& blas_api() const { return fake_blas ? *fake_blas : cublas(); }

  Handle blas_handle() {
    if (blas) return blas;
    const Cublas& b = blas_api();
    if (!b.why_not.empty()) rt_fail(label, ": cublas.matmul: ", b.why_not);
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    if (BlasStatus r = b.create(&blas); r != 0) rt_fail(label, ": cublasCreate: ", b.error(r));
    if (BlasStatus r = b.set_stream(blas, stream); r != 0) rt_fail(label, ": cublasSetStream: ", b.error(r));
    return blas;
  }

  // cublas.matmul(a, b, out, workspace): numpy matmul (1-D operands
  // promoted, batch dims broadcast) as one strided batched GEMM, or one
  // GEMM per output matrix where a broadcast is partial. Row-major
  // C = A B is column-major C^T = B^T A^T: cuBLAS gets B first.
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& ws) {
    const char* what = "cublas.matmul";
    DType t = a.dtype();
    int type = 0, compute = kBlasCompute32F;
    if (t == DType::f32()) {
      type = kCudaR32F;
    } else if (t == DType::f(64)) {
      type = kCudaR64F, compute = kBlasCompute64F;
    } else if (t == DType::f16()) {
      type = kCudaR16F;
    } else if (t == DType::bf16()) {
      type = kCudaR16BF;
    } else {
      rt_fail(what, ": needs f32, f64, f16 or bf16 operands, got ", a.type_str());
    }
    if (!(b.dtype() == t) || !(out.dtype() == t))
      rt_fail(what, ": operands of one dtype expected, got ", a.type_str(), ", ", b.type_str(), " -> ", out.type_str());
    CublasMatmulPlan plan = plan_cublas_matmul(a.shape(), b.shape());
    const int64_t M = plan.M, N = plan.N, K = plan.K;
    if (out.numel() != plan.batch * M * N) rt_fail(what, ": the output ", out.type_str(), " has the wrong size");
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    Mirrors mirrors;
    CUdeviceptr pa = device_ptr(a.data(), a.nbytes(), false, mirrors);
    CUdeviceptr pb = device_ptr(b.data(), b.nbytes(), false, mirrors);
    CUdeviceptr pc = device_ptr(out.data(), out.nbytes(), true, mirrors);
    CUdeviceptr pw = device_ptr(ws.data(), ws.nbytes(), true, mirrors);
    const CUdeviceptr ps[] = {pa, pb, pc, pw};
    prefetch_to_device(ps, 4);
    if (out.numel() == 0) return finish(mirrors, what);
    if (K == 0) {
      check(d->memset_async(pc, 0, out.nbytes(), stream), "cublas.matmul: zeroing the output");
      return finish(mirrors, what);
    }
    const Cublas& cb = blas_api();
    Handle h = blas_handle();
    if (BlasStatus r = cb.set_workspace(h, reinterpret_cast<void*>(uintptr_t(pw)), ws.nbytes()); r != 0)
      rt_fail(label, ": cublasSetWorkspace: ", cb.error(r));
    float alpha32 = 1, beta32 = 0;
    double alpha64 = 1, beta64 = 0;
    const void* alpha = compute == kBlasCompute64F ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = compute == kBlasCompute64F ? static_cast<const void*>(&beta64) : &beta32;
    const CUdeviceptr esize = CUdeviceptr(t.bits / 8);
    double bytes = double(a.nbytes() + b.nbytes() + out.nbytes());
    timed("cublas.matmul", bytes, [&] {
      for (const CublasGemm& g : plan.calls) {
        auto at = [&](CUdeviceptr base, int64_t elements) { return reinterpret_cast<void*>(base + elements * esize); };
        BlasStatus r =
            cb.gemm(h, kBlasOpN, kBlasOpN, int(g.m), int(g.n), int(g.k), alpha, at(pb, g.b_offset), type, int(g.ld_b),
                    g.b_stride, at(pa, g.a_offset), type, int(g.ld_a), g.a_stride, beta, at(pc, g.c_offset), type,
                    int(g.ld_c), g.c_stride, int(g.batch), compute, kBlasGemmDefault);
        if (r != 0) rt_fail(label, ": cublasGemmStridedBatchedEx (", M, "x", K, " by ", K, "x", N, "): ", cb.error(r));
      }
    });
    finish(mirrors, what);
  }

  // ---- CUDA graphs ------------------------------------------------------------------

  // The blocks of the tensors a region's graph reads and writes, before it is launched.
  void prefetch_captured(const std::vector<Value>& captured) {
    std::vector<CUdeviceptr> ptrs;
    for (const Value& v : captured)
      if (const auto* t = std::get_if<Tensor>(&v.v); t && t->nbytes())
        ptrs.push_back(CUdeviceptr(reinterpret_cast<uintptr_t>(t->data())));
    prefetch_to_device(ptrs.data(), ptrs.size());
  }

  // Runs a region (a closure over the tensors and symbolic values its
  // kernels use): replays the graph captured for the same key, or captures
  // one by running the closure while the stream records, then launches it.
  void run_region(VirtualMachine& vm, const std::string& name, const Value& fn) {
    Region& region = regions[name];
    if (!graphs_on || profiling || region.broken) {
      ++stats.direct;
      vm.call(fn, {}, /*wait=*/false);
      return;
    }
    check(d->ctx_set_current(ctx), "cuCtxSetCurrent");
    const auto& closure = std::get<Closure>(fn.v);
    // A caller's host tensor gets a staging buffer of the region's, so the
    // graph sees the same address every time; the region only reads them
    // (what it writes, the VM allocated).
    std::vector<Value> captured = closure->captured;
    size_t staged = 0;
    bool waited = false;
    for (Value& v : captured) {
      const auto* t = std::get_if<Tensor>(&v.v);
      if (!t || t->nbytes() == 0 || owns(t->data(), t->nbytes())) continue;
      if (!waited) {  // the graph's last replay may still read the buffers
        check(d->stream_synchronize(stream), "waiting for the region's last run");
        waited = true;
      }
      if (region.staging.size() <= staged) region.staging.emplace_back(nullptr, 0);
      auto& [buf, cap] = region.staging[staged++];
      if (cap < t->nbytes()) {
        if (buf) free_managed(buf);
        buf = alloc_managed(t->nbytes());
        cap = t->nbytes();
      }
      std::memcpy(buf, t->data(), t->nbytes());
      {
        std::lock_guard<std::mutex> lock(mu);
        resident.erase(uintptr_t(buf));
      }
      v = Tensor(Storage::wrap(buf, cap, nullptr), t->dtype(), t->shape());
    }
    std::string key;
    auto add = [&key](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
    for (const Value& v : captured) {
      if (const auto* t = std::get_if<Tensor>(&v.v)) {
        void* p = t->data();
        add(&p, sizeof p);
        DType dt = t->dtype();
        add(&dt, sizeof dt);
        for (int64_t x : t->shape()) add(&x, sizeof x);
      } else if (v.is_shape()) {
        for (int64_t x : v.shape()) add(&x, sizeof x);
      } else if (v.is_int()) {
        int64_t x = v.int_value();
        add(&x, sizeof x);
      }
      key.push_back(';');
    }
    for (auto it = region.graphs.begin(); it != region.graphs.end(); ++it) {
      if (it->key != key) continue;
      region.graphs.splice(region.graphs.begin(), region.graphs, it);
      ++stats.replays;
      ++region.hits;
      prefetch_captured(captured);
      check(d->graph_launch(it->exec, stream), "replaying the CUDA graph of " + name);
      return;
    }
    auto local = std::make_shared<ClosureObj>(ClosureObj{closure->function, std::move(captured)});
    Value staged_fn{Closure(local)};
    // A region whose key changes every call (it writes an output the
    // caller keeps, in fresh memory each time) would be captured for
    // nothing: after kNoRepeat captures without a replay it runs directly.
    if (region.captures >= kNoRepeat && region.hits == 0) {
      region.broken = true;
      ++stats.direct;
      vm.call(staged_fn, {}, /*wait=*/false);
      return;
    }
    // cuBLAS makes its handle outside the capture (cublasCreate allocates).
    if (uses_blas < 0) {
      const auto& names = vm.exe().builtins;
      uses_blas = std::find(names.begin(), names.end(), "cublas.matmul") != names.end();
    }
    if (uses_blas) blas_handle();
    Handle graph = nullptr;
    std::string why;
    if (CUresult rb = d->begin_capture(stream, kCaptureThreadLocal); rb != 0) {
      why = "starting the capture: " + d->error(rb);
    } else {
      capturing = true;
      try {
        vm.call(staged_fn, {}, /*wait=*/false);
      } catch (const Error& e) {
        why = e.what();
      }
      capturing = false;
      CUresult r = d->end_capture(stream, &graph);
      if (why.empty() && r != 0) why = d->error(r);
    }
    Handle exec = nullptr;
    if (why.empty()) {
      if (CUresult ri = d->graph_instantiate(&exec, graph, 0); ri != 0) why = "instantiating: " + d->error(ri);
    }
    if (graph) d->graph_destroy(graph);
    if (!why.empty()) {
      // Nothing ran while capturing: run the region directly. An error of
      // its own (a shape check) propagates from there; otherwise the
      // driver refused the capture, and the region runs directly from now on.
      ++stats.direct;
      vm.call(staged_fn, {}, /*wait=*/false);
      ++stats.failed;
      region.broken = true;
      if (std::getenv("RELAX_CUDA_GRAPH_VERBOSE"))
        std::fprintf(stderr, "%s: region %s runs without a CUDA graph: %s\n", label.c_str(), name.c_str(), why.c_str());
      return;
    }
    ++stats.captures;
    ++region.captures;
    region.graphs.push_front({std::move(key), exec});
    if (region.graphs.size() > kGraphsPerRegion) {
      d->graph_exec_destroy(region.graphs.back().exec);
      region.graphs.pop_back();
    }
    ++stats.replays;
    prefetch_captured(local->captured);
    check(d->graph_launch(exec, stream), "launching the CUDA graph of " + name);
  }
};

namespace {

// The VM's pool blocks, in managed memory.
struct ManagedBlocks : BlockSource {
  explicit ManagedBlocks(std::shared_ptr<CudaKernels::Impl> impl) : impl_(std::move(impl)) {}
  void* allocate(size_t bytes) override { return impl_->alloc_managed(bytes); }
  void release(void* block) override { impl_->free_managed(block); }
  std::shared_ptr<CudaKernels::Impl> impl_;
};

}  // namespace

std::unique_ptr<CudaKernels> CudaKernels::load(std::string_view metadata, std::string_view ptx, int device,
                                               const std::string& label) {
  const Driver& d = driver();
  if (!d.why_not.empty()) rt_fail(label, ": cannot run a cuda package: ", d.why_not);
  if (device < 0 || device >= d.devices)
    rt_fail(label, ": no CUDA device ", device, " (the driver sees ", d.devices, ")");
  auto impl = std::make_shared<Impl>();
  impl->d = &d;
  impl->fake_blas = installed_fake_cublas();
  impl->label = label;
  if (const char* f = std::getenv("RELAX_CUDA_SHARED"); f && (*f == '0' || *f == '1')) impl->force_shared = *f - '0';
  impl->check(d.device_get(&impl->device, device), "cuDeviceGet");
  impl->check(d.primary_retain(&impl->ctx, impl->device), "cuDevicePrimaryCtxRetain");
  impl->check(d.ctx_set_current(impl->ctx), "cuCtxSetCurrent");
  impl->check(d.stream_create(&impl->stream, kStreamNonBlocking), "cuStreamCreate");
  if (const char* g = std::getenv("RELAX_CUDA_GRAPH"); g && *g == '0') impl->graphs_on = false;
  if (const char* p = std::getenv("RELAX_CUDA_PREFETCH"); p && *p == '0') impl->prefetch = false;
  if (const char* r = std::getenv("RELAX_CUDA_ROWS"); r && (*r == '0' || *r == '1')) impl->force_rows = *r - '0';
  std::string text(ptx);  // NUL-terminated for the driver
  char log[8192] = {};
  if (!text.empty()) {
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferBytes};
  void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
  if (CUresult r = d.module_load(&impl->module, text.c_str(), 2, options, values); r != 0)
    rt_fail(label, ": the driver could not load the PTX: ", d.error(r), log[0] ? std::string(": ") + log : "");
  }
  try {
    nlohmann::json meta = nlohmann::json::parse(metadata);
    impl->block = meta.value("block", 256);
    for (const auto& k : meta.at("kernels")) {
      Impl::Entry e;
      e.name = k.at("name");
      e.num_inputs = k.at("num_inputs");
      e.slots = k.at("slots");
      for (const auto& p : k.at("params")) {
        auto dt = DType::parse(p.at("dtype").get<std::string>());
        if (!dt) rt_fail(label, ": kernel ", e.name, ": unknown dtype ", p.at("dtype").dump());
        e.params.emplace_back(*dt, p.at("ndim").get<size_t>());
      }
      for (const auto& s : k.at("stages")) {
        Impl::Stage st;
        std::string symbol = s.at("symbol");
        impl->check(d.module_function(&st.fn, impl->module, symbol.c_str()), "kernel " + symbol);
        st.threads = s.at("threads").get<std::vector<int64_t>>();
        if (s.contains("plain")) {
          std::string psym = s.at("plain").at("symbol");
          impl->check(d.module_function(&st.plain_fn, impl->module, psym.c_str()), "kernel " + psym);
          st.plain_threads = s.at("plain").at("threads").get<std::vector<int64_t>>();
          st.tile = std::max<int64_t>(s.at("plain").at("tile").get<int64_t>(), 1);
        }
        if (s.contains("shared")) {
          const auto& sh = s.at("shared");
          std::string bsym = sh.at("symbol");
          impl->check(d.module_function(&st.shared_fn, impl->module, bsym.c_str()), "kernel " + bsym);
          st.blocks = sh.at("blocks").get<std::vector<int64_t>>();
          st.rows = sh.at("rows").get<std::vector<int64_t>>();
          st.cols = sh.at("cols").get<std::vector<int64_t>>();
          st.depth = sh.at("depth").get<std::vector<int64_t>>();
          st.block_threads = sh.at("threads");
          auto block = sh.at("block").get<std::vector<int64_t>>();
          if (block.size() != 3 || st.block_threads <= 0 || st.block_threads > 1024)
            rt_fail(label, ": kernel ", bsym, ": malformed shared-memory tile");
          st.block_rows = std::max<int64_t>(block[0], 1);
          st.block_cols = std::max<int64_t>(block[1], 1);
          st.block_depth = std::max<int64_t>(block[2], 1);
        }
        if (s.contains("rows")) {
          const auto& r = s.at("rows");
          std::string rsym = r.at("symbol");
          impl->check(d.module_function(&st.rows_fn, impl->module, rsym.c_str()), "kernel " + rsym);
          st.row_count = r.at("blocks").get<std::vector<int64_t>>();
          st.row_work = r.at("work").get<std::vector<int64_t>>();
          st.row_threads = r.at("threads");
          if (st.row_threads <= 0 || st.row_threads > 1024) rt_fail(label, ": kernel ", rsym, ": malformed rows");
        }
        e.stages.push_back(std::move(st));
      }
      impl->entries[e.name] = std::move(e);
    }
  } catch (const nlohmann::json::exception& e) {
    rt_fail(label, ": the kernel index is malformed: ", e.what());
  }
  return std::unique_ptr<CudaKernels>(new CudaKernels(std::move(impl)));
}

CudaKernels::~CudaKernels() = default;

KernelCall CudaKernels::kernel_call(std::string_view name) const {
  auto it = impl_->entries.find(name);
  if (it == impl_->entries.end()) rt_fail(impl_->label, ": no kernel ", name);
  std::shared_ptr<Impl> impl = impl_;
  const Impl::Entry* e = &it->second;
  return [impl, e](void* const* buffers, const int64_t* shape_args) { return impl->call(*e, buffers, shape_args); };
}

std::shared_ptr<PoolAllocator> CudaKernels::make_pool() const {
  return std::make_shared<PoolAllocator>(SIZE_MAX, std::make_shared<ManagedBlocks>(impl_));
}

Tensor CudaKernels::place_constant(const Tensor& t) const {
  size_t n = t.nbytes();
  void* m = impl_->alloc_managed(n);
  if (n) std::memcpy(m, t.data(), n);
  std::shared_ptr<Impl> impl = impl_;
  std::shared_ptr<const void> owner(m, [impl](const void* p) { impl->free_managed(const_cast<void*>(p)); });
  return Tensor(Storage::wrap(m, std::max<size_t>(n, 1), owner), t.dtype(), t.shape());
}

CudaGraphStats CudaKernels::graph_stats() const { return impl_->stats; }

void CudaKernels::set_profiling(bool on) const { impl_->profiling = on; }

std::vector<CudaKernelTime> CudaKernels::profile() const {
  std::vector<CudaKernelTime> out;
  for (const auto& [name, t] : impl_->times) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const CudaKernelTime& x, const CudaKernelTime& y) { return x.ms > y.ms; });
  return out;
}

namespace {

CudaKernels::Impl& cuda_of(BuiltinCall& c, const char* what) {
  const auto* k = dynamic_cast<const CudaKernels*>(c.vm.kernels());
  if (!k) rt_fail(what, ": runs only under the CUDA runtime (a package built with --target cuda)");
  return k->impl();
}

// cublas.matmul(a, b, out, workspace)
void cublas_matmul(BuiltinCall& c) {
  cuda_of(c, "cublas.matmul")
      .matmul(c.arg(0).tensor("cublas.matmul a"), c.arg(1).tensor("cublas.matmul b"),
              c.arg(2).tensor("cublas.matmul out"), c.arg(3).tensor("cublas.matmul workspace"));
}

// cuda.graph_run(region, name): passes/rewrite_cuda_graph.cc. Under
// another runtime (a module rewritten for a test on the cpu target) the
// region runs directly.
void cuda_graph_run(BuiltinCall& c) {
  const std::string& name = c.arg(1).str("cuda.graph_run region name");
  const auto* k = dynamic_cast<const CudaKernels*>(c.vm.kernels());
  if (!k) {
    c.vm.call(c.arg(0), {}, /*wait=*/false);
    return;
  }
  k->impl().run_region(c.vm, name, c.arg(0));
}

}  // namespace

// Neither touches tensor data on the host: kernel calls made before them
// need not have finished.
void register_cuda_builtins() {
  register_builtin("cublas.matmul", cublas_matmul, /*touches_data=*/false);
  register_builtin("cuda.graph_run", cuda_graph_run, /*touches_data=*/false);
}

void CudaKernels::synchronize() const {
  impl_->check(impl_->d->ctx_set_current(impl_->ctx), "cuCtxSetCurrent");
  impl_->check(impl_->d->stream_synchronize(impl_->stream), "running the kernels");
  impl_->forget_resident();  // the host may touch any block now
}

}  // namespace relax::rt
