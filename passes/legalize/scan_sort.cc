// Legalisers of the scan, linear-algebra and signal ops (ir/ops/scan_sort.cc):
// einsum, cumsum, cumprod, hardmax, det, dft, stft, window and
// mel_weight_matrix. topk and non_max_suppression sort, so they are runtime
// builtins (dynamic.cc).
//
// Accumulation is in f32 for narrow floats; the Fourier transforms and the
// windows evaluate their angles and sums in f64 (angles reduced modulo the
// length in integers first), as the reference does in numpy.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <string>

#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::BinOp;
using tir::Intrinsic;

const DataType kF64 = DataType::f(64);

SymExpr sym_attr(const Attrs& attrs, const std::string& name) {
  const AttrValue* v = attrs.find(name);
  if (!v) return {};
  if (const auto* s = std::get_if<SymExpr>(v)) return *s;
  return SymExpr(std::get<int64_t>(*v));
}

// Every dim but `axis`.
std::vector<SymExpr> drop_axis(const std::vector<SymExpr>& shape, size_t axis) {
  std::vector<SymExpr> out;
  for (size_t j = 0; j < shape.size(); ++j)
    if (j != axis) out.push_back(shape[j]);
  return out;
}

// The full index from the index over every dim but `axis`, and `v` at axis.
Index insert_axis(const Index& o, size_t axis, const TExpr& v) {
  Index i(o.begin(), o.begin() + std::ptrdiff_t(axis));
  i.push_back(v);
  i.insert(i.end(), o.begin() + std::ptrdiff_t(axis), o.end());
  return i;
}

TExpr f64(const TExpr& e) { return cast(kF64, e); }
TExpr floormod(const TExpr& a, const SymExpr& n) { return tir::binary(BinOp::FloorMod, a, idx(max(n, SymExpr(1)))); }
// 2 pi (m mod n) / n in f64.
TExpr angle(const TExpr& m, const SymExpr& n) {
  return f64(floormod(m, n)) * (tir::imm(kF64, 2 * M_PI) / f64(idx(max(n, SymExpr(1)))));
}

// ---- einsum --------------------------------------------------------------------------

struct Term {
  std::string letters;
  int ellipsis = -1;  // position among the letters where "..." stands
};

std::optional<Term> parse_term(const std::string& s) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (std::isalpha(static_cast<unsigned char>(s[i]))) {
      t.letters += s[i];
    } else if (s.compare(i, 3, "...") == 0 && t.ellipsis < 0) {
      t.ellipsis = int(t.letters.size());
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  return t;
}

// Inputs and output of an equation (the implicit output as numpy's).
std::optional<std::pair<std::vector<Term>, Term>> parse_equation(const std::string& equation) {
  std::string eq;
  for (char c : equation)
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<Term> ins;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    std::optional<Term> t = parse_term(lhs.substr(start, comma - start));
    if (!t) return std::nullopt;
    ins.push_back(*t);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    std::optional<Term> out = parse_term(eq.substr(arrow + 2));
    if (!out) return std::nullopt;
    return std::make_pair(ins, *out);
  }
  Term out;
  std::map<char, int> count;
  for (const Term& t : ins) {
    for (char c : t.letters) ++count[c];
    if (t.ellipsis >= 0) out.ellipsis = 0;
  }
  for (auto [c, n] : count)
    if (n == 1) out.letters += c;
  return std::make_pair(ins, out);
}

