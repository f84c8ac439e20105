// Legalisers of quantize / dequantize and of the recurrent layers rnn, gru
// and lstm (ir/ops/quant.cc).
//
// quantize rounds half to even and saturates in f32 (f64 for an f64 scale or
// precision); 4-bit and float8 results are reached by a final cast, which
// the code generator packs. The recurrences run as one program: per
// direction, the batch entries in parallel, each stepping serially through
// time with its state in local buffers (hidden_size must be a constant).
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;
using tir::LoopKind;

// ---- quantize / dequantize -------------------------------------------------------------

// A scale or zero point: a buffer read per tensor, per axis or per block,
// or a scalar.
struct QParam {
  Buffer buf;
  TExpr scalar;
  int axis = 0;
  int64_t block = 0;
  bool per_tensor = true;
  TExpr at(const Index& i) const {
    if (!buf) return scalar;
    if (per_tensor) return buf->shape.empty() ? load(buf, {}) : load(buf, {idx(0)});
    if (block == 0) return load(buf, {i[size_t(axis)]});
    Index bi = i;
    bi[size_t(axis)] = tir::binary(tir::BinOp::FloorDiv, i[size_t(axis)], idx(block));
    return load(buf, bi);
  }
};

std::optional<QParam> qparam(ProgramBuilder& pb, const Expr& arg, const std::string& name, int axis, int64_t block) {
  QParam q;
  q.axis = axis;
  q.block = block;
  if (as<TensorSI>(arg->sinfo)) {
    q.buf = pb.input(arg, name);
    if (!q.buf) return std::nullopt;
    q.per_tensor = q.buf->shape.empty() || (block == 0 && q.buf->shape.size() == 1 && q.buf->shape[0].is_const(1));
    return q;
  }
  const auto* p = as<PrimSI>(arg->sinfo);
  if (!p || p->dtype.is_void()) return std::nullopt;
  std::optional<TExpr> s = pb.scalar(arg, p->dtype);
  if (!s) return std::nullopt;
  q.scalar = *s;
  return q;
}

int quant_axis(const Attrs& attrs, int ndim) {
  int64_t a = attrs.get_int("axis");
  if (a < 0) a += ndim;
  return int(std::max<int64_t>(0, std::min<int64_t>(a, std::max(ndim - 1, 0))));
}

std::optional<Expr> legalize_quantize(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "quantize");
  Buffer x = pb.input(call.args[0], "x");
  if (!x) return std::nullopt;
  int axis = quant_axis(attrs, int(x->shape.size()));
  int64_t block = attrs.get_int("block_size");
  auto scale = qparam(pb, call.args[1], "scale", axis, block);
  std::optional<QParam> zp;
  if (call.args.size() > 2) zp = qparam(pb, call.args[2], "zero_point", axis, block);
  Buffer y = pb.output(call.sinfo, "y");
  if (!scale || !y || (call.args.size() > 2 && !zp)) return std::nullopt;
  DataType out = y->dtype;
  DataType prec = attrs.get_dtype("precision");
  if (prec.is_void()) prec = scale->buf ? scale->buf->dtype : scale->scalar->dtype;
  if (!prec.is_float()) prec = DataType::f32();
  DataType t = prec.bits >= 64 ? DataType::f(64) : DataType::f32();
  bool saturate = attrs.get_bool("saturate");
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr q = cast(t, load(x, i)) / cast(t, scale->at(i));
    if (prec.bits < 32) q = cast(t, cast(prec, q));  // the division's rounding in a narrow precision
    if (out.is_integer()) {
      TExpr v = round_half_even(q);
      if (zp) v = v + cast(t, zp->at(i));
      v = min_(max_(v, cast(t, min_value(out))), cast(t, max_value(out)));
      return cast(out, cast(DataType::i32(), v));
    }
    if (out.code == TypeCode::Float4E2M1 && zp) q = q + cast(t, zp->at(i));
    if ((saturate || out.code == TypeCode::Float4E2M1) && narrow_float_max(out) > 0) q = saturate_to(q, out);
    return cast(out, q);
  }));
}

