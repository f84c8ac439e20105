// Fuzz targets of the ONNX importer.
//
//   fuzz_onnx        bytes -> ModelProto parser -> importer
//   fuzz_onnx_proto  the same entry, with a mutator that parses the input as
//                    a ModelProto and changes its fields (dims, dtypes,
//                    attributes, graph edges, op types, initializers,
//                    opsets) before serializing it again, so that mutations
//                    get past the parser into the converters
//                    (RELAX_FUZZ_PROTO_MUTATOR).
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/onnx_proto.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  relax::fuzz::expect_clean_errors([&] {
    onnx::ModelProto model = relax::onnx_fe::parse_model({data, size}, "fuzz.onnx");
    relax::onnx_fe::import_onnx_model(model, "fuzz.onnx", relax::fuzz::empty_dir());
  });
  return 0;
}

#ifdef RELAX_FUZZ_PROTO_MUTATOR
namespace {

using Rng = std::mt19937_64;

size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

int64_t pick_int(Rng& rng) {
  static const int64_t kValues[] = {0, 1, 2, 3, -1, -2, 4, 7, 8, 16, 64, 255, 256, 1 << 20,
                                    int64_t(1) << 31, int64_t(1) << 40, std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  return rng() % 4 == 0 ? int64_t(rng() % 1000) - 500 : kValues[pick(rng, std::size(kValues))];
}

float pick_float(Rng& rng) {
  static const float kValues[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-30f, 1e30f, std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  return kValues[pick(rng, std::size(kValues))];
}

// Every graph of the model: the main one and each subgraph of an attribute.
void collect_graphs(onnx::GraphProto* g, std::vector<onnx::GraphProto*>& out) {
  out.push_back(g);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) collect_graphs(a.mutable_g(), out);
      for (auto& sg : *a.mutable_graphs()) collect_graphs(&sg, out);
    }
}

std::vector<std::string> value_names(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

void mutate_type(onnx::TypeProto* t, Rng& rng) {
  if (!t->has_tensor_type()) return;
  auto* tt = t->mutable_tensor_type();
  switch (rng() % 5) {
    case 0:
      tt->set_elem_type(int(rng() % 28));
      return;
    case 1:
      tt->clear_shape();
      return;
    case 2:
      tt->mutable_shape()->add_dim()->set_dim_value(pick_int(rng));
      return;
    default: {
      auto* shape = tt->mutable_shape();
      if (shape->dim_size() == 0) return;
      auto* d = shape->mutable_dim(int(pick(rng, size_t(shape->dim_size()))));
      if (rng() % 3 == 0)
        d->set_dim_param(rng() % 2 ? "N" : "batch");
      else
        d->set_dim_value(pick_int(rng));
    }
  }
}

void mutate_attribute(onnx::AttributeProto* a, Rng& rng) {
  switch (rng() % 6) {
    case 0:
      a->set_i(pick_int(rng));
      a->set_type(onnx::AttributeProto::INT);
      return;
    case 1:
      a->set_f(pick_float(rng));
      a->set_type(onnx::AttributeProto::FLOAT);
      return;
    case 2: {
      if (a->ints_size() == 0 || rng() % 3 == 0) {
        a->add_ints(pick_int(rng));
      } else {
        a->set_ints(int(pick(rng, size_t(a->ints_size()))), pick_int(rng));
      }
      if (rng() % 4 == 0) a->mutable_ints()->RemoveLast();
      return;
    }
    case 3:
      a->set_type(onnx::AttributeProto::AttributeType(rng() % 15));
      return;
    case 4: {
      static const char* kStrings[] = {"", "NOTSET", "SAME_UPPER", "VALID", "linear", "nearest", "cubic", "constant",
                                       "reflect", "edge", "DCR", "CRD", "tanh", "Relu", "ij,jk->ik", "...i,...i"};
      a->set_s(kStrings[pick(rng, std::size(kStrings))]);
      return;
    }
    default:
      if (a->floats_size() > 0) a->set_floats(int(pick(rng, size_t(a->floats_size()))), pick_float(rng));
      else a->add_floats(pick_float(rng));
  }
}

void mutate_tensor(onnx::TensorProto* t, Rng& rng) {
  switch (rng() % 6) {
    case 0:
      if (t->dims_size() > 0) t->set_dims(int(pick(rng, size_t(t->dims_size()))), pick_int(rng));
      else t->add_dims(pick_int(rng));
      return;
    case 1:
      t->set_data_type(int(rng() % 28));
      return;
    case 2:
      if (t->has_raw_data()) t->mutable_raw_data()->resize(t->raw_data().size() / 2);
      else if (t->float_data_size() > 0) t->mutable_float_data()->RemoveLast();
      else if (t->int64_data_size() > 0) t->mutable_int64_data()->RemoveLast();
      return;
    case 3: {
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      static const char* kLocations[] = {"weights.bin", "../escape.bin", "/etc/passwd", "", "a/../../b"};
      auto* kv = t->add_external_data();
      kv->set_key(rng() % 4 ? "location" : "offset");
      kv->set_value(kLocations[pick(rng, std::size(kLocations))]);
      return;
    }
    case 4:
      if (t->has_raw_data() && !t->raw_data().empty()) {
        std::string& raw = *t->mutable_raw_data();
        size_t n = std::min<size_t>(raw.size(), 4096);
        std::vector<uint8_t> buf(raw.begin(), raw.begin() + ptrdiff_t(n));
        buf.resize(n * 2 + 16);
        buf.resize(LLVMFuzzerMutate(buf.data(), n, buf.size()));
        raw.replace(0, n, reinterpret_cast<const char*>(buf.data()), buf.size());
      }
      return;
    default:
      if (t->dims_size() > 0 && rng() % 2) t->mutable_dims()->RemoveLast();
      else t->add_dims(1 + int64_t(rng() % 4));
  }
}

void mutate_node(onnx::GraphProto* g, onnx::NodeProto* n, const std::vector<onnx::GraphProto*>& graphs, Rng& rng) {
  switch (rng() % 7) {
    case 0: {  // an edge to another value, or none
      std::vector<std::string> names = value_names(*g);
      if (n->input_size() == 0 || names.empty()) return;
      int i = int(pick(rng, size_t(n->input_size())));
      n->set_input(i, rng() % 5 == 0 ? std::string() : names[pick(rng, names.size())]);
      return;
    }
    case 1:
      if (rng() % 2 && n->input_size() > 0) n->mutable_input()->RemoveLast();
      else if (!g->input().empty()) n->add_input(g->input(0).name());
      return;
    case 2: {  // another op type of the model, or a common one
      static const char* kOps[] = {"Add", "MatMul", "Conv", "Reshape", "Gather", "Concat", "Slice", "Transpose",
                                   "Softmax", "Resize", "Pad", "Expand", "Where", "Cast", "Split", "ReduceMean",
                                   "Einsum", "Loop", "If", "Scan", "TopK", "NonZero", "ConstantOfShape", "Range"};
      std::string op = kOps[pick(rng, std::size(kOps))];
      if (rng() % 2) {
        const onnx::GraphProto* og = graphs[pick(rng, graphs.size())];
        if (og->node_size() > 0) op = og->node(int(pick(rng, size_t(og->node_size())))).op_type();
      }
      n->set_op_type(op);
      return;
    }
    case 3:
      if (n->attribute_size() > 0) {
        auto* a = n->mutable_attribute(int(pick(rng, size_t(n->attribute_size()))));
        if (a->has_t()) mutate_tensor(a->mutable_t(), rng);
        else mutate_attribute(a, rng);
      }
      return;
    case 4:
      if (n->attribute_size() > 0) {
        n->mutable_attribute()->SwapElements(int(pick(rng, size_t(n->attribute_size()))), n->attribute_size() - 1);
        n->mutable_attribute()->RemoveLast();
      }
      return;
    case 5: {
      static const char* kNames[] = {"axis", "axes", "perm", "keepdims", "alpha", "beta", "group", "pads",
                                     "strides", "kernel_shape", "dilations", "to", "mode", "num_outputs"};
      auto* a = n->add_attribute();
      a->set_name(kNames[pick(rng, std::size(kNames))]);
      mutate_attribute(a, rng);
      return;
    }
    default:
      n->set_domain(rng() % 2 ? "" : "com.microsoft");
  }
}

void mutate_model(onnx::ModelProto& m, Rng& rng) {
  std::vector<onnx::GraphProto*> graphs;
  collect_graphs(m.mutable_graph(), graphs);
  onnx::GraphProto* g = graphs[pick(rng, graphs.size())];
  switch (rng() % 10) {
    case 0:
    case 1: {  // a declared type: graph input, output or value_info
      std::vector<onnx::ValueInfoProto*> vis;
      for (auto& v : *g->mutable_input()) vis.push_back(&v);
      for (auto& v : *g->mutable_output()) vis.push_back(&v);
      for (auto& v : *g->mutable_value_info()) vis.push_back(&v);
      if (!vis.empty()) mutate_type(vis[pick(rng, vis.size())]->mutable_type(), rng);
      return;
    }
    case 2:
    case 3:
    case 4:
    case 5:
      if (g->node_size() > 0) mutate_node(g, g->mutable_node(int(pick(rng, size_t(g->node_size())))), graphs, rng);
      return;
    case 6:
      if (g->initializer_size() > 0)
        mutate_tensor(g->mutable_initializer(int(pick(rng, size_t(g->initializer_size())))), rng);
      return;
    case 7: {  // remove, duplicate or reorder nodes
      if (g->node_size() == 0) return;
      int i = int(pick(rng, size_t(g->node_size())));
      switch (rng() % 3) {
        case 0:
          g->mutable_node()->SwapElements(i, g->node_size() - 1);
          g->mutable_node()->RemoveLast();
          return;
        case 1:
          *g->add_node() = g->node(i);
          return;
        default:
          g->mutable_node()->SwapElements(i, int(pick(rng, size_t(g->node_size()))));
      }
      return;
    }
    case 8:
      if (m.opset_import_size() > 0)
        m.mutable_opset_import(int(pick(rng, size_t(m.opset_import_size()))))->set_version(int64_t(rng() % 26));
      return;
    default:  // a graph output names another value
      if (g->output_size() > 0) {
        std::vector<std::string> names = value_names(*g);
        if (!names.empty()) g->mutable_output(int(pick(rng, size_t(g->output_size()))))->set_name(names[pick(rng, names.size())]);
      }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto m;
  Rng rng(seed);
  // One input in eight (and any that is not a model) gets libFuzzer's own
  // byte mutations: they reach the wire format itself.
  if (rng() % 8 == 0 || !m.ParseFromArray(data, int(size))) return LLVMFuzzerMutate(data, size, max_size);
  for (int k = 1 + int(rng() % 3); k > 0; --k) mutate_model(m, rng);
  std::string out = m.SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
#endif