std::optional<Expr> legalize_einsum(LegalizeContext& ctx, const CallNode& call) {
  auto parsed = parse_equation(ops::attrs_of(call).get_string("subscripts"));
  std::optional<std::vector<Expr>> args = ctx.tuple_fields(call.args[0], "operand");
  if (!parsed || !args || args->size() != parsed->first.size()) return std::nullopt;
  const std::vector<Term>& terms = parsed->first;
  ProgramBuilder pb(ctx, "einsum");
  std::vector<Buffer> xs;
  for (size_t k = 0; k < args->size(); ++k) {
    xs.push_back(pb.input((*args)[k], "x" + std::to_string(k)));
    if (!xs.back()) return std::nullopt;
  }
  Buffer y = pb.output(call.sinfo, "out");
  if (!y) return std::nullopt;
  const Term& out = parsed->second;
  int out_ell = int(y->shape.size()) - int(out.letters.size());
  if (out_ell < 0 || (out.ellipsis < 0 && out_ell != 0)) return std::nullopt;

  // The size of each letter: a dim that is not 1 where there is one.
  std::map<char, SymExpr> size;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Term& t = terms[k];
    int nell = t.ellipsis < 0 ? 0 : int(xs[k]->shape.size()) - int(t.letters.size());
    for (int j = 0; j < int(t.letters.size()); ++j) {
      const SymExpr& d = xs[k]->shape[size_t(j < t.ellipsis || t.ellipsis < 0 ? j : j + nell)];
      auto it = size.find(t.letters[size_t(j)]);
      if (it == size.end() || it->second.is_const(1)) size[t.letters[size_t(j)]] = d;
    }
  }
  std::string reduced;
  for (auto& [c, d] : size)
    if (out.letters.find(c) == std::string::npos) reduced += c;
  std::vector<SymExpr> red_ext;
  for (char c : reduced) red_ext.push_back(size[c]);

  DataType t = y->dtype, acc = compute_dtype(t);
  if (t.is_bool()) return std::nullopt;
  int out_ell_at = out.ellipsis < 0 ? 0 : out.ellipsis;
  auto value = [&](const Index& i, const Index& r) {
    std::map<char, TExpr> at;
    for (size_t j = 0; j < out.letters.size(); ++j)
      at[out.letters[j]] = i[j < size_t(out_ell_at) ? j : j + size_t(out_ell)];
    for (size_t j = 0; j < reduced.size(); ++j) at[reduced[j]] = r[j];
    TExpr prod;
    for (size_t k = 0; k < xs.size(); ++k) {
      const Term& tm = terms[k];
      const std::vector<SymExpr>& shape = xs[k]->shape;
      int nell = tm.ellipsis < 0 ? 0 : int(shape.size()) - int(tm.letters.size());
      Index xi;
      // A dim of 1 where the letter (or ellipsis dim) is larger broadcasts.
      auto bcast = [&](const SymExpr& d, const SymExpr& full, const TExpr& v) {
        if (d == full) return v;
        if (d.is_const(1)) return idx(0);
        return select(eq(idx(d), idx(1)), idx(0), v);
      };
      for (int j = 0; j < int(shape.size()); ++j) {
        bool in_ell = tm.ellipsis >= 0 && j >= tm.ellipsis && j < tm.ellipsis + nell;
        if (in_ell) {
          // Right-aligned onto the output's ellipsis dims.
          size_t oj = size_t(out_ell_at + out_ell - nell + (j - tm.ellipsis));
          xi.push_back(bcast(shape[size_t(j)], y->shape[oj], i[oj]));
        } else {
          char c = tm.letters[size_t(tm.ellipsis >= 0 && j >= tm.ellipsis ? j - nell : j)];
          xi.push_back(bcast(shape[size_t(j)], size[c], at[c]));
        }
      }
      TExpr v = cast(acc, load(xs[k], xi));
      prod = prod ? prod * v : v;
    }
    return prod;
  };
  return pb.finish(
      compute_reduce(y, red_ext, sum_reducer(acc), value, [&](const Index&, const TExpr& a) { return cast(t, a); }));
}

// ---- cumsum, cumprod, hardmax --------------------------------------------------------------

