// The ONNX converters that have no conformance cases: the com.microsoft
// contrib ops (frontends/onnx/convert_contrib.cc) and the non-string
// LabelEncoder (convert_ml.cc), imported from small models built here.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "frontends/onnx/importer.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "tests/unit/op_test_util.h"
#include "runtime/file_util.h"

using namespace relax;
namespace fs = std::filesystem;

namespace {

// ---- Building small ONNX models -------------------------------------------------------

void add_value(onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

struct Model {
  onnx::ModelProto m;
  onnx::GraphProto* g;

  explicit Model(const std::string& domain, int version = 1) {
    m.set_ir_version(8);
    for (auto [d, v] : {std::pair<std::string, int>{"", 17}, {domain, version}}) {
      auto* o = m.add_opset_import();
      o->set_domain(d);
      o->set_version(v);
    }
    g = m.mutable_graph();
    g->set_name("g");
  }
  void input(const std::string& name, const std::vector<std::string>& dims, int elem = 1) {
    add_value(g->add_input(), name, elem, dims);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  onnx::NodeProto* node(const std::string& domain, const std::string& op, std::vector<std::string> ins,
                        std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    n->set_name(op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) {
      n->add_output(o);
      if (!o.empty()) output(o);
    }
    return n;
  }
};

void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void set_strings(onnx::NodeProto* n, const std::string& name, std::vector<std::string> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (auto& x : v) a->add_strings(x);
}

// Imports the model; returns its outputs' struct infos, "; "-separated, or
// the error.
std::string import_outputs(const Model& model, const std::string& name) {
  static const rt::TempDir dir("relax_contrib_test");  // removed when the binary exits
  fs::path d = dir.path();
  fs::path p = d / (name + ".onnx");
  std::ofstream(p, std::ios::binary) << model.m.SerializeAsString();
  std::string s;
  try {
    onnx_fe::ImportedModel r = onnx_fe::import_onnx(p.string());
    for (const auto& o : r.outputs) s += (s.empty() ? "" : "; ") + print_sinfo(o.sinfo);
  } catch (const Error& e) {
    s = std::string("error: ") + e.what();
  }
  fs::remove(p);
  return s;
}

const std::string ms = "com.microsoft";

}  // namespace

TEST_CASE("com.microsoft activations keep the input's shape") {
  Model m(ms);
  m.input("x", {"batch", "seq", "64"});
  m.input("bias", {"64"});
  m.node(ms, "Gelu", {"x"}, {"g"});
  m.node(ms, "BiasGelu", {"x", "bias"}, {"bg"});
  m.node(ms, "FastGelu", {"x", "bias"}, {"fg"});
  m.node(ms, "QuickGelu", {"x"}, {"qg"});
  std::string t = "Tensor[(batch, seq, 64), f32]";
  CHECK(import_outputs(m, "act") == t + "; " + t + "; " + t + "; " + t);
}

TEST_CASE("com.microsoft FusedMatMul transposes the last two dims") {
  Model m(ms);
  m.input("a", {"b", "8", "m"});
  m.input("w", {"16", "8"});
  auto* n = m.node(ms, "FusedMatMul", {"a", "w"}, {"y"});
  set_int(n, "transA", 1);
  set_int(n, "transB", 1);
  CHECK(import_outputs(m, "fused_matmul") == "Tensor[(b, m, 16), f32]");
}

TEST_CASE("com.microsoft layer normalizations: outputs and statistics") {
  Model m(ms);
  m.input("x", {"b", "s", "32"});
  m.input("skip", {"b", "s", "32"});
  m.input("gamma", {"32"});
  m.input("beta", {"32"});
  m.node(ms, "SkipLayerNormalization", {"x", "skip", "gamma", "beta", "beta"}, {"y", "mean", "inv", "sum"});
  m.node(ms, "LayerNormalization", {"x", "gamma", "beta"}, {"ln", "ln_mean", "ln_inv"});
  m.node(ms, "SkipSimplifiedLayerNormalization", {"x", "skip", "gamma"}, {"rms", "", "", "rms_sum"});
  std::string t = "Tensor[(b, s, 32), f32]", stat = "Tensor[(b, s, 1), f32]";
  CHECK(import_outputs(m, "norms") ==
        t + "; " + stat + "; " + stat + "; " + t + "; " + t + "; " + stat + "; " + stat + "; " + t + "; " + t);
}

TEST_CASE("com.microsoft Attention: merged projection, masks, past and present") {
  Model m(ms);
  m.input("x", {"batch", "seq", "64"});
  m.input("w", {"64", "192"});
  m.input("bias", {"192"});
  m.input("mask", {"batch", "total"}, 6);
  m.input("past", {"2", "batch", "4", "past_len", "16"});
  auto* n = m.node(ms, "Attention", {"x", "w", "bias", "mask", "past"}, {"y", "present"});
  set_int(n, "num_heads", 4);
  set_int(n, "unidirectional", 1);
  CHECK(import_outputs(m, "attention") ==
        "Tensor[(batch, seq, 64), f32]; Tensor[(2, batch, 4, past_len + seq, 16), f32]");

  // Key lengths as the mask; V of another width.
  Model m2(ms);
  m2.input("x", {"2", "5", "64"});
  m2.input("w", {"64", "96"});
  m2.input("lens", {"2"}, 6);
  auto* n2 = m2.node(ms, "Attention", {"x", "w", "", "lens"}, {"y"});
  set_int(n2, "num_heads", 2);
  set_ints(n2, "qkv_hidden_sizes", {32, 32, 32});
  CHECK(import_outputs(m2, "attention_lens") == "Tensor[(2, 5, 32), f32]");
}

// ---- ai.onnx.ml LabelEncoder -------------------------------------------------------------------

TEST_CASE("LabelEncoder: integer keys map to integer values; string keys are unsupported") {
  Model m("ai.onnx.ml", 4);
  m.input("x", {"n"}, 7);
  auto* n = m.node("ai.onnx.ml", "LabelEncoder", {"x"}, {"y"});
  set_ints(n, "keys_int64s", {1, 5, 1});
  set_ints(n, "values_int64s", {10, 50, 11});
  CHECK(import_outputs(m, "label_encoder") == "Tensor[(n,), i64]");

  Model s("ai.onnx.ml", 4);
  s.input("x", {"n"}, 7);
  auto* sn = s.node("ai.onnx.ml", "LabelEncoder", {"x"}, {"y"});
  set_strings(sn, "keys_strings", {"a"});
  set_ints(sn, "values_int64s", {1});
  CHECK(import_outputs(s, "label_encoder_strings").find("string keys or values") != std::string::npos);
}
