// relax-inspect: what a package holds, without running it.
//
//   relax-inspect PKG [--bind NAME=V ...] [--json]
//   relax-inspect PKG|MODEL.relax --dot | --svg FILE | --png FILE
//   relax-inspect PKG --extract DIR
//
// --extract writes each kernel module to DIR: kernels.so (cpu),
// <stage>.spv per shader (vulkan), kernels.ptx (cuda), and the kernel
// index beside it (kernels.<target>.json). For cuda packages the text
// report gives ptxas's registers and spills per kernel.
//
// --dot prints the graph after fusion (one box per kernel, edges labelled
// with symbolic shapes: passes/analysis/dataflow_graph.h) as Graphviz dot;
// --svg and --png render it with Graphviz's `dot` (Debian's graphviz). For
// IR text the O2 pipeline for cpu runs first.
//
// Prints the inputs and outputs with their symbolic dims, the bounds the
// package was built with, the weights, the kernels (each with the graph ops
// it computes) and the activation memory of @main for the given sizes:
// planned (the footprint of the plan's storages plus the tensors it leaves
// to the run-time pool), pool (no plan: the footprint of a caching pool
// allocator, as runtime/allocator.h, that frees each tensor after its last
// use) and unplanned (the sum of all activation tensors); outputs, which
// the caller owns, count in none of them. --bind NAME=LO..HI
// sweeps a dim: one call per value with the pools kept across the calls,
// as a server that runs a model at changing sizes keeps them. A variable
// not given with --bind takes its upper bound when the package records
// one. Links the runtime and the IR core (for IR text), not LLVM.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "ir/error.h"
#include "ir/parser.h"
#include "passes/analysis/dataflow_graph.h"
#include "passes/pass.h"
#include "runtime/allocator.h"
#include "runtime/bytecode.h"
#include "runtime/error.h"
#include "runtime/file_util.h"
#include "runtime/package.h"
#include "tools/version.h"

using namespace relax::rt;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string human(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string dims_text(const json& t) {
  std::string s = t.value("dtype", std::string("?")) + "[";
  if (t.contains("shape")) {
    bool first = true;
    for (const json& d : t["shape"]) {
      s += (first ? "" : ", ") + (d.is_string() ? d.get<std::string>() : std::to_string(d.get<int64_t>()));
      first = false;
    }
  } else {
    s += "ndim " + std::to_string(t.value("ndim", -1));
  }
  return s + "]";
}

struct MemoryFigures {
  std::map<std::string, std::string> values;  // the variables' values used ("7", or "0..127" for a sweep)
  std::vector<std::string> missing;           // variables with no value
  uint64_t planned = 0, unplanned = 0, pool = 0, outputs = 0;
  size_t calls = 0, tensors = 0, planned_tensors = 0, storages = 0;
};

int64_t eval(const json& code, const std::vector<int64_t>& heap, const std::string& what) {
  std::vector<int64_t> c = code.get<std::vector<int64_t>>();
  int64_t v = eval_shape_code(c.data(), int64_t(c.size()), heap.data(), int64_t(heap.size()));
  if (v < 0) rt_fail(what, " has a negative size (", v, ") for these values");
  return v;
}

// A caching pool allocator as the runtime's (runtime/allocator.h): a freed
// block waits on the free list of its size class; the footprint is every
// byte it ever took from the system.
class PoolModel {
 public:
  struct Block {
    size_t def, last;  // binding indices; last == SIZE_MAX: held to the end of the call
    uint64_t bytes;
  };
  void run_call(std::vector<Block> blocks) {
    std::stable_sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.def < b.def; });
    std::multimap<size_t, size_t> dying;  // last use -> size class
    std::vector<size_t> held;             // to the end of the call
    size_t e = 0;
    while (e < blocks.size()) {
      size_t i = blocks[e].def;
      // Free what died before binding i, then allocate what i defines.
      for (auto it = dying.begin(); it != dying.end() && it->first < i;) {
        ++cached_[it->second];
        it = dying.erase(it);
      }
      for (; e < blocks.size() && blocks[e].def == i; ++e) {
        size_t cls = PoolAllocator::size_class(blocks[e].bytes);
        if (cached_[cls] > 0)
          --cached_[cls];
        else
          footprint_ += cls;
        if (blocks[e].last == SIZE_MAX)
          held.push_back(cls);
        else
          dying.emplace(blocks[e].last, cls);
      }
    }
    for (const auto& [last, cls] : dying) ++cached_[cls];
    for (size_t cls : held) ++cached_[cls];
  }
  uint64_t footprint() const { return footprint_; }

 private:
  std::map<size_t, int> cached_;  // size class -> free blocks
  uint64_t footprint_ = 0;
};

