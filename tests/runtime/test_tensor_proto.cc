// ONNX TensorProto files read without protobuf, compared with what the onnx
// Python package reads from the same files.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "runtime/npy.h"
#include "runtime/tensor_proto.h"
#include "tests/runtime/rt_test_util.h"

namespace relax::rt {
using test::contains;
using test::error_of;
using test::run_ok;
using test::slurp;
using test::spit;
using test::TempDir;

namespace {

// The ONNX backend test data: the project's copy, else Debian's
// libonnx-testdata; "" when neither is installed.
std::string node_dir() {
  for (const char* d : {"/work/shared/onnx-backend-tests/node", "/usr/share/libonnx-testdata/data/node"})
    if (std::filesystem::is_directory(d)) return d;
  return "";
}

bool have_onnx() { return run_ok("/usr/bin/python3 -c 'import onnx, onnx.numpy_helper, numpy'"); }

// Cases and what they exercise: the file, its expected runtime type, and
// where Debian's libonnx-testdata (ONNX 1.12) holds another tensor under
// the same name, that one's type.
struct Case {
  const char* file;
  const char* type;
  const char* type_onnx112 = nullptr;
};
const Case kCases[] = {
    {"test_add/test_data_set_0/input_0.pb", "f32[3, 4, 5]"},  // raw_data
    {"test_add/test_data_set_0/input_1.pb", "f32[3, 4, 5]"},
    {"test_add/test_data_set_0/output_0.pb", "f32[3, 4, 5]"},
    {"test_and2d/test_data_set_0/input_0.pb", "bool[3, 4]"},
    {"test_cast_FLOAT_to_FLOAT16/test_data_set_0/output_0.pb", "f16[3, 4]"},
    {"test_pow_types_float32_int64/test_data_set_0/input_1.pb", "i64[3]"},
    {"test_quantizelinear_blocked_symmetric/test_data_set_0/output_0.pb", "i16[3, 4]"},  // int32_data, negative
    {"test_dequantizelinear_e4m3fn/test_data_set_0/input_0.pb", "f8e4m3fn[5]"},          // int32_data bit patterns
    {"test_dequantizelinear_uint4/test_data_set_0/input_0.pb", "u4[5]"},                 // int32_data, 2 per entry
    {"test_cast_UINT4_to_UINT8/test_data_set_0/input_0.pb", "u4[5, 5]"},                 // raw, packed
    // No data at all (ONNX 1.12's file: one element).
    {"test_castlike_DOUBLE_to_FLOAT/test_data_set_0/input_1.pb", "f32[0]", "f32[1]"},
};

}  // namespace

TEST_CASE("tensor_proto: real backend-test files match the onnx Python package") {
  std::string nodes = node_dir();
  if (nodes.empty()) {
    MESSAGE("skipped: no ONNX backend test data (/work/shared or libonnx-testdata)");
    return;
  }
  if (!have_onnx()) {
    MESSAGE("skipped: /usr/bin/python3 with onnx and numpy is not available");
    return;
  }
  TempDir dir;
  // For each file: the storage bytes as a u8 .npy (dtypes numpy lacks are
  // rebuilt from raw_data or int32_data, the latter one byte per entry), and
  // for dtypes numpy has, onnx.numpy_helper's array.
  std::string script = R"(
import sys, onnx, onnx.numpy_helper as nh, numpy as np
out = sys.argv[1]
for i, path in enumerate(sys.argv[2:]):
    t = onnx.TensorProto()
    t.ParseFromString(open(path, 'rb').read())
    if t.data_type in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13):
        a = nh.to_array(t)
        np.save('%s/%d.npy' % (out, i), a)
        raw = a.tobytes()
    elif t.HasField('raw_data'):
        raw = t.raw_data
    else:
        raw = bytes(v & 0xff for v in t.int32_data)
    np.save('%s/%d.raw.npy' % (out, i), np.frombuffer(raw, dtype=np.uint8))
    open('%s/%d.name' % (out, i), 'w').write(t.name)
)";
  spit(dir / "dump.py", script);
  std::string cmd = "/usr/bin/python3 " + dir / "dump.py" + " " + dir.path().string();
  std::vector<const Case*> cases;
  for (const Case& c : kCases) {
    if (!std::filesystem::exists(nodes + "/" + c.file)) {
      MESSAGE("not in this copy of the test data: ", c.file);
      continue;
    }
    cases.push_back(&c);
    cmd += " " + nodes + "/" + c.file;
  }
  REQUIRE(run_ok(cmd));
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string file = cases[i]->file;
    CAPTURE(file);
    NamedTensor nt = read_tensor_proto(nodes + "/" + cases[i]->file);
    const bool onnx112 = nodes.rfind("/usr/share/libonnx-testdata", 0) == 0 && cases[i]->type_onnx112;
    CHECK(nt.tensor.type_str() == (onnx112 ? cases[i]->type_onnx112 : cases[i]->type));
    CHECK(nt.name == slurp(dir / (std::to_string(i) + ".name")));
    Tensor raw = read_npy(dir / (std::to_string(i) + ".raw.npy"));
    REQUIRE(raw.nbytes() == nt.tensor.nbytes());
    CHECK(std::memcmp(raw.data(), nt.tensor.data(), raw.nbytes()) == 0);
    std::string npy = dir / (std::to_string(i) + ".npy");
    if (std::filesystem::exists(npy)) {
      Tensor ref = read_npy(npy);
      CHECK(ref.dtype() == nt.tensor.dtype());
      CHECK(ref.shape() == nt.tensor.shape());
    }
  }
}

