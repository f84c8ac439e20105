// relax-import: ONNX model -> IR text (*.relax) + weights (*.safetensors).
//
//   relax-import MODEL.onnx [-o OUT.relax] [--json] [--dim NAME=VALUE] [--shape INPUT=D0,D1,...]
//
// Exit codes: 0 success; 2 the model uses something unsupported (every
// unsupported op is listed at once, with node names); 1 any other error
// (unreadable, malformed or inconsistent model), naming the node. Nothing
// is written when the import fails.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/safetensors.h"
#include "ir/printer.h"
#include "tools/import_flags.h"
#include "tools/version.h"

namespace fs = std::filesystem;
using namespace relax;

namespace {

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, ": cannot open for writing");
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) fail(path, ": write failed");
}

// Writes both files through temporaries and renames them into place only
// when both are complete.
void write_outputs(const std::string& ir_path, const std::string& ir, const std::string& w_path,
                   const std::string& weights) {
  std::string ir_tmp = ir_path + ".tmp", w_tmp = w_path + ".tmp";
  try {
    write_file(w_tmp, weights);
    write_file(ir_tmp, ir);
    fs::rename(w_tmp, w_path);
    fs::rename(ir_tmp, ir_path);
  } catch (...) {
    std::error_code ec;
    fs::remove(ir_tmp, ec);
    fs::remove(w_tmp, ec);
    throw;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"relax-import: convert an ONNX model to IR text (*.relax) and its weights (*.safetensors)."};
  std::string model, output;
  bool json = false;
  app.add_option("model", model, "the ONNX model")->required();
  app.add_option("-o,--output", output,
                 "the IR text file (default: MODEL.relax beside the model); "
                 "the weights go beside it as OUT.safetensors");
  app.add_flag("--json", json, "print a JSON summary (inputs, outputs, ops, unsupported) on standard output");
  ImportFlags import_flags;
  import_flags.add_to(app);
  app.footer(
      "Examples:\n"
      "  relax-import gpt2.onnx                      # -> gpt2.relax and gpt2.safetensors\n"
      "  relax-import model.onnx -o ir/model.relax --json\n"
      "  relax-import vad.onnx --dim sequence=576        # a fixed chunk: branches on its length fold\n"
      "  relax-import det.onnx --shape x=1,3,H,W         # the exporter's 960x960 made symbolic\n\n"
      "Exit status: 0 imported; 2 the model uses unsupported ops (all listed, with their nodes); 1 any other error.");
  app.set_version_flag("--version", version_text("relax-import"));
  CLI11_PARSE(app, argc, argv);

  if (output.empty()) output = fs::path(model).replace_extension(".relax").string();
  std::string weights_path = fs::path(output).replace_extension(".safetensors").string();
  try {
    onnx_fe::ImportedModel m = onnx_fe::import_onnx(model, import_flags.options());
    m.mod.attrs.set("weights", fs::path(weights_path).filename().string());
    write_outputs(output, print_module(m.mod), weights_path, encode_safetensors(m.weights));
    for (const std::string& n : m.notes) std::cerr << "relax-import: note: " << n << "\n";
    if (json) std::cout << onnx_fe::summary_json(model, &m, nullptr, "");
    return 0;
  } catch (const onnx_fe::UnsupportedModel& u) {
    if (json) std::cout << onnx_fe::summary_json(model, nullptr, &u, u.what());
    std::cerr << "relax-import: " << model << ": " << u.what() << "\n";
    return 2;
  } catch (const Error& e) {
    if (json) std::cout << onnx_fe::summary_json(model, nullptr, nullptr, e.what());
    std::cerr << "relax-import: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (json) std::cout << onnx_fe::summary_json(model, nullptr, nullptr, e.what());
    std::cerr << "relax-import: internal error: " << e.what() << "\n";
    return 1;
  }
}
