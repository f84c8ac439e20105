// Every pass, listed once, and the named pipelines.
#include "backends/common/legalize.h"
#include "ir/error.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace relax {

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes = {
      {"normalize", "A-normal form and deduced struct info everywhere", normalize},
      {"convert-to-dataflow", "group runs of pure bindings into dataflow blocks", convert_to_dataflow},
      {"canonicalize-bindings", "alias elimination, trivial match_cast removal, tuple-item folding",
       canonicalize_bindings},
      {"dead-code-elimination", "drop unused pure bindings and unreachable module items", dead_code_elimination},
      {"simplify-shapes", "simplify symbolic expressions under declared bounds", simplify_shapes},
      {"legalize", "graph ops to tensor programs (call_tir) by the registered legalisers", legalize},
      {"bind-shapes", "match_cast operands of unknown dims to fresh variables before ops read them", bind_shapes},
  };
  return passes;
}

std::vector<std::string> pipeline_names() { return {"O0", "O1", "O2"}; }

std::vector<std::string> pipeline(const std::string& name) {
  if (name == "O0") return {"normalize"};
  if (name == "O1")
    return {"normalize", "convert-to-dataflow", "simplify-shapes", "canonicalize-bindings", "dead-code-elimination"};
  // O2 will add fusion and memory planning; until they exist it is O1.
  if (name == "O2") return pipeline("O1");
  fail("unknown pipeline '", name, "'; known: O0, O1, O2");
}

}  // namespace relax