std::optional<Expr> legalize_dequantize(LegalizeContext& ctx, const CallNode& call) {
  Attrs attrs = ops::attrs_of(call);
  ProgramBuilder pb(ctx, "dequantize");
  Buffer x = pb.input(call.args[0], "x");
  if (!x) return std::nullopt;
  int axis = quant_axis(attrs, int(x->shape.size()));
  int64_t block = attrs.get_int("block_size");
  auto scale = qparam(pb, call.args[1], "scale", axis, block);
  std::optional<QParam> zp;
  if (call.args.size() > 2) zp = qparam(pb, call.args[2], "zero_point", axis, block);
  Buffer y = pb.output(call.sinfo, "y");
  if (!scale || !y || (call.args.size() > 2 && !zp)) return std::nullopt;
  DataType sd = scale->buf ? scale->buf->dtype : scale->scalar->dtype;
  DataType t = sd.is_float() && sd.bits >= 64 ? DataType::f(64) : DataType::f32();
  bool use_zp = zp && !x->dtype.is_float();
  return pb.finish(compute(y, [&](const Index& i) {
    TExpr v = cast(t, load(x, i));
    if (use_zp) v = v - cast(t, zp->at(i));
    return cast(y->dtype, v * cast(t, scale->at(i)));
  }));
}

// ---- rnn / gru / lstm ---------------------------------------------------------------------

// An ONNX activation function by name, with its alpha and beta.
TExpr activate(const std::string& name, double alpha, double beta, const TExpr& x) {
  DataType t = x->dtype;
  TExpr a = const_of(t, alpha), b = const_of(t, beta), z = zero(t), o = one(t);
  if (name == "Sigmoid") return intrin(Intrinsic::sigmoid, x);
  if (name == "Tanh") return intrin(Intrinsic::tanh, x);
  if (name == "Relu") return max_(x, z);
  if (name == "Affine") return a * x + b;
  if (name == "LeakyRelu") return select(lt(x, z), a * x, x);
  if (name == "ThresholdedRelu") return select(gt(x, a), x, z);
  if (name == "ScaledTanh") return a * intrin(Intrinsic::tanh, b * x);
  if (name == "HardSigmoid") return max_(z, min_(o, a * x + b));
  if (name == "Elu") return select(lt(x, z), a * (intrin(Intrinsic::exp, x) - o), x);
  if (name == "Softsign") return x / (o + intrin(Intrinsic::abs, x));
  if (name == "Softplus")
    return max_(x, z) + intrin(Intrinsic::log1p, intrin(Intrinsic::exp, -intrin(Intrinsic::abs, x)));
  return nullptr;
}

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
  TExpr operator()(const TExpr& x) const { return activate(name, alpha, beta, x); }
};

