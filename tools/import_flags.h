// relax-import's and relax-build's --dim and --shape (onnx_fe::ImportOptions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"

namespace relax {

struct ImportFlags {
  std::vector<std::string> dims, shapes;

  // Adds the two options to `app`; `prefix` starts their help ("ONNX: ").
  void add_to(CLI::App& app, const std::string& prefix = "") {
    app.add_option("--dim", dims,
                   prefix +
                       "give every input dim named NAME the value VALUE, so that what depends on it folds (a branch "
                       "on a chunk length): NAME=VALUE (repeatable)");
    app.add_option("--shape", shapes,
                   prefix +
                       "the shape of an input, each dim an integer or a name (a name makes an exporter's fixed dim "
                       "symbolic): INPUT=D0,D1,... (repeatable)");
  }

  // The options given, parsed; an Error for a malformed one.
  onnx_fe::ImportOptions options() const {
    onnx_fe::ImportOptions o;
    for (const std::string& d : dims) o.add_dim(d);
    for (const std::string& s : shapes) o.add_shape(s);
    return o;
  }
};

}  // namespace relax
