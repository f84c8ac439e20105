#include "backends/cuda/ptxas.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "ir/error.h"

namespace fs = std::filesystem;

namespace relax::cuda {
namespace {

bool executable(const fs::path& p) { return !p.empty() && access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p); }

// Runs argv, returning its exit status and what it wrote on stdout and stderr together.
std::pair<int, std::string> run(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const std::string& a : argv) {
    cmd += cmd.empty() ? "'" : " '";
    for (char c : a) cmd += c == '\'' ? std::string("'\\''") : std::string(1, c);
    cmd += "'";
  }
  cmd += " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) fail("cannot run ", argv[0]);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

std::optional<std::string> find_ptxas() {
  if (const char* e = std::getenv("RELAX_PTXAS"); e && *e) {
    if (std::string(e) == "none") return std::nullopt;  // tests: as on a machine without CUDA
    if (executable(e)) return std::string(e);
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');)
      if (executable(fs::path(dir) / "ptxas")) return (fs::path(dir) / "ptxas").string();
  }
  for (const char* home : {static_cast<const char*>(std::getenv("CUDA_HOME")), "/usr/local/cuda"})
    if (home && executable(fs::path(home) / "bin" / "ptxas")) return (fs::path(home) / "bin" / "ptxas").string();
  return std::nullopt;
}

// ptxas's version ("13.0.48"; empty when it does not say), asked once per path.
std::string ptxas_version(const std::string& ptxas) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(ptxas);
  if (it != known.end()) return it->second;
  auto [vs, vout] = run({ptxas, "--version"});
  std::smatch vm;
  std::string v = vs == 0 && std::regex_search(vout, vm, std::regex(R"(V(\d+\.\d+\.\d+))")) ? vm[1].str() : "";
  return known[ptxas] = v;
}

PtxasReport run_ptxas(const std::string& ptxas, const std::string& ptx, const std::string& arch) {
  std::string dir_tmpl = (fs::temp_directory_path() / "relax-ptxas-XXXXXX").string();
  if (!mkdtemp(dir_tmpl.data())) fail("ptxas: cannot create a temporary directory in ", fs::temp_directory_path());
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir_tmpl};
  std::string in = cleanup.d + "/kernels.ptx";
  {
    std::ofstream f(in, std::ios::binary);
    f << ptx;
    if (!f) fail("ptxas: cannot write ", in);
  }
  PtxasReport r;
  r.version = ptxas_version(ptxas);
  auto [status, out] = run({ptxas, "--gpu-name", arch, "-v", "-o", cleanup.d + "/kernels.cubin", in});
  if (status != 0) fail("ptxas rejected the PTX for ", arch, ":\n", out);
  // "Compiling entry function 'K' for 'sm_80'", then "Function properties for K",
  // "N bytes stack frame, N bytes spill stores, N bytes spill loads", "Used N registers, ...".
  std::string current;
  std::istringstream lines(out);
  std::regex entry(R"(Compiling entry function '([^']+)')"), props(R"(Function properties for (\S+))"),
      frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"),
      regs(R"(Used (\d+) registers)");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      current = m[1];
      r.kernels[current];
    } else if (!current.empty() && std::regex_search(line, m, frame)) {
      r.kernels[current].stack = std::stoi(m[1]);
      r.kernels[current].spill_stores = std::stoi(m[2]);
      r.kernels[current].spill_loads = std::stoi(m[3]);
    } else if (!current.empty() && std::regex_search(line, m, regs)) {
      r.kernels[current].registers = std::stoi(m[1]);
    }
  }
  return r;
}

}  // namespace relax::cuda
