// DType names and storage sizes; tensors, views and wrapped storage.
#include <doctest/doctest.h>

#include <cstring>

#include "runtime/dtype.h"
#include "runtime/tensor.h"
#include "tests/runtime/rt_test_util.h"

namespace relax::rt {
using test::contains;
using test::error_of;

TEST_CASE("dtype: every name round-trips through parse and str") {
  const char* names[] = {"void",       "bool",   "f16",    "f32",    "f64",      "bf16",       "i2",
                         "i4",         "i8",     "i16",    "i32",    "i64",      "u2",         "u4",
                         "u8",         "u16",    "u32",    "u64",    "f8e4m3fn", "f8e4m3fnuz", "f8e5m2",
                         "f8e5m2fnuz", "f8e8m0", "f4e2m1", "handle", "f32x8",    "i8x16",      "boolx4"};
  for (const char* n : names) {
    auto t = DType::parse(n);
    REQUIRE_MESSAGE(t.has_value(), n);
    CHECK(t->str() == n);
  }
  CHECK(DType::parse("f32") == DType::f32());
  CHECK(DType::parse("bool") == DType::boolean());
  CHECK(DType::parse("f8e4m3fnuz")->code == DType::kFloat8E4M3FNUZ);
  CHECK(DType::parse("f8e4m3fn")->code == DType::kFloat8E4M3FN);
  CHECK(DType::parse("f32x8")->lanes == 8);
  for (const char* bad : {"", "f8", "f7", "i3", "x", "float", "f32x", "i", "u128", "bf8"})
    CHECK_MESSAGE(!DType::parse(bad).has_value(), bad);
}

TEST_CASE("dtype: numbers match the compiler's TypeCode and pack like bytecode constants") {
  // relax::TypeCode order (ir/dtype.h).
  CHECK(DType::kBool == 1);
  CHECK(DType::kFloat == 4);
  CHECK(DType::kBFloat == 5);
  CHECK(DType::kFloat4E2M1 == 11);
  CHECK(DType::kHandle == 12);
  DType t(DType::kFloat, 32, 8);
  CHECK(t.pack() == (4 | 32 << 8 | 8 << 16));
  CHECK(DType::unpack(t.pack()) == t);
}

TEST_CASE("dtype: storage bytes (bool one byte, 4-bit and 2-bit packed)") {
  CHECK(DType::f32().storage_bytes(6) == 24);
  CHECK(DType::boolean().storage_bytes(5) == 5);
  CHECK(DType(DType::kBool, 1).storage_bytes(5) == 5);
  CHECK(DType::i(4).storage_bytes(5) == 3);
  CHECK(DType::u(4).storage_bytes(4) == 2);
  CHECK(DType(DType::kFloat4E2M1, 4).storage_bytes(1) == 1);
  CHECK(DType::u(2).storage_bytes(5) == 2);
  CHECK(DType::i(4).storage_bytes(0) == 0);
  CHECK(DType(DType::kFloat, 32, 8).storage_bytes(2) == 64);
}

TEST_CASE("tensor: empty, aligned, numel and nbytes") {
  Tensor t = Tensor::empty(DType::f32(), {2, 3});
  CHECK(t.defined());
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);
  CHECK(t.type_str() == "f32[2, 3]");
  CHECK(t.dim(-1) == 3);

  Tensor q = Tensor::zeros(DType::i(4), {5});
  CHECK(q.nbytes() == 3);
  CHECK(static_cast<uint8_t*>(q.data())[2] == 0);

  Tensor s = Tensor::empty(DType::f32(), {});
  CHECK(s.numel() == 1);
  Tensor z = Tensor::empty(DType::f32(), {0, 4});
  CHECK(z.numel() == 0);
  CHECK(z.nbytes() == 0);
  CHECK(z.data() != nullptr);
  CHECK(contains(error_of([] { Tensor::empty(DType::f32(), {2, -1}); }), "negative dimension"));
  CHECK(contains(error_of([] { Tensor::empty(DType::f32(), {1LL << 40, 1LL << 40}); }), "too many elements"));
  CHECK(!Tensor().defined());
}

TEST_CASE("tensor: reshape and view share the storage") {
  Tensor t = Tensor::empty(DType::i32(), {2, 6});
  for (int i = 0; i < 12; ++i) t.data_as<int32_t>()[i] = i;
  Tensor r = t.reshape({3, -1});
  CHECK(r.shape() == std::vector<int64_t>{3, 4});
  CHECK(r.data() == t.data());
  CHECK(r.storage() == t.storage());
  r.data_as<int32_t>()[5] = 100;
  CHECK(t.data_as<int32_t>()[5] == 100);
  CHECK(contains(error_of([&] { t.reshape({5}); }), "element counts differ"));
  CHECK(contains(error_of([&] { t.reshape({5, -1}); }), "cannot infer"));

  // The second row as its own tensor, and the bytes as u8.
  Tensor row = t.view(DType::i32(), {6}, 6 * sizeof(int32_t));
  CHECK(row.data_as<int32_t>()[0] == 6);
  CHECK(row.byte_offset() == 24);
  Tensor bytes = t.view(DType::u(8), {48});
  CHECK(bytes.nbytes() == 48);
  CHECK(contains(error_of([&] { row.view(DType::i32(), {1}, 24); }), "needs 4 bytes"));

  Tensor c = t.clone();
  CHECK(c.data() != t.data());
  CHECK(std::memcmp(c.data(), t.data(), t.nbytes()) == 0);
}

TEST_CASE("tensor: wrapped storage keeps its owner alive") {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t(Storage::wrap(owner->data(), 16, owner), DType::f32(), {2, 2});
  owner.reset();
  CHECK(!watch.expired());
  CHECK(t.data_as<float>()[3] == 4);
  Tensor v = t.reshape({4});
  t = Tensor();
  CHECK(!watch.expired());
  v = Tensor();
  CHECK(watch.expired());
  CHECK(contains(error_of([] {
                   auto o = std::make_shared<int>(0);
                   Tensor(Storage::wrap(o.get(), 4, o), DType::f32(), {2});
                 }),
                 "needs 8 bytes"));
}

}  // namespace relax::rt
