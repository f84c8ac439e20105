// VM lowering and the VM on graph functions that need no kernels: input
// checks, symbolic shapes computed from the heap, match_cast, If, tuples,
// bytecode serialisation. Kernel calls are covered end to end by the
// conformance runner and the model tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "backends/vm/lower.h"
#include "ir/error.h"
#include "ir/op.h"
#include "ir/parser.h"
#include "runtime/error.h"
#include "runtime/vm.h"

using namespace relax;

namespace {

std::unique_ptr<rt::VirtualMachine> make_vm(const std::string& text) {
  IRModule mod = parse_module(text);
  VMLowered l = lower_to_vm(mod);
  // Through the bytes, as a package carries it.
  rt::Executable exe = rt::Executable::deserialize(l.exe.serialize());
  return std::make_unique<rt::VirtualMachine>(
      std::move(exe), [](const std::string&) { return rt::Tensor(); }, nullptr);
}

rt::Tensor tensor(rt::DType d, std::vector<int64_t> shape) { return rt::Tensor::zeros(d, std::move(shape)); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("vm: symbolic shapes are bound from inputs and computed") {
  auto vm = make_vm(R"(
fn @main(x: Tensor[(n, 4), f32], y: Tensor[(n,), i64]) -> Shape[(n * 2 + 1, 4)] {
  s: Shape[(n * 2 + 1, 4)] = shape(n * 2 + 1, 4)
  return s
}
)");
  rt::Value r = vm->invoke("main", {tensor(rt::DType::f32(), {3, 4}), tensor(rt::DType::i64(), {3})});
  CHECK(r.shape() == std::vector<int64_t>{7, 4});
  r = vm->invoke("main", {tensor(rt::DType::f32(), {0, 4}), tensor(rt::DType::i64(), {0})});
  CHECK(r.shape() == std::vector<int64_t>{1, 4});

  std::string e = error_of([&] {
    vm->invoke("main", {tensor(rt::DType::f32(), {3, 4}), tensor(rt::DType::i64(), {5})});
  });
  CHECK(e.find("input 'y'") != std::string::npos);
  CHECK(e.find("dim 0 (n) is 5, expected n = 3") != std::string::npos);
  e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {3, 5}), tensor(rt::DType::i64(), {3})}); });
  CHECK(e.find("input 'x'") != std::string::npos);
  CHECK(e.find("dim 1 is 5, expected 4") != std::string::npos);
  e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f16(), {3, 4}), tensor(rt::DType::i64(), {3})}); });
  CHECK(e.find("has dtype f16, expected f32") != std::string::npos);
  e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {3, 4, 1}), tensor(rt::DType::i64(), {3})}); });
  CHECK(e.find("has rank 3, expected 2") != std::string::npos);
  e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {3, 4})}); });
  CHECK(e.find("takes 2 inputs, got 1") != std::string::npos);
}

TEST_CASE("vm: a shape computed again from the same heap is the value kept from the last run") {
  auto vm = make_vm(R"(
fn @main(x: Tensor[(n, 4), f32]) -> Shape[(n * 2 + 1, 4)] {
  s: Shape[(n * 2 + 1, 4)] = shape(n * 2 + 1, 4)
  return s
}
)");
  auto run = [&](int64_t n) { return vm->invoke("main", {tensor(rt::DType::f32(), {n, 4})}); };
  rt::Value a = run(3), b = run(3);
  CHECK(a.shape() == std::vector<int64_t>{7, 4});
  CHECK(b.shape().data() == a.shape().data());  // kept, not computed and allocated again
  rt::Value c = run(5);
  CHECK(c.shape() == std::vector<int64_t>{11, 4});
  CHECK(run(3).shape() == std::vector<int64_t>{7, 4});
  CHECK(a.shape() == std::vector<int64_t>{7, 4});  // a value handed out never changes
}

