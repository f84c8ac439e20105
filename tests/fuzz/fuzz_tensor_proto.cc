// Fuzz target of the TensorProto and SequenceProto readers (backend-test
// input_K.pb / output_K.pb files, relax-run --input x=file.pb): each input
// goes through both.
#include "runtime/tensor_proto.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  relax::fuzz::expect_clean_errors([&] { relax::rt::parse_tensor_proto(bytes, "fuzz.pb"); });
  relax::fuzz::expect_clean_errors([&] { relax::rt::parse_sequence_proto(bytes, "fuzz.pb"); });
  return 0;
}
