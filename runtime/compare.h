// Comparing an output with its expected value, as relax-run --test-data and
// the conformance runner do: same dtype and shape, then elementwise
// |actual - expected| <= atol + rtol * |expected| for floats (NaN matches
// NaN, infinities must agree), exact equality for integers and bools.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace relax::rt {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

struct Comparison {
  bool ok = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t mismatches = 0;
  std::string detail;  // why not ok: "dtype f16, expected f32", "element 17: 0.5 vs 0.25", ...
};

Comparison compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol = {});

// Element i as a double, for the dtypes it can be read as (bool, ints,
// f16, bf16, f32, f64); throws rt::Error otherwise.
double element_as_double(const Tensor& t, int64_t i);
// Element i as an int64, exactly, for bool and the 8- to 64-bit integer
// dtypes (a u64 above INT64_MAX wraps); throws rt::Error otherwise.
int64_t element_as_int64(const Tensor& t, int64_t i);
// Element 0 of a one-element tensor as a truth value (any readable dtype).
bool scalar_truth(const Tensor& t, const char* what);

}  // namespace relax::rt
