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

// The recurrences on a host target as one program (the file's head).
class HostRecurrence {
 public:
  HostRecurrence(LegalizeContext& ctx, const CallNode& call, const Cell& cell)
      : ctx_(ctx), call_(call), cell_(cell), op_(ops::op_name(call)) {}

  std::optional<Expr> legalize() {
    if (!project_inputs()) return ctx_.decline("W or R has no known shape");
    ProgramBuilder pb(ctx_, op_);
    if (std::optional<std::string> why = bind(pb)) return ctx_.decline(*why);
    std::vector<Stmt> dir_bodies;
    for (int d = 0; d < cell_.dirs; ++d) dir_bodies.push_back(direction(d));
    Stmt body = tir::make_seq(dir_bodies);
    std::vector<Buffer> state{hs_, gs_};
    if (cell_.is_lstm) state.push_back(cs_);
    if (cell_.is_gru) state.push_back(tmp_);
    if (!GX_.empty()) state.push_back(rsum_);
    for (const Buffer& buf : state) body = tir::make_allocate(buf, body);
    return pb.finish(body);
  }

 private:
  // The input projection of every step at once, before the recurrence: per
  // direction d, gx_d[.., .., q] = X[.., .., :] . W[d, q, :] as one BLAS
  // product with W[d] transposed (a weight-only program, folded at build
  // time when W is constant), so the time loop adds only R h. f32 with
  // host kernels only; false when W or R cannot be transposed.
  bool project_inputs() {
    const auto* xs = as<TensorSI>(call_.args[0]->sinfo);
    const auto* wsi = call_.args.size() >= 3 ? as<TensorSI>(call_.args[1]->sinfo) : nullptr;
    const auto* rsi = call_.args.size() >= 3 ? as<TensorSI>(call_.args[2]->sinfo) : nullptr;
    if (!ctx_.libraries() || !rsi || rsi->dtype != DataType::f32() || !xs || !wsi || !xs->shape || !wsi->shape ||
        xs->shape->size() != 3 || wsi->shape->size() != 3 || xs->dtype != DataType::f32() ||
        wsi->dtype != DataType::f32() || !(*wsi->shape)[1].is_const())
      return true;
    const SymExpr GH = (*wsi->shape)[1];
    if (!ctx_.module().extern_decl("blas.matmul")) ctx_.module().add_extern("blas.matmul");
    // M[d] (G * H, cols) transposed, as a program of its own; nullopt if its shape is unknown.
    auto transposed = [&](const Expr& m, const char* in, int d, const std::string& name) -> std::optional<Expr> {
      ProgramBuilder tp(ctx_, op_ + "_" + name);
      Buffer M = tp.input(m, in);
      Buffer Mt = M ? tp.output(tensor_si(DataType::f32(), {M->shape[2], GH}), name) : nullptr;
      if (!Mt) return std::nullopt;
      return ctx_.emit(tp.finish(compute(Mt,
                                         [&](const Index& i) {
                                           return load(M, {idx(d), i[1], i[0]});
                                         })),
                       op_ + "_" + name + std::to_string(d));
    };
    for (int d = 0; d < cell_.dirs; ++d) {
      std::optional<Expr> wt = transposed(call_.args[1], "W", d, "wt"), r = transposed(call_.args[2], "R", d, "rt");
      if (!wt || !r) return false;
      rt_.push_back(*r);
      StructInfo gsi = tensor_si(DataType::f32(), {(*xs->shape)[0], (*xs->shape)[1], GH});
      Expr mm = make_op_call("call_library", {make_string("blas.matmul"), make_tuple({call_.args[0], *wt})}, {}, {gsi});
      mm->sinfo = gsi;
      gx_.push_back(ctx_.emit(mm, op_ + "_gx" + std::to_string(d)));
    }
    return true;
  }

