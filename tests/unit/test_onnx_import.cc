// The ONNX importer's core: dims, initializers, topological order, and the
// errors for broken models (none of them may crash).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/onnx_proto.h"
#include "frontends/onnx/safetensors.h"
#include "ir/printer.h"
#include "runtime/file_util.h"

using namespace relax;
namespace fs = std::filesystem;

namespace {

// One folder for the whole run, removed when the binary exits.
fs::path temp_dir() {
  static const rt::TempDir dir("relax_onnx_test");
  return dir.path();
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

std::string write_model(const std::string& name, const onnx::ModelProto& m) {
  return write_bytes(name, m.SerializeAsString());
}

void add_input(onnx::GraphProto* g, const std::string& name, int elem, const std::vector<std::string>& dims) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* t = in->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (const std::string& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim->set_dim_value(std::stoll(d));
    else if (d != "?")
      dim->set_dim_param(d);
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name.empty() ? op + "_" + outs[0] : name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

onnx::ModelProto model_with(const std::function<void(onnx::GraphProto*)>& build, int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  build(g);
  return m;
}

std::string error_of(const std::string& path) {
  try {
    onnx_fe::import_onnx(path);
  } catch (const onnx_fe::UnsupportedModel& e) {
    return std::string("unsupported: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("dim_params become named symbolic variables shared across inputs; expressions are parsed") {
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "a", onnx_fe::kFloat, {"batch", "seq"});
    add_input(g, "b", onnx_fe::kFloat, {"batch", "past + seq", "?", "0"});
    add_node(g, "Identity", {"a"}, {"y"});
    add_node(g, "Identity", {"b"}, {"z"});
    g->add_output()->set_name("y");
    g->add_output()->set_name("z");
  });
  auto r = onnx_fe::import_onnx(write_model("dims.onnx", m));
  REQUIRE(r.inputs.size() == 2);
  auto* a = as<TensorSI>(r.inputs[0].sinfo);
  auto* b = as<TensorSI>(r.inputs[1].sinfo);
  REQUIRE(a->shape);
  REQUIRE(b->shape);
  CHECK((*a->shape)[0] == (*b->shape)[0]);  // the same variable "batch"
  CHECK(to_string((*b->shape)[1]) == "past + seq");
  CHECK((*b->shape)[1] - (*a->shape)[1] != SymExpr(0));
  CHECK((*b->shape)[2].is_var());  // "?": a fresh variable
  CHECK((*b->shape)[3].is_var());  // dim_value 0: a fresh variable
  CHECK((*b->shape)[2] != (*b->shape)[3]);
  std::string json = onnx_fe::summary_json("dims.onnx", &r, nullptr, "");
  CHECK(json.find("\"past + seq\"") != std::string::npos);
  CHECK(json.find("\"batch\"") != std::string::npos);
}

TEST_CASE("nodes out of topological order are sorted; cycles are errors naming the nodes") {
  auto sorted = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n"});
    add_node(g, "Identity", {"t"}, {"y"}, "second");
    add_node(g, "Identity", {"x"}, {"t"}, "first");
    g->add_output()->set_name("y");
  });
  CHECK(error_of(write_model("sorted.onnx", sorted)) == "");
  auto cyclic = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n"});
    add_node(g, "Identity", {"b"}, {"a"}, "loop_a");
    add_node(g, "Identity", {"a"}, {"b"}, "loop_b");
    g->add_output()->set_name("a");
  });
  std::string e = error_of(write_model("cyclic.onnx", cyclic));
  CHECK(e.find("cycle") != std::string::npos);
  CHECK(e.find("'loop_a'") != std::string::npos);
  CHECK(e.find("cyclic.onnx") != std::string::npos);
}

TEST_CASE("a missing input or initializer names the node and the value") {
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n"});
    add_node(g, "Identity", {"w"}, {"y"}, "uses_w");
    g->add_output()->set_name("y");
  });
  std::string e = error_of(write_model("missing.onnx", m));
  CHECK(e.find("node 'uses_w'") != std::string::npos);
  CHECK(e.find("input 'w' is not produced") != std::string::npos);
}

