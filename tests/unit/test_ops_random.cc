// The graph ops of ir/ops/random.cc (random_uniform, random_normal,
// multinomial) and the converters of frontends/onnx/convert_random.cc that
// have no conformance cases (RandomUniform, RandomNormal(Like), Multinomial,
// Dropout with a constant ratio, Optional), imported from small models
// built here.
#include <doctest/doctest.h>

#include "tests/unit/op_test_util.h"
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "frontends/onnx/importer.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/printer.h"
#include "runtime/file_util.h"

using namespace relax;
namespace fs = std::filesystem;

namespace {

const DataType f32 = DataType::f32();

using testing::infer;
using testing::infer_error;
using testing::tensor;

// ---- Building small ONNX models -------------------------------------------------------

struct Model {
  onnx::ModelProto m;
  onnx::GraphProto* g;

  explicit Model(int opset = 22) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("g");
  }
  void input(const std::string& name, const std::vector<int64_t>& dims, int elem = 1) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* shape = t->mutable_shape();
    for (int64_t d : dims) {
      if (d < 0)
        shape->add_dim()->set_dim_param("n");
      else
        shape->add_dim()->set_dim_value(d);
    }
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + std::to_string(g->node_size()));
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) {
      n->add_output(o);
      if (!o.empty()) g->add_output()->set_name(o);
    }
    return n;
  }
};

onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name, onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  attr(n, name, onnx::AttributeProto::INT)->set_i(v);
}
void set_float(onnx::NodeProto* n, const std::string& name, float v) {
  attr(n, name, onnx::AttributeProto::FLOAT)->set_f(v);
}
void set_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A constant scalar float node.
void constant_scalar(Model& m, const std::string& name, float v) {
  auto* n = m.g->add_node();
  n->set_op_type("Constant");
  n->add_output(name);
  auto* t = attr(n, "value", onnx::AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(1);
  t->add_float_data(v);
}

struct Imported {
  std::string outputs;  // the outputs' struct infos, "; "-separated, or "error: ..."
  std::string ir;       // the printed module
};

Imported import(const Model& model, const std::string& name) {
  static const rt::TempDir dir("relax_random_test");  // removed when the binary exits
  fs::path d = dir.path();
  fs::path p = d / (name + ".onnx");
  std::ofstream(p, std::ios::binary) << model.m.SerializeAsString();
  try {
    onnx_fe::ImportedModel r = onnx_fe::import_onnx(p.string());
    Imported out;
    for (const auto& o : r.outputs) out.outputs += (out.outputs.empty() ? "" : "; ") + print_sinfo(o.sinfo);
    out.ir = print_module(r.mod);
    return out;
  } catch (const Error& e) {
    return {std::string("error: ") + e.what(), ""};
  }
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The distinct "seed=N" attributes printed in `ir`.
std::set<std::string> seeds(const std::string& ir) {
  std::set<std::string> out;
  for (size_t p = ir.find("seed="); p != std::string::npos; p = ir.find("seed=", p + 1))
    out.insert(ir.substr(p, ir.find_first_of(",)", p) - p));
  return out;
}

}  // namespace

// ---- Graph ops ------------------------------------------------------------------------------

TEST_CASE("random_uniform / random_normal: the shape and dtype asked for") {
  SymExpr n = SymExpr::var("n");
  for (const char* op : {"random_uniform", "random_normal"}) {
    CAPTURE(op);
    CHECK(infer(op, {make_shape({n, 3})}, {{"dtype", f32}}) == "Tensor[(n, 3), f32]");
    CHECK(infer(op, {make_shape({})}, {{"dtype", DataType::f(64)}, {"seed", int64_t(7)}}) == "Tensor[(), f64]");
    CHECK(infer(op, {make_shape({2})}, {{"dtype", DataType::bf16()}}) == "Tensor[(2,), bf16]");
    CHECK(contains(infer_error(op, {make_shape({2})}, {{"dtype", DataType::i32()}}), "dtype must be f16, bf16"));
    CHECK(contains(infer_error(op, {make_shape({-1, 2})}, {{"dtype", f32}}), op));
    CHECK(contains(infer_error(op, {make_shape({2})}), "dtype"));  // dtype is required
  }
  CHECK(infer("random_uniform", {make_shape({4})}, {{"dtype", DataType::f16()}, {"low", -1.0}, {"high", 1.0}}) ==
        "Tensor[(4,), f16]");
  CHECK(infer("random_normal", {make_shape({4})}, {{"dtype", f32}, {"mean", 2.0}, {"scale", 0.5}}) ==
        "Tensor[(4,), f32]");
}

TEST_CASE("multinomial: (batch, classes) logits -> (batch, sample_size) indices") {
  SymExpr b = SymExpr::var("b");
  CHECK(infer("multinomial", {tensor({b, 10})}) == "Tensor[(b, 1), i32]");
  CHECK(infer("multinomial", {tensor({3, 10}, DataType::f(64))},
              {{"sample_size", int64_t(5)}, {"dtype", DataType::i64()}}) == "Tensor[(3, 5), i64]");
  CHECK(contains(infer_error("multinomial", {tensor({3})}), "rank 2"));
  CHECK(contains(infer_error("multinomial", {tensor({3, 4}, DataType::i32())}), "multinomial"));
  CHECK(contains(infer_error("multinomial", {tensor({3, 4})}, {{"sample_size", int64_t(0)}}), "sample_size"));
  CHECK(contains(infer_error("multinomial", {tensor({3, 4})}, {{"dtype", f32}}), "i32 or i64"));
}

// ---- Converters --------------------------------------------------------------------------

TEST_CASE("ONNX RandomUniform / RandomNormal: shape attribute, dtype, seeds") {
  Model m(22);
  auto* u = m.node("RandomUniform", {}, {"u"});
  set_ints(u, "shape", {2, 3});
  set_float(u, "seed", 3.0f);
  auto* v = m.node("RandomNormal", {}, {"v"});
  set_ints(v, "shape", {4});
  set_int(v, "dtype", 11);
  set_float(v, "scale", 2.0f);
  auto* w = m.node("RandomNormal", {}, {"w"});
  set_ints(w, "shape", {4});
  Imported r = import(m, "generators");
  CHECK(r.outputs == "Tensor[(2, 3), f32]; Tensor[(4,), f64]; Tensor[(4,), f32]");
  CHECK(contains(r.ir, "scale=2"));
  // An integral float seed is itself; without a seed attribute each node
  // gets its own, hashed from its output name: three distinct seeds.
  std::set<std::string> s = seeds(r.ir);
  CHECK(s.size() == 3);
  CHECK(s.count("seed=3") == 1);
}

TEST_CASE("ONNX RandomUniformLike / RandomNormalLike take the input's shape (symbolic) and dtype") {
  Model m(22);
  m.input("x", {-1, 3}, 10);  // f16, (n, 3)
  m.node("RandomUniformLike", {"x"}, {"u"});
  set_int(m.node("RandomNormalLike", {"x"}, {"v"}), "dtype", 1);
  CHECK(import(m, "like").outputs == "Tensor[(n, 3), f16]; Tensor[(n, 3), f32]");
}

TEST_CASE("ONNX Multinomial") {
  Model m(22);
  m.input("x", {-1, 5});
  auto* n = m.node("Multinomial", {"x"}, {"y"});
  set_int(n, "sample_size", 4);
  set_int(n, "dtype", 7);
  CHECK(import(m, "multinomial").outputs == "Tensor[(n, 4), i64]");
}

TEST_CASE("ONNX Dropout: training with a constant ratio; identity when not training or ratio 0") {
  SUBCASE("training, constant ratio") {
    Model m(22);
    m.input("x", {-1, 4});
    constant_scalar(m, "r", 0.25f);
    auto* t = m.g->add_node();  // training_mode = true
    t->set_op_type("Constant");
    t->add_output("t");
    auto* tv = attr(t, "value", onnx::AttributeProto::TENSOR)->mutable_t();
    tv->set_data_type(9);
    tv->add_int32_data(1);
    m.node("Dropout", {"x", "r", "t"}, {"y", "mask"});
    Imported r = import(m, "dropout_train");
    CHECK(r.outputs == "Tensor[(n, 4), f32]; Tensor[(n, 4), bool]");
    CHECK(contains(r.ir, "random_uniform"));
  }
  SUBCASE("no training_mode: the identity") {
    Model m(22);
    m.input("x", {2, 4});
    m.node("Dropout", {"x"}, {"y", "mask"});
    Imported r = import(m, "dropout_infer");
    CHECK(r.outputs == "Tensor[(2, 4), f32]; Tensor[(2, 4), bool]");
    CHECK(!contains(r.ir, "random_uniform"));
  }
  SUBCASE("opset 7: the mask has the input's type") {
    Model m(7);
    m.input("x", {2, 4});
    m.node("Dropout", {"x"}, {"y", "mask"});
    CHECK(import(m, "dropout_old").outputs == "Tensor[(2, 4), f32]; Tensor[(2, 4), f32]");
  }
}

TEST_CASE("ONNX Optional on a plain tensor") {
  Model m(18);
  m.input("x", {3});
  m.node("Optional", {"x"}, {"o"});
  m.node("OptionalHasElement", {"o"}, {"has"});
  m.node("OptionalGetElement", {"o"}, {"get"});
  m.node("OptionalHasElement", {}, {"none"});
  CHECK(import(m, "optional").outputs == "Tensor[(3,), f32]; Tensor[(), bool]; Tensor[(3,), f32]; Tensor[(), bool]");

  Model e(18);  // an empty optional needs a real optional type
  auto* n = e.node("Optional", {}, {"o"});
  auto* a = attr(n, "type", onnx::AttributeProto::TYPE_PROTO);
  a->mutable_tp()->mutable_tensor_type()->set_elem_type(1);
  e.node("OptionalHasElement", {"o"}, {"has"});
  CHECK(contains(import(e, "empty_optional").outputs, "empty Optional"));
}
