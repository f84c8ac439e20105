// The data-dependent builtins (runtime/builtins_data.cc) on hand-computed
// cases: ties, empty inputs, every output of unique, NMS thresholds, and
// the run-time parameters of reduce_dynamic and dynamic_strided_slice.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "runtime/error.h"
#include "runtime/vm.h"

using namespace relax::rt;

namespace {

Value call(const std::string& name, std::vector<Value> args) {
  static VirtualMachine vm(
      Executable{}, [](const std::string&) { return Tensor(); }, nullptr);
  const Builtin* fn = find_builtin(name);
  REQUIRE(fn);
  std::vector<int64_t> heap;
  std::vector<const Value*> ptrs;
  for (const Value& a : args) ptrs.push_back(&a);
  Value out;
  BuiltinCall c{vm, heap, ptrs.data(), ptrs.size(), out};
  (*fn)(c);
  return out;
}

template <class T>
Tensor make(DType d, std::vector<int64_t> shape, std::vector<T> v) {
  Tensor t = Tensor::empty(d, std::move(shape));
  REQUIRE(size_t(t.numel()) == v.size());
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(T));
  return t;
}
Tensor f32(std::vector<int64_t> shape, std::vector<float> v) {
  return make(DType::f32(), std::move(shape), std::move(v));
}
Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return make(DType::i64(), std::move(shape), std::move(v));
}

template <class T>
std::vector<T> values(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<T>(t.data_as<T>(), t.data_as<T>() + t.numel());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("builtins: topk of f32 (its own key path) ranks as the generic path does") {
  // Rows with NaNs, signed zeros, infinities and many ties, along the last
  // axis and along the first; f64 of the same values takes the generic path.
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<float> v;
  uint32_t state = 12345;
  const float pool[] = {nan, -0.0f, 0.0f, inf, -inf, 1.5f, -1.5f, 2.0f, 2.0f, -3.25f, 7.0f, 1e-30f};
  for (int i = 0; i < 3 * 40; ++i) {
    state = state * 1664525u + 1013904223u;
    v.push_back(pool[(state >> 16) % 12]);
  }
  Tensor x = f32({3, 40}, v);
  Tensor x64 = Tensor::empty(DType::f(64), {3, 40});
  for (size_t i = 0; i < v.size(); ++i) x64.data_as<double>()[i] = v[i];
  for (int64_t axis : {0, 1})
    for (int64_t largest : {0, 1})
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(3), axis == 0 ? int64_t(3) : int64_t(40)}) {
        Value a = call("relax.topk", {x, k, axis, largest, int64_t(1)});
        Value b = call("relax.topk", {x64, k, axis, largest, int64_t(1)});
        CHECK(values<int64_t>(a.tuple()[1]) == values<int64_t>(b.tuple()[1]));
        std::vector<float> av = values<float>(a.tuple()[0]);
        std::vector<double> bv = values<double>(b.tuple()[0]);
        REQUIRE(av.size() == bv.size());
        for (size_t i = 0; i < av.size(); ++i)
          CHECK((std::isnan(av[i]) ? std::isnan(bv[i]) : double(av[i]) == bv[i]));
      }
}

