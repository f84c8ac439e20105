// The ONNX importer: ModelProto -> IRModule with a function @main whose
// parameters are the graph inputs (symbolic dims named after their
// dim_param) and whose result is the graph outputs; initializers become
// named constants whose bytes are kept beside the module.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "frontends/onnx/host_tensor.h"
#include "ir/error.h"
#include "ir/module.h"

namespace onnx {
class ModelProto;
}

namespace relax::onnx_fe {

// One unsupported (domain, op, opset) and the nodes that use it.
struct Unsupported {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int opset = 0;
  std::string detail;  // what exactly (an attribute value, a type), may be empty
  std::vector<std::string> nodes;
};

// The model uses something the importer does not support; lists all of it.
struct UnsupportedModel : Error {
  UnsupportedModel(std::string msg, std::vector<Unsupported> u) : Error(std::move(msg)), items(std::move(u)) {}
  std::vector<Unsupported> items;
};

struct NamedValueInfo {
  std::string name;
  StructInfo sinfo;
};

struct ImportedModel {
  IRModule mod;
  std::vector<std::pair<std::string, HostTensor>> weights;  // constant name -> data
  std::map<std::string, int> opsets;                        // domain ("" = ai.onnx) -> version
  std::map<std::string, int> op_counts;                     // "Conv", "com.microsoft.Gelu" -> count
  std::vector<NamedValueInfo> inputs, outputs;              // the graph's, in order
  std::set<std::string> data_files;                         // external data read, relative to the model's folder
  std::vector<std::string> notes;                           // what the user should know (Context::note)
};

// Input shapes the user gives (relax-import and relax-build --dim and
// --shape), put into the model's declared inputs before it is imported: a
// fixed chunk length lets branches on it fold (a scripted model's `if
// x.shape[-1] == 1`), a name turns an exporter's fixed dim into a symbol.
struct ImportOptions {
  std::map<std::string, int64_t> dims;  // --dim NAME=VALUE: every input dim named NAME
  // --shape INPUT=D0,D1,...: each dim an integer or a name, in order given
  std::vector<std::pair<std::string, std::vector<std::string>>> shapes;
  bool empty() const { return dims.empty() && shapes.empty(); }
  // Parse one option's text ("sequence=576", "x=1,3,H,W"); Error when malformed.
  void add_dim(const std::string& text);
  void add_shape(const std::string& text);
  // The options as relax-build's arguments, and as one canonical string.
  std::vector<std::string> args() const;
  std::string key() const;
  // Puts them into `model`'s declared inputs; an Error naming `path` when
  // one names no input or dim of the model.
  void apply_to(onnx::ModelProto& model, const std::string& path) const;
};

// Imports a model file. Raises UnsupportedModel (every unsupported op at
// once, with node names) or Error (unreadable, malformed or inconsistent
// model, naming the file and the node; an option naming no input or
// dim of the model).
ImportedModel import_onnx(const std::string& path, const ImportOptions& opts = {});
// The same for a parsed model: errors name `label`, external data is read
// from the folder `dir` (and never from outside it).
ImportedModel import_onnx_model(onnx::ModelProto& model, const std::string& label, const std::string& dir,
                                const ImportOptions& opts = {});

// The --json summary of relax-import.
std::string summary_json(const std::string& model_path, const ImportedModel* m, const UnsupportedModel* unsupported,
                         const std::string& error);

}  // namespace relax::onnx_fe