TEST_CASE("vm: a compound dim of an earlier input is checked once a later one binds its variable") {
  auto vm = make_vm(R"(
fn @main(a: Tensor[(n + 1,), f32], b: Tensor[(n,), f32]) -> Shape[(n,)] {
  return shape(n)
}
)");
  CHECK(vm->invoke("main", {tensor(rt::DType::f32(), {4}), tensor(rt::DType::f32(), {3})}).shape() ==
        std::vector<int64_t>{3});
  std::string e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {3}), tensor(rt::DType::f32(), {3})}); });
  CHECK(e.find("input 'a'") != std::string::npos);
  CHECK(e.find("expected n + 1 = 4") != std::string::npos);
}

TEST_CASE("vm: bounds of symbolic dims (attribute sym_bounds) are checked on entry") {
  auto vm = make_vm(
      "fn @main(x: Tensor[(n,), f32]) -> Shape[(n,)] attrs {sym_bounds=[\"n=1..8\"]} {\n  return shape(n)\n}\n");
  CHECK(vm->invoke("main", {tensor(rt::DType::f32(), {8})}).shape() == std::vector<int64_t>{8});
  std::string e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {9})}); });
  CHECK(e.find("dim 0 (n) is 9, outside the bounds of n [1, 8]") != std::string::npos);
  e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {0})}); });
  CHECK(e.find("outside the bounds") != std::string::npos);
}

TEST_CASE("vm: match_cast binds new variables from a runtime shape") {
  auto vm = make_vm(R"(
fn @main(t: Tensor[(k,), i64]) -> Shape[(a * b, k)] {
  s: Shape[ndim=2] = tensor_to_shape(t)
  s2 = match_cast(s, Shape[(a, b)])
  r: Shape[(a * b, k)] = shape(a * b, k)
  return r
}
)");
  rt::Tensor t = tensor(rt::DType::i64(), {2});
  t.data_as<int64_t>()[0] = 3;
  t.data_as<int64_t>()[1] = 5;
  CHECK(vm->invoke("main", {t}).shape() == std::vector<int64_t>{15, 2});
  rt::Tensor t3 = tensor(rt::DType::i64(), {3});
  std::string e = error_of([&] { vm->invoke("main", {t3}); });
  CHECK(e.find("match_cast of 's2'") != std::string::npos);
  CHECK(e.find("has rank 3, expected 2") != std::string::npos);
}

TEST_CASE("vm: If picks a branch; tuples and shape_to_tensor") {
  auto vm = make_vm(R"(
fn @main(c: Tensor[(), bool], x: Tensor[(n,), f32]) -> Tuple[Shape[ndim=1], Tensor[(1,), i64]] {
  y: Shape[ndim=1] = if (c) {
    a: Shape[(n,)] = shape(n)
    a
  } else {
    b: Shape[(n + 10,)] = shape(n + 10)
    b
  }
  t: Tensor[(1,), i64] = shape_to_tensor(y)
  r: Tuple[Shape[ndim=1], Tensor[(1,), i64]] = (y, t)
  return r
}
)");
  rt::Tensor c = tensor(rt::DType::boolean(), {});
  for (int flag : {1, 0}) {
    c.data_as<uint8_t>()[0] = uint8_t(flag);
    rt::Value r = vm->invoke("main", {c, tensor(rt::DType::f32(), {4})});
    const auto& fields = r.tuple();
    REQUIRE(fields.size() == 2);
    int64_t want = flag ? 4 : 14;
    CHECK(fields[0].shape() == std::vector<int64_t>{want});
    CHECK(fields[1].tensor().data_as<int64_t>()[0] == want);
  }
}

TEST_CASE("vm: graph functions call each other") {
  auto vm = make_vm(R"(
fn @main(x: Tensor[(n,), f32]) -> Shape[(n, n)] {
  r: Shape[(n, n)] = @square(x)
  return r
}

fn @square(y: Tensor[(m,), f32]) -> Shape[(m, m)] {
  return shape(m, m)
}
)");
  CHECK(vm->invoke("main", {tensor(rt::DType::f32(), {6})}).shape() == std::vector<int64_t>{6, 6});
}

