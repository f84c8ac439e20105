// .npy files: round trip for every dtype numpy has, files numpy wrote, and
// refusals.
#include <doctest/doctest.h>

#include <cstring>

#include "runtime/npy.h"
#include "tests/runtime/rt_test_util.h"

namespace relax::rt {
using test::contains;
using test::error_of;
using test::run_ok;
using test::slurp;
using test::spit;
using test::TempDir;

namespace {

Tensor pattern(DType dtype, std::vector<int64_t> shape) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  auto* p = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = dtype.is_bool() ? uint8_t(i % 3 == 0) : uint8_t(i * 37 + 11);
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

bool have_numpy() { return run_ok("/usr/bin/python3 -c 'import numpy'"); }

}  // namespace

TEST_CASE("npy: round trip for every dtype and rank") {
  TempDir dir;
  for (const char* name : {"f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool"}) {
    DType dtype = *DType::parse(name);
    for (auto shape : std::vector<std::vector<int64_t>>{{}, {0}, {5}, {2, 3}, {2, 1, 4}}) {
      Tensor t = pattern(dtype, shape);
      std::string path = dir / (std::string(name) + ".npy");
      write_npy(path, t);
      std::string bytes = slurp(path);
      CHECK((bytes.size() - t.nbytes()) % 64 == 0);  // the header pads the data to 64 bytes
      CHECK_MESSAGE(same(read_npy(path), t), name, shape_str(shape));
    }
  }
  CHECK(*npy_descr(DType::f32()) == "<f4");
  CHECK(*npy_descr(DType::boolean()) == "|b1");
  CHECK(*npy_descr(DType::i(8)) == "|i1");
  CHECK(!npy_descr(DType::bf16()));
  CHECK(contains(error_of([&] { write_npy(dir / "x.npy", pattern(DType::bf16(), {2})); }),
                 "bf16 cannot be stored in a .npy file"));
  CHECK(contains(error_of([&] { write_npy(dir / "x.npy", pattern(DType::i(4), {2})); }), dir / "x.npy"));
}

TEST_CASE("npy: reads files numpy wrote, and numpy reads ours") {
  if (!have_numpy()) {
    MESSAGE("skipped: /usr/bin/python3 with numpy is not available");
    return;
  }
  TempDir dir;
  std::string script = R"(
import numpy as np, sys
d = sys.argv[1]
np.save(d + '/f32.npy', np.arange(12, dtype=np.float32).reshape(3, 4) / 4)
np.save(d + '/f16.npy', np.array([1.5, -2.0, 65504.0], dtype=np.float16))
np.save(d + '/i64.npy', np.array([[-1, 2**40]], dtype=np.int64))
np.save(d + '/u16.npy', np.array([1, 65535], dtype=np.uint16))
np.save(d + '/i8.npy', np.array([-128, 127], dtype=np.int8))
np.save(d + '/b.npy', np.array([True, False, True]))
np.save(d + '/scalar.npy', np.float64(3.25))
np.save(d + '/empty.npy', np.zeros((0, 3), dtype=np.int32))
np.save(d + '/fortran.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(d + '/bigendian.npy', np.array([1, 2], dtype='>i4'))
np.lib.format.write_array(open(d + '/v2.npy', 'wb'), np.arange(3, dtype=np.int16), version=(2, 0))
np.lib.format.write_array(open(d + '/v3.npy', 'wb'), np.arange(3, dtype=np.int16), version=(3, 0))
)";
  spit(dir / "make.py", script);
  REQUIRE(run_ok("/usr/bin/python3 " + dir / "make.py" + " " + dir.path().string()));

  Tensor f32 = read_npy(dir / "f32.npy");
  CHECK(f32.type_str() == "f32[3, 4]");
  CHECK(f32.data_as<float>()[5] == 1.25f);
  Tensor f16 = read_npy(dir / "f16.npy");
  CHECK(f16.type_str() == "f16[3]");
  CHECK(f16.data_as<uint16_t>()[0] == 0x3e00);  // 1.5
  Tensor i64 = read_npy(dir / "i64.npy");
  CHECK(i64.data_as<int64_t>()[1] == (int64_t(1) << 40));
  CHECK(read_npy(dir / "u16.npy").data_as<uint16_t>()[1] == 65535);
  CHECK(read_npy(dir / "i8.npy").data_as<int8_t>()[0] == -128);
  Tensor b = read_npy(dir / "b.npy");
  CHECK(b.type_str() == "bool[3]");
  CHECK(b.data_as<uint8_t>()[2] == 1);
  Tensor s = read_npy(dir / "scalar.npy");
  CHECK(s.type_str() == "f64[]");
  CHECK(s.data_as<double>()[0] == 3.25);
  CHECK(read_npy(dir / "empty.npy").type_str() == "i32[0, 3]");
  CHECK(read_npy(dir / "v2.npy").data_as<int16_t>()[2] == 2);
  CHECK(read_npy(dir / "v3.npy").data_as<int16_t>()[2] == 2);
  CHECK(contains(error_of([&] { read_npy(dir / "fortran.npy"); }), "Fortran-order arrays are not supported"));
  CHECK(contains(error_of([&] { read_npy(dir / "bigendian.npy"); }), "big-endian"));

  // numpy reads what we write.
  Tensor t = pattern(DType::i(16), {2, 3});
  write_npy(dir / "ours.npy", t);
  std::string check = "import numpy as np; a = np.load('" + dir / "ours.npy" +
                      "'); assert a.dtype == np.int16 and a.shape == (2, 3), a; "
                      "assert a.tobytes() == open('" +
                      dir / "raw.bin" + "', 'rb').read()";
  spit(dir / "raw.bin", std::string(static_cast<const char*>(t.data()), t.nbytes()));
  CHECK(run_ok("/usr/bin/python3 -c \"" + check + "\""));
}

TEST_CASE("npy: malformed files are refused with the file named") {
  TempDir dir;
  std::string path = dir / "bad.npy";
  auto read_bytes = [&](const std::string& bytes) {
    spit(path, bytes);
    return error_of([&] { read_npy(path); });
  };
  Tensor t = pattern(DType::f32(), {2, 3});
  write_npy(path, t);
  const std::string good = slurp(path);
  CHECK(read_bytes(good) == "<no error>");
  CHECK(contains(read_bytes("not numpy"), path + ": not a .npy file (bad magic)"));
  CHECK(contains(read_bytes(good.substr(0, good.size() - 1)), "needs 24 data bytes, file has 23"));
  CHECK(contains(read_bytes(good + "x"), "file has 25"));
  CHECK(contains(read_bytes(good.substr(0, 40)), "truncated .npy header"));
  std::string v9 = good;
  v9[6] = 9;
  CHECK(contains(read_bytes(v9), "unsupported .npy format version 9"));
  auto with_header = [&](std::string dict) {
    std::string h = std::string("\x93NUMPY\x01\x00", 8);
    h += char(dict.size() & 0xff);
    h += char(dict.size() >> 8);
    return read_bytes(h + dict);
  };
  CHECK(contains(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"),
                 "unsupported .npy dtype '<c8'"));
  CHECK(contains(with_header("{'descr': '<f4', 'shape': (1,), }"), "required"));
  CHECK(contains(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,, }"), "bad .npy header"));
  CHECK(contains(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (999999999999, 999999999999), }"),
                 "too many elements"));
  CHECK(contains(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }"), "truncated"));
  CHECK(contains(error_of([&] { read_npy(dir / "missing.npy"); }), "missing.npy: cannot open"));
  // Every truncation of a good file is refused cleanly.
  for (size_t n = 0; n < good.size(); ++n) CHECK(read_bytes(good.substr(0, n)) != "<no error>");
}

}  // namespace relax::rt
