// fold-matmul-views (cpu): a matrix product reads its operands through
// the transposes, reshapes and slices that made them, and writes its
// result through the transpose that follows it, in place, instead of
// each being copied by a kernel of its own. Attention as exporters write
// it,
//
//   qkv = add(matmul(x, w), bias)                      (B, S, 3 * H * D)
//   q = permute_dims(reshape(split(qkv)[0], (B, S, H, D)), [0, 2, 1, 3])
//   kt = permute_dims(reshape(split(qkv)[1], ...), [0, 2, 3, 1])
//   s = matmul(q, kt)
//   ...
//   o = permute_dims(matmul(p, v), [0, 2, 1, 3])       (B, S, H, D)
//   y = matmul(reshape(o, (B, S, H * D)), wo)
//
// becomes products of strided views of qkv and o:
//
//   s = call_library("blas.matmul_view", (qkv, qkv, shape(views...)))
//   o = call_library("blas.matmul_view", (p, qkv, shape(views...)))
//   y = call_library("blas.matmul_view", (o, wo, shape(views...)))
//
// (runtime/builtins_matmul.cc), and the transposes, reshapes and slices die
// (their other readers, if any, keep them). The bias add is then an
// elementwise kernel after a product alone, which fuse-library-epilogues
// moves into it.
//
// A view is a tensor's offset, dims and strides. It is followed through
// permute_dims; reshape, squeeze and expand_dims where each group of new
// dims splits one old dim or merges old dims that lie contiguously;
// split's parts; and strided_slice with positive strides. A product is
// rewritten when at least one operand or its result is a view that is
// not the tensor itself, each operand has a stride of 1 in one of its last
// two dims (BLAS reads it as stored or transposed) and the other at least
// the matrix's width (its leading dimension), and the result a stride of
// 1 in its last dim. The result is folded when a permute_dims is its only
// reader. f32 and f64 products of operands of rank 2 or more, known
// shapes, the cpu target only (the GPU targets' products are generated
// kernels that fusion joins with their neighbours).
#include <unordered_map>
#include <unordered_set>

#include "ir/target_traits.h"
#include "ir/mutator.h"
#include "ir/op.h"
#include "ir/ops/common.h"
#include "passes/analysis/graph_util.h"
#include "passes/passes.h"