TEST_CASE("vm lowering: every op left unlegalised is listed at once, with its variables") {
  IRModule mod = parse_module(R"(
fn @main(x: Tensor[(n,), f32]) -> Tensor[(n,), f32] {
  y: Tensor[(n,), f32] = exp(x)
  z: Tensor[(n,), f32] = exp(y)
  w: Tensor[(n,), f32] = tanh(z)
  return w
}
)");
  std::string e;
  try {
    lower_to_vm(mod);
  } catch (const NotLowered& err) {
    e = err.what();
    CHECK(err.ops.at("exp") == std::vector<std::string>{"y", "z"});
    CHECK(err.ops.at("tanh") == std::vector<std::string>{"w"});
  }
  CHECK(e.find("exp (2 uses: y, z)") != std::string::npos);
  CHECK(e.find("tanh (1 use: w)") != std::string::npos);
}

TEST_CASE("bytecode: damaged bytes are refused, never read out of bounds") {
  IRModule mod = parse_module("fn @main(x: Tensor[(n, 2), f32]) -> Shape[(n,)] {\n  return shape(n)\n}\n");
  std::string bytes = lower_to_vm(mod).exe.serialize();
  CHECK_NOTHROW(rt::Executable::deserialize(bytes));
  for (size_t cut = 0; cut < bytes.size(); cut += 3)
    CHECK_THROWS_AS(rt::Executable::deserialize(std::string_view(bytes).substr(0, cut)), rt::Error);
  std::string bad = bytes;
  bad[0] = 'X';
  CHECK_THROWS_WITH_AS(rt::Executable::deserialize(bad), doctest::Contains("bad magic"), rt::Error);
  // Every single-byte change either still parses into a checked program or is refused.
  for (size_t i = 8; i < bytes.size(); i += 5) {
    std::string b = bytes;
    b[i] = char(b[i] ^ 0x5a);
    try {
      rt::Executable::deserialize(b);
    } catch (const rt::Error&) {
    }
  }
}

TEST_CASE("vm: loop runs a nested function that captures values and shape variables") {
  auto vm = make_vm(R"(
fn @main(trip: Tensor[(), i64], c: Tensor[(), bool], x: Tensor[(n,), f32], w: Tensor[(3,), f32]) -> Tuple[Tensor[(n,), f32], Tensor[ndim=1, i64], Tensor[ndim=2, f32]] {
  body: Func[(Tensor[(), i64], Tensor[(), bool], Tensor[(n,), f32]) -> Tuple[Tensor[(), bool], Tensor[(n,), f32], Tensor[(), i64], Tensor[(3,), f32]]] = fn (i: Tensor[(), i64], cin: Tensor[(), bool], v: Tensor[(n,), f32]) -> Tuple[Tensor[(), bool], Tensor[(n,), f32], Tensor[(), i64], Tensor[(3,), f32]] {
    s: Shape[(n,)] = shape(n)
    return (cin, v, i, w)
  }
  r: Tuple[Tensor[(n,), f32], Tensor[ndim=1, i64], Tensor[ndim=2, f32]] = loop(body, trip, c, (x,))
  return r
}
)");
  rt::Tensor trip = tensor(rt::DType::i64(), {});
  trip.data_as<int64_t>()[0] = 3;
  rt::Tensor c = tensor(rt::DType::boolean(), {});
  c.data_as<uint8_t>()[0] = 1;
  rt::Tensor w = tensor(rt::DType::f32(), {3});
  w.data_as<float>()[1] = 2.5f;
  rt::Value r = vm->invoke("main", {trip, c, tensor(rt::DType::f32(), {5}), w});
  const auto& f = r.tuple();
  REQUIRE(f.size() == 3);
  CHECK(f[0].tensor().shape() == std::vector<int64_t>{5});
  CHECK(f[1].tensor().shape() == std::vector<int64_t>{3});
  CHECK(f[1].tensor().data_as<int64_t>()[2] == 2);
  CHECK(f[2].tensor().shape() == std::vector<int64_t>{3, 3});
  CHECK(f[2].tensor().data_as<float>()[4] == 2.5f);
  // No iteration: the carried values come back and the scan outputs are empty.
  c.data_as<uint8_t>()[0] = 0;
  r = vm->invoke("main", {trip, c, tensor(rt::DType::f32(), {5}), w});
  CHECK(r.tuple()[1].tensor().shape() == std::vector<int64_t>{0});
}

