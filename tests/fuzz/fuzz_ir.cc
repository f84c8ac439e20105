// Fuzz target of the IR text reader: parse_module, then the verifier; a
// module both accept must print to text that parses again to the same
// text (the printer and the parser agree on every form they accept).
#include <string>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  relax::IRModule mod;
  bool parsed = false;
  relax::fuzz::expect_clean_errors([&] {
    mod = relax::parse_module(text, "fuzz.relax");
    parsed = true;
  });
  if (!parsed) return 0;
  std::vector<std::string> problems;
  relax::fuzz::expect_clean_errors([&] { problems = relax::verify(mod); });
  if (!problems.empty()) return 0;
  std::string printed;
  relax::fuzz::expect_clean_errors([&] { printed = relax::print_module(mod); });
  try {
    std::string again = relax::print_module(relax::parse_module(printed, "printed.relax"));
    if (again != printed) relax::fuzz::finding("printing the reparsed module changed it:\n" + printed + "\n---\n" + again);
  } catch (const std::exception& e) {
    relax::fuzz::finding(std::string("the printed module does not parse: ") + e.what() + "\n" + printed);
  }
  return 0;
}