// `bind` maps a variable to [lo, hi]; a range is a sweep: one call per value
// (several ranges: every combination), the pools kept across the calls, as a
// server running the model at changing sizes keeps them.
MemoryFigures memory_figures(const json& man, const std::map<std::string, std::pair<int64_t, int64_t>>& bind) {
  MemoryFigures f;
  const json& mem = man.at("memory");
  std::vector<std::string> vars = mem.at("vars").get<std::vector<std::string>>();
  auto text = [](const std::pair<int64_t, int64_t>& r) {
    return r.first == r.second ? std::to_string(r.first) : std::to_string(r.first) + ".." + std::to_string(r.second);
  };
  for (const auto& [name, r] : bind) f.values[name] = text(r);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const std::string& v : vars) {
    std::pair<int64_t, int64_t> r{0, 0};
    if (auto it = bind.find(v); it != bind.end()) {
      r = it->second;
    } else if (man.contains("bounds") && man["bounds"].contains(v)) {
      r.first = r.second = man["bounds"][v][1].get<int64_t>();
      f.values[v] = text(r);
    } else {
      f.missing.push_back(v);
    }
    ranges.push_back(r);
  }
  if (!f.missing.empty()) return f;
  for (const json& s : mem.at("storages")) f.storages += !s.value("escapes", false);
  for (const json& t : mem.at("tensors")) {
    if (t.at("escapes").get<bool>()) continue;
    ++f.tensors;
    if (t.at("storage").get<int>() >= 0) ++f.planned_tensors;
  }

  uint64_t combos = 1;
  for (const auto& r : ranges) {
    combos *= uint64_t(r.second - r.first + 1);
    if (combos > 100000) rt_fail("--bind: the ranges make more than 100000 calls; narrow them");
  }
  PoolModel pool, planned;
  std::vector<int64_t> heap(vars.size());
  for (size_t k = 0; k < vars.size(); ++k) heap[k] = ranges[k].first;
  for (uint64_t call = 0; call < combos; ++call) {
    std::vector<PoolModel::Block> unplanned_blocks, planned_blocks;
    uint64_t total = 0, outputs = 0;
    for (const json& s : mem.at("storages"))
      if (!s.value("escapes", false))  // an output's own storage: counted with the outputs
        planned_blocks.push_back(
            {s.at("def").get<size_t>(), SIZE_MAX, uint64_t(eval(s.at("nbytes"), heap, "a storage"))});
    for (const json& t : mem.at("tensors")) {
      uint64_t bytes = uint64_t(eval(t.at("nbytes"), heap, "tensor '" + t.value("name", std::string()) + "'"));
      size_t def = t.at("def").get<size_t>();
      size_t last = t.at("last_use").get<size_t>();
      if (t.at("escapes").get<bool>()) {  // an output: the caller's memory, not an activation
        outputs += bytes;
        continue;
      }
      total += bytes;
      unplanned_blocks.push_back({def, last, bytes});
      if (t.at("storage").get<int>() < 0) planned_blocks.push_back({def, last, bytes});
    }
    pool.run_call(std::move(unplanned_blocks));
    planned.run_call(std::move(planned_blocks));
    f.unplanned = std::max(f.unplanned, total);
    f.outputs = std::max(f.outputs, outputs);
    // The next combination, the last variable fastest.
    for (size_t k = vars.size(); k-- > 0;) {
      if (heap[k] < ranges[k].second) {
        ++heap[k];
        break;
      }
      heap[k] = ranges[k].first;
    }
  }
  f.calls = combos;
  f.pool = pool.footprint();
  f.planned = planned.footprint();
  return f;
}