std::optional<Expr> legalize_cumulative(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  bool sum = op == "cumsum", exclusive = attrs.get_bool("exclusive"), reverse = attrs.get_bool("reverse");
  ProgramBuilder pb(ctx, op);
  Buffer x = pb.input(call.args[0], "x");
  Buffer axis_buf = call.args.size() > 1 ? pb.input(call.args[1], "axis") : nullptr;
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !y || (call.args.size() > 1 && !axis_buf)) return std::nullopt;
  DataType t = x->dtype, acc = compute_dtype(t);
  if (t.is_bool()) return std::nullopt;
  Reducer red = sum ? sum_reducer(acc) : prod_reducer(acc);
  size_t r = x->shape.size();

  if (!axis_buf) {
    size_t axis = size_t(ops::normalize_axis(op, attrs.get_int("axis"), int(r)));
    SymExpr len = x->shape[axis];
    LoopHints hints{true, false, len};
    return pb.finish(loop_nest(
        drop_axis(x->shape, axis),
        [&](const Index& o) {
          Local a = local("acc", acc);
          Stmt scan = loop_nest(
              {len},
              [&](const Index& k) {
                TExpr pos = reverse ? idx(len) - idx(1) - k[0] : k[0];
                Index i = insert_axis(o, axis, pos);
                Stmt add = a.set(red.combine(a.get(), cast(acc, load(x, i))));
                Stmt store = tir::make_store(y, i, cast(t, a.get()));
                return exclusive ? tir::make_seq({store, add}) : tir::make_seq({add, store});
              },
              LoopHints{false, false, 1}, "k");
          return with_locals({a}, tir::make_seq({a.set(red.init), scan}));
        },
        hints));
  }
  // The axis read at run time: each element combines the elements of its
  // line up to it, the line walked over the largest dim with clamped
  // (never out of bounds) coordinates.
  SymExpr longest = 1;
  for (const SymExpr& d : x->shape) longest = max(longest, d);
  Index zeros(axis_buf->shape.size(), idx(0));
  TExpr a0 = as_index(load(axis_buf, zeros));
  TExpr axis = select(lt(a0, idx(0)), a0 + idx(int64_t(r)), a0);
  return pb.finish(compute_reduce(
      y, {longest}, red,
      [&](const Index& i, const Index& k) {
        TExpr at = idx(0);  // i's coordinate on the axis
        for (size_t j = 0; j < r; ++j) at = select(eq(axis, idx(int64_t(j))), i[j], at);
        Index xi;
        TExpr in_line = tir::imm_int(DataType::boolean(), 0);
        for (size_t j = 0; j < r; ++j) {
          TExpr on = eq(axis, idx(int64_t(j)));
          xi.push_back(select(on, min_(k[0], idx(x->shape[j]) - idx(1)), i[j]));
          in_line = or_(in_line, and_(on, lt(k[0], idx(x->shape[j]))));
        }
        TExpr take = reverse ? (exclusive ? gt(k[0], at) : ge(k[0], at)) : (exclusive ? lt(k[0], at) : le(k[0], at));
        return select(and_(in_line, take), cast(acc, load(x, xi)), red.init);
      },
      [&](const Index&, const TExpr& a) { return cast(t, a); }));
}

std::optional<Expr> legalize_hardmax(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "hardmax");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !y) return std::nullopt;
  size_t axis = size_t(ops::normalize_axis("hardmax", ops::attrs_of(call).get_int("axis"), int(x->shape.size())));
  SymExpr len = x->shape[axis];
  DataType t = x->dtype;
  return pb.finish(loop_nest(
      drop_axis(x->shape, axis),
      [&](const Index& o) {
        Local best = local("best", t), at = local("at", DataType::i64());
        Stmt scan = loop_nest(
            {len},
            [&](const Index& k) {
              TExpr v = load(x, insert_axis(o, axis, k[0]));
              TExpr better = gt(v, best.get());
              if (t.is_float())  // the first NaN wins, as numpy's argmax
                better = or_(better, and_(intrin(Intrinsic::isnan, v), not_(intrin(Intrinsic::isnan, best.get()))));
              better = or_(eq(k[0], idx(0)), better);
              return tir::make_seq({at.set(select(better, k[0], at.get())), best.set(select(better, v, best.get()))});
            },
            LoopHints{false, false, 1}, "k");
        Stmt write = loop_nest(
            {len},
            [&](const Index& k) {
              return tir::make_store(y, insert_axis(o, axis, k[0]), select(eq(k[0], at.get()), one(t), zero(t)));
            },
            LoopHints{false, false, 1}, "k");
        return with_locals({best, at}, tir::make_seq({at.set(idx(0)), best.set(min_value(t)), scan, write}));
      },
      LoopHints{true, false, len * 2}));
}

// ---- det -----------------------------------------------------------------------------