  // The program's buffers and sizes; why not, when one is not known.
  std::optional<std::string> bind(ProgramBuilder& pb) {
    static const char* kNames[] = {"X", "W", "R", "B", "seq_lens", "init_h", "init_c", "P"};
    std::vector<Buffer> in(8);
    for (size_t k = 0; k < call_.args.size() && k < 8; ++k) {
      if (!gx_.empty() && (k == 1 || k == 2)) continue;  // W and R: read as gx and rt
      in[k] = pb.input(call_.args[k], kNames[k]);
      if (!in[k]) return std::string(kNames[k]) + " has no known shape";
    }
    const auto* tup = as<TupleSI>(call_.sinfo);
    if (!tup) return "the result is not a tuple";
    std::vector<Buffer> out;
    static const char* kOut[] = {"Y", "Y_h", "Y_c"};
    for (size_t k = 0; k < tup->fields.size() && k < 3; ++k) {
      out.push_back(pb.output(tup->fields[k], kOut[k]));
      if (!out.back()) return std::string(kOut[k]) + " has no known shape";
    }
    for (size_t d = 0; d < gx_.size(); ++d) {
      GX_.push_back(pb.input(gx_[d], "gx" + std::to_string(d)));
      RT_.push_back(pb.input(rt_[d], "rt" + std::to_string(d)));
      if (!GX_.back() || !RT_.back()) return "the projected inputs have no known shape";
    }
    X_ = in[0], W_ = in[1], R_ = in[2], B_ = in[3], L_ = in[4], H0_ = in[5], C0_ = in[6], P_ = in[7];
    Y_ = out[0], Yh_ = out[1], Yc_ = cell_.is_lstm ? out[2] : nullptr;
    const auto* rsi = as<TensorSI>(call_.args[2]->sinfo);
    if (!rsi || !rsi->shape || rsi->shape->size() != 3 || !(*rsi->shape)[2].is_const())
      return "hidden_size is not a constant";
    H_ = (*rsi->shape)[2].const_value();
    bool bf = cell_.batch_first;
    S_ = X_->shape[bf ? 1 : 0], N_ = X_->shape[bf ? 0 : 1], I_ = X_->shape[2];
    t_ = compute_dtype(X_->dtype);
    if (!t_.is_float()) return "X is not a float tensor";
    // The state of each batch row (hidden, cell, gates, GRU's reset product):
    // the program's workspace, one row per batch entry, shared by the
    // directions, which run one after the other.
    const int64_t G = cell_.G, H = H_;
    hs_ = tir::make_buffer("h_state", t_, {N_, SymExpr(H)});
    cs_ = tir::make_buffer("c_state", t_, {N_, SymExpr(H)});
    gs_ = tir::make_buffer("gates", t_, {N_, SymExpr(G * H)});
    tmp_ = tir::make_buffer("reset_h", t_, {N_, SymExpr(H)});
    rsum_ = tir::make_buffer("rec", t_, {N_, SymExpr(G * H)});  // the projected form's R h + Rb
    return std::nullopt;
  }

  // One direction's loop over the batch rows, each stepping through time.
  struct Dir {
    int d;
    std::string sfx;
    Act f, g, h;
    TExpr b, len, tc;  // the row; its length; the position step t reads and writes
    Local acc;
  };

  Stmt direction(int d) {
    Dir r{d, std::to_string(d), cell_.f(d), cell_.g(d), cell_.h(d), nullptr, nullptr, nullptr, {}};
    LoopKind par = N_.is_const() && N_.const_value() <= 1 ? LoopKind::Serial : LoopKind::Parallel;
    SymExpr bv = SymExpr::var("b" + r.sfx);
    r.b = idx(bv);
    r.acc = local("acc" + r.sfx, t_);
    r.len = L_ ? max_(min_(as_index(load(L_, {r.b})), idx(S_)), idx(0)) : idx(S_);
    Stmt init = j_loop(r, "j0_", H_, [&](const TExpr& j) {
      Stmt s1 = tir::make_store(hs_, {r.b, j}, H0_ ? ld(H0_, si(d, r.b, j)) : zero(t_));
      Stmt s2 = tir::make_store(cs_, {r.b, j}, C0_ ? ld(C0_, si(d, r.b, j)) : zero(t_));
      return cell_.is_lstm ? tir::make_seq({s1, s2}) : s1;
    });
    SymExpr tv = SymExpr::var("t" + r.sfx);
    TExpr tt = idx(tv);
    TExpr pos = cell_.reverse(d) ? r.len - idx(1) - tt : tt;
    r.tc = max_(min_(pos, idx(S_) - idx(1)), idx(0));
    std::vector<Stmt> step{GX_.empty() ? gates_direct(r) : gates_projected(r)};
    if (cell_.G == 1)
      update_rnn(r, step);
    else if (cell_.is_lstm)
      update_lstm(r, step);
    else
      update_gru(r, step);
    Stmt pad = j_loop(r, "j3_", H_, [&](const TExpr& j) {
      return tir::make_store(Y_, yi(max_(min_(tt, idx(S_) - idx(1)), idx(0)), d, r.b, j), zero(Y_->dtype));
    });
    Stmt time = tir::make_for(tv, S_, LoopKind::Serial, tir::make_if(lt(tt, r.len), tir::make_seq(step), pad));
    Stmt fin = j_loop(r, "j4_", H_, [&](const TExpr& j) {
      Stmt s1 = tir::make_store(Yh_, si(d, r.b, j), cast(Yh_->dtype, load(hs_, {r.b, j})));
      if (!Yc_) return s1;
      return tir::make_seq({s1, tir::make_store(Yc_, si(d, r.b, j), cast(Yc_->dtype, load(cs_, {r.b, j})))});
    });
    Stmt all = tir::make_seq({tir::make_seq(std::vector<Stmt>{init}), time, fin});
    return tir::make_for(bv, N_, par, with_locals({r.acc}, all));
  }