// The graph of a package (its "graph" section) or of IR text (after the
// O2 pipeline for the traits it records: a host target's when none).
json graph_of(const std::string& path) {
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".relax") == 0) {
    try {
      relax::IRModule mod = relax::parse_module_file(path);
      mod = relax::run_passes(mod, relax::pipeline("O2", relax::TargetTraits::of(mod)));
      return relax::dataflow_graph(mod);
    } catch (const relax::Error& e) {
      rt_fail(e.what());
    }
  }
  Package pkg = Package::open(path);
  if (!pkg.has("graph")) rt_fail(path, ": the package has no graph (an older relax-build wrote it; rebuild it)");
  json graph = json::parse(pkg.section_text("graph"));
  // The outputs by the names the model gave them.
  json outs = json::parse(pkg.section_text("manifest")).value("outputs", json::array());
  size_t k = 0;
  for (json& n : graph["nodes"])
    if (n.value("kind", "") == "output" && k < outs.size()) n["name"] = outs[k++].value("name", "output");
  return graph;
}

// Renders dot text with Graphviz into `out` (through a temporary file).
void render(const std::string& dot_text, const std::string& format, const std::string& out) {
  if (system("command -v dot >/dev/null 2>&1") != 0)
    rt_fail("--", format, ": Graphviz's dot is not installed (Debian: apt install graphviz); --dot prints the graph");
  AtomicFile target(out);  // claims the name; dot writes the temporary file beside it
  fs::path p(out);
  fs::path tmp =
      (p.parent_path().empty() ? fs::path(".") : p.parent_path()) / ("." + p.filename().string() + ".dot-tmp");
  FILE* pipe = popen(("dot -T" + format + " -o '" + tmp.string() + "'").c_str(), "w");
  if (!pipe) rt_fail("--", format, ": cannot run dot");
  fwrite(dot_text.data(), 1, dot_text.size(), pipe);
  int status = pclose(pipe);
  std::error_code ec;
  if (status != 0) {
    fs::remove(tmp, ec);
    rt_fail("--", format, ": dot failed (exit status ", status, ")");
  }
  std::string bytes = read_file(tmp.string());
  fs::remove(tmp, ec);
  target.write(bytes);
  target.commit();
}

// Writes `bytes` to DIR/name atomically.
void write_into(const fs::path& dir, const std::string& name, std::span<const uint8_t> bytes) {
  AtomicFile f((dir / name).string());
  f.write(bytes.data(), bytes.size());
  f.commit();
}

int extract_kernels(const Package& pkg, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) rt_fail(dir, ": cannot create the folder: ", ec.message());
  auto text = [](std::string_view s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  std::vector<std::string> written;
  if (auto so = pkg.find("kernels.cpu")) {
    write_into(dir, "kernels.so", *so);
    written.push_back("kernels.so");
  }
  if (pkg.has("kernels.vulkan")) {
    json meta = json::parse(pkg.section_text("kernels.vulkan"));
    std::span<const uint8_t> spv = pkg.section("kernels.vulkan.spv");
    write_into(dir, "kernels.vulkan.json", text(pkg.section_text("kernels.vulkan")));
    written.push_back("kernels.vulkan.json");
    auto shader = [&](const json& at, const std::string& name) {
      uint64_t off = at.value("offset", uint64_t(0)) * 4, n = at.value("words", uint64_t(0)) * 4;
      if (off > spv.size() || n > spv.size() - off) rt_fail(pkg.path(), ": shader ", name, " lies outside its section");
      write_into(dir, name + ".spv", spv.subspan(off, n));
      written.push_back(name + ".spv");
    };
    for (const json& k : meta.value("kernels", json::array()))
      for (const json& st : k.value("stages", json::array())) {
        std::string name = st.value("name", "stage");
        shader(st, name);
        for (const char* variant : {"plain", "rows", "shared"})
          if (st.contains(variant)) shader(st[variant], name + "_" + variant);
      }
  }
  if (pkg.has("kernels.cuda")) {
    write_into(dir, "kernels.cuda.json", text(pkg.section_text("kernels.cuda")));
    write_into(dir, "kernels.ptx", pkg.section("kernels.cuda.ptx"));
    written.insert(written.end(), {"kernels.cuda.json", "kernels.ptx"});
  }
  if (written.empty()) std::cout << pkg.path() << ": no kernel modules (the package runs builtins only)\n";
  for (const std::string& w : written) std::cout << (fs::path(dir) / w).string() << "\n";
  return 0;
}