TEST_CASE("unsupported ops are all listed at once with their nodes") {
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n"});
    add_node(g, "NoSuchOp", {"x"}, {"a"}, "n1");
    add_node(g, "NoSuchOp", {"a"}, {"b"}, "n2");
    add_node(g, "AlsoMissing", {"b"}, {"y"}, "n3");
    g->add_output()->set_name("y");
  });
  try {
    onnx_fe::import_onnx(write_model("unsupported.onnx", m));
    FAIL("expected UnsupportedModel");
  } catch (const onnx_fe::UnsupportedModel& u) {
    REQUIRE(u.items.size() == 2);
    std::string msg = u.what();
    CHECK(msg.find("NoSuchOp (opset 17) at 'n1', 'n2'") != std::string::npos);
    CHECK(msg.find("AlsoMissing (opset 17) at 'n3'") != std::string::npos);
  }
}

TEST_CASE("random bytes, truncated models and wrong types are errors, never crashes") {
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    std::string bytes(size_t(rng() % 512), '\0');
    for (char& c : bytes) c = char(rng());
    std::string e = error_of(write_bytes("random.onnx", bytes));
    CHECK_MESSAGE(!e.empty(), "random bytes imported without error");
  }
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n", "4"});
    add_node(g, "Identity", {"x"}, {"y"});
    g->add_output()->set_name("y");
  });
  std::string full = m.SerializeAsString();
  for (size_t cut = 1; cut < full.size(); cut += 3) {
    std::string e = error_of(write_bytes("truncated.onnx", full.substr(0, cut)));
    CHECK_MESSAGE(!e.empty(), "a model truncated at " << cut << " bytes imported without error");
  }
  CHECK(error_of((temp_dir() / "does_not_exist.onnx").string()).find("cannot open") != std::string::npos);
  // A string-typed graph input is reported as unsupported, not a crash.
  auto strings = model_with([](onnx::GraphProto* g) {
    add_input(g, "s", onnx_fe::kString, {"n"});
    add_node(g, "Identity", {"s"}, {"y"});
    g->add_output()->set_name("y");
  });
  CHECK(error_of(write_model("strings.onnx", strings)).find("STRING-typed graph input") != std::string::npos);
}

TEST_CASE("initializers become named constants whose bytes are kept; external data may not escape the folder") {
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"2"});
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx_fe::kFloat);
    w->add_dims(2);
    w->add_float_data(1.5f);
    w->add_float_data(-2.0f);
    add_node(g, "Identity", {"w"}, {"y"});
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("init.onnx", m));
  REQUIRE(r.weights.size() == 1);
  CHECK(r.weights[0].first == "w");
  CHECK(r.weights[0].second.to_floats() == std::vector<double>{1.5, -2.0});
  CHECK(print_module(r.mod).find("const(\"w\", Tensor[(2,), f32])") != std::string::npos);
  // Round trip through the safetensors encoding.
  NamedTensors back = decode_safetensors(encode_safetensors(r.weights), "w.safetensors");
  REQUIRE(back.size() == 1);
  CHECK(back[0].second.bytes == r.weights[0].second.bytes);

  // External data in a file beside the model, at an offset.
  {
    float vals[3] = {0.0f, 4.0f, -1.0f};
    std::string blob(16, 'x');
    blob.append(reinterpret_cast<const char*>(&vals[1]), 8);
    write_bytes("weights.bin", blob);
    auto ext = model_with([](onnx::GraphProto* g) {
      add_input(g, "x", onnx_fe::kFloat, {"2"});
      auto* w = g->add_initializer();
      w->set_name("w");
      w->set_data_type(onnx_fe::kFloat);
      w->add_dims(2);
      w->set_data_location(onnx::TensorProto::EXTERNAL);
      auto add_kv = [&](const char* k, const char* v) {
        auto* kv = w->add_external_data();
        kv->set_key(k);
        kv->set_value(v);
      };
      add_kv("location", "weights.bin");
      add_kv("offset", "16");
      add_kv("length", "8");
      add_node(g, "Add", {"x", "w"}, {"y"});
      g->add_output()->set_name("y");
    });
    auto e = onnx_fe::import_onnx(write_model("external.onnx", ext));
    REQUIRE(e.weights.size() == 1);
    CHECK(e.weights[0].second.to_floats() == std::vector<double>{4.0, -1.0});
  }

  auto escaping = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"2"});
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx_fe::kFloat);
    w->add_dims(2);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = w->add_external_data();
    kv->set_key("location");
    kv->set_value("../../etc/passwd");
    add_node(g, "Identity", {"w"}, {"y"});
    g->add_output()->set_name("y");
  });
  CHECK(error_of(write_model("escape.onnx", escaping)).find("escapes the model's folder") != std::string::npos);
}

