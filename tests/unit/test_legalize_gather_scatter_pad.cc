// Legalisers of pad, gather_nd, scatter_elements and scatter_nd
// (passes/legalize/index.cc): each op legalises on a few shapes,
// symbolic ones included, into a module that verifies and keeps no call of
// the op; a few checks on the programs' structure (the serial update loop,
// the sym_params of run-time pads, the guards of out-of-range indices).
#include <doctest/doctest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/legalize/legalize.h"
#include "passes/passes.h"

using namespace relax;

namespace {

// The legalised module of @main(params) with a dataflow block of `body`
// returning `ret`; fails the test when it does not verify, when one of `ops`
// is still called or when no program was added.
IRModule legalized(const std::string& params, const std::string& body, const std::string& ret,
                   const std::vector<std::string>& ops) {
  std::string text = "fn @main(" + params + ") -> Object {\n  dataflow {\n" + body + "  }\n  return " + ret + "\n}\n";
  IRModule mod = legalize(parse_module(text));
  std::string out = print_module(mod);
  INFO(out);
  for (const std::string& e : verify(mod)) FAIL_CHECK(e);
  for (const std::string& op : ops) CHECK_MESSAGE(out.find("= " + op + "(") == std::string::npos, op);
  CHECK(!mod.program_names().empty());
  return mod;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string program_text(const IRModule& mod, const std::string& name) {
  tir::Program p = mod.program(name);
  REQUIRE_MESSAGE(p, "no program @", name);
  return print_program(name, p);
}

}  // namespace

TEST_CASE("legalize: gather_nd with and without batch dims") {
  IRModule mod = legalized(
      "x: Tensor[(n, 4, 5), f32], i: Tensor[(n, 2), i64], b: Tensor[(k, 3, 1), i32], y: Tensor[(k, 4, 5), f16], "
      "s: Tensor[(2, 3), i64], t: Tensor[(4, 2), i32], u: Tensor[ndim=3, f32]",
      "    a: Tensor[(n, 5), f32] = gather_nd(x, i)\n"
      "    c: Tensor[(k, 3, 5), f16] = gather_nd(y, b, batch_dims=1)\n"
      "    d: Tensor[(4,), i64] = gather_nd(s, t)\n"
      "    e = gather_nd(u, i)\n",
      "a", {"gather_nd"});
  std::string text = program_text(mod, "gather_nd");
  CHECK(has(text, "out: Buffer[(n, 5), f32]"));
  // An index tuple element wraps and is clamped into its dim.
  CHECK(has(text, "max(min(select(indices[i0, 0] < 0, indices[i0, 0] + n, indices[i0, 0]), n - 1), 0)"));
  CHECK(has(program_text(mod, "gather_nd_1"), "x[i0, "));  // the batch dim read as is
}

TEST_CASE("legalize: scatter_elements, every reduction, a serial loop over the updates") {
  IRModule mod = legalized(
      "x: Tensor[(n, 4), f32], i: Tensor[(m, 4), i64], u: Tensor[(m, 4), f32], "
      "y: Tensor[(3, 5), i32], j: Tensor[(3, 2), i32], v: Tensor[(3, 2), i32], "
      "z: Tensor[(n, 6), bool], jz: Tensor[(m, 2), i64], vz: Tensor[(m, 2), bool], vz2: Tensor[(m, 2), f32]",
      "    a: Tensor[(n, 4), f32] = scatter_elements(x, i, u)\n"
      "    b: Tensor[(3, 5), i32] = scatter_elements(y, j, v, axis=1, reduction=\"add\")\n"
      "    c: Tensor[(3, 5), i32] = scatter_elements(y, j, v, axis=-1, reduction=\"mul\")\n"
      "    d: Tensor[(n, 4), f32] = scatter_elements(x, i, u, axis=0, reduction=\"max\")\n"
      "    e: Tensor[(n, 4), f32] = scatter_elements(x, i, u, reduction=\"min\")\n"
      "    f: Tensor[(n, 6), bool] = scatter_elements(z, jz, vz, axis=1, reduction=\"add\")\n"
      "    g: Tensor[(n, 4), f32] = scatter_elements(x, jz, vz2, axis=1)\n",
      "a", {"scatter_elements"});
  std::string none = program_text(mod, "scatter_elements");
  // The copy first, then the updates one after another; an index out of
  // range after wrapping is skipped.
  CHECK(has(none, "out[i0, i1] = x[i0, i1]"));
  CHECK(has(none, "for j0 in range(m)"));
  CHECK(has(none, "at[0] = select(indices[j0, j1] < 0, indices[j0, j1] + n, indices[j0, j1])"));
  CHECK(has(none, "if (at[0] >= 0 && at[0] < n)"));
  CHECK(has(none, "out[at[0], j1] = updates[j0, j1]"));
  CHECK(has(program_text(mod, "scatter_elements_1"), "out[j0, at[0]] = out[j0, at[0]] + updates[j0, j1]"));
  CHECK(has(program_text(mod, "scatter_elements_2"), "out[j0, at[0]] = out[j0, at[0]] * updates[j0, j1]"));
  CHECK(has(program_text(mod, "scatter_elements_3"), "max(out[at[0], j1], updates[j0, j1])"));
  CHECK(has(program_text(mod, "scatter_elements_4"), "min(out[at[0], j1], updates[j0, j1])"));
  CHECK(has(program_text(mod, "scatter_elements_5"), "out[j0, at[0]] || updates[j0, j1]"));
  // Non-axis dims of the indices larger than the data's are never written:
  // with n and m unrelated the loop over dim 0 runs min(m, n) times.
  CHECK(has(none, "for j0 in range(m)"));  // dim 0 is the axis
  CHECK(has(program_text(mod, "scatter_elements_6"), "for j0 in range(min(m, n))"));
}

TEST_CASE("legalize: scatter_nd, slices and single elements, every reduction") {
  IRModule mod = legalized(
      "x: Tensor[(n, 4, 5), f32], i: Tensor[(k, 1), i64], u: Tensor[(k, 4, 5), f32], "
      "y: Tensor[(8,), i32], j: Tensor[(2, 3, 1), i32], v: Tensor[(2, 3), i32], "
      "w: Tensor[(2, 2), i64], uw: Tensor[(2, 5), f32], p: Tensor[(1, 3), i64], q: Tensor[(1,), f32]",
      "    a: Tensor[(n, 4, 5), f32] = scatter_nd(x, i, u)\n"
      "    b: Tensor[(8,), i32] = scatter_nd(y, j, v, reduction=\"add\")\n"
      "    c: Tensor[(8,), i32] = scatter_nd(y, j, v, reduction=\"mul\")\n"
      "    d: Tensor[(n, 4, 5), f32] = scatter_nd(x, w, uw, reduction=\"max\")\n"
      "    e: Tensor[(n, 4, 5), f32] = scatter_nd(x, p, q, reduction=\"min\")\n",
      "a", {"scatter_nd"});
  std::string none = program_text(mod, "scatter_nd");
  CHECK(has(none, "for j0 in range(k)"));
  CHECK(has(none, "at[0] = select(indices[j0, 0] < 0, indices[j0, 0] + n, indices[j0, 0])"));
  CHECK(has(none, "if (at[0] >= 0 && at[0] < n)"));
  CHECK(has(none, "out[at[0], k0, k1] = updates[j0, k0, k1]"));
  CHECK(has(program_text(mod, "scatter_nd_1"), "out[at[0]] = out[at[0]] + updates[j0, j1]"));
  CHECK(has(program_text(mod, "scatter_nd_2"), "out[at[0]] = out[at[0]] * updates[j0, j1]"));
  CHECK(has(program_text(mod, "scatter_nd_3"), "max(out[at[0], at[1], k0], updates[j0, k0])"));
  CHECK(has(program_text(mod, "scatter_nd_4"), "min(out[at[0], at[1], at[2]], updates[j0])"));
}

TEST_CASE("legalize: pad, every mode, negative and run-time pads") {
  IRModule mod = legalized(
      "x: Tensor[(n, 4), f32], s: Shape[ndim=4], v: Tensor[(), f32], y: Tensor[(3, 5), i64], "
      "r: Tensor[ndim=2, f32], b: Tensor[(2, 3), bool]",
      "    a: Tensor[(n + 2, 5), f32] = pad(x, shape(1, 0, 1, 1), prim(1.5, f32))\n"
      "    c = pad(x, s, v)\n"
      "    d: Tensor[(3, 9), i64] = pad(y, shape(-1, 2, 1, 2), prim(0, i64), mode=\"reflect\")\n"
      "    e: Tensor[(n + 3, 3), f32] = pad(x, shape(2, 0, 1, -1), prim(0, f32), mode=\"edge\")\n"
      "    f: Tensor[(5, 12), i64] = pad(y, shape(1, 3, 1, 4), prim(0, i64), mode=\"wrap\")\n"
      "    g = pad(r, s, v, mode=\"reflect\")\n"
      "    h: Tensor[(2, 5), bool] = pad(b, shape(0, 1, 0, 1), prim(1, bool))\n",
      "a", {"pad"});
  std::string text = print_module(mod);
  // Run-time pads: bound by a match_cast; the window each axis keeps is
  // computed at graph level and passed as one sym_param.
  CHECK(has(text, "match_cast(s, Shape[(s_d0, s_d1, s_d2, s_d3)])"));
  CHECK(has(text, "shape(max(n - max(-s_d0, 0) - max(-s_d2, 0), 0), "));
  std::string constant = program_text(mod, "pad");
  CHECK(has(constant, "out[i0, i1] = 1.5f32"));
  CHECK(has(constant, "out[i0 + 1, i1] = x[i0, i1]"));  // fill, then copy the window
  std::string runtime = program_text(mod, "pad_1");
  CHECK(has(runtime, "out[i0, i1] = value[]"));
  CHECK(has(runtime, "out[i0 + s2, i1 + s4] = x[i0 + s3, i1 + s5]"));
  // reflect: the first row cropped; period 2 * (keep - 1), the edges not repeated.
  CHECK(has(program_text(mod, "pad_2"),
            "x[select(i0 % 2 >= 2, -(i0 % 2) + 2, i0 % 2) + 1, select((i1 + 6) % 8 >= 5, -((i1 + 6) % 8) + 8, "
            "(i1 + 6) % 8)]"));
  CHECK(has(program_text(mod, "pad_3"), "x[max(min(i0 - 2, n - 1), 0), max(min(i1, 2), 0)]"));
  CHECK(has(program_text(mod, "pad_3"), "if (n >= 1)"));  // an empty x has nothing to read
  CHECK(has(program_text(mod, "pad_4"), "x[(i0 + 2) % 3, (i1 + 2) % 5]"));
  CHECK(has(program_text(mod, "pad_5"), "if (s0 >= 1 && s1 >= 1)"));
  CHECK(has(program_text(mod, "pad_6"), "out[i0, i1] = true"));
}