using Binds = std::map<std::string, std::pair<int64_t, int64_t>>;

// --bind NAME=V or NAME=LO..HI, each.
Binds parse_binds(const std::vector<std::string>& binds) {
  Binds bind;
  for (const std::string& b : binds) {
    size_t eq = b.find('=');
    std::pair<int64_t, int64_t> r;
    try {
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("no =");
      std::string value = b.substr(eq + 1);
      size_t dots = value.find("..");
      std::string lo = value.substr(0, dots), hi = dots == std::string::npos ? lo : value.substr(dots + 2);
      size_t u1 = 0, u2 = 0;
      r = {std::stoll(lo, &u1), std::stoll(hi, &u2)};
      if (u1 != lo.size() || u2 != hi.size() || r.first < 0 || r.first > r.second) throw std::invalid_argument("bad");
    } catch (const std::exception&) {
      rt_fail("--bind expects NAME=V or NAME=LO..HI with non-negative integers, got '", b, "'");
    }
    bind[b.substr(0, eq)] = r;
  }
  return bind;
}

// Every bound dim is one the package has, within its bounds.
void check_binds(const json& man, const Binds& bind) {
  for (const auto& [name, r] : bind) {
    bool known = man.contains("memory") && std::find(man["memory"]["vars"].begin(), man["memory"]["vars"].end(),
                                                     json(name)) != man["memory"]["vars"].end();
    bool declared = false;
    for (const json& io : man["inputs"])
      for (const json& d : io.value("shape", json::array()))
        declared = declared || (d.is_string() && d.get<std::string>() == name);
    if (!known && !declared) rt_fail("--bind ", name, ": the package has no symbolic dim of that name");
    if (man.contains("bounds") && man["bounds"].contains(name)) {
      int64_t lo = man["bounds"][name][0], hi = man["bounds"][name][1];
      if (r.first < lo || r.second > hi)
        rt_fail("--bind ", name, "=", r.first, r.first == r.second ? "" : ".." + std::to_string(r.second),
                " is outside the package's bound ", lo, "..", hi);
    }
  }
}

// Kernel and library calls in @main and the functions lifted from it
// (CUDA graph regions, loop bodies: "main.<name>").
struct CallCounts {
  size_t calls = 0, library_calls = 0, regions = 0;
  std::set<std::string> libraries;
};

CallCounts count_calls(const Executable& exe) {
  CallCounts c;
  if (!exe.functions.empty()) {
    const std::string& main_name = exe.functions[0].name;
    for (const auto& f : exe.functions) {
      if (f.name != main_name && f.name.rfind(main_name + ".", 0) != 0) continue;
      for (const Instr& in : f.code) {
        if (in.op != Opcode::Call) continue;
        if (in.callee_kind == CalleeKind::Kernel) ++c.calls;
        if (in.callee_kind != CalleeKind::Builtin) continue;
        const std::string& b = exe.builtins[size_t(in.callee)];
        // The runtime's own builtins are relax.* and cuda.*; the rest are
        // library kernels (call_library).
        if (b == "cuda.graph_run") ++c.regions;
        if (b.rfind("relax.", 0) != 0 && b.rfind("cuda.", 0) != 0) {
          ++c.library_calls;
          c.libraries.insert(b);
        }
      }
    }
  }
  return c;
}