  // Gate pre-activations g[q] = W x + Wb (+ R h + Rb where the cell wants it here).
  Stmt gates_direct(const Dir& r) const {
    const int64_t H = H_;
    return j_loop(r, "q", cell_.G * H, [&](const TExpr& q) {
      std::vector<Stmt> s;
      s.push_back(r.acc.set(bias(r, q)));
      s.push_back(dot(r, W_, q, I_, "kx", [&](const TExpr& k) { return ld(X_, xi(r.tc, r.b, k)); }));
      s.push_back(tir::make_store(gs_, {r.b, q}, r.acc.get()));
      Stmt rec = tir::make_seq({r.acc.set(rbias(r, q)), dot(r, R_, q, SymExpr(H), "kh", [&](const TExpr& k) {
                                  return load(hs_, {r.b, k});
                                })});
      Stmt add = tir::make_store(gs_, {r.b, q}, load(gs_, {r.b, q}) + r.acc.get());
      if (!cell_.is_gru) {
        s.push_back(rec);
        s.push_back(add);
      } else if (cell_.lbr) {
        // z, r: add R h + Rb; the h block keeps R h + Rb apart in tmp.
        s.push_back(rec);
        s.push_back(tir::make_if(lt(q, idx(2 * H)), add,
                                 tir::make_store(tmp_, {r.b, max_(q - idx(2 * H), idx(0))}, r.acc.get())));
      } else {
        s.push_back(tir::make_if(lt(q, idx(2 * H)), tir::make_seq({rec, add})));
      }
      return tir::make_seq(s);
    });
  }

  // The projected form: rsum[b, q0 + q] = Rb + sum_k R[q0 + q, k] src[b, k]
  // for q < nq, k in order, as H steps each adding one column of R (a row
  // of rt, contiguous) times src[b, k] to every row's sum: a vector loop,
  // where a dot product per row is a serial chain.
  Stmt rows_of(const Dir& r, int64_t q0, int64_t nq, const Buffer& src, const std::string& name) const {
    SymExpr kv = SymExpr::var(name + "k" + r.sfx), qv = SymExpr::var(name + "q" + r.sfx);
    TExpr k = idx(kv), q = idx(qv) + idx(q0);
    const Buffer& rt = RT_[size_t(r.d)];
    Stmt step = tir::make_store(rsum_, {r.b, q}, load(rsum_, {r.b, q}) + load(rt, {k, q}) * load(src, {r.b, k}));
    return tir::make_seq(
        {j_loop(r, name + "i", nq,
                [&](const TExpr& j) {
                  return tir::make_store(rsum_, {r.b, j + idx(q0)}, rbias(r, j + idx(q0)));
                }),
         tir::make_for(kv, SymExpr(H_), LoopKind::Serial, tir::make_for(qv, SymExpr(nq), LoopKind::Vectorized, step))});
  }

  // Gate pre-activations gs = (Wx + Wb) + (R h + Rb) where the cell adds them here.
  Stmt gates_projected(const Dir& r) const {
    const int64_t H = H_, G = cell_.G;
    const bool is_gru = cell_.is_gru;
    const int64_t with_rec = is_gru && !cell_.lbr ? 2 * H : G * H;
    Stmt sums = rows_of(r, 0, with_rec, hs_, "r");
    Stmt gates = tir::make_seq({sums, j_loop(r, "q", G * H, [&](const TExpr& q) {
                                  TExpr pre = bias(r, q) + load(GX_[size_t(r.d)], xi(r.tc, r.b, q));
                                  Stmt plain = tir::make_store(gs_, {r.b, q}, pre);
                                  Stmt added = tir::make_store(gs_, {r.b, q}, pre + load(rsum_, {r.b, q}));
                                  if (!is_gru) return added;
                                  return tir::make_if(lt(q, idx(2 * H)), added, plain);
                                })});
    if (is_gru && cell_.lbr)  // the h block's R h + Rb stays apart, in tmp
      gates = tir::make_seq({gates, j_loop(r, "jt_", H, [&](const TExpr& j) {
                               return tir::make_store(tmp_, {r.b, j}, load(rsum_, {r.b, j + idx(2 * H)}));
                             })});
    return gates;
  }

  // The new state and output of each unit j.
  void update_rnn(const Dir& r, std::vector<Stmt>& step) const {
    step.push_back(j_loop(r, "j1_", H_, [&](const TExpr& j) {
      TExpr hn = r.f(cl(load(gs_, {r.b, j})));
      return tir::make_seq(
          {tir::make_store(hs_, {r.b, j}, hn), tir::make_store(Y_, yi(r.tc, r.d, r.b, j), cast(Y_->dtype, hn))});
    }));
  }