namespace relax {
namespace {

constexpr const char* kMatmulView = "blas.matmul_view";

const TensorSI* tensor_of(const Expr& e) { return e && e->sinfo ? as<TensorSI>(e->sinfo) : nullptr; }

// Elements of `base` from `at`, dims and strides in elements.
struct View {
  Expr base;
  SymExpr at = 0;
  std::vector<SymExpr> dims, strides;
  bool moved = false;  // looked through at least one op
};

std::vector<SymExpr> contiguous_strides(const std::vector<SymExpr>& dims) {
  std::vector<SymExpr> s(dims.size(), SymExpr(1));
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

bool is_one(const SymExpr& e) { return e.is_const() && e.const_value() == 1; }

// The BLAS reads a rows x cols matrix at strides (sr, sc) as stored (sc
// 1, sr its leading dimension, at least cols) or transposed (sr 1, sc at
// least rows), as runtime/builtins_matmul.cc blas_layout does; `stored_only`
// for the result, which must be stored.
bool blas_readable(const Analyzer& ana, const SymExpr& rows, const SymExpr& cols, const SymExpr& sr, const SymExpr& sc,
                   bool stored_only) {
  if ((is_one(sc) || is_one(cols)) && (is_one(rows) || ana.can_prove_less_equal(cols, sr))) return true;
  if (stored_only) return false;
  return (is_one(sr) || is_one(rows)) && (is_one(cols) || ana.can_prove_less_equal(rows, sc));
}

class Folder : public ExprMutator {
 public:
  explicit Folder(const IRModule& mod) : ExprMutator(&mod) {}

  Function run(const Function& f) {
    values_.clear(), block_of_.clear(), uses_.clear(), out_folds_.clear(), held_.clear();
    visit_exprs(f->body, [&](const Expr& e) {
      if (const auto* v = as<VarNode>(e)) ++uses_[v];
    });
    int block_id = 0;
    visit_exprs(f->body, [&](const Expr& e) {
      const auto* seq = as<SeqExprNode>(e);
      if (!seq) return;
      for (const BindingBlock& block : seq->blocks) {
        ++block_id;
        for (const Binding& b : block.bindings) {
          block_of_[b.var.get()] = block_id;
          if (!b.is_match_cast()) values_[b.var.get()] = b.value;
        }
      }
    });
    // Results only transposed: o = permute_dims(m) with m = matmul(...)
    // read by it alone, in the same block.
    for (const auto& [var, value] : values_) {
      const CallNode* t = as_op_call(value, "permute_dims");
      const auto* m = t ? as<VarNode>(t->args[0]) : nullptr;
      if (!m || uses_[m] != 1 || block_of_[m] != block_of_[var]) continue;
      auto it = values_.find(m);
      if (it == values_.end() || !product(it->second)) continue;
      if (std::optional<View> v = result_view(*t, tensor_of(it->second), tensor_of(value))) out_folds_.emplace(m, *v);
    }
    return visit_function(f);
  }

  void visit_binding(const Binding& b, std::vector<Binding>& out) override {
    if (b.is_match_cast()) return ExprMutator::visit_binding(b, out);
    const VarNode* var = b.var.get();
    if (out_folds_.count(var)) {  // the transpose's binding writes it
      held_.emplace(var, b);
      return;
    }
    const CallNode* t = as_op_call(b.value, "permute_dims");
    const auto* m = t ? as<VarNode>(t->args[0]) : nullptr;
    if (m && held_.count(m)) {
      const Binding& held = held_.at(m);
      out.push_back(
          Binding{b.var, fold(*product(held.value), &out_folds_.at(m), block_of_[var], b.var->sinfo), nullptr});
      return;
    }
    if (const CallNode* c = product(b.value))
      if (Expr call = fold(*c, nullptr, block_of_[var], b.var->sinfo)) {
        out.push_back(Binding{b.var, call, nullptr});
        return;
      }
    ExprMutator::visit_binding(b, out);
  }

 private:
  // `value` as a matmul the BLAS computes: f32 or f64 operands and result
  // of one dtype, known shapes, rank 2 or more.
  const CallNode* product(const Expr& value) const {
    const CallNode* c = as_op_call(value, "matmul");
    const TensorSI* y = tensor_of(value);
    if (!c || !y || !y->shape || y->shape->size() < 2 || !(y->dtype == DataType::f32() || y->dtype == DataType::f(64)))
      return nullptr;
    for (const Expr& a : c->args) {
      const TensorSI* t = tensor_of(a);
      if (!t || !t->shape || t->shape->size() < 2 || t->dtype != y->dtype) return nullptr;
    }
    return c;
  }

  // The product's result y written through o = permute_dims(y, axes):
  // o's memory read in y's dims (y's dim axes[k] is o's dim k), when its
  // last dim stays last and its rows are at least a row apart.
  std::optional<View> result_view(const CallNode& t, const TensorSI* y, const TensorSI* o) const {
    if (!o || !o->shape || o->shape->size() != y->shape->size()) return std::nullopt;
    const size_t r = y->shape->size();
    std::vector<int> axes = permutation(t, r);
    const std::vector<SymExpr> os = contiguous_strides(*o->shape);
    View v;
    v.dims = *y->shape;
    v.strides.assign(r, SymExpr(0));
    for (size_t k = 0; k < r; ++k) v.strides[size_t(axes[k])] = os[k];
    v.moved = true;
    if (!blas_readable(ana_, v.dims[r - 2], v.dims[r - 1], v.strides[r - 2], v.strides[r - 1], true))
      return std::nullopt;
    return v;
  }

  // permute_dims's axes (none: reversed).
  static std::vector<int> permutation(const CallNode& t, size_t rank) {
    std::vector<int64_t> axes = t.attrs.get_ints("axes");
    std::vector<int> p(rank);
    for (size_t k = 0; k < rank; ++k) {
      int64_t a = axes.empty() ? int64_t(rank - 1 - k) : axes[k];
      p[k] = int(a < 0 ? a + int64_t(rank) : a);
    }
    return p;
  }

  // The memory `e` reads, through the ops a view can follow.
  View view_of(const Expr& e, int block, int depth = 0) const {
    const TensorSI* t = tensor_of(e);
    View plain{e, SymExpr(0), *t->shape, contiguous_strides(*t->shape), false};
    const auto* var = as<VarNode>(e);
    auto it = var ? values_.find(var) : values_.end();
    if (it == values_.end() || depth > 16) return plain;
    std::optional<View> v = follow(it->second, *t->shape, block, depth);
    // A dataflow variable of another block is not in scope at the product.
    if (!v || (is_dataflow_var(v->base) && block_of_.at(as<VarNode>(v->base)) != block)) return plain;
    return *v;
  }

  std::optional<View> follow(const Expr& value, const std::vector<SymExpr>& dims, int block, int depth) const {
    if (const auto* item = as<TupleGetItemNode>(value)) return split_part(*item, dims, block, depth);
    const auto* c = as<CallNode>(value);
    if (!c || !c->op() || c->args.empty() || !tensor_of(c->args[0]) || !tensor_of(c->args[0])->shape)
      return std::nullopt;
    const std::string& op = c->op()->name;
    if (op != "permute_dims" && op != "reshape" && op != "squeeze" && op != "expand_dims" && op != "strided_slice")
      return std::nullopt;
    // A product's result written through this transpose is its memory as it is.
    const auto* x = as<VarNode>(c->args[0]);
    if (op == "permute_dims" && x && out_folds_.count(x)) return std::nullopt;
    View v = view_of(c->args[0], block, depth + 1);
    v.moved = true;
    if (op == "permute_dims") {
      std::vector<int> axes = permutation(*c, v.dims.size());
      View p = v;
      for (size_t k = 0; k < axes.size(); ++k)
        p.dims[k] = v.dims[size_t(axes[k])], p.strides[k] = v.strides[size_t(axes[k])];
      return p;
    }
    if (op == "strided_slice") return sliced(*c, std::move(v), dims);
    return reshaped(std::move(v), dims);
  }

  // Part k of split(x, sections | indices, axis): x's view from the part's
  // first element along axis.
  std::optional<View> split_part(const TupleGetItemNode& item, const std::vector<SymExpr>& dims, int block,
                                 int depth) const {
    const auto* tv = as<VarNode>(item.tuple);
    auto it = tv ? values_.find(tv) : values_.end();
    const CallNode* c = it == values_.end() ? nullptr : as_op_call(it->second, "split");
    const TensorSI* x = c ? tensor_of(c->args[0]) : nullptr;
    if (!x || !x->shape) return std::nullopt;
    View v = view_of(c->args[0], block, depth + 1);
    const int64_t rank = int64_t(v.dims.size());
    int64_t axis = c->attrs.get_int("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || dims.size() != v.dims.size()) return std::nullopt;
    const SymExpr dim = v.dims[size_t(axis)];
    SymExpr begin(0);
    const int64_t sections = c->attrs.get_int("sections");
    const std::vector<int64_t> indices = c->attrs.get_ints("indices");
    if (sections > 0)
      begin = dims[size_t(axis)] * SymExpr(int64_t(item.index));
    else if (item.index > 0 && size_t(item.index) <= indices.size())
      begin = min(SymExpr(indices[size_t(item.index) - 1]), dim);
    v.at = ana_.simplify(v.at + begin * v.strides[size_t(axis)]);
    v.dims = dims;
    v.moved = true;
    return v;
  }

  // strided_slice with positive strides: each sliced axis from its
  // (clamped) begin, its stride multiplied; the dims the result's.
  std::optional<View> sliced(const CallNode& c, View v, const std::vector<SymExpr>& dims) const {
    const std::vector<int64_t> axes = c.attrs.get_ints("axes"), steps = c.attrs.get_ints("strides");
    const std::vector<SymExpr> begins = ops::get_syms(c.attrs, "begin");
    if (begins.size() != axes.size() || dims.size() != v.dims.size()) return std::nullopt;
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t step = k < steps.size() ? steps[k] : 1;
      int64_t a = axes[k] < 0 ? axes[k] + int64_t(v.dims.size()) : axes[k];
      if (step <= 0 || a < 0 || a >= int64_t(v.dims.size())) return std::nullopt;
      v.at = v.at + min(begins[k], v.dims[size_t(a)]) * v.strides[size_t(a)];
      v.strides[size_t(a)] = v.strides[size_t(a)] * SymExpr(step);
    }
    v.at = ana_.simplify(v.at);
    v.dims = dims;
    return v;
  }

  // `v` read in `dims` (a reshape): each group of new dims splits one old
  // dim, or merges old dims that lie one after another in memory; unit
  // dims come and go.
  std::optional<View> reshaped(View v, const std::vector<SymExpr>& dims) const {
    std::vector<SymExpr> od, os;
    for (size_t i = 0; i < v.dims.size(); ++i)
      if (!is_one(v.dims[i])) od.push_back(v.dims[i]), os.push_back(v.strides[i]);
    std::vector<SymExpr> ns(dims.size(), SymExpr(1));
    size_t i = 0, j = 0;
    while (j < dims.size()) {
      if (is_one(dims[j])) {
        ++j;
        continue;
      }
      if (i == od.size()) return std::nullopt;
      size_t i2 = i + 1, j2 = j + 1;
      SymExpr po = od[i], pn = dims[j];
      while (!ana_.can_prove_equal(po, pn)) {
        if (ana_.prove_less(po, pn) == Tri::Yes && i2 < od.size() &&
            ana_.can_prove_equal(os[i2 - 1], os[i2] * od[i2])) {
          po = po * od[i2++];
        } else if (ana_.prove_less(pn, po) == Tri::Yes && j2 < dims.size()) {
          pn = pn * dims[j2++];
        } else {
          return std::nullopt;
        }
      }
      // New dims [j, j2) over old dims [i, i2), innermost stride os[i2 - 1].
      SymExpr stride = os[i2 - 1];
      for (size_t k = j2; k-- > j;) {
        ns[k] = ana_.simplify(stride);
        stride = stride * dims[k];
      }
      i = i2, j = j2;
    }
    if (i != od.size()) return std::nullopt;
    v.dims = dims;
    v.strides = std::move(ns);
    return v;
  }

  // The view's parameter words: rank 0 for the tensor as it is, else
  // rank, offset, dims, strides.
  static void append(const View& v, std::vector<SymExpr>& words) {
    if (!v.moved) {
      words.push_back(SymExpr(0));
      return;
    }
    words.push_back(SymExpr(int64_t(v.dims.size())));
    words.push_back(v.at);
    words.insert(words.end(), v.dims.begin(), v.dims.end());
    words.insert(words.end(), v.strides.begin(), v.strides.end());
  }

  // blas.matmul_view of the product `c` through its operands' views and
  // `out` (null: the result as it is); null when nothing is folded or the
  // BLAS cannot read a view.
  Expr fold(const CallNode& c, const View* out, int block, const StructInfo& sinfo) const {
    // An operand the BLAS cannot read through its view (or a constant's,
    // which lift-transform-params has already laid out) is read as it is.
    auto operand = [&](const Expr& e) {
      View v = view_of(e, block);
      const size_t r = v.dims.size();
      if (v.moved && (v.base->kind == ExprKind::Constant ||
                      !blas_readable(ana_, v.dims[r - 2], v.dims[r - 1], v.strides[r - 2], v.strides[r - 1], false)))
        v = View{e, SymExpr(0), *tensor_of(e)->shape, contiguous_strides(*tensor_of(e)->shape), false};
      return v;
    };
    View a = operand(c.args[0]), b = operand(c.args[1]);
    if (!a.moved && !b.moved && !out) return nullptr;
    std::vector<SymExpr> words;
    append(a, words), append(b, words);
    if (out)
      append(*out, words);
    else
      words.push_back(SymExpr(0));
    Expr call = make_op_call("call_library",
                             {make_string(kMatmulView), make_tuple({a.base, b.base, make_shape(words)})}, {}, {sinfo});
    call->sinfo = sinfo;
    return call;
  }

  std::unordered_map<const VarNode*, Expr> values_;
  std::unordered_map<const VarNode*, int> block_of_;
  std::unordered_map<const VarNode*, int> uses_;
  std::unordered_map<const VarNode*, View> out_folds_;
  std::unordered_map<const VarNode*, Binding> held_;  // products held for their transposes
};

}  // namespace

IRModule fold_matmul_views(const IRModule& mod) {
  if (!TargetTraits::of(mod).host_kernels) return mod;  // the strided views are the host BLAS's
  IRModule out = mod;
  bool any = false;
  out = map_functions(mod, [&](const std::string&, const Function& f) {
    Function g = Folder(mod).run(f);
    any |= g != f;
    return g;
  });
  if (any && !out.extern_decl(kMatmulView)) out.add_extern(kMatmulView);
  return out;
}

}  // namespace relax