// What --json prints: the manifest's figures, the calls, the memory plan
// at the bound dims.
json inspect_json(const std::string& path, const Package& pkg, const json& man, const Executable& exe,
                  const Binds& bind) {
  CallCounts c = count_calls(exe);
  uint64_t weight_bytes = 0;
  for (const json& w : man.value("weights", json::array())) weight_bytes += w.value("nbytes", uint64_t(0));

  json out;
  out["package"] = path;
  out["package_bytes"] = pkg.file_size();
  out["compiler"] = man.value("compiler", std::string());
  out["model"] = man.value("model", std::string());
  out["target"] = man.value("target", json::object());
  out["inputs"] = man.value("inputs", json::array());
  out["outputs"] = man.value("outputs", json::array());
  out["bounds"] = man.value("bounds", json::object());
  out["weights"] = {{"count", man.value("weights", json::array()).size()}, {"bytes", weight_bytes}};
  out["lifted"] = man.value("lifted", json::array());  // computed at load by @transform_params
  out["kernels"] = man.value("kernels", 0);
  out["kernel_calls"] = c.calls;
  out["library_calls"] = c.library_calls;
  out["libraries"] = c.libraries;
  out["cuda_graph_regions"] = c.regions;
  out["kernel_list"] = man.value("kernel_list", json::array());
  if (pkg.has("kernels.cuda")) {
    json cuda = json::parse(pkg.section_text("kernels.cuda"));
    out["cuda"] = {{"arch", cuda.value("arch", "")}, {"ptxas", cuda.value("ptxas", json())}};
  }
  if (man.contains("memory")) {
    MemoryFigures f = memory_figures(man, bind);
    json m;
    m["bind"] = f.values;
    if (!f.missing.empty()) {
      m["unbound"] = f.missing;
    } else {
      m["planned_bytes"] = f.planned;
      m["unplanned_bytes"] = f.unplanned;
      m["pool_bytes"] = f.pool;
      m["calls"] = f.calls;
      m["output_bytes"] = f.outputs;
      m["tensors"] = f.tensors;
      m["planned_tensors"] = f.planned_tensors;
      m["storages"] = f.storages;
    }
    out["memory"] = m;
  }

  return out;
}