  void update_lstm(const Dir& r, std::vector<Stmt>& step) const {
    const int64_t H = H_;
    step.push_back(j_loop(r, "j1_", H, [&](const TExpr& j) {
      TExpr cp = load(cs_, {r.b, j});
      auto peep = [&](int k) { return P_ ? ld(P_, {idx(r.d), j + idx(k * H)}) : zero(t_); };
      TExpr ig = r.f(cl(load(gs_, {r.b, j}) + peep(0) * cp));
      TExpr fg = cell_.input_forget ? one(t_) - ig : r.f(cl(load(gs_, {r.b, j + idx(2 * H)}) + peep(2) * cp));
      TExpr cand = r.g(cl(load(gs_, {r.b, j + idx(3 * H)})));
      Stmt c_new = tir::make_store(cs_, {r.b, j}, fg * cp + ig * cand);
      TExpr cn = load(cs_, {r.b, j});
      TExpr og = r.f(cl(load(gs_, {r.b, j + idx(H)}) + peep(1) * cn));
      TExpr hn = og * r.h(cn);
      return tir::make_seq(
          {c_new, tir::make_store(hs_, {r.b, j}, hn), tir::make_store(Y_, yi(r.tc, r.d, r.b, j), cast(Y_->dtype, hn))});
    }));
  }

  // GRU: r first (r * h into tmp unless linear_before_reset), then each unit.
  void update_gru(const Dir& r, std::vector<Stmt>& step) const {
    const int64_t H = H_;
    const bool lbr = cell_.lbr;
    if (!lbr)
      step.push_back(j_loop(r, "j1_", H, [&](const TExpr& k) {
        return tir::make_store(tmp_, {r.b, k}, r.f(cl(load(gs_, {r.b, k + idx(H)}))) * load(hs_, {r.b, k}));
      }));
    if (!lbr && !GX_.empty()) step.push_back(rows_of(r, 2 * H, H, tmp_, "c"));
    step.push_back(j_loop(r, "j2_", H, [&](const TExpr& j) {
      std::vector<Stmt> s;
      TExpr pre;
      if (lbr) {
        TExpr reset = r.f(cl(load(gs_, {r.b, j + idx(H)})));
        pre = load(gs_, {r.b, j + idx(2 * H)}) + reset * load(tmp_, {r.b, j});
      } else if (!GX_.empty()) {
        pre = load(gs_, {r.b, j + idx(2 * H)}) + load(rsum_, {r.b, j + idx(2 * H)});
      } else {
        s.push_back(r.acc.set(rbias(r, j + idx(2 * H))));
        s.push_back(dot(r, R_, j + idx(2 * H), SymExpr(H), "kr", [&](const TExpr& k) { return load(tmp_, {r.b, k}); }));
        pre = load(gs_, {r.b, j + idx(2 * H)}) + r.acc.get();
      }
      TExpr cand = r.g(cl(pre));
      TExpr z = r.f(cl(load(gs_, {r.b, j})));
      TExpr hn = (one(t_) - z) * cand + z * load(hs_, {r.b, j});
      s.push_back(tir::make_store(hs_, {r.b, j}, hn));
      s.push_back(tir::make_store(Y_, yi(r.tc, r.d, r.b, j), cast(Y_->dtype, load(hs_, {r.b, j}))));
      return tir::make_seq(s);
    }));
  }

  // A serial loop over `ext` named name + the direction.
  Stmt j_loop(const Dir& r, const std::string& name, int64_t ext, const std::function<Stmt(const TExpr&)>& fn) const {
    SymExpr v = SymExpr::var(name + r.sfx);
    return tir::make_for(v, ext, LoopKind::Serial, fn(idx(v)));
  }
  // acc += sum_k M[d, row, k] * v(k) over `extent`.
  Stmt dot(const Dir& r, const Buffer& M, const TExpr& row, const SymExpr& extent, const std::string& name,
           const std::function<TExpr(const TExpr&)>& v) const {
    SymExpr kv = SymExpr::var(name + r.sfx);
    TExpr k = idx(kv);
    return tir::make_for(kv, extent, LoopKind::Serial, r.acc.set(r.acc.get() + ld(M, {idx(r.d), row, k}) * v(k)));
  }
  TExpr bias(const Dir& r, const TExpr& q) const { return B_ ? ld(B_, {idx(r.d), q}) : zero(t_); }
  TExpr rbias(const Dir& r, const TExpr& q) const { return B_ ? ld(B_, {idx(r.d), q + idx(cell_.G * H_)}) : zero(t_); }
  TExpr ld(const Buffer& buf, Index i) const { return cast(t_, load(buf, std::move(i))); }
  TExpr cl(const TExpr& v) const { return cell_.clipped(v, t_); }
  // X's, Y's and the states' indices by the layout.
  Index xi(const TExpr& tt, const TExpr& b, const TExpr& k) const {
    return cell_.batch_first ? Index{b, tt, k} : Index{tt, b, k};
  }
  Index yi(const TExpr& tt, int d, const TExpr& b, const TExpr& j) const {
    return cell_.batch_first ? Index{b, tt, idx(d), j} : Index{tt, idx(d), b, j};
  }
  Index si(int d, const TExpr& b, const TExpr& j) const {
    return cell_.batch_first ? Index{b, idx(d), j} : Index{idx(d), b, j};
  }

