// The fuzz targets' entry outside libFuzzer (an ordinary build): runs
// LLVMFuzzerTestOneInput once on each file named, or on each file of each
// folder named, as a libFuzzer binary does when given files. ctest runs
// the seeds and the regressions (tests/fuzz/regressions/) through it, so
// every crash once found stays fixed in builds without clang.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"

// A target's set-up, when it has one (as libFuzzer calls it).
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

// The custom mutators call libFuzzer's; never reached here.
extern "C" size_t LLVMFuzzerMutate(uint8_t*, size_t size, size_t) { return size; }

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(p)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "running %s (%zu bytes)\n", f.c_str(), bytes.size());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("%zu inputs ran without a finding\n", files.size());
  return 0;
}