// LU decomposition with partial pivoting of each matrix, in a scratch copy
// (a second output of the program, dropped): det = sign * prod(pivots); a
// zero pivot gives 0 and skips the elimination.
std::optional<Expr> legalize_det(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, "det");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !y) return std::nullopt;
  size_t r = x->shape.size();
  DataType t = x->dtype, acc = compute_dtype(t);
  std::vector<SymExpr> lu_shape = y->shape;
  SymExpr n = x->shape[r - 1];
  lu_shape.push_back(n);
  lu_shape.push_back(n);
  StructInfo lu_si = tensor_si(acc, lu_shape);
  Buffer lu = pb.output(lu_si, "lu");
  if (!lu) return std::nullopt;
  auto m = [&](const Index& b, const TExpr& i, const TExpr& j) {
    Index at = b;
    at.push_back(i);
    at.push_back(j);
    return at;
  };
  LoopHints serial{false, false, 1};
  Stmt body = loop_nest(
      y->shape,
      [&](const Index& b) {
        Local d = local("det", acc), piv = local("piv", DataType::i64()), pmax = local("pmax", acc),
              pv = local("pivot", acc), tmp = local("tmp", acc), f = local("f", acc);
        Stmt copy = loop_nest(
            {n, n},
            [&](const Index& ij) {
              Index src = b;
              src.push_back(ij[0]);
              src.push_back(ij[1]);
              return tir::make_store(lu, m(b, ij[0], ij[1]), cast(acc, load(x, src)));
            },
            serial, "c");
        Stmt step = loop_nest(
            {n},
            [&](const Index& kk) {
              TExpr k = kk[0];
              SymExpr kv = tir::as<tir::SymNodeT>(k)->value;
              SymExpr rest = n - kv - 1;
              auto absv = [&](const TExpr& i) { return intrin(Intrinsic::abs, load(lu, m(b, i, k))); };
              Stmt find = loop_nest(
                  {rest},
                  [&](const Index& ii) {
                    TExpr i = k + idx(1) + ii[0];
                    TExpr better = gt(absv(i), pmax.get());
                    return tir::make_seq(
                        {piv.set(select(better, i, piv.get())), pmax.set(select(better, absv(i), pmax.get()))});
                  },
                  serial, "p");
              Stmt swap = tir::make_if(
                  ne(piv.get(), k),
                  tir::make_seq({loop_nest(
                                     {n},
                                     [&](const Index& jj) {
                                       return tir::make_seq(
                                           {tmp.set(load(lu, m(b, k, jj[0]))),
                                            tir::make_store(lu, m(b, k, jj[0]), load(lu, m(b, piv.get(), jj[0]))),
                                            tir::make_store(lu, m(b, piv.get(), jj[0]), tmp.get())});
                                     },
                                     serial, "s"),
                                 d.set(-d.get())}));
              Stmt eliminate = loop_nest(
                  {rest},
                  [&](const Index& ii) {
                    TExpr i = k + idx(1) + ii[0];
                    Stmt row = loop_nest(
                        {rest},
                        [&](const Index& jj) {
                          TExpr j = k + idx(1) + jj[0];
                          return tir::make_store(lu, m(b, i, j), load(lu, m(b, i, j)) - f.get() * load(lu, m(b, k, j)));
                        },
                        serial, "e");
                    return tir::make_seq({f.set(load(lu, m(b, i, k)) / pv.get()), row});
                  },
                  serial, "r");
              return tir::make_seq({piv.set(k), pmax.set(absv(k)), find, swap, pv.set(load(lu, m(b, k, k))),
                                    d.set(d.get() * pv.get()), tir::make_if(ne(pv.get(), zero(acc)), eliminate)});
            },
            serial, "k");
        return with_locals({d, piv, pmax, pv, tmp, f},
                           tir::make_seq({copy, d.set(one(acc)), step, tir::make_store(y, b, cast(t, d.get()))}));
      },
      LoopHints{true, false, n * n * n});
  Var both = ctx.emit(pb.finish(body), "det_lu");
  Expr out = make_tuple_get_item(both, 0);
  out->sinfo = call.sinfo;
  return out;
}

// ---- dft, stft ---------------------------------------------------------------------------