TEST_CASE("vm lowering implements exactly the ops that declare a Library or VM lowering") {
  std::vector<std::string> declared;
  for (const OpInfo* op : all_ops())
    if (op->lowered_by_vm()) declared.push_back(op->name);
  std::vector<std::string> lowered = vm_lowered_ops();
  std::sort(lowered.begin(), lowered.end());
  CHECK(declared == lowered);
  CHECK(declared.size() >= 13);  // the cross-level calls, allocation, shape values, loop and scan
  const OpInfo* relu = find_op("relu");
  REQUIRE(relu);
  CHECK(relu->lowering == OpLowering::TensorProgram);
  CHECK(find_op("call_library")->lowering == OpLowering::Library);
  CHECK(find_op("call_tir")->lowering == OpLowering::VM);
}

TEST_CASE("vm: a kernel is called only with the count, dtypes and ranks of its signature") {
  // A kernel trusts those (its prologue checks only how dims relate), so
  // the bytecode verifier checks each call's argument count and the VM
  // each argument, whatever the program says.
  IRModule mod = parse_module(R"(
fn @main(x: Tensor[(n, 8), f32], b: Tensor[(8,), f32]) -> Tensor[(n, 8), f32] {
  y: Tensor[(n, 8), f32] = call_tir(@add, (x, b), out=Tensor[(n, 8), f32])
  return y
}

prog @add(x: Buffer[(n, 8), f32], b: Buffer[(8,), f32]) -> (y: Buffer[(n, 8), f32]) {
  for i0 in parallel(n) {
    for i1 in vectorized(8) {
      y[i0, i1] = x[i0, i1] + b[i1]
    }
  }
}
)");
  VMLowered l = lower_to_vm(mod);
  REQUIRE(l.exe.kernel_signatures.size() == 1);
  const rt::KernelSignature& sig = l.exe.kernel_signatures[0];
  CHECK(sig.ranks == std::vector<int64_t>{2, 1, 2});
  CHECK(sig.dtypes == std::vector<int64_t>(3, rt::DType::f32().pack()));
  CHECK(sig.num_shape_args == 5);
  CHECK_FALSE(sig.takes_syms());

  struct Counting : rt::Kernels {
    mutable int calls = 0;
    rt::KernelCall kernel_call(std::string_view) const override {
      return [this](void* const*, const int64_t*) { return ++calls, 0; };
    }
  } kernels;
  std::string bytes = l.exe.serialize();
  auto vm = std::make_unique<rt::VirtualMachine>(
      rt::Executable::deserialize(bytes), [](const std::string&) { return rt::Tensor(); }, &kernels);
  vm->invoke("main", {tensor(rt::DType::f32(), {3, 8}), tensor(rt::DType::f32(), {8})});
  CHECK(kernels.calls == 1);

  // A program whose call passes a tensor of another dtype or rank than
  // the kernel's (the input checks come first, so change the signature).
  rt::Executable exe = rt::Executable::deserialize(bytes);
  exe.kernel_signatures[0].dtypes[1] = rt::DType::f16().pack();
  vm = std::make_unique<rt::VirtualMachine>(
      std::move(exe), [](const std::string&) { return rt::Tensor(); }, &kernels);
  std::string e = error_of([&] { vm->invoke("main", {tensor(rt::DType::f32(), {3, 8}), tensor(rt::DType::f32(), {8})}); });
  CHECK(e.find("kernel argument 1 is f32[8], the kernel takes f16 of rank 1") != std::string::npos);
  CHECK(kernels.calls == 1);

  // A call with one argument fewer is refused when the bytecode is read.
  exe = rt::Executable::deserialize(bytes);
  for (rt::Instr& in : exe.functions[0].code)
    if (in.op == rt::Opcode::Call && in.callee_kind == rt::CalleeKind::Kernel) in.args.pop_back();
  CHECK_THROWS_WITH_AS(rt::Executable::deserialize(exe.serialize()),
                       doctest::Contains("kernel add takes 3 arguments, the call passes 2"), rt::Error);

  // Format 1 (no signatures) is named as such.
  std::string old = bytes;
  old[7] = '1';
  CHECK_THROWS_WITH_AS(rt::Executable::deserialize(old), doctest::Contains("format 1, from an older relax"), rt::Error);
}