TEST_CASE("half and bfloat16 conversions round to nearest even") {
  CHECK(half_to_float(float_to_half(1.0f)) == 1.0f);
  CHECK(half_to_float(float_to_half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(half_to_float(float_to_half(1e6f))));
  CHECK(half_to_float(float_to_half(5.96046448e-08f)) == 5.96046448e-08f);  // smallest subnormal
  CHECK(float_to_half(1.0f + 1.0f / 2048) == float_to_half(1.0f));          // tie to even
  CHECK(bfloat_to_float(float_to_bfloat(3.0f)) == 3.0f);
  CHECK(std::isnan(bfloat_to_float(float_to_bfloat(std::nanf("")))));
}

TEST_CASE("inconsistent types are errors naming the node") {
  auto mixed = model_with([](onnx::GraphProto* g) {
    add_input(g, "a", onnx_fe::kFloat, {"n"});
    add_input(g, "b", onnx_fe::kInt64, {"n"});
    add_node(g, "Add", {"a", "b"}, {"y"}, "add_mixed");
    g->add_output()->set_name("y");
  });
  std::string e = error_of(write_model("mixed.onnx", mixed));
  CHECK(e.find("node 'add_mixed' (Add, opset 17)") != std::string::npos);
  CHECK(e.find("f32") != std::string::npos);
  CHECK(e.find("i64") != std::string::npos);

  auto bad_attr = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"2", "3"});
    auto* n = add_node(g, "Transpose", {"x"}, {"y"}, "bad_perm");
    auto* a = n->add_attribute();
    a->set_name("perm");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(1.0f);
    g->add_output()->set_name("y");
  });
  e = error_of(write_model("bad_attr.onnx", bad_attr));
  CHECK(e.find("node 'bad_perm'") != std::string::npos);
  CHECK(e.find("attribute 'perm' should be a list of ints") != std::string::npos);

  auto mismatch = model_with([](onnx::GraphProto* g) {
    add_input(g, "a", onnx_fe::kFloat, {"n", "768"});
    add_input(g, "b", onnx_fe::kFloat, {"512", "64"});
    add_node(g, "MatMul", {"a", "b"}, {"y"}, "proj");
    g->add_output()->set_name("y");
  });
  e = error_of(write_model("matmul.onnx", mismatch));
  CHECK(e.find("node 'proj' (MatMul, opset 17): matmul: inner dims 768 and 512 differ") != std::string::npos);
}

TEST_CASE("GRU and LSTM: an empty activation name is that position's default") {
  // Some exporters spell a default as "" (activations=["", ""]).
  auto gru = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"s", "b", "4"});
    add_input(g, "w", onnx_fe::kFloat, {"1", "9", "4"});
    add_input(g, "r", onnx_fe::kFloat, {"1", "9", "3"});
    auto* n = add_node(g, "GRU", {"x", "w", "r"}, {"y"}, "gru_1");
    auto* hs = n->add_attribute();
    hs->set_name("hidden_size");
    hs->set_type(onnx::AttributeProto::INT);
    hs->set_i(3);
    auto* acts = n->add_attribute();
    acts->set_name("activations");
    acts->set_type(onnx::AttributeProto::STRINGS);
    acts->add_strings("Relu");
    acts->add_strings("");
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("gru_empty_acts.onnx", gru));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("activations=[\"Relu\", \"Tanh\"]") != std::string::npos);
}

