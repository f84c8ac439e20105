// Builtins of the data-dependent ops (docs/runtime_abi.md, section 1): the
// work that is sorting or compaction rather than a loop nest, and the
// run-time parameters of the ops whose shape depends on tensor values.
//
//   relax.topk(x, k, axis, largest, sorted)            -> (values, indices i64)
//   relax.nonzero(x)                                   -> i64 [rank, count]
//   relax.unique(x, axis, sorted)                      -> (values, first, inverse, counts)
//   relax.non_max_suppression(boxes, scores, center, [max], [iou], [score])
//                                                      -> i64 [n, 3]
//   relax.reduce_dynamic_params(x, axes, noop, keepdims)
//       -> shape (k_0..k_{r-1}, e_0..e_{r-1}[, o_0..o_{m-1}]): the reduced
//          shape with kept unit dims (k), the reduction extents (e: dim or 1)
//          and, without keepdims, the result's dims (o)
//   relax.slice_params(x, begin, end, axes, steps)
//       -> shape (n_0..n_{r-1}, b_0..b_{r-1}, p_0..p_{r-1}, m_0..m_{r-1}):
//          ONNX Slice's result dims, first index and step p - m per dim (a
//          shape holds no negative values, so the step is split in two)
//   relax.dft_params(x, axis, inverse, onesided, length)
//       -> shape (dims of the result..., axis, n, dim at axis): dft with the
//          axis read at run time; length < 0 means the default
//
// Scalars arrive as VM integers or floats, or as tensors of one element.
// Element comparisons are exact for integers; for floats NaN sorts above
// every number and equals NaN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "runtime/builtin_util.h"
#include "runtime/compare.h"
#include "runtime/error.h"
#include "runtime/vm.h"

namespace relax::rt {
namespace {

// The elements of a tensor as comparable keys: exact for every integer
// dtype, doubles for floats.
class Keys {
 public:
  Keys(const Tensor& t, const char* what) : n_(t.numel()) {
    DType d = t.dtype();
    if (d.lanes != 1 || d.storage_bits() % 8) rt_fail(what, ": unsupported dtype ", d.str());
    const char* p = static_cast<const char*>(t.data());
    auto rd = [&](auto v, int64_t i) {
      std::memcpy(&v, p + i * int64_t(sizeof(v)), sizeof(v));
      return v;
    };
    if (d.is_float()) {
      kind_ = Kind::Float;
      f_.resize(size_t(n_));
      for (int64_t i = 0; i < n_; ++i) f_[size_t(i)] = element_as_double(t, i);
    } else if (d.is_uint() && d.bits == 64) {
      kind_ = Kind::UInt;
      u_.resize(size_t(n_));
      for (int64_t i = 0; i < n_; ++i) u_[size_t(i)] = rd(uint64_t(), i);
    } else if (d.is_int() || d.is_uint() || d.is_bool()) {
      kind_ = Kind::Int;
      i_.resize(size_t(n_));
      for (int64_t i = 0; i < n_; ++i) {
        int64_t v = 0;
        switch (d.bits) {
          case 8:
            v = d.is_int() ? int64_t(rd(int8_t(), i)) : int64_t(rd(uint8_t(), i));
            break;
          case 16:
            v = d.is_int() ? int64_t(rd(int16_t(), i)) : int64_t(rd(uint16_t(), i));
            break;
          case 32:
            v = d.is_int() ? int64_t(rd(int32_t(), i)) : int64_t(rd(uint32_t(), i));
            break;
          case 64:
            v = rd(int64_t(), i);
            break;
          default:
            rt_fail(what, ": unsupported dtype ", d.str());
        }
        i_[size_t(i)] = v;
      }
    } else {
      rt_fail(what, ": unsupported dtype ", d.str());
    }
  }

