// Legalisers of the linear-algebra ops (ir/ops/linalg.cc): einsum, det.
// Accumulation is in f32 for narrow floats.
#include <algorithm>
#include <cctype>
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

// ---- det -----------------------------------------------------------------------------

// LU decomposition with partial pivoting of each matrix, in a scratch copy
// (a second output of the program, dropped): det = sign * prod(pivots); a
// zero pivot gives 0 and skips the elimination.
std::optional<Expr> legalize_det(LegalizeContext& ctx, const CallNode& call) {
  ProgramBuilder pb(ctx, call, "det");
  Buffer x = pb.arg(0, "x"), y = pb.result("out");
  if (!pb.known()) return pb.unknown();
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

}  // namespace

void register_linalg_legalizers(LegalizerRegistry& reg) {
  reg.add("einsum", legalize_einsum);
  reg.add("det", legalize_det);
}

}  // namespace relax