TEST_CASE("tensor_proto: known values, and clear refusals") {
  std::string nodes = node_dir();
  if (nodes.empty()) {
    MESSAGE("skipped: no ONNX backend test data");
    return;
  }
  std::string add = nodes + "/test_add/test_data_set_0/input_0.pb";
  NamedTensor x = read_tensor_proto(add);
  CHECK(x.name == "x");
  std::string f16 = nodes + "/test_cast_FLOAT_to_FLOAT16/test_data_set_0/output_0.pb";
  if (std::filesystem::exists(f16)) CHECK(read_tensor_proto(f16).tensor.dtype() == DType::f16());

  std::string strings = nodes + "/test_string_concat_zero_dimensional/test_data_set_0/output_0.pb";
  if (std::filesystem::exists(strings))
    CHECK(contains(error_of([&] { read_tensor_proto(strings); }), strings + ": string tensors are not supported"));
  CHECK(contains(error_of([&] { read_tensor_proto(nodes + "/nope.pb"); }), "nope.pb: cannot open"));
}

namespace {

// Builds TensorProto bytes by hand.
struct Proto {
  std::string b;
  void varint(uint64_t v) {
    do {
      uint8_t byte = v & 0x7f;
      v >>= 7;
      b += char(byte | (v ? 0x80 : 0));
    } while (v);
  }
  void key(int field, int wire) { varint(uint64_t(field) << 3 | uint64_t(wire)); }
  Proto& dims(std::initializer_list<int64_t> ds) {
    for (int64_t d : ds) key(1, 0), varint(uint64_t(d));
    return *this;
  }
  Proto& type(int t) { return key(2, 0), varint(uint64_t(t)), *this; }
  Proto& bytes(int field, const std::string& s) { return key(field, 2), varint(s.size()), b += s, *this; }
  Proto& packed_varints(int field, std::initializer_list<int64_t> vs) {
    Proto inner;
    for (int64_t v : vs) inner.varint(uint64_t(v));
    return bytes(field, inner.b);
  }
};

Tensor parse(const std::string& b) {
  return parse_tensor_proto({reinterpret_cast<const uint8_t*>(b.data()), b.size()}, "t.pb").tensor;
}
std::string parse_error(const std::string& b) {
  return error_of([&] { parse(b); });
}

}  // namespace

TEST_CASE("tensor_proto: typed fields, packed and not") {
  Proto p;
  p.dims({2, 2}).type(1);
  float fs[4] = {1, -2, 3.5f, 0};
  p.bytes(4, std::string(reinterpret_cast<char*>(fs), 16)).bytes(8, "w");
  Tensor t = parse(p.b);
  CHECK(t.type_str() == "f32[2, 2]");
  CHECK(t.data_as<float>()[2] == 3.5f);

  // dims packed; int64_data unpacked; negative values.
  Proto q;
  q.packed_varints(1, {3}).type(7);
  for (int64_t v : {int64_t(-1), int64_t(5), int64_t(1) << 50}) q.key(7, 0), q.varint(uint64_t(v));
  t = parse(q.b);
  CHECK(t.type_str() == "i64[3]");
  CHECK(t.data_as<int64_t>()[0] == -1);
  CHECK(t.data_as<int64_t>()[2] == int64_t(1) << 50);

  // int8 and bool through int32_data; uint32 through uint64_data; f64.
  t = parse(Proto().dims({3}).type(3).packed_varints(5, {-128, 127, -1}).b);
  CHECK(t.data_as<int8_t>()[0] == -128);
  CHECK(t.data_as<int8_t>()[2] == -1);
  t = parse(Proto().dims({3}).type(9).packed_varints(5, {1, 0, 7}).b);
  CHECK(t.data_as<uint8_t>()[2] == 1);
  t = parse(Proto().dims({2}).type(12).packed_varints(11, {4000000000, 7}).b);
  CHECK(t.data_as<uint32_t>()[0] == 4000000000u);
  double ds[2] = {0.25, -8};
  t = parse(Proto().dims({2}).type(11).bytes(10, std::string(reinterpret_cast<char*>(ds), 16)).b);
  CHECK(t.data_as<double>()[1] == -8);
  // i4: two per int32_data entry; 3 elements need 2 entries.
  t = parse(Proto().dims({3}).type(22).packed_varints(5, {0x21, 0x0f}).b);
  CHECK(t.nbytes() == 2);
  CHECK(t.data_as<uint8_t>()[0] == 0x21);
  // Unknown fields (doc_string 12) are skipped.
  t = parse(Proto().dims({1}).type(6).bytes(12, "docs").packed_varints(5, {42}).b);
  CHECK(t.data_as<int32_t>()[0] == 42);
  // Scalars: no dims, one value.
  t = parse(Proto().type(6).packed_varints(5, {9}).b);
  CHECK(t.type_str() == "i32[]");
}

