#include "ir/target_traits.h"

#include <sstream>

#include "ir/error.h"
#include "ir/module.h"

namespace relax {

std::string TargetTraits::str() const {
  std::string s = gpu ? "gpu" : "host";
  if (host_kernels) s += " host-kernels";
  if (!gpu) s += " vector=" + std::to_string(vector_bits);
  if (!matmul_library.empty()) s += " matmul=" + matmul_library + ":" + std::to_string(matmul_workspace);
  if (capture) s += " capture";
  if (max_threads > 0) s += " threads=" + std::to_string(max_threads);
  if (shared_memory > 0) s += " shared=" + std::to_string(shared_memory);
  std::string list;
  for (const std::string& p : precisions) list += (list.empty() ? "" : ",") + p;
  return s + " precisions=" + list;
}

namespace {

int64_t count(const std::string& word, const std::string& value) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
  }
  if (value.empty() || used != value.size() || v < 0) fail("target traits: '", word, "' wants a count");
  return v;
}

}  // namespace

TargetTraits TargetTraits::parse(const std::string& text) {
  TargetTraits t;
  t.host_kernels = false;
  t.precisions.clear();
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    size_t eq = w.find('=');
    std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
    if (w == "gpu" || w == "host") {
      t.gpu = w == "gpu";
    } else if (w == "host-kernels") {
      t.host_kernels = true;
    } else if (w == "capture") {
      t.capture = true;
    } else if (key == "vector" && eq != std::string::npos) {
      t.vector_bits = int(count(w, value));
    } else if (key == "threads" && eq != std::string::npos) {
      t.max_threads = count(w, value);
    } else if (key == "shared" && eq != std::string::npos) {
      t.shared_memory = count(w, value);
    } else if (key == "matmul" && eq != std::string::npos) {
      size_t colon = value.find(':');
      t.matmul_library = value.substr(0, colon);
      if (t.matmul_library.empty()) fail("target traits: '", w, "' names no library");
      t.matmul_workspace = colon == std::string::npos ? 0 : count(w, value.substr(colon + 1));
    } else if (key == "precisions" && eq != std::string::npos) {
      std::istringstream list(value);
      for (std::string p; std::getline(list, p, ',');)
        if (!p.empty()) t.precisions.insert(p);
    } else {
      fail("target traits: unknown word '", w, "' in \"", text,
           "\"; known: gpu, host, host-kernels, capture, vector=N, threads=N, shared=N, matmul=LIB:BYTES, "
           "precisions=A,B");
    }
  }
  return t;
}

TargetTraits TargetTraits::of(const IRModule& mod) {
  std::string text = mod.attrs.get_string("traits", "");
  return text.empty() ? TargetTraits() : parse(text);
}

void TargetTraits::record(IRModule& mod) const { mod.attrs.set("traits", str()); }

}  // namespace relax
