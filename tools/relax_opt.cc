// relax-opt: reads IR text, runs passes by name, writes IR text.
//
//   relax-opt IN.relax --passes=normalize,dead-code-elimination [-o OUT.relax]
//
// The driver of the golden tests. Exit codes: 0 success, 1 any error (bad
// input text, ill-formed IR, a failing pass), with the message on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "ir/explain.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "tools/version.h"

namespace {

std::string read_input(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) relax::fail(path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes through a temporary file and a rename, so a failure never leaves
// a half-written output.
void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) relax::fail(path, ": cannot open for writing");
    out << text;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      relax::fail(path, ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    relax::fail(path, ": cannot replace the file");
  }
}

void list_passes() {
  for (const relax::Pass& p : relax::all_passes()) std::cout << p.name << "  " << p.doc << "\n";
  for (const std::string& pl : relax::pipeline_names()) {
    std::cout << pl << " =";
    for (const std::string& n : relax::pipeline(pl)) std::cout << " " << n;
    std::cout << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"relax-opt: read IR text (*.relax), run passes by name, write IR text."};
  std::string input, output, passes;
  std::vector<std::string> print_after;
  bool print_after_all = false, time_passes = false, no_verify = false, list = false;
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  app.add_option("input", input, "IR text file, or - for standard input");
  app.add_option("--passes", passes, "comma-separated passes or pipelines (O0, O1, O2) to run in order");
  app.add_option("-o,--output", output, "output file (default: standard output)");
  app.add_option("--print-after", print_after, "print the IR after this pass (repeatable, or comma-separated; all: every pass)")
      ->delimiter(',');
  app.add_flag("--print-after-all", print_after_all, "print the IR after every pass");
  app.add_flag("--time-passes", time_passes, "print the time each pass took");
  app.add_flag("--verify-each,!--no-verify-each", verify_each,
               "verify the IR after every pass (default on in debug builds)");
  app.add_flag("--no-verify", no_verify, "do not verify the input");
  app.add_flag("--list-passes", list, "list the passes and pipelines, then exit");
  std::string explain_topics;
  app.add_option("--explain", explain_topics,
                 "say on standard error why the rules of these passes did or did not apply (comma-separated pass "
                 "names, or all; so far: block-layout, fuse-library-epilogues, legalize); also $RELAX_EXPLAIN");
  app.footer(
      "Examples:\n"
      "  relax-opt model.relax --passes O2 -o model.opt.relax\n"
      "  relax-opt model.relax --passes fuse-ops,fuse-tir --print-after fuse-ops\n"
      "  relax-opt --list-passes\n\n"
      "Exit status: 0 done; 1 an error (the input does not parse or verify, an unknown pass).");
  app.set_version_flag("--version", relax::version_text("relax-opt"));
  CLI11_PARSE(app, argc, argv);
  if (!explain_topics.empty()) relax::set_explain(explain_topics);
  if (list) {
    list_passes();
    return 0;
  }
  if (input.empty()) {
    std::cerr << "relax-opt: no input file (see --help)\n";
    return 1;
  }
  try {
    std::string text = read_input(input);
    relax::IRModule mod = relax::parse_module(text, input == "-" ? "<stdin>" : input);
    if (!no_verify) relax::verify_or_throw(mod);
    relax::PassOptions opts;
    for (const std::string& p : print_after) {
      if (p == "all")
        print_after_all = true;  // as relax-build's --print-after=all
      else
        opts.print_after.insert(p);
    }
    opts.print_after_all = print_after_all;
    opts.time_passes = time_passes;
    opts.verify_each = verify_each;
    mod = relax::run_passes(mod, relax::split_pass_list(passes), opts);
    if (!no_verify && !verify_each) relax::verify_or_throw(mod);
    write_output(output, relax::print_module(mod));
  } catch (const relax::Error& e) {
    std::cerr << "relax-opt: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "relax-opt: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
