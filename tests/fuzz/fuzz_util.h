// What the fuzz targets (tests/fuzz/, docs/fuzzing.md) count as a finding.
//
// A reader given bad bytes must throw the project's own error (relax::Error
// or rt::Error) with a message; that is the expected end of most inputs.
// A crash, a sanitizer report, a hang, memory past libFuzzer's limit, or
// any other exception (std::out_of_range, a json or protobuf exception that
// escaped, std::bad_alloc from a size read from the input) is a finding:
// expect_clean_errors aborts on the last kind so libFuzzer keeps the input.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "ir/error.h"
#include "runtime/error.h"

namespace relax::fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

template <typename F>
void expect_clean_errors(F&& f) {
  try {
    f();
  } catch (const relax::Error& e) {
    if (!*e.what()) finding("relax::Error without a message");
  } catch (const relax::rt::Error& e) {
    if (!*e.what()) finding("rt::Error without a message");
  } catch (const std::exception& e) {
    finding(std::string("a ") + typeid(e).name() + " escaped instead of the reader's error: " + e.what());
  }
}

// A folder of its own, empty, made once: what an imported model's external
// data is looked up in (so a fuzzed location finds nothing, and nothing
// outside it may be read).
const std::string& empty_dir();

}  // namespace relax::fuzz

// libFuzzer's entry points (declared here for the replay driver too).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);
