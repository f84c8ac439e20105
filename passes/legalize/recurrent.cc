// Legalisers of the recurrent layers rnn, gru and lstm
// (ir/ops/recurrent.cc). On a host target the recurrences run as one
// program: per direction, the batch entries in parallel, each stepping
// serially through time with its state in local buffers; f32 input
// projections are done first for every step, one BLAS product per
// direction, so that the time loop only adds R h. On GPU targets the time
// loop is a loop op launching one step's kernels per iteration
// (legalize_recurrent_gpu). hidden_size must be a constant.
#include "ir/normalize.h"
#include "ir/ops/common.h"
#include "passes/legalize/legalize.h"
#include "passes/legalize/te.h"

namespace relax {
namespace {

using namespace te;
using tir::Intrinsic;
using tir::LoopKind;

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

// What the recurrent ops' attributes say, shared by both forms.
struct Cell {
  bool is_lstm = false, is_gru = false;
  int G = 1, per_dir = 1, dirs = 1;  // gates; activations per direction; directions
  std::string direction;
  bool batch_first = false, lbr = false, input_forget = false;
  double clip = 0;
  std::vector<std::string> names;
  std::vector<double> alphas, betas;

  Act act(int d, int k) const {
    static const char* kDefault[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    size_t at = size_t(d * per_dir + k);
    Act a;
    a.name = at < names.size() ? names[at] : kDefault[G == 4 ? 2 : G == 3 ? 1 : 0][k];
    a.alpha = at < alphas.size() ? alphas[at] : 0;
    a.beta = at < betas.size() ? betas[at] : 0;
    if (names.empty()) a.alpha = a.beta = 0;
    return a;
  }
  // f, g, h of direction d.
  Act f(int d) const { return act(d, 0); }
  Act g(int d) const { return act(d, per_dir > 1 ? 1 : 0); }
  Act h(int d) const { return act(d, per_dir > 2 ? 2 : 0); }
  bool reverse(int d) const { return direction == "reverse" || d == 1; }
  TExpr clipped(const TExpr& v, DataType t) const {
    if (clip <= 0) return v;
    return min_(max_(v, const_of(t, -clip)), const_of(t, clip));
  }
};

// nullopt for an activation this legaliser does not know.
std::optional<Cell> cell_of(const CallNode& call) {
  const std::string& op = ops::op_name(call);
  Attrs attrs = ops::attrs_of(call);
  Cell c;
  c.is_lstm = op == "lstm";
  c.is_gru = op == "gru";
  c.G = c.is_lstm ? 4 : c.is_gru ? 3 : 1;
  c.per_dir = c.is_lstm ? 3 : c.is_gru ? 2 : 1;
  c.batch_first = attrs.get_int("layout") == 1;
  c.direction = attrs.get_string("direction");
  c.dirs = c.direction == "bidirectional" ? 2 : 1;
  if (const AttrValue* v = attrs.find("activations")) c.names = std::get<std::vector<std::string>>(*v);
  c.alphas = attrs.get_floats("activation_alpha");
  c.betas = attrs.get_floats("activation_beta");
  for (int d = 0; d < c.dirs; ++d)
    for (int k = 0; k < c.per_dir; ++k)
      if (!c.act(d, k)(tir::imm(DataType::f32(), 0))) return std::nullopt;
  c.clip = attrs.get_float("clip");
  c.lbr = c.is_gru && attrs.get_bool("linear_before_reset");
  c.input_forget = c.is_lstm && attrs.get_bool("input_forget");
  return c;
}

std::optional<Expr> legalize_recurrent_gpu(LegalizeContext& ctx, const CallNode& call, const Cell& cell);

std::optional<Expr> legalize_recurrent(LegalizeContext& ctx, const CallNode& call) {
  std::optional<Cell> cell = cell_of(call);
  if (!cell) return std::nullopt;
  if (ctx.gpu()) return legalize_recurrent_gpu(ctx, call, *cell);
  const std::string& op = ops::op_name(call);
  bool is_lstm = cell->is_lstm, is_gru = cell->is_gru;
  int G = cell->G;
  // The input projection of every step at once, before the recurrence: per
  // direction d, gx_d[.., .., q] = X[.., .., :] . W[d, q, :] as one BLAS
  // product with W[d] transposed (a weight-only program, folded at build
  // time when W is constant), so the time loop adds only R h. f32 only.
  std::vector<Expr> gx, rt;  // rt: R[d] transposed, (H, G * H), for the recurrence's products
  if (ctx.libraries() && call.args.size() >= 3 && as<TensorSI>(call.args[2]->sinfo) &&
      as<TensorSI>(call.args[2]->sinfo)->dtype == DataType::f32()) {
    const auto* xs = as<TensorSI>(call.args[0]->sinfo);
    const auto* wsi = as<TensorSI>(call.args[1]->sinfo);
    if (xs && wsi && xs->shape && wsi->shape && xs->shape->size() == 3 && wsi->shape->size() == 3 &&
        xs->dtype == DataType::f32() && wsi->dtype == DataType::f32() && (*wsi->shape)[1].is_const()) {
      const SymExpr GH = (*wsi->shape)[1];
      if (!ctx.module().extern_decl("blas.matmul")) ctx.module().add_extern("blas.matmul");
      // M[d] (G * H, cols) transposed, as a program of its own; nullopt if its shape is unknown.
      auto transposed = [&](const Expr& m, const char* in, int d, const std::string& name) -> std::optional<Expr> {
        ProgramBuilder tp(ctx, op + "_" + name);
        Buffer M = tp.input(m, in);
        Buffer Mt = M ? tp.output(tensor_si(DataType::f32(), {M->shape[2], GH}), name) : nullptr;
        if (!Mt) return std::nullopt;
        return ctx.emit(tp.finish(compute(Mt, [&](const Index& i) { return load(M, {idx(d), i[1], i[0]}); })),
                        op + "_" + name + std::to_string(d));
      };
      for (int d = 0; d < cell->dirs; ++d) {
        std::optional<Expr> wt = transposed(call.args[1], "W", d, "wt"), r = transposed(call.args[2], "R", d, "rt");
        if (!wt || !r) return std::nullopt;
        rt.push_back(*r);
        StructInfo gsi = tensor_si(DataType::f32(), {(*xs->shape)[0], (*xs->shape)[1], GH});
        Expr mm = make_op_call("call_library", {make_string("blas.matmul"), make_tuple({call.args[0], *wt})}, {},
                               {gsi});
        mm->sinfo = gsi;
        gx.push_back(ctx.emit(mm, op + "_gx" + std::to_string(d)));
      }
    }
  }
  ProgramBuilder pb(ctx, op);
  size_t n = call.args.size();
  static const char* kNames[] = {"X", "W", "R", "B", "seq_lens", "init_h", "init_c", "P"};
  std::vector<Buffer> in(8);
  for (size_t k = 0; k < n && k < 8; ++k) {
    if (!gx.empty() && (k == 1 || k == 2)) continue;  // W and R: read as gx and rt
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
  std::vector<Buffer> GX, RT;
  for (size_t d = 0; d < gx.size(); ++d) {
    GX.push_back(pb.input(gx[d], "gx" + std::to_string(d)));
    RT.push_back(pb.input(rt[d], "rt" + std::to_string(d)));
    if (!GX.back() || !RT.back()) return std::nullopt;
  }
  Buffer X = in[0], W = in[1], R = in[2], B = in[3], L = in[4], H0 = in[5], C0 = in[6], P = in[7];
  Buffer Y = out[0], Yh = out[1], Yc = is_lstm ? out[2] : nullptr;
  const auto* rsi = as<TensorSI>(call.args[2]->sinfo);
  if (!rsi || !rsi->shape || rsi->shape->size() != 3 || !(*rsi->shape)[2].is_const()) return std::nullopt;
  int64_t H = (*rsi->shape)[2].const_value();
  bool batch_first = cell->batch_first;
  SymExpr S = X->shape[batch_first ? 1 : 0], N = X->shape[batch_first ? 0 : 1], I = X->shape[2];
  const int dirs = cell->dirs;
  const bool lbr = cell->lbr, input_forget = cell->input_forget;
  DataType t = compute_dtype(X->dtype);
  if (!t.is_float()) return std::nullopt;
  auto cl = [&](const TExpr& v) { return cell->clipped(v, t); };
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
  Buffer rsum = tir::make_buffer("rec", t, {N, SymExpr(G * H)});  // the projected form's R h + Rb
  std::vector<Stmt> dir_bodies;
  for (int d = 0; d < dirs; ++d) {
    bool reverse = cell->reverse(d);
    std::string sfx = std::to_string(d);
    Act f = cell->f(d), g = cell->g(d), h = cell->h(d);
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
      Stmt gates;
      if (GX.empty()) gates = j_loop("q", G * H, [&](const TExpr& q) {
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
      // The projected form: rsum[b, q0 + q] = Rb + sum_k R[q0 + q, k] src[b, k]
      // for q < nq, k in order, as H steps each adding one column of R
      // (a row of rt, contiguous) times src[b, k] to every row's sum: a
      // vector loop, where a dot product per row is a serial chain.
      auto rows_of = [&](int64_t q0, int64_t nq, const Buffer& src, const std::string& name) {
        SymExpr kv = SymExpr::var(name + "k" + sfx), qv = SymExpr::var(name + "q" + sfx);
        TExpr k = idx(kv), q = idx(qv) + idx(q0);
        Stmt step = tir::make_store(rsum, {b, q}, load(rsum, {b, q}) + load(RT[size_t(d)], {k, q}) * load(src, {b, k}));
        return tir::make_seq({j_loop(name + "i", nq, [&](const TExpr& j) {
                                return tir::make_store(rsum, {b, j + idx(q0)}, rbias(j + idx(q0)));
                              }),
                              tir::make_for(kv, SymExpr(H), LoopKind::Serial,
                                            tir::make_for(qv, SymExpr(nq), LoopKind::Vectorized, step))});
      };
      if (!GX.empty()) {
        // Gate pre-activations gs = (Wx + Wb) + (R h + Rb) where the cell adds them here.
        const int64_t with_rec = is_gru && !lbr ? 2 * H : G * H;
        Stmt sums = rows_of(0, with_rec, hs, "r");
        gates = tir::make_seq({sums, j_loop("q", G * H, [&](const TExpr& q) {
                                 TExpr pre = bias(q) + load(GX[size_t(d)], xi(tc, b, q));
                                 Stmt plain = tir::make_store(gs, {b, q}, pre);
                                 Stmt added = tir::make_store(gs, {b, q}, pre + load(rsum, {b, q}));
                                 if (!is_gru) return added;
                                 return tir::make_if(lt(q, idx(2 * H)), added, plain);
                               })});
        if (is_gru && lbr)  // the h block's R h + Rb stays apart, in tmp
          gates = tir::make_seq({gates, j_loop("jt_", H, [&](const TExpr& j) {
                                   return tir::make_store(tmp, {b, j}, load(rsum, {b, j + idx(2 * H)}));
                                 })});
      }
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
        if (!lbr && !GX.empty()) step.push_back(rows_of(2 * H, H, tmp, "c"));
        step.push_back(j_loop("j2_", H, [&](const TExpr& j) {
          std::vector<Stmt> s;
          TExpr pre;
          if (lbr) {
            TExpr r = f(cl(load(gs, {b, j + idx(H)})));
            pre = load(gs, {b, j + idx(2 * H)}) + r * load(tmp, {b, j});
          } else if (!GX.empty()) {
            pre = load(gs, {b, j + idx(2 * H)}) + load(rsum, {b, j + idx(2 * H)});
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
  if (!GX.empty()) state.push_back(rsum);
  for (const Buffer& buf : state) body = tir::make_allocate(buf, body);
  return pb.finish(body);
}

// The recurrences on a GPU. The time loop runs on the host (a loop op
// whose body launches one step's kernels), so no invocation loops over
// time: lavapipe ends any loop past 65,535 iterations in one invocation
// (counted across the loops around it), which the one-program form, a
// batch row's whole recurrence per invocation, passes at a hidden size of
// 128 already. Per direction d:
//   project  gx[s, b, q] = W[d, q] . x[s, b] + Wb[d, q] (+ Rb[d, q] where
//            the cell adds it at every step), spread over (s, b, q);
//   init     h0[b, j] (and c0) from init_h (init_c) or zeros;
//   loop     t in 0..S-1, carrying h (and c):
//              gates   g[b, q] = gx[pos, b, q] + R[d, q] . h[b] (GRU's
//                      candidate row apart), spread over (b, q);
//              update  h', c' and y_t[b, j], spread over (b, j); a row past
//                      its sequence length keeps its state;
//            where pos is t, or len_b - 1 - t for the reverse direction;
//   assemble Y[s, d, b, j] = y_{pos}[b, j] for s < len_b (else 0), Y_h, Y_c.
std::optional<Expr> legalize_recurrent_gpu(LegalizeContext& ctx, const CallNode& call, const Cell& cell) {
  const std::string& op = ops::op_name(call);
  const auto* tup = as<TupleSI>(call.sinfo);
  if (!tup || tup->fields.size() < size_t(cell.is_lstm ? 3 : 2)) return std::nullopt;
  size_t n = std::min<size_t>(call.args.size(), 8);
  std::vector<Expr> arg(8);
  for (size_t k = 0; k < n; ++k) {
    std::optional<Expr> e = ctx.bind_tensor(call.args[k], op + "_in");
    if (!e) return std::nullopt;
    arg[k] = *e;
  }
  auto dims = [](const Expr& e) { return *as<TensorSI>(e->sinfo)->shape; };
  std::vector<SymExpr> xd = dims(arg[0]), rd = dims(arg[2]);
  if (!rd[2].is_const()) return std::nullopt;
  const int64_t H = rd[2].const_value(), G = cell.G;
  const SymExpr S = xd[cell.batch_first ? 1 : 0], N = xd[cell.batch_first ? 0 : 1], I = xd[2];
  DataType t = compute_dtype(as<TensorSI>(arg[0]->sinfo)->dtype);
  if (!t.is_float()) return std::nullopt;
  auto ld = [&](const Buffer& buf, Index i) { return cast(t, load(buf, std::move(i))); };
  auto cl = [&](const TExpr& v) { return cell.clipped(v, t); };
  // Optional inputs of a program: null when the op has none.
  auto maybe = [&](ProgramBuilder& pb, size_t k, const char* name) -> Buffer {
    return arg[k] ? pb.input(arg[k], name) : nullptr;
  };
  // A row's sequence length, clamped to [0, S] (S as program `pb` has it).
  auto length = [&](ProgramBuilder& pb, const Buffer& L, const TExpr& b) {
    TExpr s = idx(pb.sym(S));
    return L ? max_(min_(as_index(load(L, {b})), s), idx(0)) : s;
  };
  // The position step t reads and writes in row b.
  auto position = [&](ProgramBuilder& pb, int d, const TExpr& len, const TExpr& tt) {
    TExpr pos = cell.reverse(d) ? len - idx(1) - tt : tt;
    return max_(min_(pos, idx(pb.sym(S)) - idx(1)), idx(0));
  };
  StructInfo state_si = tensor_si(t, {N, SymExpr(H)});
  // Loops over (row, unit) whose iterations are independent, marked so that
  // the GPU schedule spreads both over threads; `acc` is each iteration's own.
  Local acc = local("acc", t);
  auto spread = [&](ProgramBuilder& pb, const std::string& prefix, const SymExpr& units,
                    const std::function<Stmt(TExpr, TExpr)>& fn) {
    SymExpr bv = SymExpr::var(prefix + "b"), uv = SymExpr::var(prefix + "u");
    Stmt inner = with_locals({acc}, fn(idx(bv), idx(uv)));
    return tir::make_for(bv, pb.dim(N), LoopKind::Parallel, tir::make_for(uv, units, LoopKind::Parallel, inner));
  };
  std::vector<Expr> ys, hs, cs;
  for (int d = 0; d < cell.dirs; ++d) {
    std::string sfx = "_d" + std::to_string(d);
    Act f = cell.f(d), g = cell.g(d), h = cell.h(d);
    // project
    Expr gx;
    {
      ProgramBuilder pb(ctx, op + "_project");
      Buffer X = pb.input(arg[0], "X"), W = pb.input(arg[1], "W"), B = maybe(pb, 3, "B");
      Buffer out = pb.output(tensor_si(t, {S, N, SymExpr(G * H)}), "gx");
      if (!X || !W || !out) return std::nullopt;
      Stmt body = compute_reduce(
          out, {pb.dim(I)}, sum_reducer(t),
          [&](const Index& i, const Index& r) {
            Index xi = cell.batch_first ? Index{i[1], i[0], r[0]} : Index{i[0], i[1], r[0]};
            return ld(W, {idx(d), i[2], r[0]}) * ld(X, xi);
          },
          [&](const Index& i, const TExpr& acc) {
            if (!B) return acc;
            TExpr rb = ld(B, {idx(d), i[2] + idx(G * H)});
            if (cell.is_gru) rb = select(lt(i[2], idx(2 * H)), rb, zero(t));
            return acc + ld(B, {idx(d), i[2]}) + rb;
          });
      gx = ctx.emit(pb.finish(body), op + "_gx" + sfx);
    }
    // init
    std::vector<Expr> init;
    for (int k = 0; k < (cell.is_lstm ? 2 : 1); ++k) {
      ProgramBuilder pb(ctx, op + "_init");
      Buffer from = maybe(pb, k == 0 ? 5 : 6, "init");
      Buffer out = pb.output(state_si, "state");
      if (!out) return std::nullopt;
      Stmt body = compute(out, [&](const Index& i) {
        if (!from) return zero(t);
        return ld(from, cell.batch_first ? Index{i[0], idx(d), i[1]} : Index{idx(d), i[0], i[1]});
      });
      init.push_back(ctx.emit(pb.finish(body), op + (k == 0 ? "_h0" : "_c0") + sfx));
    }
    // the step
    Var iv = make_var("t", tensor_si(DataType::i64(), {})), cv = make_var("cond", tensor_si(DataType::boolean(), {}));
    Var hv = make_var("h", state_si), cvar = make_var("c", state_si);
    std::vector<Binding> step;
    auto bind = [&](const Expr& value, const std::string& name) {
      ensure_struct_info(value, InferContext{ctx.analyzer(), &ctx.module()});
      Var v = make_var(name, value->sinfo);
      step.push_back(Binding{v, value, nullptr});
      return v;
    };
    Expr gates, rh;  // rh: GRU's R h + Rb of the candidate row, with linear_before_reset
    {
      ProgramBuilder pb(ctx, op + "_gates");
      Buffer GX = pb.input(gx, "gx"), T = pb.input(iv, "t"), Hs = pb.input(hv, "h"), R = pb.input(arg[2], "R");
      Buffer L = maybe(pb, 4, "seq_lens"), B = cell.lbr ? maybe(pb, 3, "B") : nullptr;
      Buffer out = pb.output(tensor_si(t, {N, SymExpr(G * H)}), "gates");
      Buffer rhb = cell.lbr ? pb.output(state_si, "rh") : nullptr;
      if (!GX || !T || !Hs || !R || !out || (cell.lbr && !rhb)) return std::nullopt;
      auto dot = [&](const TExpr& b, const TExpr& row) {
        return accumulate(
            acc, {SymExpr(H)}, [&](const Index& k) { return ld(R, {idx(d), row, k[0]}) * load(Hs, {b, k[0]}); },
            [](const TExpr& a, const TExpr& v) { return a + v; }, "k");
      };
      Stmt main = spread(pb, "g", SymExpr(G * H), [&](TExpr b, TExpr q) {
        TExpr pos = position(pb, d, length(pb, L, b), load(T, {}));
        std::vector<Stmt> st{acc.set(load(GX, {pos, b, q}))};
        Stmt rec = dot(b, q);
        st.push_back(cell.is_gru ? tir::make_if(lt(q, idx(2 * H)), rec) : rec);
        st.push_back(tir::make_store(out, {b, q}, acc.get()));
        return tir::make_seq(st);
      });
      std::vector<Stmt> body{main};
      if (rhb)
        body.push_back(spread(pb, "r", SymExpr(H), [&](TExpr b, TExpr u) {
          TExpr j = u + idx(2 * H);
          return tir::make_seq({acc.set(B ? ld(B, {idx(d), j + idx(G * H)}) : zero(t)), dot(b, j),
                                tir::make_store(rhb, {b, u}, acc.get())});
        }));
      Var r = bind(pb.finish(tir::make_seq(body)), "gates");
      if (rhb) {
        gates = bind(make_tuple_get_item(r, 0), "gates_x");
        rh = bind(make_tuple_get_item(r, 1), "rh");
      } else {
        gates = r;
      }
    }
    Expr h2, c2, y;
    {
      ProgramBuilder pb(ctx, op + "_update");
      Buffer Gs = pb.input(gates, "gates"), T = pb.input(iv, "t"), Hs = pb.input(hv, "h");
      Buffer Cs = cell.is_lstm ? pb.input(cvar, "c") : nullptr, RH = rh ? pb.input(rh, "rh") : nullptr;
      Buffer L = maybe(pb, 4, "seq_lens"), P = cell.is_lstm ? maybe(pb, 7, "P") : nullptr;
      bool cand_dot = cell.is_gru && !cell.lbr;
      Buffer R = cand_dot ? pb.input(arg[2], "R") : nullptr, B = cand_dot ? maybe(pb, 3, "B") : nullptr;
      Buffer ho = pb.output(state_si, "h_next"), co = cell.is_lstm ? pb.output(state_si, "c_next") : nullptr;
      Buffer yo = pb.output(state_si, "y");
      if (!Gs || !T || !Hs || !ho || !yo || (cell.is_lstm && (!Cs || !co)) || (cand_dot && !R)) return std::nullopt;
      Stmt body = spread(pb, "u", SymExpr(H), [&](TExpr b, TExpr j) {
        TExpr active = lt(load(T, {}), length(pb, L, b));
        auto gate = [&](int k) { return load(Gs, {b, j + idx(k * H)}); };
        std::vector<Stmt> st;
        TExpr hn, cn;
        if (cell.G == 1) {
          hn = f(cl(gate(0)));
        } else if (cell.is_lstm) {
          TExpr cp = load(Cs, {b, j});
          auto peep = [&](int k) { return P ? ld(P, {idx(d), j + idx(k * H)}) : zero(t); };
          TExpr ig = f(cl(gate(0) + peep(0) * cp));
          TExpr fg = cell.input_forget ? one(t) - ig : f(cl(gate(2) + peep(2) * cp));
          cn = fg * cp + ig * g(cl(gate(3)));
          hn = f(cl(gate(1) + peep(1) * cn)) * h(cn);
        } else {
          TExpr z = f(cl(gate(0)));
          TExpr pre;
          if (cell.lbr) {
            pre = gate(2) + f(cl(gate(1))) * load(RH, {b, j});
          } else {
            // R[2H + j] . (r * h) + Rb[2H + j], r of every unit.
            st.push_back(acc.set(B ? ld(B, {idx(d), j + idx(2 * H + G * H)}) : zero(t)));
            st.push_back(accumulate(
                acc, {SymExpr(H)},
                [&](const Index& k) {
                  return ld(R, {idx(d), j + idx(2 * H), k[0]}) * f(cl(load(Gs, {b, k[0] + idx(H)}))) *
                         load(Hs, {b, k[0]});
                },
                [](const TExpr& a, const TExpr& v) { return a + v; }, "k"));
            pre = gate(2) + acc.get();
          }
          hn = (one(t) - z) * g(cl(pre)) + z * load(Hs, {b, j});
        }
        st.push_back(tir::make_store(ho, {b, j}, select(active, hn, load(Hs, {b, j}))));
        if (co) st.push_back(tir::make_store(co, {b, j}, select(active, cn, load(Cs, {b, j}))));
        st.push_back(tir::make_store(yo, {b, j}, select(active, hn, zero(t))));
        return tir::make_seq(st);
      });
      Var r = bind(pb.finish(body), "step");
      h2 = bind(make_tuple_get_item(r, 0), "h_next");
      if (cell.is_lstm) c2 = bind(make_tuple_get_item(r, 1), "c_next");
      y = bind(make_tuple_get_item(r, cell.is_lstm ? 2 : 1), "y");
    }
    std::vector<Var> params{iv, cv, hv};
    std::vector<Expr> results{cv, h2};
    if (cell.is_lstm) {
      params.push_back(cvar);
      results.push_back(c2);
    }
    results.push_back(y);
    Expr ret = make_tuple(results);
    SeqExpr seq = make_seq({BindingBlock{false, std::move(step)}}, ret);
    ensure_struct_info(seq, InferContext{ctx.analyzer(), &ctx.module()});
    Expr fn = ctx.emit(make_function(params, seq, seq->sinfo), op + "_step" + sfx);
    Expr loop = ctx.emit(make_op_call("loop", {fn, make_prim_int(S), make_prim_bool(true), make_tuple(init)}),
                         op + "_loop" + sfx);
    hs.push_back(ctx.emit(make_tuple_get_item(loop, 0), op + "_h" + sfx));
    if (cell.is_lstm) cs.push_back(ctx.emit(make_tuple_get_item(loop, 1), op + "_c" + sfx));
    ys.push_back(ctx.emit(make_tuple_get_item(loop, cell.is_lstm ? 2 : 1), op + "_ys" + sfx));
  }
  // assemble
  ProgramBuilder pb(ctx, op + "_assemble");
  std::vector<Buffer> Ys, Hf, Cf;
  for (int d = 0; d < cell.dirs; ++d) {
    Ys.push_back(pb.input(ys[size_t(d)], "ys"));
    Hf.push_back(pb.input(hs[size_t(d)], "h"));
    if (cell.is_lstm) Cf.push_back(pb.input(cs[size_t(d)], "c"));
  }
  Buffer L = maybe(pb, 4, "seq_lens");
  Buffer Y = pb.output(tup->fields[0], "Y"), Yh = pb.output(tup->fields[1], "Y_h");
  Buffer Yc = cell.is_lstm ? pb.output(tup->fields[2], "Y_c") : nullptr;
  for (const Buffer& b : Ys)
    if (!b) return std::nullopt;
  if (!Y || !Yh || (cell.is_lstm && !Yc)) return std::nullopt;
  // One value per direction, chosen by the direction index.
  auto by_dir = [&](const TExpr& dv, const std::function<TExpr(int)>& v) {
    TExpr out = v(cell.dirs - 1);
    for (int d = cell.dirs - 2; d >= 0; --d) out = select(eq(dv, idx(d)), v(d), out);
    return out;
  };
  std::vector<Stmt> body;
  body.push_back(compute(Y, [&](const Index& i) {
    TExpr s = cell.batch_first ? i[1] : i[0], dv = cell.batch_first ? i[2] : i[1];
    TExpr b = cell.batch_first ? i[0] : i[2], j = i[3];
    TExpr len = length(pb, L, b);
    TExpr v = by_dir(dv, [&](int d) { return load(Ys[size_t(d)], {position(pb, d, len, s), b, j}); });
    return cast(Y->dtype, select(lt(s, len), v, zero(t)));
  }));
  auto finals = [&](const Buffer& out, const std::vector<Buffer>& from) {
    return compute(out, [&](const Index& i) {
      TExpr dv = cell.batch_first ? i[1] : i[0], b = cell.batch_first ? i[0] : i[1];
      return cast(out->dtype, by_dir(dv, [&](int d) { return load(from[size_t(d)], {b, i[2]}); }));
    });
  };
  body.push_back(finals(Yh, Hf));
  if (Yc) body.push_back(finals(Yc, Cf));
  return pb.finish(tir::make_seq(body));
}

}  // namespace

void register_recurrent_legalizers(LegalizerRegistry& reg) {
  reg.add("rnn", legalize_recurrent);
  reg.add("gru", legalize_recurrent);
  reg.add("lstm", legalize_recurrent);
}

}  // namespace relax