  // -1, 0 or 1 as element a is below, equal to or above element b.
  int cmp(int64_t a, int64_t b) const {
    switch (kind_) {
      case Kind::Int:
        return three_way(i_[size_t(a)], i_[size_t(b)]);
      case Kind::UInt:
        return three_way(u_[size_t(a)], u_[size_t(b)]);
      case Kind::Float: {
        double x = f_[size_t(a)], y = f_[size_t(b)];
        bool nx = std::isnan(x), ny = std::isnan(y);
        if (nx || ny) return nx == ny ? 0 : nx ? 1 : -1;
        return three_way(x, y);
      }
    }
    return 0;
  }
  bool nonzero(int64_t i) const {
    switch (kind_) {
      case Kind::Int:
        return i_[size_t(i)] != 0;
      case Kind::UInt:
        return u_[size_t(i)] != 0;
      case Kind::Float:
        return f_[size_t(i)] != 0;  // NaN is non-zero
    }
    return false;
  }
  double as_double(int64_t i) const {
    switch (kind_) {
      case Kind::Int:
        return double(i_[size_t(i)]);
      case Kind::UInt:
        return double(u_[size_t(i)]);
      case Kind::Float:
        return f_[size_t(i)];
    }
    return 0;
  }
  // The element as an integer (floats truncated, NaN 0, saturated).
  int64_t as_int(int64_t i) const {
    switch (kind_) {
      case Kind::Int:
        return i_[size_t(i)];
      case Kind::UInt:
        return int64_t(u_[size_t(i)]);
      case Kind::Float: {
        double v = f_[size_t(i)];
        if (std::isnan(v)) return 0;
        if (v >= 9.2e18) return INT64_MAX;
        if (v <= -9.2e18) return INT64_MIN;
        return int64_t(v);
      }
    }
    return 0;
  }
  int64_t size() const { return n_; }

 private:
  enum class Kind { Int, UInt, Float };
  template <class T>
  static int three_way(T x, T y) {
    return x < y ? -1 : y < x ? 1 : 0;
  }
  Kind kind_ = Kind::Int;
  int64_t n_;
  std::vector<int64_t> i_;
  std::vector<uint64_t> u_;
  std::vector<double> f_;
};

// A scalar operand as a double: a VM number or a tensor of one element.
double scalar_double(const Value& v, const char* what) {
  if (v.is_int() || std::holds_alternative<double>(v.v)) return v.float_value(what);
  const Tensor& t = v.tensor(what);
  if (t.numel() != 1) rt_fail(what, " must hold one value, got ", t.type_str());
  return element_as_double(t, 0);
}

// The integers of a 1-D (or scalar) integer tensor.
std::vector<int64_t> int_list(const Value& v, const char* what) {
  if (v.is_shape()) return v.shape();
  const Tensor& t = v.tensor(what);
  if (t.ndim() > 1) rt_fail(what, " must be a 1-D tensor, got ", t.type_str());
  if (!t.dtype().is_int() && !t.dtype().is_uint()) rt_fail(what, " must hold integers, got ", t.type_str());
  Keys k(t, what);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(k.as_int(i));
  return out;
}


// ---- topk ----------------------------------------------------------------------------

void topk(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("topk");
  int64_t k = scalar_int(c.arg(1), "topk's k");
  int axis = normalize_axis(scalar_int(c.arg(2), "topk's axis"), x.ndim(), "topk");
  bool largest = scalar_int(c.arg(3), "topk's largest") != 0;
  AxisSplit s = split_at(x.shape(), axis);
  if (k < 0 || k > s.len) rt_fail("topk: k = ", k, " is outside [0, ", s.len, "] (the dim at axis ", axis, ")");
  std::vector<int64_t> shape = x.shape();
  shape[size_t(axis)] = k;
  Tensor values = Tensor::empty(x.dtype(), shape, c.vm.pool());
  Tensor indices = Tensor::empty(DType::i64(), shape, c.vm.pool());
  size_t eb = elem_bytes(x, "topk");
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(values.data());
  int64_t* idx = indices.data_as<int64_t>();
  // Always sorted (sorted=false leaves the order unspecified); equal
  // elements keep the lower index first.
  if (x.dtype() == DType::f32() && s.len < (int64_t(1) << 32)) {
    // f32 (scores, logits): each element one 64-bit key, its value's order
    // above its reversed index, so that plain integer comparison ranks by
    // value (-0 equal to 0, NaN above every number, NaNs equal) and then by
    // the lower index; partial_sort on the keys is a heap of k and one
    // compare for most elements, where the generic path compares doubles
    // through a dtype switch.
    const float* xs = x.data_as<float>();
    float* vs = values.data_as<float>();
    std::vector<uint64_t> key(size_t(s.len));
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t in = 0; in < s.inner; ++in) {
        const float* row = xs + o * s.len * s.inner + in;
        for (int64_t j = 0; j < s.len; ++j) {
          float v = row[j * s.inner];
          uint32_t u;
          std::memcpy(&u, &v, 4);
          if (v == 0) u = 0;  // -0 as 0
          uint32_t ord = std::isnan(v) ? 0xffffffffu : (u & 0x80000000u) ? ~u : u | 0x80000000u;
          if (!largest) ord = ~ord;
          key[size_t(j)] = uint64_t(ord) << 32 | uint32_t(~uint32_t(j));
        }
        std::partial_sort(key.begin(), key.begin() + k, key.end(), std::greater<uint64_t>());
        for (int64_t j = 0; j < k; ++j) {
          int64_t src_j = int64_t(~uint32_t(key[size_t(j)]));
          int64_t out = (o * k + j) * s.inner + in;
          vs[out] = row[src_j * s.inner];
          idx[out] = src_j;
        }
      }
    }
    c.out = make_tuple({values, indices});
    return;
  }
  Keys keys(x, "topk");
  std::vector<int64_t> order(size_t(s.len));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return (o * s.len + j) * s.inner + in; };
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        int r = keys.cmp(at(a), at(b));
        if (r != 0) return largest ? r > 0 : r < 0;
        return a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        int64_t out = (o * k + j) * s.inner + in;
        std::memcpy(dst + size_t(out) * eb, src + size_t(at(order[size_t(j)])) * eb, eb);
        idx[out] = order[size_t(j)];
      }
    }
  }
  c.out = make_tuple({values, indices});
}