  LegalizeContext& ctx_;
  const CallNode& call_;
  const Cell& cell_;
  const std::string op_;
  std::vector<Expr> gx_, rt_;  // the projected inputs; R[d] transposed, (H, G * H)
  std::vector<Buffer> GX_, RT_;
  Buffer X_, W_, R_, B_, L_, H0_, C0_, P_, Y_, Yh_, Yc_;
  Buffer hs_, cs_, gs_, tmp_, rsum_;
  int64_t H_ = 0;
  SymExpr S_, N_, I_;
  DataType t_;
};

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
class GpuRecurrence {
 public:
  GpuRecurrence(LegalizeContext& ctx, const CallNode& call, const Cell& cell)
      : ctx_(ctx), call_(call), cell_(cell), op_(ops::op_name(call)) {}

  std::optional<Expr> legalize() {
    const auto* tup = as<TupleSI>(call_.sinfo);
    if (!tup || tup->fields.size() < size_t(cell_.is_lstm ? 3 : 2))
      return ctx_.decline("the result is not a tuple of its outputs");
    size_t n = std::min<size_t>(call_.args.size(), 8);
    arg_.resize(8);
    for (size_t k = 0; k < n; ++k) {
      std::optional<Expr> e = ctx_.bind_tensor(call_.args[k], op_ + "_in");
      if (!e) return ctx_.decline("operand " + std::to_string(k) + " has no known rank");
      arg_[k] = *e;
    }
    auto dims = [](const Expr& e) { return *as<TensorSI>(e->sinfo)->shape; };
    std::vector<SymExpr> xd = dims(arg_[0]), rd = dims(arg_[2]);
    if (!rd[2].is_const()) return ctx_.decline("hidden_size is not a constant");
    H_ = rd[2].const_value();
    S_ = xd[cell_.batch_first ? 1 : 0], N_ = xd[cell_.batch_first ? 0 : 1], I_ = xd[2];
    t_ = compute_dtype(as<TensorSI>(arg_[0]->sinfo)->dtype);
    if (!t_.is_float()) return ctx_.decline("X is not a float tensor");
    state_si_ = tensor_si(t_, {N_, SymExpr(H_)});
    acc_ = local("acc", t_);
    std::vector<Expr> ys, hs, cs;
    for (int d = 0; d < cell_.dirs; ++d) {
      std::string sfx = "_d" + std::to_string(d);
      std::optional<Expr> gx = project(d, sfx);
      std::optional<std::vector<Expr>> init = gx ? initial_state(d, sfx) : std::nullopt;
      std::optional<Expr> fn = init ? step_function(d, *gx) : std::nullopt;
      if (!fn) return ctx_.decline("a step's operands have no known shape");
      Expr step = ctx_.emit(*fn, op_ + "_step" + sfx);
      Expr loop = ctx_.emit(make_op_call("loop", {step, make_prim_int(S_), make_prim_bool(true), make_tuple(*init)}),
                            op_ + "_loop" + sfx);
      hs.push_back(ctx_.emit(make_tuple_get_item(loop, 0), op_ + "_h" + sfx));
      if (cell_.is_lstm) cs.push_back(ctx_.emit(make_tuple_get_item(loop, 1), op_ + "_c" + sfx));
      ys.push_back(ctx_.emit(make_tuple_get_item(loop, cell_.is_lstm ? 2 : 1), op_ + "_ys" + sfx));
    }
    return assemble(*tup, ys, hs, cs);
  }

 private:
  // project: gx[s, b, q] = W[d, q] . x[s, b] + Wb[d, q] (+ Rb[d, q]).
  std::optional<Expr> project(int d, const std::string& sfx) {
    const int64_t H = H_, G = cell_.G;
    ProgramBuilder pb(ctx_, op_ + "_project");
    Buffer X = pb.input(arg_[0], "X"), W = pb.input(arg_[1], "W"), B = maybe(pb, 3, "B");
    Buffer out = pb.output(tensor_si(t_, {S_, N_, SymExpr(G * H)}), "gx");
    if (!X || !W || !out) return std::nullopt;
    Stmt body = compute_reduce(
        out, {pb.dim(I_)}, sum_reducer(t_),
        [&](const Index& i, const Index& r) {
          Index xi = cell_.batch_first ? Index{i[1], i[0], r[0]} : Index{i[0], i[1], r[0]};
          return ld(W, {idx(d), i[2], r[0]}) * ld(X, xi);
        },
        [&](const Index& i, const TExpr& acc) {
          if (!B) return acc;
          TExpr rb = ld(B, {idx(d), i[2] + idx(G * H)});
          if (cell_.is_gru) rb = select(lt(i[2], idx(2 * H)), rb, zero(t_));
          return acc + ld(B, {idx(d), i[2]}) + rb;
        });
    return ctx_.emit(pb.finish(body), op_ + "_gx" + sfx);
  }