// One complex Fourier sum per output element (rows of `outer` dims and a
// bin): re + i im = sum_t (xr + i xi)(cos a -/+ i sin a), a = 2 pi k t / n.
struct Signal {
  std::function<TExpr(const TExpr&t)> re, im;  // f64 samples; t in [0, extent)
  SymExpr extent;                              // samples summed
};

Stmt fourier(const Local& re, const Local& im, const Signal& s, const TExpr& bin, const SymExpr& n, bool inverse) {
  Stmt loop = loop_nest(
      {s.extent},
      [&](const Index& tt) {
        TExpr a = angle(bin * tt[0], n);
        TExpr c = intrin(Intrinsic::cos, a), sn = intrin(Intrinsic::sin, a);
        if (!inverse) sn = -sn;
        TExpr xr = s.re(tt[0]), xi = s.im(tt[0]);
        return tir::make_seq({re.set(re.get() + (xr * c - xi * sn)), im.set(im.get() + (xi * c + xr * sn))});
      },
      LoopHints{false, false, 1}, "t");
  return tir::make_seq({re.set(zero(kF64)), im.set(zero(kF64)), loop});
}

// dft along a fixed axis, or (with the axis operand) along an axis read at
// run time: then a builtin (relax.dft_params) gives the result dims, the
// axis, n and the dim at the axis, bound by a match_cast, and the program
// picks the axis coordinate with selects.
std::optional<Expr> legalize_dft(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  bool inverse = attrs.get_bool("inverse"), onesided = attrs.get_bool("onesided");
  bool runtime_axis = call.args.size() > 1;
  const auto* xsi = as<TensorSI>(call.args[0]->sinfo);
  const auto* ysi = as<TensorSI>(call.sinfo);
  if (!xsi || !ysi || xsi->ndim < 2) return std::nullopt;
  size_t r = size_t(xsi->ndim);
  SymExpr len = sym_attr(attrs, "length");
  bool has_len = len.defined() && !len.is_const(-1);
  StructInfo out_si = call.sinfo;
  std::vector<SymExpr> pp;
  if (runtime_axis) {
    Expr params = ctx.call_pure_builtin("relax.dft_params",
                                        {call.args[0], call.args[1], make_prim_bool(inverse), make_prim_bool(onesided),
                                         make_prim_int(has_len ? len : SymExpr(-1))},
                                        shape_si_ndim(int(r) + 3));
    pp = *ctx.bind_shape(params, "dft_p");
    out_si = tensor_si(ysi->dtype, std::vector<SymExpr>(pp.begin(), pp.begin() + std::ptrdiff_t(r)));
  }
  ProgramBuilder pb(ctx, "dft");
  Buffer x = pb.input(call.args[0], "x");
  Buffer y = pb.output(out_si, "out");
  if (!x || !y) return std::nullopt;
  size_t axis = 0;
  SymExpr a, d, n;
  if (runtime_axis) {
    a = pb.sym(pp[r]);
    n = pb.sym(pp[r + 1]);
    d = pb.sym(pp[r + 2]);
  } else {
    axis = size_t(ops::normalize_axis("dft", attrs.get_int("axis"), int(r)));
    d = x->shape[axis];
    n = has_len ? pb.sym(len) : onesided && inverse ? 2 * (d - 1) : d;
  }
  // The coordinate of i on the axis, and i with it replaced.
  auto on_axis = [&](const Index& i) {
    if (!runtime_axis) return i[axis];
    TExpr v = i[0];
    for (size_t j = 1; j + 1 < r; ++j) v = select(eq(idx(a), idx(int64_t(j))), i[j], v);
    return v;
  };
  auto at_axis = [&](Index i, const TExpr& v) {
    if (!runtime_axis) {
      i[axis] = v;
      return i;
    }
    for (size_t j = 0; j + 1 < r; ++j) i[j] = select(eq(idx(a), idx(int64_t(j))), v, i[j]);
    return i;
  };
  bool complex_in = !x->shape[r - 1].is_const(1);
  DataType t = x->dtype;
  std::vector<SymExpr> rows(y->shape.begin(), y->shape.end() - 1);
  bool real_out = y->shape[r - 1].is_const(1);
  return pb.finish(loop_nest(
      rows,
      [&](const Index& i) {
        Local re = local("re", kF64), im = local("im", kF64);
        TExpr bin = on_axis(i);
        auto sample = [&](const TExpr& tt, int part) {
          Index xi = at_axis(i, min_(tt, idx(d) - idx(1)));
          xi.push_back(idx(part));
          return select(lt(tt, idx(d)), f64(load(x, xi)), zero(kF64));
        };
        Signal s;
        // Bins above n/2 are the conjugates of those below (Hermitian).
        // (Outside the branch: s's functions below hold them by reference
        // and run after it.)
        const SymExpr half = floordiv(n, 2);
        auto mirror = [&](const TExpr& k) { return select(le(k, idx(half)), k, idx(n) - k); };
        if (inverse && onesided) {
          s.re = [&](const TExpr& k) { return sample(mirror(k), 0); };
          s.im = [&](const TExpr& k) {
            if (!complex_in) return zero(kF64);
            TExpr v = sample(mirror(k), 1);
            return select(le(k, idx(half)), v, -v);
          };
          s.extent = n;
        } else {
          s.re = [&](const TExpr& tt) { return sample(tt, 0); };
          s.im = [&](const TExpr& tt) { return complex_in ? sample(tt, 1) : zero(kF64); };
          s.extent = min(n, d);
        }
        Stmt sum = fourier(re, im, s, bin, n, inverse);
        TExpr scale = inverse ? one(kF64) / f64(idx(max(n, SymExpr(1)))) : one(kF64);
        auto at = [&](int part) {
          Index o = i;
          o.push_back(idx(part));
          return o;
        };
        std::vector<Stmt> body{sum, tir::make_store(y, at(0), cast(t, re.get() * scale))};
        if (!real_out) {
          // A last dim known only at run time may be 1 (a real output):
          // the imaginary part then has no place (and would land on the
          // next row's real part).
          Stmt store_im = tir::make_store(y, at(1), cast(t, im.get() * scale));
          const SymExpr& parts = y->shape[r - 1];
          body.push_back(parts.is_const() ? store_im : tir::make_if(lt(idx(int64_t(1)), idx(parts)), store_im));
        }
        return with_locals({re, im}, tir::make_seq(body));
      },
      LoopHints{true, false, n}));
}

