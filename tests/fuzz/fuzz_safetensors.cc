// Fuzz target of the safetensors reader (the weights relax-import writes
// beside a .relax file, read back by relax-build and relax-opt).
#include <string>

#include "frontends/onnx/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  relax::fuzz::expect_clean_errors([&] {
    auto tensors = relax::decode_safetensors(std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    relax::encode_safetensors(tensors);
  });
  return 0;
}