TEST_CASE("an input of unknown rank whose op fixes the rank gets fresh dims bound at run time") {
  // Resize with scales of 4 values: x (no shape at all) is rank 4.
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {});
    g->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    auto* sc = g->add_initializer();
    sc->set_name("scales");
    sc->set_data_type(onnx_fe::kFloat);
    sc->add_dims(4);
    for (float f : {1.0f, 1.0f, 2.0f, 2.0f}) sc->add_float_data(f);
    add_node(g, "Resize", {"x", "", "scales"}, {"y"}, "up");
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("resize_unknown_rank.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("match_cast(x, Tensor[(x_d0, x_d1, x_d2, x_d3), f32])") != std::string::npos);
  CHECK(text.find("Tensor[(x_d0, x_d1, x_d2 * 2, x_d3 * 2), f32]") != std::string::npos);
}

namespace {
onnx::TensorProto* add_i64(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                           std::vector<int64_t> values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx_fe::kInt64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t v : values) t->add_int64_data(v);
  return t;
}
}  // namespace

TEST_CASE("torch's F.pad chain (pads to pairs, reversed, transposed, flattened) folds to a constant pad") {
  // F.pad(x, (0, w % 2)) as torch writes it: (0, w % 2, 0, 0) -> Reshape(-1, 2) ->
  // Slice(step -1) -> Transpose -> Reshape(-1) -> Pad.
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n", "w"});
    add_node(g, "Shape", {"x"}, {"s"});
    add_i64(g, "one", {1}, {1});
    add_i64(g, "two", {}, {2});
    add_i64(g, "zero", {1}, {0});
    add_i64(g, "zeros", {2}, {0, 0});
    add_i64(g, "pairs", {2}, {-1, 2});
    add_i64(g, "flat", {1}, {-1});
    add_i64(g, "st", {1}, {-1});
    add_i64(g, "en", {1}, {-9223372036854775807});
    add_i64(g, "ax", {1}, {0});
    add_node(g, "Gather", {"s", "one"}, {"w1"});
    add_node(g, "Mod", {"w1", "two"}, {"odd"});
    add_node(g, "Concat", {"zero", "odd", "zeros"}, {"p"})->add_attribute()->CopyFrom([] {
      onnx::AttributeProto a;
      a.set_name("axis");
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(0);
      return a;
    }());
    add_node(g, "Reshape", {"p", "pairs"}, {"p2"});
    add_node(g, "Slice", {"p2", "st", "en", "ax", "st"}, {"p3"});
    add_node(g, "Transpose", {"p3"}, {"p4"});
    add_node(g, "Reshape", {"p4", "flat"}, {"pads"});
    add_node(g, "Pad", {"x", "pads"}, {"y"});
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("fpad.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("match_cast") == std::string::npos);
  REQUIRE(r.outputs.size() == 1);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(n, w + w % 2), f32]");
}

TEST_CASE("sizes computed in float from constants fold at import (torchvision's batch padding)") {
  // torchvision's detection transform pads to ceil(max(sizes) / 32) * 32 through Cast to float,
  // ReduceMax, Div and Ceil on constants: (3, 150, 148) is padded to (3, 160, 160).
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"3", "150", "148"});
    auto attr = [](const char* name, int64_t v) {
      onnx::AttributeProto a;
      a.set_name(name);
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(v);
      return a;
    };
    add_i64(g, "sizes", {2}, {150, 148});
    add_i64(g, "z4", {4}, {0, 0, 0, 0});
    add_i64(g, "stride", {}, {32});
    auto* c = g->add_initializer();
    c->set_name("stride_f");
    c->set_data_type(onnx_fe::kFloat);
    c->add_float_data(32.0f);
    add_node(g, "Cast", {"sizes"}, {"sf"})->add_attribute()->CopyFrom(attr("to", onnx_fe::kFloat));
    add_node(g, "ReduceMax", {"sf"}, {"m"})->add_attribute()->CopyFrom(attr("keepdims", 1));
    add_node(g, "Div", {"m", "stride_f"}, {"q"});
    add_node(g, "Ceil", {"q"}, {"cq"});
    add_node(g, "Cast", {"cq"}, {"ci"})->add_attribute()->CopyFrom(attr("to", onnx_fe::kInt64));
    add_node(g, "Mul", {"ci", "stride"}, {"padded"});
    add_node(g, "Sub", {"padded", "sizes"}, {"extra"});
    add_node(g, "Concat", {"z4", "extra"}, {"pads"})->add_attribute()->CopyFrom(attr("axis", 0));
    add_node(g, "Pad", {"x", "pads"}, {"y"});
    g->add_output()->set_name("y");
  }, 13);
  auto r = onnx_fe::import_onnx(write_model("float_sizes.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  REQUIRE(r.outputs.size() == 1);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(3, 160, 160), f32]");
  CHECK(text.find("match_cast") == std::string::npos);
  CHECK(text.find("ceil") == std::string::npos);
}