// The text form of inspect_json's object.
void print_text(const std::string& path, const Package& pkg, const json& out) {
  size_t calls = out["kernel_calls"], library_calls = out["library_calls"], regions = out["cuda_graph_regions"];
  uint64_t weight_bytes = out["weights"]["bytes"];
  std::cout << path << ": " << human(pkg.file_size()) << ", target " << out["target"].value("kind", "?") << ", "
            << out["compiler"].get<std::string>() << ", from " << out["model"].get<std::string>() << "\n";
  std::cout << "inputs:\n";
  for (const json& t : out["inputs"]) std::cout << "  " << t.value("name", "?") << ": " << dims_text(t) << "\n";
  std::cout << "outputs:\n";
  for (const json& t : out["outputs"]) std::cout << "  " << t.value("name", "?") << ": " << dims_text(t) << "\n";
  if (!out["bounds"].empty()) {
    std::cout << "bounds:";
    for (const auto& [name, b] : out["bounds"].items()) std::cout << " " << name << "=" << b[0] << ".." << b[1];
    std::cout << "\n";
  }
  std::cout << "weights: " << out["weights"]["count"] << " tensors, " << human(weight_bytes) << "\n";
  if (!out["lifted"].empty())
    std::cout << "computed at load: " << out["lifted"].size() << " weight transforms (@transform_params)\n";
  std::cout << "kernels: " << out["kernels"] << " (" << calls << " calls in @main)\n";
  if (library_calls) {
    std::cout << "library calls: " << library_calls << " (";
    const char* sep = "";
    for (const json& l : out["libraries"]) std::cout << sep << l.get<std::string>(), sep = ", ";
    std::cout << ")\n";
  }
  if (regions) std::cout << "CUDA graph regions: " << regions << " (a CUDA graph per binding of the symbolic dims)\n";
  if (out.contains("cuda")) {
    const json& c = out["cuda"];
    std::cout << "cuda: PTX for " << c["arch"].get<std::string>();
    if (c["ptxas"].is_null()) {
      std::cout << ", not checked by ptxas (not installed where it was built)\n";
    } else {
      std::cout << ", checked by ptxas " << c["ptxas"].value("version", "?") << ":\n";
      for (const auto& [k, f] : c["ptxas"]["kernels"].items())
        std::cout << "  " << k << ": " << f.value("registers", 0) << " registers, " << f.value("spill_stores", 0)
                  << " bytes spill stores, " << f.value("spill_loads", 0) << " bytes spill loads, "
                  << f.value("stack", 0) << " bytes stack\n";
    }
  }
  for (const json& k : out["kernel_list"]) {
    std::cout << "  " << k.value("name", "?") << ":";
    for (const json& op : k.value("ops", json::array())) std::cout << " " << op.get<std::string>();
    std::cout << "\n";
  }
  if (out.contains("memory")) {
    const json& m = out["memory"];
    if (m.contains("unbound")) {
      std::cout << "memory: give --bind for";
      for (const json& v : m["unbound"]) std::cout << " " << v.get<std::string>();
      std::cout << " to see the plan's figures\n";
    } else {
      std::cout << "memory of @main's activations";
      if (!m["bind"].empty()) {
        std::cout << " at";
        for (const auto& [name, v] : m["bind"].items()) std::cout << " " << name << "=" << v;
      }
      if (m["calls"].get<size_t>() > 1) std::cout << " (" << m["calls"] << " calls in a row)";
      std::cout << ":\n";
      std::cout << "  planned:   " << human(m["planned_bytes"]) << " (" << m["storages"] << " storages for "
                << m["planned_tensors"] << " of " << m["tensors"] << " tensors, the rest from the pool)\n";
      std::cout << "  pool:      " << human(m["pool_bytes"])
                << " (no plan: a caching pool allocator, each tensor freed after its last use)\n";
      std::cout << "  unplanned: " << human(m["unplanned_bytes"]) << " (no plan, no reuse: the sum of the tensors)\n";
      std::cout << "  (outputs, the caller's: " << human(m["output_bytes"]) << "; the plan holds a storage to the end "
                << "of the call, the pool frees each tensor after its last use)\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "relax-inspect: what a package (*.rpkg) holds: inputs and outputs with symbolic dims, bounds, weights, "
      "kernels and the activation memory plan.\n\n"
      "Examples:\n"
      "  relax-inspect gpt2.rpkg\n"
      "  relax-inspect gpt2.rpkg --bind batch_size=1 --bind sequence_length=128 --json\n"
      "  relax-inspect gpt2.rpkg --bind batch_size=1 --bind sequence_length=1 --bind past_sequence_length=0..127\n"
      "  relax-inspect gpt2.rpkg --dot > gpt2.dot\n"
      "  relax-inspect model.relax --svg model.svg\n"
      "  relax-inspect model.cuda.rpkg --extract kernels/"};
  std::string path;
  std::vector<std::string> binds;
  bool as_json = false;
  app.add_option("package", path, "the package (*.rpkg); with --dot, --svg or --png also IR text (*.relax)")
      ->required();
  bool dot = false;
  std::string svg, png;
  app.add_flag("--dot", dot, "print the graph after fusion as Graphviz dot (one box per kernel, edges with shapes)");
  app.add_option("--svg", svg, "render the graph into this SVG file (needs Graphviz's dot)");
  app.add_option("--png", png, "render the graph into this PNG file (needs Graphviz's dot)");
  std::string extract;
  app.add_option("--extract", extract,
                 "write each kernel module into this folder: kernels.so (cpu), one .spv per shader (vulkan), "
                 "kernels.ptx (cuda), with the kernel index");
  app.add_option(
      "--bind", binds,
      "a symbolic dim's value for the memory figures: NAME=V, or NAME=LO..HI for one call per value (repeatable)");
  app.add_flag("--json", as_json, "print one JSON object on stdout");
  app.footer(
      "Exit status: 0 done; 1 an error (a damaged package, an unknown dim, a value beyond a bound, no dot "
      "for --svg/--png).");
  app.set_version_flag("--version", relax::version_text("relax-inspect"));
  CLI11_PARSE(app, argc, argv);

  try {
    Binds bind = parse_binds(binds);
    if (dot || !svg.empty() || !png.empty()) {
      std::string text = relax::dataflow_dot(graph_of(path), fs::path(path).filename().string());
      if (dot) std::cout << text;
      if (!svg.empty()) render(text, "svg", svg);
      if (!png.empty()) render(text, "png", png);
      return 0;
    }

    Package pkg = Package::open(path);
    if (!extract.empty()) return extract_kernels(pkg, extract);
    json man = json::parse(pkg.section_text("manifest"));
    Executable exe = Executable::deserialize(pkg.section_text("bytecode"));
    check_binds(man, bind);

    json out = inspect_json(path, pkg, man, exe, bind);
    if (as_json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    print_text(path, pkg, out);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "relax-inspect: error: " << e.what() << "\n";
    return 1;
  }
}
