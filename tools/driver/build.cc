#include "tools/driver/build.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backends/target.h"
#include "backends/vm/kernel_abi.h"
#include "backends/vm/lower.h"
#include "frontends/onnx/importer.h"
#include "frontends/onnx/safetensors.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/analysis/dataflow_graph.h"
#include "passes/analysis/memory_plan.h"
#include "passes/analysis/op_pattern.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "runtime/file_util.h"
#include "runtime/device.h"
#include "runtime/kernel_library.h"
#include "runtime/package.h"
#include "runtime/vm.h"

namespace fs = std::filesystem;

namespace relax {
namespace {

using Clock = std::chrono::steady_clock;

struct LoadedModel {
  IRModule mod;
  NamedTensors weights;
  // The model's own names of @main's inputs and outputs (an ONNX
  // "input.1" is the parameter input_1 in the IR): the package keeps these.
  std::vector<std::string> input_names, output_names;
  // The files the build reads, relative to the model's folder: the model,
  // then its external data or weights file.
  std::vector<std::string> files;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

LoadedModel load_model(const std::string& path, const onnx_fe::ImportOptions& import) {
  LoadedModel m;
  m.files.push_back(fs::path(path).filename().string());
  if (!import.empty() && !ends_with(path, ".onnx")) fail(path, ": --dim and --shape apply to ONNX models");
  if (ends_with(path, ".onnx")) {
    onnx_fe::ImportedModel im = onnx_fe::import_onnx(path, import);
    for (const std::string& n : im.notes) std::cerr << "relax-build: " << path << ": note: " << n << "\n";
    m.mod = std::move(im.mod);
    m.weights = std::move(im.weights);
    for (const auto& i : im.inputs) m.input_names.push_back(i.name);
    for (const auto& o : im.outputs) m.output_names.push_back(o.name);
    m.files.insert(m.files.end(), im.data_files.begin(), im.data_files.end());
    return m;
  }
  m.mod = parse_module_file(path);
  if (Function main = m.mod.function("main"))
    if (const AttrValue* names = main->attrs.find("input_names"))
      if (const auto* v = std::get_if<std::vector<std::string>>(names)) m.input_names = *v;
  std::string wfile = m.mod.attrs.get_string("weights", "");
  if (!wfile.empty()) {
    fs::path wpath = fs::path(path).parent_path() / wfile;
    std::string bytes;
    try {
      bytes = rt::read_file(wpath.string());
    } catch (const std::exception& e) {
      fail(path, ": cannot read its weight file ", wpath.string(), ": ", e.what());
    }
    m.weights = decode_safetensors(bytes, wpath.string());
    m.files.push_back(wfile);
  }
  return m;
}

// The target's options: the given ones, the rest at their defaults.
TargetOptions target_options(const BuildOptions& opts) {
  return resolve_options(find_target(opts.target), opts.opt_level, opts.target_options);
}

// The pipeline of the build's level, from the traits the module records
// (configure_target), with the target's own passes.
std::vector<std::string> pass_list(const IRModule& mod, const BuildOptions& opts) {
  int level = std::clamp(opts.opt_level, 0, 2);
  return pipeline("O" + std::to_string(level), TargetTraits::of(mod), find_target(opts.target).passes(), level);
}

// The target decides lowering (library offload, workspace lifting): the
// module records it for the passes.
void configure_target(IRModule& mod, const BuildOptions& opts) {
  const Target& target = find_target(opts.target);
  target.configure(mod, target_options(opts));
  if (!opts.index_checks) mod.attrs.set("index_checks", std::string("0"));  // read by legalize
  if (opts.channel_layout != "auto") mod.attrs.set("channel_layout", opts.channel_layout);  // read by block-layout
}

nlohmann::json dims_json(const StructInfo& si) {
  nlohmann::json j;
  if (const auto* t = as<TensorSI>(si)) {
    j["kind"] = "tensor";
    j["dtype"] = t->dtype.str();
    if (t->shape) {
      j["shape"] = nlohmann::json::array();
      for (const SymExpr& d : *t->shape) {
        if (d.is_const())
          j["shape"].push_back(d.const_value());
        else
          j["shape"].push_back(to_string(d));
      }
    } else {
      j["ndim"] = t->ndim;
    }
  } else if (as<ListSI>(si) || as<TupleSI>(si)) {
    // An ONNX sequence: a List, or a tuple of tensors built at import time
    // (the ONNX graph has no tuples of its own).
    j["kind"] = "sequence";
    StructInfo e = unify(list_si(nullptr), si, Analyzer());
    const auto* l = as<ListSI>(e);
    if (const auto* t = l ? as<TensorSI>(l->elem) : nullptr) {
      j["dtype"] = t->dtype.str();
      j["ndim"] = t->ndim;
    }
  } else {
    j["kind"] = print_sinfo(si);
  }
  return j;
}

// --bound values become @main's sym_bounds attribute (merged with bounds
// the module already records), so passes plan for them and the VM checks them.
void record_bounds(IRModule& mod, const BuildOptions& opts) {
  Function main = mod.function("main");
  if (!main || opts.bounds.empty()) return;
  std::map<std::string, Interval> bounds = function_bounds(main);
  std::vector<SymExpr> vars;
  for (const Var& p : main->params) collect_vars(p->sinfo, vars);
  std::string known;
  for (const SymExpr& v : vars) known += (known.empty() ? "" : ", ") + v.name();
  for (const auto& [name, b] : opts.bounds) {
    bool found = false;
    for (const SymExpr& v : vars) found = found || v.name() == name;
    if (!found)
      fail("--bound ", name, ": the model's inputs have no symbolic dim of that name",
           known.empty() ? std::string(" (they have none)") : " (they have: " + known + ")");
    bounds[name] = b;
  }
  Attrs attrs = main->attrs;
  attrs.set("sym_bounds", bounds_attr(bounds));
  mod.add_function("main", make_function(main->params, main->body, main->ret, attrs));
}

PassOptions pass_options(const BuildOptions& opts) {
  PassOptions po;
  for (const TargetPass& t : find_target(opts.target).passes()) po.extra.push_back(t.pass);
  po.time_passes = opts.time_passes;
  po.print_after = opts.print_after;
  po.print_after_all = opts.print_after_all;
  return po;
}

// The tensor type of @transform_params' result field k.
const TensorSI* lifted_sinfo(const IRModule& mod, size_t k) {
  Function t = mod.function("transform_params");
  const auto* tu = t ? as<TupleSI>(t->ret) : nullptr;
  const auto* ts = tu && k < tu->fields.size() ? as<TensorSI>(tu->fields[k]) : nullptr;
  if (!ts || !ts->shape)
    fail("internal error: the lifted constant ", lifted_constant_name(k), " has no field in @transform_params' result");
  return ts;
}

// The activation memory of @main, for relax-inspect: symbolic sizes as
// postfix code (rt::ShapePattern) over `vars`, lifetimes as binding indices.
nlohmann::json memory_json(const Function& main) {
  MemoryAnalysis m = analyze_memory(main);
  std::vector<std::string> vars;
  std::map<std::string, int64_t> index;
  auto code = [&](const SymExpr& e) {
    std::vector<int64_t> c;
    sym_to_code(
        e,
        [&](const SymExpr& v) {
          auto [it, fresh] = index.emplace(v.name(), int64_t(vars.size()));
          if (fresh) vars.push_back(v.name());
          return it->second;
        },
        c);
    return c;
  };
  nlohmann::json j;
  j["storages"] = nlohmann::json::array();
  for (const PlannedStorage& s : m.storages)
    j["storages"].push_back({{"nbytes", code(s.nbytes)}, {"def", s.binding}, {"escapes", s.escapes}});
  j["tensors"] = nlohmann::json::array();
  for (const ActivationTensor& t : m.tensors) {
    if (!t.nbytes.defined()) continue;
    j["tensors"].push_back({{"name", t.name},
                            {"nbytes", code(t.nbytes)},
                            {"def", t.binding},
                            {"last_use", t.last_use},
                            {"escapes", t.escapes},
                            {"storage", t.storage}});
  }
  j["vars"] = vars;
  return j;
}

struct Compiled {
  VMLowered lowered;
  TargetArtifact kernels;  // the target's sections (none without kernels)
};

// VM lowering and code generation of a module.
Compiled compile_module(const IRModule& mod, const BuildOptions& opts) {
  Compiled c;
  c.lowered = lower_to_vm(mod);
  std::vector<tir::Program> programs;
  for (const std::string& name : c.lowered.programs) programs.push_back(mod.program(name));
  if (programs.empty()) return c;
  c.kernels = find_target(opts.target).compile(programs, target_options(opts));
  if (c.kernels.kernel_names.empty()) return c;  // the kernels are named by their programs
  for (std::string& k : c.lowered.exe.kernels) {
    auto it = c.kernels.kernel_names.find(k);
    if (it == c.kernels.kernel_names.end()) fail("codegen produced no kernel for @", k);
    k = it->second;
  }
  return c;
}

// Constant folding at build time: @transform_params (what
// lift-transform-params moved out of @main) is compiled for a host target
// of this build (backends/target.h host_target: the cpu's, for this
// machine), run here on the runtime's device for its kernel section, and
// its results become the package's weights "__lifted_K"; the function and
// the weights only it read leave the package. Skipped when folding is off,
// when the build has no host target (a GPU-only build), or when the
// target's kernels are for another machine than this one (--cpu): then
// the runtime runs @transform_params at load.
bool fold_transform_params(IRModule& mod, NamedTensors& weights, const BuildOptions& opts) {
  const Target* folder = host_target();
  if (!opts.fold_constants || !folder || !find_target(opts.target).folds_here(target_options(opts)) ||
      !mod.function("transform_params"))
    return false;
  IRModule sub = mod;
  sub.remove("main");
  sub = dead_code_elimination(sub);
  BuildOptions host;  // folding runs here, on this machine, whatever the target
  host.target = folder->name();
  host.opt_level = opts.opt_level;
  Compiled c = compile_module(sub, host);
  rt::SectionLookup sections = [&c](const std::string& name) -> std::optional<std::span<const uint8_t>> {
    for (const auto& [n, bytes] : c.kernels.sections)
      if (n == name) return std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return std::nullopt;
  };
  const rt::Device& dev = rt::device_for(sections, host.target, "constant folding");
  std::unique_ptr<rt::Kernels> lib = dev.load(sections, nlohmann::json::object(), 0, "constant folding");
  std::map<std::string, const HostTensor*> by_name;
  for (const auto& [name, t] : weights) by_name[name] = &t;
  rt::VirtualMachine vm(
      c.lowered.exe,
      [&](const std::string& name) {
        auto it = by_name.find(name);
        if (it == by_name.end()) return rt::Tensor();
        const HostTensor& h = *it->second;
        auto dtype = rt::DType::parse(h.dtype.str());
        if (!dtype) fail("constant folding: weight '", name, "' has a dtype the runtime lacks: ", h.dtype.str());
        rt::Tensor t = rt::Tensor::empty(*dtype, h.shape);
        if (h.bytes.size() != t.nbytes())
          fail("constant folding: weight '", name, "' has ", h.bytes.size(), " bytes, its type needs ", t.nbytes());
        if (!h.bytes.empty()) std::memcpy(t.data(), h.bytes.data(), t.nbytes());
        return t;
      },
      lib.get());
  rt::Value r = vm.invoke("transform_params", {});
  const std::vector<rt::Value>& fields = r.tuple("@transform_params' result");
  for (size_t k = 0; k < fields.size(); ++k) {
    const rt::Tensor& t = fields[k].tensor("a folded constant");
    HostTensor h;
    auto dtype = DataType::parse(t.dtype().str());
    if (!dtype) fail("constant folding: result ", k, " has dtype ", t.dtype().str());
    h.dtype = *dtype;
    h.shape = t.shape();
    const auto* p = static_cast<const uint8_t*>(t.data());
    h.bytes.assign(p, p + t.nbytes());
    weights.emplace_back(lifted_constant_name(k), std::move(h));
  }
  mod.remove("transform_params");
  mod = dead_code_elimination(mod);
  return true;
}

// Each file the build read, with its size and checksum64 (hex), as the
// manifest's "build.sources" records them.
nlohmann::json sources_json(const std::string& model, const std::vector<std::string>& files) {
  nlohmann::json out = nlohmann::json::array();
  fs::path dir = fs::path(model).parent_path();
  for (const std::string& f : files) {
    std::shared_ptr<const rt::MappedFile> file = rt::MappedFile::open((dir / f).string());
    std::span<const uint8_t> bytes = file->bytes();
    out.push_back({{"file", f}, {"bytes", bytes.size()}, {"checksum", rt::checksum64_hex(bytes.data(), bytes.size())}});
  }
  return out;
}

std::string compiler_name() { return std::string("relax ") + RELAX_VERSION; }

// The manifest: what a user of the package needs to know without the model
// (docs/runtime_abi.md); "weights" and "lifted" are filled by weight_parts.
nlohmann::json manifest_json(const std::string& model, const LoadedModel& m, const IRModule& mod,
                             const VMLowered& lowered, const BuildOptions& opts) {
  Function main = mod.function("main");
  nlohmann::json man;
  man["format"] = 1;
  man["compiler"] = compiler_name();
  man["target"] = {{"kind", opts.target}};
  for (const auto& [name, value] : target_options(opts).values) man["target"][name] = value;
  man["model"] = fs::path(model).filename().string();
  man["inputs"] = nlohmann::json::array();
  for (size_t i = 0; i < main->params.size(); ++i) {
    const Var& p = main->params[i];
    nlohmann::json j = dims_json(p->sinfo);
    j["name"] = m.input_names.size() == main->params.size() ? m.input_names[i] : p->name;
    man["inputs"].push_back(j);
  }
  std::vector<StructInfo> outs;
  if (const auto* t = as<TupleSI>(main->ret))
    outs = t->fields;
  else
    outs.push_back(main->ret);
  man["outputs"] = nlohmann::json::array();
  man["output_is_tuple"] = as<TupleSI>(main->ret) != nullptr;
  for (size_t i = 0; i < outs.size(); ++i) {
    nlohmann::json j = dims_json(outs[i]);
    j["name"] = i < m.output_names.size() ? m.output_names[i] : "output_" + std::to_string(i);
    man["outputs"].push_back(j);
  }
  man["bounds"] = nlohmann::json::object();
  for (const auto& [name, b] : function_bounds(main)) man["bounds"][name] = {b.lo, b.hi};
  man["memory"] = memory_json(main);
  // What this package was built from and how: relax-build's batch mode
  // skips a model whose package still matches (why_rebuild).
  man["build"] = {{"compiler", compiler_name()},
                  {"compiler_id", opts.compiler_id},
                  {"options", options_key(opts)},
                  {"sources", sources_json(model, m.files)}};

  man["kernels"] = lowered.exe.kernels.size();
  // Each kernel with the graph ops it computes (several when fused).
  man["kernel_list"] = nlohmann::json::array();
  for (const std::string& name : lowered.programs) {
    tir::Program p = mod.program(name);
    man["kernel_list"].push_back({{"name", p->name}, {"ops", program_ops(p)}});
  }
  return man;
}

// The weights section: the weights the bytecode uses, each 64-byte aligned,
// listed in the manifest's "weights" (the parts of the section, not
// copied); lifted constants not folded (computed at load by
// @transform_params) are listed in its "lifted".
std::vector<std::span<const uint8_t>> weight_parts(const std::string& model, const NamedTensors& weights,
                                                   const IRModule& mod, const VMLowered& lowered,
                                                   nlohmann::json& man) {
  std::map<std::string, const HostTensor*> by_name;
  for (const auto& [name, t] : weights) by_name[name] = &t;
  std::vector<std::span<const uint8_t>> parts;
  std::vector<std::pair<std::string, const HostTensor*>> listed;
  man["weights"] = nlohmann::json::array();
  man["lifted"] = nlohmann::json::array();
  for (const std::string& name : lowered.weights) {
    std::optional<size_t> lifted = lifted_constant_index(name);
    if (lifted && !by_name.count(name)) {  // not folded: computed at load by @transform_params
      const TensorSI* t = lifted_sinfo(mod, *lifted);
      std::vector<int64_t> shape;
      for (const SymExpr& d : *t->shape) shape.push_back(d.const_value());
      man["lifted"].push_back({{"name", name}, {"field", *lifted}, {"dtype", t->dtype.str()}, {"shape", shape}});
      continue;
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) fail(model, ": the weight '", name, "' is used but not in the weight file");
    parts.emplace_back(it->second->bytes.data(), it->second->bytes.size());
    listed.emplace_back(name, it->second);
  }
  std::vector<size_t> offsets = rt::PackageWriter::parts_offsets(parts, 64);
  for (size_t k = 0; k < listed.size(); ++k)
    man["weights"].push_back({{"name", listed[k].first},
                              {"dtype", listed[k].second->dtype.str()},
                              {"shape", listed[k].second->shape},
                              {"offset", offsets[k]},
                              {"nbytes", listed[k].second->bytes.size()}});
  return parts;
}

}  // namespace

std::string options_key(const BuildOptions& opts) {
  const Target& target = find_target(opts.target);
  std::string key = cat("target=", opts.target, " O=", opts.opt_level);
  if (std::string own = target.options_key(target_options(opts)); !own.empty()) key += " " + own;
  key += opts.fold_constants ? " fold=1" : " fold=0";
  if (!opts.index_checks) key += " index_checks=0";
  if (opts.channel_layout != "auto") key += " layout=" + opts.channel_layout;
  for (const auto& [name, b] : opts.bounds) key += cat(" bound:", name, "=", b.lo, "..", b.hi);
  if (!opts.import.empty()) key += " " + opts.import.key();
  return key;
}

std::vector<std::string> build_args(const BuildOptions& opts) {
  std::vector<std::string> args{"--target", opts.target, "-O", std::to_string(opts.opt_level)};
  for (const Target* t : all_targets())
    for (const TargetOption& o : t->options()) {
      auto it = opts.target_options.find(o.name);
      if (it == opts.target_options.end()) continue;
      if (!o.is_switch())
        args.insert(args.end(), {o.flag, it->second});
      else if (it->second == "0")
        args.push_back(o.flag);
    }
  for (const auto& [name, b] : opts.bounds) args.insert(args.end(), {"--bound", cat(name, "=", b.lo, "..", b.hi)});
  if (!opts.fold_constants) args.push_back("--no-fold");
  if (!opts.index_checks) args.push_back("--no-index-checks");
  if (opts.channel_layout != "auto") args.insert(args.end(), {"--layout", opts.channel_layout});
  for (const std::string& a : opts.import.args()) args.push_back(a);
  return args;
}

std::string why_rebuild(const std::string& model, const std::string& package, const BuildOptions& opts) {
  std::error_code ec;
  if (!fs::exists(package, ec)) return "no package yet";
  nlohmann::json build;
  try {
    rt::Package pkg = rt::Package::open(package);
    build = nlohmann::json::parse(pkg.section_text("manifest")).value("build", nlohmann::json());
  } catch (const std::exception& e) {
    return cat("the package is not valid (", e.what(), ")");
  }
  if (!build.is_object() || !build.contains("sources")) return "the package records no build";
  if (build.value("compiler", "") != compiler_name() || build.value("compiler_id", "") != opts.compiler_id)
    return "built by another compiler";
  if (build.value("options", "") != options_key(opts)) return "built with other options";
  std::vector<std::string> files;
  for (const auto& s : build["sources"]) files.push_back(s.value("file", ""));
  if (files.empty() || files[0] != fs::path(model).filename().string()) return "built from another model";
  try {
    if (sources_json(model, files) != build["sources"]) return "the model changed";
  } catch (const std::exception&) {
    return "a file the model was built from is gone";
  }
  return "";
}

IRModule build_module(const std::string& model, const BuildOptions& opts) {
  LoadedModel m = load_model(model, opts.import);
  configure_target(m.mod, opts);
  record_bounds(m.mod, opts);
  return run_passes(m.mod, pass_list(m.mod, opts), pass_options(opts));
}

BuildReport build_package(const std::string& model, const std::string& out_path, const BuildOptions& opts) {
  BuildReport report;
  report.package_path = out_path;
  auto t0 = Clock::now();
  auto phase = [&](const char* name) {
    auto t = Clock::now();
    report.phase_seconds.emplace_back(name, std::chrono::duration<double>(t - t0).count());
    t0 = t;
  };

  LoadedModel m = load_model(model, opts.import);
  phase("import");
  configure_target(m.mod, opts);
  record_bounds(m.mod, opts);
  IRModule mod = run_passes(m.mod, pass_list(m.mod, opts), pass_options(opts));
  // A pass that broke the IR is a compiler bug: say so rather than build it.
  if (std::vector<std::string> problems = verify(mod); !problems.empty())
    fail(model, ": internal error: the IR is not well formed after the passes: ", problems[0],
         problems.size() > 1 ? cat(" (and ", problems.size() - 1, " more)") : std::string());
  if (!mod.function("main")) fail(model, ": the module has no @main function");
  phase("passes");

  if (fold_transform_params(mod, m.weights, opts)) phase("fold");

  Compiled compiled = compile_module(mod, opts);
  phase("codegen");

  nlohmann::json man = manifest_json(model, m, mod, compiled.lowered, opts);
  std::vector<std::span<const uint8_t>> weights = weight_parts(model, m.weights, mod, compiled.lowered, man);
  rt::PackageWriter w;
  w.add("manifest", man.dump(1));
  w.add("bytecode", compiled.lowered.exe.serialize());
  for (auto& [name, bytes] : compiled.kernels.sections) w.add(name, std::move(bytes));
  w.add("graph", dataflow_graph(mod).dump());  // for relax-inspect --dot
  w.add_parts("weights", std::move(weights), 64);
  w.write(out_path);
  phase("package");

  report.num_kernels = compiled.lowered.exe.kernels.size();
  report.inputs = man["inputs"];
  report.outputs = man["outputs"];
  report.num_weights = compiled.lowered.weights.size();
  report.package_bytes = size_t(fs::file_size(out_path));
  return report;
}

std::string kernel_source(const IRModule& mod, const BuildOptions& opts) {
  VMLowered lowered = lower_to_vm(mod);
  std::vector<tir::Program> programs;
  for (const std::string& name : lowered.programs) programs.push_back(mod.program(name));
  return find_target(opts.target).emit_source(programs, target_options(opts));
}

}  // namespace relax
