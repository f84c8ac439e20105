// The GPU schedules' decisions (backends/gpu/schedule.h) on
// legalised programs for a GPU target: which stages get a workgroup per
// row and with which steps, and which loops a register tile covers.
// (Whether the results are right is test_glsl_codegen.cc's job.)
#include <doctest/doctest.h>

#include "../cpu/cpu_test_util.h"
#include "backends/gpu/schedule.h"
#include "ir/tir_functor.h"
#include "passes/pass.h"
#include "vulkan_test_util.h"

using namespace relax;

namespace {

std::vector<tir::Program> gpu_programs(const char* text) {
  IRModule mod = parse_module(text);
  configure_vulkan(mod);
  return cpu::test::programs_in(run_passes(mod, pipeline("O0", TargetTraits::of(mod))));
}

const tir::Program& named(const std::vector<tir::Program>& progs, const std::string& name) {
  for (const tir::Program& p : progs)
    if (p->name == name) return p;
  FAIL("no program ", name);
  return progs.front();
}

std::string kinds(const GpuRows& r) {
  std::string out;
  for (const GpuRowStep& s : r.steps)
    out += s.kind == GpuRowStep::Kind::Serial   ? "S"
           : s.kind == GpuRowStep::Kind::Global ? "G"
           : s.kind == GpuRowStep::Kind::Reduce ? "R"
                                                : "P";
  return out;
}

}  // namespace

TEST_CASE("gpu schedule: a workgroup per row for reductions, softmax and layer_norm") {
  auto progs = gpu_programs(R"(
fn @main(x: Tensor[(n, 300), f32], g: Tensor[(300,), f32], a: Tensor[(n, 7, 9), i32]) -> Tuple[Tensor[(n,), f32], Tensor[(n, 300), f32], Tensor[(n, 300), f32], Tensor[(n,), i32]] {
  dataflow {
    %s: Tensor[(n,), f32] = sum(x, axis=[1])
    %l: Tensor[(n, 300), f32] = layer_norm(x, g, g, axes=[1])
    %m: Tensor[(n, 300), f32] = softmax(x, axis=1)
    %a: Tensor[(n,), i32] = max(a, axis=[1, 2])
    out: Tuple[Tensor[(n,), f32], Tensor[(n, 300), f32], Tensor[(n, 300), f32], Tensor[(n,), i32]] = (%s, %l, %m, %a)
  }
  return out
}
)");
  // sum: init, one reduction, the store by thread 0.
  std::vector<GpuStage> st = gpu_stages(named(progs, "sum"));
  REQUIRE(st.size() == 1);
  std::optional<GpuRows> rows = gpu_rows(st[0]);
  REQUIRE(rows);
  CHECK(kinds(*rows) == "SRG");
  CHECK(rows->steps[1].op == tir::BinOp::Add);
  CHECK(rows->work.is_const());
  CHECK(rows->work.const_value() == 300);
  // layer_norm: mean and variance reductions, then the normalised row
  // spread over the threads.
  st = gpu_stages(named(progs, "layer_norm"));
  REQUIRE(st.size() == 1);
  rows = gpu_rows(st[0]);
  REQUIRE(rows);
  CHECK(kinds(*rows) == "SRSSRP");
  CHECK(rows->work.const_value() == 900);
  // max over two axes: one flattened nest of 63 iterations.
  st = gpu_stages(named(progs, "max"));
  rows = gpu_rows(st[0]);
  REQUIRE(rows);
  CHECK(rows->steps[1].op == tir::BinOp::Max);
  CHECK(rows->work.const_value() == 63);
  // Every stage of softmax is schedulable one way or the other.
  for (const GpuStage& s : gpu_stages(named(progs, "softmax"))) CHECK(!s.vars.empty());
  // An elementwise stage has nothing to split.
  auto add = gpu_programs(R"(
fn @main(x: Tensor[(n, 4), f32]) -> Tensor[(n, 4), f32] {
  dataflow {
    out: Tensor[(n, 4), f32] = add(x, x)
  }
  return out
}
)");
  CHECK(!gpu_rows(gpu_stages(add.front())[0]));
  CHECK(!gpu_register_tile(gpu_stages(add.front())[0], 4, 4));
}

