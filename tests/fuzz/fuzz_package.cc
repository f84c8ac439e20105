// Fuzz target of the package loader and the VM: the input is a whole
// `.rpkg`; it is loaded (header, section table, checksum, manifest,
// weights index, bytecode and its verifier, @transform_params) and, when
// that succeeds, run on zero inputs of the shapes its manifest declares
// (every named dim 2).
//
// The mutator keeps mutations past the checksum: it parses the section
// table, changes one section and writes the package again with a fresh
// checksum. The bytecode section is mostly changed as a program (an
// instruction's register, callee, jump or argument; a constant), so the
// mutations reach the verifier and the VM instead of its reader. The
// compiled kernels (kernels.*) are not changed, and an input whose kernels
// changed all the same (a byte mutation of the whole file, a moved section)
// is skipped: they are native code, which the loader cannot check
// (docs/runtime_abi.md, section 6).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/model.h"
#include "runtime/package.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace relax::rt;

// The inputs the manifest declares, or nullopt when one cannot be made
// (a sequence, an unknown dtype or rank, a dim given by an expression).
std::optional<std::vector<Value>> make_inputs(const Model& m) {
  std::vector<Value> out;
  for (const TensorDesc& d : m.inputs()) {
    auto dtype = DType::parse(d.dtype);
    if (d.sequence || !dtype || d.ndim < 0 || d.dims.size() != size_t(d.ndim)) return std::nullopt;
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (const std::string& s : d.dims) {
      int64_t v = 2;
      if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) != 0)) {
        if (s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        v = std::stoll(s);
      } else if (s.find_first_of(" +-*/()") != std::string::npos) {
        return std::nullopt;
      }
      shape.push_back(v);
      numel *= v;
      if (numel > (1 << 20)) return std::nullopt;
    }
    out.emplace_back(Tensor::zeros(*dtype, shape));
  }
  return out;
}

// The compiled kernels the fuzzer may load: those of the packages in
// $RELAX_FUZZ_TRUSTED_KERNELS (scripts/fuzz.sh: the seeds, built by
// relax-build), by checksum. A package whose kernels are other bytes is
// skipped: no loader can check native code (docs/runtime_abi.md,
// section 6), so a mutated shared object is not a finding. Unset (the
// replay of regressions): every package is loaded.
std::set<uint64_t>& trusted_kernels() {
  static std::set<uint64_t> set;
  return set;
}

// The checksums of a package's kernel sections; none when it is no package.
std::vector<uint64_t> kernel_sums(const std::string& path) {
  std::vector<uint64_t> sums;
  try {
    Package p = Package::open(path);
    for (const SectionInfo& s : p.sections())
      if (s.name.rfind("kernels", 0) == 0) {
        std::span<const uint8_t> b = p.section(s.name);
        sums.push_back(checksum64(b.data(), b.size()));
      }
  } catch (const Error&) {
    // Not a package: Model::load says why.
  }
  return sums;
}

bool kernels_trusted(const std::string& path) {
  if (trusted_kernels().empty()) return true;
  for (uint64_t sum : kernel_sums(path))
    if (!trusted_kernels().count(sum)) return false;
  return true;
}