TEST_CASE("bytecode: the shape builtins' patterns are checked when the program is read") {
  IRModule mod = parse_module("fn @main(x: Tensor[(n, 2), f32]) -> Shape[(n * 2,)] {\n  return shape(n * 2)\n}\n");
  rt::Executable good = lower_to_vm(mod).exe;
  CHECK_NOTHROW(rt::Executable::deserialize(good.serialize()));
  auto refused = [&](const std::function<void(std::vector<int64_t>&)>& damage, const std::string& why) {
    rt::Executable exe = good;
    for (rt::Constant& c : exe.constants)
      if (c.kind == rt::Constant::Kind::IntList) damage(c.list);
    CHECK_THROWS_WITH_AS(rt::Executable::deserialize(exe.serialize()), doctest::Contains(why.c_str()), rt::Error);
  };
  refused([](std::vector<int64_t>& p) { p.pop_back(); }, "length out of range");
  refused([](std::vector<int64_t>& p) { p.push_back(0); }, "trailing words");
  refused([](std::vector<int64_t>& p) { p[0] = rt::kMaxShapeLength + 1; }, "rank 65537 (at most 65536)");
  // Every slot a pattern binds or reads must lie in the function's heap.
  refused(
      [](std::vector<int64_t>& p) {
        for (size_t i = 1; i + 1 < p.size(); ++i)
          if (p[i] == rt::ShapePattern::kPushSlot || (p[i] == rt::ShapePattern::kBind && i + 3 < p.size())) p[i + 1] = 7;
      },
      "slot out of range");
}

