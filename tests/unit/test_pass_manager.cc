// The pass manager: names, pipelines, printing, timing, verification.
#include <doctest/doctest.h>

#include <algorithm>
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

TEST_CASE("the pipelines follow the traits, not a target's name") {
  TargetTraits host, gpu;
  gpu.gpu = true, gpu.host_kernels = false, gpu.precisions = {"f32"};
  auto has = [](const std::vector<std::string>& names, const char* n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  CHECK(has(pipeline("O1", host), "qdq-to-integer"));
  CHECK(!has(pipeline("O1", gpu), "qdq-to-integer"));
  CHECK(has(pipeline("O2", host), "fold-matmul-views"));
  CHECK(!has(pipeline("O2", gpu), "fold-matmul-views"));
  CHECK(!has(pipeline("O0", host), "lift-workspaces"));
  CHECK(has(pipeline("O0", gpu), "lift-workspaces"));
  // The traits round-trip through their text, which the module records.
  TargetTraits cuda = gpu;
  cuda.matmul_library = "cublas", cuda.matmul_workspace = 4096, cuda.capture = true, cuda.max_threads = 1024;
  CHECK(TargetTraits::parse(cuda.str()).str() == cuda.str());
  CHECK_THROWS_WITH_AS(TargetTraits::parse("gpu warp=32"), doctest::Contains("unknown word 'warp=32'"), Error);
}

TEST_CASE("a target's own passes run after the pipeline pass they name, from their level") {
  int runs = 0;
  Pass mine{"count-runs", "counts its runs", [&](const IRModule& m) {
              ++runs;
              return m;
            }};
  std::vector<TargetPass> own = {{mine, "canonicalize-bindings", 1}};
  std::vector<std::string> o1 = pipeline("O1", {}, own, 1), o0 = pipeline("O0", {}, own, 0);
  CHECK(std::count(o0.begin(), o0.end(), "count-runs") == 0);  // below its level
  // After each canonicalize-bindings of O1.
  int64_t canon = std::count(o1.begin(), o1.end(), "canonicalize-bindings");
  CHECK(std::count(o1.begin(), o1.end(), "count-runs") == canon);
  for (size_t i = 0; i < o1.size(); ++i)
    if (o1[i] == "count-runs") CHECK(o1[i - 1] == "canonicalize-bindings");
  // The pass manager finds it by name among the extra passes, not in the registry.
  PassOptions opts;
  CHECK_THROWS_WITH_AS(run_passes(parse_module(kModule), o1, opts), doctest::Contains("unknown pass 'count-runs'"),
                       Error);
  opts.extra = {mine};
  run_passes(parse_module(kModule), o1, opts);
  CHECK(runs == canon);
  // A pass after one the pipeline lacks is an error, not silently dropped.
  std::vector<TargetPass> lost = {{mine, "no-such-pass", 0}};
  CHECK_THROWS_WITH_AS(pipeline("O2", {}, lost, 2), doctest::Contains("which pipeline O2 lacks"), Error);
}
