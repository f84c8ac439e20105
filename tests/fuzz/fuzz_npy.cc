// Fuzz target of the .npy reader (relax-run --input, test data).
#include "runtime/npy.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  relax::fuzz::expect_clean_errors([&] {
    relax::rt::Tensor t = relax::rt::parse_npy({data, size}, "fuzz.npy");
    // What was read must encode again (its dtype, shape and bytes are whole).
    relax::rt::encode_npy(t);
  });
  return 0;
}
