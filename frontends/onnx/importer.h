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
};

// Imports a model file. Raises UnsupportedModel (every unsupported op at
// once, with node names) or Error (unreadable, malformed or inconsistent
// model, naming the file and the node).
ImportedModel import_onnx(const std::string& path);

// The --json summary of relax-import.
std::string summary_json(const std::string& model_path, const ImportedModel* m, const UnsupportedModel* unsupported,
                         const std::string& error);

}  // namespace relax::onnx_fe