TEST_CASE("gpu schedule: register tiles where copies share loads") {
  auto progs = gpu_programs(R"(
fn @main(a: Tensor[(m, 64), f32], b: Tensor[(64, k), f32], x: Tensor[(1, 16, 14, 14), f32], w: Tensor[(32, 16, 3, 3), f32]) -> Tuple[Tensor[(m, k), f32], Tensor[(1, 32, 14, 14), f32]] {
  dataflow {
    %mm: Tensor[(m, k), f32] = matmul(a, b)
    %c: Tensor[(1, 32, 14, 14), f32] = conv(x, w, padding=[1, 1, 1, 1])
    out: Tuple[Tensor[(m, k), f32], Tensor[(1, 32, 14, 14), f32]] = (%mm, %c)
  }
  return out
}
)");
  // matmul: rows i and columns j, 4 x 4 (8 loads for 16 outputs).
  std::vector<GpuStage> st = gpu_stages(named(progs, "matmul"));
  REQUIRE(st.size() == 1);
  REQUIRE(st[0].vars.size() == 2);
  std::optional<GpuStage> t = gpu_register_tile(st[0], 4, 4);
  REQUIRE(t);
  CHECK(t->vars.size() == 2);
  CHECK(!(t->vars[0] == st[0].vars[0]));
  CHECK(!(t->vars[1] == st[0].vars[1]));
  CHECK(t->extents[0] == floordiv(st[0].extents[0] + 3, SymExpr(int64_t(4))));
  // A conv on a GPU target is per output element (n, oc, oh, ow): the tile
  // takes output channels (sharing input loads) and columns (sharing
  // weight loads), not the rows, whose windows overlap less usefully.
  st = gpu_stages(named(progs, "conv"));
  REQUIRE(st.size() == 1);
  REQUIRE(st[0].vars.size() == 4);
  t = gpu_register_tile(st[0], 4, 4);
  REQUIRE(t);
  CHECK(t->vars[0] == st[0].vars[0]);
  CHECK(!(t->vars[1] == st[0].vars[1]));
  CHECK(t->vars[2] == st[0].vars[2]);
  CHECK(!(t->vars[3] == st[0].vars[3]));
  CHECK(t->extents[1].const_value() == 8);
  CHECK(t->extents[3].const_value() == 4);
  // 1 x 1 is no tile.
  CHECK(!gpu_register_tile(st[0], 1, 1));
}