namespace {

std::string build_error_of(const std::string& text) {
  try {
    lower_to_vm(parse_module(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// (n + 1, n + 2, ..., n + len) as IR text.
std::string dims_text(int len) {
  std::string s;
  for (int i = 1; i <= len; ++i) s += (i > 1 ? ", " : "") + std::string("n + ") + std::to_string(i);
  return s;
}

}  // namespace

TEST_CASE("vm lowering: every limit the package reader enforces is a build error naming the variable") {
  // A shape of 90 values (torchvision's SSDlite makes one) is well within
  // the reader's limit: built, read back and run.
  std::string d90 = dims_text(90);
  auto vm = make_vm("fn @main(x: Tensor[(n,), f32]) -> Shape[(" + d90 + ")] {\n  s: Shape[(" + d90 + ")] = shape(" +
                    d90 + ")\n  return s\n}\n");
  rt::Value r = vm->invoke("main", {tensor(rt::DType::f32(), {5})});
  REQUIRE(r.shape().size() == 90);
  CHECK(r.shape()[89] == 95);

  // A shape longer than the reader takes.
  std::string dl = dims_text(int(rt::kMaxShapeLength) + 1);
  std::string e = build_error_of("fn @main(x: Tensor[(n,), f32]) -> Shape[(" + dl + ")] {\n  big: Shape[(" + dl +
                                 ")] = shape(" + dl + ")\n  return big\n}\n");
  CHECK(e.find("'big'") != std::string::npos);
  CHECK(e.find("the runtime would refuse the package: relax.make_shape: shape pattern of rank 65537") !=
        std::string::npos);

  // A dim whose postfix code needs a deeper stack than the VM's: a
  // right-nested chain of floor divisions, each a value still waiting.
  std::string deep = "n";
  for (int i = 0; i < rt::kMaxShapeCodeDepth + 2; ++i) deep = "(n + " + std::to_string(i + 2) + ") // (" + deep + ")";
  e = build_error_of("fn @main(x: Tensor[(n,), f32]) -> Shape[(" + deep + ",)] {\n  d: Shape[(" + deep +
                     ",)] = shape(" + deep + ")\n  return d\n}\n");
  CHECK(e.find("'d'") != std::string::npos);
  CHECK(e.find("shape code too deep") != std::string::npos);

  // A kernel buffer of a rank past the reader's.
  std::string dims65, idx65, loops, close;
  for (int i = 0; i < rt::kMaxRank + 1; ++i) {
    dims65 += (i ? ", " : "") + std::string("1");
    idx65 += (i ? ", " : "") + std::string("i") + std::to_string(i);
    loops += "  for i" + std::to_string(i) + " in range(1) {\n";
    close += "  }\n";
  }
  e = build_error_of("fn @main(x: Tensor[(" + dims65 + "), f32]) -> Tensor[(" + dims65 + "), f32] {\n  y: Tensor[(" +
                     dims65 + "), f32] = call_tir(@copy, (x,), out=Tensor[(" + dims65 + "), f32])\n  return y\n}\n\n" +
                     "prog @copy(x: Buffer[(" + dims65 + "), f32]) -> (y: Buffer[(" + dims65 + "), f32]) {\n" + loops +
                     "    y[" + idx65 + "] = x[" + idx65 + "]\n" + close + "}\n");
  CHECK(e.find("the runtime would refuse the package") != std::string::npos);
  CHECK(e.find("kernel copy") != std::string::npos);
  CHECK(e.find("rank 65") != std::string::npos);
}

TEST_CASE("vm: a kernel's status (relax.kernel_status) fails the run naming the node, then is clear for the next") {
  IRModule mod = parse_module(R"(
fn @main(i: Tensor[(n,), i64]) -> Tensor[(1,), i8] {
  st: Tensor[(4,), i64] = call_pure_builtin("relax.kernel_status", ("Gather 'y'",), out=Tensor[(4,), i64])
  c: Tensor[(1,), i8] = call_tir(@check, (i, st), out=Tensor[(1,), i8])
  return c
}

prog @check(i: Buffer[(n,), i64], st: Buffer[(4,), i64]) -> (c: Buffer[(1,), i8]) {
  c[0] = 0i8
}
)");
  VMLowered l = lower_to_vm(mod);
  // What @check_indices does (passes/legalize): an index outside [-5, 5) of axis 1 sets the status.
  struct Checking : rt::Kernels {
    mutable std::vector<const int64_t*> statuses;
    rt::KernelCall kernel_call(std::string_view) const override {
      return [this](void* const* b, const int64_t* shape) {
        auto* i = static_cast<const int64_t*>(b[0]);
        auto* st = static_cast<int64_t*>(b[1]);
        statuses.push_back(st);
        for (int64_t k = 0; k < shape[0]; ++k)
          if (i[k] < -5 || i[k] >= 5) st[0] = 1, st[1] = i[k], st[2] = 5, st[3] = 1;
        return 0;
      };
    }
  } kernels;
  auto vm = std::make_unique<rt::VirtualMachine>(
      rt::Executable::deserialize(l.exe.serialize()), [](const std::string&) { return rt::Tensor(); }, &kernels);
  auto ids = [](std::vector<int64_t> v) {
    rt::Tensor t = tensor(rt::DType::i64(), {int64_t(v.size())});
    std::copy(v.begin(), v.end(), static_cast<int64_t*>(t.data()));
    return t;
  };
  CHECK(error_of([&] { vm->invoke("main", {ids({0, 4, -5})}); }).empty());
  CHECK(error_of([&] { vm->invoke("main", {ids({0, 7, -1})}); }) ==
        "Gather 'y': index 7 is out of range for axis 1 of size 5 (valid: -5 to 4)");
  CHECK(error_of([&] { vm->invoke("main", {ids({2})}); }).empty());  // cleared by the failure
  CHECK(error_of([&] { vm->invoke("main", {ids({-6})}); }).find("index -6 is out of range") != std::string::npos);
  // One tensor per call site, kept between runs.
  REQUIRE(kernels.statuses.size() == 4);
  CHECK(kernels.statuses[0] == kernels.statuses[3]);
}