TEST_CASE("x[-s:] with s a length keeps its dims, checked at run time; one value's dims are bound once") {
  // k: (b, s + p, 8); q: (b, s, 8); y = k[:, -s:] + q (T5's position bias
  // over past and new positions). s = 0 would slice all of k: the
  // match_cast checks the assumed length at run time.
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "k", onnx_fe::kFloat, {"b", "s + p", "8"});
    add_input(g, "q", onnx_fe::kFloat, {"b", "s", "8"});
    add_node(g, "Shape", {"q"}, {"qs"});
    add_i64(g, "one", {1}, {1});
    add_i64(g, "end", {1}, {9223372036854775807});
    add_node(g, "Gather", {"qs", "one"}, {"s1"});
    add_node(g, "Neg", {"s1"}, {"start"});
    add_node(g, "Slice", {"k", "start", "end", "one"}, {"tail"});
    add_node(g, "Add", {"tail", "q"}, {"y"});
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("neg_slice.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("= match_cast(tail_2, Tensor[(b, s, 8), f32])") != std::string::npos);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b, s, 8), f32]");
}

TEST_CASE("sequences: a known list stays values; a run-time one is a List read with fresh dims") {
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"n", "6"});
    add_input(g, "i", onnx_fe::kInt64, {});
    add_i64(g, "three", {}, {3});
    add_i64(g, "zero", {}, {0});
    onnx::AttributeProto axis;
    axis.set_name("axis");
    axis.set_type(onnx::AttributeProto::INT);
    axis.set_i(1);
    // Split into two known parts of 3: read at 0, concatenated back.
    add_node(g, "SplitToSequence", {"x", "three"}, {"parts"})->add_attribute()->CopyFrom(axis);
    add_node(g, "SequenceAt", {"parts", "zero"}, {"first"});
    add_node(g, "ConcatFromSequence", {"parts"}, {"back"})->add_attribute()->CopyFrom(axis);
    // Split along n (a run-time length): a List, read at a run-time position.
    axis.set_i(0);
    add_node(g, "SplitToSequence", {"x"}, {"rows"})->add_attribute()->CopyFrom(axis);
    add_node(g, "SequenceAt", {"rows", "i"}, {"row"});
    add_node(g, "SequenceLength", {"rows"}, {"count"});
    for (const char* o : {"first", "back", "row", "count"}) g->add_output()->set_name(o);
  });
  auto r = onnx_fe::import_onnx(write_model("sequences.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  REQUIRE(r.outputs.size() == 4);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(n, 3), f32]");
  CHECK(print_sinfo(r.outputs[1].sinfo) == "Tensor[(n, 6), f32]");
  CHECK(text.find("rows: List[Tensor[(1, 6), f32]] = list_split(x)") != std::string::npos);
  CHECK(text.find("list_at(rows, i)") != std::string::npos);
  CHECK(print_sinfo(r.outputs[2].sinfo) == "Tensor[(1, 6), f32]");  // every part has this shape
  CHECK(print_sinfo(r.outputs[3].sinfo) == "Tensor[(), i64]");
}

namespace {
// `if x.shape[1] == 4: y = x else: y = x.permute(2, 0, 1)`: the else
// branch cannot build for x of rank 2 (a rank-3 input was meant), and the
// condition is known only when the user fixes the dim.
onnx::ModelProto branch_on_dim() {
  return model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"b", "s"});
    add_i64(g, "one", {}, {1});
    add_i64(g, "four", {}, {4});
    add_node(g, "Shape", {"x"}, {"shape"});
    add_node(g, "Gather", {"shape", "one"}, {"s_dim"});
    add_node(g, "Equal", {"s_dim", "four"}, {"cond"});
    auto* n = add_node(g, "If", {"cond"}, {"y"}, "branch");
    onnx::GraphProto then_g, else_g;
    then_g.set_name("then");
    add_node(&then_g, "Identity", {"x"}, {"y_then"});
    then_g.add_output()->set_name("y_then");
    else_g.set_name("else");
    auto* perm = add_node(&else_g, "Transpose", {"x"}, {"y_else"})->add_attribute();
    perm->set_name("perm");
    perm->set_type(onnx::AttributeProto::INTS);
    for (int64_t p : {2, 0, 1}) perm->add_ints(p);
    else_g.add_output()->set_name("y_else");
    for (auto [name, sub] : {std::pair{"then_branch", &then_g}, std::pair{"else_branch", &else_g}}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::GRAPH);
      *a->mutable_g() = *sub;
    }
    g->add_output()->set_name("y");
  });
}
}  // namespace

