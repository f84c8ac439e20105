// Running a built package on one case's inputs and comparing its outputs
// with the expected ones: shared by onnx-conformance (which builds the
// package first) and onnx-conformance-run (which takes packages built
// elsewhere, for a machine that has a GPU but not the compiler).
#pragma once

#include <string>

#include "tests/conformance/cases.h"

namespace relax::conformance {

// pass, wrong or run-error, with the reason. Cases whose expected values
// come from a random generator are compared by dtype and shape only; a
// few name their own tolerance (check.cc lists them, each with why).
Result check_package(const Case& c, const std::string& package);

// The file name a case's package is kept under: "node/test_abs" ->
// "node__test_abs.rpkg".
std::string package_file_name(const Case& c);

}  // namespace relax::conformance