  // init: h0[b, j] (and c0) from init_h (init_c) or zeros.
  std::optional<std::vector<Expr>> initial_state(int d, const std::string& sfx) {
    std::vector<Expr> init;
    for (int k = 0; k < (cell_.is_lstm ? 2 : 1); ++k) {
      ProgramBuilder pb(ctx_, op_ + "_init");
      Buffer from = maybe(pb, k == 0 ? 5 : 6, "init");
      Buffer out = pb.output(state_si_, "state");
      if (!out) return std::nullopt;
      Stmt body = compute(out, [&](const Index& i) {
        if (!from) return zero(t_);
        return ld(from, cell_.batch_first ? Index{i[0], idx(d), i[1]} : Index{idx(d), i[0], i[1]});
      });
      init.push_back(ctx_.emit(pb.finish(body), op_ + (k == 0 ? "_h0" : "_c0") + sfx));
    }
    return init;
  }

  // The loop body's function (t, cond, h[, c]) -> (cond, h', [c',] y_t)
  // and the bindings it collects.
  struct Step {
    Var iv = make_var("t", tensor_si(DataType::i64(), {})), cv = make_var("cond", tensor_si(DataType::boolean(), {}));
    Var hv, cvar;
    std::vector<Binding> bindings;
    Expr gates, rh;  // rh: GRU's R h + Rb of the candidate row, with linear_before_reset
    Expr h2, c2, y;
  };
  Var bind(Step& st, const Expr& value, const std::string& name) {
    ensure_struct_info(value, InferContext{ctx_.analyzer(), &ctx_.module()});
    Var v = make_var(name, value->sinfo);
    st.bindings.push_back(Binding{v, value, nullptr});
    return v;
  }

  std::optional<Expr> step_function(int d, const Expr& gx) {
    Step st;
    st.hv = make_var("h", state_si_);
    st.cvar = make_var("c", state_si_);
    if (!gates(d, gx, st) || !update(d, st)) return std::nullopt;
    std::vector<Var> params{st.iv, st.cv, st.hv};
    std::vector<Expr> results{st.cv, st.h2};
    if (cell_.is_lstm) {
      params.push_back(st.cvar);
      results.push_back(st.c2);
    }
    results.push_back(st.y);
    Expr ret = make_tuple(results);
    SeqExpr seq = make_seq({BindingBlock{false, std::move(st.bindings)}}, ret);
    ensure_struct_info(seq, InferContext{ctx_.analyzer(), &ctx_.module()});
    return make_function(params, seq, seq->sinfo);
  }

  // gates: g[b, q] = gx[pos, b, q] + R[d, q] . h[b] (GRU's candidate row apart).
  bool gates(int d, const Expr& gx, Step& st) {
    const int64_t H = H_, G = cell_.G;
    ProgramBuilder pb(ctx_, op_ + "_gates");
    Buffer GX = pb.input(gx, "gx"), T = pb.input(st.iv, "t"), Hs = pb.input(st.hv, "h"), R = pb.input(arg_[2], "R");
    Buffer L = maybe(pb, 4, "seq_lens"), B = cell_.lbr ? maybe(pb, 3, "B") : nullptr;
    Buffer out = pb.output(tensor_si(t_, {N_, SymExpr(G * H)}), "gates");
    Buffer rhb = cell_.lbr ? pb.output(state_si_, "rh") : nullptr;
    if (!GX || !T || !Hs || !R || !out || (cell_.lbr && !rhb)) return false;
    auto dot = [&](const TExpr& b, const TExpr& row) {
      return accumulate(
          acc_, {SymExpr(H)},
          [&](const Index& k) {
            return ld(R, {idx(d), row, k[0]}) * load(Hs, {b, k[0]});
          },
          [](const TExpr& a, const TExpr& v) { return a + v; }, "k");
    };
    Stmt main = spread(pb, "g", SymExpr(G * H), [&](TExpr b, TExpr q) {
      TExpr pos = position(pb, d, length(pb, L, b), load(T, {}));
      std::vector<Stmt> s{acc_.set(load(GX, {pos, b, q}))};
      Stmt rec = dot(b, q);
      s.push_back(cell_.is_gru ? tir::make_if(lt(q, idx(2 * H)), rec) : rec);
      s.push_back(tir::make_store(out, {b, q}, acc_.get()));
      return tir::make_seq(s);
    });
    std::vector<Stmt> body{main};
    if (rhb)
      body.push_back(spread(pb, "r", SymExpr(H), [&](TExpr b, TExpr u) {
        TExpr j = u + idx(2 * H);
        return tir::make_seq({acc_.set(B ? ld(B, {idx(d), j + idx(G * H)}) : zero(t_)), dot(b, j),
                              tir::make_store(rhb, {b, u}, acc_.get())});
      }));
    Var r = bind(st, pb.finish(tir::make_seq(body)), "gates");
    if (rhb) {
      st.gates = bind(st, make_tuple_get_item(r, 0), "gates_x");
      st.rh = bind(st, make_tuple_get_item(r, 1), "rh");
    } else {
      st.gates = r;
    }
    return true;
  }