std::string scratch_path() {
  static const std::string path = relax::fuzz::empty_dir() + "/fuzz.rpkg";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("RELAX_FUZZ_TRUSTED_KERNELS");
  if (!dir) return 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    for (uint64_t sum : kernel_sums(e.path().string())) trusted_kernels().insert(sum);
  if (trusted_kernels().empty()) relax::fuzz::finding(std::string("no package with kernels in ") + dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool once = [] {
    set_memory_cap(size_t(1) << 30);
    return true;
  }();
  (void)once;
  // Package::open maps a file: write the input to one.
  {
    int fd = ::open(scratch_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) relax::fuzz::finding("cannot write " + scratch_path());
    if (size > 0 && ::write(fd, data, size) != ssize_t(size)) relax::fuzz::finding("short write to " + scratch_path());
    ::close(fd);
  }
  if (!kernels_trusted(scratch_path())) return 0;
  relax::fuzz::expect_clean_errors([&] {
    std::unique_ptr<Model> m = Model::load(scratch_path());
    if (auto inputs = make_inputs(*m)) m->run_values(std::move(*inputs));
  });
  return 0;
}

namespace {

using Rng = std::mt19937_64;
size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

int64_t pick_int(Rng& rng) {
  static const int64_t kValues[] = {-1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 100, 1 << 16, int64_t(1) << 31,
                                    int64_t(1) << 62, INT64_MAX, INT64_MIN};
  return rng() % 3 == 0 ? int64_t(rng() % 40) - 8 : kValues[pick(rng, std::size(kValues))];
}

uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The sections of a package whose header and table are whole; nullopt otherwise.
std::optional<std::vector<std::pair<std::string, std::string>>> read_sections(const uint8_t* data, size_t size) {
  if (size < kPackageHeaderSize + 8 || std::memcmp(data, "RELAXPKG", 8) != 0) return std::nullopt;
  uint32_t count;
  std::memcpy(&count, data + 12, 4);
  if (count > 64 || kPackageHeaderSize + size_t(count) * kPackageEntrySize > size) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> out;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = data + kPackageHeaderSize + size_t(i) * kPackageEntrySize;
    std::string name(reinterpret_cast<const char*>(e), strnlen(reinterpret_cast<const char*>(e), kPackageNameSize));
    uint64_t off = get64(e + 24), n = get64(e + 32);
    if (off > size || n > size - off) return std::nullopt;
    out.emplace_back(name, std::string(reinterpret_cast<const char*>(data + off), size_t(n)));
  }
  return out;
}

void mutate_program(Executable& e, Rng& rng) {
  if (rng() % 4 == 0 && !e.constants.empty()) {
    Constant& c = e.constants[pick(rng, e.constants.size())];
    switch (rng() % 4) {
      case 0:
        c.i = pick_int(rng);
        return;
      case 1:
        if (!c.list.empty()) c.list[pick(rng, c.list.size())] = pick_int(rng);
        else c.list.push_back(pick_int(rng));
        return;
      case 2:
        if (!c.list.empty()) c.list.pop_back();
        return;
      default:
        c.s = e.constants[pick(rng, e.constants.size())].s;
        return;
    }
  }
  if (e.functions.empty()) return;
  Function& f = e.functions[pick(rng, e.functions.size())];
  if (f.code.empty()) return;
  Instr& in = f.code[pick(rng, f.code.size())];
  auto reg = [&] { return f.num_registers > 0 ? int64_t(pick(rng, size_t(f.num_registers))) : 0; };
  switch (rng() % 9) {
    case 0:
      in.dst = int32_t(rng() % 4 == 0 ? -1 : reg());
      return;
    case 1: {
      size_t n = in.callee_kind == CalleeKind::Function ? e.functions.size()
                 : in.callee_kind == CalleeKind::Kernel ? e.kernels.size()
                                                        : e.builtins.size();
      if (n > 0) in.callee = int32_t(pick(rng, n));
      return;
    }
    case 2:
      in.offset = int64_t(rng() % 9) - 4;
      return;
    case 3:
      if (!in.args.empty()) {
        Arg& a = in.args[pick(rng, in.args.size())];
        a.value = a.kind == ArgKind::Register ? reg()
                  : a.kind == ArgKind::Const  ? int64_t(pick(rng, std::max<size_t>(e.constants.size(), 1)))
                                              : pick_int(rng);
      }
      return;
    case 4:
      if (!in.args.empty()) in.args.erase(in.args.begin() + ptrdiff_t(pick(rng, in.args.size())));
      return;
    case 5:
      in.args.push_back(rng() % 2 ? Arg::reg(reg()) : Arg::imm(pick_int(rng)));
      return;
    case 6:
      if (!in.args.empty()) std::swap(in.args[pick(rng, in.args.size())], in.args[pick(rng, in.args.size())]);
      return;
    case 7:
      std::swap(in, f.code[pick(rng, f.code.size())]);
      return;
    default:
      if (rng() % 2) f.num_registers = int32_t(pick(rng, size_t(f.num_registers) + 2));
      else f.heap_size = int32_t(pick(rng, size_t(f.heap_size) + 2));
  }
}

// Writes the checksum of [0, size - 8) into the last 8 bytes (and, now and
// then, the true size into the header).
void reseal(uint8_t* data, size_t size, Rng& rng) {
  if (size < kPackageHeaderSize + 8) return;
  if (rng() % 2) {
    uint64_t n = size;
    std::memcpy(data + 16, &n, 8);
  }
  uint64_t sum = checksum64(data, size - 8);
  std::memcpy(data + size - 8, &sum, 8);
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  auto sections = read_sections(data, size);
  std::vector<size_t> open;  // the sections that may change
  if (sections)
    for (size_t i = 0; i < sections->size(); ++i)
      if ((*sections)[i].first.rfind("kernels", 0) != 0) open.push_back(i);
  if (open.empty() || rng() % 8 == 0) {
    size = LLVMFuzzerMutate(data, size, max_size);
    reseal(data, size, rng);
    return size;
  }
  auto& [name, bytes] = (*sections)[open[pick(rng, open.size())]];
  bool program = false;
  if (name == "bytecode" && rng() % 4 != 0) {
    try {
      Executable e = Executable::deserialize(bytes);
      for (int k = 1 + int(rng() % 2); k > 0; --k) mutate_program(e, rng);
      bytes = e.serialize();
      program = true;
    } catch (const Error&) {
    }
  }
  if (!program) {
    size_t n = bytes.size();
    bytes.resize(n * 2 + 64);
    bytes.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(bytes.data()), n, bytes.size()));
  }
  std::string out;
  try {
    PackageWriter w;
    for (auto& [n, b] : *sections) w.add(n, b);
    out = w.bytes();
  } catch (const Error&) {  // a table no writer makes (an empty or repeated name): bytes, then
    size = LLVMFuzzerMutate(data, size, max_size);
    reseal(data, size, rng);
    return size;
  }
  if (out.size() > max_size) return size;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