std::optional<Expr> legalize_recurrent(LegalizeContext& ctx, const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  bool is_lstm = op == "lstm", is_gru = op == "gru";
  int G = is_lstm ? 4 : is_gru ? 3 : 1;
  int per_dir = is_lstm ? 3 : is_gru ? 2 : 1;
  ProgramBuilder pb(ctx, op);
  size_t n = call.args.size();
  static const char* kNames[] = {"X", "W", "R", "B", "seq_lens", "init_h", "init_c", "P"};
  std::vector<Buffer> in(8);
  for (size_t k = 0; k < n && k < 8; ++k) {
    in[k] = pb.input(call.args[k], kNames[k]);
    if (!in[k]) return std::nullopt;
  }
  const auto* tup = as<TupleSI>(call.sinfo);
  if (!tup) return std::nullopt;
  std::vector<Buffer> out;
  static const char* kOut[] = {"Y", "Y_h", "Y_c"};
  for (size_t k = 0; k < tup->fields.size() && k < 3; ++k) {
    out.push_back(pb.output(tup->fields[k], kOut[k]));
    if (!out.back()) return std::nullopt;
  }
  Buffer X = in[0], W = in[1], R = in[2], B = in[3], L = in[4], H0 = in[5], C0 = in[6], P = in[7];
  Buffer Y = out[0], Yh = out[1], Yc = is_lstm ? out[2] : nullptr;
  if (!R->shape[2].is_const()) return std::nullopt;
  int64_t H = R->shape[2].const_value();
  bool batch_first = attrs.get_int("layout") == 1;
  SymExpr S = X->shape[batch_first ? 1 : 0], N = X->shape[batch_first ? 0 : 1], I = X->shape[2];
  std::string direction = attrs.get_string("direction");
  int dirs = direction == "bidirectional" ? 2 : 1;
  std::vector<std::string> names;
  if (const AttrValue* v = attrs.find("activations")) names = std::get<std::vector<std::string>>(*v);
  std::vector<double> alphas = attrs.get_floats("activation_alpha"), betas = attrs.get_floats("activation_beta");
  static const char* kDefault[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  auto act = [&](int d, int k) {
    size_t at = size_t(d * per_dir + k);
    Act a;
    a.name = at < names.size() ? names[at] : kDefault[G == 4 ? 2 : G == 3 ? 1 : 0][k];
    a.alpha = at < alphas.size() ? alphas[at] : 0;
    a.beta = at < betas.size() ? betas[at] : 0;
    if (names.empty()) a.alpha = a.beta = 0;
    return a;
  };
  for (int d = 0; d < dirs; ++d)
    for (int k = 0; k < per_dir; ++k)
      if (!act(d, k)(tir::imm(DataType::f32(), 0))) return std::nullopt;
  double clip = attrs.get_float("clip");
  bool lbr = is_gru && attrs.get_bool("linear_before_reset");
  bool input_forget = is_lstm && attrs.get_bool("input_forget");
  DataType t = compute_dtype(X->dtype);
  if (!t.is_float()) return std::nullopt;
  auto cl = [&](const TExpr& v) {
    if (clip <= 0) return v;
    return min_(max_(v, const_of(t, -clip)), const_of(t, clip));
  };
  auto xi = [&](const TExpr& tt, const TExpr& b, const TExpr& k) {
    return batch_first ? Index{b, tt, k} : Index{tt, b, k};
  };
  auto yi = [&](const TExpr& tt, int d, const TExpr& b, const TExpr& j) {
    return batch_first ? Index{b, tt, idx(d), j} : Index{tt, idx(d), b, j};
  };
  auto si = [&](int d, const TExpr& b, const TExpr& j) {
    return batch_first ? Index{b, idx(d), j} : Index{idx(d), b, j};
  };
  auto ld = [&](const Buffer& buf, Index i) { return cast(t, load(buf, std::move(i))); };

  // The state of each batch row (hidden, cell, gates, GRU's reset product):
  // the program's workspace, one row per batch entry, shared by the
  // directions, which run one after the other.
  Buffer hs = tir::make_buffer("h_state", t, {N, SymExpr(H)});
  Buffer cs = tir::make_buffer("c_state", t, {N, SymExpr(H)});
  Buffer gs = tir::make_buffer("gates", t, {N, SymExpr(G * H)});
  Buffer tmp = tir::make_buffer("reset_h", t, {N, SymExpr(H)});
  std::vector<Stmt> dir_bodies;
  for (int d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    std::string sfx = std::to_string(d);
    Act f = act(d, 0), g = act(d, per_dir > 1 ? 1 : 0), h = act(d, per_dir > 2 ? 2 : 0);
    LoopKind par = N.is_const() && N.const_value() <= 1 ? LoopKind::Serial : LoopKind::Parallel;
    SymExpr bv = SymExpr::var("b" + sfx);
    Stmt body = tir::make_for(bv, N, par, [&]() -> Stmt {
      TExpr b = idx(bv);
      Local acc = local("acc" + sfx, t);
      TExpr len = L ? max_(min_(as_index(load(L, {b})), idx(S)), idx(0)) : idx(S);
      auto j_loop = [&](const std::string& name, int64_t ext, const std::function<Stmt(const TExpr&)>& fn) {
        SymExpr v = SymExpr::var(name + sfx);
        return tir::make_for(v, ext, LoopKind::Serial, fn(idx(v)));
      };
      // acc = sum_k M[d, row, k] * v(k) over `extent`.
      auto dot = [&](const Buffer& M, const TExpr& row, const SymExpr& extent, const std::string& name,
                     const std::function<TExpr(const TExpr&)>& v) {
        SymExpr kv = SymExpr::var(name + sfx);
        TExpr k = idx(kv);
        return tir::make_for(kv, extent, LoopKind::Serial, acc.set(acc.get() + ld(M, {idx(d), row, k}) * v(k)));
      };
      auto bias = [&](const TExpr& q) { return B ? ld(B, {idx(d), q}) : zero(t); };
      auto rbias = [&](const TExpr& q) { return B ? ld(B, {idx(d), q + idx(G * H)}) : zero(t); };
      std::vector<Stmt> init;
      init.push_back(j_loop("j0_", H, [&](const TExpr& j) {
        Stmt s1 = tir::make_store(hs, {b, j}, H0 ? ld(H0, si(d, b, j)) : zero(t));
        Stmt s2 = tir::make_store(cs, {b, j}, C0 ? ld(C0, si(d, b, j)) : zero(t));
        return is_lstm ? tir::make_seq({s1, s2}) : s1;
      }));
      SymExpr tv = SymExpr::var("t" + sfx);
      TExpr tt = idx(tv);
      TExpr pos = reverse ? len - idx(1) - tt : tt;
      TExpr tc = max_(min_(pos, idx(S) - idx(1)), idx(0));
      // Gate pre-activations g[q] = W x + Wb (+ R h + Rb where the cell wants it here).
      Stmt gates = j_loop("q", G * H, [&](const TExpr& q) {
        std::vector<Stmt> s;
        s.push_back(acc.set(bias(q)));
        s.push_back(dot(W, q, I, "kx", [&](const TExpr& k) { return ld(X, xi(tc, b, k)); }));
        s.push_back(tir::make_store(gs, {b, q}, acc.get()));
        Stmt rec = tir::make_seq({acc.set(rbias(q)), dot(R, q, SymExpr(H), "kh", [&](const TExpr& k) {
                                    return load(hs, {b, k});
                                  })});
        Stmt add = tir::make_store(gs, {b, q}, load(gs, {b, q}) + acc.get());
        if (!is_gru) {
          s.push_back(rec);
          s.push_back(add);
        } else if (lbr) {
          // z, r: add R h + Rb; the h block keeps R h + Rb apart in tmp.
          s.push_back(rec);
          s.push_back(
              tir::make_if(lt(q, idx(2 * H)), add, tir::make_store(tmp, {b, max_(q - idx(2 * H), idx(0))}, acc.get())));
        } else {
          s.push_back(tir::make_if(lt(q, idx(2 * H)), tir::make_seq({rec, add})));
        }
        return tir::make_seq(s);
      });
      std::vector<Stmt> step{gates};
      if (G == 1) {
        step.push_back(j_loop("j1_", H, [&](const TExpr& j) {
          TExpr hn = f(cl(load(gs, {b, j})));
          return tir::make_seq(
              {tir::make_store(hs, {b, j}, hn), tir::make_store(Y, yi(tc, d, b, j), cast(Y->dtype, hn))});
        }));
      } else if (is_lstm) {
        step.push_back(j_loop("j1_", H, [&](const TExpr& j) {
          TExpr cp = load(cs, {b, j});
          auto peep = [&](int k) { return P ? ld(P, {idx(d), j + idx(k * H)}) : zero(t); };
          TExpr ig = f(cl(load(gs, {b, j}) + peep(0) * cp));
          TExpr fg = input_forget ? one(t) - ig : f(cl(load(gs, {b, j + idx(2 * H)}) + peep(2) * cp));
          TExpr cand = g(cl(load(gs, {b, j + idx(3 * H)})));
          Stmt c_new = tir::make_store(cs, {b, j}, fg * cp + ig * cand);
          TExpr cn = load(cs, {b, j});
          TExpr og = f(cl(load(gs, {b, j + idx(H)}) + peep(1) * cn));
          TExpr hn = og * h(cn);
          return tir::make_seq(
              {c_new, tir::make_store(hs, {b, j}, hn), tir::make_store(Y, yi(tc, d, b, j), cast(Y->dtype, hn))});
        }));
      } else {
        // GRU: r first (r * h into tmp unless linear_before_reset), then each unit.
        if (!lbr)
          step.push_back(j_loop("j1_", H, [&](const TExpr& k) {
            return tir::make_store(tmp, {b, k}, f(cl(load(gs, {b, k + idx(H)}))) * load(hs, {b, k}));
          }));
        step.push_back(j_loop("j2_", H, [&](const TExpr& j) {
          std::vector<Stmt> s;
          TExpr pre;
          if (lbr) {
            TExpr r = f(cl(load(gs, {b, j + idx(H)})));
            pre = load(gs, {b, j + idx(2 * H)}) + r * load(tmp, {b, j});
          } else {
            s.push_back(acc.set(rbias(j + idx(2 * H))));
            s.push_back(dot(R, j + idx(2 * H), SymExpr(H), "kr", [&](const TExpr& k) { return load(tmp, {b, k}); }));
            pre = load(gs, {b, j + idx(2 * H)}) + acc.get();
          }
          TExpr cand = g(cl(pre));
          TExpr z = f(cl(load(gs, {b, j})));
          TExpr hn = (one(t) - z) * cand + z * load(hs, {b, j});
          s.push_back(tir::make_store(hs, {b, j}, hn));
          s.push_back(tir::make_store(Y, yi(tc, d, b, j), cast(Y->dtype, load(hs, {b, j}))));
          return tir::make_seq(s);
        }));
      }
      Stmt pad = j_loop("j3_", H, [&](const TExpr& j) {
        return tir::make_store(Y, yi(max_(min_(tt, idx(S) - idx(1)), idx(0)), d, b, j), zero(Y->dtype));
      });
      Stmt time = tir::make_for(tv, S, LoopKind::Serial, tir::make_if(lt(tt, len), tir::make_seq(step), pad));
      Stmt fin = j_loop("j4_", H, [&](const TExpr& j) {
        Stmt s1 = tir::make_store(Yh, si(d, b, j), cast(Yh->dtype, load(hs, {b, j})));
        if (!Yc) return s1;
        return tir::make_seq({s1, tir::make_store(Yc, si(d, b, j), cast(Yc->dtype, load(cs, {b, j})))});
      });
      Stmt all = tir::make_seq({tir::make_seq(init), time, fin});
      return with_locals({acc}, all);
    }());
    dir_bodies.push_back(body);
  }
  Stmt body = tir::make_seq(dir_bodies);
  std::vector<Buffer> state{hs, gs};
  if (is_lstm) state.push_back(cs);
  if (is_gru) state.push_back(tmp);
  for (const Buffer& buf : state) body = tir::make_allocate(buf, body);
  return pb.finish(body);
}

}  // namespace

void register_quant_legalizers(LegalizerRegistry& reg) {
  reg.add("quantize", legalize_quantize);
  reg.add("dequantize", legalize_dequantize);
  reg.add("rnn", legalize_recurrent);
  reg.add("gru", legalize_recurrent);
  reg.add("lstm", legalize_recurrent);
}

}  // namespace relax