  // update: h', c' and y_t[b, j]; a row past its sequence length keeps its state.
  bool update(int d, Step& st) {
    const int64_t H = H_;
    ProgramBuilder pb(ctx_, op_ + "_update");
    Buffer Gs = pb.input(st.gates, "gates"), T = pb.input(st.iv, "t"), Hs = pb.input(st.hv, "h");
    Buffer Cs = cell_.is_lstm ? pb.input(st.cvar, "c") : nullptr, RH = st.rh ? pb.input(st.rh, "rh") : nullptr;
    Buffer L = maybe(pb, 4, "seq_lens"), P = cell_.is_lstm ? maybe(pb, 7, "P") : nullptr;
    bool cand_dot = cell_.is_gru && !cell_.lbr;
    Buffer R = cand_dot ? pb.input(arg_[2], "R") : nullptr, B = cand_dot ? maybe(pb, 3, "B") : nullptr;
    Buffer ho = pb.output(state_si_, "h_next"), co = cell_.is_lstm ? pb.output(state_si_, "c_next") : nullptr;
    Buffer yo = pb.output(state_si_, "y");
    if (!Gs || !T || !Hs || !ho || !yo || (cell_.is_lstm && (!Cs || !co)) || (cand_dot && !R)) return false;
    Act f = cell_.f(d), g = cell_.g(d), h = cell_.h(d);
    Stmt body = spread(pb, "u", SymExpr(H), [&](TExpr b, TExpr j) {
      TExpr active = lt(load(T, {}), length(pb, L, b));
      auto gate = [&](int k) { return load(Gs, {b, j + idx(k * H)}); };
      std::vector<Stmt> s;
      TExpr hn, cn;
      if (cell_.G == 1) {
        hn = f(cl(gate(0)));
      } else if (cell_.is_lstm) {
        TExpr cp = load(Cs, {b, j});
        auto peep = [&](int k) { return P ? ld(P, {idx(d), j + idx(k * H)}) : zero(t_); };
        TExpr ig = f(cl(gate(0) + peep(0) * cp));
        TExpr fg = cell_.input_forget ? one(t_) - ig : f(cl(gate(2) + peep(2) * cp));
        cn = fg * cp + ig * g(cl(gate(3)));
        hn = f(cl(gate(1) + peep(1) * cn)) * h(cn);
      } else {
        TExpr z = f(cl(gate(0)));
        TExpr pre;
        if (cell_.lbr) {
          pre = gate(2) + f(cl(gate(1))) * load(RH, {b, j});
        } else {
          // R[2H + j] . (r * h) + Rb[2H + j], r of every unit.
          s.push_back(acc_.set(B ? ld(B, {idx(d), j + idx(2 * H + cell_.G * H)}) : zero(t_)));
          s.push_back(accumulate(
              acc_, {SymExpr(H)},
              [&](const Index& k) {
                return ld(R, {idx(d), j + idx(2 * H), k[0]}) * f(cl(load(Gs, {b, k[0] + idx(H)}))) *
                       load(Hs, {b, k[0]});
              },
              [](const TExpr& a, const TExpr& v) { return a + v; }, "k"));
          pre = gate(2) + acc_.get();
        }
        hn = (one(t_) - z) * g(cl(pre)) + z * load(Hs, {b, j});
      }
      s.push_back(tir::make_store(ho, {b, j}, select(active, hn, load(Hs, {b, j}))));
      if (co) s.push_back(tir::make_store(co, {b, j}, select(active, cn, load(Cs, {b, j}))));
      s.push_back(tir::make_store(yo, {b, j}, select(active, hn, zero(t_))));
      return tir::make_seq(s);
    });
    Var r = bind(st, pb.finish(body), "step");
    st.h2 = bind(st, make_tuple_get_item(r, 0), "h_next");
    if (cell_.is_lstm) st.c2 = bind(st, make_tuple_get_item(r, 1), "c_next");
    st.y = bind(st, make_tuple_get_item(r, cell_.is_lstm ? 2 : 1), "y");
    return true;
  }