std::optional<Expr> legalize_stft(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "stft");
  Buffer x = pb.input(call.args[0], "signal");
  Buffer w = call.args.size() > 1 ? pb.input(call.args[1], "window") : nullptr;
  Buffer y = pb.output(call.sinfo, "out");
  if (!x || !y || (call.args.size() > 1 && !w)) return std::nullopt;
  SymExpr step = pb.sym(sym_attr(attrs, "frame_step"));
  SymExpr len = sym_attr(attrs, "frame_length");
  SymExpr n = len.defined() && !len.is_const(-1) ? pb.sym(len) : w ? w->shape[0] : SymExpr();
  if (!n.defined()) return std::nullopt;
  bool complex_in = !x->shape[2].is_const(1);
  DataType t = x->dtype;
  std::vector<SymExpr> rows(y->shape.begin(), y->shape.end() - 1);  // batch, frame, bin
  return pb.finish(loop_nest(
      rows,
      [&](const Index& i) {
        Local re = local("re", kF64), im = local("im", kF64);
        auto sample = [&](const TExpr& tt, int part) {
          TExpr v = f64(load(x, {i[0], i[1] * idx(step) + tt, idx(part)}));
          return w ? v * f64(load(w, {tt})) : v;
        };
        Signal s;
        s.re = [&](const TExpr& tt) { return sample(tt, 0); };
        s.im = [&](const TExpr& tt) { return complex_in ? sample(tt, 1) : zero(kF64); };
        s.extent = n;
        Stmt sum = fourier(re, im, s, i[2], n, false);
        return with_locals({re, im},
                           tir::make_seq({sum, tir::make_store(y, {i[0], i[1], i[2], idx(0)}, cast(t, re.get())),
                                          tir::make_store(y, {i[0], i[1], i[2], idx(1)}, cast(t, im.get()))}));
      },
      LoopHints{true, false, n}));
}

// ---- window, mel_weight_matrix -----------------------------------------------------------