TEST_CASE("an If branch that cannot be built for the known shapes raises its error at run time instead") {
  auto r = onnx_fe::import_onnx(write_model("branch_on_dim.onnx", branch_on_dim()));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("call_builtin(\"relax.raise\", (\"If 'branch': its else branch was taken") != std::string::npos);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b, s), f32]");  // the other branch's
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("Transpose") != std::string::npos);
}

TEST_CASE("--dim fixes a named input dim, so a branch on it folds; --shape names an input's dims") {
  onnx_fe::ImportOptions opts;
  opts.add_dim("s=4");
  std::string path = write_model("branch_on_dim2.onnx", branch_on_dim());
  auto r = onnx_fe::import_onnx(path, opts);
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(text.find("if (") == std::string::npos);
  CHECK(r.notes.empty());
  CHECK(print_sinfo(r.inputs[0].sinfo) == "Tensor[(b, 4), f32]");
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b, 4), f32]");

  onnx_fe::ImportOptions shape;
  shape.add_shape("x=2,width");
  CHECK(print_sinfo(onnx_fe::import_onnx(path, shape).inputs[0].sinfo) == "Tensor[(2, width), f32]");
  CHECK(shape.args() == std::vector<std::string>{"--shape", "x=2,width"});

  auto error_of = [&](const char* dim, const char* shp) {
    try {
      onnx_fe::ImportOptions o;
      if (dim) o.add_dim(dim);
      if (shp) o.add_shape(shp);
      onnx_fe::import_onnx(path, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("t=4", nullptr).find("--dim t: no input of the model has a dim of that name (inputs: x)") !=
        std::string::npos);
  CHECK(error_of("s=0", nullptr).find("--dim s: '0' is not a dim") != std::string::npos);
  CHECK(error_of("s", nullptr).find("not of the form NAME=VALUE") != std::string::npos);
  CHECK(error_of(nullptr, "y=1,2").find("--shape y: the model has no input of that name (inputs: x)") !=
        std::string::npos);
  CHECK(error_of(nullptr, "x=1,2,3").find("--shape x: the model gives the input rank 2, not 3") !=
        std::string::npos);
  CHECK(error_of(nullptr, "x=1,-2").find("'-2' is not a dim") != std::string::npos);
}

TEST_CASE("a concat whose parts' other dims are not provably equal keeps dims, checked at run time") {
  // A resize's (h // 4) * 2 beside a skip's h // 2 (equal for h a multiple of 4).
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "a", onnx_fe::kFloat, {"b", "2", "h"});
    add_input(g, "c", onnx_fe::kFloat, {"b", "3", "w"});
    auto* n = add_node(g, "Concat", {"a", "c"}, {"y"});
    auto* axis = n->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(1);
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("concat_assume.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b, 5, h), f32]");
  CHECK(text.find("match_cast(y, Tensor[(b, 5, h), f32])") != std::string::npos);
}

TEST_CASE("a reduction of a shape's dims folds at import (tf2onnx's element count)") {
  // Expand(0.0, [prod(shape(x))]): a vector of b * s zeros.
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "x", onnx_fe::kFloat, {"b", "s"});
    auto* zero = g->add_initializer();
    zero->set_name("zero");
    zero->set_data_type(onnx_fe::kFloat);
    zero->add_float_data(0);
    add_i64(g, "axes0", {1}, {0});
    add_node(g, "Shape", {"x"}, {"shape"});
    add_node(g, "ReduceProd", {"shape", "axes0"}, {"count"});
    add_node(g, "Expand", {"zero", "count"}, {"y"});
    g->add_output()->set_name("y");
  }, 18);
  auto r = onnx_fe::import_onnx(write_model("reduce_fold.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b * s,), f32]");
  CHECK(text.find("match_cast") == std::string::npos);
}