TEST_CASE("gpu schedule: shared-memory tiles for matmul and conv, not for reductions") {
  auto progs = gpu_programs(R"(
fn @main(a: Tensor[(b, m, 64), f32], w: Tensor[(64, k), f32], x: Tensor[(1, 16, 14, 14), f32], f: Tensor[(32, 16, 3, 3), f32], d: Tensor[(32, 1, 3, 3), f32], y: Tensor[(1, 32, 14, 14), f32]) -> Tuple[Tensor[(b, m, k), f32], Tensor[(1, 32, 14, 14), f32], Tensor[(1, 32, 14, 14), f32], Tensor[(b, m), f32]] {
  dataflow {
    %mm: Tensor[(b, m, k), f32] = matmul(a, w)
    %c: Tensor[(1, 32, 14, 14), f32] = conv(x, f, padding=[1, 1, 1, 1])
    %dw: Tensor[(1, 32, 14, 14), f32] = conv(y, d, padding=[1, 1, 1, 1], groups=32)
    %s: Tensor[(b, m), f32] = sum(a, axis=[2])
    out: Tuple[Tensor[(b, m, k), f32], Tensor[(1, 32, 14, 14), f32], Tensor[(1, 32, 14, 14), f32], Tensor[(b, m), f32]] = (%mm, %c, %dw, %s)
  }
  return out
}
)");
  auto barriers = [](const tir::Stmt& s) {
    int n = 0;
    tir::visit_stmts(s, [&](const tir::Stmt& x) { n += x->kind == tir::SKind::Barrier; });
    return n;
  };
  auto shared_bufs = [](const tir::Stmt& s) {
    int n = 0;
    tir::visit_stmts(s, [&](const tir::Stmt& x) {
      const auto* a = tir::as<tir::AllocateNode>(x);
      n += a && a->buffer->scope == tir::Scope::Shared;
    });
    return n;
  };
  // Batched matmul (b, m, k): a workgroup per batch and 64 x 64 block of
  // (m, k); A and B staged, 16 reduction steps per chunk.
  std::vector<GpuStage> st = gpu_stages(named(progs, "matmul"));
  REQUIRE(st.size() == 1);
  std::optional<GpuBlockStage> t = gpu_shared_tile(st[0], 4, 4, 256, 16);
  REQUIRE(t);
  REQUIRE(t->vars.size() == 3);
  CHECK(t->vars[0] == st[0].vars[0]);
  CHECK(t->extents[1] == floordiv(st[0].extents[1] + 63, SymExpr(int64_t(64))));
  CHECK(t->rows == st[0].extents[1]);
  CHECK(t->cols == st[0].extents[2]);
  CHECK(t->depth.const_value() == 64);
  CHECK(t->block_rows == 64);
  CHECK(t->block_cols == 64);
  CHECK(shared_bufs(t->body) == 2);
  CHECK(barriers(t->body) == 2);
  // A 1 x 2 register tile makes 16 x 32 blocks.
  t = gpu_shared_tile(st[0], 1, 2, 256, 16);
  REQUIRE(t);
  CHECK(t->block_rows == 16);
  CHECK(t->block_cols == 32);
  // Conv (n, oc, oh, ow): rows are output channels (the weight staged),
  // columns the output pixels flattened (the padded input staged).
  st = gpu_stages(named(progs, "conv"));
  REQUIRE(st.size() == 1);
  t = gpu_shared_tile(st[0], 4, 4, 256, 16);
  REQUIRE(t);
  CHECK(t->rows.const_value() == 32);
  CHECK(t->cols.const_value() == 196);
  CHECK(t->depth.const_value() == 144);
  CHECK(shared_bufs(t->body) == 2);
  // A depthwise conv's input and weight both depend on the channel:
  // nothing is shared between rows, and a reduction has no columns.
  for (const char* name : {"conv_1", "sum"}) {
    CAPTURE(name);
    st = gpu_stages(named(progs, name));
    REQUIRE(st.size() == 1);
    CHECK(!gpu_shared_tile(st[0], 4, 4, 256, 16));
  }
  // Staged values of more than 16 KiB of shared memory (chunks of 64
  // steps of 64 x 64 blocks) are refused.
  st = gpu_stages(named(progs, "matmul"));
  CHECK(!gpu_shared_tile(st[0], 4, 4, 256, 64));
}

TEST_CASE("gpu schedule: a concat's later parts (stored at i + offset) spread over every loop") {
  // Each part is a nest storing at (i0, i1 + offset, i2, i3); its loops are
  // independent, so a stage is one thread per element, not one per i0 with
  // the rest serial (past lavapipe's loop limit for a detector's feature maps).
  auto progs = gpu_programs(R"(
fn @main(a: Tensor[(n, 24, h, w), f32], b: Tensor[(n, 24, h, w), f32]) -> Tensor[(n, 48, h, w), f32] {
  dataflow {
    out: Tensor[(n, 48, h, w), f32] = concat((a, b), axis=1)
  }
  return out
}
)");
  std::vector<GpuStage> st = gpu_stages(named(progs, "concat"));
  REQUIRE(st.size() == 2);
  CHECK(st[0].vars.size() == 4);
  CHECK(st[1].vars.size() == 4);
}
