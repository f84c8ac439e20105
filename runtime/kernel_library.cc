#include "runtime/kernel_library.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace relax::rt {
namespace {

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

}  // namespace

std::unique_ptr<KernelLibrary> KernelLibrary::load(std::span<const uint8_t> so_bytes, std::string label) {
  if (so_bytes.empty()) rt_fail(label, ": the kernel object is empty");
  void* handle = nullptr;
  // glibc's dlopen returns an already loaded object whose name matches, so
  // the memfd stays open while the library is loaded: its /proc/self/fd/N
  // name cannot be reused by another library meanwhile.
  int fd = memfd_create("relax-kernels", MFD_CLOEXEC);
  if (fd >= 0) {
    if (!write_all(fd, so_bytes.data(), so_bytes.size())) {
      int err = errno;
      ::close(fd);
      rt_fail(label, ": cannot write the kernel object to memory: ", std::strerror(err));
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::string why = dl_error();
      ::close(fd);
      rt_fail(label, ": cannot load the kernel object: ", why);
    }
  } else {
    // No memfd (old kernel, seccomp): a private temporary file, unlinked
    // as soon as it is mapped.
    std::string path = (std::filesystem::temp_directory_path() / "relax-kernels-XXXXXX").string();
    int tfd = mkstemp(path.data());
    if (tfd < 0) rt_fail(label, ": cannot create a temporary file for the kernel object: ", std::strerror(errno));
    bool ok = write_all(tfd, so_bytes.data(), so_bytes.size());
    ::close(tfd);
    if (ok) handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string why = ok ? (handle ? "" : dl_error()) : std::string(std::strerror(errno));
    ::unlink(path.c_str());
    if (!handle) rt_fail(label, ": cannot load the kernel object: ", why);
  }
  std::unique_ptr<KernelLibrary> lib(new KernelLibrary(handle, fd, std::move(label)));

  auto* version = static_cast<const int32_t*>(lib->find_symbol("relax_abi_version"));
  if (!version) rt_fail(lib->label_, ": the kernel object does not export relax_abi_version");
  if (*version != kKernelAbiVersion)
    rt_fail(lib->label_, ": kernel ABI version ", *version, ", this runtime supports version ", kKernelAbiVersion);
  auto* hooks = static_cast<RelaxRuntimeHooks*>(lib->find_symbol("relax_runtime_hooks"));
  if (!hooks) rt_fail(lib->label_, ": the kernel object does not export relax_runtime_hooks");
  hooks->version = kKernelAbiVersion;
  hooks->num_threads = ThreadPool::global()->num_threads();
  hooks->parallel_for = &relax_rt_parallel_for;
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

void* KernelLibrary::find_symbol(std::string_view symbol) const {
  dlerror();
  return dlsym(handle_, std::string(symbol).c_str());
}

KernelFn KernelLibrary::kernel(std::string_view symbol) const {
  void* p = find_symbol(symbol);
  if (!p) rt_fail(label_, ": kernel ", symbol, " is not in the kernel object");
  return reinterpret_cast<KernelFn>(p);
}

}  // namespace relax::rt
