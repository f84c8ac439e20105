#include "tests/fuzz/fuzz_util.h"

#include <cstdlib>
#include <filesystem>

namespace relax::fuzz {

const std::string& empty_dir() {
  static const std::string dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "relax-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) finding("cannot create a temporary folder");
    return tmpl;
  }();
  return dir;
}

}  // namespace relax::fuzz