// ---- nonzero -------------------------------------------------------------------------

void nonzero(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("nonzero");
  Keys keys(x, "nonzero");
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (keys.nonzero(i)) hits.push_back(i);
  int64_t n = int64_t(hits.size()), r = x.ndim();
  Tensor out = Tensor::empty(DType::i64(), {r, n}, c.vm.pool());
  int64_t* o = out.data_as<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rest = hits[size_t(j)];
    for (int64_t d = r; d-- > 0;) {
      int64_t dim = x.dim(int(d));
      o[d * n + j] = rest % dim;
      rest /= dim;
    }
  }
  c.out = out;
}

// ---- unique --------------------------------------------------------------------------

void unique(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("unique");
  if (x.ndim() == 0) rt_fail("unique: needs a tensor of rank >= 1");
  int axis = normalize_axis(scalar_int(c.arg(1), "unique's axis"), x.ndim(), "unique");
  bool sorted = scalar_int(c.arg(2), "unique's sorted") != 0;
  AxisSplit s = split_at(x.shape(), axis);
  Keys keys(x, "unique");
  // Slices compare lexicographically, elements in (outer, inner) order.
  auto cmp_slices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t in = 0; in < s.inner; ++in) {
        int r = keys.cmp((o * s.len + a) * s.inner + in, (o * s.len + b) * s.inner + in);
        if (r != 0) return r;
      }
    return 0;
  };
  std::vector<int64_t> order(size_t(s.len));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp_slices(a, b) < 0; });
  // Groups of equal slices, in sorted order, each with its first index.
  std::vector<int64_t> group_of(size_t(s.len)), first, counts;
  for (size_t j = 0; j < order.size(); ++j) {
    if (j == 0 || cmp_slices(order[j - 1], order[j]) != 0) {
      first.push_back(order[j]);
      counts.push_back(0);
    }
    group_of[size_t(order[j])] = int64_t(first.size()) - 1;
    ++counts.back();
  }
  int64_t u = int64_t(first.size());
  std::vector<int64_t> rank(static_cast<size_t>(u));  // group -> output position
  std::iota(rank.begin(), rank.end(), int64_t(0));
  if (!sorted) {
    std::vector<int64_t> by_first(static_cast<size_t>(u));
    std::iota(by_first.begin(), by_first.end(), int64_t(0));
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return first[size_t(a)] < first[size_t(b)]; });
    for (int64_t p = 0; p < u; ++p) rank[size_t(by_first[size_t(p)])] = p;
  }
  std::vector<int64_t> shape = x.shape();
  shape[size_t(axis)] = u;
  PoolAllocator* pool = c.vm.pool();
  Tensor values = Tensor::empty(x.dtype(), shape, pool);
  Tensor first_t = Tensor::empty(DType::i64(), {u}, pool), counts_t = Tensor::empty(DType::i64(), {u}, pool);
  Tensor inverse_t = Tensor::empty(DType::i64(), {s.len}, pool);
  size_t chunk = size_t(s.inner) * elem_bytes(x, "unique");
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(values.data());
  for (int64_t g = 0; g < u; ++g) {
    int64_t p = rank[size_t(g)];
    first_t.data_as<int64_t>()[p] = first[size_t(g)];
    counts_t.data_as<int64_t>()[p] = counts[size_t(g)];
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(dst + size_t(o * u + p) * chunk, src + size_t(o * s.len + first[size_t(g)]) * chunk, chunk);
  }
  for (int64_t j = 0; j < s.len; ++j) inverse_t.data_as<int64_t>()[j] = rank[size_t(group_of[size_t(j)])];
  c.out = make_tuple({values, first_t, inverse_t, counts_t});
}

