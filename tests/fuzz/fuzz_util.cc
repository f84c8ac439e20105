#include "tests/fuzz/fuzz_util.h"

#include <cstdlib>
#include <filesystem>

namespace relax::fuzz {

namespace {

// The folder, removed with what was written in it when the fuzzer exits.
struct OwnedDir {
  std::string path;
  OwnedDir() {
    path = (std::filesystem::temp_directory_path() / "relax-fuzz-XXXXXX").string();
    if (!mkdtemp(path.data())) finding("cannot create a temporary folder");
  }
  ~OwnedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

const std::string& empty_dir() {
  static const OwnedDir dir;
  return dir.path;
}

}  // namespace relax::fuzz
