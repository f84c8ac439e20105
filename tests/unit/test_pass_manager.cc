// The pass manager: names, pipelines, printing, timing, verification.
#include <doctest/doctest.h>

#include <sstream>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

using namespace relax;

namespace {
const char* kModule = R"(fn @main(x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  dataflow {
    %a: Tensor[(n, 4), f32] = exp(x)
    %b: Tensor[(n, 4), f32] = log(%a)
    c: Tensor[(n, 4), f32] = relu(x)
  }
  return c
}
)";
}

TEST_CASE("split_pass_list trims and drops empty names") {
  CHECK(split_pass_list(" normalize, ,dead-code-elimination ,") ==
        std::vector<std::string>{"normalize", "dead-code-elimination"});
  CHECK(split_pass_list("").empty());
}

TEST_CASE("every pipeline names registered passes") {
  for (const std::string& pl : pipeline_names())
    for (const std::string& n : pipeline(pl)) CHECK_MESSAGE(find_pass(n) != nullptr, pl << " names " << n);
  CHECK_THROWS_WITH_AS(pipeline("O9"), doctest::Contains("unknown pipeline 'O9'"), Error);
}

TEST_CASE("unknown pass names are errors that list the known passes") {
  IRModule mod = parse_module(kModule);
  CHECK_THROWS_WITH_AS(run_passes(mod, {"normalize", "no-such-pass"}), doctest::Contains("unknown pass 'no-such-pass'"),
                       Error);
  CHECK_THROWS_WITH_AS(run_passes(mod, {"no-such-pass"}), doctest::Contains("dead-code-elimination"), Error);
  PassOptions opts;
  opts.print_after = {"nope"};
  CHECK_THROWS_WITH_AS(run_passes(mod, {"normalize"}, opts), doctest::Contains("--print-after: unknown pass 'nope'"),
                       Error);
}

TEST_CASE("a pass that changes nothing returns the same function node") {
  IRModule mod = parse_module(kModule);
  IRModule out = run_passes(mod, {"normalize", "canonicalize-bindings"});
  CHECK(out.function("main") == mod.function("main"));
  IRModule dce = run_passes(mod, {"dead-code-elimination"});
  CHECK(dce.function("main") != mod.function("main"));
  CHECK(print_module(dce).find("log(") == std::string::npos);
  CHECK(verify(dce).empty());
}

TEST_CASE("print-after prints the module after the named pass only") {
  IRModule mod = parse_module(kModule);
  std::ostringstream log;
  PassOptions opts;
  opts.print_after = {"dead-code-elimination"};
  opts.log = &log;
  run_passes(mod, {"normalize", "dead-code-elimination"}, opts);
  std::string s = log.str();
  CHECK(s.find("# IR after dead-code-elimination") != std::string::npos);
  CHECK(s.find("# IR after normalize") == std::string::npos);
  CHECK(s.find("relu(x)") != std::string::npos);
}

TEST_CASE("print-after-all and time-passes report every pass, pipelines expanded") {
  IRModule mod = parse_module(kModule);
  std::ostringstream log;
  PassOptions opts;
  opts.print_after_all = true;
  opts.time_passes = true;
  opts.verify_each = true;
  opts.log = &log;
  run_passes(mod, {"O1"}, opts);
  std::string s = log.str();
  for (const std::string& n : pipeline("O1")) {
    CHECK(s.find("# IR after " + n) != std::string::npos);
    CHECK(s.find("  " + n + "\n") != std::string::npos);
  }
  CHECK(s.find("total") != std::string::npos);
}
