#include "backends/vulkan/codegen_glsl.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/gpu/schedule.h"
#include "backends/vulkan/glsl_printer.h"
#include "ir/error.h"
#include "ir/tir_functor.h"

namespace relax::vulkan {

using namespace tir;

std::string StagePrinter::push_ref(size_t k) const {
  return push_buffer_ ? "pc.p[" + std::to_string(k) + "]" : "pc.p" + std::to_string(k);
}

std::string StagePrinter::print(const GpuStage& st) {
  for (const SymExpr& v : push_vars_) name_of(v);
  std::ostringstream body;
  ind_ = 1;
  for (size_t k = 0; k < push_vars_.size(); ++k) body << "  int " << name_of(push_vars_[k]) << " = " << push_ref(k) << ";\n";
  if (st.vars.empty()) {
    body << "  if (gl_GlobalInvocationID.x == 0u) {\n";
    ind_ = 2;
    body << stmt(st.body);
    body << "  }\n";
  } else {
    std::string total;
    for (const SymExpr& e : st.extents) total += (total.empty() ? "" : " * ") + paren(sym(e));
    body << "  int total_ = " << total << ";\n";
    body << "  for (int flat_ = int(gl_GlobalInvocationID.x); flat_ < total_; flat_ += int(gl_NumWorkGroups.x) * "
         << block_ << ") {\n";
    ind_ = 2;
    body << unflatten("flat_", st.vars, st.extents);
    body << stmt(st.body);
    body << "  }\n";
  }
  return finish(body.str());
}

std::string StagePrinter::print_rows(const GpuStage& st, const GpuRows& rows) {
  for (const SymExpr& v : push_vars_) name_of(v);
  std::ostringstream body;
  ind_ = 1;
  for (size_t k = 0; k < push_vars_.size(); ++k) body << "  int " << name_of(push_vars_[k]) << " = " << push_ref(k) << ";\n";
  std::string total;
  for (const SymExpr& e : st.extents) total += (total.empty() ? "" : " * ") + paren(sym(e));
  body << "  int lid_ = int(gl_LocalInvocationID.x);\n";
  body << "  int rows_ = " << total << ";\n";
  body << "  for (int row_ = int(gl_WorkGroupID.x); row_ < rows_; row_ += int(gl_NumWorkGroups.x)) {\n";
  ind_ = 2;
  body << unflatten("row_", st.vars, st.extents);
  for (const Buffer& b : rows.locals) {
    scalars_.insert(b.get());
    body << pad() << value_type(b->dtype) << " " << buffer_name(b) << ";\n";
  }
  for (const GpuRowStep& step : rows.steps) {
    switch (step.kind) {
      case GpuRowStep::Kind::Serial:
        body << stmt(step.stmt);
        break;
      case GpuRowStep::Kind::Global:
        body << pad() << "if (lid_ == 0) {\n";
        ++ind_;
        body << stmt(step.stmt);
        --ind_;
        body << pad() << "}\n";
        break;
      case GpuRowStep::Kind::Spread:
        body << strided(*as<ForNode>(step.stmt));
        break;
      case GpuRowStep::Kind::Reduce:
        body << reduce(step);
        break;
    }
    if (step.barrier_after) body << pad() << "memoryBarrierBuffer();\n" << pad() << "barrier();\n";
  }
  body << "  }\n";
  return finish(body.str());
}

std::string StagePrinter::print_block(const GpuBlockStage& st) {
  for (const SymExpr& v : push_vars_) name_of(v);
  std::ostringstream body;
  ind_ = 1;
  for (size_t k = 0; k < push_vars_.size(); ++k) body << "  int " << name_of(push_vars_[k]) << " = " << push_ref(k) << ";\n";
  std::string total;
  for (const SymExpr& e : st.extents) total += (total.empty() ? "" : " * ") + paren(sym(e));
  body << "  int " << name_of(st.thread) << " = int(gl_LocalInvocationID.x);\n";
  body << "  int groups_ = " << total << ";\n";
  body << "  for (int group_ = int(gl_WorkGroupID.x); group_ < groups_; group_ += int(gl_NumWorkGroups.x)) {\n";
  ind_ = 2;
  body << unflatten("group_", st.vars, st.extents);
  in_block_ = true;
  body << stmt(st.body);
  in_block_ = false;
  body << "  }\n";
  return finish(body.str());
}

std::string StagePrinter::unflatten(const std::string& flat, const std::vector<SymExpr>& vars,
                                    const std::vector<SymExpr>& extents) {
  std::ostringstream o;
  o << pad() << "int rest_ = " << flat << ";\n";
  for (size_t k = vars.size(); k-- > 0;) {
    std::string e = paren(sym(extents[k]));
    o << pad() << "int " << name_of(vars[k]) << " = rest_ % " << e << ";\n";
    if (k > 0) o << pad() << "rest_ /= " << e << ";\n";
  }
  return o.str();
}

std::string StagePrinter::strided(const ForNode& f) {
  std::ostringstream o;
  std::string v = name_of(f.var);
  o << pad() << "for (int " << v << " = lid_; " << v << " < " << sym(f.extent) << "; " << v << " += " << block_
    << ") {\n";
  ++ind_;
  o << stmt(f.body);
  --ind_;
  o << pad() << "}\n";
  return o.str();
}

std::string StagePrinter::strided_nest(const ForNode& f) {
  std::vector<const ForNode*> chain{&f};
  while (const auto* g = as<ForNode>(chain.back()->body)) chain.push_back(g);
  if (chain.size() == 1) return strided(f);
  std::ostringstream o;
  std::string total;
  for (const ForNode* c : chain) total += (total.empty() ? "" : " * ") + paren(sym(c->extent));
  std::string flat = "nest" + std::to_string(loads_++) + "_";
  o << pad() << "for (int " << flat << " = lid_; " << flat << " < " << total << "; " << flat << " += " << block_
    << ") {\n";
  ++ind_;
  std::vector<SymExpr> vars, extents;
  for (const ForNode* c : chain) {
    vars.push_back(c->var);
    extents.push_back(c->extent);
  }
  o << unflatten(flat, vars, extents);
  o << stmt(chain.back()->body);
  --ind_;
  o << pad() << "}\n";
  return o.str();
}

std::string StagePrinter::reduce(const GpuRowStep& step) {
  const Buffer& acc = step.acc;
  DataType t = acc->dtype;
  std::string ty = value_type(t);
  // The shared array for this value type, declared once.
  std::string red = "red_" + std::to_string(reductions_.size());
  if (auto it = reductions_.find(ty); it != reductions_.end())
    red = it->second;
  else
    reductions_[ty] = red;
  // op on two scalars, printed as the body prints it (NaN-propagating min/max).
  auto a = make_buffer("ra", t, {SymExpr(int64_t(1))}, Scope::Local);
  auto b = make_buffer("rb", t, {SymExpr(int64_t(1))}, Scope::Local);
  scalars_.insert(a.get());
  scalars_.insert(b.get());
  buffers_[a.get()] = "ra_";
  buffers_[b.get()] = "rb_";
  keep_.push_back(a);
  keep_.push_back(b);
  std::string combine = expr(tir::binary(step.op, tir::load(a, {tir::sym(SymExpr(int64_t(0)))}),
                                         tir::load(b, {tir::sym(SymExpr(int64_t(0)))})));
  std::string identity;
  switch (step.op) {
    case BinOp::Add:
      identity = ty + "(0)";
      break;
    case BinOp::Mul:
      identity = ty + "(1)";
      break;
    case BinOp::Max:
    case BinOp::Min: {
      bool mx = step.op == BinOp::Max;
      if (t.is_float())
        identity = ty + "(uintBitsToFloat(" + std::string(mx ? "0xff800000u" : "0x7f800000u") + "))";
      else if (t.is_uint())
        identity = mx ? ty + "(0)" : ty + "(~" + ty + "(0))";
      else
        identity = mx ? ty + "(" + ty + "(1) << " + std::to_string(t.bits - 1) + ")"
                      : ty + "(~(" + ty + "(1) << " + std::to_string(t.bits - 1) + "))";
      break;
    }
    default:
      unsupported("a reduction of this kind in a workgroup");
  }
  std::string accv = buffer_name(acc);
  std::ostringstream o;
  o << pad() << "{\n";
  ++ind_;
  o << pad() << ty << " init_ = " << accv << ";\n";
  o << pad() << accv << " = " << identity << ";\n";
  o << strided_nest(*as<ForNode>(step.stmt));
  if (use_subgroups_ && t.bits == 32 && t.lanes == 1) {
    // Each subgroup combines its lanes (subgroup arithmetic), the
    // subgroups' partials meet in shared memory, and every thread
    // combines those: two barriers instead of a tree's log2(block).
    subgroup_ = true;
    const char* fn = step.op == BinOp::Add   ? "subgroupAdd"
                     : step.op == BinOp::Mul ? "subgroupMul"
                     : step.op == BinOp::Max ? "subgroupMax"
                                             : "subgroupMin";
    std::string part = std::string(fn) + "(" + accv + ")";
    if (t.is_float() && (step.op == BinOp::Max || step.op == BinOp::Min))  // NaN wins, as in the tree
      part = "(subgroupAny(isnan(" + accv + ")) ? uintBitsToFloat(0x7fc00000u) : " + part + ")";
    o << pad() << ty << " part_ = " << part << ";\n";
    o << pad() << "if (gl_SubgroupInvocationID == 0u) " << red << "[gl_SubgroupID] = part_;\n";
    o << pad() << "barrier();\n";
    o << pad() << "{ " << ty << " ra_ = init_; for (uint g_ = 0u; g_ < gl_NumSubgroups; ++g_) { " << ty
      << " rb_ = " << red << "[g_]; ra_ = " << combine << "; } " << accv << " = ra_; }\n";
    o << pad() << "barrier();\n";
    --ind_;
    o << pad() << "}\n";
    return o.str();
  }
  o << pad() << red << "[lid_] = " << accv << ";\n";
  o << pad() << "barrier();\n";
  o << pad() << "for (int s_ = " << block_ / 2 << "; s_ > 0; s_ >>= 1) {\n";
  o << pad() << "  if (lid_ < s_) { " << ty << " ra_ = " << red << "[lid_]; " << ty << " rb_ = " << red
    << "[lid_ + s_]; " << red << "[lid_] = " << combine << "; }\n";
  o << pad() << "  barrier();\n";
  o << pad() << "}\n";
  o << pad() << "{ " << ty << " ra_ = init_; " << ty << " rb_ = " << red << "[0]; " << accv << " = " << combine
    << "; }\n";
  o << pad() << "barrier();\n";
  --ind_;
  o << pad() << "}\n";
  return o.str();
}

std::string StagePrinter::finish(const std::string& body) {
  std::ostringstream decls, loaders;
  int binding = 0;
  int extra = int(prog_.inputs.size() + prog_.outputs.size());  // the next chunk's binding
  // Inputs are read-only, except one the program writes (a status buffer: relax.kernel_status).
  std::set<const tir::BufferNode*> written;
  tir::visit_stmts(prog_.body, [&](const tir::Stmt& s) {
    if (const auto* st = tir::as<tir::StoreNode>(s)) written.insert(st->buffer.get());
  });
  for (const auto* list : {&prog_.inputs, &prog_.outputs})
    for (const Buffer& b : *list) {
      bool input = list == &prog_.inputs && !written.count(b.get());
      std::string type = storage_type(b->dtype), name = buffer_name(b);
      auto declare = [&](int at, const std::string& as) {
        decls << "layout(std430, set = 0, binding = " << at << ") " << (input ? "readonly " : "") << "buffer B" << at
              << " { " << type << " d[]; } " << as << ";\n";
      };
      declare(binding, name);
      if (int64_t k = chunks_of(b); k > 1) {
        // ld_<name>(flat): the element, from the chunk that holds it.
        int64_t per = int64_t(kGlslChunkBytes) / std::max(b->dtype.storage_bits() / 8, 1);
        loaders << type << " ld_" << name << "(int f) {";
        for (int64_t c = 0; c < k; ++c) {
          std::string chunk = c == 0 ? name : name + "_" + std::to_string(c);
          if (c > 0) declare(extra++, chunk);
          std::string at = c == 0 ? "f" : "f - " + std::to_string(c * per);
          if (c + 1 < k)
            loaders << " if (f < " << (c + 1) * per << ") return " << chunk << ".d[" << at << "];";
          else
            loaders << " return " << chunk << ".d[" << at << "]; }\n";
        }
      }
      ++binding;
    }
  if (push_buffer_) {
    decls << "layout(std430, set = 0, binding = " << extra << ") readonly buffer Push { int p[]; } pc;\n";
  } else if (!push_vars_.empty()) {
    decls << "layout(push_constant) uniform Push {";
    for (size_t k = 0; k < push_vars_.size(); ++k) decls << " int p" << k << ";";
    decls << " } pc;\n";
  }
  // The extensions the types above and in the body need.
  std::ostringstream out;
  out << "#version 450\n";
  if (arith_ext_) out << "#extension GL_EXT_shader_explicit_arithmetic_types : require\n";
  if (storage8_) out << "#extension GL_EXT_shader_8bit_storage : require\n";
  if (storage16_) out << "#extension GL_EXT_shader_16bit_storage : require\n";
  if (subgroup_)
    out << "#extension GL_KHR_shader_subgroup_arithmetic : require\n#extension GL_KHR_shader_subgroup_vote : require\n";
  out << "layout(local_size_x = " << block_ << ") in;\n";
  out << decls.str();
  out << loaders.str();
  for (const auto& [ty, name] : reductions_) out << "shared " << ty << " " << name << "[" << block_ << "];\n";
  out << shared_.str();
  out << helpers_.str();
  out << "void main() {\n" << body << "}\n";
  return out.str();
}

namespace {

// GlslStage::loop_iters of `body`: over its loops, the product of each
// one's extent with those around it, when it mentions only the variables
// `known` allows (not an enclosing loop's: a triangular nest counts at its
// bound, which the host cannot evaluate, and is left out).
SymExpr loop_iterations(const tir::Stmt& body, const std::function<bool(const SymExpr&)>& known) {
  std::vector<const tir::ForNode*> loops;
  tir::visit_stmts(body, [&](const tir::Stmt& s) {
    if (s->kind == tir::SKind::For) loops.push_back(static_cast<const tir::ForNode*>(s.get()));
  });
  std::map<const tir::ForNode*, SymExpr> product;
  for (const tir::ForNode* f : loops) product[f] = f->extent;
  for (const tir::ForNode* outer : loops)
    tir::visit_stmts(outer->body, [&](const tir::Stmt& s) {
      if (s->kind == tir::SKind::For) {
        auto* inner = static_cast<const tir::ForNode*>(s.get());
        product[inner] = product[inner] * outer->extent;
      }
    });
  SymExpr most;
  for (const tir::ForNode* f : loops) {
    const SymExpr& n = product[f];
    auto vars = free_vars(n);
    if (!std::all_of(vars.begin(), vars.end(), known)) continue;
    most = most.defined() ? max(most, n) : n;
  }
  return most;
}

}  // namespace

GlslProgram glsl_program(const tir::Program& p, const GlslFeatures& features, uint32_t block,
                         const GlslSchedule& schedule) {
  GlslProgram out;
  out.block = block;
  // Push constants: plain variable dims of the parameters, then sym params.
  std::set<const SymNode*> seen;
  for (const auto* list : {&p->inputs, &p->outputs})
    for (const tir::Buffer& b : *list)
      for (const SymExpr& d : b->shape)
        if (d.is_var() && seen.insert(d.get()).second) out.push_vars.push_back(d);
  for (const SymExpr& s : p->sym_params)
    if (seen.insert(s.get()).second) out.push_vars.push_back(s);
  out.push_in_buffer = out.push_vars.size() * 4 > kGlslPushBytes;
  for (const auto* list : {&p->inputs, &p->outputs})
    for (const tir::Buffer& b : *list) {
      int64_t n = 1;
      for (const SymExpr& d : b->shape) n = d.is_const() && n >= 0 ? n * d.const_value() : -1;
      uint64_t bytes = n < 0 ? 0 : uint64_t(n) * uint64_t(std::max(b->dtype.storage_bits() / 8, 1));
      bool packed = b->dtype.bits < 8 && !b->dtype.is_bool();
      bool big = list == &p->inputs && !packed && bytes > kGlslChunkBytes;
      out.chunks.push_back(big ? int64_t((bytes + kGlslChunkBytes - 1) / kGlslChunkBytes) : 1);
    }
  std::map<const tir::BufferNode*, int64_t> param;  // inputs, then outputs, by position (locals absent)
  for (const auto* list : {&p->inputs, &p->outputs})
    for (const tir::Buffer& b : *list) param.emplace(b.get(), int64_t(param.size()));
  std::vector<GpuStage> stages = gpu_stages(p);
  for (size_t k = 0; k < stages.size(); ++k) {
    GlslStage st;
    st.name = stages.size() == 1 ? p->name : p->name + "_s" + std::to_string(k);
    // A thread per row, with a register tile of rows where that shares loads.
    std::optional<GpuStage> tiled = gpu_register_tile(stages[k], schedule.tile_rows, schedule.tile_cols);
    const GpuStage& per_thread = tiled ? *tiled : stages[k];
    StagePrinter printer(*p, features, out);
    st.source = printer.print(per_thread);
    st.extents = per_thread.extents;
    st.loop_iters = loop_iterations(stages[k].body, [&](const SymExpr& v) {
      return std::find(out.push_vars.begin(), out.push_vars.end(), v) != out.push_vars.end();
    });
    if (tiled) {
      StagePrinter pp(*p, features, out);
      st.plain_source = pp.print(stages[k]);
      st.plain_extents = stages[k].extents;
      st.tile = schedule.tile_rows * schedule.tile_cols;
    }
    out.needs.insert(printer.needs_.begin(), printer.needs_.end());
    // The workgroup schedule, unless its rows are known to be short: the
    // runtime would never pick it (it wants 256 iterations or more).
    std::optional<GpuRows> rows = gpu_rows(stages[k]);
    if (rows && rows->work.is_const() && rows->work.const_value() < schedule.min_row_work) rows.reset();
    if (rows) {
      StagePrinter rp(*p, features, out);
      rp.use_subgroups_ = features.subgroup_arithmetic;
      if (schedule.row_blocks)
        st.rows_source = rp.print_block(gpu_row_block(stages[k], *rows, block, /*warp=*/0));
      else
        st.rows_source = rp.print_rows(stages[k], *rows);
      if (rp.subgroup_) st.rows_needs.insert("subgroup_arithmetic");
      st.rows_work = rows->work;
      st.rows_extents = stages[k].extents;
      out.needs.insert(rp.needs_.begin(), rp.needs_.end());
    }
    // Shared-memory tiles, for matmul-like stages.
    std::optional<GpuBlockStage> block_tile =
        schedule.shared_tiles ? gpu_shared_tile(stages[k], schedule.tile_rows, schedule.tile_cols, block, 16,
                                                  schedule.max_shared_bytes)
                              : std::nullopt;
    if (block_tile) {
      StagePrinter bp(*p, features, out);
      st.shared_source = bp.print_block(*block_tile);
      st.shared_extents = block_tile->extents;
      st.shared_rows = block_tile->rows;
      st.shared_cols = block_tile->cols;
      st.shared_depth = block_tile->depth;
      st.shared_block = {block_tile->block_rows, block_tile->block_cols, block_tile->block_depth};
      out.needs.insert(bp.needs_.begin(), bp.needs_.end());
    }
    std::set<int64_t> reads, writes;
    tir::visit_stmts(stages[k].body, [&](const tir::Stmt& s) {
      if (const auto* store = tir::as<tir::StoreNode>(s); store && param.count(store->buffer.get()))
        writes.insert(param.at(store->buffer.get()));
    });
    tir::visit_exprs(stages[k].body, [&](const tir::TExpr& e) {
      if (const auto* load = tir::as<tir::LoadNode>(e); load && param.count(load->buffer.get()))
        reads.insert(param.at(load->buffer.get()));
    });
    st.reads.assign(reads.begin(), reads.end());
    st.writes.assign(writes.begin(), writes.end());
    out.stages.push_back(std::move(st));
  }
  return out;
}

}  // namespace relax::vulkan