// ---- non_max_suppression ------------------------------------------------------------------

struct Box {
  double y1, x1, y2, x2;
};

Box box_at(const Keys& b, int64_t i, bool center) {
  double v[4];
  for (int k = 0; k < 4; ++k) v[k] = b.as_double(i * 4 + k);
  if (center) {  // (x center, y center, width, height)
    return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  }
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

// Whether a and b overlap by more than `threshold` (intersection over union).
bool overlaps(const Box& a, const Box& b, double threshold) {
  double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1), iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return false;
  double inter = ih * iw;
  double area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

// non_max_suppression(boxes, scores, center_point_box, [max_per_class],
// [iou_threshold], [score_threshold]): the last three may be absent; no
// max_per_class, or 0, selects nothing; no score_threshold keeps every box.
void non_max_suppression(BuiltinCall& c) {
  const Tensor& boxes = c.arg(0).tensor("non_max_suppression's boxes");
  const Tensor& scores = c.arg(1).tensor("non_max_suppression's scores");
  if (boxes.ndim() != 3 || boxes.dim(2) != 4)
    rt_fail("non_max_suppression: boxes must be [B, S, 4], got ", boxes.type_str());
  if (scores.ndim() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    rt_fail("non_max_suppression: scores ", scores.type_str(), " do not match boxes ", boxes.type_str());
  auto given = [&](size_t i) { return i < c.num_args && c.args[i]->v.index() != 0; };
  bool center = scalar_int(c.arg(2), "center_point_box") != 0;
  int64_t max_per_class = given(3) ? scalar_int(c.arg(3), "max_output_boxes_per_class") : 0;
  double iou = given(4) ? scalar_double(c.arg(4), "iou_threshold") : 0.0;
  bool has_score = given(5);
  double score_thr = has_score ? scalar_double(c.arg(5), "score_threshold") : 0.0;
  int64_t nb = boxes.dim(0), ns = boxes.dim(1), nc = scores.dim(1);
  Keys bk(boxes, "non_max_suppression's boxes"), sk(scores, "non_max_suppression's scores");
  std::vector<int64_t> triples;
  std::vector<int64_t> cand;
  std::vector<Box> kept;
  for (int64_t b = 0; b < nb && max_per_class > 0; ++b) {
    for (int64_t cl = 0; cl < nc; ++cl) {
      int64_t base = (b * nc + cl) * ns;
      cand.clear();
      for (int64_t i = 0; i < ns; ++i)
        if (!has_score || sk.as_double(base + i) > score_thr) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(),
                       [&](int64_t x, int64_t y) { return sk.as_double(base + x) > sk.as_double(base + y); });
      kept.clear();
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_per_class) break;
        Box bx = box_at(bk, b * ns + i, center);
        bool suppressed = false;
        for (const Box& k : kept) suppressed = suppressed || overlaps(k, bx, iou);
        if (suppressed) continue;
        kept.push_back(bx);
        triples.insert(triples.end(), {b, cl, i});
      }
    }
  }
  int64_t n = int64_t(triples.size() / 3);
  Tensor out = Tensor::empty(DType::i64(), {n, 3}, c.vm.pool());
  if (n) std::memcpy(out.data(), triples.data(), triples.size() * 8);
  c.out = out;
}

// ---- run-time parameters of reduce_dynamic and dynamic_strided_slice -----------------

void reduce_dynamic_params(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("reduce_dynamic");
  std::vector<int64_t> axes = int_list(c.arg(1), "reduce_dynamic's axes");
  bool noop = scalar_int(c.arg(2), "noop_with_empty_axes") != 0;
  bool keepdims = scalar_int(c.arg(3), "keepdims") != 0;
  int r = x.ndim();
  std::vector<bool> red(size_t(r), axes.empty() && !noop);
  for (int64_t a : axes) {
    int ax = normalize_axis(a, r, "reduce_dynamic");
    if (red[size_t(ax)]) rt_fail("reduce_dynamic: axis ", a, " is listed twice");
    red[size_t(ax)] = true;
  }
  std::vector<int64_t> out, kept, ext;
  for (int j = 0; j < r; ++j) {
    int64_t d = x.dim(j);
    kept.push_back(red[size_t(j)] ? 1 : d);
    ext.push_back(red[size_t(j)] ? d : 1);
  }
  out = kept;
  out.insert(out.end(), ext.begin(), ext.end());
  if (!keepdims)
    for (int j = 0; j < r; ++j)
      if (!red[size_t(j)]) out.push_back(x.dim(j));
  c.out = make_shape(std::move(out));
}