std::optional<Expr> legalize_window(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  std::string kind = attrs.get_string("kind");
  ProgramBuilder pb(ctx, "window_" + kind);
  Buffer y = pb.output(call.sinfo, "out");
  if (!y) return std::nullopt;
  SymExpr size = y->shape[0];
  // Periodic: N points of an N+1-point symmetric window.
  SymExpr denom = max(attrs.get_bool("periodic") ? size : size - 1, SymExpr(1));
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr a = angle(i[0], denom);
    TExpr c1 = intrin(Intrinsic::cos, a);
    auto k = [](double v) { return tir::imm(kF64, v); };
    TExpr v = kind == "hann"      ? k(0.5) - k(0.5) * c1
              : kind == "hamming" ? k(25.0 / 46.0) - k(21.0 / 46.0) * c1
                                  : k(0.42) - k(0.5) * c1 + k(0.08) * intrin(Intrinsic::cos, a + a);
    return cast(y->dtype, v);
  }));
}

std::optional<Expr> legalize_mel_weight_matrix(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "mel_weight_matrix");
  Buffer sr = pb.input(call.args[0], "sample_rate");
  Buffer lo = pb.input(call.args[1], "lower_edge_hertz");
  Buffer hi = pb.input(call.args[2], "upper_edge_hertz");
  Buffer y = pb.output(call.sinfo, "out");
  if (!sr || !lo || !hi || !y) return std::nullopt;
  SymExpr dft_length = pb.sym(sym_attr(attrs, "dft_length"));
  SymExpr bins = y->shape[1];
  auto scalar = [&](const Buffer& b) { return load(b, Index(b->shape.size(), idx(0))); };
  // The mel edges in the operands' float dtype (as the reference's numpy
  // does), the rest in f64.
  DataType ft = compute_dtype(lo->dtype.is_float() ? lo->dtype : kF64);
  auto c = [&](double v) { return tir::imm(ft, v); };
  auto mel = [&](const Buffer& hz) {
    TExpr v = cast(ft, scalar(hz));
    return c(2595) * (intrin(Intrinsic::log, c(1) + v / c(700)) / c(std::log(10.0)));
  };
  TExpr low = mel(lo), step = (mel(hi) - low) / cast(ft, idx(bins + 2));
  TExpr rate = f64(scalar(sr));
  // The spectrogram bin of mel point m, floored; 0 for a zero sample rate.
  auto bin_of = [&](const TExpr& m) {
    TExpr f = f64(m) * f64(step) + f64(low);
    TExpr hz = tir::imm(kF64, 700) *
               (intrin(Intrinsic::exp, f / tir::imm(kF64, 2595) * tir::imm(kF64, std::log(10.0))) - tir::imm(kF64, 1));
    TExpr b = intrin(Intrinsic::floor, f64(idx(dft_length + 1)) * hz / select(eq(rate, zero(kF64)), one(kF64), rate));
    b = max_(min_(b, tir::imm(kF64, 1e15)), tir::imm(kF64, -1e15));
    return select(eq(rate, zero(kF64)), idx(0), as_index(b));
  };
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr j = i[0], l = bin_of(i[1]), m = bin_of(i[1] + idx(1)), h = bin_of(i[1] + idx(2));
    auto ratio = [&](const TExpr& a, const TExpr& b) { return f64(a) / f64(max_(b, idx(1))); };
    TExpr v = select(eq(j, m), one(kF64),
                     select(and_(ge(j, l), lt(j, m)), ratio(j - l, m - l),
                            select(and_(gt(j, m), lt(j, h)), ratio(h - j, h - m), zero(kF64))));
    return cast(y->dtype, v);
  }));
}

}  // namespace

void register_scan_sort_legalizers(LegalizerRegistry& reg) {
  reg.add("einsum", legalize_einsum);
  reg.add("cumsum", legalize_cumulative);
  reg.add("cumprod", legalize_cumulative);
  reg.add("hardmax", legalize_hardmax);
  reg.add("det", legalize_det);
  reg.add("dft", legalize_dft);
  reg.add("stft", legalize_stft);
  reg.add("window", legalize_window);
  reg.add("mel_weight_matrix", legalize_mel_weight_matrix);
}

}  // namespace relax