TEST_CASE("a broadcast whose operands' dims are not provably equal keeps dims, checked at run time") {
  // An FPN's upsampled (h // 2) * 2 beside its skip's h: the shorter is kept.
  auto m = model_with([](onnx::GraphProto* g) {
    add_input(g, "skip", onnx_fe::kFloat, {"b", "1", "height", "w"});
    add_input(g, "up", onnx_fe::kFloat, {"1", "8", "height // 2 * 2", "w"});
    add_node(g, "Add", {"skip", "up"}, {"y"});
    g->add_output()->set_name("y");
  });
  auto r = onnx_fe::import_onnx(write_model("broadcast_assume.onnx", m));
  std::string text = print_module(r.mod);
  INFO(text);
  CHECK(print_sinfo(r.outputs[0].sinfo) == "Tensor[(b, 8, height, w), f32]");
  CHECK(text.find("match_cast(y, Tensor[(b, 8, height, w), f32])") != std::string::npos);
}

TEST_CASE("Pow by a constant 2 of one element is x * x; other exponents, or one that widens the shape, stay power") {
  auto pow_model = [](float e, std::vector<int64_t> dims) {
    return model_with([&](onnx::GraphProto* g) {
      add_input(g, "x", onnx_fe::kFloat, {"n", "4"});
      auto* w = g->add_initializer();
      w->set_name("e");
      w->set_data_type(onnx_fe::kFloat);
      for (int64_t d : dims) w->add_dims(d);
      w->add_float_data(e);
      add_node(g, "Pow", {"x", "e"}, {"y"});
      g->add_output()->set_name("y");
    });
  };
  std::string sq = print_module(onnx_fe::import_onnx(write_model("pow2.onnx", pow_model(2.0f, {}))).mod);
  INFO(sq);
  CHECK(sq.find("multiply(x, x)") != std::string::npos);
  CHECK(sq.find("power(") == std::string::npos);
  CHECK(print_module(onnx_fe::import_onnx(write_model("pow2r2.onnx", pow_model(2.0f, {1, 1}))).mod).find("multiply(x, x)") !=
        std::string::npos);
  // A cube is not exact as products; a rank-3 exponent makes the result rank 3.
  CHECK(print_module(onnx_fe::import_onnx(write_model("pow3.onnx", pow_model(3.0f, {}))).mod).find("power(") !=
        std::string::npos);
  CHECK(print_module(onnx_fe::import_onnx(write_model("pow2r3.onnx", pow_model(2.0f, {1, 1, 1}))).mod).find("power(") !=
        std::string::npos);
}

TEST_CASE("integer convolutions run in f32 where every partial sum is exact there, as conv_integer otherwise") {
  // u8 operands minus u8 zero points reach 255 in magnitude: 28 channels of
  // 3x3 (252 taps) keep every sum within 2^24, 29 channels (261) may not.
  auto conv_model = [](int channels) {
    return model_with([channels](onnx::GraphProto* g) {
      std::string c = std::to_string(channels);
      add_input(g, "x", onnx_fe::kUint8, {"n", c, "h", "w"});
      add_input(g, "w", onnx_fe::kUint8, {"4", c, "3", "3"});
      add_input(g, "xz", onnx_fe::kUint8, {});
      add_input(g, "wz", onnx_fe::kUint8, {});
      add_node(g, "ConvInteger", {"x", "w", "xz", "wz"}, {"y"});
      g->add_output()->set_name("y");
    });
  };
  std::string exact = print_module(onnx_fe::import_onnx(write_model("convint28.onnx", conv_model(28))).mod);
  std::string wide = print_module(onnx_fe::import_onnx(write_model("convint29.onnx", conv_model(29))).mod);
  CHECK(exact.find("conv_integer(") == std::string::npos);
  CHECK(exact.find("astype") != std::string::npos);
  CHECK(wide.find("conv_integer(x, w, xz, wz") != std::string::npos);
  CHECK(wide.find("astype") == std::string::npos);
}