void slice_params(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("dynamic_strided_slice");
  std::vector<int64_t> begin = int_list(c.arg(1), "slice begin"), end = int_list(c.arg(2), "slice end");
  std::vector<int64_t> axes = int_list(c.arg(3), "slice axes"), steps = int_list(c.arg(4), "slice steps");
  size_t n = begin.size();
  if (end.size() != n || axes.size() != n || steps.size() != n)
    rt_fail("dynamic_strided_slice: begin, end, axes and steps have ", n, ", ", end.size(), ", ", axes.size(), " and ",
            steps.size(), " elements; they must agree");
  int r = x.ndim();
  std::vector<int64_t> len = x.shape(), first(size_t(r), 0), step(size_t(r), 1);
  std::vector<bool> seen(size_t(r), false);
  for (size_t j = 0; j < n; ++j) {
    int ax = normalize_axis(axes[j], r, "dynamic_strided_slice");
    if (seen[size_t(ax)]) rt_fail("dynamic_strided_slice: axis ", axes[j], " is listed twice");
    seen[size_t(ax)] = true;
    int64_t d = x.dim(ax), s = steps[j], b = begin[j], e = end[j];
    if (s == 0) rt_fail("dynamic_strided_slice: the step along axis ", ax, " is 0");
    // Negative bounds count from the end; then clamp as numpy does.
    if (b < 0) b = b < -d ? (s > 0 ? 0 : -1) : b + d;
    if (e < 0) e = e < -d ? -1 : e + d;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      b = std::clamp<int64_t>(b, -1, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    // Lengths that overflow are impossible: |b|, |e| <= d.
    int64_t count = s > 0 ? (e - b + s - 1) / s : (b - e + (-s) - 1) / (-s);
    len[size_t(ax)] = std::max<int64_t>(count, 0);
    first[size_t(ax)] = len[size_t(ax)] > 0 ? b : 0;
    step[size_t(ax)] = s;
  }
  std::vector<int64_t> out = len;
  out.insert(out.end(), first.begin(), first.end());
  for (int64_t s : step) out.push_back(std::max<int64_t>(s, 0));
  for (int64_t s : step) out.push_back(std::max<int64_t>(-s, 0));
  c.out = make_shape(std::move(out));
}

void dft_params(BuiltinCall& c) {
  const Tensor& x = c.arg(0).tensor("dft");
  int r = x.ndim();
  if (r < 2) rt_fail("dft: needs a signal of rank >= 2, got ", x.type_str());
  int axis = normalize_axis(scalar_int(c.arg(1), "dft's axis"), r, "dft");
  if (axis == r - 1) rt_fail("dft: the axis cannot be the last (complex) dim");
  bool inverse = scalar_int(c.arg(2), "inverse") != 0, onesided = scalar_int(c.arg(3), "onesided") != 0;
  int64_t length = scalar_int(c.arg(4), "dft length"), d = x.dim(axis);
  int64_t n = length >= 0 ? length : onesided && inverse ? 2 * (d - 1) : d;
  if (n < 1) rt_fail("dft: the transform length must be positive, got ", n);
  std::vector<int64_t> out = x.shape();
  out[size_t(axis)] = onesided && !inverse ? n / 2 + 1 : n;
  out.back() = onesided && inverse ? 1 : 2;
  out.insert(out.end(), {int64_t(axis), n, d});
  c.out = make_shape(std::move(out));
}

}  // namespace

void register_data_builtins() {
  register_builtin("relax.topk", topk);
  register_builtin("relax.nonzero", nonzero);
  register_builtin("relax.unique", unique);
  register_builtin("relax.non_max_suppression", non_max_suppression);
  register_builtin("relax.reduce_dynamic_params", reduce_dynamic_params);
  register_builtin("relax.slice_params", slice_params);
  register_builtin("relax.dft_params", dft_params);
}

}  // namespace relax::rt