  // assemble: Y[s, d, b, j] = y_{pos}[b, j] for s < len_b (else 0), Y_h, Y_c.
  std::optional<Expr> assemble(const TupleSI& tup, const std::vector<Expr>& ys, const std::vector<Expr>& hs,
                               const std::vector<Expr>& cs) {
    ProgramBuilder pb(ctx_, op_ + "_assemble");
    std::vector<Buffer> Ys, Hf, Cf;
    for (int d = 0; d < cell_.dirs; ++d) {
      Ys.push_back(pb.input(ys[size_t(d)], "ys"));
      Hf.push_back(pb.input(hs[size_t(d)], "h"));
      if (cell_.is_lstm) Cf.push_back(pb.input(cs[size_t(d)], "c"));
    }
    Buffer L = maybe(pb, 4, "seq_lens");
    Buffer Y = pb.output(tup.fields[0], "Y"), Yh = pb.output(tup.fields[1], "Y_h");
    Buffer Yc = cell_.is_lstm ? pb.output(tup.fields[2], "Y_c") : nullptr;
    bool known = Y && Yh && (!cell_.is_lstm || Yc);
    for (const Buffer& b : Ys) known = known && b;
    if (!known) return ctx_.decline("an output has no known shape");
    // One value per direction, chosen by the direction index.
    auto by_dir = [&](const TExpr& dv, const std::function<TExpr(int)>& v) {
      TExpr out = v(cell_.dirs - 1);
      for (int d = cell_.dirs - 2; d >= 0; --d) out = select(eq(dv, idx(d)), v(d), out);
      return out;
    };
    const bool bf = cell_.batch_first;
    std::vector<Stmt> body;
    body.push_back(compute(Y, [&](const Index& i) {
      TExpr s = bf ? i[1] : i[0], dv = bf ? i[2] : i[1];
      TExpr b = bf ? i[0] : i[2], j = i[3];
      TExpr len = length(pb, L, b);
      TExpr v = by_dir(dv, [&](int d) { return load(Ys[size_t(d)], {position(pb, d, len, s), b, j}); });
      return cast(Y->dtype, select(lt(s, len), v, zero(t_)));
    }));
    auto finals = [&](const Buffer& out, const std::vector<Buffer>& from) {
      return compute(out, [&](const Index& i) {
        TExpr dv = bf ? i[1] : i[0], b = bf ? i[0] : i[1];
        return cast(out->dtype, by_dir(dv, [&](int d) { return load(from[size_t(d)], {b, i[2]}); }));
      });
    };
    body.push_back(finals(Yh, Hf));
    if (Yc) body.push_back(finals(Yc, Cf));
    return pb.finish(tir::make_seq(body));
  }

  TExpr ld(const Buffer& buf, Index i) const { return cast(t_, load(buf, std::move(i))); }
  TExpr cl(const TExpr& v) const { return cell_.clipped(v, t_); }
  // Optional inputs of a program: null when the op has none.
  Buffer maybe(ProgramBuilder& pb, size_t k, const char* name) const {
    return arg_[k] ? pb.input(arg_[k], name) : nullptr;
  }
  // A row's sequence length, clamped to [0, S] (S as program `pb` has it).
  TExpr length(ProgramBuilder& pb, const Buffer& L, const TExpr& b) const {
    TExpr s = idx(pb.sym(S_));
    return L ? max_(min_(as_index(load(L, {b})), s), idx(0)) : s;
  }
  // The position step t reads and writes in row b.
  TExpr position(ProgramBuilder& pb, int d, const TExpr& len, const TExpr& tt) const {
    TExpr pos = cell_.reverse(d) ? len - idx(1) - tt : tt;
    return max_(min_(pos, idx(pb.sym(S_)) - idx(1)), idx(0));
  }
  // Loops over (row, unit) whose iterations are independent, marked so
  // that the GPU schedule spreads both over threads; `acc_` is each
  // iteration's own.
  Stmt spread(ProgramBuilder& pb, const std::string& prefix, const SymExpr& units,
              const std::function<Stmt(TExpr, TExpr)>& fn) const {
    SymExpr bv = SymExpr::var(prefix + "b"), uv = SymExpr::var(prefix + "u");
    Stmt inner = with_locals({acc_}, fn(idx(bv), idx(uv)));
    return tir::make_for(bv, pb.dim(N_), LoopKind::Parallel, tir::make_for(uv, units, LoopKind::Parallel, inner));
  }

  LegalizeContext& ctx_;
  const CallNode& call_;
  const Cell& cell_;
  const std::string op_;
  std::vector<Expr> arg_;  // the operands with their shapes bound (null: absent)
  int64_t H_ = 0;
  SymExpr S_, N_, I_;
  DataType t_;
  StructInfo state_si_;
  Local acc_;
};

std::optional<Expr> legalize_recurrent(LegalizeContext& ctx, const CallNode& call) {
  std::optional<Cell> cell = cell_of(call);
  if (!cell) return ctx.decline("an activation this legaliser does not know");
  if (ctx.gpu()) return GpuRecurrence(ctx, call, *cell).legalize();
  return HostRecurrence(ctx, call, *cell).legalize();
}

}  // namespace

void register_recurrent_legalizers(LegalizerRegistry& reg) {
  reg.add("rnn", legalize_recurrent);
  reg.add("gru", legalize_recurrent);
  reg.add("lstm", legalize_recurrent);
}

}  // namespace relax