TEST_CASE("builtins: topk, largest and smallest, ties by the lower index") {
  Tensor x = f32({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  Value r = call("relax.topk", {x, int64_t(2), int64_t(-1), int64_t(1), int64_t(1)});
  CHECK(values<float>(r.tuple()[0]) == std::vector<float>{3, 3, 5, 5});
  CHECK(values<int64_t>(r.tuple()[1]) == std::vector<int64_t>{1, 2, 0, 1});
  r = call("relax.topk", {x, int64_t(3), int64_t(1), int64_t(0), int64_t(1)});
  CHECK(values<float>(r.tuple()[0]) == std::vector<float>{1, 2, 3, 0, 5, 5});
  CHECK(values<int64_t>(r.tuple()[1]) == std::vector<int64_t>{0, 3, 1, 3, 0, 1});
  // Along axis 0, and with k = 0.
  r = call("relax.topk", {x, int64_t(1), int64_t(0), int64_t(1), int64_t(1)});
  CHECK(values<int64_t>(r.tuple()[1]) == std::vector<int64_t>{1, 1, 1, 0});
  r = call("relax.topk", {x, int64_t(0), int64_t(1), int64_t(1), int64_t(1)});
  CHECK(r.tuple()[0].tensor().shape() == std::vector<int64_t>{2, 0});
  // Integers compare exactly.
  Tensor big = i64({3}, {int64_t(1) << 60, (int64_t(1) << 60) + 1, -5});
  r = call("relax.topk", {big, int64_t(1), int64_t(0), int64_t(1), int64_t(1)});
  CHECK(values<int64_t>(r.tuple()[1]) == std::vector<int64_t>{1});
  CHECK(error_of([&] {
          call("relax.topk", {x, int64_t(5), int64_t(1), int64_t(1), int64_t(1)});
        }).find("k = 5") != std::string::npos);
}

TEST_CASE("builtins: nonzero in row-major order, empty and all-zero inputs") {
  Value r = call("relax.nonzero", {f32({2, 2}, {1, 0, 0, -2})});
  CHECK(r.tensor().shape() == std::vector<int64_t>{2, 2});
  CHECK(values<int64_t>(r) == std::vector<int64_t>{0, 1, 0, 1});
  r = call("relax.nonzero", {f32({3}, {0, 0, 0})});
  CHECK(r.tensor().shape() == std::vector<int64_t>{1, 0});
  r = call("relax.nonzero", {f32({0, 4}, {})});
  CHECK(r.tensor().shape() == std::vector<int64_t>{2, 0});
  Tensor b = make<uint8_t>(DType::boolean(), {3}, {0, 1, 1});
  CHECK(values<int64_t>(call("relax.nonzero", {b})) == std::vector<int64_t>{1, 2});
}

TEST_CASE("builtins: unique, sorted or not, with every output") {
  Tensor x = f32({6}, {2, 1, 2, 3, 1, 2});
  Value r = call("relax.unique", {x, int64_t(0), int64_t(1)});
  const auto& t = r.tuple();
  CHECK(values<float>(t[0]) == std::vector<float>{1, 2, 3});
  CHECK(values<int64_t>(t[1]) == std::vector<int64_t>{1, 0, 3});
  CHECK(values<int64_t>(t[2]) == std::vector<int64_t>{1, 0, 1, 2, 0, 1});
  CHECK(values<int64_t>(t[3]) == std::vector<int64_t>{2, 3, 1});
  r = call("relax.unique", {x, int64_t(0), int64_t(0)});
  CHECK(values<float>(r.tuple()[0]) == std::vector<float>{2, 1, 3});
  CHECK(values<int64_t>(r.tuple()[2]) == std::vector<int64_t>{0, 1, 0, 2, 1, 0});
  // Rows of a matrix (axis 0), and columns (axis 1).
  Tensor m = f32({3, 2}, {1, 0, 0, 1, 1, 0});
  r = call("relax.unique", {m, int64_t(0), int64_t(1)});
  CHECK(values<float>(r.tuple()[0]) == std::vector<float>{0, 1, 1, 0});
  CHECK(values<int64_t>(r.tuple()[3]) == std::vector<int64_t>{1, 2});
  r = call("relax.unique", {m, int64_t(-1), int64_t(1)});
  CHECK(r.tuple()[0].tensor().shape() == std::vector<int64_t>{3, 2});
  CHECK(values<float>(r.tuple()[0]) == std::vector<float>{0, 1, 1, 0, 0, 1});
  // Empty.
  r = call("relax.unique", {f32({0}, {}), int64_t(0), int64_t(1)});
  CHECK(r.tuple()[0].tensor().shape() == std::vector<int64_t>{0});
  CHECK(r.tuple()[2].tensor().shape() == std::vector<int64_t>{0});
}

TEST_CASE("builtins: non_max_suppression keeps the best boxes per class") {
  // Three boxes; 1 overlaps 0 heavily (IoU 0.83), 2 is apart.
  Tensor boxes = f32({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = f32({1, 2, 3}, {0.9f, 0.95f, 0.3f, 0.1f, 0.2f, 0.6f});
  Tensor iou = f32({1}, {0.5f});
  Value r = call("relax.non_max_suppression", {boxes, scores, int64_t(0), i64({1}, {3}), iou});
  CHECK(values<int64_t>(r) == std::vector<int64_t>{0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  // A score threshold and at most one box per class.
  r = call("relax.non_max_suppression", {boxes, scores, int64_t(0), i64({1}, {1}), iou, f32({1}, {0.5f})});
  CHECK(values<int64_t>(r) == std::vector<int64_t>{0, 0, 1, 0, 1, 2});
  // No max_output_boxes_per_class: nothing.
  r = call("relax.non_max_suppression", {boxes, scores, int64_t(0)});
  CHECK(r.tensor().shape() == std::vector<int64_t>{0, 3});
  // Center format: (x center, y center, width, height).
  Tensor centers = f32({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1});
  r = call("relax.non_max_suppression", {centers, f32({1, 1, 2}, {0.5f, 0.9f}), int64_t(1), i64({1}, {2}), iou});
  CHECK(values<int64_t>(r) == std::vector<int64_t>{0, 0, 1});
}

TEST_CASE("builtins: parameters of reduce_dynamic and dynamic_strided_slice") {
  Tensor x = f32({2, 3, 4}, std::vector<float>(24, 0));
  Value r = call("relax.reduce_dynamic_params", {x, i64({2}, {-1, 0}), int64_t(0), int64_t(0)});
  CHECK(r.shape() == std::vector<int64_t>{1, 3, 1, 2, 1, 4, 3});
  r = call("relax.reduce_dynamic_params", {x, i64({0}, {}), int64_t(1), int64_t(1)});
  CHECK(r.shape() == std::vector<int64_t>{2, 3, 4, 1, 1, 1});
  r = call("relax.reduce_dynamic_params", {x, i64({0}, {}), int64_t(0), int64_t(1)});
  CHECK(r.shape() == std::vector<int64_t>{1, 1, 1, 2, 3, 4});
  CHECK(error_of([&] {
          call("relax.reduce_dynamic_params", {x, i64({1}, {3}), int64_t(0), int64_t(0)});
        }).find("out of range") != std::string::npos);

  // x[:, 2:0:-1, 1::2], axis 0 untouched.
  r = call("relax.slice_params", {x, i64({2}, {2, 1}), i64({2}, {0, 100}), i64({2}, {1, -1}), i64({2}, {-1, 2})});
  CHECK(r.shape() == std::vector<int64_t>{2, 2, 2, 0, 2, 1, 1, 0, 2, 0, 1, 0});
  // Clamping: start beyond the end is empty; very negative bounds clamp.
  r = call("relax.slice_params", {x, i64({1}, {10}), i64({1}, {20}), i64({1}, {2}), i64({1}, {1})});
  CHECK(r.shape() == std::vector<int64_t>{2, 3, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0});
  r = call("relax.slice_params", {x, i64({1}, {-100}), i64({1}, {INT64_MAX}), i64({1}, {1}), i64({1}, {1})});
  CHECK(r.shape() == std::vector<int64_t>{2, 3, 4, 0, 0, 0, 1, 1, 1, 0, 0, 0});
  r = call("relax.slice_params", {x, i64({1}, {-1}), i64({1}, {INT64_MIN}), i64({1}, {2}), i64({1}, {-1})});
  CHECK(r.shape() == std::vector<int64_t>{2, 3, 4, 0, 0, 3, 1, 1, 0, 0, 0, 1});
  CHECK(error_of([&] {
          call("relax.slice_params", {x, i64({1}, {0}), i64({1}, {1}), i64({1}, {0}), i64({1}, {0})});
        }).find("step") != std::string::npos);

  // dft along axis 1 of [1, 10, 10, 1]: forward one-sided, inverse one-sided.
  Tensor sig = f32({1, 10, 10, 1}, std::vector<float>(100, 0));
  r = call("relax.dft_params", {sig, int64_t(1), int64_t(0), int64_t(1), int64_t(-1)});
  CHECK(r.shape() == std::vector<int64_t>{1, 6, 10, 2, 1, 10, 10});
  Tensor half = f32({1, 6, 10, 2}, std::vector<float>(120, 0));
  r = call("relax.dft_params", {half, i64({}, {-3}), int64_t(1), int64_t(1), int64_t(-1)});
  CHECK(r.shape() == std::vector<int64_t>{1, 10, 10, 1, 1, 10, 6});
}

TEST_CASE("builtins say whether they touch tensor data (the VM waits for recorded kernels before those)") {
  for (const char* name : {"relax.nonzero", "relax.topk", "relax.unique", "relax.tensor_to_shape",
                           "relax.shape_to_tensor", "relax.loop", "relax.scan", "relax.call_closure"})
    CHECK_MESSAGE(builtin_touches_data(name), name);
  for (const char* name : {"relax.match_shape", "relax.alloc_tensor", "relax.alloc_storage", "relax.alloc_tensor_in",
                           "relax.shape_of", "relax.tuple_get", "relax.reinterpret"})
    CHECK_MESSAGE(!builtin_touches_data(name), name);
  CHECK(builtin_touches_data("relax.no_such_builtin"));  // unknown: the safe answer
}

TEST_CASE("builtins: lists (ONNX sequences) insert copies, positions count from the end, errors name the op") {
  Value empty = make_tuple({});
  Tensor a = f32({2}, {1, 2}), b = f32({3}, {3, 4, 5});
  Value l = call("relax.list_insert", {empty, a});
  l = call("relax.list_insert", {l, b, i64({}, {0})});  // at the front
  REQUIRE(l.tuple().size() == 2);
  CHECK(values<float>(call("relax.list_at", {l, i64({}, {0})})) == std::vector<float>{3, 4, 5});
  CHECK(values<float>(call("relax.list_at", {l, i64({}, {-1})})) == std::vector<float>{1, 2});
  // The list holds a copy: writing the inserted tensor later does not change it.
  a.data_as<float>()[0] = 9;
  CHECK(values<float>(call("relax.list_at", {l, Value(int64_t(1))})) == std::vector<float>{1, 2});
  CHECK(values<int64_t>(call("relax.list_length", {l})) == std::vector<int64_t>{2});
  CHECK(error_of([&] { call("relax.list_at", {l, i64({}, {2})}); }) ==
        "SequenceAt: position 2 is out of range for a sequence of length 2");
  CHECK(error_of([&] { call("relax.list_insert", {l, i64({1}, {1})}); }).find("SequenceInsert: a i64 tensor") == 0);
  Value e = call("relax.list_erase", {l});
  REQUIRE(e.tuple().size() == 1);
  CHECK(values<float>(e.tuple()[0]) == std::vector<float>{3, 4, 5});
  CHECK(error_of([&] { call("relax.list_erase", {empty}); }) == "SequenceErase: the sequence is empty");

  // Split [2, 5] along axis 1: by a scalar 2 (uneven last), by lengths, into unit parts without the axis.
  Tensor x = f32({2, 5}, {0, 1, 2, 3, 4, 10, 11, 12, 13, 14});
  Value s = call("relax.list_split", {x, Value(int64_t(1)), Value(int64_t(1)), i64({}, {2})});
  REQUIRE(s.tuple().size() == 3);
  CHECK(s.tuple()[2].tensor().shape() == std::vector<int64_t>{2, 1});
  CHECK(values<float>(s.tuple()[1]) == std::vector<float>{2, 3, 12, 13});
  s = call("relax.list_split", {x, Value(int64_t(-1)), Value(int64_t(0)), i64({2}, {1, 4})});
  REQUIRE(s.tuple().size() == 2);
  CHECK(s.tuple()[1].tensor().shape() == std::vector<int64_t>{2, 4});  // keepdims applies to a scalar split only
  CHECK(error_of([&] { call("relax.list_split", {x, Value(int64_t(1)), Value(int64_t(1)), i64({2}, {1, 3})}); }) ==
        "SplitToSequence: split sums to 4 but the axis has length 5");
  s = call("relax.list_split", {x, Value(int64_t(0)), Value(int64_t(0))});
  REQUIRE(s.tuple().size() == 2);
  CHECK(s.tuple()[1].tensor().shape() == std::vector<int64_t>{5});

  // Concatenated back along axis 1, and stacked along a new axis.
  Value parts = call("relax.list_split", {x, Value(int64_t(1)), Value(int64_t(1)), i64({}, {2})});
  Value joined = call("relax.list_concat", {parts, Value(int64_t(1)), Value(int64_t(0))});
  CHECK(joined.tensor().shape() == std::vector<int64_t>{2, 5});
  CHECK(values<float>(joined) == values<float>(Value(x)));
  Value rows = call("relax.list_split", {x, Value(int64_t(0)), Value(int64_t(0))});
  Value stacked = call("relax.list_concat", {rows, Value(int64_t(1)), Value(int64_t(1))});
  CHECK(stacked.tensor().shape() == std::vector<int64_t>{5, 2});
  CHECK(values<float>(stacked) == std::vector<float>{0, 10, 1, 11, 2, 12, 3, 13, 4, 14});
  CHECK(error_of([&] { call("relax.list_concat", {empty, Value(int64_t(0)), Value(int64_t(0))}); }) ==
        "ConcatFromSequence: the sequence is empty");
}

TEST_CASE("builtins: SplitToSequence refuses split lengths whose sum overflows (found by fuzz_package)") {
  // Two lengths of 2^62 + 2 sum past int64 and wrapped to the axis' 4 before:
  // the copies then read far past the input.
  Tensor x = f32({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  const int64_t big = (int64_t(1) << 62) + 2;
  for (std::vector<int64_t> split : {std::vector<int64_t>{big, big, big, big}, std::vector<int64_t>{5, 0},
                                     std::vector<int64_t>{INT64_MAX, 1}}) {
    CHECK_THROWS_WITH_AS(call("relax.list_split", {x, int64_t(0), int64_t(1), i64({int64_t(split.size())}, split)}),
                         doctest::Contains("sums past the axis' length 4"), Error);
  }
  // A scalar split near INT64_MAX is one part.
  Value parts = call("relax.list_split", {x, int64_t(0), int64_t(1), i64({}, {INT64_MAX})});
  CHECK(parts.tuple().size() == 1);
  parts = call("relax.list_split", {x, int64_t(0), int64_t(1), i64({}, {3})});
  REQUIRE(parts.tuple().size() == 2);
  CHECK(parts.tuple()[1].tensor("").shape() == std::vector<int64_t>{1, 2});
}