TEST_CASE("tensor_proto: refusals name the problem") {
  CHECK(contains(parse_error(Proto().dims({1}).type(8).bytes(6, "s").b), "t.pb: string tensors are not supported"));
  CHECK(contains(parse_error(Proto().dims({1}).type(14).b), "complex tensors are not supported"));
  CHECK(contains(parse_error(Proto().dims({1}).type(1).bytes(13, "x").b), "external data"));
  Proto loc;
  loc.dims({1}).type(1).key(14, 0);
  loc.varint(1);
  CHECK(contains(parse_error(loc.b), "external data"));
  CHECK(contains(parse_error(Proto().dims({1}).b), "no data_type"));
  CHECK(contains(parse_error(Proto().dims({1}).type(99).b), "unsupported ONNX data_type 99"));
  CHECK(contains(parse_error(Proto().dims({2}).type(1).bytes(9, "abc").b), "raw_data has 3 bytes; f32[2] needs 8"));
  CHECK(contains(parse_error(Proto().dims({2}).type(6).packed_varints(5, {1}).b), "int32_data has 1 values"));
  CHECK(contains(parse_error(Proto().dims({4}).type(1).b), "float_data has 0 values"));
  CHECK(contains(parse_error(Proto().dims({1000000000, 1000000}).type(1).b), "more elements than the file has"));
  CHECK(contains(parse_error(Proto().dims({-3}).type(1).b), "negative dimension"));
  CHECK(contains(parse_error(std::string("\x0a\x05\x01", 3)), "runs past the end"));
  CHECK(contains(parse_error(std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12)), "longer than 10"));
  CHECK(contains(parse_error(std::string("\x7b", 1)), "unsupported wire type 3"));
}

TEST_CASE("tensor_proto: every truncation of a real file throws or succeeds, never crashes") {
  std::string nodes = node_dir();
  if (nodes.empty()) {
    MESSAGE("skipped: no ONNX backend test data");
    return;
  }
  int ok = 0, refused = 0;
  for (const char* f : {"test_add/test_data_set_0/input_0.pb", "test_dequantizelinear_uint4/test_data_set_0/input_0.pb",
                        "test_quantizelinear_blocked_symmetric/test_data_set_0/output_0.pb"}) {
    std::string path = nodes + "/" + f;
    if (!std::filesystem::exists(path)) continue;
    std::string bytes = slurp(path);
    for (size_t n = 0; n <= bytes.size(); ++n) {
      std::string cut = bytes.substr(0, n);
      try {
        parse(cut);
        ++ok;
      } catch (const Error&) {
        ++refused;
      }
      // And a flipped byte at each position.
      if (n < bytes.size()) {
        std::string flipped = bytes;
        flipped[n] = char(flipped[n] ^ 0xa5);
        try {
          parse(flipped);
        } catch (const Error&) {
        }
      }
    }
  }
  CHECK(refused > 0);
  MESSAGE("truncations: ", ok, " parsed, ", refused, " refused");
}

}  // namespace relax::rt

namespace relax::rt {

TEST_CASE("sequence_proto: tensors in order; other element kinds refused") {
  Proto a, b, seq;
  a.dims({2}).type(7).packed_varints(7, {5, 6});
  b.dims({1}).type(7).packed_varints(7, {9});
  seq.bytes(1, "s");
  seq.key(2, 0);
  seq.varint(1);
  seq.bytes(3, a.b).bytes(3, b.b);
  auto parse_seq = [](const std::string& s) {
    return parse_sequence_proto({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, "s.pb");
  };
  std::vector<NamedTensor> items = parse_seq(seq.b);
  REQUIRE(items.size() == 2);
  CHECK(items[0].tensor.type_str() == "i64[2]");
  CHECK(items[0].tensor.data_as<int64_t>()[1] == 6);
  CHECK(items[1].tensor.data_as<int64_t>()[0] == 9);
  CHECK(parse_seq(Proto().bytes(1, "empty").b).empty());
  Proto maps;
  maps.key(2, 0);
  maps.varint(3);
  CHECK(contains(error_of([&] { parse_seq(maps.b); }), "s.pb: a SequenceProto of element type 3 is not supported"));
  CHECK(contains(error_of([&] { parse_seq(Proto().bytes(5, "x").b); }), "sequences, maps or optionals"));
  CHECK(contains(error_of([&] { parse_seq(Proto().bytes(3, "\x08").b); }), "truncated varint"));
}

}  // namespace relax::rt
